"""Pure-torch box utilities, the single place the project converts and compares boxes.

torchvision's compiled box kernels are unavailable on CPU torch here (see
:mod:`core.torchvision_compat`), and the metrics need exact, broadcastable IoU anyway.
Conventions: ``xyxy`` = pixel or normalised ``[x1, y1, x2, y2]``; ``cxcywh`` = centre, width,
height. All functions accept any leading batch shape ``(..., 4)``; :func:`numpy_box_iou_pairwise`
serves numpy callers with the same formula.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def cxcywh_to_xyxy(boxes: Tensor) -> Tensor:
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h), dim=-1)


def xyxy_to_cxcywh(boxes: Tensor) -> Tensor:
    x1, y1, x2, y2 = boxes.unbind(-1)
    return torch.stack(((x1 + x2) * 0.5, (y1 + y2) * 0.5, x2 - x1, y2 - y1), dim=-1)


def xywh_to_xyxy(boxes: Tensor) -> Tensor:
    x, y, w, h = boxes.unbind(-1)
    return torch.stack((x, y, x + w, y + h), dim=-1)


def xyxy_to_xywh(boxes: Tensor) -> Tensor:
    x1, y1, x2, y2 = boxes.unbind(-1)
    return torch.stack((x1, y1, x2 - x1, y2 - y1), dim=-1)


def _size_tensor(width, height, like: Tensor) -> Tensor:
    w = torch.as_tensor(width, dtype=like.dtype, device=like.device)
    h = torch.as_tensor(height, dtype=like.dtype, device=like.device)
    w, h = torch.broadcast_tensors(w, h)
    return torch.stack((w, h, w, h), dim=-1)


def normalize_boxes(boxes: Tensor, width, height) -> Tensor:
    """Pixel boxes -> boxes in [0, 1]; ``width``/``height`` may be scalars or broadcastable."""
    return boxes / _size_tensor(width, height, boxes)


def denormalize_boxes(boxes: Tensor, width, height) -> Tensor:
    """Boxes in [0, 1] -> pixel boxes."""
    return boxes * _size_tensor(width, height, boxes)


def clip_boxes(boxes: Tensor, width, height) -> Tensor:
    """Clip xyxy boxes to ``[0, width] x [0, height]``."""
    limits = _size_tensor(width, height, boxes)
    return torch.minimum(boxes.clamp(min=0), limits)


def box_area(boxes: Tensor) -> Tensor:
    """Area of xyxy boxes; degenerate (inverted) boxes have area 0."""
    return (boxes[..., 2] - boxes[..., 0]).clamp(min=0) * (boxes[..., 3] - boxes[..., 1]).clamp(min=0)


def _intersection_union(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    lt = torch.maximum(a[..., :2], b[..., :2])
    rb = torch.minimum(a[..., 2:], b[..., 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a) + box_area(b) - inter
    return inter, union


def box_iou_pairwise(a: Tensor, b: Tensor) -> Tensor:
    """Element-wise IoU of xyxy boxes with broadcastable shapes ``(..., 4)``; 0 where union is 0."""
    inter, union = _intersection_union(a, b)
    return torch.where(union > 0, inter / union.clamp(min=torch.finfo(union.dtype).tiny), torch.zeros_like(inter))


def numpy_box_iou_pairwise(a, b) -> np.ndarray:
    """:func:`box_iou_pairwise` of numpy xyxy boxes (broadcastable ``(..., 4)``), as a numpy array.

    Floating inputs keep their precision (float32 and float64 give float64, as numpy promotes);
    integer inputs are computed in float64."""
    def tensor(x) -> Tensor:
        x = np.asarray(x)
        return torch.tensor(x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64))

    return box_iou_pairwise(tensor(a), tensor(b)).numpy()


def box_iou(a: Tensor, b: Tensor) -> Tensor:
    """All-pairs IoU: ``a (..., N, 4)``, ``b (..., M, 4)`` -> ``(..., N, M)``."""
    return box_iou_pairwise(a.unsqueeze(-2), b.unsqueeze(-3))


def generalized_box_iou_pairwise(a: Tensor, b: Tensor, eps: float = 1e-7) -> Tensor:
    """Element-wise generalised IoU (Rezatofighi et al. 2019) of xyxy boxes, in [-1, 1]."""
    inter, union = _intersection_union(a, b)
    iou = inter / (union + eps)
    lt = torch.minimum(a[..., :2], b[..., :2])
    rb = torch.maximum(a[..., 2:], b[..., 2:])
    wh = (rb - lt).clamp(min=0)
    hull = wh[..., 0] * wh[..., 1]
    return iou - (hull - union) / (hull + eps)


def generalized_box_iou(a: Tensor, b: Tensor) -> Tensor:
    """All-pairs generalised IoU: ``(..., N, 4)`` x ``(..., M, 4)`` -> ``(..., N, M)``."""
    return generalized_box_iou_pairwise(a.unsqueeze(-2), b.unsqueeze(-3))
