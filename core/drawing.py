"""Drawing predicted boxes and captions onto frames: one place for every picture the project makes.

The annotated MP4s of ``predict`` runs, the validation clips drawn to TensorBoard and the web demo
all draw with these helpers, so a phrase looks the same everywhere: one palette colour per phrase
(in order of first appearance), a labelled outline per box, and the caption in a band at the
bottom. Drawing goes into an RGBA overlay with PIL, which is then alpha-blended onto any number of
frames at once (:func:`composite`).

A box may come with a segmentation mask (boolean, the frame's size): it is filled translucent in
the box's colour with a thin opaque contour (:func:`mask_layer`, numpy over the whole frame), and
lies under the boxes, labels and caption band (:func:`over`). Without masks the overlay holds the
boxes, labels and caption alone.
"""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from typing import Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

# Distinct, saturated colours (a phrase's colour is its order of first appearance in the caption).
PALETTE = (
    (230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240),
    (240, 50, 230), (210, 245, 60), (255, 225, 25), (0, 128, 128), (170, 110, 40), (128, 0, 0),
)
LABEL_ALPHA = 210
CAPTION_ALPHA = 160
MASK_ALPHA = 110  # a mask's fill: the frame stays readable under it


def phrase_colours(phrases: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """One palette colour per distinct phrase, in order of first appearance."""
    distinct = list(OrderedDict.fromkeys(phrases))
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(distinct)}


