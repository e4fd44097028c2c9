"""Sparse segment sampling of a clip's annotated frames (GROVE paper, supp. C).

The annotated frames are split into T equal segments. Training draws one random frame per
segment and re-draws (a bounded number of times) until at least one object is visible in the
drawn frames; evaluation takes each segment's centre frame. Clips with fewer annotated frames
than T repeat frames, so every sample has exactly T frames. Randomness comes from a generator
seeded by (seed, epoch, sample index), so a sample is the same whatever the worker layout.
"""
from __future__ import annotations

import numpy as np


def segment_bounds(num_frames: int, num_segments: int) -> tuple[np.ndarray, np.ndarray]:
    """Half-open float bounds ``[start_i, end_i)`` of T equal segments over ``num_frames`` frames."""
    if num_frames < 1:
        raise ValueError(f"cannot sample from a clip with {num_frames} annotated frames")
    edges = np.linspace(0.0, float(num_frames), num_segments + 1)
    return edges[:-1], edges[1:]


def centre_frames(num_frames: int, num_segments: int) -> np.ndarray:
    """Index of each segment's centre frame (evaluation sampling)."""
    start, end = segment_bounds(num_frames, num_segments)
    return np.minimum(np.floor((start + end) / 2.0).astype(np.int64), num_frames - 1)


def sample_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """Generator for one sample of one epoch: independent of worker count and order."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch), int(index)])


def sample_segment_frames(
    num_frames: int,
    num_segments: int,
    train: bool,
    rng: np.random.Generator | None = None,
    visible: np.ndarray | None = None,
    max_redraws: int = 10,
) -> np.ndarray:
    """Pick one annotated-frame index per segment.

    Args:
        num_frames: annotated frames in the clip.
        num_segments: T.
        train: random frame per segment (True) or segment centres (False).
        rng: randomness for training draws.
        visible: optional ``(num_frames,)`` bool, True where at least one object has a box; a
            training draw with no visible frame is re-drawn up to ``max_redraws`` times.
    Returns:
        ``(T,)`` int64 indices into the clip's annotated frames, non-decreasing.
    """
    if not train:
        return centre_frames(num_frames, num_segments)
    if rng is None:
        raise ValueError("training sampling needs an rng (see sample_rng)")
    start, end = segment_bounds(num_frames, num_segments)
    lo = np.floor(start).astype(np.int64)
    # Segment i owns the frames [floor(start_i), floor(end_i)), at least one frame each; with
    # fewer frames than segments, neighbouring segments share a frame.
    hi = np.maximum(np.floor(end).astype(np.int64), lo + 1)
    draws = 1 + max(0, int(max_redraws)) if visible is not None and visible.any() else 1
    u = rng.random((draws, num_segments))
    candidates = np.minimum(lo + np.floor(u * (hi - lo)).astype(np.int64), num_frames - 1)
    if draws > 1:
        ok = np.asarray(visible, dtype=bool)[candidates].any(axis=1)
        row = int(np.argmax(ok)) if ok.any() else 0
        return candidates[row]
    return candidates[0]
