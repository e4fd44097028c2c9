"""Cutting a long video into clips while it streams: on the 5-fps grid, or at shot boundaries.

Clips hold ``clip_frames`` positions of the video's 5-fps grid. Within a run of grid frames with
no cut (a shot, or the whole video), clips tile the run and a last clip aligned to the run's end
covers any remainder, exactly as :func:`datamodules.video_folder.plan_clips` cuts a whole video,
so the grid mode gives the clips of ``cli.py predict``. In shot mode a cut closes the run: a clip
never straddles a shot boundary. Shot boundaries are PySceneDetect's content detector (HSV
difference between consecutive frames) applied to the grid frames as they stream by, so no
second pass over the video is needed; a decoding gap closes the run the same way.

The planner keeps only the last ``clip_frames`` grid frames, whatever the video's length.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from formats.frame_grids import annotation_step
from formats.unannotated_records import unannotated_record

if TYPE_CHECKING:
    from formats.records import GroundedRecord
    from formats.video_files import VideoInfo

SEGMENTERS = ("grid", "shots")


@dataclass
class PlannedClip:
    """A clip ready for the model: its grid frames (source indices), their pixels, and its shot."""

    index: int
    frames: np.ndarray
    pixels: list[np.ndarray]
    shot: int


def clip_record(info: VideoInfo, clip: PlannedClip) -> GroundedRecord:
    """The unannotated record of a planned clip: its grid frames, up to just before the next grid frame."""
    return unannotated_record(info, int(clip.frames[0]), int(clip.frames[-1]) + annotation_step(info.fps) - 1,
                              str(clip.index))


class ShotCutDetector:
    """PySceneDetect's ``ContentDetector`` fed one grid frame at a time; True where a new shot starts.

    ``threshold`` and ``min_shot_frames`` (in grid frames) are the detector's ``threshold`` and
    ``min_scene_len``.
    """

    def __init__(self, threshold: float = 27.0, min_shot_frames: int = 3, grid_fps: float = 5.0):
        from scenedetect import ContentDetector, FrameTimecode

        self._timecode = FrameTimecode
        self.detector = ContentDetector(threshold=threshold, min_scene_len=min_shot_frames)
        self.grid_fps = grid_fps
        self.position = 0

    def __call__(self, rgb: np.ndarray) -> bool:
        bgr = np.ascontiguousarray(rgb[..., ::-1])
        cuts = self.detector.process_frame(self._timecode(self.position, fps=self.grid_fps), bgr)
        self.position += 1
        return any(c.frame_num == self.position - 1 for c in cuts) and self.position > 1


class ClipPlanner:
    """Turns streamed grid frames into clips.

    Args:
        clip_frames: grid positions per clip (None: each run is one clip).
        cut: called on every grid frame; True starts a new shot (None: grid mode, no cuts).
        stride_frames: grid positions from one clip's start to the next (None: ``clip_frames``, tiled;
            fewer: overlapping clips, each emitted as soon as its last grid frame arrives).
    """

    def __init__(self, clip_frames: int | None, cut: Callable[[np.ndarray], bool] | None = None,
                 stride_frames: int | None = None):
        if clip_frames is not None and clip_frames < 1:
            raise ValueError(f"a clip needs at least one grid frame, got {clip_frames}")
        if stride_frames is not None and (clip_frames is None or not 1 <= stride_frames <= clip_frames):
            raise ValueError(f"a clip stride needs a clip length and 1..{clip_frames} grid frames, got {stride_frames}")
        self.clip_frames = clip_frames
        self.stride_frames = stride_frames or clip_frames
        self.cut = cut
        self.recent: deque[tuple[int, np.ndarray]] = deque(maxlen=clip_frames)
        self.whole: list[tuple[int, np.ndarray]] = []  # clip_frames None: the run so far
        self.pending = 0  # frames of the run not in an emitted clip yet
        self.run_length = 0
        self.shot = 0
        self.count = 0
        self.cuts: list[int] = []  # source frames where a new shot starts

    def _emit(self, frames: list[tuple[int, np.ndarray]]) -> PlannedClip:
        clip = PlannedClip(self.count, np.array([f for f, _ in frames], dtype=np.int64), [p for _, p in frames],
                           self.shot)
        self.count += 1
        return clip

    def push(self, index: int, pixels: np.ndarray) -> list[PlannedClip]:
        """Add the next grid frame; returns the clips it completes (a cut completes the previous run)."""
        out = []
        if self.cut is not None and self.cut(pixels) and self.run_length:
            out += self.close()
            self.shot += 1
            self.cuts.append(int(index))
        self.run_length += 1
        if self.clip_frames is None:
            self.whole.append((index, pixels))
            return out
        self.recent.append((index, pixels))
        self.pending += 1
        if self.pending >= self.stride_frames and len(self.recent) == self.clip_frames:
            out.append(self._emit(list(self.recent)))
            self.pending = 0
        return out

    def close(self) -> list[PlannedClip]:
        """End the current run (at a cut, a decoding gap or the video's end): its remainder as a last clip
        aligned to the run's end."""
        out = []
        if self.clip_frames is None and self.whole:
            out.append(self._emit(self.whole))
        elif self.pending:
            out.append(self._emit(list(self.recent)))  # the run's last min(run, clip_frames) frames
        self.recent.clear()
        self.whole = []
        self.pending = self.run_length = 0
        return out

    def gap(self) -> list[PlannedClip]:
        """A decoding gap: the run before it ends, and what follows is a new shot."""
        had_frames = self.run_length > 0
        out = self.close()
        self.shot += int(had_frames)
        return out
