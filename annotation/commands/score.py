"""``grove annotate score``: a pipeline output against ground truth, with the project's evaluator.

The records become predictions in the evaluator's format (every box scored 1, as the public
evaluator scores GT-style annotations), so the metric names are those of ``grove
evaluate``: AP50 / mIoU / recall (video and frame level), the caption metrics and CAPTURE.
By default only the clips the pipeline accepted are scored (the quality of the dataset it made),
with the accepted share reported beside; ``clips="all"`` scores rejected and missing clips as
empty predictions (the yield-weighted view).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from formats.records import read_records, records_by_key
from metrics.evaluator.evaluation import evaluate_predictions


def prediction_of(record) -> dict:
    """One record in the evaluator's prediction format (frames without boxes left out)."""
    frames = [{"frame": int(f), "boxes": b.tolist(), "labels": list(l)}
              for f, b, l in zip(record.frame_indices, record.bboxes, record.labels) if len(l)]
    return {"caption": record.caption, "tagged_caption": record.tagged_caption,
            "phrases": list(record.phrases), "frames": frames}


def annotations_folder(pred: str | Path) -> Path:
    """``OUT`` or ``OUT/annotations``."""
    pred = Path(pred)
    return pred / "annotations" if (pred / "annotations").is_dir() else pred


def score_output(pred: str | Path, truth: str | Path, clips: str = "accepted", text_encoder: str = "minilm",
                 caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                 capture: bool = True) -> dict:
    if clips not in ("accepted", "all"):
        raise ValueError(f"clips must be 'accepted' or 'all', got {clips!r}")
    truth_records = records_by_key(read_records(truth), truth)
    folder = annotations_folder(pred)
    predicted = records_by_key(read_records(folder), folder) if any(folder.glob("*.pkl")) else {}
    unknown = sorted(set(predicted) - set(truth_records))
    chosen = truth_records if clips == "all" else {k: v for k, v in truth_records.items() if k in predicted}
    if not chosen:
        raise ValueError(f"{folder}: no predicted clip is in the ground truth {truth}")
    report = evaluate_predictions(chosen, {k: prediction_of(v) for k, v in predicted.items() if k in chosen},
                                  text_encoder=text_encoder, caption_metrics=tuple(caption_metrics),
                                  capture=capture, pred_source=str(folder))
    report["coverage"] = {"truth_clips": len(truth_records), "accepted": len(set(predicted) & set(truth_records)),
                          "accepted_share": round(len(set(predicted) & set(truth_records)) / len(truth_records), 4),
                          "scored_clips": clips, "not_in_truth": unknown}
    return report
