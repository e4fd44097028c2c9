"""Checks that predicted boxes can be right before they are scored.

A box that cannot be right would otherwise bend the figures silently: AP ignores an inverted box
(``x2 < x1``) instead of counting it as a false positive, a label that is not a phrase of the
predicted caption grounds nothing the caption says, and a score outside ``[0, 1]`` is not a
probability. Per box, a prediction is invalid when

* ``boxes``: a coordinate is NaN or infinite; the box is inverted (``x2 < x1`` or ``y2 < y1``); or
  it lies far outside the frame: entirely outside it, or a coordinate more than one frame size
  outside it (models regress slightly past the border; that stays valid);
* ``labels``: the label is not one of the predicted caption's phrases (``phrases``, or the
  ``<p>`` tags of ``tagged_caption`` when ``phrases`` is absent);
* ``scores``: a score is NaN or outside ``[0, 1]``.

``masks``, where a frame carries them, must be a list parallel to ``boxes`` of COCO RLEs
(``{"size": [height, width], "counts": str}``, of the clip's frame size when it is known) or nulls;
anything else is an :class:`InvalidPredictionError` naming the clip, frame and mask under either
policy (a malformed file, not a box that can be wrong). A box dropped under ``skip`` takes its mask along.

``policy="error"`` (default) raises :class:`InvalidPredictionError` naming the source, clip, frame
and field; ``policy="skip"`` drops each invalid box (with its label and score) and counts it in a
:class:`ValidationReport`. Malformed structure (a frame without ``frame``, mismatched lengths) is
reported by :func:`metrics.functional.frame_boxes.frames_from_prediction` and never skipped.

Predicted frames must lie on the clip's annotation grid (the GT record's ``frame_indices``): a
frame off it would be scored as a false positive of an unannotated frame, so a shifted file would
get AP50 0.0 without a word. :func:`place_on_grid` with ``off_grid="error"`` (default) names the
clip and the frames; ``"nearest"`` maps each off-grid frame to the nearest annotated frame (the
earlier on a tie) and counts them in an :class:`OffGridReport`; two predicted frames landing on one
annotated frame are an error.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from formats.mask_rle import to_compressed
from formats.records import tagged_phrases
from metrics.functional.frame_boxes import FrameBoxes, GroundingInputError

INVALID_POLICIES = ("error", "skip")
OFF_GRID_POLICIES = ("error", "nearest")
FIELDS = ("boxes", "labels", "scores")
MAX_EXAMPLES = 20
MAX_GRID_EXAMPLES = 5


class InvalidPredictionError(GroundingInputError):
    """A predicted box that cannot be right; the message names the source, clip, frame and field."""


@dataclass
class ValidationReport:
    """What ``policy="skip"`` dropped: boxes per field (a box counts once, at its first failing field)."""

    skipped_boxes: int = 0
    by_field: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"skipped_boxes": self.skipped_boxes, "by_field": {f: int(self.by_field[f]) for f in FIELDS},
                "examples": list(self.examples)}


def predicted_phrases(prediction: Mapping[str, Any]) -> list[str] | None:
    """The predicted caption's phrases: ``phrases``, else the tags of ``tagged_caption``, else None."""
    if prediction.get("phrases") is not None:
        return [str(p) for p in prediction["phrases"]]
    if prediction.get("tagged_caption") is not None:
        return tagged_phrases(str(prediction["tagged_caption"]))
    return None


