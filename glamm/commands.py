"""GLaMM's released checkpoint: check a folder, caption images and videos with it.

    grove glamm check GLAMM_FOLDER [--config configs/official/glamm.yaml]
    grove glamm grove-init GLAMM_FOLDER --config configs/pretrain.yaml
    grove glamm caption --folder GLAMM_FOLDER --clip CLIP_DIR IMAGE_OR_VIDEO... [--out runs/glamm]
    grove glamm baseline --folder GLAMM_FOLDER --clip CLIP_DIR --gt ANNOTATIONS --videos VIDEOS \
        --level video --out glamm_video.json
    grove evaluate --gt ANNOTATIONS --pred glamm_video.json

``check`` builds GLaMM on the meta device and reads no weights (a folder of meta tensors checks
too); it prints what every key became and exits with status 1 naming each unaccounted key,
missing tensor or shape mismatch. ``grove-init`` does the same for GROVE started from GLaMM (the
official pre-training's start) and prints which tensors come from GLaMM, from CLIP, or are new.
``caption`` prints each frame's grounded caption and writes the frame with its phrases' boxes drawn.
``baseline`` writes the GROVE paper's GLaMM baselines for ground-truth clips in the prediction
format (:mod:`glamm.baseline`: ``frame``, each frame's own caption and boxes; ``video``,
the centre frame's caption and its phrases grounded on every annotated frame; ``center``, the centre
frame's own caption and boxes alone, the paper's Center set-up).
"""
from __future__ import annotations

from core.cli_args import positive_int
from core.command_parser import CommandParser

from pathlib import Path

import numpy as np

# The model code (torch, transformers, open_clip) is imported by each command when it runs, so that
# `grove glamm --help` starts at once.


def _check(args) -> int:
    from glamm.check import check_glamm
    from glamm.model import GLAMM_CONFIG

    report, notes = check_glamm(args.folder, args.config or [GLAMM_CONFIG])
    for note in notes:
        print(f"note: {note}")
    print(report.table())
    return 0 if report.ok else 1


def _grove_init(args) -> int:
    from models.grove.configuration import model_configs_from_yaml
    from models.grove.convert_official import check_grove_from_glamm, init_table

    report, notes = check_grove_from_glamm(args.folder, args.config)
    for note in notes:
        print(f"note: {note}")
    clip = model_configs_from_yaml(args.config)["global_encoder"].checkpoint
    print(init_table(report, clip) if report.ok else report.table())
    return 0 if report.ok else 1


