"""The frames a masker needs: a clip's grid frames at the video's frame size, the size its pixel boxes
are in (the model itself saw them resized). Read again from the video when the batch does not carry them,
one clip at a time, so whole videos are never held for masks."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from formats.video_files import open_video


def fit_frames(frames: np.ndarray, width: int, height: int) -> np.ndarray:
    """``(N, h, w, 3)`` uint8 frames resized (bilinear) to ``(N, height, width, 3)`` when their size differs."""
    if frames.shape[1:3] == (height, width):
        return frames
    video = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float()
    video = F.interpolate(video, (height, width), mode="bilinear", align_corners=False)
    return video.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()


def read_clip_frames(video_root: str | Path, video_fname: str, frame_indices: Sequence[int], width: int,
                     height: int) -> np.ndarray:
    """``(N, height, width, 3)`` uint8: the source frames ``frame_indices`` of ``video_root / video_fname``
    (a file or a frame folder), at the clip record's frame size."""
    with open_video(video_root, video_fname) as video:
        frames = video.read_frames([int(i) for i in frame_indices])
    return fit_frames(frames, int(width), int(height))


__all__ = ["fit_frames", "read_clip_frames"]
