"""Alpha-blending an RGBA overlay onto video frames in the video's own YUV planes.

The annotated MP4 re-encodes every source frame with the predictions drawn in. Drawn in RGB, each
frame takes two colour conversions (the decoded YUV to RGB, the drawn RGB back to the encoder's YUV):
most of the MP4's CPU time on a small video, and a round trip that moves by a level or so pixels the
overlay never touches. The conversion is affine and 4:2:0 chroma stands for the mean of its 2x2 block,
so blending the overlay's own YUV into the planes, a chroma sample with the overlay's alpha-weighted
sum over its block, is the same blend up to rounding, and every pixel the overlay leaves transparent
keeps the decoder's value exactly.

The overlay's colours are converted with the luma weights and range the video is tagged with
(FFmpeg's ``AVColorSpace`` and ``AVColorRange`` values: ITU-R BT.601, BT.709, BT.2020, SMPTE 240M, FCC;
limited range, Y 16..235 and chroma 16..240, unless tagged full), BT.601 limited where untagged, as
FFmpeg's scaler assumes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

BT601 = (0.299, 0.114)
# AVColorSpace -> (Kr, Kb), the red and blue luma weights; anything else (unspecified, RGB) is BT.601
LUMA_WEIGHTS = {1: (0.2126, 0.0722), 4: (0.30, 0.11), 5: BT601, 6: BT601, 7: (0.212, 0.087),
                9: (0.2627, 0.0593), 10: (0.2627, 0.0593)}
FULL_RANGE = 2  # AVCOL_RANGE_JPEG
UNSPECIFIED = 2  # AVCOL_SPC / AVCOL_PRI / AVCOL_TRC_UNSPECIFIED


@dataclass
class YuvFrame:
    """One frame's 8-bit planes: ``y`` ``(H, W)``; ``u``, ``v`` ``(H, W)`` (4:4:4) or ``(H/2, W/2)``
    (4:2:0, even sizes), with the colour tags of the video they came from."""

    y: np.ndarray
    u: np.ndarray
    v: np.ndarray
    colorspace: int = UNSPECIFIED
    color_range: int = 0
    color_primaries: int = UNSPECIFIED
    color_trc: int = UNSPECIFIED

    @property
    def subsampled(self) -> bool:
        return self.u.shape != self.y.shape

    @property
    def tags(self) -> tuple[int, int, int, int]:
        return self.colorspace, self.color_range, self.color_primaries, self.color_trc


def rgb_to_yuv(rgb: np.ndarray, colorspace: int = UNSPECIFIED, color_range: int = 0) -> np.ndarray:
    """``(..., 3)`` 8-bit RGB -> ``(..., 3)`` float Y, U, V (0..255 scale, unrounded) under the tags."""
    kr, kb = LUMA_WEIGHTS.get(int(colorspace), BT601)
    e = np.asarray(rgb, dtype=np.float64) / 255.0
    luma = kr * e[..., 0] + (1.0 - kr - kb) * e[..., 1] + kb * e[..., 2]
    cb = (e[..., 2] - luma) / (2.0 * (1.0 - kb))
    cr = (e[..., 0] - luma) / (2.0 * (1.0 - kr))
    if int(color_range) == FULL_RANGE:
        return np.stack([255.0 * luma, 128.0 + 255.0 * cb, 128.0 + 255.0 * cr], axis=-1)
    return np.stack([16.0 + 219.0 * luma, 128.0 + 224.0 * cb, 128.0 + 224.0 * cr], axis=-1)


@dataclass
class YuvOverlay:
    """An RGBA overlay prepared for :func:`blend_yuv`: where it covers each plane, with what weight
    (``scale`` is full opacity: 255, or 4 x 255 for a 4:2:0 chroma sample's block) and its share of the
    sum (``paint``: colour x weight, plus half of ``scale`` for rounding)."""

    luma_at: np.ndarray
    luma_weight: np.ndarray
    luma_paint: np.ndarray
    chroma_at: np.ndarray
    chroma_weight: np.ndarray
    chroma_paint: np.ndarray  # (2, k): U, V
    chroma_scale: int


def prepare_overlay(overlay: np.ndarray, subsampled: bool, colorspace: int = UNSPECIFIED,
                    color_range: int = 0) -> YuvOverlay:
    """The ``(H, W, 4)`` uint8 overlay's shares of the blend for frames with these planes and tags."""
    height, width = overlay.shape[:2]
    alpha = overlay[..., 3].reshape(-1)
    at = np.flatnonzero(alpha)
    weight = alpha[at].astype(np.uint32)
    colour = np.clip(np.rint(rgb_to_yuv(overlay[..., :3].reshape(-1, 3)[at], colorspace, color_range)), 0, 255)
    colour = colour.astype(np.uint32)
    luma_paint = colour[:, 0] * weight + 127
    if not subsampled:
        return YuvOverlay(at, weight, luma_paint, at, weight, colour[:, 1:].T * weight + 127, 255)
    if height % 2 or width % 2:
        raise ValueError(f"4:2:0 planes need even frame sizes, got {width}x{height}")
    block = (at // width // 2) * (width // 2) + (at % width) // 2
    blocks = (height // 2) * (width // 2)
    total = np.bincount(block, weights=weight, minlength=blocks).astype(np.uint32)
    chroma_at = np.flatnonzero(total)
    paint = np.stack([np.bincount(block, weights=colour[:, c] * weight, minlength=blocks)[chroma_at]
                      for c in (1, 2)]).astype(np.uint32) + 2 * 255
    return YuvOverlay(at, weight, luma_paint, chroma_at, total[chroma_at], paint, 4 * 255)


def _blend_plane(plane: np.ndarray, at: np.ndarray, weight: np.ndarray, paint: np.ndarray, scale: int) -> None:
    flat = plane.reshape(plane.shape[0], -1)
    under = flat[:, at].astype(np.uint32)
    flat[:, at] = ((under * (scale - weight) + paint) // scale).astype(np.uint8)


def blend_yuv(y: np.ndarray, u: np.ndarray, v: np.ndarray, overlay: YuvOverlay) -> None:
    """Blend ``overlay`` into ``(N, H, W)`` luma and ``(N, h, w)`` chroma planes (C-contiguous uint8),
    in place: ``(plane * (scale - weight) + paint) // scale`` at the covered samples, the RGB
    compositing formula (:func:`core.drawing.composite`) on the overlay's YUV."""
    for plane in (y, u, v):
        if plane.dtype != np.uint8 or not plane.flags.c_contiguous or not plane.flags.writeable:
            raise ValueError("blend_yuv needs writable C-contiguous uint8 planes")
    if overlay.luma_at.size == 0:
        return
    _blend_plane(y, overlay.luma_at, overlay.luma_weight, overlay.luma_paint, 255)
    for plane, paint in zip((u, v), overlay.chroma_paint):
        _blend_plane(plane, overlay.chroma_at, overlay.chroma_weight, paint, overlay.chroma_scale)


def blend_frames(frames: Sequence[YuvFrame], overlay: np.ndarray,
                 out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``(N, ...)`` Y, U, V planes of ``frames`` (one video's: the first one's layout and tags
    hold for all) with the RGBA ``overlay`` blended in (:func:`blend_yuv`). The planes are copied into
    ``out`` (planes of at least ``N`` frames, reused by the caller) or new arrays; ``frames`` stay as
    they are."""
    first = frames[0]
    planes = tuple(np.stack([getattr(f, p) for f in frames], out=None if out is None else out[k][:len(frames)])
                   for k, p in enumerate("yuv"))
    blend_yuv(*planes, prepare_overlay(overlay, first.subsampled, first.colorspace, first.color_range))
    return planes


__all__ = ["YuvFrame", "YuvOverlay", "blend_frames", "blend_yuv", "prepare_overlay", "rgb_to_yuv"]
