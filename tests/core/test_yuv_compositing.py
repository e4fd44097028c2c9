"""Blending in YUV: hand-computed colours, the RGB blend's YUV within a level, untouched samples kept."""
from core.yuv_compositing import FULL_RANGE, LUMA_WEIGHTS, YuvFrame, blend_yuv, prepare_overlay, rgb_to_yuv

import numpy as np
import pytest


def test_colours_by_hand():
    white_black_red = np.array([[255, 255, 255], [0, 0, 0], [255, 0, 0]], np.uint8)
    limited_601 = np.rint(rgb_to_yuv(white_black_red))
    assert limited_601.tolist() == [[235, 128, 128], [16, 128, 128], [81, 90, 240]]
    # red: Y = 16 + 219 * 0.2126 = 62.6, U = 128 - 224 * 0.2126 / (2 * 0.9278) = 102.3, V = 128 + 112
    assert np.rint(rgb_to_yuv(white_black_red[2], colorspace=1)).tolist() == [63, 102, 240]
    full = np.rint(rgb_to_yuv(white_black_red, colorspace=1, color_range=FULL_RANGE))
    assert full.tolist() == [[255, 128, 128], [0, 128, 128], [54, 99, 256]]  # (V 255.5 is clipped when drawn)
    assert set(LUMA_WEIGHTS) >= {1, 5, 6, 9}


def _rgb_reference(frame_yuv: np.ndarray, overlay: np.ndarray, colorspace: int, color_range: int) -> np.ndarray:
    """The same blend the long way: the frame's YUV to RGB (the exact inverse matrix, no rounding),
    blended in RGB with the overlay's alpha, back to YUV."""
    kr, kb = LUMA_WEIGHTS.get(colorspace, (0.299, 0.114))
    y, u, v = (frame_yuv[..., i].astype(float) for i in range(3))
    if color_range == FULL_RANGE:
        luma, cb, cr = y / 255, (u - 128) / 255, (v - 128) / 255
    else:
        luma, cb, cr = (y - 16) / 219, (u - 128) / 224, (v - 128) / 224
    r = luma + 2 * (1 - kr) * cr
    b = luma + 2 * (1 - kb) * cb
    g = (luma - kr * r - kb * b) / (1 - kr - kb)
    rgb = np.stack([r, g, b], -1) * 255
    a = overlay[..., 3:4] / 255.0
    return rgb_to_yuv_float(rgb * (1 - a) + overlay[..., :3] * a, colorspace, color_range)


def rgb_to_yuv_float(rgb, colorspace, color_range):
    kr, kb = LUMA_WEIGHTS.get(colorspace, (0.299, 0.114))
    e = rgb / 255.0
    luma = kr * e[..., 0] + (1 - kr - kb) * e[..., 1] + kb * e[..., 2]
    cb, cr = (e[..., 2] - luma) / (2 * (1 - kb)), (e[..., 0] - luma) / (2 * (1 - kr))
    if color_range == FULL_RANGE:
        return np.stack([255 * luma, 128 + 255 * cb, 128 + 255 * cr], -1)
    return np.stack([16 + 219 * luma, 128 + 224 * cb, 128 + 224 * cr], -1)


