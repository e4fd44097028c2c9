"""The project protocol's evaluator with memory that does not grow with the number of clips.

A predictions file of a million clips (HowToGround1M's ``model_preds``) does not fit in memory as
Python objects (about 8x the file's size). Here the file is read one clip at a time
(:func:`formats.predictions.iter_prediction_file`) and every metric is reduced as clips stream by, in batches of
``batch_clips`` clips that keep the vectorised code of :mod:`metrics.grounding`:

* video level (AP50, mIoU, recall): each clip's value is added to a running sum as its batch ends;
* frame level: mIoU and recall are sums too; AP50 pools all frames, so each counted detection
  keeps a compact record (score, matched, clip position, frame, rank in its frame) and the
  precision/recall curve is computed once at the end, exactly as COCOeval ranks them;
* captions (BLEU, METEOR, ROUGE-L, CIDEr, CAPTURE are corpus-level) are kept as strings.

The results equal :func:`metrics.grounding.evaluate_grounding` on the whole set (a test checks
it on random cases). The ground truth is read whole (its readers are not streaming).

Predicted frames must lie on the clip's annotation grid (the GT record's ``frame_indices``): a
frame off it would be scored as a false positive of an unannotated frame, so a shifted file would
get AP50 0.0 without a word. ``off_grid="error"`` (default) names the clip and the frames;
``"nearest"`` maps each off-grid frame to the nearest annotated frame (the earlier on a tie) and
counts them in the report; two predicted frames landing on one annotated frame are an error.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from metrics.grounding import (
    LEVELS,
    METRICS,
    SCORE_SOURCES,
    FrameBoxes,
    GroundingInputError,
    _detections,
    _flatten,
    _grouped_average_precision,
    _miou_and_recall_parts,
)

__all__ = ["OFF_GRID_POLICIES", "GroundingAccumulator", "OffGridReport", "batched", "place_on_grid"]

OFF_GRID_POLICIES = ("error", "nearest")
MAX_EXAMPLES = 5


# ---------------------------------------------------------------- the annotation grid

@dataclass
class OffGridReport:
    """Predicted frames that were off their clip's annotation grid and were mapped onto it."""

    mapped_frames: int = 0
    clips: int = 0
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"mapped_frames": self.mapped_frames, "clips": self.clips, "examples": list(self.examples)}


def place_on_grid(key: str, frames: list[FrameBoxes], grid: Sequence[int], policy: str, source: str,
                  report: OffGridReport) -> list[FrameBoxes]:
    """``frames`` with every frame that holds boxes on the annotated ``grid`` (see the module docstring)."""
    grid_array = np.unique(np.asarray(grid, dtype=np.int64))
    on = set(grid_array.tolist())
    off = [f.frame for f in frames if f.frame not in on and len(f.labels)]
    if not off:
        return frames
    where = f"{source}, clip '{key}'"
    if policy == "error" or not len(grid_array):
        shown = ", ".join(map(str, off[:8])) + (f" and {len(off) - 8} more" if len(off) > 8 else "")
        annotated = ", ".join(map(str, grid_array[:8].tolist())) + (", ..." if len(grid_array) > 8 else "")
        raise GroundingInputError(
            f"{where}: {len(off)} predicted frame(s) with boxes are not on the clip's annotation grid: {shown} "
            f"(annotated frames: {annotated or 'none'}); 'frame' is the source-video frame index of an annotated "
            "frame. Fix the file, or map each to the nearest annotated frame with --off-grid nearest")
    out, taken = [], {}
    for f in frames:
        target = f.frame
        if f.frame not in on:
            if not len(f.labels):
                continue  # an empty frame off the grid scores nothing either way
            i = int(np.searchsorted(grid_array, f.frame))
            below = grid_array[max(i - 1, 0)]
            above = grid_array[min(i, len(grid_array) - 1)]
            target = int(below if abs(f.frame - below) <= abs(above - f.frame) else above)
        if target in taken:
            raise GroundingInputError(f"{where}: predicted frames {taken[target]} and {f.frame} both map to "
                                      f"annotated frame {target}; give one prediction per annotated frame")
        taken[target] = f.frame
        out.append(FrameBoxes(target, f.boxes, f.labels, f.scores) if target != f.frame else f)
    report.mapped_frames += len(off)
    report.clips += 1
    if len(report.examples) < MAX_EXAMPLES:
        report.examples.append(f"{where}: frames {off[:5]} mapped to the nearest annotated frames")
    return out


# ---------------------------------------------------------------- reducing metrics as clips pass

