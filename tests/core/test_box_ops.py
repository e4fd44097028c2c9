"""core/box_ops.py: conversions, IoU and gIoU against hand values and plain-loop references."""
from __future__ import annotations

from core.box_ops import (
    box_area,
    box_iou,
    box_iou_pairwise,
    clip_boxes,
    cxcywh_to_xyxy,
    denormalize_boxes,
    generalized_box_iou,
    generalized_box_iou_pairwise,
    normalize_boxes,
    numpy_box_iou_pairwise,
    xywh_to_xyxy,
    xyxy_to_cxcywh,
    xyxy_to_xywh,
)

import itertools

import numpy as np
import pytest
import torch


def random_xyxy(*shape, seed=0, degenerate=0.0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(*shape, 2, generator=g, dtype=torch.float64) * 100
    wh = torch.rand(*shape, 2, generator=g, dtype=torch.float64) * 50 + 0.1
    boxes = torch.cat([xy, xy + wh], dim=-1)
    if degenerate:  # some zero-width and some inverted boxes
        pick = torch.rand(*shape, generator=g) < degenerate
        boxes[..., 2] = torch.where(pick, boxes[..., 0] - wh[..., 0] * (torch.rand(*shape, generator=g) < 0.5),
                                    boxes[..., 2])
    return boxes


def plain_area(b):
    return max(b[2] - b[0], 0.0) * max(b[3] - b[1], 0.0)


def plain_iou(a, b):
    iw, ih = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0), max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    union = plain_area(a) + plain_area(b) - iw * ih
    return iw * ih / union if union > 0 else 0.0


def plain_giou(a, b):
    hull = (max(a[2], b[2]) - min(a[0], b[0])) * (max(a[3], b[3]) - min(a[1], b[1]))
    iw, ih = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0), max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    union = plain_area(a) + plain_area(b) - iw * ih
    return iw * ih / union - (hull - union) / hull


def test_conversions_hand_values():
    xyxy = torch.tensor([[3.0, 4.0, 7.0, 6.0]])
    torch.testing.assert_close(xyxy_to_cxcywh(xyxy), torch.tensor([[5.0, 5.0, 4.0, 2.0]]))
    torch.testing.assert_close(xyxy_to_xywh(xyxy), torch.tensor([[3.0, 4.0, 4.0, 2.0]]))
    torch.testing.assert_close(cxcywh_to_xyxy(torch.tensor([[5.0, 5.0, 4.0, 2.0]])), xyxy)
    torch.testing.assert_close(xywh_to_xyxy(torch.tensor([[3.0, 4.0, 4.0, 2.0]])), xyxy)


@pytest.mark.parametrize("shape", [(7,), (2, 3), (2, 1, 5)])
def test_conversions_round_trip_any_batch_shape(shape):
    boxes = random_xyxy(*shape, seed=1)
    for forward, backward in ((xyxy_to_cxcywh, cxcywh_to_xyxy), (xyxy_to_xywh, xywh_to_xyxy)):
        out = forward(boxes)
        assert out.shape == boxes.shape
        torch.testing.assert_close(backward(out), boxes)


def test_normalise_denormalise_and_clip():
    boxes = torch.tensor([[[10.0, 20.0, 50.0, 40.0]], [[0.0, 0.0, 300.0, 200.0]]])  # (2, 1, 4)
    width, height = torch.tensor([[100.0], [200.0]]), torch.tensor([[50.0], [100.0]])  # per batch item
    norm = normalize_boxes(boxes, width, height)
    torch.testing.assert_close(norm, torch.tensor([[[0.1, 0.4, 0.5, 0.8]], [[0.0, 0.0, 1.5, 2.0]]]))
    torch.testing.assert_close(denormalize_boxes(norm, width, height), boxes)
    clipped = clip_boxes(torch.tensor([[-5.0, 10.0, 120.0, 60.0]]), 100, 50)
    torch.testing.assert_close(clipped, torch.tensor([[0.0, 10.0, 100.0, 50.0]]))


def test_area_is_zero_for_degenerate_boxes():
    boxes = torch.tensor([[0.0, 0.0, 2.0, 3.0], [5.0, 5.0, 5.0, 9.0], [5.0, 5.0, 3.0, 9.0], [5.0, 5.0, 3.0, 2.0]])
    torch.testing.assert_close(box_area(boxes), torch.tensor([6.0, 0.0, 0.0, 0.0]))


def test_iou_hand_cases():
    a = torch.tensor([0.0, 0.0, 2.0, 2.0])
    cases = [([1.0, 1.0, 3.0, 3.0], 1 / 7),    # overlap 1, union 7
             ([0.0, 0.0, 2.0, 2.0], 1.0),      # identical
             ([2.0, 0.0, 4.0, 2.0], 0.0),      # touching edge
             ([5.0, 5.0, 6.0, 6.0], 0.0),      # disjoint
             ([0.0, 0.0, 1.0, 2.0], 0.5),      # contained half
             ([1.0, 1.0, 1.0, 1.5], 0.0),      # zero width inside a
             ([1.5, 0.0, 0.5, 2.0], 0.0)]      # inverted
    for b, want in cases:
        assert box_iou_pairwise(a, torch.tensor(b)).item() == pytest.approx(want)
    # Two identical zero-area boxes: union 0 -> IoU 0, not NaN.
    point = torch.tensor([1.0, 1.0, 1.0, 1.0])
    assert box_iou_pairwise(point, point).item() == 0.0


def test_iou_equals_plain_loop_on_random_boxes():
    a, b = random_xyxy(23, seed=2, degenerate=0.2), random_xyxy(17, seed=3, degenerate=0.2)
    got = box_iou(a, b)
    want = torch.tensor([[plain_iou(x.tolist(), y.tolist()) for y in b] for x in a], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert ((got >= 0) & (got <= 1)).all()


def test_iou_broadcasting_shapes_agree():
    a, b = random_xyxy(2, 5, seed=4), random_xyxy(2, 3, seed=5)
    batched = box_iou(a, b)
    assert batched.shape == (2, 5, 3)
    for i in range(2):
        torch.testing.assert_close(batched[i], box_iou(a[i], b[i]))
    assert box_iou(a[:1], b).shape == (2, 5, 3)  # leading dims broadcast
    torch.testing.assert_close(box_iou_pairwise(a[:, :, None], b[:, None]), batched)
    assert box_iou(a[0], b[0][:0]).shape == (5, 0)


def test_giou_known_values():
    a = torch.tensor([0.0, 0.0, 2.0, 2.0], dtype=torch.float64)
    assert generalized_box_iou_pairwise(a, a).item() == pytest.approx(1.0, abs=1e-6)
    # overlap 1, union 7, hull 9: 1/7 - 2/9
    assert generalized_box_iou_pairwise(a, torch.tensor([1.0, 1.0, 3.0, 3.0], dtype=torch.float64)).item() \
        == pytest.approx(1 / 7 - 2 / 9, abs=1e-6)
    far = generalized_box_iou_pairwise(torch.tensor([0.0, 0, 1, 1]), torch.tensor([1000.0, 1000, 1001, 1001])).item()
    assert -1.0 <= far < -0.999


def test_giou_equals_plain_loop_bounds_and_gradients():
    a, b = random_xyxy(11, seed=6), random_xyxy(9, seed=7)
    got = generalized_box_iou(a, b)
    want = torch.tensor([[plain_giou(x.tolist(), y.tolist()) for y in b] for x in a], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert ((got >= -1) & (got <= box_iou(a, b) + 1e-9)).all()  # gIoU is a lower bound of IoU
    # The loss uses gIoU: it must stay finite (values and gradients) even for zero-size boxes.
    x = torch.tensor([[0.3, 0.3, 0.3, 0.3], [0.1, 0.2, 0.5, 0.6]], requires_grad=True)
    y = torch.tensor([[0.3, 0.3, 0.3, 0.3], [0.2, 0.2, 0.4, 0.9]])
    loss = (1 - generalized_box_iou_pairwise(x, y)).sum()
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all()


def test_pairwise_and_all_pairs_agree_elementwise():
    a, b = random_xyxy(6, seed=8), random_xyxy(4, seed=9)
    full = box_iou(a, b)
    gfull = generalized_box_iou(a, b)
    for i, j in itertools.product(range(6), range(4)):
        assert box_iou_pairwise(a[i], b[j]).item() == pytest.approx(full[i, j].item(), abs=1e-12)
        assert generalized_box_iou_pairwise(a[i], b[j]).item() == pytest.approx(gfull[i, j].item(), abs=1e-12)


def test_numpy_iou_equals_plain_loop_broadcasts_and_keeps_precision():
    a, b = random_xyxy(6, seed=3, degenerate=0.3).numpy(), random_xyxy(4, seed=4).numpy()
    got = numpy_box_iou_pairwise(a[:, None], b[None])
    assert isinstance(got, np.ndarray) and got.shape == (6, 4) and got.dtype == np.float64
    for i, j in itertools.product(range(6), range(4)):
        assert got[i, j] == pytest.approx(plain_iou(a[i].tolist(), b[j].tolist()), abs=1e-12)
    assert numpy_box_iou_pairwise(a.astype(np.float32), b[0].astype(np.float32)).dtype == np.float32
    assert numpy_box_iou_pairwise(np.array([0, 0, 10, 10]), np.array([5, 0, 15, 10])) == pytest.approx(1 / 3)