def _frame_problems(boxes: np.ndarray, labels: list, scores, phrases: set | None, size) -> list[tuple[str, str]]:
    """Per box: ``(field, reason)`` of its first problem, or ``("", "")`` when it is valid."""
    n = len(boxes)
    out = [("", "")] * n
    finite = np.isfinite(boxes).all(axis=1)
    with np.errstate(invalid="ignore"):
        inverted = finite & ((boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1]))
        far = np.zeros(n, dtype=bool)
        if size is not None:
            w, h = float(size[0]), float(size[1])
            limits_lo = np.array([-w, -h, -w, -h])
            limits_hi = np.array([2 * w, 2 * h, 2 * w, 2 * h])
            beyond = ((boxes < limits_lo) | (boxes > limits_hi)).any(axis=1)
            outside = (boxes[:, 2] < 0) | (boxes[:, 0] > w) | (boxes[:, 3] < 0) | (boxes[:, 1] > h)
            far = finite & ~inverted & (beyond | outside)
    bad_label = np.zeros(n, dtype=bool)
    if phrases is not None:
        bad_label = np.array([str(l) not in phrases for l in labels], dtype=bool)
    elif n:
        bad_label = np.ones(n, dtype=bool)
    bad_score = np.zeros(n, dtype=bool)
    if scores is not None:
        s = np.asarray(scores, dtype=np.float64).reshape(-1)
        bad_score = ~(np.isfinite(s) & (s >= 0.0) & (s <= 1.0))
    for i in np.flatnonzero(~finite | inverted | far | bad_label | bad_score).tolist():
        if not finite[i]:
            out[i] = ("boxes", f"non-finite coordinate in {boxes[i].tolist()}")
        elif inverted[i]:
            out[i] = ("boxes", f"inverted box {boxes[i].tolist()} (x2 < x1 or y2 < y1)")
        elif far[i]:
            out[i] = ("boxes", f"box {boxes[i].tolist()} lies far outside the {size[0]}x{size[1]} frame")
        elif bad_label[i]:
            why = (f"label {labels[i]!r} is not a phrase of the predicted caption {sorted(phrases)}"
                   if phrases is not None else "the prediction lists no 'phrases' (nor a 'tagged_caption')")
            out[i] = ("labels", why)
        else:
            out[i] = ("scores", f"score {float(np.asarray(scores, dtype=np.float64).reshape(-1)[i])} is not in [0, 1]")
    return out


def _check_numbers(scores, where: str) -> None:
    """``scores`` must be a list of numbers: anything else is malformed (never skipped), named by field."""
    values = scores if isinstance(scores, (list, tuple)) else None
    bad = None if values is not None else scores
    if values is not None:
        bad = next((v for v in values if isinstance(v, bool) or not isinstance(v, (int, float))), None)
    if values is None or bad is not None:
        raise InvalidPredictionError(f"{where}, field 'scores': expected a list of numbers (one objectness score "
                                     f"per box), found {bad!r}")


def _check_masks(masks: Any, n_boxes: int, size, where: str) -> None:
    """A frame's ``masks``: a list of ``n_boxes`` RLEs (of the frame size ``(width, height)`` when known) or nulls."""
    if not isinstance(masks, (list, tuple)) or len(masks) != n_boxes:
        got = f"{len(masks)} entries" if isinstance(masks, (list, tuple)) else type(masks).__name__
        raise InvalidPredictionError(f"{where}, field 'masks': must be a list parallel to boxes ({n_boxes}), got {got}")
    for j, mask in enumerate(masks):
        if mask is None:
            continue
        if not isinstance(mask, Mapping) or not isinstance(mask.get("counts"), str):
            raise InvalidPredictionError(f"{where}, field 'masks' [{j}]: a mask is a COCO RLE "
                                         "{'size': [height, width], 'counts': str} or null")
        try:
            height, width = (size[1], size[0]) if size is not None else (int(v) for v in mask["size"])
            to_compressed(mask, int(height), int(width), f"{where}, field 'masks' [{j}]")
        except (TypeError, ValueError, KeyError) as err:
            raise InvalidPredictionError(str(err) if "field 'masks'" in str(err)
                                         else f"{where}, field 'masks' [{j}]: {err}") from None


