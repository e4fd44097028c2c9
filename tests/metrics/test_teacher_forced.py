"""Teacher-forced grounding diagnostics: hand-computed cases and a loop reference on random batches."""
from __future__ import annotations

import pytest
import torch

from metrics.teacher_forced import (
    COUNT_KEYS,
    PHRASE_BUCKETS,
    TeacherForcedGrounding,
    teacher_forced_counts,
    teacher_forced_rates,
)

BOX_A = [0.25, 0.25, 0.2, 0.2]  # cxcywh
BOX_B = [0.75, 0.75, 0.2, 0.2]
BOX_A_SHIFTED = [0.27, 0.25, 0.2, 0.2]  # IoU with A = 0.18*0.2 / (2*0.04 - 0.036) = 0.818
BOX_FAR = [0.5, 0.1, 0.1, 0.1]


def _as_int(counts):
    return {k: int(v) for k, v in counts.items()}


def test_hand_computed_two_phrase_clip():
    # one clip, 2 frames, 2 phrases. Frame 0: both present; phrase 0 predicted slightly off A (hit),
    # phrase 1 predicted on A although its object is B (miss, boxed onto the other object).
    # Frame 1: phrase 0 absent (objectness says present: wrong), phrase 1 predicted far away (miss).
    gt = torch.tensor([[[BOX_A, BOX_B], [BOX_A, BOX_B]]])
    pred = torch.tensor([[[BOX_A_SHIFTED, BOX_A], [BOX_A, BOX_FAR]]])
    present = torch.tensor([[[True, True], [False, True]]])
    logits = torch.tensor([[[3.0, 2.0], [1.0, -1.0]]])  # predicted present: T T / T F
    counts = _as_int(teacher_forced_counts(pred, logits, gt, present, torch.tensor([[True, True]])))
    assert counts["box_total"] == 3 and counts["box_hits"] == 1
    assert counts["box_other_object"] == 1  # frame 0 phrase 1 (frame 1's far box is on nothing)
    assert counts["box_total_2phrases"] == 3 and counts["box_hits_2phrases"] == 1
    assert counts["box_total_1phrase"] == 0 and counts["box_total_3plus_phrases"] == 0
    # objectness: 4 slots; correct at (0,0), (0,1); wrong at (1,0) (absent, said present), (1,1) (present, said absent)
    assert counts["objectness_total"] == 4 and counts["objectness_correct"] == 2
    assert counts["objectness_absent_total"] == 1 and counts["objectness_absent_correct"] == 0
    rates = teacher_forced_rates(counts)
    assert rates["box_hit_rate_tf"] == pytest.approx(1 / 3)
    assert rates["box_other_object_rate_tf"] == pytest.approx(1 / 3)
    assert rates["objectness_acc"] == pytest.approx(0.5)
    assert rates["objectness_acc_absent"] == 0.0
    assert "box_hit_rate_tf_1phrase" not in rates  # no such clip: left out, not 0


def test_masks_and_repeated_phrases():
    # clip 0: one valid phrase + a padded slot; clip 1: the same phrase tagged twice (identical boxes),
    # the second frame padded. Boxing slot 1 of clip 1 onto the shared box is a hit, never "other object".
    gt = torch.tensor([[[BOX_A, BOX_B], [BOX_A, BOX_B]], [[BOX_A, BOX_A], [BOX_B, BOX_B]]])
    pred = torch.tensor([[[BOX_A, BOX_A], [BOX_FAR, BOX_A]], [[BOX_FAR, BOX_A], [BOX_FAR, BOX_FAR]]])
    present = torch.ones(2, 2, 2, dtype=torch.bool)
    phrase_mask = torch.tensor([[True, False], [True, True]])
    frame_mask = torch.tensor([[True, True], [True, False]])
    counts = _as_int(teacher_forced_counts(pred, None, gt, present, phrase_mask, frame_mask))
    # valid present slots: clip 0 (f0,p0) hit, (f1,p0) miss; clip 1 (f0,p0) miss, (f0,p1) hit
    assert counts["box_total"] == 4 and counts["box_hits"] == 2
    assert counts["box_other_object"] == 0
    assert counts["box_total_1phrase"] == 2 and counts["box_hits_1phrase"] == 1
    assert counts["box_total_2phrases"] == 2 and counts["box_hits_2phrases"] == 1
    assert counts["objectness_total"] == 0  # no objectness head: nothing counted
    assert "objectness_acc" not in teacher_forced_rates(counts)


