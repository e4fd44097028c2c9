"""Per-GPU training memory of a GROVE config under DDP, DeepSpeed ZeRO-2 and FSDP.

    grove estimate-memory --config configs/official/grove.yaml [--gpus 8] [--capacity-gib 80]

Builds the config's model on the meta device (no weights), prints its parameter counts, the
activations one sample keeps for backward (with and without gradient checkpointing), then
weights / gradients / optimizer state / activations per GPU for micro-batch 1..8 and which setups
fit the GPU. The model behind the figures: sizing/memory_estimator.py, docs/scaling.md.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility)
from core.cli_args import existing_file, non_negative_float, positive_float, positive_int
from core.command_parser import CommandParser

import argparse
from pathlib import Path

from models.grove.configuration import read_stacked_yaml
from sizing.memory_estimator import (
    DEFAULT_OVERHEAD_GIB,
    GIB,
    STRATEGIES,
    ParameterSummary,
    Workload,
    activation_values,
    build_meta_module,
    largest_fitting,
    table,
)

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv=None) -> argparse.Namespace:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", role="input", action="append", default=None, type=existing_file,
                        help="training config (repeat to stack overlays); default configs/official/grove.yaml")
    parser.add_argument("--gpus", type=positive_int, default=8, help="GPUs the run shards over (ZeRO-2, FSDP)")
    parser.add_argument("--max-micro-batch", type=positive_int, default=8)
    parser.add_argument("--capacity-gib", type=positive_float, default=80.0, help="memory of one GPU")
    parser.add_argument("--overhead-gib", type=non_negative_float, default=DEFAULT_OVERHEAD_GIB,
                        help="reserved per GPU for the CUDA context, NCCL and allocator fragmentation")
    parser.add_argument("--frames", type=positive_int, default=None, help="frames per clip (default: data.num_frames)")
    parser.add_argument("--text-tokens", type=positive_int, default=Workload.text_tokens,
                        help="prompt and caption tokens besides the video tokens")
    parser.add_argument("--answer-tokens", type=positive_int, default=Workload.answer_tokens)
    parser.add_argument("--phrases", type=positive_int, default=Workload.phrases)
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    paths = args.config or [str(ROOT / "configs" / "official" / "grove.yaml")]
    config = read_stacked_yaml(paths)
    frames = args.frames or int(((config.get("data") or {}).get("init_args") or {}).get("num_frames", 8))
    workload = Workload(frames=frames, text_tokens=args.text_tokens, answer_tokens=args.answer_tokens,
                        phrases=args.phrases)
    module = build_meta_module(config)
    params = ParameterSummary.of(module.model)
    print(f"config: {' + '.join(paths)}")
    print(f"parameters: {params.total:,} ({params.stored_bytes / GIB:.1f} GiB as stored), "
          f"trainable {params.trainable:,}; FSDP units: largest {params.fsdp_largest_unit:,}, "
          f"root {params.fsdp_root:,}")
    groups = {name: count for name, count in module.trainable_counts.items() if count}
    print("trainable groups: " + ", ".join(f"{name} {count:,}" for name, count in groups.items()))
    print(f"workload per sample: {workload.frames} frames, {module.model.num_video_tokens} video + "
          f"{workload.text_tokens} text tokens, {workload.answer_tokens} answer tokens, {workload.phrases} phrases")
    values = {}
    for ckpt in (False, True):
        parts = activation_values(module.model, workload, ckpt)
        values[ckpt] = sum(parts.values())
        detail = ", ".join(f"{k} {v * 2 / GIB:.2f}" for k, v in parts.items() if v)
        print(f"activations per sample in bf16, checkpointing {'on ' if ckpt else 'off'}: "
              f"{values[ckpt] * 2 / GIB:.2f} GiB ({detail})")
    rows = table(params, values, args.gpus, range(1, args.max_micro_batch + 1), STRATEGIES, args.overhead_gib)
    print(f"\nper GPU, {args.gpus} GPUs, GiB (overhead {args.overhead_gib:g} GiB included in total); "
          f"fits = total <= {args.capacity_gib:g} GiB")
    print(f"{'strategy':8s} {'ckpt':4s} {'mb':>3s} {'weights':>8s} {'grads':>7s} {'optim':>7s} "
          f"{'activ.':>7s} {'total':>7s}  fits")
    for row in rows:
        print(f"{row.strategy:8s} {'on' if row.checkpointing else 'off':4s} {row.micro_batch:3d} "
              f"{row.weights / GIB:8.1f} {row.gradients / GIB:7.1f} {row.optimizer / GIB:7.1f} "
              f"{row.activations / GIB:7.1f} {row.total / GIB:7.1f}  "
              f"{'yes' if row.total <= args.capacity_gib * GIB else 'no'}")
    print(f"\nlargest micro-batch that fits {args.capacity_gib:g} GiB (0 = none):")
    for (strategy, ckpt), best in largest_fitting(rows, args.capacity_gib).items():
        print(f"  {strategy:6s} checkpointing {'on ' if ckpt else 'off'}: {best}")
