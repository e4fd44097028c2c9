"""Region similarity J and contour accuracy F of video object segmentation, as the DAVIS 2017
evaluation computes them (Pont-Tuset et al., "The 2017 DAVIS Challenge on Video Object Segmentation";
the ``davis2017-evaluation`` code), and J&F = (J + F) / 2, the figure of referring video segmentation
benchmarks (Ref-YouTube-VOS, Ref-DAVIS, MeViS).

Conventions of the reference, kept exactly:

* J of a frame is the masks' IoU; a frame where both masks are empty scores 1.
* F of a frame compares 1-pixel boundary maps (a pixel is on the boundary when it differs from its
  right, lower or lower-right neighbour; in the last row only the right one counts, in the last
  column only the lower one, and the bottom-right pixel never is; past the right edge reads as
  background): a boundary pixel counts as matched when the other mask's boundary lies within a disk of
  radius ``ceil(bound_th * image diagonal)`` pixels (``bound_th`` itself when it is >= 1; default
  0.008). Precision over the predicted boundary, recall over the true one, F their harmonic mean
  (0 when both are 0). An empty predicted boundary has precision 1 and recall 0 against a non-empty
  true one, the reverse the other way round, and both empty give F = 1.
* Per object (or referring expression), a statistic over its frames: the mean (NaN frames left
  out) and the recall, the share of frames above 0.5. DAVIS's semi-supervised task leaves out the
  first and last frame of each sequence before this; referring benchmarks score every frame.

All frames of a clip are processed at once (``(T, H, W)`` arrays). The disk dilation is a union of
row dilations (one per disk row, each a difference of running sums along x), shifted by the row's
offset: ``2r + 1`` passes over the clip whatever the radius.
"""
from __future__ import annotations

import math

import numpy as np

BOUND_TH = 0.008


def _frames(masks: np.ndarray, name: str) -> np.ndarray:
    masks = np.asarray(masks).astype(bool)
    if masks.ndim == 2:
        masks = masks[None]
    if masks.ndim != 3:
        raise ValueError(f"{name} must be shaped (frames, height, width) or (height, width), got {masks.shape}")
    return masks


def _pair(truth, predicted) -> tuple[np.ndarray, np.ndarray]:
    truth, predicted = _frames(truth, "truth"), _frames(predicted, "predicted")
    if truth.shape != predicted.shape:
        raise ValueError(f"truth {truth.shape} and predicted {predicted.shape} masks differ in shape")
    return truth, predicted


