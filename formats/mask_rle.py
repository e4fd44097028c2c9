"""Masks as they travel between packages: COCO run-length encoding (the ``pycocotools`` ``mask`` API).

A mask on disk is ``{"size": [height, width], "counts": "<compressed RLE string>"}``, the format
COCO, the GLaMM GCG evaluation and the SAM / SAM 2 tools write. Polygons (COCO's list of
``[x1, y1, x2, y2, ...]`` rings) and uncompressed RLE (``counts`` a list of run lengths) are read
too and turned into the compressed form. Every function takes masks as boolean arrays shaped
``(n, height, width)`` (or one ``(height, width)``), never Fortran-ordered buffers: the column-major
layout pycocotools needs is made here.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from pycocotools import mask as mask_api

RLE = dict  # {"size": [h, w], "counts": str}


def encode_masks(masks: np.ndarray) -> list[RLE]:
    """Boolean masks ``(n, h, w)`` (or one ``(h, w)``) -> a list of compressed RLEs with ``str`` counts."""
    masks = np.asarray(masks)
    if masks.ndim == 2:
        masks = masks[None]
    if masks.ndim != 3:
        raise ValueError(f"masks must be shaped (n, height, width), got {masks.shape}")
    if masks.shape[0] == 0:
        return []
    encoded = mask_api.encode(np.asfortranarray(masks.transpose(1, 2, 0).astype(np.uint8)))
    return [{"size": [int(r["size"][0]), int(r["size"][1])], "counts": r["counts"].decode("ascii")} for r in encoded]


def _as_api(rle: RLE) -> dict:
    counts = rle["counts"]
    return {"size": list(rle["size"]), "counts": counts.encode("ascii") if isinstance(counts, str) else counts}


def rle_runs_total(counts: str) -> int | None:
    """The sum of a compressed COCO RLE string's run lengths (None when a run is negative or the string
    is cut short): it must be height * width, or decoding it would write past the mask."""
    runs: list[int] = []
    p = 0
    while p < len(counts):
        value, shift, more = 0, 0, True
        while more:
            if p >= len(counts):
                return None
            c = ord(counts[p]) - 48
            value |= (c & 0x1F) << shift
            more = bool(c & 0x20)
            p += 1
            shift += 5
            if not more and c & 0x10:
                value |= -1 << shift
        if len(runs) > 2:  # runs after the second are stored as differences (COCO's compressed RLE)
            value += runs[-2]
        if value < 0:
            return None
        runs.append(value)
    return sum(runs)


def _coordinate(value: Any, low: float, high: float, where: str, what: str) -> float:
    """``value`` as a finite number in ``[low, high]``, else an error naming ``where``: pycocotools
    rasterises a polygon with no check, and a NaN or a huge coordinate makes it allocate without bound."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {what} must be a number, got {type(value).__name__} {value!r:.40}")
    value = float(value)
    if not np.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{where}: {what} {value} is not a finite number in [{low:g}, {high:g}]")
    return value


