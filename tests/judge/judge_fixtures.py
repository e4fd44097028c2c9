"""Shared helpers of the judge tests: the tiny judge's sizes, random frames, a template explanation."""
import numpy as np

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64,
        "vision_hidden_size": 32, "vision_depth": 1, "vision_heads": 2}
EXPLANATION = ("The caption does not accurately capture the video content. For example, the objects "
               "(blue circle) are incorrect.")


def random_frames(seed, t=4, size=64):
    """``(t, size, size, 3)`` uint8 noise frames."""
    return np.random.default_rng(seed).integers(0, 256, (t, size, size, 3), dtype=np.uint8)
