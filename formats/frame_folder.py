"""A frame folder read as a video: one image per frame, numbered (:class:`FrameFolderSource`)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import numpy as np

from formats.video_reader import IMAGE_SUFFIXES, VideoDecodeError, clamp_wanted_frames


class FrameFolderSource:
    """A folder holding one image per frame, e.g. ``000001.jpg, 000002.jpg, ...``.

    The frame number is the last integer in the file name. Frame index ``i`` is the file numbered
    ``i + index_offset``; the default ``index_offset=1`` reads the 1-based numbering that
    ``ffmpeg -i video.mp4 %06d.jpg`` writes, pass ``index_offset=0`` for 0-based folders. Numbers
    must be contiguous so that indices mean the same thing as in the video.
    """

    def __init__(self, folder: str | Path, index_offset: int = 1, fps: float | None = None):
        self.path = Path(folder)
        if not self.path.is_dir():
            raise FileNotFoundError(f"frame folder {self.path} does not exist")
        numbered = {}
        for p in self.path.iterdir():
            if p.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            digits = re.findall(r"\d+", p.stem)
            if digits:
                numbered[int(digits[-1])] = p
        if not numbered:
            raise VideoDecodeError(f"{self.path}: no numbered image files ({', '.join(IMAGE_SUFFIXES)})")
        numbers = np.array(sorted(numbered))
        if numbers[0] != index_offset:
            raise VideoDecodeError(
                f"{self.path}: frame numbering starts at {numbers[0]} but index_offset={index_offset}; "
                f"pass index_offset={numbers[0]} if that file is frame 0")
        gaps = np.nonzero(np.diff(numbers) != 1)[0]
        if gaps.size:
            raise VideoDecodeError(f"{self.path}: frame numbers jump from {numbers[gaps[0]]} to {numbers[gaps[0] + 1]}")
        self._files = [numbered[n] for n in numbers]
        self.index_offset = index_offset
        self.fps = fps
        self.num_frames = len(self._files)
        from PIL import Image

        try:
            with Image.open(self._files[0]) as im:
                self.width, self.height = im.size
        except OSError as err:
            raise VideoDecodeError(f"{self._files[0]}: cannot read image ({err})") from None

    def _load(self, index: int) -> np.ndarray:
        from PIL import Image

        path = self._files[index]
        try:
            with Image.open(path) as im:
                arr = np.asarray(im.convert("RGB"))
        except OSError as err:
            raise VideoDecodeError(f"{path}: cannot read image ({err})") from None
        if arr.shape[:2] != (self.height, self.width):
            raise VideoDecodeError(f"{path}: image is {arr.shape[1]}x{arr.shape[0]}, "
                                   f"the folder's first frame is {self.width}x{self.height}")
        return arr

    def read_frames(self, indices: Sequence[int]) -> np.ndarray:
        """Frames at ``indices`` (any order, repeats allowed; up to :data:`END_TOLERANCE` past the end
        = last frame), uint8 RGB."""
        requested, wanted = clamp_wanted_frames(indices, self.num_frames, str(self.path))
        if wanted.size == 0:
            return np.zeros((0, self.height, self.width, 3), dtype=np.uint8)
        loaded = np.stack([self._load(int(i)) for i in wanted])
        return loaded[np.searchsorted(wanted, requested)]

    def read_all(self) -> np.ndarray:
        return self.read_frames(range(self.num_frames))

    def close(self) -> None:
        pass

    def __enter__(self) -> "FrameFolderSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
