"""Unannotated videos for prediction: any files, of any size, frame rate and length.

A video is cut into clips on its own 5-fps grid (source frames ``0, s, 2s, ...`` with
``s = round(fps / 5)``, as the annotations count them). By default a clip is 8 s, the length
GROVE was trained on: the caption comes from T frames spread over one clip, and every grid frame of
a clip is held in memory at once, so a whole long video as one clip would give a vague caption and
need gigabytes. ``clip_seconds=None`` takes the whole video as one clip. Clips tile the video
(``stride = clip length``); the last one is aligned to the video's end, so every grid frame belongs
to at least one full-length clip.

Each clip becomes an unannotated :class:`GroundedRecord` (no phrases, empty boxes) so that it goes
through exactly the training preprocessing of :class:`GroundedClipDataset`. Its key is
``f"{video_id}_{clip_index}"``; ``video_id`` is the file's stem (made unique with its folders when
two files share a stem). A file that cannot be opened is not an error: it becomes an item that
yields only a ``skipped`` entry (path and reason), reported at the end of the run.
"""
from __future__ import annotations

import glob
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from datamodules.grounded_dataset import GroundedClipDataset
from formats.frame_grids import annotation_grid, annotation_step
from formats.records import GroundedRecord
from formats.unannotated_records import unannotated_record
from formats.video_files import VideoInfo, probe_video
from formats.video_reader import VideoDecodeError
from models.grove.clip_processing import clip_sample, evaluation_positions

log = logging.getLogger(__name__)

# What a folder is searched for; a file named directly (or by a glob) is tried whatever its suffix.
VIDEO_FILE_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".avi", ".m4v", ".mpg", ".mpeg")
_GLOB_CHARS = set("*?[")


def list_videos(spec: str | Path, key: str = "data.videos") -> list[Path]:
    """The video files named by ``spec``: a file, a folder (its video files) or a glob pattern."""
    text = str(spec)
    path = Path(text).expanduser()
    if any(c in text for c in _GLOB_CHARS) and not path.exists():
        found = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
        files = [p for p in found if p.is_file()]
    elif path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_FILE_SUFFIXES)
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"{key}: {text!r} is neither a file, a folder nor a glob pattern that matches")
    if not files:
        what = f"video files ({', '.join(VIDEO_FILE_SUFFIXES)})" if path.is_dir() else "files"
        raise FileNotFoundError(f"{key}: no {what} found for {text!r}")
    return files


def video_ids(paths: Sequence[Path]) -> list[str]:
    """File stems, made unique where two files share one by prefixing their folders ('a__b__clip')."""
    stems = [p.stem for p in paths]
    repeated = {s for s, n in Counter(stems).items() if n > 1}
    if not repeated:
        return stems
    resolved = [p.resolve() for p in paths]
    common = Path(os.path.commonpath([str(p.parent) for p in resolved]))
    ids = []
    for p, stem in zip(resolved, stems):
        if stem in repeated:
            rel = p.relative_to(common).with_suffix("")
            ids.append("__".join(rel.parts))
        else:
            ids.append(stem)
    return ids


def probe_videos(videos: str | Path, on_error: str = "skip") -> tuple[list[VideoInfo], list[tuple[str, str]]]:
    """The headers of the videos :func:`list_videos` finds, and ``(path, reason)`` of each file that
    could not be opened (``on_error="raise"`` raises instead)."""
    paths = list_videos(videos)
    infos: list[VideoInfo] = []
    unreadable: list[tuple[str, str]] = []
    for path, video_id in zip(paths, video_ids(paths)):
        try:
            infos.append(probe_video(path, video_id))
        except (VideoDecodeError, OSError) as err:
            if on_error == "raise":
                raise
            unreadable.append((str(path), f"{type(err).__name__}: {err}"))
    return infos, unreadable


def plan_clips(num_grid_frames: int, clip_frames: int | None,
               stride_frames: int | None = None) -> list[tuple[int, int]]:
    """Half-open ``(start, stop)`` ranges of grid positions, one per clip.

    Clips start every ``stride_frames`` (default: ``clip_frames``, a tiling); a last clip aligned
    to the end covers any remainder, so all clips have ``clip_frames`` positions (or the whole
    grid when it is shorter) and together they cover every position.
    """
    if num_grid_frames < 1:
        raise ValueError(f"a video needs at least one grid frame, got {num_grid_frames}")
    if clip_frames is None or clip_frames >= num_grid_frames:
        return [(0, num_grid_frames)]
    stride = clip_frames if stride_frames is None else stride_frames
    if not 1 <= stride <= clip_frames:
        raise ValueError(f"the clip stride ({stride} grid frames) must be between 1 and the clip length "
                         f"({clip_frames}), or grid frames between clips would get no prediction")
    starts = list(range(0, num_grid_frames - clip_frames + 1, stride))
    if starts[-1] + clip_frames < num_grid_frames:
        starts.append(num_grid_frames - clip_frames)
    return [(s, s + clip_frames) for s in starts]


