"""Frame preprocessing for the two encoders."""
import numpy as np
import pytest
import torch

from models.grove.image_processing import (
    CLIP_MEAN,
    CLIP_STD,
    SAM_MEAN,
    SAM_STD,
    preprocess_global,
    preprocess_grounding,
)


def _frames(h, w, value=(200, 100, 50)):
    f = np.zeros((2, h, w, 3), dtype=np.uint8)
    f[...] = value
    return f


def test_grounding_resizes_longest_side_and_pads_bottom_right():
    x = preprocess_grounding(_frames(60, 120), 64)
    assert x.shape == (2, 3, 64, 64)
    expected = (torch.tensor([200.0, 100.0, 50.0]) - torch.tensor(SAM_MEAN)) / torch.tensor(SAM_STD)
    assert torch.allclose(x[0, :, :32, :].mean(dim=(1, 2)), expected, atol=1e-4)  # content rows
    assert torch.all(x[:, :, 32:, :] == 0)  # padding rows below the content


def test_global_modes_shapes_and_normalisation():
    frames = _frames(60, 120)
    for mode in ("squash", "center_crop", "pad"):
        x = preprocess_global(frames, 32, mode)
        assert x.shape == (2, 3, 32, 32)
    x = preprocess_global(frames, 32, "squash")
    expected = (torch.tensor([200.0, 100.0, 50.0]) / 255 - torch.tensor(CLIP_MEAN)) / torch.tensor(CLIP_STD)
    assert torch.allclose(x.mean(dim=(0, 2, 3)), expected, atol=1e-3)


def test_center_crop_keeps_the_middle():
    f = np.zeros((1, 40, 120, 3), dtype=np.uint8)
    f[:, :, :40] = 255  # left third white: cropped away by a centre crop
    x = preprocess_global(f, 40, "center_crop")
    assert x.max() < 0  # only black remains (negative after normalisation)


@pytest.mark.parametrize("seed", range(4))
def test_chunked_conversion_gives_the_whole_clip_values_bit_for_bit(seed, monkeypatch):
    """Frames are converted to float and resized a few at a time; the values equal converting the clip at once."""
    import models.grove.image_processing as module

    rng = np.random.default_rng(seed)
    n, h, w = int(rng.integers(1, 30)), int(rng.integers(20, 200)), int(rng.integers(20, 200))
    frames = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    size = int(rng.integers(16, 96))
    monkeypatch.setattr(module, "FLOAT_CHUNK_BYTES", 2**40)  # one chunk: the whole clip at once
    whole = [preprocess_grounding(frames, size)] + [preprocess_global(frames, size, m)
                                                   for m in ("squash", "center_crop", "pad", "clip_torch")]
    frame_bytes = h * w * 3 * 4
    monkeypatch.setattr(module, "FLOAT_CHUNK_BYTES", frame_bytes * int(rng.integers(1, 4)))  # 1-3 frames a chunk
    chunked = [preprocess_grounding(frames, size)] + [preprocess_global(frames, size, m)
                                                     for m in ("squash", "center_crop", "pad", "clip_torch")]
    for a, b in zip(whole, chunked):
        assert a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_normalising_in_place_gives_the_plain_expressions_values_bit_for_bit(seed):
    """Each mode against its steps written out plainly: resize, ``(x - mean) / std`` out of place, then
    (SAM) zero padding; random sizes, portrait and landscape, some already at the target size."""
    import torch.nn.functional as F

    from models.grove import image_processing as ip

    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(17, 140, 2))
    size = int(rng.choice([h, w, int(rng.integers(16, 96))]))
    frames = rng.integers(0, 256, (int(rng.integers(1, 4)), h, w, 3), dtype=np.uint8)
    clip_mean, clip_std = (torch.tensor(v).view(1, 3, 1, 1) * 255.0 for v in (ip.CLIP_MEAN, ip.CLIP_STD))
    sam_mean, sam_std = (torch.tensor(v).view(1, 3, 1, 1) for v in (ip.SAM_MEAN, ip.SAM_STD))

    resized = ip._pil_resize(frames, ip._clip_size(h, w, size), "bicubic")
    expected = (ip._centre_crop(resized, size).contiguous().float() - clip_mean) / clip_std
    assert torch.equal(preprocess_global(frames, size, "clip"), expected)
    x = ip._to_tensor(frames)
    for mode in ("squash", "center_crop", "pad", "clip_torch"):
        expected = (ip._global_geometry(x, size, mode) - clip_mean) / clip_std
        assert torch.equal(preprocess_global(frames, size, mode), expected), mode

    for mode, resize in (("sam", lambda: ip._pil_resize(frames, ip._longest_side_size(h, w, size), "bilinear").float()),
                         ("float", lambda: ip._resize_longest(x, size))):
        r = resize()
        expected = F.pad((r - sam_mean) / sam_std, (0, size - r.shape[-1], 0, size - r.shape[-2]), value=0.0)
        got = preprocess_grounding(frames, size, mode)
        assert got.is_contiguous() and torch.equal(got, expected), mode
