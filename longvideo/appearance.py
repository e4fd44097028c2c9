"""The appearance cue: the grounding encoder's features averaged inside a phrase's boxes.

The grounding (SAM) encoder sees each frame resized so its longest side is ``S`` and padded
at the bottom/right to ``S x S`` (:func:`models.grove.image_processing.preprocess_grounding`), and
returns an ``(h, w)`` feature map of that square; a pixel box of a ``W x H`` frame therefore
covers feature cells ``box * h / max(W, H)``. A phrase's vector is the mean over its boxes of
the mean feature in each box (at least the one cell under the box centre), L2-normalised.
"""
from __future__ import annotations

import numpy as np
import torch


def box_cells(boxes: np.ndarray, width: int, height: int, cells: int) -> np.ndarray:
    """Pixel xyxy boxes -> half-open integer cell ranges ``(x0, y0, x1, y1)`` on a ``cells x cells`` map,
    never empty."""
    scale = cells / float(max(width, height))
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4) * scale
    lo = np.clip(np.floor(b[:, :2]), 0, cells - 1).astype(np.int64)
    hi = np.clip(np.ceil(b[:, 2:]), 1, cells).astype(np.int64)
    centre = np.clip(np.floor((b[:, :2] + b[:, 2:]) / 2), 0, cells - 1).astype(np.int64)
    empty = hi <= lo
    lo = np.where(empty, centre, lo)
    hi = np.where(empty, centre + 1, hi)
    return np.concatenate([lo, hi], axis=1)


def pooled_box_features(features: torch.Tensor, frame_rows: np.ndarray, boxes: np.ndarray, width: int,
                        height: int) -> np.ndarray:
    """Mean feature inside each box: ``features (T, C, h, w)`` of one clip, box ``k`` on frame row
    ``frame_rows[k]``; returns ``(K, C)``. Uses an integral image, so the cost is one pass per clip."""
    T, C, h, w = features.shape
    if h != w:
        raise ValueError(f"grounding features must be a square map (the padded square input), got {h}x{w}")
    if len(boxes) == 0:
        return np.zeros((0, C), dtype=np.float32)
    cells = box_cells(boxes, width, height, h)
    integral = torch.zeros((T, C, h + 1, w + 1), dtype=torch.float64)
    integral[:, :, 1:, 1:] = features.double().cumsum(2).cumsum(3)
    rows = torch.as_tensor(np.asarray(frame_rows, dtype=np.int64))
    x0, y0, x1, y1 = (torch.as_tensor(cells[:, i]) for i in range(4))
    total = (integral[rows, :, y1, x1] - integral[rows, :, y0, x1] - integral[rows, :, y1, x0]
             + integral[rows, :, y0, x0])
    area = ((x1 - x0) * (y1 - y0)).clamp(min=1).unsqueeze(1).double()
    return (total / area).float().numpy()


def phrase_appearance(features: torch.Tensor, frames: np.ndarray, prediction: dict, width: int,
                      height: int) -> np.ndarray:
    """``(P, C)`` unit vectors, one per distinct phrase of a clip's prediction (zeros for a phrase without
    boxes); ``frames``: the source frame of each row of ``features``."""
    phrases = list(dict.fromkeys(prediction.get("phrases", [])))
    col = {p: j for j, p in enumerate(phrases)}
    row_of = {int(f): i for i, f in enumerate(frames)}
    rows, owners, boxes = [], [], []
    for entry in prediction.get("frames", []):
        r = row_of.get(int(entry["frame"]))
        for box, label in zip(entry.get("boxes", []), entry.get("labels", [])):
            if r is not None and label in col:
                rows.append(r)
                owners.append(col[label])
                boxes.append(box)
    C = features.shape[1]
    out = np.zeros((len(phrases), C), dtype=np.float64)
    if boxes:
        pooled = pooled_box_features(features, np.array(rows), np.array(boxes), width, height)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        np.add.at(out, np.array(owners), pooled)
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
