"""Training-step time of the toy VC-Inspector judge: with and without the frozen-tower memo, and
with a LoRA adapter over its trained language model.

``python bench/bench_judge_step.py [--batches 24] [--rounds 3] [--adapter '{r: 32, alpha: 32, dropout: 0.0}']``:
builds the judge exactly as configs/judge_demo.yaml does (through the CLI parser; extra overrides
after ``--``), collates ``--batches`` real training batches once (so data loading is out of the
timing), then times optimiser steps (answer and flag losses, backward, AdamW) over the same
batches: the config's judge with ``video_feature_cache`` off and on, and with ``--adapter`` a
second judge that differs only by that adapter (memo on). Variants take turns batch by batch, so
all see the same machine load. The memos are filled by one untimed pass first: in a fit, most
draws are of clips seen before (the demo's ~7,000 training corruptions come from 2,000 clips).
The config's data is generated when missing, as ``cli.py fit`` does.
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import resource
import statistics
import time
from pathlib import Path

import torch

from cli import cli_main
from judge.model.video_feature_cache import FrozenVideoFeatureCache

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(ROOT / "configs" / "judge_demo.yaml"))
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--adapter", default=None,
                        help="also time the judge with this model.init_args.lora, "
                             "e.g. '{r: 32, alpha: 32, dropout: 0.0}'")
    parser.add_argument("overrides", nargs="*", help="CLI overrides of the config (after --)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    extra = []
    if not (ROOT / "data" / "judge_towers" / "qwen_vision.bin").exists():  # the same speed with a random tower
        print("note: data/judge_towers/ not written yet (grove pretrain-judge-vision); timing a random tower")
        extra.append("--model.init_args.vision_checkpoint=null")
    base = ["--config", args.config, "--data.init_args.num_workers=0", *extra, *args.overrides]
    cli = cli_main(base, run=False)
    module, data = cli.model, cli.datamodule
    data.prepare_data()
    data.setup("fit")
    loader = iter(data.train_dataloader())
    batches = [next(loader) for _ in range(args.batches)]
    weight = float(module.hparams.score_token_weight)
    judges = {"plain": module.judge, "memo": module.judge}
    if args.adapter is not None:
        judges["memo + adapter"] = cli_main([*base, f"--model.init_args.lora={args.adapter}"], run=False).model.judge
    memos = {id(j): FrozenVideoFeatureCache(4096) for j in judges.values()}
    optimizers = {id(j): torch.optim.AdamW([p for p in j.parameters() if p.requires_grad], lr=1e-5)
                  for j in judges.values()}

    def step(name: str, batch) -> float:
        judge = judges[name]
        judge.video_cache = None if name == "plain" else memos[id(judge)]
        optimizer = optimizers[id(judge)]
        start = time.perf_counter()
        losses = judge.losses(batch, score_weight=weight)
        loss = losses["answer"] + losses.get("error", 0.0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return time.perf_counter() - start

    for judge in judges.values():
        judge.train()
    for name in judges:
        for batch in batches[:2]:
            step(name, batch)  # warm-up
    for judge in judges.values():
        for batch in batches:
            memos[id(judge)].features(judge.base_model.model, batch["pixel_values_videos"], batch["video_grid_thw"],
                                      batch["video_digests"])
    times: dict[str, list[float]] = {name: [] for name in judges}
    for _ in range(args.rounds):
        for batch in batches:
            for name in judges:
                times[name].append(step(name, batch))
    report = {name: round(1000 * statistics.median(t), 1) for name, t in times.items()}
    report["speed-up"] = round(report["plain"] / report["memo"], 3)
    report["memo clips"] = len(memos[id(module.judge)])
    report["peak RSS MB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    line = (f"median ms per training step (batch {data.hparams.batch_size}, {args.threads} thread(s)): "
            f"plain {report['plain']}, memo {report['memo']} (x{report['speed-up']})")
    if "memo + adapter" in report:
        report["adapter cost"] = round(report["memo + adapter"] / report["memo"], 3)
        line += f", memo + adapter {args.adapter} {report['memo + adapter']} (x{report['adapter cost']} the memo's)"
    print(f"{line}; {report['memo clips']} clips held, peak RSS {report['peak RSS MB']} MB")
    return report


if __name__ == "__main__":
    main()
