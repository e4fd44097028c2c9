"""Pre-train the toy judge's vision tower (Qwen2.5-VL ViT + merger) and write it as a state dict.

A real VC-Inspector starts from Qwen2.5-VL, whose vision tower is pre-trained; the toy judge of
configs/judge_demo.yaml is random, and a random tower trained only through the judge's answer
loss never shows the language model what is in the clip (README, "The VC-Inspector judge"). This
stage stands in for that pre-training with the dense phrase-word pretext of the GROVE demo's
towers (models/patch_pretext.py): every merged video token (2 x 2 patches of 2 frames) predicts
the words of the phrases whose boxes cover it in either frame and (``--motion``, the default) how
those objects move between its two frames (left/right/up/down/still/appears/disappears: the parts
of the captions' actions, as a video-pre-trained tower would know them), on the grounded synthetic
training clips (the judge's captions come from the same clips; boxes are never shown to the judge).

    python scripts/pretrain_judge_vision.py --config configs/judge_demo.yaml --steps 1000 \\
        --out data/judge_towers

writes ``<out>/qwen_vision.bin`` (``model.visual.*`` keys, as in a Qwen2.5-VL checkpoint) and
``<out>/pretext.json``; ``model.init_args.vision_checkpoint`` in the config loads it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import core  # noqa: E402,F401

import numpy as np  # noqa: E402
import torch  # noqa: E402

from datamodules.transforms import CLIP_MEAN, CLIP_STD  # noqa: E402
from models.patch_pretext import (MOTION_WORDS, PatchWordHead, build_word_vocabulary,  # noqa: E402
                                  patch_word_targets, phrase_word_matrix, pretext_optimizer, slice_motion_words)

VISION_FILE = "qwen_vision.bin"


def to_uint8(frames: torch.Tensor) -> np.ndarray:
    """CLIP-normalised ``(B, T, 3, H, W)`` -> uint8 ``(B, T, H, W, 3)``, what the judge's processor reads."""
    mean = torch.tensor(CLIP_MEAN).view(1, 1, 3, 1, 1) * 255.0
    std = torch.tensor(CLIP_STD).view(1, 1, 3, 1, 1) * 255.0
    pixels = (frames.float() * std + mean).round().clamp(0, 255).to(torch.uint8)
    return pixels.permute(0, 1, 3, 4, 2).numpy()


