"""Offline evaluator: ``python -m metrics.evaluate --gt <annotations> --pred <predictions.json>``.

GT in any annotation layout the project reads (project JSON, one pickle of all records, a folder
of per-key pickles); predictions in SPEC §3 JSON. Clips missing from the predictions count as
empty predictions and are listed; predicted clips absent from the GT are listed and ignored.
Prints a table and optionally writes the report as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import core  # noqa: F401

from datamodules.records import read_records
from metrics.grounding import evaluate_grounding, frames_from_prediction, frames_from_record

LEVEL_CHOICES = {"video": ("video",), "frame": ("frame",), "both": ("video", "frame")}


def load_predictions(path: str | Path) -> dict[str, dict]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"predictions file {path} does not exist") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object mapping clip keys to predictions, got {type(data).__name__}")
    return data


def filter_by_objectness(pred: Mapping[str, Any], threshold: float) -> dict:
    """Drop boxes whose objectness score is below ``threshold`` (boxes without scores are kept)."""
    frames = []
    for frame in pred.get("frames", []):
        scores = frame.get("scores")
        if scores is None:
            frames.append(frame)
            continue
        keep = [i for i, s in enumerate(scores) if s >= threshold]
        frames.append({**frame, "boxes": [frame["boxes"][i] for i in keep],
                       "labels": [frame["labels"][i] for i in keep], "scores": [scores[i] for i in keep]})
    return {**pred, "frames": frames}


def evaluate_files(gt_path: str | Path, pred_path: str | Path, level: str = "both",
                   score_source: str = "constant", text_encoder: Any = "minilm",
                   caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                   capture: bool = True, objectness_threshold: float | None = None) -> dict[str, Any]:
    records = {r.key: r for r in read_records(gt_path)}
    preds = load_predictions(pred_path)
    return evaluate_predictions(records, preds, level, score_source, text_encoder, caption_metrics,
                                capture, objectness_threshold, pred_source=str(pred_path))


def distinct_share(captions: Sequence[str]) -> float:
    """Distinct captions / captions (whitespace- and case-normalised); 0 for no caption."""
    if not captions:
        return 0.0
    return len({" ".join(c.lower().split()) for c in captions}) / len(captions)


def evaluate_predictions(records: Mapping[str, Any], preds: Mapping[str, dict], level: str = "both",
                         score_source: str = "constant", text_encoder: Any = "minilm",
                         caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                         capture: bool = True, objectness_threshold: float | None = None,
                         pred_source: str = "<memory>") -> dict[str, Any]:
    """The evaluator on in-memory GT records (key -> record) and SPEC §3 predictions."""
    if level not in LEVEL_CHOICES:
        raise ValueError(f"level must be one of {sorted(LEVEL_CHOICES)}, got {level!r}")
    missing = sorted(k for k in records if k not in preds)
    extra = sorted(k for k in preds if k not in records)
    keys = sorted(records)
    empty = {"caption": "", "phrases": [], "frames": []}
    chosen = {k: preds.get(k, empty) for k in keys}
    if objectness_threshold is not None:
        chosen = {k: filter_by_objectness(p, objectness_threshold) for k, p in chosen.items()}
    if text_encoder is None or isinstance(text_encoder, (str, os.PathLike)):
        from metrics.text_encoder import build_text_encoder

        text_encoder = build_text_encoder(text_encoder)
    gt = {k: frames_from_record(records[k]) for k in keys}
    pred_frames = {k: frames_from_prediction(chosen[k], key=k, source=pred_source) for k in keys}
    results: dict[str, float] = dict(evaluate_grounding(gt, pred_frames, text_encoder=text_encoder,
                                                        levels=LEVEL_CHOICES[level], score_source=score_source))
    if caption_metrics:
        from metrics.captioning import evaluate_captions

        results.update(evaluate_captions({k: [records[k].caption] for k in keys},
                                         {k: chosen[k].get("caption", "") for k in keys}, metrics=caption_metrics))
    if caption_metrics or capture:
        # A model that ignores the video writes one caption for every clip and can still beat a
        # worse constant caption on METEOR/CIDEr: report how many captions are distinct.
        results["distinct_captions"] = distinct_share([chosen[k].get("caption", "") for k in keys])
    if capture:
        from metrics.capture import CaptureScorer

        scored = CaptureScorer(text_encoder=text_encoder).score(
            [chosen[k].get("caption", "") for k in keys], [[records[k].caption] for k in keys])
        results["CAPTURE"] = float(scored["CAPTURE"])
    return {"metrics": {k: float(v) for k, v in results.items()}, "num_clips": len(keys),
            "missing_predictions": missing, "ignored_predictions": extra,
            "settings": {"level": level, "score_source": score_source,
                         "objectness_threshold": objectness_threshold}}


def format_table(report: Mapping[str, Any]) -> str:
    rows = [(name, value) for name, value in report["metrics"].items()]
    width = max(len(n) for n, _ in rows) if rows else 10
    lines = [f"{'metric':<{width}}  value", f"{'-' * width}  ---------"]
    for name, value in rows:
        shown = f"{value:.0f}" if name.startswith("num_") else f"{value:.4f}"
        lines.append(f"{name:<{width}}  {shown}")
    lines.append(f"clips evaluated: {report['num_clips']}")
    if report["missing_predictions"]:
        lines.append(f"missing from predictions (scored as empty): {len(report['missing_predictions'])}: "
                     + ", ".join(report["missing_predictions"][:20]))
    if report["ignored_predictions"]:
        lines.append(f"predicted clips not in the GT (ignored): {len(report['ignored_predictions'])}: "
                     + ", ".join(report["ignored_predictions"][:20]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gt", required=True, help="annotation file or folder (JSON, pickle, per-key pickles)")
    parser.add_argument("--pred", required=True, help="predictions JSON (SPEC §3)")
    parser.add_argument("--level", default="both", choices=sorted(LEVEL_CHOICES))
    parser.add_argument("--score-source", default="constant", choices=("constant", "objectness"))
    parser.add_argument("--text-encoder", default="minilm", help="'minilm', 'exact' or a local HF encoder folder")
    parser.add_argument("--caption-metrics", default="BLEU-4,METEOR,ROUGE-L,CIDEr",
                        help="comma-separated; empty to skip (METEOR and the tokenizer need Java)")
    parser.add_argument("--no-capture", action="store_true", help="skip CAPTURE")
    parser.add_argument("--objectness-threshold", type=float, default=None,
                        help="drop predicted boxes scored below this before evaluating")
    parser.add_argument("--out", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    report = evaluate_files(args.gt, args.pred, args.level, args.score_source, args.text_encoder,
                            tuple(m for m in args.caption_metrics.split(",") if m), not args.no_capture,
                            args.objectness_threshold)
    print(format_table(report))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
        print(f"report written to {args.out}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
