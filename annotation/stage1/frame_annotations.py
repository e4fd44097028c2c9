"""What Stage 1 produces: per sampled frame, a caption and its grounded (phrase, box) pairs.

A :class:`ClipFrameAnnotations` travels between the stages (and between Ray workers, as plain
JSON-able dicts through :meth:`to_dict` / :meth:`from_dict`, which round-trip exactly).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from annotation.clips import ClipSpec
from annotation.stage3.trackers.box_tracking import Track


@dataclass
class FrameAnnotation:
    """Stage 1 output for one frame: ``phrases[i]`` grounds ``boxes[i]`` (pixel xyxy) with ``scores[i]``."""

    frame: int
    caption: str
    phrases: list[str]
    boxes: np.ndarray  # (n, 4) float32
    scores: np.ndarray  # (n,) float32

    def __post_init__(self):
        self.boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        self.scores = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        if not len(self.boxes) == len(self.scores) == len(self.phrases):
            raise ValueError(f"frame {self.frame}: {len(self.phrases)} phrases, {len(self.boxes)} boxes and "
                             f"{len(self.scores)} scores must match")


@dataclass
class ClipFrameAnnotations:
    """One decoded clip and its Stage 1 output. ``grid`` = every source frame of the 5-fps annotation grid."""

    spec: ClipSpec
    fps: float
    start_frame: int
    end_frame: int
    width: int
    height: int
    frames: list[FrameAnnotation] = field(default_factory=list)
    tracks: list | None = None  # tracker Stage 3 backends: one Track per key-frame box

    @property
    def key(self) -> str:
        return self.spec.key

    def to_dict(self) -> dict:
        return {
            "spec": self.spec.to_dict(), "fps": self.fps, "start_frame": self.start_frame,
            "end_frame": self.end_frame, "width": self.width, "height": self.height,
            "frames": [{"frame": f.frame, "caption": f.caption, "phrases": list(f.phrases),
                        "boxes": f.boxes.tolist(), "scores": f.scores.tolist()} for f in self.frames],
            "tracks": None if self.tracks is None else [t.to_dict() for t in self.tracks],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "ClipFrameAnnotations":
        frames = [FrameAnnotation(f["frame"], f["caption"], list(f["phrases"]), f["boxes"], f["scores"])
                  for f in data["frames"]]
        tracks = data.get("tracks")
        if tracks is not None:
            tracks = [Track.from_dict(t) for t in tracks]
        return cls(ClipSpec.from_dict(data["spec"]), data["fps"], data["start_frame"], data["end_frame"],
                   data["width"], data["height"], frames, tracks)
