"""Training throughput, peak memory and inference latency of the demo (tiny) GROVE on CPU.

``python bench/bench_training.py [--steps 30] [--root data/synthetic]``: builds model and data
exactly as configs/demo.yaml does (through the CLI parser), times optimiser steps on real
decoded batches (data loading included, as in training), then times full inference per clip
(greedy caption + boxes on every annotated frame).
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import resource
import time
from pathlib import Path

import torch

from cli import cli_main

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--clips", type=int, default=10, help="clips for the inference latency")
    parser.add_argument("--root", default=None, help="synthetic data root (default: the demo's)")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    extra = [f"--data.init_args.root={args.root}"] if args.root else []
    towers = [ROOT / "data" / "demo_towers" / name for name in ("open_clip_vision.bin", "sam_image_encoder.pth")]
    if not all(path.exists() for path in towers):  # the speed is the same with random towers
        print("note: data/demo_towers/ not written yet (make demo); timing with random towers")
        extra += ["--model.init_args.global_encoder.checkpoint=null",
                  "--model.init_args.grounding_encoder.checkpoint=null"]
    cli = cli_main(["--config", str(ROOT / "configs" / "demo.yaml"), *extra], run=False)
    module, data = cli.model, cli.datamodule
    data.prepare_data()
    data.setup("fit")
    data.setup("test")
    module.train()
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-4)
    loader = iter(data.train_dataloader())
    batch_size = data.hparams.batch_size
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        batch = next(loader)
        loss, _, _ = module.compute_losses(batch)
        optimizer.zero_grad(set_to_none=True)
        loss["loss"].backward()
        optimizer.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    step_s = sum(times) / len(times)
    module.eval()
    latencies = []
    test_loader = torch.utils.data.DataLoader(data.datasets["test"], batch_size=1,
                                              collate_fn=data.test_dataloader().collate_fn)
    for i, batch in enumerate(test_loader):
        if i >= args.clips:
            break
        start = time.perf_counter()
        module.predict_clips(batch)
        latencies.append(time.perf_counter() - start)
    result = {
        "threads": torch.get_num_threads(), "batch_size": batch_size, "step_s": step_s,
        "train_clips_per_s": batch_size / step_s, "peak_rss_mb": peak_rss_mb(),
        "inference_s_per_clip": sum(latencies) / len(latencies),
        "annotated_frames_per_clip": int(batch["frame_mask"].sum()),
    }
    print(f"tiny GROVE on CPU ({result['threads']} threads, batch {batch_size}, T=8):")
    print(f"  training step (data loading included): {step_s * 1000:.0f} ms  "
          f"-> {result['train_clips_per_s']:.1f} clips/s")
    print(f"  peak resident memory: {result['peak_rss_mb']:.0f} MB")
    print(f"  inference per clip (greedy caption + boxes on {result['annotated_frames_per_clip']} frames): "
          f"{result['inference_s_per_clip'] * 1000:.0f} ms")
    return result


if __name__ == "__main__":
    main()
