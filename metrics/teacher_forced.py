"""Teacher-forced grounding diagnostics: how well the boxes and objectness follow a GIVEN caption.

The paper's metrics (AP50, mIoU, recall) mix two failures: a wrong caption and a wrong box. With
the ground-truth caption forced, what is left is localisation, and splitting it by how many
phrases the clip has tells *which* part of localisation fails: a model that boxes "an object"
well but not "the object this phrase names" is good on one-phrase clips and near chance on
three-phrase clips, and its misses land on the other phrases' objects. All counts are sums, so
they aggregate exactly across batches and ranks (:class:`TeacherForcedGrounding`).

Conventions: boxes are normalised ``(cx, cy, w, h)``; a *slot* is one (frame, phrase) pair of a
valid phrase (``phrase_mask``) and, when given, a valid frame (``frame_mask``); a hit is IoU >= 0.5
on a slot whose object is present. Clips are bucketed by their number of phrase slots (1, 2, 3+).
"""
from __future__ import annotations

from core.box_ops import box_iou, box_iou_pairwise, cxcywh_to_xyxy

import torch
from torch import Tensor
from torchmetrics import Metric

PHRASE_BUCKETS = ("1phrase", "2phrases", "3plus_phrases")
COUNT_KEYS = ("box_hits", "box_total", "box_other_object", "objectness_correct", "objectness_total",
              "objectness_absent_correct", "objectness_absent_total",
              *(f"box_hits_{b}" for b in PHRASE_BUCKETS), *(f"box_total_{b}" for b in PHRASE_BUCKETS))


def teacher_forced_counts(pred_boxes: Tensor, objectness_logits: Tensor | None, gt_boxes: Tensor,
                          present: Tensor, phrase_mask: Tensor, frame_mask: Tensor | None = None,
                          iou_threshold: float = 0.5, objectness_threshold: float = 0.5) -> dict[str, Tensor]:
    """Counts over one batch. Shapes: boxes ``(B, T, P, 4)``; ``objectness_logits``/``present``
    ``(B, T, P)``; ``phrase_mask (B, P)``; ``frame_mask (B, T)``.

    ``box_other_object`` counts present slots that miss their own box but reach the IoU threshold
    with the box of another phrase present in the same frame (a phrase boxed onto the wrong object;
    other slots with an identical box, i.e. a repeated phrase, do not count as other objects).
    """
    b, t, p, _ = pred_boxes.shape
    valid = phrase_mask.bool().unsqueeze(1).expand(b, t, p)
    if frame_mask is not None:
        valid = valid & frame_mask.bool().unsqueeze(2)
    visible = present.bool() & valid
    pred_xyxy = cxcywh_to_xyxy(pred_boxes.float())
    gt_xyxy = cxcywh_to_xyxy(gt_boxes.float())
    own = box_iou_pairwise(pred_xyxy, gt_xyxy)  # (B, T, P)
    hit = (own >= iou_threshold) & visible
    # IoU of every prediction with every GT box of its frame: (B, T, P_pred, P_gt)
    cross = box_iou(pred_xyxy, gt_xyxy)
    same_box = (gt_xyxy.unsqueeze(3) == gt_xyxy.unsqueeze(2)).all(-1)  # (B, T, P, P): identical GT boxes
    other = visible.unsqueeze(2) & ~same_box  # column j is a present slot with a different box
    wrong_object = ((cross >= iou_threshold) & other).any(-1) & visible & ~hit
    counts = {
        "box_hits": hit.sum(),
        "box_total": visible.sum(),
        "box_other_object": wrong_object.sum(),
    }
    num_phrases = phrase_mask.bool().sum(1)  # (B,)
    bucket = num_phrases.clamp(max=3) - 1  # 0, 1, 2 (clips with no phrase have no slot)
    for index, name in enumerate(PHRASE_BUCKETS):
        in_bucket = (bucket == index).view(b, 1, 1)
        counts[f"box_hits_{name}"] = (hit & in_bucket).sum()
        counts[f"box_total_{name}"] = (visible & in_bucket).sum()
    zero = valid.new_zeros((), dtype=torch.long)
    if objectness_logits is None:
        counts.update(objectness_correct=zero, objectness_total=zero,
                      objectness_absent_correct=zero, objectness_absent_total=zero)
        return counts
    predicted = objectness_logits.float().sigmoid() >= objectness_threshold
    correct = (predicted == present.bool()) & valid
    absent = valid & ~present.bool()
    counts.update(objectness_correct=correct.sum(), objectness_total=valid.sum(),
                  objectness_absent_correct=(correct & absent).sum(), objectness_absent_total=absent.sum())
    return counts


def teacher_forced_rates(counts: dict[str, Tensor | float]) -> dict[str, float]:
    """Rates from summed counts; a rate whose denominator is 0 is left out (not reported as 0)."""
    pairs = {
        "box_hit_rate_tf": ("box_hits", "box_total"),
        "box_other_object_rate_tf": ("box_other_object", "box_total"),
        "objectness_acc": ("objectness_correct", "objectness_total"),
        "objectness_acc_absent": ("objectness_absent_correct", "objectness_absent_total"),
        **{f"box_hit_rate_tf_{b}": (f"box_hits_{b}", f"box_total_{b}") for b in PHRASE_BUCKETS},
    }
    rates = {}
    for name, (num, den) in pairs.items():
        denominator = float(counts[den])
        if denominator > 0:
            rates[name] = float(counts[num]) / denominator
    return rates


class TeacherForcedGrounding(Metric):
    """Accumulates :func:`teacher_forced_counts` (summed across ranks); ``compute`` gives the rates."""

    full_state_update = False

    def __init__(self, iou_threshold: float = 0.5, objectness_threshold: float = 0.5, **kwargs):
        super().__init__(**kwargs)
        self.iou_threshold = iou_threshold
        self.objectness_threshold = objectness_threshold
        for key in COUNT_KEYS:
            self.add_state(key, default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, pred_boxes: Tensor, objectness_logits: Tensor | None, gt_boxes: Tensor, present: Tensor,
               phrase_mask: Tensor, frame_mask: Tensor | None = None) -> None:
        counts = teacher_forced_counts(pred_boxes, objectness_logits, gt_boxes, present, phrase_mask, frame_mask,
                                       self.iou_threshold, self.objectness_threshold)
        for key, value in counts.items():
            setattr(self, key, getattr(self, key) + value.to(getattr(self, key).device))

    def compute(self) -> dict[str, float]:
        return teacher_forced_rates({key: getattr(self, key) for key in COUNT_KEYS})
