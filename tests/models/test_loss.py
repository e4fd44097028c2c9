"""GroveLoss against hand-computed values and a per-slot loop reference."""
from core.box_ops import cxcywh_to_xyxy, generalized_box_iou_pairwise, xyxy_to_cxcywh

import math

import pytest
import torch
import torch.nn.functional as F

from models.grove.loss import GroveLoss


def _cxcywh(*xyxy):
    return xyxy_to_cxcywh(torch.tensor(xyxy, dtype=torch.float64))


def test_hand_computed_case_with_presence_and_padding():
    # One clip, 3 frames, 2 phrase slots; slot 1 is padding (holds garbage that must be ignored).
    pred = torch.zeros(1, 3, 2, 4, dtype=torch.float64)
    gt = torch.zeros(1, 3, 2, 4, dtype=torch.float64)
    pred[0, 0, 0] = _cxcywh(0.0, 0.0, 0.5, 0.5)
    gt[0, 0, 0] = _cxcywh(0.0, 0.0, 0.5, 0.5)       # perfect box: gIoU 1, L1 0
    pred[0, 1, 0] = _cxcywh(0.0, 0.0, 0.2, 0.2)
    gt[0, 1, 0] = _cxcywh(0.4, 0.4, 0.6, 0.6)       # disjoint: gIoU = -(0.36 - 0.08) / 0.36
    pred[0, 2, 0] = _cxcywh(0.1, 0.1, 0.9, 0.9)     # frame 2: object absent, target all zeros
    pred[0, :, 1] = _cxcywh(0.3, 0.3, 0.4, 0.4)
    gt[0, :, 1] = _cxcywh(0.0, 0.0, 1.0, 1.0)
    present = torch.tensor([[[True, True], [True, True], [False, True]]])
    phrase_mask = torch.tensor([[True, False]])
    logits = torch.tensor([[[2.0, 50.0], [-1.0, -50.0], [0.5, 9.0]]], dtype=torch.float64)
    lm = torch.tensor(1.5, dtype=torch.float64)

    out = GroveLoss()(lm, pred, logits, gt, present, phrase_mask)

    giou_disjoint = 0.0 - (0.36 - 0.08) / 0.36
    expected_giou = ((1 - 1.0) + (1 - giou_disjoint)) / 2
    expected_l1 = (0.0 + (0.4 + 0.4 + 0.0 + 0.0)) / 2      # centres move by 0.4 in x and y, sizes equal
    expected_bce = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(1.0)) + math.log1p(math.exp(0.5))) / 3
    assert out["giou"].item() == pytest.approx(expected_giou, rel=1e-6)
    assert out["l1"].item() == pytest.approx(expected_l1, rel=1e-9)
    assert out["objectness"].item() == pytest.approx(expected_bce, rel=1e-9)
    assert out["lm"].item() == 1.5
    expected = 1.0 * 1.5 + 2.0 * expected_giou + 2.0 * expected_l1 + 2.0 * expected_bce
    assert out["loss"].item() == pytest.approx(expected, rel=1e-6)


def test_weights_are_applied():
    torch.manual_seed(0)
    pred = torch.rand(2, 4, 3, 4) * 0.5 + 0.25
    gt = torch.rand(2, 4, 3, 4) * 0.5 + 0.25
    logits = torch.randn(2, 4, 3)
    present = torch.rand(2, 4, 3) > 0.3
    mask = torch.tensor([[True, True, False], [True, True, True]])
    parts = GroveLoss()(torch.tensor(0.7), pred, logits, gt, present, mask)
    weighted = GroveLoss(ce_weight=0.5, giou_weight=3.0, l1_weight=0.25, objectness_weight=7.0)(
        torch.tensor(0.7), pred, logits, gt, present, mask)
    expected = 0.5 * parts["lm"] + 3.0 * parts["giou"] + 0.25 * parts["l1"] + 7.0 * parts["objectness"]
    assert torch.allclose(weighted["loss"], expected)


def test_no_present_box_gives_finite_loss_and_gradients():
    pred = torch.full((2, 3, 2, 4), 0.5, requires_grad=True)
    gt = torch.zeros(2, 3, 2, 4)                       # absent objects: degenerate targets
    logits = torch.zeros(2, 3, 2, requires_grad=True)
    present = torch.zeros(2, 3, 2, dtype=torch.bool)
    out = GroveLoss()(None, pred, logits, gt, present, torch.ones(2, 2, dtype=torch.bool))
    assert out["giou"].item() == 0.0 and out["l1"].item() == 0.0 and out["lm"].item() == 0.0
    assert out["objectness"].item() == pytest.approx(math.log(2.0))
    out["loss"].backward()
    assert torch.isfinite(pred.grad).all() and torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0


