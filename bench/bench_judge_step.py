"""Training-step time of the toy VC-Inspector judge with and without the frozen-tower memo.

``python bench/bench_judge_step.py [--batches 24] [--rounds 3]``: builds the judge exactly as
configs/judge_demo.yaml does (through the CLI parser), collates ``--batches`` real training
batches once (so data loading is out of the timing), then times optimiser steps (answer and flag
losses, backward, AdamW) over the same batches with ``video_feature_cache`` off and on,
alternating rounds so both see the same machine load. The memo is filled by one untimed pass
first: in a fit, most draws are of clips seen before (the demo's ~7,000 training corruptions
come from 2,000 clips). The config's data is generated when missing, as ``cli.py fit`` does.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import core  # noqa: E402,F401

import torch  # noqa: E402

from cli import cli_main  # noqa: E402
from models.video_feature_cache import FrozenVideoFeatureCache  # noqa: E402


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(ROOT / "configs" / "judge_demo.yaml"))
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    extra = []
    if not (ROOT / "data" / "judge_towers" / "qwen_vision.bin").exists():  # the same speed with a random tower
        print("note: data/judge_towers/ not written yet (scripts/pretrain_judge_vision.py); timing a random tower")
        extra.append("--model.init_args.vision_checkpoint=null")
    cli = cli_main(["--config", args.config, "--data.init_args.num_workers=0", *extra], run=False)
    module, data = cli.model, cli.datamodule
    data.prepare_data()
    data.setup("fit")
    loader = iter(data.train_dataloader())
    batches = [next(loader) for _ in range(args.batches)]
    judge = module.judge
    judge.train()
    optimizer = torch.optim.AdamW([p for p in judge.parameters() if p.requires_grad], lr=1e-5)
    weight = float(module.hparams.score_token_weight)
    memo = FrozenVideoFeatureCache(4096)

    def step(batch) -> float:
        start = time.perf_counter()
        losses = judge.losses(batch, score_weight=weight)
        loss = losses["answer"] + losses.get("error", 0.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return time.perf_counter() - start

    judge.video_cache = memo
    for batch in batches[:2]:
        step(batch)  # warm-up
    for batch in batches:
        memo.features(judge.base_model.model, batch["pixel_values_videos"], batch["video_grid_thw"],
                      batch["video_digests"])
    times: dict[str, list[float]] = {"plain": [], "cached": []}
    for _ in range(args.rounds):
        for name, cache in (("plain", None), ("cached", memo)):
            judge.video_cache = cache
            times[name].extend(step(batch) for batch in batches)
    report = {name: round(1000 * statistics.median(t), 1) for name, t in times.items()}
    report["speed-up"] = round(report["plain"] / report["cached"], 3)
    report["memo clips"] = len(memo)
    report["peak RSS MB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(f"median ms per training step (batch {data.hparams.batch_size}, {args.threads} thread(s)): "
          f"plain {report['plain']}, memo {report['cached']} (x{report['speed-up']}); "
          f"{report['memo clips']} clips held, peak RSS {report['peak RSS MB']} MB")
    return report


if __name__ == "__main__":
    main()
