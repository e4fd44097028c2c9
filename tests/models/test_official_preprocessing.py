"""The released GROVE's pixels: CLIPImageProcessor for CLIP and SAM's ResizeLongestSide for SAM,
compared in grey levels on random frames of random sizes (up- and down-scaling)."""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before transformers / segment_anything import it)

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


def _random_frames(seed: int, count: int = 6):
    """Frames of random sizes: noise and smooth gradients (the bicubic kernels differ most on noise)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        h, w = (int(v) for v in rng.integers(40, 720, size=2))
        if rng.random() < 0.5:
            yield rng.integers(0, 256, size=(2, h, w, 3), dtype=np.uint8)
        else:
            walk = np.cumsum(np.cumsum(rng.normal(size=(2, h, w, 3)), 1), 2)
            yield np.clip(walk * 255 / max(1e-6, np.ptp(walk)) + 128, 0, 255).astype(np.uint8)


def _clip_grey_levels(x: torch.Tensor) -> torch.Tensor:
    return x * torch.tensor(CLIP_STD).view(1, 3, 1, 1) * 255 + torch.tensor(CLIP_MEAN).view(1, 3, 1, 1) * 255


@pytest.mark.parametrize("seed", range(3))
def test_clip_equals_clip_image_processor(seed):
    from transformers import CLIPImageProcessorPil

    processor = CLIPImageProcessorPil(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    for frames in _random_frames(seed):
        ref = torch.as_tensor(processor.preprocess(list(frames), return_tensors="np")["pixel_values"])
        ours = preprocess_global(frames, 336, "clip")
        assert ours.shape == ref.shape == (2, 3, 336, 336)
        assert float((_clip_grey_levels(ours) - _clip_grey_levels(ref)).abs().max()) < 1e-3  # 0 grey levels off
        torch_path = (_clip_grey_levels(preprocess_global(frames, 336, "clip_torch")) - _clip_grey_levels(ref)).abs()
        assert float(torch_path.mean()) < 1  # the torch option: same geometry, other kernel


@pytest.mark.parametrize("seed", range(3))
def test_sam_equals_resize_longest_side(seed):
    from segment_anything.utils.transforms import ResizeLongestSide

    resize = ResizeLongestSide(512)
    for frames in _random_frames(seed):
        resized = np.stack([resize.apply_image(f) for f in frames])  # uint8, PIL bilinear
        h, w = resized.shape[1:3]
        ours = preprocess_grounding(frames, 512, "sam")
        assert ours.shape == (2, 3, 512, 512)
        grey = ours * torch.tensor(SAM_STD).view(1, 3, 1, 1) + torch.tensor(SAM_MEAN).view(1, 3, 1, 1)
        ref = torch.from_numpy(resized).permute(0, 3, 1, 2).float()
        assert float((grey[..., :h, :w] - ref).abs().max()) < 1e-3  # 0 grey levels off
        assert (ours[..., h:, :] == 0).all() and (ours[..., :, w:] == 0).all()  # padded after normalising
        fast = preprocess_grounding(frames, 512, "float")
        fast_grey = fast * torch.tensor(SAM_STD).view(1, 3, 1, 1) + torch.tensor(SAM_MEAN).view(1, 3, 1, 1)
        assert float((fast_grey[..., :h, :w] - ref).abs().max()) <= 1.5  # not quantised: within a grey level


def test_exact_modes_need_8_bit_frames():
    with pytest.raises(ValueError, match="uint8"):
        preprocess_global(np.zeros((1, 20, 30, 3), dtype=np.float32), 16, "clip")
    with pytest.raises(ValueError, match="grounding resize mode"):
        preprocess_grounding(np.zeros((1, 20, 30, 3), dtype=np.uint8), 16, "pil")