def _count(value: Any, high: int, where: str, what: str) -> int:
    """``value`` as an integer in ``[0, high]``, else an error naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise ValueError(f"{where}: {what} must be a whole number, got {value!r:.40}")
    if not 0 <= value <= high:
        raise ValueError(f"{where}: {what} {value} is not in [0, {high}]")
    return int(value)


def to_compressed(entry: Any, height: int, width: int, where: str = "mask") -> RLE:
    """One mask given as a compressed RLE, an uncompressed RLE or COCO polygons -> a compressed RLE of
    size ``(height, width)``; anything else, or a size that differs from the frame's, is an error naming
    ``where`` (e.g. ``"gt.json, clip 'v0_0', frame 5, mask 1"``)."""
    if isinstance(entry, dict):
        if "counts" not in entry or "size" not in entry:
            raise ValueError(f"{where}: an RLE mask needs 'size' and 'counts', got keys {sorted(entry)}")
        if not isinstance(entry["size"], (list, tuple)) or len(entry["size"]) != 2:
            raise ValueError(f"{where}: mask size must be [height, width], got {entry['size']!r:.40}")
        size = [_count(v, 1 << 20, where, "mask size") for v in entry["size"]]
        if size != [height, width]:
            raise ValueError(f"{where}: mask size {size} is not the frame's [height, width] {[height, width]}")
        if isinstance(entry["counts"], list):
            if sum(_count(c, height * width, where, "an RLE run") for c in entry["counts"]) != height * width:
                raise ValueError(f"{where}: uncompressed RLE counts sum to {sum(entry['counts'])}, "
                                 f"not height*width = {height * width}")
            rle = mask_api.frPyObjects(entry, height, width)
            return {"size": size, "counts": rle["counts"].decode("ascii")}
        if not isinstance(entry["counts"], str):
            raise ValueError(f"{where}: RLE counts must be a string or a list of run lengths, "
                             f"got {type(entry['counts']).__name__}")
        # pycocotools accepts any string and its decoder does not check bounds: the runs must cover the frame
        total = rle_runs_total(entry["counts"])
        if total != height * width:
            raise ValueError(f"{where}: RLE counts are not a valid compressed RLE of a {height}x{width} mask "
                             f"(its runs {'are malformed' if total is None else f'cover {total} pixels'})")
        return {"size": size, "counts": entry["counts"]}
    if isinstance(entry, list):
        if not entry or any(not isinstance(r, list) or len(r) < 6 or len(r) % 2 for r in entry):
            raise ValueError(f"{where}: a polygon mask is a list of rings [x1, y1, x2, y2, ...] with at least "
                             "3 points each")
        # COCO polygons may reach a little past the frame; a frame's size beyond any edge is refused
        limits = ((-width, 2 * width, "x"), (-height, 2 * height, "y"))
        rings = [[_coordinate(v, *limits[k % 2][:2], where, f"polygon {i} {limits[k % 2][2]} coordinate {k // 2}")
                  for k, v in enumerate(ring)] for i, ring in enumerate(entry)]
        merged = mask_api.merge(mask_api.frPyObjects(rings, height, width))
        return {"size": [height, width], "counts": merged["counts"].decode("ascii")}
    raise ValueError(f"{where}: a mask is an RLE object or a list of polygons, got {type(entry).__name__}")


def decode_masks(rles: Sequence[RLE]) -> np.ndarray:
    """Compressed RLEs (one frame size) -> boolean masks ``(n, h, w)``."""
    if not len(rles):
        raise ValueError("decode_masks needs at least one RLE (the frame size comes from them)")
    sizes = {tuple(r["size"]) for r in rles}
    if len(sizes) != 1:
        raise ValueError(f"RLEs of one call must share a size, got {sorted(sizes)}")
    decoded = mask_api.decode([_as_api(r) for r in rles])
    return np.ascontiguousarray(decoded.transpose(2, 0, 1)).astype(bool)


_AREA_CHUNK = 255  # pycocotools' area() fails on a list of 256 or more masks (a uint8 count)


def mask_areas(rles: Sequence[RLE]) -> np.ndarray:
    """Pixel count of each mask, from the runs (no decoding)."""
    if not len(rles):
        return np.zeros(0, dtype=np.float64)
    api = [_as_api(r) for r in rles]
    return np.concatenate([np.asarray(mask_api.area(api[i:i + _AREA_CHUNK]), dtype=np.float64).reshape(-1)
                           for i in range(0, len(api), _AREA_CHUNK)])


def mask_iou_matrix(predicted: Sequence[RLE], truth: Sequence[RLE]) -> np.ndarray:
    """IoU of every predicted mask with every true mask, ``(len(predicted), len(truth))``, on the runs.
    Two empty masks have IoU 0 (COCO's convention)."""
    if not len(predicted) or not len(truth):
        return np.zeros((len(predicted), len(truth)), dtype=np.float64)
    iou = mask_api.iou([_as_api(r) for r in predicted], [_as_api(r) for r in truth], [0] * len(truth))
    return np.asarray(iou, dtype=np.float64).reshape(len(predicted), len(truth))


def mask_boxes(rles: Sequence[RLE]) -> np.ndarray:
    """Tight xyxy pixel-edge boxes of the masks ``(n, 4)`` (all zero for an empty mask)."""
    if not len(rles):
        return np.zeros((0, 4), dtype=np.float64)
    xywh = np.asarray(mask_api.toBbox([_as_api(r) for r in rles]), dtype=np.float64).reshape(-1, 4)
    return np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)


__all__ = ["RLE", "decode_masks", "encode_masks", "mask_areas", "mask_boxes", "mask_iou_matrix", "rle_runs_total",
           "to_compressed"]
