"""Pre-train the toy judge's vision tower (Qwen2.5-VL ViT + merger) and write it as a state dict.

A real VC-Inspector starts from Qwen2.5-VL, whose vision tower is pre-trained; the toy judge of
configs/judge_demo.yaml is random, and a random tower trained only through the judge's answer
loss never shows the language model what is in the clip. This
stage stands in for that pre-training with the dense phrase-word pretext of the GROVE demo's
towers (models/patch_pretext.py): every merged video token (2 x 2 patches of 2 frames) predicts
the words of the phrases whose boxes cover it in either frame and how
those objects move between its two frames (left/right/up/down/still/appears/disappears: the parts
of the captions' actions, as a video-pre-trained tower would know them), on the grounded synthetic
training clips (the judge's captions come from the same clips; boxes are never shown to the judge).

    grove pretrain-judge-vision --config configs/judge_demo.yaml --steps 1000 \\
        --out data/judge_towers

writes ``<out>/qwen_vision.bin`` (``model.visual.*`` keys, as in a Qwen2.5-VL checkpoint) and
``<out>/pretext.json``; ``model.init_args.vision_checkpoint`` in the config loads it.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility: must precede lightning)
from core.cli_args import existing_file, existing_folder, positive_float, positive_int
from core.command_parser import CommandParser
from core.output_files import atomic_write, write_json_atomic

import argparse
from pathlib import Path

import torch

from judge.training.vision_pretext import VISION_FILE, merged_token_targets, pretrain  # noqa: F401


def _overlap(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"--min-overlap must lie in (0, 1], got {text}")
    return value


def main(argv: list[str] | None = None) -> dict:
    parser = CommandParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", role="input", type=existing_file, default="configs/judge_demo.yaml")
    parser.add_argument("--steps", type=positive_int, default=1000)
    parser.add_argument("--lr", type=positive_float, default=2e-3)
    parser.add_argument("--batch-size", type=positive_int, default=8)
    parser.add_argument("--min-overlap", type=_overlap, default=0.5,
                        help="a token names every object sharing this fraction of the smaller of (token, object)")
    parser.add_argument("--out", role="output", default="data/judge_towers")
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--synthetic-root", role="input", type=existing_folder, default=None,
                        help="the grounded synthetic data (default: the config's)")
    parser.add_argument("overrides", nargs="*", help="extra CLI overrides for the judge config")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from cli import cli_main
    from datamodules.grounded_datamodule import SyntheticGroundedDataModule

    cli = cli_main(["--config", args.config, "--model.init_args.vision_checkpoint=null", *args.overrides], run=False)
    judge, judge_data = cli.model.judge, cli.datamodule
    torch.manual_seed(int(cli.config.get("seed_everything") or 0))
    synthetic = dict(judge_data.hparams.get("synthetic") or {})
    root = args.synthetic_root or judge_data.hparams.get("synthetic_root") or "data/synthetic"
    size = int(round(judge.prompter.max_pixels ** 0.5))
    # the judge config's generation options, under the grounded datamodule's names
    renames = {"seed": "synthetic_seed", "workers": "generation_workers"}
    accepted = ("num_train", "num_val", "num_test", "synthetic_seed", "generation_workers", "frame_size",
                "duration_s", "fps")
    options = {renames.get(k, k): v for k, v in synthetic.items()}
    data = SyntheticGroundedDataModule(
        root=root, num_frames=int(judge_data.hparams.num_frames), global_image_size=size,
        grounding_image_size=32, batch_size=args.batch_size, num_workers=int(judge_data.hparams.num_workers),
        **{k: v for k, v in options.items() if k in accepted})
    data.prepare_data()
    data.setup("fit")
    report = pretrain(judge, data, args.steps, args.lr, min_overlap=args.min_overlap)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / VISION_FILE, "wb") as handle:  # the tower a run started from may be this file
        torch.save({f"model.visual.{k}": v.detach().clone() for k, v in judge.vision_tower().state_dict().items()},
                   handle)
    report.update({"config": args.config, "overrides": args.overrides, "synthetic_root": str(root),
                   "checkpoint": {"model.init_args.vision_checkpoint": str(out / VISION_FILE)}})
    write_json_atomic(out / "pretext.json", report)
    print(f"vision tower written to {out / VISION_FILE} ({report['seconds']} s)")
    return report
