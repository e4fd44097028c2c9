"""Decode the frames Stage 1 looks at: every ``every``-th frame of a clip's 5-fps annotation grid.

Decoding goes through :func:`formats.video_files.open_video` (seeks to the GOPs holding the wanted
frames). A missing, unreadable or truncated video raises :class:`ClipUnreadable` naming the file,
which the engines turn into a skipped (and counted) clip.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from annotation.clips import ClipSpec
from formats.frame_grids import annotation_grid
from formats.video_files import open_video
from formats.video_reader import VideoDecodeError


class ClipUnreadable(RuntimeError):
    """The clip's video could not be opened or decoded."""


@dataclass
class DecodedClip:
    """Frames ``(N, H, W, 3)`` uint8 RGB at source-frame indices ``frame_indices``."""

    spec: ClipSpec
    fps: float
    start_frame: int
    end_frame: int
    width: int
    height: int
    frame_indices: np.ndarray
    frames: np.ndarray


def sampled_frames(fps: float, start: int, end: int, every: int = 1) -> np.ndarray:
    """Source-frame indices Stage 1 runs on: every ``every``-th frame of the 5-fps annotation grid."""
    return annotation_grid(fps, start, end)[::max(1, int(every))]


def decode_clip(videos: str | Path, spec: ClipSpec, every: int = 1) -> DecodedClip:
    """Open the clip's video and decode its sampled frames."""
    try:
        with open_video(videos, spec.video_fname) as source:
            fps = float(spec.fps or source.fps or 0.0)
            if fps <= 0:
                raise ClipUnreadable(f"{Path(videos) / spec.video_fname}: no frame rate (a frame folder "
                                     "needs the clip's fps from the ground truth)")
            num_frames = source.num_frames
            end = num_frames - 1 if spec.end_frame is None else int(spec.end_frame)
            if spec.start_frame > end:
                raise ClipUnreadable(f"{Path(videos) / spec.video_fname}: clip frames {spec.start_frame}..{end} "
                                     f"are empty (the video has {num_frames} frames)")
            indices = sampled_frames(fps, spec.start_frame, end, every)
            frames = source.read_frames(indices)
            width, height = source.width, source.height
    except (VideoDecodeError, FileNotFoundError, IndexError, OSError) as err:
        raise ClipUnreadable(str(err)) from None
    return DecodedClip(spec, fps, int(spec.start_frame), end, int(width), int(height), indices, frames)
