"""Masks' cost per clip: SAM 2 video mode (prompt, propagate both ways, re-prompt where box and mask part
ways, propagate again) against the frame-by-frame mode, for 1..P phrases on a clip of N frames, RLE
encoding included. The tiny random SAM 2 by default (CPU plumbing cost); name a real model to measure it.

    PYTHONPATH=. .venv/bin/python bench/bench_masks.py [--frames 40] [--height 360 --width 640] [--phrases 1 2 4]
        [--model-config configs/sam2.1/sam2.1_hiera_l.yaml --checkpoint sam2.1_hiera_large.pt --device cuda]
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import time

import numpy as np
import torch


def clip(frames: int, height: int, width: int, phrases: int, seed: int = 0):
    """Random frames and one box per phrase drifting across them (a jump every tenth frame)."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, (frames, height, width, 3), dtype=np.uint8)
    start = rng.uniform(0, 0.5, (phrases, 2)) * [width, height]
    size = rng.uniform(0.2, 0.4, (phrases, 2)) * [width, height]
    drift = np.linspace(0, 0.1, frames)[:, None, None] * [width, height]
    top_left = start[None] + drift
    top_left[::10] += 0.3 * np.array([width, height])  # boxes that jump: re-prompts in video mode
    top_left = np.minimum(top_left, np.array([width, height]) - size[None])
    boxes = np.concatenate([top_left, top_left + size[None]], -1).astype(np.float32)
    keep = np.ones((frames, phrases), bool)
    scores = rng.uniform(0.5, 1.0, (frames, phrases))
    return pixels, boxes, keep, scores


def timed(fn, repeats: int) -> tuple[float, object]:
    """The fastest of ``repeats`` runs after a warm-up (lazy model build, allocator): on a shared machine
    the minimum is the run the others disturbed least."""
    value = fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    from models.masks import SAM2FrameMasker, SAM2VideoMasker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=40, help="frames per clip (8 s on the 5-fps grid)")
    parser.add_argument("--height", type=int, default=128)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--phrases", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--model-config", default="configs/annotation/models/sam2_tiny_random.yaml")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    maskers = {
        "video (re-prompt 1 round)": SAM2VideoMasker(args.model_config, args.checkpoint, device=args.device),
        "video (no re-prompt)": SAM2VideoMasker(args.model_config, args.checkpoint, reprompt_rounds=0,
                                                device=args.device),
        "frames": SAM2FrameMasker(args.model_config, args.checkpoint, device=args.device),
    }
    print(f"SAM 2 {args.model_config} on {next(iter(maskers.values())).device}; clip of {args.frames} frames "
          f"at {args.width}x{args.height}; fastest of {args.repeats} runs after a warm-up")
    print(f"{'mode':28s} {'phrases':>7s} {'s / clip':>9s} {'s / phrase':>10s} {'ms / mask':>9s} {'prompts':>7s}")
    for phrases in args.phrases:
        data = clip(args.frames, args.height, args.width, phrases)
        for name, masker in maskers.items():
            seconds, answer = timed(lambda: masker(*data), args.repeats)
            prompts = int(masker.prompted[-1].sum()) if getattr(masker, "prompted", None) else args.frames * phrases
            masks = sum(m is not None for row in answer for m in row)
            print(f"{name:28s} {phrases:7d} {seconds:9.3f} {seconds / phrases:10.3f} {1000 * seconds / masks:9.2f} "
                  f"{prompts:7d}")


if __name__ == "__main__":
    main()