def _random_case(rng, h, w, n):
    # frames whose YUV maps inside the RGB cube (so the long way needs no clipping): YUV of random RGB
    rgb = rng.integers(0, 256, (n, h, w, 3))
    overlay = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    overlay[..., 3] *= rng.random((h, w)) < rng.random()
    overlay[: h // 3, : w // 3, 3] = 255  # an opaque corner: the overlay's own colour there
    return rgb, overlay


@pytest.mark.parametrize("colorspace,color_range", [(2, 0), (1, 1), (5, FULL_RANGE), (9, 1)])
@pytest.mark.parametrize("subsampled", [False, True])
def test_the_yuv_blend_is_the_rgb_blend_within_a_level(colorspace, color_range, subsampled):
    rng = np.random.default_rng(colorspace * 10 + color_range + subsampled)
    for trial in range(3):
        h, w, n = 2 * int(rng.integers(4, 20)), 2 * int(rng.integers(4, 20)), int(rng.integers(1, 4))
        rgb, overlay = _random_case(rng, h, w, n)
        yuv = np.clip(np.rint(rgb_to_yuv_float(rgb.astype(float), colorspace, color_range)), 0, 255)
        if subsampled:  # 4:2:0 planes: the full-resolution chroma averaged over each 2x2 block
            chroma = yuv[..., 1:].reshape(n, h // 2, 2, w // 2, 2, 2).mean(axis=(2, 4))
            yuv = np.concatenate([yuv[..., :1], np.repeat(np.repeat(chroma, 2, 1), 2, 2)], -1)
            planes = [yuv[..., 0], chroma[..., 0], chroma[..., 1]]
        else:
            planes = [yuv[..., 0], yuv[..., 1], yuv[..., 2]]
        planes = [np.ascontiguousarray(np.rint(p).astype(np.uint8)) for p in planes]
        before = [p.copy() for p in planes]
        blend_yuv(*planes, prepare_overlay(overlay, subsampled, colorspace, color_range))
        expected = np.stack([_rgb_reference(np.stack([before[0][k], *(np.repeat(np.repeat(c[k], 2, 0), 2, 1)
                                                                        if subsampled else c[k] for c in before[1:])],
                                                               -1), overlay, colorspace, color_range)
                             for k in range(n)])
        expected = np.clip(expected, 0, 255)
        assert np.abs(planes[0] - expected[..., 0]).max() <= 1.0
        if subsampled:
            expected_chroma = expected[..., 1:].reshape(n, h // 2, 2, w // 2, 2, 2).mean(axis=(2, 4))
            assert np.abs(np.stack(planes[1:], -1) - expected_chroma).max() <= 1.0
        else:
            assert np.abs(np.stack(planes[1:], -1) - expected[..., 1:]).max() <= 1.0
        untouched = overlay[..., 3] == 0
        assert np.array_equal(planes[0][:, untouched], before[0][:, untouched])  # the decoder's own values
        if subsampled:
            empty_blocks = untouched.reshape(h // 2, 2, w // 2, 2).all(axis=(1, 3))
            assert all(np.array_equal(p[:, empty_blocks], q[:, empty_blocks]) for p, q in zip(planes[1:], before[1:]))
        opaque = np.clip(np.rint(rgb_to_yuv(overlay[:2, :2, :3], colorspace, color_range)), 0, 255)
        assert (planes[0][:, 0, 0] == opaque[0, 0, 0]).all()  # the overlay's own colour where it is opaque
        chroma = (opaque[..., 1:].reshape(4, 2).sum(0) * 255 + 510) // 1020 if subsampled else opaque[0, 0, 1:]
        assert (planes[1][:, 0, 0] == chroma[0]).all() and (planes[2][:, 0, 0] == chroma[1]).all()


def test_a_transparent_overlay_changes_nothing_and_bad_planes_are_refused():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 256, (2, 8, 10), dtype=np.uint8)
    u, v = y[:, ::2, ::2].copy(), y[:, 1::2, 1::2].copy()
    before = [p.copy() for p in (y, u, v)]
    blend_yuv(y, u, v, prepare_overlay(np.zeros((8, 10, 4), np.uint8), True))
    assert all(np.array_equal(a, b) for a, b in zip((y, u, v), before))
    with pytest.raises(ValueError, match="C-contiguous"):
        blend_yuv(y[:, :, ::-1], u, v, prepare_overlay(np.zeros((8, 10, 4), np.uint8), True))
    with pytest.raises(ValueError, match="even frame sizes"):
        prepare_overlay(np.zeros((7, 10, 4), np.uint8), True)
    frame = YuvFrame(y[0], u[0], v[0], colorspace=1, color_range=FULL_RANGE)
    assert frame.subsampled and frame.tags == (1, FULL_RANGE, 2, 2)
