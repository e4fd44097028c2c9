"""Speed of synthetic-data generation: clips/s of drawing alone, and of the full dataset writer
(draw + H.264 encode + annotations) with 1 and 2 worker processes.

    PYTHONPATH=. python bench/bench_synthetic.py [--clips 40] [--frame-size 128] [--duration-s 8]

The demo generates 2400 clips at first use. Wall-clock rates depend on what else runs on the
machine, so CPU seconds per clip (this process and its workers) are printed too.
"""
from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from datamodules.synthetic import generate_synthetic_dataset
from datamodules.synthetic_scenes import SyntheticConfig, clip_rng, generate_clip


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=40)
    parser.add_argument("--frame-size", type=int, default=128)
    parser.add_argument("--duration-s", type=float, default=8.0)
    args = parser.parse_args()
    config = SyntheticConfig(frame_size=args.frame_size, duration_s=args.duration_s)
    print(f"{args.clips} clips of {config.num_frames} frames at {config.width}x{config.height}, "
          f"x264 preset {config.preset}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    rows = []

    wall, cpu = time.perf_counter(), cpu_seconds()
    for i in range(args.clips):
        generate_clip(clip_rng(0, "train", i), config, "train", i)
    rows.append(("draw + annotate only (no encoding)", 1, time.perf_counter() - wall, cpu_seconds() - cpu))

    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as root:
            wall, cpu = time.perf_counter(), cpu_seconds()
            generate_synthetic_dataset(root, num_train=args.clips, num_val=0, num_test=0, workers=workers,
                                       frame_size=args.frame_size, duration_s=args.duration_s)
            rows.append(("full dataset writer", workers, time.perf_counter() - wall, cpu_seconds() - cpu))
            size_kib = sum(p.stat().st_size for p in Path(root, "videos").iterdir()) / 1024 / args.clips

    print(f"{'stage':<36} {'workers':>7} {'wall s':>7} {'clips/s':>8} {'CPU ms/clip':>12} {'2400 clips':>11}")
    for name, workers, seconds, cpu in rows:
        rate = args.clips / seconds
        print(f"{name:<36} {workers:>7} {seconds:>7.2f} {rate:>8.1f} {cpu / args.clips * 1000:>12.0f} "
              f"{2400 / rate:>10.0f}s")
    print(f"video size: {size_kib:.0f} KiB per clip")


if __name__ == "__main__":
    main()
