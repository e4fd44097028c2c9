"""Re-score saved predictions at temporal-objectness thresholds 0.0-0.5 (GROVE paper, Figure 6).

The threshold only decides which predicted boxes are kept (objectness >= threshold), so one set of
predictions saved with every box and its score (``objectness_threshold=0.0``) gives the metrics at
any threshold without running the model again. Grounding is scored exactly as the evaluator does
(:func:`metrics.functional.grounding.evaluate_grounding` on the GT clips in key order), and AP50 and recall
are plotted against the threshold as in the paper's Figure 6.

    python cli.py test --config configs/demo.yaml --ckpt_path BEST.ckpt --model.init_args.objectness_threshold=0.0
    grove threshold-sweep --gt data/synthetic/annotations/test.json \
        --pred runs/demo/version_N/predictions_test.json --out runs/demo/version_N/threshold_sweep
"""
from __future__ import annotations

import core  # noqa: F401
from core.output_files import atomic_write

import csv
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from metrics.evaluator.prediction_validation import OffGridReport, place_on_grid
from metrics.functional.frame_boxes import FrameBoxes, frames_from_prediction, frames_from_record
from metrics.functional.grounding import evaluate_grounding

DEFAULT_THRESHOLDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
PLOTTED = ("AP50", "recall")
LEVELS = {"video": ("video",), "frame": ("frame",), "both": ("video", "frame")}
_EMPTY = {"caption": "", "phrases": [], "frames": []}


def keep_scored(frames: Sequence[FrameBoxes], threshold: float) -> list[FrameBoxes]:
    """The boxes with objectness ``>= threshold`` (frames without scores are kept whole)."""
    kept = []
    for f in frames:
        if f.scores is None:
            kept.append(f)
            continue
        idx = np.flatnonzero(f.scores >= threshold)
        kept.append(FrameBoxes(f.frame, f.boxes[idx], [f.labels[i] for i in idx], f.scores[idx]))
    return kept


def under_filtered_clips(records: Mapping[str, Any], predictions: Mapping[str, dict]) -> list[str]:
    """Clips predicted with fewer boxes than (phrases x annotated frames).

    At ``objectness_threshold=0`` the model keeps every phrase on every annotated frame, so a clip
    with fewer boxes was saved with a higher threshold: lower thresholds cannot be re-scored from it.
    """
    short = []
    for key, pred in predictions.items():
        if key in records:
            boxes = sum(len(f.get("boxes", [])) for f in pred.get("frames", []))
            if boxes < len(pred.get("phrases", [])) * len(records[key].bboxes):
                short.append(key)
    return sorted(short)


def threshold_sweep(records: Mapping[str, Any], predictions: Mapping[str, dict],
                    thresholds: Sequence[float] = DEFAULT_THRESHOLDS, text_encoder: Any = "minilm",
                    level: str = "both", score_source: str = "constant",
                    source: str = "<memory>", off_grid: str = "error") -> list[dict[str, float]]:
    """Grounding metrics at each threshold: one row ``{"threshold": t, "AP50": ..., "recall": ...}`` per t.

    ``records`` maps clip keys to GT records (as the evaluator), ``predictions`` is a predictions
    file's content with scores. Clips missing from the predictions count as empty; extra
    predicted clips are ignored (and counted). Predicted frames off a clip's annotation grid are
    refused, or mapped with ``off_grid="nearest"``, as by the evaluator
    (:func:`metrics.evaluator.prediction_validation.place_on_grid`).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {sorted(LEVELS)}, got {level!r}")
    keys = sorted(records)
    gt = {k: frames_from_record(records[k]) for k in keys}
    moved = OffGridReport()
    parsed = {k: place_on_grid(k, frames_from_prediction(predictions.get(k, _EMPTY), key=k, source=source),
                               records[k].frame_indices, off_grid, source, moved) for k in keys}
    ignored = sum(1 for k in predictions if k not in records)
    if text_encoder is None or isinstance(text_encoder, (str, Path)):
        from metrics.text_encoder import build_text_encoder

        text_encoder = build_text_encoder(text_encoder)  # built once, reused at every threshold
    rows = []
    for t in thresholds:
        pred = {k: keep_scored(frames, float(t)) for k, frames in parsed.items()}
        metrics = evaluate_grounding(gt, pred, text_encoder=text_encoder, levels=LEVELS[level],
                                     score_source=score_source)
        metrics["num_pred_clips_ignored"] = ignored
        rows.append({"threshold": float(t), **{k: float(v) for k, v in metrics.items()}})
    return rows


def write_curves_csv(curves: Mapping[str, Sequence[Mapping[str, Any]]], path: str | Path) -> Path:
    """All runs' rows as one CSV: ``run, threshold, <metrics...>``."""
    path = Path(path)
    columns = list(dict.fromkeys(c for rows in curves.values() for row in rows for c in row))
    with atomic_write(path, newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run", *columns])
        for name, rows in curves.items():
            for row in rows:
                writer.writerow([name, *(row.get(c, "") for c in columns)])
    return path


def markdown_rows(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str] = ("AP50", "recall", "mIoU")) -> str:
    shown = [m for m in metrics if any(m in r for r in rows)]
    lines = ["| threshold | " + " | ".join(f"{m} (x100)" for m in shown) + " |",
             "|---|" + "---|" * len(shown)]
    for r in rows:
        lines.append(f"| {r['threshold']:.2f} | " + " | ".join(f"{100 * r[m]:.1f}" for m in shown) + " |")
    return "\n".join(lines)


def plot_threshold_sweep(curves: Mapping[str, Sequence[Mapping[str, float]]], path: str | Path,
                         metrics: Sequence[str] = PLOTTED) -> Path:
    """One panel per metric (x100) against the threshold, one line per run (the paper's Figure 6)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for name, rows in curves.items():
            x = [r["threshold"] for r in rows]
            y = [100 * r[metric] for r in rows]
            ax.plot(x, y, marker="o", label=name)
        ax.set_xlabel("Temporal objectness threshold")
        ax.set_ylabel(f"{'Recall' if metric.startswith('recall') else metric} (x100)")
        ax.set_title(metric)
        ax.grid(alpha=0.3)
        if len(curves) > 1:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
