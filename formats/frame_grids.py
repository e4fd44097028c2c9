"""The frame grids clips are annotated and scored on, so readers and metrics cannot drift apart.

The 5-fps annotation grid of HowToGround1M / iGround (:func:`annotation_grid`): ``bboxes[i]`` of a
record is the i-th frame of ``range(start, end + 1, round(fps / 5))`` in source frames.

TubeDETR's VidSTG grid (:func:`tubedetr_frame_grid`), shared by the VidSTG reader (the frames a
record annotates) and the VidSTG metrics (the frames a sentence is scored on). TubeDETR (Yang et
al., "TubeDETR: Spatio-Temporal Video Grounding with Transformers", CVPR 2022) samples a
sentence's used segment ``[start, end)`` at 5 fps on an absolute grid: ``start``, then each frame
where ``int(f * 5 / fps)`` increases; a grid longer than 200 frames is subsampled to 200
(``grid[j * n // 200]``). Its evaluator scores the grid frames inside the ground-truth tube.
"""
from __future__ import annotations

import numpy as np

ANNOTATION_FPS = 5
SAMPLE_FPS = 5.0
MAX_FRAMES = 200


def annotation_step(fps: float) -> int:
    """Source-frame stride of the 5-fps annotation grid (at least 1)."""
    return max(1, int(round(float(fps) / ANNOTATION_FPS)))


def annotation_grid_length(fps: float, start: int, end: int) -> int:
    """``len(annotation_grid(fps, start, end))``, computed without building the grid (a damaged
    record's range of 10**12 frames would otherwise allocate terabytes)."""
    return max(0, (int(end) - int(start)) // annotation_step(fps) + 1)


def annotation_grid(fps: float, start: int, end: int) -> np.ndarray:
    """Source-frame indices of the annotated frames: ``range(start, end + 1, round(fps / 5))``."""
    return np.arange(int(start), int(end) + 1, annotation_step(fps), dtype=np.int64)


def tubedetr_frame_grid(fps: float, start: int, end: int, sample_fps: float = SAMPLE_FPS,
                        max_frames: int = MAX_FRAMES) -> np.ndarray:
    """TubeDETR's evaluation frames of ``[start, end)``: ``start``, then each frame where
    ``int(f * sample_fps / fps)`` increases; subsampled to ``max_frames`` when longer."""
    frames = np.arange(int(start), int(end), dtype=np.int64)
    if len(frames) == 0:
        return frames
    bucket = np.floor(frames * (sample_fps / fps)).astype(np.int64)
    grid = frames[np.concatenate([[True], bucket[1:] > bucket[:-1]])]
    if len(grid) > max_frames:
        grid = grid[(np.arange(max_frames) * len(grid)) // max_frames]
    return grid
