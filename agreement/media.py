"""Frames of a benchmark item's visual input: a clip sampled uniformly (the centre frame of each of
``num_frames`` equal segments), or an image as a one-frame video (VC-Inspector paper, section 4.1:
image benchmarks are read as single-frame videos). Decoded inputs are cached per visual."""
from __future__ import annotations

import io
from collections import OrderedDict
from pathlib import Path

import numpy as np
from PIL import Image

from agreement.benchmarks.items import Visual
from formats.video_files import open_video
from models.grove.frame_sampling import centre_frames


class FrameLoader:
    """``frames(visual) -> (T, H, W, 3)`` uint8, relative paths under ``root``; keeps ``cache`` inputs."""

    def __init__(self, root: str | Path = ".", num_frames: int = 8, cache: int = 256):
        if num_frames < 1:
            raise ValueError(f"num_frames must be >= 1, got {num_frames}")
        self.root = Path(root)
        self.num_frames = int(num_frames)
        self._cache: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._size = int(cache)

    def frames(self, visual: Visual) -> np.ndarray:
        key = visual.cache_key
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        frames = self._read(visual)
        self._cache[key] = frames
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return frames

    def _read(self, visual: Visual) -> np.ndarray:
        if visual.image_bytes is not None:
            return np.asarray(Image.open(io.BytesIO(visual.image_bytes)).convert("RGB"))[None]
        if visual.image is not None:
            path = self.root / visual.image
            if not path.is_file():
                raise FileNotFoundError(f"image {path} not found (media root {self.root})")
            return np.asarray(Image.open(path).convert("RGB"))[None]
        if visual.video is None:
            raise ValueError("a visual input needs a video, an image or image bytes")
        source = open_video(self.root, visual.video)
        try:
            total = source.num_frames
            start, end = 0, total - 1
            if visual.start_frame is not None:
                start, end = int(visual.start_frame), int(visual.end_frame)
            elif visual.start_s is not None and source.fps:
                start, end = int(visual.start_s * source.fps), int(np.ceil(visual.end_s * source.fps)) - 1
            start, end = max(0, min(start, total - 1)), max(0, min(end, total - 1))
            end = max(start, end)
            indices = start + centre_frames(end - start + 1, self.num_frames)
            return source.read_frames(indices)
        finally:
            source.close()