def merged_token_targets(batch: dict, words: torch.Tensor, grid_thw: torch.Tensor, temporal_patch: int,
                         merge: int, min_overlap: float | None = None, motion: bool = False) -> torch.Tensor:
    """Word targets of every merged token, in the vision tower's output order: ``(sum_i t*h*w, V)``.

    ``grid_thw (B, 3)`` is the patch grid of each clip (all equal: one frame size per batch); a
    merged token covers ``merge x merge`` patches of ``temporal_patch`` frames and takes the words
    of every object covering it (``patch_word_targets``'s rule: the token's centre, or with
    ``min_overlap`` a shared area) in any of them. With ``motion``, ``len(MOTION_WORDS)``
    more targets follow the ``V`` words: what each object over the token does within the token's
    frames (``slice_motion_words``), so that the tokens carry the motion actions are made of.
    """
    if not bool((grid_thw == grid_thw[0]).all()):
        raise ValueError(f"clips of one batch must share a patch grid, got {grid_thw.tolist()}")
    t, h, w = (int(v) for v in grid_thw[0])
    boxes = batch["boxes"].float()
    b, num_frames, slots = boxes.shape[:3]
    if num_frames != t * temporal_patch:
        raise ValueError(f"{num_frames} frames do not make {t} temporal patches of {temporal_patch}")
    # which objects cover each token, one target per object, over the token's frames: (B, t, h, w, P)
    each_object = torch.eye(slots).expand(b, slots, slots)
    covering = patch_word_targets(boxes, batch["present"], each_object, (h // merge, w // merge), min_overlap=min_overlap)
    covering = covering.view(b, t, temporal_patch, h // merge, w // merge, slots).amax(dim=2)
    targets = torch.einsum("bthwp,bpv->bthwv", covering, words.to(covering.dtype))
    if motion:
        moves = slice_motion_words(boxes, batch["present"], temporal_patch)  # (B, t, P, M)
        targets = torch.cat([targets, torch.einsum("bthwp,btpm->bthwm", covering, moves)], dim=-1)
    targets = (targets > 0).to(covering.dtype)
    return targets.reshape(-1, targets.shape[-1])


def pretrain(judge, datamodule, steps: int, lr: float, log_every: int = 25, log=print,
             min_overlap: float | None = None, motion: bool = False) -> dict:
    tower = judge.vision_tower()
    prompter = judge.prompter
    temporal_patch = int(prompter.video_processor.temporal_patch_size)
    merge = int(prompter.video_processor.merge_size)
    train = datamodule.datasets["train"]
    vocabulary = build_word_vocabulary(p for record in train.records for p in record.phrases)
    targets_named = vocabulary + [f"motion:{w}" for w in MOTION_WORDS] if motion else vocabulary
    head = PatchWordHead(int(tower.merger.mlp[-1].out_features), len(targets_named))
    params = [*tower.parameters(), *head.parameters()]
    optimizer, schedule = pretext_optimizer(params, lr, steps)
    start, step, window, last = time.perf_counter(), 0, {}, {}
    tower.train()
    while step < steps:
        for batch in datamodule.train_dataloader():
            if not batch["keys"]:
                continue
            clips = [prompter.encode_video(frames) for frames in to_uint8(batch["global_frames"])]
            pixels = torch.cat([c[0] for c in clips])
            grid = torch.stack([c[1] for c in clips])
            tokens = tower(pixels, grid_thw=grid).pooler_output
            words = phrase_word_matrix(batch["phrases"], vocabulary, batch["boxes"].shape[2])
            targets = merged_token_targets(batch, words, grid, temporal_patch, merge, min_overlap, motion)
            loss, stats = head.loss(head(tokens), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            window.setdefault("loss", []).append(loss.item())
            window.setdefault("word_f1", []).append(stats["word_f1"].item())
            if step % log_every == 0 or step == steps:
                last = {k: round(sum(v) / len(v), 4) for k, v in window.items()}
                log(json.dumps({"step": step, "seconds": round(time.perf_counter() - start, 1), **last}))
                window = {}
            if step >= steps:
                break
    tower.eval()
    return {"steps": steps, "lr": lr, "min_overlap": min_overlap, "motion": motion, "vocabulary": targets_named,
            "seconds": round(time.perf_counter() - start, 1), "final": last}


def _overlap(text: str) -> float | None:
    if text.strip().lower() in ("centre", "center"):
        return None
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"--min-overlap must lie in (0, 1] or be 'centre', got {text}")
    return value


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "judge_demo.yaml"))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--min-overlap", type=_overlap, default=0.5,
                        help="a token names every object sharing this fraction of the smaller of (token, "
                             "object); 'centre': only objects whose box holds the token's centre (objects "
                             "smaller than a token are then often named by none)")
    parser.add_argument("--motion", action=argparse.BooleanOptionalAction, default=True,
                        help="tokens also name how the objects over them move within their frames "
                             "(left/right/up/down/still/appears/disappears), the parts of the captions' actions")
    parser.add_argument("--out", default=str(ROOT / "data" / "judge_towers"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--synthetic-root", default=None, help="the grounded synthetic data (default: the config's)")
    parser.add_argument("overrides", nargs="*", help="extra CLI overrides for the judge config")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from cli import cli_main
    from datamodules.grounded_datamodule import SyntheticGroundedDataModule

    cli = cli_main(["--config", args.config, "--model.init_args.vision_checkpoint=null", *args.overrides], run=False)
    judge, judge_data = cli.model.judge, cli.datamodule
    torch.manual_seed(int(cli.config.get("seed_everything") or 0))
    synthetic = dict(judge_data.hparams.get("synthetic") or {})
    root = args.synthetic_root or judge_data.hparams.get("synthetic_root") or str(ROOT / "data" / "synthetic")
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
    report = pretrain(judge, data, args.steps, args.lr, min_overlap=args.min_overlap, motion=args.motion)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save({f"model.visual.{k}": v.detach().clone() for k, v in judge.vision_tower().state_dict().items()},
               out / VISION_FILE)
    report.update({"config": args.config, "overrides": args.overrides, "synthetic_root": str(root),
                   "checkpoint": {"model.init_args.vision_checkpoint": str(out / VISION_FILE)}})
    (out / "pretext.json").write_text(json.dumps(report, indent=2))
    print(f"vision tower written to {out / VISION_FILE} ({report['seconds']} s)")
    return report


if __name__ == "__main__":
    main()