def validate_predictions(predictions: Mapping[str, Mapping[str, Any]], frame_sizes: Mapping[str, tuple] | None = None,
                         policy: str = "error", source: str = "<memory>"
                         ) -> tuple[dict[str, dict], ValidationReport]:
    """Check every predicted box; returns the predictions (invalid boxes dropped under ``skip``) and the report.

    ``frame_sizes`` maps a clip key to its ``(width, height)`` (from the GT record) for the
    far-outside test; clips without a size skip that test.
    """
    if policy not in INVALID_POLICIES:
        raise ValueError(f"invalid-prediction policy must be one of {INVALID_POLICIES}, got {policy!r}")
    report = ValidationReport()
    out: dict[str, dict] = {}
    for key, pred in predictions.items():
        frames = pred.get("frames") if isinstance(pred, Mapping) else None
        if not isinstance(frames, (list, tuple)):
            out[key] = pred  # structural problems are reported by frames_from_prediction
            continue
        phrases = predicted_phrases(pred)
        phrase_set = set(phrases) if phrases is not None else None
        size = (frame_sizes or {}).get(key)
        new_frames, changed = [], False
        for i, frame in enumerate(frames):
            if not isinstance(frame, Mapping):
                new_frames.append(frame)
                continue
            try:
                boxes = np.asarray(frame.get("boxes") or np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4)
            except (TypeError, ValueError):
                new_frames.append(frame)
                continue
            labels = list(frame.get("labels") or [])
            scores = frame.get("scores")
            where = f"{source}, clip '{key}', frame {frame.get('frame')} (frames[{i}])"
            if scores is not None:
                _check_numbers(scores, where)
            if len(labels) != len(boxes) or (scores is not None and len(scores) != len(boxes)):
                new_frames.append(frame)
                continue
            masks = frame.get("masks")
            if masks is not None:
                _check_masks(masks, len(boxes), size, where)
            problems = _frame_problems(boxes, labels, scores, phrase_set, size)
            bad = [j for j, (f, _) in enumerate(problems) if f]
            if not bad:
                new_frames.append(frame)
                continue
            if policy == "error":
                j = bad[0]
                raise InvalidPredictionError(f"{where}, field '{problems[j][0]}' [{j}]: {problems[j][1]} "
                                             "(or evaluate with the skip option to drop and count such boxes)")
            keep = [j for j in range(len(boxes)) if not problems[j][0]]
            for j in bad:
                report.skipped_boxes += 1
                report.by_field[problems[j][0]] += 1
                if len(report.examples) < MAX_EXAMPLES:
                    report.examples.append(f"{where}, field '{problems[j][0]}' [{j}]: {problems[j][1]}")
            kept = {**frame, "boxes": boxes[keep].tolist(), "labels": [labels[j] for j in keep]}
            if scores is not None:
                kept["scores"] = [scores[j] for j in keep]
            if masks is not None:
                kept["masks"] = [masks[j] for j in keep]
            new_frames.append(kept)
            changed = True
        out[key] = {**pred, "frames": new_frames} if changed else pred
    return out, report


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
        out.append(FrameBoxes(target, f.boxes, f.labels, f.scores, f.masks) if target != f.frame else f)
    report.mapped_frames += len(off)
    report.clips += 1
    if len(report.examples) < MAX_GRID_EXAMPLES:
        report.examples.append(f"{where}: frames {off[:5]} mapped to the nearest annotated frames")
    return out


# ---------------------------------------------------------------- masks

def carries_masks(prediction: Mapping[str, Any]) -> bool:
    """Whether any frame of a clip's prediction carries at least one mask (checked by
    :func:`validate_predictions`, which refuses a list not parallel to the boxes or an RLE not of the clip's
    frame size). A ``masks`` list holding only nulls carries none."""
    frames = prediction.get("frames") if isinstance(prediction, Mapping) else None
    return isinstance(frames, (list, tuple)) and any(
        isinstance(f, Mapping) and isinstance(f.get("masks"), (list, tuple))
        and any(m is not None for m in f["masks"]) for f in frames)


def names_masks(prediction: Mapping[str, Any]) -> bool:
    """Whether any frame of a clip's prediction has a ``masks`` field at all, null or not."""
    frames = prediction.get("frames") if isinstance(prediction, Mapping) else None
    return isinstance(frames, (list, tuple)) and any(isinstance(f, Mapping) and "masks" in f for f in frames)
