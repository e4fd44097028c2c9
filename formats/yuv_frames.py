"""Decoded frames as the YUV planes an MP4 of their size is encoded in (:class:`core.yuv_compositing.YuvFrame`).

The annotated MP4 is drawn in YUV (:mod:`core.yuv_compositing`): a decoded frame already in the
writer's pixel format is used as it is, its planes viewed in the decoder's own buffers (no copy, no
conversion); other formats (NV12, 10-bit, 4:2:2, 4:2:0 of an odd size) go through FFmpeg's scaler
once. RGB frames (frame folders) are converted as the H.264 writer converts RGB.
"""
from __future__ import annotations

from core.yuv_compositing import FULL_RANGE, YuvFrame

import av
import numpy as np


def yuv_format(width: int, height: int) -> str:
    """The writer's pixel format for a frame size: 4:2:0 (what every player handles) needs even sizes,
    odd ones are 4:4:4 so the frames keep their exact size."""
    return "yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p"


# formats whose planes are the writer's as they are (the "j" ones are full range, said by the tags)
_AS_IS = {"yuv420p": ("yuv420p", "yuvj420p"), "yuv444p": ("yuv444p", "yuvj444p")}


def _planes(frame: av.VideoFrame) -> list[np.ndarray]:
    return [np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, :p.width] for p in frame.planes]


def frame_yuv(frame: av.VideoFrame, quarter_turns: int = 0) -> YuvFrame:
    """``frame`` turned upright by ``quarter_turns`` (counter-clockwise, as ``np.rot90``), as the planes of
    :func:`yuv_format` for its upright size, with its colour tags. The planes are read-only views of
    the frame's buffers when its format is that one already."""
    turned = quarter_turns % 2
    fmt = yuv_format(frame.height if turned else frame.width, frame.width if turned else frame.height)
    full = frame.format.name.startswith("yuvj") or int(frame.color_range) == FULL_RANGE
    tags = dict(colorspace=int(frame.colorspace), color_range=FULL_RANGE if full else int(frame.color_range),
                color_primaries=int(frame.color_primaries), color_trc=int(frame.color_trc))
    if frame.format.name not in _AS_IS[fmt]:  # full range stays full: the "j" format says so to the scaler
        converted = frame.reformat(format=_AS_IS[fmt][1] if full else fmt)
        planes = [p.copy() for p in _planes(converted)]
    else:
        planes = _planes(frame)
    for p in planes:
        p.flags.writeable = False  # the decoder's memory (or a shared copy): never drawn on
    if quarter_turns % 4:
        planes = [np.rot90(p, quarter_turns) for p in planes]
    return YuvFrame(*planes, **tags)


class RgbToYuv:
    """``(H, W, 3)`` uint8 RGB frames -> :class:`YuvFrame` in :func:`yuv_format`, by FFmpeg's scaler
    from a zero-padded buffer of its own (the conversion may read a few bytes past a frame's last
    row; left unset they made the result differ from run to run)."""

    def __init__(self, width: int, height: int):
        self.width, self.height = int(width), int(height)
        self.format = yuv_format(self.width, self.height)
        self._rgb = np.zeros((self.height + 2, self.width, 3), dtype=np.uint8)

    def __call__(self, rgb: np.ndarray) -> YuvFrame:
        rgb = np.asarray(rgb)
        if rgb.shape != (self.height, self.width, 3) or rgb.dtype != np.uint8:
            raise ValueError(f"expected a {self.height}x{self.width} uint8 RGB frame, got {rgb.dtype} {rgb.shape}")
        self._rgb[:self.height] = rgb
        frame = av.VideoFrame.from_numpy_buffer(self._rgb[:self.height], format="rgb24").reformat(format=self.format)
        return YuvFrame(*[p.copy() for p in _planes(frame)])


__all__ = ["RgbToYuv", "frame_yuv", "yuv_format"]
