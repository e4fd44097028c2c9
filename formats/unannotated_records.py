"""Unannotated clip records: a stretch of a video file as a :class:`GroundedRecord` with no phrases.

Prediction runs (a folder of videos, a long video streamed by, the inference API) turn each clip
into such a record so it goes through exactly the evaluation preprocessing of an annotated clip:
its frames are the clip's 5-fps grid (:func:`formats.frame_grids.annotation_grid`), every frame has
an empty box list, and ``extra`` keeps the video's frame count.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from formats.frame_grids import annotation_grid
from formats.records import GroundedRecord
from formats.video_files import VideoInfo, probe_video


def unannotated_record(info: VideoInfo, start_frame: int | None = None, end_frame: int | None = None,
                       clip_id: str = "0") -> GroundedRecord:
    """The record of source frames ``start_frame .. end_frame`` (inclusive; default the whole video; an
    end past the last frame is the last frame) of the probed video ``info``, keyed
    ``f"{info.video_id}_{clip_id}"``."""
    start = 0 if start_frame is None else int(start_frame)
    end = info.num_frames - 1 if end_frame is None else min(int(end_frame), info.num_frames - 1)
    if not 0 <= start <= end:
        raise ValueError(f"start_frame {start_frame} / end_frame {end_frame}: need 0 <= start <= end < "
                         f"{info.num_frames} (the video's frames)")
    n = len(annotation_grid(info.fps, start, end))
    return GroundedRecord(
        video_fname=str(info.path.resolve()), video_id=info.video_id, clip_id=str(clip_id), fps=info.fps,
        clip_start_frame=start, clip_end_frame=end, width=info.width, height=info.height, caption="",
        tagged_caption="", phrases=[], bboxes=[np.zeros((0, 4), np.float32)] * n, labels=[[] for _ in range(n)],
        extra={"num_frames": info.num_frames})


def video_clip_record(video_path: str | Path, start_frame: int | None = None, end_frame: int | None = None,
                      w: int | None = None, h: int | None = None, video_fps: float | None = None) -> GroundedRecord:
    """:func:`unannotated_record` of the file ``video_path`` (probed here; its id is the file's stem).
    ``w``, ``h`` and ``video_fps``, when given, are checked against the file (an error naming both
    when they differ), as callers that already know the video's size and rate pass them."""
    path = Path(video_path)
    if not path.is_file():
        raise FileNotFoundError(f"video_path {path}: no such file")
    info = probe_video(path, path.stem)
    for name, given, found in (("w", w, info.width), ("h", h, info.height), ("video_fps", video_fps, info.fps)):
        if given is not None and abs(float(given) - float(found)) > 1e-3:
            raise ValueError(f"{name}={given} but {path} has {found}: leave it None (read from the file) or fix it")
    return unannotated_record(info, start_frame, end_frame)