def seconds_to_grid_frames(seconds: float | None, fps: float) -> int | None:
    """Duration in seconds -> number of positions on the video's 5-fps grid (at least 1)."""
    if seconds is None:
        return None
    if seconds <= 0:
        raise ValueError(f"clip durations must be positive, got {seconds} s")
    return max(1, int(round(seconds * fps / annotation_step(fps))))


def clip_records(info: VideoInfo, clip_seconds: float | None = 8.0,
                 stride_seconds: float | None = None) -> list[GroundedRecord]:
    """Unannotated records of a video's clips (``extra`` keeps the video's frame count)."""
    step = annotation_step(info.fps)
    grid = annotation_grid(info.fps, 0, info.num_frames - 1)
    clips = plan_clips(len(grid), seconds_to_grid_frames(clip_seconds, info.fps),
                       seconds_to_grid_frames(stride_seconds, info.fps))
    # the clip's last frame lies just before the next grid frame, so its grid is grid[start:stop]
    return [unannotated_record(info, int(grid[start]), None if stop == len(grid) else int(grid[stop - 1]) + step - 1,
                               str(index))
            for index, (start, stop) in enumerate(clips)]


class VideoFolderDataset(GroundedClipDataset):
    """Clips of unannotated video files, preprocessed as evaluation clips (every grid frame).

    Items ``0 .. len(records) - 1`` are clips; the items after them stand for files that could
    not be opened and yield only ``{"skipped": [(path, reason)]}`` (the collate drops them and
    passes the entry on to the batch). With ``on_error="raise"`` such a file raises instead.

    With ``video_frames`` (set by :class:`callbacks.annotated_video_writer.AnnotatedVideoWriter`
    before prediction starts), a clip's whole span of source frames is decoded, in one forward
    pass, and the sample carries it (``video_frames``: the YUV planes of the frames from ``video_first``
    on, :meth:`decode_span`) beside the grid frames taken from it, also at the video's size
    (``source_frames``, for a masker): the one decode of a clip serves the model, the masker and the
    annotated MP4. The grid frames are the ones a read of the grid alone gives.

    Attributes:
        videos: the readable videos, in order.
        unreadable: ``(path, reason)`` of each file that could not be opened.
    """

    def __init__(self, videos: str | Path, clip_seconds: float | None = 8.0,
                 stride_seconds: float | None = None, on_error: str = "skip", video_frames: bool = False,
                 **dataset_kwargs: Any):
        self.video_frames = video_frames
        self.videos, self.unreadable = probe_videos(videos, on_error)
        records = [r for info in self.videos for r in clip_records(info, clip_seconds, stride_seconds)]
        # records carry absolute paths: the root only has to make ``root / video_fname`` that path
        super().__init__(records, video_root=Path("/"), train=False, all_frames=True, on_error=on_error,
                         **dataset_kwargs)
        log.info("data.videos: %d video(s), %d clip(s), %d unreadable", len(self.videos), len(records),
                 len(self.unreadable))

    def __len__(self) -> int:
        return len(self.records) + len(self.unreadable)

    def __getitem__(self, item) -> dict[str, Any]:
        index = item[0] if isinstance(item, tuple) else item
        if index >= len(self.records):
            return {"skipped": [self.unreadable[index - len(self.records)]]}
        return super().__getitem__(item)

    def load(self, record: GroundedRecord, rng) -> dict[str, Any]:
        if not self.video_frames:
            return super().load(record, rng)
        first, last = int(record.clip_start_frame), int(record.clip_end_frame)
        positions, caption_positions = evaluation_positions(len(record.frame_indices), self.num_frames)
        grid, span = self.decode_span(record, np.arange(first, last + 1), record.frame_indices[positions] - first)
        sample = clip_sample(record, grid, positions, caption_positions, self.global_image_size, self.global_resize,
                             self.grounding_image_size, self.grounding_resize)
        return {**sample, "video_frames": span, "video_first": first, "source_frames": grid}
