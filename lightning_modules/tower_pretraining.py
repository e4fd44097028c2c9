"""Pre-train the tiny demo's two vision towers and write them as open_clip and SAM checkpoints.

The paper's GROVE starts from pre-trained CLIP (global encoder) and SAM (grounding encoder). The
tiny demo's towers are random, and random towers trained only through GROVE's losses learn too
slowly for the demo's budget (docs/deviations.md, "The demo"). This stage stands in for their
pre-training: a dense phrase-word pretext (models/patch_pretext.py) on the config's training
split, where the grounding tower's patches also regress their object's box (``--box-weight``), then

  <out>/open_clip_vision.bin    ``visual.*`` keys, as an open_clip CLIP state dict
  <out>/sam_image_encoder.pth   ``image_encoder.*`` keys, as an official SAM checkpoint
  <out>/pretext.json            the pretext's settings, final metrics and wall time

which the demo config loads through ``model.global_encoder.checkpoint`` and
``model.grounding_encoder.checkpoint``, by the same code as the real checkpoints.

    grove pretrain-towers --config configs/demo.yaml --steps 250 --out data/demo_towers

Adapters, VL, the LLM and the decoder are not part of this stage (they start as the paper's do).
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import existing_file, non_negative_float, positive_float, positive_int
from core.command_parser import CommandParser
from core.output_files import atomic_write, write_json_atomic

import json
import time
from pathlib import Path

import torch

from models.patch_pretext import (
    PatchBoxHead,
    PatchWordHead,
    build_word_vocabulary,
    patch_box_targets,
    patch_word_targets,
    phrase_word_matrix,
    pretext_optimizer,
)

ROOT = Path(__file__).resolve().parent.parent
GLOBAL_FILE = "open_clip_vision.bin"
GROUNDING_FILE = "sam_image_encoder.pth"


def frame_fraction(size: torch.Tensor, square: bool) -> torch.Tensor | None:
    """``(B, 2)`` (height, width) share of a bottom-right padded square input; None when not padded."""
    if not square:
        return None
    size = size.float()  # (B, 2) = (width, height)
    longest = size.max(dim=1, keepdim=True).values
    return torch.stack((size[:, 1], size[:, 0]), dim=1) / longest


def pretrain(module, datamodule, steps: int, lr: float, box_weight: float = 0.3, log_every: int = 25,
             log=print) -> dict:
    """Train both towers of ``module.model`` on the pretext for ``steps`` optimiser steps.

    ``box_weight`` scales the grounding tower's per-patch box regression (0 = words only).
    """
    model = module.model
    glob, grnd = model.global_encoder, model.grounding_encoder
    if datamodule.hparams.get("global_resize", "squash") == "center_crop":
        raise ValueError("pretrain_towers: data.global_resize=center_crop crops the boxes' frame; use squash or pad")
    train = datamodule.datasets["train"]
    vocabulary = build_word_vocabulary(p for record in train.records for p in record.phrases)
    if not vocabulary:
        raise ValueError("pretrain_towers: the training split has no phrases to learn")
    head_g = PatchWordHead(glob.width, len(vocabulary))
    head_r = PatchWordHead(grnd.out_chans, len(vocabulary))
    box_head = PatchBoxHead(grnd.out_chans)
    # The towers are separate models: each is clipped on its own, so the grounding tower's box loss
    # does not shrink the global tower's steps.
    towers = [[*glob.backbone.parameters(), *head_g.parameters()],
              [*grnd.backbone.parameters(), *head_r.parameters(), *(box_head.parameters() if box_weight else ())]]
    optimizer, schedule = pretext_optimizer([p for tower in towers for p in tower], lr, steps)
    pad_global = datamodule.hparams.get("global_resize", "squash") == "pad"
    start, step, window = time.perf_counter(), 0, {}
    module.train()
    while step < steps:
        for batch in datamodule.train_dataloader():
            if not batch["keys"]:
                continue
            words = phrase_word_matrix(batch["phrases"], vocabulary, batch["boxes"].shape[2])
            losses, metrics = [], {}
            for name, features, head, fraction in (
                    ("global", glob.encode_frames(batch["global_frames"]), head_g,
                     frame_fraction(batch["size"], pad_global)),
                    ("grounding", grnd(batch["grounding_frames"]).permute(0, 1, 3, 4, 2), head_r,
                     frame_fraction(batch["size"], True))):
                targets = patch_word_targets(batch["boxes"].float(), batch["present"], words,
                                             tuple(features.shape[2:4]), fraction)
                loss, stats = head.loss(head(features), targets, batch["frame_mask"])
                losses.append(loss)
                metrics[f"{name}_loss"] = loss.item()
                metrics[f"{name}_word_f1"] = stats["word_f1"].item()
                if name == "grounding" and box_weight:
                    box_targets, covered = patch_box_targets(batch["boxes"].float(), batch["present"],
                                                             tuple(features.shape[2:4]), fraction)
                    box_loss = box_head.loss(box_head(features), box_targets, covered, batch["frame_mask"])
                    losses.append(box_weight * box_loss)
                    metrics["grounding_box_l1"] = box_loss.item()
            optimizer.zero_grad(set_to_none=True)
            sum(losses).backward()
            for tower in towers:
                torch.nn.utils.clip_grad_norm_(tower, 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            for k, v in metrics.items():
                window.setdefault(k, []).append(v)
            if step % log_every == 0 or step == steps:
                summary = {k: round(sum(v) / len(v), 4) for k, v in window.items()}
                log(json.dumps({"step": step, "seconds": round(time.perf_counter() - start, 1), **summary}))
                last, window = summary, {}
            if step >= steps:
                break
    return {"steps": steps, "lr": lr, "box_weight": box_weight, "vocabulary": vocabulary,
            "seconds": round(time.perf_counter() - start, 1),
            "final": last}


def save_towers(model, out: Path) -> tuple[Path, Path]:
    """Write the towers in the formats their loaders read (open_clip ``visual.*``, SAM ``image_encoder.*``)."""
    out.mkdir(parents=True, exist_ok=True)
    glob_path, grnd_path = out / GLOBAL_FILE, out / GROUNDING_FILE
    # temporary file + rename: the towers a run started from may be the very files it replaces
    with atomic_write(glob_path, "wb") as handle:
        torch.save({f"visual.{k}": v.detach().clone()
                    for k, v in model.global_encoder.backbone.state_dict().items()}, handle)
    with atomic_write(grnd_path, "wb") as handle:
        torch.save({f"image_encoder.{k}": v.detach().clone()
                    for k, v in model.grounding_encoder.backbone.state_dict().items()}, handle)
    return glob_path, grnd_path


def main(argv: list[str] | None = None) -> dict:
    parser = CommandParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", role="input", type=existing_file, default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--steps", type=positive_int, default=250)
    parser.add_argument("--lr", type=positive_float, default=2e-3)
    parser.add_argument("--box-weight", type=non_negative_float, default=0.3,
                        help="weight of the grounding tower's per-patch box regression (0: words only)")
    parser.add_argument("--out", role="output", default=str(ROOT / "data" / "demo_towers"))
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("overrides", nargs="*",
                        help="extra CLI overrides for the config, e.g. --data.init_args.root=...")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from core.config_loader import load_configured

    # The towers start random here, whatever checkpoints the config names (they are this stage's output).
    # (after the overrides: an override naming the checkpoints to write must not be loaded here)
    cli = load_configured(["--config", args.config, *args.overrides, "--model.init_args.global_encoder.checkpoint=null",
                           "--model.init_args.grounding_encoder.checkpoint=null"])
    torch.manual_seed(int(cli.config.get("seed_everything") or 0))
    cli.datamodule.prepare_data()
    cli.datamodule.setup("fit")
    report = pretrain(cli.model, cli.datamodule, args.steps, args.lr, box_weight=args.box_weight)
    paths = save_towers(cli.model.model, Path(args.out))
    report.update({"config": args.config, "overrides": args.overrides,
                   "checkpoints": {"model.global_encoder.checkpoint": str(paths[0]),
                                   "model.grounding_encoder.checkpoint": str(paths[1])}})
    write_json_atomic(Path(args.out) / "pretext.json", report)
    print(f"towers written to {args.out} ({report['seconds']} s)")
    return report


if __name__ == "__main__":
    main()
