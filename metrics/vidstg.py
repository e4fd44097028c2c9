"""VidSTG metrics (SPEC §5): m_vIoU, vIoU@0.3, vIoU@0.5 per sentence type, and the spatial-only
variant with the ground-truth temporal span.

TubeDETR's definition, on the frames of the evaluation grid (the record's 5-fps frames):
``vIoU = sum of IoU over frames in T_pred ∩ T_gt / |T_pred ∪ T_gt|``, where ``T_gt`` holds the
frames with a ground-truth box (the tube) and ``T_pred`` the frames with a predicted box;
``vIoU@t`` is the fraction of sentences with ``vIoU > t`` (strict). The spatial-only variant
(the GROVE paper's m_vIoU, "ground-truth temporal localisation") is the IoU averaged over the
``T_gt`` frames, a frame without a predicted box counting 0. Averages are taken per sentence type
(declarative / interrogative) and over all sentences.

Choices (documented): the predicted temporal span is the set of grid frames where the prediction
keeps a box (the objectness threshold decides; a model without objectness keeps every frame it is
given, so with clips cut to the GT tube T_pred is the tube and the two variants differ only where
the GT trajectory has no box on a frame of the tube). VidSTG has one
target per sentence, so in each frame the highest-scored predicted box is taken (the first on ties
or without scores), whatever its label. Predicted frames off the grid are ignored.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from core.box_ops import box_iou_pairwise
from metrics.prediction_set import PredictionSetMetric
from metrics.grounding import frames_from_prediction

SENTENCE_TYPES = ("declarative", "interrogative")
THRESHOLDS = (0.3, 0.5)


def _sentence_arrays(record, prediction: Mapping[str, Any] | None, source: str):
    """Per grid frame of one sentence: GT box/presence and the chosen predicted box/presence."""
    grid = record.frame_indices
    n = len(grid)
    gt_present = np.fromiter((len(b) > 0 for b in record.bboxes), dtype=bool, count=n)
    gt_box = np.zeros((n, 4))
    if gt_present.any():
        gt_box[gt_present] = np.stack([b[0] for b in record.bboxes if len(b)])
    pred_present = np.zeros(n, dtype=bool)
    pred_box = np.zeros((n, 4))
    if prediction is not None:
        frames = frames_from_prediction(prediction, key=record.key, source=source)
        with_boxes = [f for f in frames if len(f.boxes)]
        if with_boxes:
            frame_ids = np.array([f.frame for f in with_boxes])
            best = np.stack([f.boxes[0 if f.scores is None else int(np.argmax(f.scores))] for f in with_boxes])
            pos = np.searchsorted(grid, frame_ids)
            on_grid = (pos < n) & (grid[np.minimum(pos, n - 1)] == frame_ids)
            pred_present[pos[on_grid]] = True
            pred_box[pos[on_grid]] = best[on_grid]
    return gt_present, gt_box, pred_present, pred_box


def sentence_vious(records: Sequence, predictions: Mapping[str, Mapping[str, Any]],
                   source: str = "<memory>") -> tuple[np.ndarray, np.ndarray]:
    """``(vIoU, spatial vIoU)`` per record, in the order of ``records`` (missing prediction = none)."""
    parts = [_sentence_arrays(r, predictions.get(r.key), source) for r in records]
    if not parts:
        return np.zeros(0), np.zeros(0)
    sentence = np.repeat(np.arange(len(parts)), [len(p[0]) for p in parts])
    gt_present, gt_box, pred_present, pred_box = (np.concatenate([p[i] for p in parts]) for i in range(4))
    both = gt_present & pred_present
    iou = box_iou_pairwise(torch.from_numpy(pred_box), torch.from_numpy(gt_box)).numpy() * both
    m = len(parts)
    inter_sum = np.bincount(sentence, weights=iou, minlength=m)
    union = np.bincount(sentence, weights=(gt_present | pred_present).astype(float), minlength=m)
    tube = np.bincount(sentence, weights=gt_present.astype(float), minlength=m)
    return inter_sum / np.maximum(union, 1.0), inter_sum / np.maximum(tube, 1.0)


def evaluate_vidstg(records: Iterable | Mapping, predictions: Mapping[str, Mapping[str, Any]],
                    thresholds: Sequence[float] = THRESHOLDS, source: str = "<memory>") -> dict[str, float]:
    """VidSTG metrics of SPEC §3 predictions against VidSTG records (``extra['sentence_type']``).

    Keys: ``{type}_m_vIoU``, ``{type}_vIoU@{t}``, ``{type}_m_vIoU_gt_temporal``,
    ``{type}_vIoU@{t}_gt_temporal`` and ``num_{type}`` for type in declarative, interrogative
    and ``all``; fractions in [0, 1], NaN for a type with no sentence.
    """
    items = list(records.values() if isinstance(records, Mapping) else records)
    types = np.array([r.extra.get("sentence_type", "") for r in items])
    unknown = sorted(set(types.tolist()) - set(SENTENCE_TYPES))
    if unknown:
        raise ValueError(f"records with sentence_type {unknown}: expected one of {SENTENCE_TYPES} (VidSTG records)")
    viou, gt_viou = sentence_vious(items, predictions, source)
    out: dict[str, float] = {}
    for name, mask in [(t, types == t) for t in SENTENCE_TYPES] + [("all", np.ones(len(items), dtype=bool))]:
        count = int(mask.sum())
        mean = (lambda x: float(x[mask].mean())) if count else (lambda x: float("nan"))  # noqa: E731
        out[f"{name}_m_vIoU"] = mean(viou)
        for t in thresholds:
            out[f"{name}_vIoU@{t}"] = mean((viou > t).astype(float))
        out[f"{name}_m_vIoU_gt_temporal"] = mean(gt_viou)
        for t in thresholds:
            out[f"{name}_vIoU@{t}_gt_temporal"] = mean((gt_viou > t).astype(float))
        out[f"num_{name}"] = float(count)
    return out


class VidSTGMetric(PredictionSetMetric):
    """The VidSTG metrics as a torchmetrics ``Metric``: predictions in, :func:`evaluate_vidstg` out.

    The state is the predictions (SPEC §3 dicts serialised to bytes), gathered by concatenation
    under DDP; references (the DataModule's records) are set with :meth:`set_references`.
    """

    def __init__(self, thresholds: Sequence[float] = THRESHOLDS, **kwargs):
        super().__init__(**kwargs)
        self.thresholds = tuple(thresholds)
        self.references: dict[str, Any] = {}

    def set_references(self, references: Iterable | Mapping) -> None:
        items = references.values() if isinstance(references, Mapping) else references
        self.references = {r.key: r for r in items}



    def evaluate(self) -> dict[str, float]:
        preds = self.checked_predictions(self.references, unit="sentence")
        if not preds:
            return {}
        return evaluate_vidstg([self.references[k] for k in preds], preds, self.thresholds)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description="VidSTG evaluation: m_vIoU, vIoU@0.3/0.5 per sentence type.")
    parser.add_argument("--annotations", required=True, help="VidSTG file (VidSTG's own or TubeDETR's layout)")
    parser.add_argument("--vidor-annotations", default=None, help="VidOR annotation folder (VidSTG's own layout)")
    parser.add_argument("--segment", default="tube", choices=("tube", "used"),
                        help="the frames the predictions cover: the GT tube (default) or the used segment")
    parser.add_argument("--pred", required=True, help="predictions JSON (SPEC §3), keyed by sentence key")
    parser.add_argument("--out", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    from datamodules.vidstg import read_vidstg
    from metrics.evaluate import load_predictions

    records = read_vidstg(args.annotations, args.vidor_annotations, args.segment)
    preds = load_predictions(args.pred)
    known = {r.key for r in records}
    missing = sum(1 for k in known if k not in preds)
    report = evaluate_vidstg(records, preds, source=str(args.pred))
    for name, value in report.items():
        print(f"{name:<40} {value:.0f}" if name.startswith("num_") else f"{name:<40} {value:.4f}")
    if missing:
        print(f"sentences without a prediction (scored as empty): {missing}")
    ignored = sum(1 for k in preds if k not in known)
    if ignored:
        print(f"predicted sentences not in the annotations (ignored): {ignored}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"metrics": report, "missing_predictions": missing}, indent=2))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