def _iou(a, b):
    ax1, ay1, ax2, ay2 = a[0] - a[2] / 2, a[1] - a[3] / 2, a[0] + a[2] / 2, a[1] + a[3] / 2
    bx1, by1, bx2, by2 = b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
    inter = max(0.0, min(ax2, bx2) - max(ax1, bx1)) * max(0.0, min(ay2, by2) - max(ay1, by1))
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def _loop_reference(pred, logits, gt, present, phrase_mask, frame_mask):
    counts = dict.fromkeys(COUNT_KEYS, 0)
    B, T, P, _ = pred.shape
    for b in range(B):
        n = int(phrase_mask[b].sum())
        bucket = PHRASE_BUCKETS[min(n, 3) - 1] if n else None
        for t in range(T):
            if not frame_mask[b, t]:
                continue
            for p in range(P):
                if not phrase_mask[b, p]:
                    continue
                is_present = bool(present[b, t, p])
                said_present = 1 / (1 + torch.exp(-logits[b, t, p]).item()) >= 0.5
                counts["objectness_total"] += 1
                counts["objectness_correct"] += int(said_present == is_present)
                if not is_present:
                    counts["objectness_absent_total"] += 1
                    counts["objectness_absent_correct"] += int(not said_present)
                    continue
                counts["box_total"] += 1
                counts[f"box_total_{bucket}"] += 1
                hit = _iou(pred[b, t, p].tolist(), gt[b, t, p].tolist()) >= 0.5
                counts["box_hits"] += int(hit)
                counts[f"box_hits_{bucket}"] += int(hit)
                if not hit:
                    counts["box_other_object"] += int(any(
                        phrase_mask[b, q] and present[b, t, q] and gt[b, t, q].tolist() != gt[b, t, p].tolist()
                        and _iou(pred[b, t, p].tolist(), gt[b, t, q].tolist()) >= 0.5 for q in range(P)))
    return counts


@pytest.mark.parametrize("seed", range(6))
def test_matches_loop_reference_on_random_batches(seed):
    g = torch.Generator().manual_seed(seed)
    B, T, P = 5, 4, 3
    # boxes on a coarse grid so that hits, misses and other-object hits all occur
    centres = torch.randint(1, 4, (B, T, P, 2), generator=g).float() / 4
    sizes = torch.randint(1, 3, (B, T, P, 2), generator=g).float() / 5
    gt = torch.cat((centres, sizes), -1)
    choice = torch.randint(0, 3, (B, T, P), generator=g)
    shuffled = gt[:, :, torch.randperm(P, generator=g)]
    noise = torch.rand(B, T, P, 4, generator=g) * 0.1
    pred = torch.where((choice == 0).unsqueeze(-1), gt, torch.where((choice == 1).unsqueeze(-1), shuffled, gt + noise))
    present = torch.rand(B, T, P, generator=g) < 0.7
    logits = torch.randn(B, T, P, generator=g)
    phrase_mask = torch.arange(P).unsqueeze(0) < torch.randint(0, P + 1, (B, 1), generator=g)
    frame_mask = torch.arange(T).unsqueeze(0) < torch.randint(1, T + 1, (B, 1), generator=g)
    got = _as_int(teacher_forced_counts(pred, logits, gt, present, phrase_mask, frame_mask))
    assert got == _loop_reference(pred, logits, gt, present, phrase_mask, frame_mask)


def test_metric_sums_batches_exactly():
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(3):
        gt = torch.rand(2, 3, 2, 4, generator=g) * 0.5 + 0.25
        batches.append((gt + torch.randn(2, 3, 2, 4, generator=g) * 0.03, torch.randn(2, 3, 2, generator=g), gt,
                        torch.rand(2, 3, 2, generator=g) < 0.8, torch.tensor([[True, True], [True, False]])))
    metric = TeacherForcedGrounding()
    for batch in batches:
        metric.update(*batch)
    together = teacher_forced_counts(*(torch.cat(parts) for parts in zip(*batches)))
    assert metric.compute() == pytest.approx(teacher_forced_rates(together))
    metric.reset()
    with pytest.warns(UserWarning, match="before the ``update``"):
        assert metric.compute() == {}
