"""Drawing predicted boxes and captions onto frames: one place for every picture the project makes.

The annotated MP4s of ``predict`` runs, the validation clips drawn to TensorBoard and the web demo
all draw with these helpers, so a phrase looks the same everywhere: one palette colour per phrase
(in order of first appearance), a labelled outline per box, and the caption in a band at the
bottom. Drawing goes into an RGBA overlay with PIL, which is then alpha-blended onto any number of
frames at once (:func:`composite`).
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


def render_overlay(width: int, height: int, boxes: np.ndarray, labels: Sequence[str],
                   colours: Mapping[str, tuple[int, int, int]], caption: str | None = None,
                   line_width: int | None = None, font_size: int | None = None,
                   max_caption_lines: int = 3, scores: Sequence[float] | None = None) -> np.ndarray:
    """RGBA ``(height, width, 4)`` uint8 overlay: labelled pixel-xyxy boxes and a caption band.

    ``scores`` (one per box) are written after each label with two decimals."""
    auto_line, auto_font = default_sizes(width, height)
    line_width = line_width or auto_line
    font = load_font(font_size or auto_font)
    image = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    if caption:  # first, so that boxes reaching into the band stay whole
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
    return np.asarray(image)


def composite(frames: np.ndarray, overlay: np.ndarray) -> np.ndarray:
    """Alpha-blend one RGBA overlay onto ``(N, H, W, 3)`` uint8 frames (all at once)."""
    alpha = overlay[..., 3:4].astype(np.uint16)
    blended = (frames.astype(np.uint16) * (255 - alpha) + overlay[..., :3].astype(np.uint16) * alpha + 127) // 255
    return blended.astype(np.uint8)


def draw_boxes(frames: np.ndarray, boxes: np.ndarray, labels: Sequence[str],
               colours: Mapping[str, tuple[int, int, int]], caption: str | None = None,
               scores: Sequence[float] | None = None, **sizes) -> np.ndarray:
    """``(N, H, W, 3)`` uint8 frames with the same labelled boxes (and caption) drawn on each."""
    height, width = frames.shape[1:3]
    return composite(frames, render_overlay(width, height, boxes, labels, colours, caption, scores=scores, **sizes))