def test_no_valid_phrase_gives_zero_not_nan():
    pred = torch.rand(1, 2, 1, 4, requires_grad=True)
    out = GroveLoss()(None, pred, torch.zeros(1, 2, 1), torch.rand(1, 2, 1, 4), torch.ones(1, 2, 1, dtype=torch.bool),
                      torch.zeros(1, 1, dtype=torch.bool))
    assert out["loss"].item() == 0.0
    out["loss"].backward()
    assert torch.isfinite(pred.grad).all()


def test_objectness_off_or_missing():
    pred, gt = torch.rand(1, 2, 2, 4), torch.rand(1, 2, 2, 4)
    present, mask = torch.ones(1, 2, 2, dtype=torch.bool), torch.ones(1, 2, dtype=torch.bool)
    off = GroveLoss(use_objectness=False)(None, pred, torch.full((1, 2, 2), 5.0), gt, present, mask)
    missing = GroveLoss()(None, pred, None, gt, present, mask)
    assert off["objectness"].item() == 0.0 and missing["objectness"].item() == 0.0
    assert torch.allclose(off["loss"], 2 * off["giou"] + 2 * off["l1"])


def _loop_reference(lm, pred, logits, gt, present, phrase_mask, frame_mask, w=(1.0, 2.0, 2.0, 2.0)):
    giou_sum = l1_sum = bce_sum = 0.0
    n_present = n_valid = 0
    b, t, p = present.shape
    for i in range(b):
        for f in range(t):
            for k in range(p):
                if not phrase_mask[i, k] or (frame_mask is not None and not frame_mask[i, f]):
                    continue
                n_valid += 1
                target = float(present[i, f, k])
                bce_sum += F.binary_cross_entropy_with_logits(logits[i, f, k],
                                                              torch.tensor(target, dtype=logits.dtype)).item()
                if present[i, f, k]:
                    n_present += 1
                    g = generalized_box_iou_pairwise(cxcywh_to_xyxy(pred[i, f, k]), cxcywh_to_xyxy(gt[i, f, k]))
                    giou_sum += 1 - g.item()
                    l1_sum += (pred[i, f, k] - gt[i, f, k]).abs().sum().item()
    giou = giou_sum / max(n_present, 1)
    l1 = l1_sum / max(n_present, 1)
    bce = bce_sum / max(n_valid, 1)
    return w[0] * lm + w[1] * giou + w[2] * l1 + w[3] * bce, giou, l1, bce


@pytest.mark.parametrize("seed", range(5))
def test_matches_loop_reference_on_random_batches(seed):
    g = torch.Generator().manual_seed(seed)
    b, t, p = 3, 5, 4
    centre = torch.rand(b, t, p, 2, generator=g) * 0.6 + 0.2
    size = torch.rand(b, t, p, 2, generator=g) * 0.3 + 0.05
    pred = torch.cat((centre, size), -1).double()
    gt = torch.cat((torch.rand(b, t, p, 2, generator=g) * 0.6 + 0.2, torch.rand(b, t, p, 2, generator=g) * 0.3 + 0.05),
                   -1).double()
    logits = torch.randn(b, t, p, generator=g).double()
    present = torch.rand(b, t, p, generator=g) > 0.4
    phrase_mask = torch.rand(b, p, generator=g) > 0.3
    frame_mask = torch.rand(b, t, generator=g) > 0.2 if seed % 2 else None
    out = GroveLoss()(torch.tensor(0.3, dtype=torch.float64), pred, logits, gt, present, phrase_mask, frame_mask)
    total, giou, l1, bce = _loop_reference(0.3, pred, logits, gt, present, phrase_mask, frame_mask)
    assert out["giou"].item() == pytest.approx(giou, rel=1e-6, abs=1e-9)
    assert out["l1"].item() == pytest.approx(l1, rel=1e-9, abs=1e-12)
    assert out["objectness"].item() == pytest.approx(bce, rel=1e-9, abs=1e-12)
    assert out["loss"].item() == pytest.approx(total, rel=1e-6)