class GroundingAccumulator:
    """:func:`metrics.grounding.evaluate_grounding`, fed a batch of clips at a time.

    ``add(gt, pred, positions)``: ``gt``/``pred`` map the batch's clip keys to frames and
    ``positions`` gives each clip's place in the whole ground truth's order (which fixes how tied
    scores rank in frame-level AP50). ``result()`` gives the same dict as ``evaluate_grounding``.
    """

    def __init__(self, text_encoder=None, levels: Sequence[str] = LEVELS, score_source: str = "constant",
                 iou_threshold: float = 0.5, text_threshold: float = 0.5, max_dets: int = 100,
                 metrics: Sequence[str] = METRICS):
        if [l for l in levels if l not in LEVELS] or not levels:
            raise ValueError(f"levels must be a non-empty subset of {LEVELS}, got {tuple(levels)}")
        if [m for m in metrics if m not in METRICS]:
            raise ValueError(f"metrics must be a subset of {METRICS}, got {tuple(metrics)}")
        if score_source not in SCORE_SOURCES:
            raise ValueError(f"score_source must be one of {SCORE_SOURCES}, got {score_source!r}")
        if int(max_dets) < 1:
            raise ValueError(f"max_dets must be >= 1, got {max_dets}")
        if "recall" in metrics and (text_encoder is None or isinstance(text_encoder, (str, os.PathLike))):
            from metrics.text_encoder import build_text_encoder

            text_encoder = build_text_encoder(text_encoder)
        self.text_encoder, self.levels, self.score_source = text_encoder, tuple(levels), score_source
        self.iou_threshold, self.text_threshold = float(iou_threshold), float(text_threshold)
        self.max_dets, self.metrics = int(max_dets), tuple(metrics)
        self.sums = {name: [0.0, 0] for name in ("AP50", "mIoU", "recall", "mIoU_frame")}
        self.recall_matches, self.gt_boxes, self.gt_frames, self.pred_boxes = 0.0, 0, 0, 0
        self.videos, self.videos_excluded = 0, 0
        self.detections: list[tuple[np.ndarray, ...]] = []  # (score, matched, clip position, frame, rank)

    def _add_mean(self, name: str, values: np.ndarray) -> None:
        values = values[~np.isnan(values)]
        self.sums[name][0] += float(values.sum())
        self.sums[name][1] += len(values)

    def add(self, gt: Mapping[str, Sequence[FrameBoxes]], pred: Mapping[str, Sequence[FrameBoxes]],
            positions: np.ndarray) -> None:
        keys = list(gt)
        if not keys:
            return
        need_scores = "AP50" in self.metrics and self.score_source == "objectness"
        image_video, gt_boxes, pred_boxes = _flatten(gt, pred, keys, need_scores)
        n_images, n_videos = len(image_video), len(keys)
        boxes_per_video = np.bincount(image_video[gt_boxes.image], minlength=n_videos)
        self.videos += int((boxes_per_video > 0).sum())
        self.videos_excluded += int((boxes_per_video == 0).sum())
        self.gt_frames += len(np.unique(gt_boxes.image))
        self.gt_boxes += len(gt_boxes.image)
        self.pred_boxes += len(pred_boxes.image)
        if "AP50" in self.metrics:
            det_image, det_rank, det_score, tp = _detections(gt_boxes, pred_boxes, n_images, self.score_source,
                                                             self.iou_threshold, self.max_dets)
            if "video" in self.levels:
                n_gt = np.bincount(image_video[gt_boxes.image], minlength=n_videos)
                self._add_mean("AP50", _grouped_average_precision(image_video[det_image], det_score, det_image,
                                                                  det_rank, tp, n_gt))
            if "frame" in self.levels and len(det_image):
                # the image's (clip, frame): its place in the whole set's image order
                frame_of_image = self._image_frames(gt, pred, keys, image_video)
                self.detections.append((
                    None if self.score_source == "constant" else det_score.astype(np.float64),
                    tp.astype(bool), np.asarray(positions, dtype=np.int64)[image_video[det_image]].astype(np.int32),
                    frame_of_image[det_image].astype(np.int64), det_rank.astype(np.int32)))
        if "mIoU" in self.metrics or "recall" in self.metrics:
            parts = _miou_and_recall_parts(gt_boxes, pred_boxes, image_video, self.metrics, self.text_encoder,
                                           self.iou_threshold, self.text_threshold)
            if "mIoU" in parts:
                self._add_mean("mIoU", parts["mIoU"][0])
                self._add_mean("mIoU_frame", parts["mIoU"][1])
            if "recall" in parts:
                self._add_mean("recall", parts["recall"][0])
                self.recall_matches += parts["recall"][1]

    @staticmethod
    def _image_frames(gt, pred, keys, image_video) -> np.ndarray:
        """The frame index of each image of a batch (images are numbered in (clip, frame) order)."""
        frames = [sorted({f.frame for f in gt[k]} | {f.frame for f in pred.get(k, ())}) for k in keys]
        out = np.fromiter((f for fs in frames for f in fs), dtype=np.int64, count=sum(map(len, frames)))
        assert len(out) == len(image_video)
        return out

    def _frame_ap(self) -> float:
        if not self.gt_boxes:
            return math.nan
        if not self.detections:
            return 0.0
        parts = list(zip(*self.detections))
        matched = np.concatenate(parts[1])
        clip, frame, rank = np.concatenate(parts[2]), np.concatenate(parts[3]), np.concatenate(parts[4])
        score = np.ones(len(matched)) if parts[0][0] is None else np.concatenate(parts[0])
        image = clip.astype(np.int64) * (int(frame.max(initial=0)) + 1) + frame  # (clip, frame) order
        ap = _grouped_average_precision(np.zeros(len(matched), np.int64), score, image, rank, matched,
                                        np.array([self.gt_boxes]))
        return float(ap[0])

    def result(self, ignored_clips: int = 0) -> dict[str, float]:
        def mean(name):
            total, count = self.sums[name]
            return total / count if count else math.nan

        out: dict[str, float] = {}
        if "AP50" in self.metrics:
            if "video" in self.levels:
                out["AP50"] = mean("AP50")
            if "frame" in self.levels:
                out["AP50_frame"] = self._frame_ap()
        if "mIoU" in self.metrics:
            if "video" in self.levels:
                out["mIoU"] = mean("mIoU")
            if "frame" in self.levels:
                out["mIoU_frame"] = mean("mIoU_frame")
        if "recall" in self.metrics:
            if "video" in self.levels:
                out["recall"] = mean("recall")
            if "frame" in self.levels:
                out["recall_frame"] = self.recall_matches / self.gt_boxes if self.gt_boxes else math.nan
        out.update({"num_videos": float(self.videos), "num_videos_excluded": float(self.videos_excluded),
                    "num_gt_frames": float(self.gt_frames), "num_gt_boxes": float(self.gt_boxes),
                    "num_pred_boxes": float(self.pred_boxes), "num_pred_clips_ignored": float(ignored_clips)})
        return out


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch

