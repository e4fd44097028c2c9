"""J (region similarity) and F (contour accuracy) against a straightforward per-pixel oracle written from
the DAVIS 2017 definitions (boundary = differs from the right, lower or lower-right neighbour;
matched within a disk of radius ceil(0.008 * diagonal); the empty-mask conventions), on random
masks, plus hand cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.functional.region_contour import (
    boundary_map,
    boundary_radius,
    contour_accuracy,
    dataset_j_and_f,
    frame_statistics,
    j_and_f,
    region_similarity,
)


def oracle_j(gt, fg):
    inter = sum(1 for y in range(gt.shape[0]) for x in range(gt.shape[1]) if gt[y, x] and fg[y, x])
    union = sum(1 for y in range(gt.shape[0]) for x in range(gt.shape[1]) if gt[y, x] or fg[y, x])
    return 1.0 if union == 0 else inter / union


def oracle_boundary(seg):
    h, w = seg.shape
    out = np.zeros((h, w), dtype=bool)

    def at(y, x):  # outside the frame reads as background
        return bool(seg[y, x]) if y < h and x < w else False

    for y in range(h):
        for x in range(w):
            if y == h - 1 and x == w - 1:
                continue
            if y == h - 1:
                out[y, x] = at(y, x) != at(y, x + 1)
            elif x == w - 1:
                out[y, x] = at(y, x) != at(y + 1, x)
            else:
                out[y, x] = at(y, x) != at(y, x + 1) or at(y, x) != at(y + 1, x) or at(y, x) != at(y + 1, x + 1)
    return out


def oracle_f(gt, fg, bound_th=0.008):
    h, w = gt.shape
    r = bound_th if bound_th >= 1 else math.ceil(bound_th * math.sqrt(h * h + w * w))
    gb, fb = oracle_boundary(gt), oracle_boundary(fg)

    def near(b, y, x):
        return any(b[yy, xx] for yy in range(max(0, y - r), min(h, y + r + 1))
                   for xx in range(max(0, x - r), min(w, x + r + 1)) if (yy - y) ** 2 + (xx - x) ** 2 <= r * r)

    n_fg, n_gt = int(fb.sum()), int(gb.sum())
    if n_fg == 0 and n_gt > 0:
        p, rc = 1.0, 0.0
    elif n_fg > 0 and n_gt == 0:
        p, rc = 0.0, 1.0
    elif n_fg == 0 and n_gt == 0:
        p, rc = 1.0, 1.0
    else:
        p = sum(near(gb, y, x) for y, x in zip(*np.nonzero(fb))) / n_fg
        rc = sum(near(fb, y, x) for y, x in zip(*np.nonzero(gb))) / n_gt
    return 0.0 if p + rc == 0 else 2 * p * rc / (p + rc)


def random_masks(rng, frames, h, w):
    out = np.zeros((frames, h, w), dtype=bool)
    yy, xx = np.mgrid[:h, :w]
    for t in range(frames):
        kind = rng.choice(["empty", "blob", "noise", "full"], p=[0.1, 0.6, 0.25, 0.05])
        if kind == "blob":
            for _ in range(int(rng.integers(1, 4))):
                cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(1, max(h, w) / 3)
                out[t] |= (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
        elif kind == "noise":
            out[t] = rng.random((h, w)) < rng.uniform(0.05, 0.6)
        elif kind == "full":
            out[t] = True
    return out


@pytest.mark.parametrize("seed", range(12))
def test_j_and_f_equal_the_per_pixel_oracle_on_random_masks(seed):
    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(1, 40)), int(rng.integers(1, 60))
    gt = random_masks(rng, 4, h, w)
    fg = random_masks(rng, 4, h, w)
    fg[1] = gt[1]  # one perfect frame
    if seed % 3 == 0:  # a shifted copy: boundaries near one another
        fg[2] = np.roll(gt[2], int(rng.integers(1, 4)), axis=1)
    bound_th = [0.008, 0.05, 2][seed % 3]
    got_j, got_f = region_similarity(gt, fg), contour_accuracy(gt, fg, bound_th)
    for t in range(4):
        assert (boundary_map(gt[t])[0] == oracle_boundary(gt[t])).all()
        assert got_j[t] == pytest.approx(oracle_j(gt[t], fg[t]), abs=1e-15)
        assert got_f[t] == pytest.approx(oracle_f(gt[t], fg[t], bound_th), abs=1e-15), (seed, t)


def test_empty_conventions_and_radius():
    empty, full = np.zeros((6, 8), bool), np.ones((6, 8), bool)
    assert region_similarity(empty, empty).tolist() == [1.0]
    assert region_similarity(empty, full).tolist() == [0.0]
    assert contour_accuracy(empty, empty).tolist() == [1.0]
    square = np.zeros((6, 8), bool)
    square[1:4, 2:5] = True
    assert contour_accuracy(square, empty).tolist() == [0.0]   # precision 1, recall 0
    assert contour_accuracy(empty, square).tolist() == [0.0]   # precision 0, recall 1
    assert contour_accuracy(square, square).tolist() == [1.0]
    assert boundary_radius(480, 854) == 8  # ceil(0.008 * 979.6) on DAVIS's 480p frames
    assert boundary_radius(1080, 1920, 3) == 3


def test_statistics_and_dataset_mean():
    assert frame_statistics(np.array([0.2, np.nan, 0.8, 0.6])) == {"mean": pytest.approx(1.6 / 3), "recall": 0.5}
    a = np.zeros((3, 10, 10), bool)
    a[:, 2:6, 2:6] = True
    one = j_and_f(a, a)
    assert one == {"J": 1.0, "F": 1.0, "J&F": 1.0}
    half = j_and_f(a, np.zeros_like(a))
    assert half == {"J": 0.0, "F": 0.0, "J&F": 0.0}
    assert dataset_j_and_f([one, half]) == {"J": 0.5, "F": 0.5, "J&F": 0.5}
    assert math.isnan(dataset_j_and_f([])["J&F"])
    with pytest.raises(ValueError, match="differ in shape"):
        region_similarity(a, a[:2])


def test_disk_dilation_equals_opencv_dilate_with_the_disk_kernel():
    """The reference dilates with ``cv2.dilate`` and a disk structuring element (default border)."""
    cv2 = pytest.importorskip("cv2")
    from metrics.functional.region_contour import dilate_disk

    rng = np.random.default_rng(5)
    for radius in (1, 2, 4, 8):
        r = np.arange(-radius, radius + 1)
        kernel = (r[:, None] ** 2 + r[None, :] ** 2 <= radius ** 2).astype(np.uint8)
        masks = rng.random((3, 23, 31)) < 0.03
        got = dilate_disk(masks, radius)
        for t in range(3):
            want = cv2.dilate(masks[t].astype(np.uint8), kernel).astype(bool)
            assert (got[t] == want).all(), radius
