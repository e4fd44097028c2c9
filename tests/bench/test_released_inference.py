"""bench/released_inference.py, the released GROVE's input procedure that bench/bench_predict.py
compares with the project's: its re-run of the slow CLIPImageProcessor, SAM's ResizeLongestSide and
the caption's centre frames give the project's preprocessing and caption positions (the bench asserts
the same on a decoded clip)."""
import numpy as np
import pytest
import torch

from bench.released_inference import (
    caption_indices,
    clip_image_processor,
    grounding_enc_processor,
    resize_longest_side,
)
from models.grove.frame_sampling import centre_frames
from models.grove.image_processing import preprocess_global, preprocess_grounding


@pytest.mark.parametrize("height, width", [(256, 455), (300, 200)])
def test_released_pixels_are_the_projects(height, width):
    frames = np.random.default_rng(0).integers(0, 256, (2, height, width, 3), dtype=np.uint8)
    released = clip_image_processor(frames)
    torch.testing.assert_close(released, preprocess_global(frames, 336, "clip"), rtol=1e-6, atol=1e-6)
    resized = np.stack([resize_longest_side(f) for f in frames])
    grounding = grounding_enc_processor(torch.from_numpy(resized).permute(3, 0, 1, 2).contiguous())
    assert torch.equal(grounding.permute(1, 0, 2, 3), preprocess_grounding(frames, 512, "sam"))


def test_caption_frames_of_an_8s_clip_are_the_segment_centres():
    assert caption_indices(40) == list(range(2, 40, 5)) == centre_frames(40, 8).tolist()
