"""Clips per second of one worker for the tracker Stage 3 backends (the tracking part, in the frame
worker) at tiny size: synthetic clips decoded as the pipeline decodes them, Stage 1 from the noise-free
oracle, then the oracle point tracker, CoTracker3 (tiny random, batched) and SAM 2 (tiny random).

    PYTHONPATH=. .venv/bin/python bench/bench_stage3_trackers.py [--clips 6] [--seconds 4] [--threads 1]
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import tempfile
import time
from pathlib import Path

import torch

from annotation.clips import clips_from_records
from annotation.stage1.decoding import decode_clip
from annotation.stage1.noisy_oracle import NoisyOracleFrameAnnotator
from annotation.stage3.by_tracking import CoTrackerStage3, OracleTrackerStage3, SAM2Stage3
from formats.records import read_records

ROOT = Path(__file__).resolve().parents[1]
TINY_COTRACKER = {"window_len": 20, "hidden_size": 32, "num_heads": 2, "time_depth": 1, "space_depth": 1,
                  "num_virtual_tracks": 4, "latent_dim": 32, "corr_hidden": 32, "corr_out": 16,
                  "model_resolution": [64, 64]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--key-frames", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from datamodules.synthetic import generate_synthetic_dataset

    with tempfile.TemporaryDirectory() as tmp:
        paths = generate_synthetic_dataset(tmp, num_train=0, num_val=0, num_test=args.clips, seed=0, workers=1,
                                           duration_s=args.seconds)
        records = {r.key: r for r in read_records(paths["test"])}
        specs = clips_from_records(list(records.values()))
        decoded = [decode_clip(Path(tmp) / "videos", s) for s in specs]
        frames = NoisyOracleFrameAnnotator(records=records).annotate(decoded)
        boxes = sum(len(f.phrases) for clip in frames for f in clip[:1])
        print(f"{len(decoded)} clips, {len(decoded[0].frames)} frames of {decoded[0].width}x{decoded[0].height}, "
              f"{args.key_frames} key frames, torch threads {args.threads}, device "
              f"{'cuda' if torch.cuda.is_available() else 'cpu'} (first-frame boxes: {boxes})")
        backends = {
            "oracle point tracker": OracleTrackerStage3(records=records, key_frames=args.key_frames),
            "CoTracker3 (tiny random, batch 4)": CoTrackerStage3(None, model_config=TINY_COTRACKER, iters=4,
                                                                 batch_size=4, key_frames=args.key_frames),
            "SAM 2 (tiny random)": SAM2Stage3(str(ROOT / "configs/annotation/models/sam2_tiny_random.yaml"),
                                              seed=3, key_frames=args.key_frames),
        }
        for name, backend in backends.items():
            backend.track(decoded[:1], frames[:1])  # load the model, warm up
            start = time.perf_counter()
            tracks = backend.track(decoded, frames)
            seconds = time.perf_counter() - start
            queries = sum(len(t) for t in tracks)
            print(f"{name:36s} {len(decoded) / seconds:8.2f} clips/s  ({queries} tracked boxes, {seconds:.2f} s)")


if __name__ == "__main__":
    main()
