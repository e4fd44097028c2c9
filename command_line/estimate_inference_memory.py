"""GPU memory of predicting with a GROVE config, per weight precision (fp32, bf16, fp16, int8 weight-only).

    grove estimate-inference-memory [--config configs/official/grove.yaml] [--frames 8]

Builds the config's model on the meta device (no weights), counts its weights by the dtype each
gets at inference (int8-able linear weights, the fp32 islands, the rest), adds the largest block's
working set for one window of frames and the caption's KV cache, and prints per precision the
total and the smallest GPU that holds it. The model behind the figures:
sizing/memory_estimator.py; the table and what each precision means: docs/precision.md.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility)
from core.cli_args import existing_file, non_negative_float, positive_int
from core.command_parser import CommandParser

import argparse
from pathlib import Path

from models.grove.configuration import read_stacked_yaml
from sizing.memory_estimator import (
    DEFAULT_INFERENCE_OVERHEAD_GIB,
    GIB,
    InferenceParameters,
    Workload,
    build_meta_module,
    inference_activation_values,
    inference_table,
)

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv=None) -> argparse.Namespace:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", role="input", action="append", default=None, type=existing_file,
                        help="model config (repeat to stack overlays); default configs/official/grove.yaml")
    parser.add_argument("--frames", type=positive_int, default=None,
                        help="frames per window (default: data.num_frames)")
    parser.add_argument("--text-tokens", type=positive_int, default=Workload.text_tokens,
                        help="prompt and caption tokens besides the video tokens")
    parser.add_argument("--phrases", type=positive_int, default=Workload.phrases)
    parser.add_argument("--max-new-tokens", type=positive_int, default=64, help="caption budget (KV cache)")
    parser.add_argument("--overhead-gib", type=non_negative_float, default=DEFAULT_INFERENCE_OVERHEAD_GIB,
                        help="reserved for the CUDA context and allocator fragmentation")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    paths = args.config or [str(ROOT / "configs" / "official" / "grove.yaml")]
    config = read_stacked_yaml(paths)
    frames = args.frames or int(((config.get("data") or {}).get("init_args") or {}).get("num_frames", 8))
    workload = Workload(frames=frames, text_tokens=args.text_tokens, phrases=args.phrases)
    model = build_meta_module(config).model
    params = InferenceParameters.of(model)
    values = inference_activation_values(model, workload, args.max_new_tokens)
    print(f"config: {' + '.join(paths)}")
    print(f"weights: {params.total:,} values: {params.linear:,} in linear layers ({params.linear_rows:,} output "
          f"rows), {params.other:,} elsewhere, {params.fp32_islands:,} in fp32 islands")
    print(f"one clip: windows of {workload.frames} frames, {model.num_video_tokens} video + {workload.text_tokens} "
          f"text tokens, {workload.phrases} phrases, {args.max_new_tokens} new tokens; largest working set "
          f"{max((k for k in values if k not in ('peak', 'kv_cache')), key=values.get)}")
    print(f"\n{'precision':9s} {'weights':>8s} {'activ.':>7s} {'KV':>6s} {'total':>7s}  smallest GPU "
          f"(GiB; overhead {args.overhead_gib:g} GiB included)")
    for row in inference_table(params, values, args.overhead_gib):
        gpu = row.smallest_gpu()
        print(f"{row.precision:9s} {row.weights / GIB:8.1f} {row.activations / GIB:7.2f} {row.kv_cache / GIB:6.2f} "
              f"{row.total / GIB:7.1f}  {gpu if gpu else 'none listed'}")
