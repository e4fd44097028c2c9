"""The annotated MP4 of a long video: each entity keeps one colour and one label for the whole video.

Boxes come from the timeline's entity tubes (grid frames), each with its mask (translucent, in the
entity's colour, under the box) where the tube point carries one; a source frame shows the boxes of the
latest grid frame at or before it, and the caption of the segment it lies in ("(not decoded)" in
a gap). The video is read in one streaming pass and written chunk by chunk, so memory does not
grow with its length; the overlays are :mod:`core.drawing`'s, blended in the video's own YUV planes
(:mod:`core.yuv_compositing`), as the other annotated MP4s.
"""
from __future__ import annotations

from core.drawing import PALETTE, render_overlay
from core.yuv_compositing import FULL_RANGE, YuvFrame, blend_frames

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from formats.frame_grids import annotation_step
from formats.mask_rle import decode_masks
from formats.video_reader import DecodeGap, stream_frames
from formats.video_writer import VideoWriter
from formats.yuv_frames import yuv_format


def entity_label(entity: Mapping[str, Any]) -> str:
    return f"#{entity['id']} {entity['name']}"


def entity_colours(timeline: Mapping[str, Any]) -> dict[str, tuple[int, int, int]]:
    """Label -> colour: entity ``k`` always gets palette colour ``k`` (mod the palette's size)."""
    return {entity_label(e): PALETTE[int(e["id"]) % len(PALETTE)] for e in timeline["entities"]}


def grid_boxes(timeline: Mapping[str, Any]) -> dict[int, tuple[np.ndarray, list[str], list[dict | None]]]:
    """Grid frame -> (boxes, labels, masks: the tube points' RLE masks, None where a point has none) of
    every entity seen on it."""
    out: dict[int, tuple[list, list, list]] = {}
    for entity in timeline["entities"]:
        label = entity_label(entity)
        for point in entity["tube"]:
            boxes, labels, masks = out.setdefault(int(point["frame"]), ([], [], []))
            boxes.append(point["box"])
            labels.append(label)
            masks.append(point.get("mask"))
    return {f: (np.asarray(b, dtype=np.float64).reshape(-1, 4), l, m) for f, (b, l, m) in out.items()}


def decoded_masks(rles: list[dict | None]) -> list[np.ndarray | None] | None:
    """Boolean masks of the RLEs (None kept); None when there are none at all."""
    if not any(rles):
        return None
    return [decode_masks([m])[0] if m else None for m in rles]


def dimmed(frame: YuvFrame) -> YuvFrame:
    """A frame at a third of its brightness and colour (a gap's stand-in for the frames not decoded)."""
    black = 0 if frame.color_range == FULL_RANGE else 16
    return replace(frame, y=((frame.y.astype(np.int16) - black) // 3 + black).astype(np.uint8),
                   u=((frame.u.astype(np.int16) - 128) // 3 + 128).astype(np.uint8),
                   v=((frame.v.astype(np.int16) - 128) // 3 + 128).astype(np.uint8))


def blank_yuv(width: int, height: int) -> YuvFrame:
    """A black frame (limited range) in the writer's planes for the size."""
    subsampled = yuv_format(width, height) == "yuv420p"
    chroma = (height // 2, width // 2) if subsampled else (height, width)
    return YuvFrame(np.full((height, width), 16, np.uint8), np.full(chroma, 128, np.uint8),
                    np.full(chroma, 128, np.uint8))


def render_timeline_video(timeline: Mapping[str, Any], out_path: str | Path, chunk_frames: int = 64,
                          crf: int = 23) -> Path:
    """Write the whole video with its entities drawn, one colour per entity."""
    fps, n = float(timeline["fps"]), int(timeline["num_frames"])
    width, height = int(timeline["width"]), int(timeline["height"])
    colours = entity_colours(timeline)
    boxes_at = grid_boxes(timeline)
    grid = np.array(sorted(boxes_at), dtype=np.int64)
    segments = sorted(timeline["segments"], key=lambda s: s["start_frame"])
    starts = np.array([s["start_frame"] for s in segments], dtype=np.int64)
    gaps = [(g["first_frame"], g["last_frame"]) for g in timeline["gaps"]]
    encoder = VideoWriter(out_path, fps, width, height, crf=crf)
    overlays: dict[tuple, np.ndarray] = {}
    step = annotation_step(fps)  # a grid frame's boxes hold until the next grid frame

    def caption_at(frame: int) -> str:
        if any(a <= frame <= b for a, b in gaps):
            return "(not decoded)"
        k = int(np.searchsorted(starts, frame, side="right")) - 1
        return (segments[k]["caption"] or "(clip skipped)") if k >= 0 else ""

    def key_for(frame: int) -> tuple[int, str]:
        """(the grid frame whose boxes it shows, or -1; its caption)"""
        k = int(np.searchsorted(grid, frame, side="right")) - 1
        g = int(grid[k]) if k >= 0 and frame - int(grid[k]) < step else -1
        return g, caption_at(frame)

    chunk: list[YuvFrame] = []
    indices: list[int] = []
    last = None

    def flush() -> None:
        if not chunk:
            return
        keys = [key_for(i) for i in indices]
        for key in dict.fromkeys(keys):
            if key not in overlays:
                b, labels, rles = boxes_at.get(key[0], (np.zeros((0, 4)), [], []))
                overlays[key] = render_overlay(width, height, b, labels, colours, key[1], masks=decoded_masks(rles))
        # consecutive frames share a key: each run is blended in its own planes, in order
        bounds = [0] + [k for k in range(1, len(keys)) if keys[k] != keys[k - 1]] + [len(keys)]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            run = chunk[lo:hi]
            encoder.write_yuv(*blend_frames(run, overlays[keys[lo]]), run[0].tags)
        for key in [k for k in overlays if k != keys[-1]]:  # the next chunk starts with the last one
            del overlays[key]
        chunk.clear()
        indices.clear()

    try:
        for item in stream_frames(timeline["path"], np.arange(n), colour="yuv"):
            if isinstance(item, DecodeGap):
                filler = dimmed(last) if last is not None else blank_yuv(width, height)
                for i in range(item.first, item.last + 1):  # keep the length: a gap shows the last frame, dimmed
                    chunk.append(filler)
                    indices.append(i)
                    if len(chunk) >= chunk_frames:
                        flush()
                continue
            index, frame = item
            last = frame
            chunk.append(frame)
            indices.append(index)
            if len(chunk) >= chunk_frames:
                flush()
        flush()
    except BaseException:
        encoder.abort()
        raise
    return encoder.close()