def region_similarity(truth: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """J per frame ``(T,)``: IoU of the masks, 1 where both are empty."""
    truth, predicted = _pair(truth, predicted)
    inter = np.count_nonzero(truth & predicted, axis=(1, 2))
    union = np.count_nonzero(truth | predicted, axis=(1, 2))
    return np.where(union == 0, 1.0, inter / np.maximum(union, 1))


def boundary_map(masks: np.ndarray) -> np.ndarray:
    """1-pixel boundaries ``(T, H, W)``: where a pixel differs from its right, lower or lower-right
    neighbour (the edge rules of the module docstring)."""
    seg = _frames(masks, "masks")
    right, down, diag = np.zeros_like(seg), np.zeros_like(seg), np.zeros_like(seg)
    right[:, :, :-1] = seg[:, :, 1:]
    down[:, :-1, :] = seg[:, 1:, :]
    diag[:, :-1, :-1] = seg[:, 1:, 1:]
    out = (seg ^ right) | (seg ^ down) | (seg ^ diag)
    out[:, -1, :] = seg[:, -1, :] ^ right[:, -1, :]
    out[:, :, -1] = seg[:, :, -1] ^ down[:, :, -1]
    out[:, -1, -1] = False
    return out


def boundary_radius(height: int, width: int, bound_th: float = BOUND_TH) -> int:
    """The matching tolerance in pixels: ``bound_th`` itself when >= 1, else a share of the diagonal."""
    return int(bound_th) if bound_th >= 1 else int(math.ceil(bound_th * math.hypot(height, width)))


def dilate_disk(masks: np.ndarray, radius: int) -> np.ndarray:
    """``(T, H, W)`` masks dilated by the disk ``dx² + dy² <= radius²`` (nothing enters from outside the frame)."""
    masks = np.asarray(masks, dtype=bool)
    _, height, width = masks.shape
    # Running sums along x, padded by ``radius`` on both sides, so every window is two slices.
    running = np.zeros(masks.shape[:2] + (width + 2 * radius + 1,), dtype=np.int32)
    np.cumsum(masks, axis=2, out=running[:, :, radius + 1:radius + 1 + width])
    running[:, :, radius + 1 + width:] = running[:, :, radius + width:radius + 1 + width]
    rows: dict[int, np.ndarray] = {}
    out = np.zeros_like(masks)
    for dy in range(-radius, radius + 1):
        half = math.isqrt(radius * radius - dy * dy)  # the disk's half-width on this row
        if half not in rows:  # any pixel within [x - half, x + half] of the row
            rows[half] = (running[:, :, radius + half + 1:radius + half + 1 + width]
                          > running[:, :, radius - half:radius - half + width])
        if dy >= 0:
            out[:, :height - dy] |= rows[half][:, dy:]
        else:
            out[:, -dy:] |= rows[half][:, :height + dy]
    return out


def contour_accuracy(truth: np.ndarray, predicted: np.ndarray, bound_th: float = BOUND_TH) -> np.ndarray:
    """F per frame ``(T,)`` (see the module docstring for the conventions)."""
    truth, predicted = _pair(truth, predicted)
    radius = boundary_radius(truth.shape[1], truth.shape[2], bound_th)
    gt_b, fg_b = boundary_map(truth), boundary_map(predicted)
    gt_near, fg_near = dilate_disk(gt_b, radius), dilate_disk(fg_b, radius)
    n_fg = np.count_nonzero(fg_b, axis=(1, 2)).astype(np.float64)
    n_gt = np.count_nonzero(gt_b, axis=(1, 2)).astype(np.float64)
    fg_hit = np.count_nonzero(fg_b & gt_near, axis=(1, 2))
    gt_hit = np.count_nonzero(gt_b & fg_near, axis=(1, 2))
    # An empty boundary dilates to nothing, so the hits give the reference's empty-boundary cases:
    # none predicted -> precision 1, recall 0; none true -> precision 0, recall 1; neither -> 1, 1.
    precision = np.where(n_fg > 0, fg_hit / np.maximum(n_fg, 1), 1.0)
    recall = np.where(n_gt > 0, gt_hit / np.maximum(n_gt, 1), 1.0)
    total = precision + recall
    return np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1.0), 0.0)


def frame_statistics(values: np.ndarray) -> dict[str, float]:
    """DAVIS's statistics of one object's per-frame values: ``mean`` (NaN left out) and ``recall``
    (share of frames above 0.5)."""
    values = np.asarray(values, dtype=np.float64)
    if not len(values):
        return {"mean": math.nan, "recall": math.nan}
    finite = values[~np.isnan(values)]
    return {"mean": float(finite.mean()) if len(finite) else math.nan, "recall": float(np.mean(values > 0.5))}


def j_and_f(truth: np.ndarray, predicted: np.ndarray, bound_th: float = BOUND_TH) -> dict[str, float]:
    """One object's (or expression's) ``J``, ``F`` (means over its frames) and ``J&F``."""
    j = frame_statistics(region_similarity(truth, predicted))["mean"]
    f = frame_statistics(contour_accuracy(truth, predicted, bound_th))["mean"]
    return {"J": j, "F": f, "J&F": (j + f) / 2}


def dataset_j_and_f(per_object: list[dict[str, float]]) -> dict[str, float]:
    """Means over objects / expressions of their ``J`` and ``F``, and ``J&F`` = their mean (the figure
    the benchmarks report); NaN for no object."""
    if not per_object:
        return {"J": math.nan, "F": math.nan, "J&F": math.nan}
    j = float(np.mean([o["J"] for o in per_object]))
    f = float(np.mean([o["F"] for o in per_object]))
    return {"J": j, "F": f, "J&F": (j + f) / 2}


__all__ = ["BOUND_TH", "boundary_map", "boundary_radius", "contour_accuracy", "dataset_j_and_f", "dilate_disk",
           "frame_statistics", "j_and_f", "region_similarity"]
