"""RLE round trips and set measures against plain numpy on random masks."""
import numpy as np
import pytest

from formats.mask_rle import decode_masks, encode_masks, mask_areas, mask_boxes, mask_iou_matrix, to_compressed


def _random_masks(rng, n, h, w):
    masks = np.zeros((n, h, w), dtype=bool)
    for m in masks:
        if rng.random() < 0.15:
            continue  # some empty masks
        y1, x1 = rng.integers(0, h), rng.integers(0, w)
        m[y1:rng.integers(y1, h + 1), x1:rng.integers(x1, w + 1)] = True
        m ^= rng.random((h, w)) < 0.05  # holes and specks
    return masks


@pytest.mark.parametrize("seed", range(8))
def test_round_trip_areas_boxes_and_ious_equal_numpy(seed):
    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    a, b = _random_masks(rng, 5, h, w), _random_masks(rng, 4, h, w)
    ra, rb = encode_masks(a), encode_masks(b)
    assert all(isinstance(r["counts"], str) and r["size"] == [h, w] for r in ra)
    np.testing.assert_array_equal(decode_masks(ra), a)
    np.testing.assert_array_equal(mask_areas(ra), a.sum((1, 2)))
    inter = (a[:, None] & b[None]).sum((2, 3))
    union = (a[:, None] | b[None]).sum((2, 3))
    expected = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
    np.testing.assert_allclose(mask_iou_matrix(ra, rb), expected, atol=1e-12)
    for m, box in zip(a, mask_boxes(ra)):
        if m.any():
            ys, xs = np.nonzero(m)
            assert box.tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
        else:
            assert box.tolist() == [0, 0, 0, 0]


def test_uncompressed_rle_and_polygons_become_the_same_compressed_mask():
    mask = np.zeros((4, 5), dtype=bool)
    mask[1:3, 1:4] = True
    column_major = mask.T.reshape(-1)
    runs, value, count = [], False, 0
    for v in column_major:
        if v != value:
            runs.append(count)
            value, count = v, 0
        count += 1
    runs.append(count)
    rle = to_compressed({"size": [4, 5], "counts": runs}, 4, 5)
    np.testing.assert_array_equal(decode_masks([rle])[0], mask)
    square = to_compressed([[1, 1, 3, 1, 3, 3, 1, 3]], 8, 8)
    assert decode_masks([square])[0].sum() > 0


def test_bad_masks_are_named():
    with pytest.raises(ValueError, match="clip 'a'.*size"):
        to_compressed({"size": [3, 3], "counts": "0"}, 4, 5, where="gt.json, clip 'a'")
    with pytest.raises(ValueError, match="sum to"):
        to_compressed({"size": [2, 2], "counts": [1, 1]}, 2, 2)
    with pytest.raises(ValueError, match="polygon"):
        to_compressed([[0, 0, 1, 1]], 4, 4)
    with pytest.raises(ValueError, match="RLE object or a list"):
        to_compressed(3, 4, 4)


def test_areas_of_many_masks_at_once():
    masks = np.zeros((600, 6, 7), dtype=bool)
    for i in range(600):
        masks[i].flat[: i % 42] = True
    assert mask_areas(encode_masks(masks)).tolist() == [float(i % 42) for i in range(600)]


@pytest.mark.parametrize("seed", range(4))
def test_runs_of_encoded_masks_cover_the_frame_and_garbage_is_refused(seed):
    from formats.mask_rle import rle_runs_total

    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(1, 30)), int(rng.integers(1, 30))
    for rle in encode_masks(_random_masks(rng, 4, h, w)):
        assert rle_runs_total(rle["counts"]) == h * w
    with pytest.raises(ValueError, match="not a valid compressed RLE"):
        to_compressed({"size": [h, w], "counts": "@@@@"}, h, w)  # pycocotools itself accepts this string


def test_bad_mask_numbers_are_named_before_rasterising():
    import math
    import random

    import pytest

    from formats.mask_rle import to_compressed

    rng = random.Random(0)
    bad_values = [math.nan, math.inf, -math.inf, 1e12, -1e12, "3", None, True, [1]]
    for _ in range(60):
        h, w = rng.randint(4, 64), rng.randint(4, 64)
        ring = [float(rng.randint(0, w - 1)) if k % 2 == 0 else float(rng.randint(0, h - 1)) for k in range(8)]
        assert to_compressed([list(ring)], h, w)["size"] == [h, w]  # a good polygon still passes
        spot, value = rng.randrange(8), rng.choice(bad_values)
        ring[spot] = value
        where = f"gt.json, clip 'c{spot}', frame 3, mask 1"
        with pytest.raises(ValueError, match=rf"clip 'c{spot}', frame 3, mask 1: polygon 0 [xy] coordinate"):
            to_compressed([ring], h, w, where)
    for size in (["4", 4], [4.5, 4], [-4, 4], [4], "4x4"):
        with pytest.raises(ValueError, match="mask size"):
            to_compressed({"size": size, "counts": [16]}, 4, 4, "m")
    for counts in ([8, "8"], [8, -8, 16], [8, 8.5, 7.5], [math.nan, 16]):
        with pytest.raises(ValueError, match="RLE run"):
            to_compressed({"size": [4, 4], "counts": counts}, 4, 4, "m")