@lru_cache(maxsize=16)
def load_font(size: int) -> ImageFont.ImageFont:
    """PIL's built-in scalable font at ``size`` px (its bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ValueError, OSError):
        return ImageFont.load_default()


def default_sizes(width: int, height: int) -> tuple[int, int]:
    """Line width and font size that stay readable from thumbnails to 4K."""
    short = min(width, height)
    return max(1, round(short / 160)), max(9, round(short / 26))


def _text_size(font, text: str) -> tuple[int, int]:
    left, top, right, bottom = font.getbbox(text or " ")
    return right - left, bottom - top


def wrap_caption(text: str, font, max_width: int) -> list[str]:
    """Greedy word wrap to ``max_width`` pixels (a single over-long word is cut by characters)."""
    lines: list[str] = []
    for word in text.split():
        candidate = f"{lines[-1]} {word}" if lines else word
        if lines and _text_size(font, candidate)[0] <= max_width:
            lines[-1] = candidate
            continue
        while _text_size(font, word)[0] > max_width and len(word) > 1:
            cut = max(1, int(len(word) * max_width / max(1, _text_size(font, word)[0])))
            lines.append(word[:cut])
            word = word[cut:]
        lines.append(word)
    return lines


def ink(colour: tuple[int, int, int]) -> tuple[int, int, int, int]:
    """Black or white text, whichever reads better on ``colour``."""
    luma = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
    return (0, 0, 0, 255) if luma > 140 else (255, 255, 255, 255)


@lru_cache(maxsize=32)
def caption_band(width: int, height: int, caption: str, font_size: int, max_caption_lines: int = 3) -> Image.Image:
    """RGBA image of the frame's size holding only the caption band (transparent without a caption).

    Word wrapping measures every word with the font, the costliest part of drawing a frame, and a
    clip's caption is the same on all its frames: the band is laid out once per caption and size
    (callers draw on a copy)."""
    image = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    if not caption:
        return image
    draw = ImageDraw.Draw(image)
    font = load_font(font_size)
    _, th = _text_size(font, "Ag")
    pad = max(2, th // 3)
    lines = wrap_caption(caption, font, width - 2 * pad)
    if len(lines) > max_caption_lines:
        lines = lines[:max_caption_lines - 1] + [lines[max_caption_lines - 1] + " ..."]
    band = len(lines) * (th + pad) + pad
    draw.rectangle([0, height - band, width, height], fill=(0, 0, 0, CAPTION_ALPHA))
    for i, line in enumerate(lines):
        top = font.getbbox(line)[1]
        draw.text((pad, height - band + pad + i * (th + pad) - top), line, fill=(255, 255, 255, 255), font=font)
    return image


def render_overlay(width: int, height: int, boxes: np.ndarray, labels: Sequence[str],
                   colours: Mapping[str, tuple[int, int, int]], caption: str | None = None,
                   line_width: int | None = None, font_size: int | None = None,
                   max_caption_lines: int = 3, scores: Sequence[float] | None = None,
                   masks: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
    """RGBA ``(height, width, 4)`` uint8 overlay: labelled pixel-xyxy boxes and a caption band.

    ``scores`` (one per box) are written after each label with two decimals. ``masks`` (one per box,
    a boolean ``(height, width)`` array or None) are drawn under everything else (:func:`mask_layer`)."""
    auto_line, auto_font = default_sizes(width, height)
    line_width = line_width or auto_line
    font = load_font(font_size or auto_font)
    # the caption first, so that boxes reaching into the band stay whole
    image = caption_band(width, height, caption or "", font_size or auto_font, max_caption_lines).copy()
    draw = ImageDraw.Draw(image)
    texts = list(labels) if scores is None else [f"{label} {score:.2f}" for label, score in zip(labels, scores)]
    for box, label, text in zip(np.asarray(boxes, dtype=np.float64).reshape(-1, 4), labels, texts):
        colour = colours.get(label, PALETTE[0])
        x1, y1, x2, y2 = (float(v) for v in box)
        draw.rectangle([x1, y1, max(x1, x2 - 1), max(y1, y2 - 1)], outline=(*colour, 255), width=line_width)
        tw, th = _text_size(font, text)
        pad = max(1, th // 4)
        ty = y1 - th - 2 * pad if y1 - th - 2 * pad >= 0 else y1  # above the box, or inside at the top
        tx = min(max(0.0, x1), max(0.0, width - tw - 2 * pad))
        # PIL rectangles include their end pixels: stop one short so the label ends where the box begins
        draw.rectangle([tx, ty, tx + tw + 2 * pad - 1, ty + th + 2 * pad - 1], fill=(*colour, LABEL_ALPHA))
        left, top = font.getbbox(text)[:2]
        draw.text((tx + pad - left, ty + pad - top), text, fill=ink(colour), font=font)
    overlay = np.asarray(image)
    if masks is None or all(m is None for m in masks):
        return overlay
    if len(masks) != len(labels):
        raise ValueError(f"render_overlay: {len(masks)} masks for {len(labels)} boxes (one mask or None per box)")
    layer = mask_layer(width, height, masks, [colours.get(label, PALETTE[0]) for label in labels],
                       outline_width=max(1, line_width // 2))
    return over(overlay, layer)


def mask_outline(mask: np.ndarray, width: int = 1) -> np.ndarray:
    """The pixels of ``mask`` within ``width`` pixels (4-neighbour steps) of its edge; the frame's
    border counts as outside."""
    inner = mask.copy()
    for _ in range(width):  # one erosion by the 4-neighbourhood per pixel of width
        shrunk = inner.copy()
        shrunk[1:] &= inner[:-1]
        shrunk[:-1] &= inner[1:]
        shrunk[:, 1:] &= inner[:, :-1]
        shrunk[:, :-1] &= inner[:, 1:]
        shrunk[0, :] = shrunk[-1, :] = False
        shrunk[:, 0] = shrunk[:, -1] = False
        inner = shrunk
    return mask & ~inner


def mask_layer(width: int, height: int, masks: Sequence[np.ndarray | None], colours: Sequence[tuple[int, int, int]],
               fill_alpha: int = MASK_ALPHA, outline_width: int = 1) -> np.ndarray:
    """RGBA ``(height, width, 4)`` uint8 layer: each mask filled in its colour at ``fill_alpha`` and
    outlined opaque, ``outline_width`` pixels wide. A later mask covers an earlier one where they overlap."""
    layer = np.zeros((height, width, 4), dtype=np.uint8)
    for i, (mask, colour) in enumerate(zip(masks, colours)):
        if mask is None:
            continue
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (height, width):
            raise ValueError(f"mask {i} is {mask.shape[1] if mask.ndim == 2 else '?'}x{mask.shape[0]} pixels "
                             f"(shape {mask.shape}), the frame {width}x{height}: a mask has the frame's size")
        layer[mask] = (*colour, fill_alpha)
        layer[mask_outline(mask, outline_width)] = (*colour, 255)
    return layer


def over(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """Porter-Duff "over" of two RGBA uint8 layers: blending the result onto a frame is (to rounding)
    blending ``bottom`` and then ``top``; where ``top`` is transparent the result is ``bottom``, where
    it is opaque, ``top``, exactly. Only the pixels ``bottom`` covers are computed (elsewhere: ``top``)."""
    out = top.copy()
    under = bottom[..., 3] > 0
    t, b = top[under].astype(np.float64), bottom[under].astype(np.float64)
    a_top, a_bottom = t[:, 3:] / 255.0, b[:, 3:] / 255.0
    alpha = a_top + a_bottom * (1.0 - a_top)  # > 0 wherever the bottom covers
    rgb = (t[:, :3] * a_top + b[:, :3] * (a_bottom * (1.0 - a_top))) / alpha
    out[under] = np.concatenate([np.round(rgb), np.round(alpha * 255.0)], axis=-1).clip(0, 255).astype(np.uint8)
    return out


def composite(frames: np.ndarray, overlay: np.ndarray) -> np.ndarray:
    """Alpha-blend one RGBA overlay onto ``(N, H, W, 3)`` uint8 frames (all at once).

    ``(frame * (255 - a) + colour * a + 127) // 255`` per channel, computed only at the pixels the
    overlay covers (``a > 0``: the caption band, the boxes' outlines and labels, the masks); elsewhere
    the formula gives the frame itself. The overlay's share of the sum is computed once for all frames."""
    frames = np.asarray(frames)
    count, height, width = frames.shape[:3]
    alpha = overlay[..., 3].reshape(-1)
    covered = np.flatnonzero(alpha)
    out = np.array(frames, dtype=np.uint8, copy=True)
    if covered.size == 0:
        return out
    a = alpha[covered].astype(np.uint16)[:, None]
    painted = overlay[..., :3].reshape(-1, 3)[covered].astype(np.uint16) * a + 127
    flat = out.reshape(count, height * width, 3)
    under = flat[:, covered].astype(np.uint16)
    flat[:, covered] = ((under * (255 - a) + painted) // 255).astype(np.uint8)
    return out


def draw_boxes(frames: np.ndarray, boxes: np.ndarray, labels: Sequence[str],
               colours: Mapping[str, tuple[int, int, int]], caption: str | None = None,
               scores: Sequence[float] | None = None, masks: Sequence[np.ndarray | None] | None = None,
               **sizes) -> np.ndarray:
    """``(N, H, W, 3)`` uint8 frames with the same labelled boxes (and caption, and masks) drawn on each."""
    height, width = frames.shape[1:3]
    return composite(frames, render_overlay(width, height, boxes, labels, colours, caption, scores=scores,
                                            masks=masks, **sizes))
