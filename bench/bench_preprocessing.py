"""How far the fast preprocessing options are from the released GROVE's pixels, and their speed.

Grey levels of the resized frames against CLIPImageProcessor (CLIP, 336 px) and SAM's
ResizeLongestSide (SAM, 512 px), on random frames of random sizes (noise and smooth images):

    PYTHONPATH=. .venv/bin/python bench/bench_preprocessing.py [--frames 24] [--seed 0]
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before transformers / segment_anything import it)

import argparse
import time

import numpy as np
import torch

from models.grove.image_processing import (
    CLIP_MEAN,
    CLIP_STD,
    SAM_MEAN,
    SAM_STD,
    preprocess_global,
    preprocess_grounding,
)


def random_frames(rng: np.random.Generator, count: int):
    for k in range(count):
        h, w = (int(v) for v in rng.integers(40, 720, size=2))
        if k % 2 == 0:
            yield rng.integers(0, 256, size=(1, h, w, 3), dtype=np.uint8)
        else:
            walk = np.cumsum(np.cumsum(rng.normal(size=(1, h, w, 3)), 1), 2)
            yield np.clip(walk * 255 / max(1e-6, np.ptp(walk)) + 128, 0, 255).astype(np.uint8)


def grey(x: torch.Tensor, mean, std) -> torch.Tensor:
    return x * torch.tensor(std).view(1, 3, 1, 1) + torch.tensor(mean).view(1, 3, 1, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from segment_anything.utils.transforms import ResizeLongestSide
    from transformers import CLIPImageProcessorPil

    clip_ref = CLIPImageProcessorPil(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    sam_ref = ResizeLongestSide(512)
    clip_scale = tuple(255 * m for m in CLIP_MEAN), tuple(255 * s for s in CLIP_STD)
    diffs: dict[str, list[torch.Tensor]] = {m: [] for m in ("clip", "clip_torch", "sam", "float")}
    times: dict[str, float] = dict.fromkeys(diffs, 0.0)
    for frames in random_frames(np.random.default_rng(args.seed), args.frames):
        ref = grey(torch.as_tensor(clip_ref.preprocess(list(frames), return_tensors="np")["pixel_values"]),
                   *clip_scale)
        for mode in ("clip", "clip_torch"):
            start = time.perf_counter()
            ours = preprocess_global(frames, 336, mode)
            times[mode] += time.perf_counter() - start
            diffs[mode].append((grey(ours, *clip_scale) - ref).abs().flatten())
        resized = torch.from_numpy(np.stack([sam_ref.apply_image(f) for f in frames])).permute(0, 3, 1, 2).float()
        h, w = resized.shape[-2:]
        for mode in ("sam", "float"):
            start = time.perf_counter()
            ours = preprocess_grounding(frames, 512, mode)
            times[mode] += time.perf_counter() - start
            diffs[mode].append((grey(ours, SAM_MEAN, SAM_STD)[..., :h, :w] - resized).abs().flatten())
    print(f"{args.frames} frames of random sizes; grey levels off the released preprocessing")
    print(f"{'mode':10s} {'max':>6s} {'mean':>8s} {'share off':>10s} {'ms/frame':>9s}")
    for mode, parts in diffs.items():
        d = torch.cat(parts)
        off = (d >= 0.5).float().mean().item()
        print(f"{mode:10s} {d.max().item():6.1f} {d.mean().item():8.4f} {100 * off:9.2f}% "
              f"{1000 * times[mode] / args.frames:9.1f}")


if __name__ == "__main__":
    main()
