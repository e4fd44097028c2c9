"""Non-maximum suppression in plain torch (torchvision's compiled ``nms`` is missing on CPU torch here;
see :mod:`core.torchvision_compat`)."""
from __future__ import annotations

from core.box_ops import box_iou

import torch
from torch import Tensor


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Indices of the kept xyxy ``boxes``, by decreasing score: a box is dropped when its IoU with a
    better kept box exceeds ``iou_threshold`` (torchvision's rule)."""
    order = torch.argsort(scores, descending=True, stable=True)
    if order.numel() == 0:
        return order
    iou = box_iou(boxes[order].float(), boxes[order].float())
    keep = torch.ones(len(order), dtype=torch.bool, device=boxes.device)
    for i in range(len(order)):  # sequential by definition; the IoU matrix is computed once
        if keep[i]:
            keep[i + 1:] &= iou[i, i + 1:] <= iou_threshold
    return order[keep]


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """:func:`nms` within each category ``idxs`` (boxes of different categories never suppress each other)."""
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.int64, device=boxes.device)
    offsets = idxs.to(boxes) * (boxes.max() + 1)
    return nms(boxes + offsets[:, None], scores, iou_threshold)