def read_inputs(inputs: list[str], frames_per_video: int) -> list[tuple[str, np.ndarray]]:
    """``(name, uint8 (H, W, 3))`` frames: each image, and ``frames_per_video`` evenly spaced frames
    of each video or frame folder (its centre frame for 1)."""
    from PIL import Image

    from formats.video_files import open_video
    from formats.video_reader import IMAGE_SUFFIXES

    out = []
    for item in inputs:
        path = Path(item)
        if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES:
            out.append((path.stem, np.asarray(Image.open(path).convert("RGB"))))
            continue
        with open_video(path.parent, path.name) as source:
            n = source.num_frames
            picks = [n // 2] if frames_per_video == 1 else np.linspace(0, n - 1, frames_per_video).round()
            indices = np.unique(np.asarray(picks, dtype=np.int64))
            frames = source.read_frames(indices)
        out.extend((f"{path.stem}_{int(i):06d}", frame) for i, frame in zip(indices, frames))
    return out


def _caption(args) -> int:
    from core.drawing import composite, phrase_colours, render_overlay
    from core.output_files import refuse_input_as_output

    from PIL import Image

    from glamm.model import GLAMM_CONFIG, GLaMM

    out = Path(args.out)
    for item in args.inputs:  # an image inside --out would be overwritten by its own drawing
        refuse_input_as_output(out / f"{Path(item).stem}.jpg", {"an input": item}, "--out writes")
    device, dtype = _device_and_dtype(args.device)
    model = GLaMM.from_folder(args.folder, clip_dir=args.clip, tokenizer_dir=args.tokenizer,
                              config=args.config or GLAMM_CONFIG, device=device, dtype=dtype)
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in read_inputs(args.inputs, args.frames):  # frames of different sizes: one call each
        result = model.ground(frame[None], max_new_tokens=args.max_new_tokens)[0]
        keep = result.has_box.numpy()
        phrases = [p for p, k in zip(result.phrases, keep) if k]
        colours = phrase_colours(phrases)
        overlay = render_overlay(frame.shape[1], frame.shape[0], result.boxes.numpy()[keep] + [0, 0, 1, 1],
                                 phrases, colours, caption=result.caption)
        Image.fromarray(composite(frame[None], overlay)[0]).save(out / f"{name}.jpg")
        boxes = "; ".join(f"{p}: {[round(float(v)) for v in b]}" for p, b in zip(phrases, result.boxes[keep]))
        print(f"{name}: {result.tagged_caption}" + (f"  [{boxes}]" if boxes else ""))
    print(f"images with boxes written to {out}")
    return 0


def _device_and_dtype(name: str):
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name
    return device, (torch.bfloat16 if device.startswith("cuda") else None)  # GLaMM's own precision on GPU


def _baseline(args) -> int:
    from core.output_files import write_json_atomic

    from formats.records import read_records
    from glamm.baseline import predict_records
    from glamm.model import GLAMM_CONFIG, GLaMM

    device, dtype = _device_and_dtype(args.device)
    model = GLaMM.from_folder(args.folder, clip_dir=args.clip, tokenizer_dir=args.tokenizer,
                              config=args.config or GLAMM_CONFIG, device=device, dtype=dtype)
    records = {r.key: r for r in read_records(args.gt)}
    if args.limit is not None:
        records = dict(list(records.items())[:args.limit])
    preds, skipped = predict_records(model, records, args.videos, args.level, args.batch_size, args.max_new_tokens,
                                     args.teacher_forced)
    for key, reason in skipped.items():
        print(f"skipped {key}: {reason}")
    out = write_json_atomic(args.out, preds, indent=1)
    how = "teacher-forced" if args.teacher_forced else f"{args.level} level"
    level = " --level center" if args.level == "center" and not args.teacher_forced else ""
    print(f"wrote {len(preds)} clip predictions ({how}) to {out}; score them with\n"
          f"  grove evaluate --gt {args.gt} --pred {out}{level}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="check a GLaMM folder's keys and shapes (reads no weights)")
    check.add_argument("folder", role="input",
                       help="GLaMM checkpoint folder (pytorch_model-*.bin + index, or safetensors)")
    check.add_argument("--config", role="input", action="append",
                       help="GLaMM geometry (default configs/official/glamm.yaml)")
    init = sub.add_parser("grove-init", help="what GROVE takes from GLaMM, CLIP or starts new (reads no weights)")
    init.add_argument("folder", role="input", help="GLaMM checkpoint folder")
    init.add_argument("--config", role="input", action="append", required=True,
                      help="GROVE config(s), e.g. configs/pretrain.yaml")
    caption = sub.add_parser("caption", help="grounded captions of images and videos")
    caption.add_argument("inputs", role="input", nargs="+", help="image files, video files or frame folders")
    caption.add_argument("--folder", role="input", required=True, help="GLaMM checkpoint folder")
    caption.add_argument("--clip", role="input", default=None, help="OpenAI CLIP ViT-L/14-336 weights (file or folder)")
    caption.add_argument("--tokenizer", role="input", default=None, help="tokenizer folder (default: --folder)")
    caption.add_argument("--config", role="input", action="append",
                         help="GLaMM geometry (default configs/official/glamm.yaml)")
    caption.add_argument("--out", role="output", default="runs/glamm", help="where the images with boxes go")
    caption.add_argument("--max-new-tokens", type=positive_int, default=512)
    caption.add_argument("--frames", type=positive_int, default=1,
                         help="frames per video, evenly spaced (the centre one for 1)")
    caption.add_argument("--device", default="auto")
    baseline = sub.add_parser("baseline", help="GLaMM baseline predictions for ground-truth clips")
    baseline.add_argument("--folder", role="input", required=True, help="GLaMM checkpoint folder")
    baseline.add_argument("--clip", role="input", default=None,
                          help="OpenAI CLIP ViT-L/14-336 weights (file or folder)")
    baseline.add_argument("--tokenizer", role="input", default=None, help="tokenizer folder (default: --folder)")
    baseline.add_argument("--config", role="input", action="append",
                          help="GLaMM geometry (default configs/official/glamm.yaml)")
    baseline.add_argument("--gt", role="input", required=True,
                          help="ground-truth annotations (any layout the project reads)")
    baseline.add_argument("--videos", role="input", required=True, help="the clips' video folder")
    baseline.add_argument("--level", default="video", choices=("frame", "video", "center"),
                          help="frame: each frame's own caption and boxes; video: the centre frame's caption, "
                               "its phrases grounded on every frame; center: the centre frame alone (the paper's "
                               "Center set-up: score with grove evaluate --level center)")
    baseline.add_argument("--teacher-forced", action="store_true",
                          help="ground each clip's ground-truth caption on every frame (a grounding-only reference)")
    baseline.add_argument("--out", role="output", required=True, help="predictions JSON to write")
    baseline.add_argument("--batch-size", type=positive_int, default=8, help="frames per GLaMM forward")
    baseline.add_argument("--max-new-tokens", type=positive_int, default=512)
    baseline.add_argument("--limit", type=positive_int, default=None, help="the first N clips only")
    baseline.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    from core.json_file import JSONFileError
    from core.output_files import OutputIsInputError
    from core.weights import WeightFileError

    try:
        run = {"check": _check, "grove-init": _grove_init, "caption": _caption, "baseline": _baseline}[args.command]
        return run(args)
    except (OutputIsInputError, WeightFileError, JSONFileError, ValueError, FileNotFoundError) as err:
        # bad input (a damaged folder, a wrong config): the message, not a traceback
        raise SystemExit(f"error: {err}") from None
