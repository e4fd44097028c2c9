"""A short video for long-video mode: a red square walking across a grey frame (10 fps, 96x64)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from formats.video_writer import write_video


def walking_square(path: Path, seconds: float = 20.0, fps: float = 10.0) -> Path:
    """``seconds`` of video: 8-s clips tile it as 0-8, 8-16 and, aligned to the end, 12-20 s."""
    n = int(round(seconds * fps))
    frames = np.full((n, 64, 96, 3), 40, dtype=np.uint8)
    for i in range(n):
        x = (2 * i) % 70
        frames[i, 20:40, x:x + 20] = (220, 40, 40)
    return write_video(path, frames, fps=fps)
