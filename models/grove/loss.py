"""GROVE's training loss: L = λ_ce·CE + λ_giou·gIoU + λ_l1·L1 + λ_obj·BCE (GROVE paper, section 4 and supp. C).

Box losses follow DETR but only over (frame, phrase) pairs whose object is visible in that frame
(the ground-truth temporal objectness); absent objects are supervised by the objectness BCE alone.

Conventions:
- gIoU term: ``1 - gIoU`` per present box, on xyxy boxes converted from the normalised cxcywh
  predictions and targets; summed, then divided by the number of present boxes.
- L1 term (DETR-style): ``|pred - gt|`` in normalised cxcywh, SUMMED over the 4 coordinates of a
  box, summed over present boxes, divided by the number of present boxes.
- BCE term: over every valid (frame, phrase) slot (valid phrase, and valid frame when a frame mask
  is given), divided by the number of valid slots.
With no present box (or no valid slot) the corresponding term is 0, never NaN.
"""
from __future__ import annotations

from core.box_ops import cxcywh_to_xyxy, generalized_box_iou_pairwise

import torch.nn.functional as F
from torch import Tensor, nn


class GroveLoss(nn.Module):
    def __init__(self, ce_weight: float = 1.0, giou_weight: float = 2.0, l1_weight: float = 2.0,
                 objectness_weight: float = 2.0, use_objectness: bool = True):
        super().__init__()
        self.ce_weight = ce_weight
        self.giou_weight = giou_weight
        self.l1_weight = l1_weight
        self.objectness_weight = objectness_weight
        self.use_objectness = use_objectness

    def forward(self, lm_loss: Tensor | None, pred_boxes: Tensor, objectness_logits: Tensor | None,
                gt_boxes: Tensor, present: Tensor, phrase_mask: Tensor,
                frame_mask: Tensor | None = None) -> dict[str, Tensor]:
        """Shapes: boxes ``(B, T, P, 4)`` cxcywh in [0, 1]; ``objectness_logits``/``present``
        ``(B, T, P)``; ``phrase_mask (B, P)``; optional ``frame_mask (B, T)``."""
        valid = phrase_mask.bool().unsqueeze(1).expand_as(present)
        if frame_mask is not None:
            valid = valid & frame_mask.bool().unsqueeze(2)
        visible = present.bool() & valid
        num_visible = visible.sum().clamp(min=1).to(pred_boxes.dtype)
        # Index the visible pairs first: absent slots hold arbitrary (e.g. zero-size) targets.
        pred, gt = pred_boxes[visible], gt_boxes[visible].to(pred_boxes.dtype)
        giou = generalized_box_iou_pairwise(cxcywh_to_xyxy(pred), cxcywh_to_xyxy(gt))
        giou_loss = (1.0 - giou).sum() / num_visible
        l1_loss = (pred - gt).abs().sum() / num_visible

        zero = pred_boxes.sum() * 0.0
        objectness_loss = zero
        if self.use_objectness and objectness_logits is not None:
            num_valid = valid.sum().clamp(min=1).to(objectness_logits.dtype)
            logits = objectness_logits[valid]
            objectness_loss = F.binary_cross_entropy_with_logits(
                logits, present[valid].to(logits.dtype), reduction="sum") / num_valid
        lm = lm_loss if lm_loss is not None else zero
        total = (self.ce_weight * lm + self.giou_weight * giou_loss + self.l1_weight * l1_loss
                 + self.objectness_weight * objectness_loss)
        return {"loss": total, "lm": lm, "giou": giou_loss, "l1": l1_loss, "objectness": objectness_loss}
