"""The project protocol's evaluator with memory that does not grow with the number of clips.

A predictions file of a million clips (HowToGround1M's ``model_preds``) does not fit in memory as
Python objects (about 8x the file's size). Here the file is read one clip at a time
(:func:`formats.predictions.iter_prediction_file`) and every metric is reduced as clips stream by, in batches of
``batch_clips`` clips that keep the vectorised code of :mod:`metrics.functional.grounding`:

* video level (AP50, mIoU, recall): each clip's value is added to a running sum as its batch ends;
* frame level: mIoU and recall are sums too; AP50 pools all frames, so each counted detection
  keeps a compact record (score, matched, clip position, frame, rank in its frame) and the
  precision/recall curve is computed once at the end, exactly as COCOeval ranks them;
* captions (BLEU, METEOR, ROUGE-L, CIDEr, CAPTURE are corpus-level) are kept as strings.

The results equal :func:`metrics.functional.grounding.evaluate_grounding` on the whole set (a test checks
it on random cases). The ground truth is read whole (its readers are not streaming).

Predicted frames must lie on the clip's annotation grid (the GT record's ``frame_indices``): a
frame off it would be scored as a false positive of an unannotated frame, so a shifted file would
get AP50 0.0 without a word. ``off_grid="error"`` (default) names the clip and the frames;
``"nearest"`` maps each off-grid frame to the nearest annotated frame (the earlier on a tie) and
counts them in the report; two predicted frames landing on one annotated frame are an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from metrics.functional.grounding import (
    FrameBoxes,
    GroundingInputError,
    GroundingSettings,
    GroundingState,
    grounding_compute,
    grounding_merge,
    grounding_update,
    resolve_text_encoder,
)
from metrics.phrase_vocabulary import PhraseVocabulary

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
    """:func:`metrics.functional.grounding.evaluate_grounding`, fed a batch of clips at a time.

    ``add(gt, pred, positions)``: ``gt``/``pred`` map the batch's clip keys to frames and
    ``positions`` gives each clip's place in the whole ground truth's order (which fixes how tied
    scores rank in frame-level AP50). ``result()`` gives the same dict as ``evaluate_grounding``.
    One phrase vocabulary serves every batch, so a phrase is embedded once per run.
    """

    def __init__(self, text_encoder=None, levels: Sequence[str] = ("video", "frame"), score_source: str = "constant",
                 iou_threshold: float = 0.5, text_threshold: float = 0.5, max_dets: int = 100,
                 metrics: Sequence[str] = ("AP50", "mIoU", "recall"), vocabulary: PhraseVocabulary | None = None):
        settings = GroundingSettings(tuple(levels), score_source, iou_threshold, text_threshold, max_dets,
                                     tuple(metrics))
        self.text_encoder = resolve_text_encoder(text_encoder) if "recall" in settings.metrics else text_encoder
        self.vocabulary = vocabulary
        self.state = GroundingState(settings)

    def add(self, gt: Mapping[str, Sequence[FrameBoxes]], pred: Mapping[str, Sequence[FrameBoxes]],
            positions: np.ndarray) -> None:
        grounding_merge(self.state, grounding_update(gt, pred, positions, settings=self.state.settings,
                                                     text_encoder=self.text_encoder, vocabulary=self.vocabulary))

    def result(self, ignored_clips: int = 0) -> dict[str, float]:
        return grounding_compute(self.state, ignored_clips)


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch

