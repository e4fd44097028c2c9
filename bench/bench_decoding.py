"""Sparse 8-frame decoding (keyframe seeking, ``PyAVVideoSource.read_frames``) vs decoding every
frame and then sampling, on 8-s 25-fps clips: clips/s of each and their ratio.

    PYTHONPATH=. python bench/bench_decoding.py [--clips 4] [--repeats 2]

The 8 frames are the evaluation sampling: segment centres of the clip's 5-fps annotation grid.
455x256 (HowTo100M's size) is odd-width, so ``write_video`` stores it yuv444p; 456x256 shows the
usual yuv420p. Keyframe intervals: 1 s (``write_video``'s default) and 10 s (x264's default, what
re-encoded web video usually has: then a clip holds one or two keyframes and seeking helps less).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from datamodules.synthetic_scenes import SyntheticConfig, clip_rng, generate_clip
from formats.frame_grids import annotation_grid
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video
from models.grove.frame_sampling import centre_frames

FPS, NUM_FRAMES = 25, 200


def panning_clip(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Camera-like content: a smooth multi-scale texture panned 1-2 px per frame, plus sensor noise."""
    big_h, big_w = height + 2 * NUM_FRAMES, width + 2 * NUM_FRAMES
    texture = np.full((big_h, big_w, 3), 128.0, dtype=np.float32)
    for cell, amplitude in ((64, 60.0), (16, 25.0), (4, 10.0)):
        coarse = rng.normal(0, amplitude, size=(big_h // cell + 2, big_w // cell + 2, 3)).astype(np.float32)
        texture += np.kron(coarse, np.ones((cell, cell, 1), dtype=np.float32))[:big_h, :big_w]
    texture = np.clip(texture, 3, 252).astype(np.uint8)
    dx, dy = rng.uniform(1, 2), rng.uniform(-1, 1)
    x0 = np.round(np.arange(NUM_FRAMES) * dx).astype(int)
    y0 = np.round(NUM_FRAMES + np.arange(NUM_FRAMES) * dy).astype(int)
    rows = y0[:, None] + np.arange(height)
    cols = x0[:, None] + np.arange(width)
    frames = texture[rows[:, :, None], cols[:, None, :]]
    # sensor noise: 7 fields cycled (cheap to make; an encoder cannot exploit the cycle)
    noise = rng.integers(-3, 4, size=(7, height, width, 3), dtype=np.int8).astype(np.uint8)
    frames += noise[np.arange(NUM_FRAMES) % 7]  # wraps mod 256, but the texture keeps 3 px of headroom
    return frames


def time_reads(paths: list[Path], indices: np.ndarray, repeats: int, sparse: bool) -> tuple[float, float, list]:
    """Seconds (wall, CPU) per clip, opening each file afresh as a data loader does."""
    outputs = []
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        outputs = []
        for path in paths:
            with PyAVVideoSource(path) as video:
                outputs.append(video.read_frames(indices) if sparse else video.read_all()[indices])
    n = repeats * len(paths)
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    grid = annotation_grid(FPS, 0, NUM_FRAMES - 1)
    indices = grid[centre_frames(len(grid), 8)]
    print(f"{args.clips} clips x {args.repeats} repeats, {NUM_FRAMES} frames at {FPS} fps, frames {indices.tolist()}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(0)
    setups = [(455, 256, 25, "panning"), (455, 256, 250, "panning"), (456, 256, 25, "panning"),
              (456, 256, 250, "panning"), (128, 128, 25, "synthetic")]
    header = (f"{'content':<10} {'size':>8} {'pix_fmt':>8} {'GOP':>4} {'sparse clips/s':>15} {'full clips/s':>13} "
              f"{'speed-up':>9} {'(CPU)':>6} {'same':>5}")
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for width, height, gop, content in setups:
            paths = []
            for i in range(args.clips):
                if content == "synthetic":
                    frames, _ = generate_clip(clip_rng(0, "test", i), SyntheticConfig(), "test", i)
                else:
                    frames = panning_clip(rng, width, height)
                paths.append(write_video(Path(tmp) / f"{content}{width}_{gop}_{i}.mp4", frames, FPS, crf=23, gop=gop))
            sparse_wall, sparse_cpu, sparse = time_reads(paths, indices, args.repeats, sparse=True)
            full_wall, full_cpu, full = time_reads(paths, indices, args.repeats, sparse=False)
            same = all(np.array_equal(a, b) for a, b in zip(sparse, full))
            pix_fmt = "yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p"
            print(f"{content:<10} {f'{width}x{height}':>8} {pix_fmt:>8} {gop:>4} {1 / sparse_wall:>15.1f} "
                  f"{1 / full_wall:>13.1f} {full_wall / sparse_wall:>8.1f}x {full_cpu / sparse_cpu:>5.1f}x "
                  f"{'yes' if same else 'NO':>5}")


if __name__ == "__main__":
    main()
