"""The judge's user commands (``grove judge {corrupt,score,predictions,foil,refine}``): argument parsing and wiring.

``corrupt`` writes the judge's training data (:mod:`judge.data.corruption.generator`, its own options).

Every command takes the judge as ``--config CONFIG`` (repeatable, with ``--ckpt-path`` and
``--key=value`` overrides, as ``cli.py`` does), as released weights ``--judge PATH`` (a merged
Hugging Face folder, a LoRA adapter folder with ``--base-model``, or a ``.ckpt``), or as an
OpenAI-compatible server ``--endpoint URL --endpoint-model NAME``. See docs/judge.md.
"""
from __future__ import annotations

from core.cli_args import non_negative_int, positive_int
from core.command_parser import CommandParser
from core.folder_lock import FolderInUseError, hold_file
from core.output_files import write_json_atomic
from core.output_folder import OutputFolderError

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import torch

from formats.predictions import load_predictions
from formats.records import ON_CORRUPT, RecordError, read_ground_truth
from judge.application.loading import LoadedJudge, load_judge
from judge.application.refinement import VisionLanguageCaptioner, refine_captions
from judge.application.scoring import judge_report, score_foil_pairs, score_pairs
from judge.data.corruption.generator import main as generate_main
from judge.data.corruption.generator import write_jsonl
from judge.data.pairs import (
    PairFrames,
    foil_pairs_from_corruptions,
    read_activitynet_foil,
    read_pairs,
    read_refinement_inputs,
)
from judge.data.readers import read_judge_jsonl
from judge.model.endpoint import EndpointJudge

OVERRIDE_PREFIXES = ("--model.", "--data.", "--trainer.", "--seed_everything")


def _judge_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("judge")
    group.add_argument("--config", role="input", action="append", default=None,
                       help="judge config (repeatable, as cli.py)")
    group.add_argument("--ckpt-path", role="input", default=None,
                       help="Lightning checkpoint of that config, or an exported folder")
    group.add_argument("--judge", role="input", default=None,
                       help="released weights: HF folder, LoRA adapter folder, exported folder or .ckpt")
    group.add_argument("--base-model", role="input", default=None, help="local Qwen2.5-VL folder under a LoRA adapter")
    group.add_argument("--endpoint", default=None, help="OpenAI-compatible API root, e.g. http://localhost:8000/v1")
    group.add_argument("--endpoint-model", default=None, help="the served model's name")
    group.add_argument("--api-key", default=None)
    group.add_argument("--concurrency", type=positive_int, default=8, help="endpoint requests in flight")
    group.add_argument("--num-frames", type=positive_int, default=None,
                       help="frames per clip (default: the config's, else 32)")
    group.add_argument("--max-new-tokens", type=positive_int, default=None,
                       help="answer length (default: the config's)")
    group.add_argument("--batch-size", type=positive_int, default=8)
    group.add_argument("--num-workers", type=non_negative_int, default=0, help="video-decoding workers")
    group.add_argument("--video-root", default=None,
                       help="folder the videos are relative to (default: the config's, else .)")
    group.add_argument("--threads", type=positive_int, default=None,
                       help="torch CPU threads (default: torch's; 1 is fastest on a small shared CPU)")
    group.add_argument("--no-progress", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="grove judge", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("corrupt", add_help=False,
                        help="write factual-error corruptions of captions (grove judge corrupt --help)")
    score = commands.add_parser("score", help="score (video, caption) pairs")
    _judge_options(score)
    score.add_argument("--pairs", role="input", required=True,
                       help="JSONL or CSV with video, caption (optional key, clip range)")
    score.add_argument("--out", role="output", required=True, help="output JSONL (resumed when it exists)")
    predictions = commands.add_parser("predictions", help="reference-free score of a predictions file's captions")
    _judge_options(predictions)
    predictions.add_argument("--gt", role="input", required=True,
                             help="ground-truth annotations (any layout grove evaluate reads): each clip's video")
    predictions.add_argument("--pred", role="input", required=True,
                             help="predictions JSON (the format `cli.py predict` writes)")
    predictions.add_argument("--on-corrupt", default="skip", choices=ON_CORRUPT,
                             help="an unreadable file in a GT folder: 'skip' (default; counted) or 'raise'")
    predictions.add_argument("--out", role="output", required=True, help="output JSON report")
    foil = commands.add_parser("foil", help="hallucination accuracy on FOIL pairs")
    _judge_options(foil)
    source = foil.add_mutually_exclusive_group(required=True)
    source.add_argument("--activitynet-foil", role="input",
                        help="ActivityNet-FOIL folder (final_right/final_foil_video_sentences.json)")
    source.add_argument("--corruptions", role="input",
                        help="judge JSONL of the corruption generator (one-substitution rows)")
    source.add_argument("--foil-pairs", role="input", help="JSONL with key, video, original, foil")
    foil.add_argument("--video-template", default="{video_id}.mp4", help="ActivityNet-FOIL video file name")
    foil.add_argument("--out", role="output", required=True,
                      help="output JSONL of both captions' scores (resumed when it exists)")
    refine = commands.add_parser("refine", help="refine captions with the judge's explanations (prompt D.8)")
    _judge_options(refine)
    refine.add_argument("--videos", required=True, help="folder of the videos")
    refine.add_argument("--captions", role="input", default=None,
                        help="first captions: pair file or predictions JSON (GROVE)")
    refine.add_argument("--captioner", required=True, help="local Qwen2.5-VL-class folder that writes and rewrites")
    refine.add_argument("--captioner-max-new-tokens", type=positive_int, default=128)
    refine.add_argument("--captioner-max-pixels", type=positive_int, default=224 * 224)
    refine.add_argument("--rounds", type=non_negative_int, default=3, help="rewrites at most (the paper: up to 10)")
    refine.add_argument("--all-rounds", action="store_true", help="do every round even when the score stops improving")
    refine.add_argument("--out", role="output", required=True, help="output JSONL, one row per clip and round")
    return parser


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The command's options and the ``--key=value`` overrides meant for the config."""
    args, extra = build_parser().parse_known_args(argv)
    unknown = [a for a in extra if not a.startswith(OVERRIDE_PREFIXES)]
    if unknown:
        build_parser().error(f"unrecognized arguments: {' '.join(unknown)}")
    return args, extra


def make_judge(args: argparse.Namespace, overrides: Sequence[str], default_video_root: str | None = ".") -> LoadedJudge:
    chosen = [name for name in ("config", "judge", "endpoint") if getattr(args, name)]
    if len(chosen) != 1:
        raise SystemExit("error: give the judge as exactly one of --config, --judge or --endpoint")
    if args.endpoint:
        if not args.endpoint_model:
            raise SystemExit("error: --endpoint needs --endpoint-model (the served model's name)")
        try:
            loaded = LoadedJudge(EndpointJudge(args.endpoint, args.endpoint_model, args.api_key, args.concurrency))
        except ValueError as err:
            raise SystemExit(f"error: --endpoint: {err}") from None
    elif args.config:
        loaded = load_judge(args.config, ckpt_path=args.ckpt_path, overrides=overrides)
    else:
        loaded = load_judge(args.judge, base_model=args.base_model)
    loaded.num_frames = args.num_frames or loaded.num_frames
    loaded.max_new_tokens = args.max_new_tokens or loaded.max_new_tokens
    loaded.video_root = args.video_root or loaded.video_root or default_video_root
    return loaded


def _file_identity(path: str | None) -> list | None:
    """A named file or folder as (resolved path, size, modification time): a checkpoint retrained in
    place is another judge."""
    if not path:
        return None
    p = Path(path).expanduser()
    if not p.exists():
        return [str(p)]
    stat = p.stat()
    return [str(p.resolve()), stat.st_size, stat.st_mtime_ns]


def judge_identity(args: argparse.Namespace, overrides: Sequence[str]) -> str:
    """Which judge scores, as recorded in each output row (a resumed row must come from the same one)."""
    if args.endpoint:
        return json.dumps({"endpoint": args.endpoint, "model": args.endpoint_model})
    if args.config:
        return json.dumps({"config": [_file_identity(c) for c in args.config], "overrides": list(overrides),
                           "ckpt_path": _file_identity(args.ckpt_path)})
    return json.dumps({"judge": _file_identity(args.judge), "base_model": _file_identity(args.base_model)})


def _settings(loaded: LoadedJudge, args: argparse.Namespace) -> dict[str, Any]:
    return {"video_root": loaded.video_root, "num_frames": loaded.num_frames, "batch_size": args.batch_size,
            "max_new_tokens": loaded.max_new_tokens, "num_workers": args.num_workers, "progress": not args.no_progress}


def run_score(args: argparse.Namespace, overrides: Sequence[str]) -> dict[str, Any]:
    rows = read_pairs(args.pairs)
    loaded = make_judge(args, overrides)
    _, summary = score_pairs(loaded.judge, rows, args.out, **_settings(loaded, args),
                             judge_id=judge_identity(args, overrides))
    return summary


def run_predictions(args: argparse.Namespace, overrides: Sequence[str]) -> dict[str, Any]:
    """The judge's mean score of a GROVE predictions file's captions, each on its ground-truth clip."""
    try:
        records, corrupt = read_ground_truth(args.gt, args.on_corrupt)
        predictions = load_predictions(args.pred)
    except (ValueError, RecordError, FileNotFoundError) as err:
        raise SystemExit(f"error: {err}") from None
    loaded = make_judge(args, overrides, default_video_root=None)
    if loaded.video_root is None:
        raise SystemExit("error: predictions needs --video-root (the folder of the ground-truth clips' videos)")
    summary = judge_report(records, predictions, loaded.judge, loaded.video_root, num_frames=loaded.num_frames,
                           batch_size=args.batch_size, max_new_tokens=loaded.max_new_tokens,
                           progress=not args.no_progress)
    summary["corrupt_ground_truth"] = corrupt
    write_json_atomic(args.out, summary)
    return summary


def run_foil(args: argparse.Namespace, overrides: Sequence[str]) -> dict[str, Any]:
    if args.activitynet_foil:
        pairs = read_activitynet_foil(args.activitynet_foil, args.video_template)
    elif args.corruptions:
        pairs = foil_pairs_from_corruptions(read_judge_jsonl(args.corruptions))
    else:
        pairs = [{"key": str(p.get("key", n)), **p} for n, p in enumerate(
            json.loads(line) for line in Path(args.foil_pairs).read_text().splitlines() if line.strip())]
    if not pairs:
        raise SystemExit("error: no FOIL pair in the input (corruptions: no row with exactly one substitution)")
    loaded = make_judge(args, overrides)
    _, summary = score_foil_pairs(loaded.judge, pairs, args.out, **_settings(loaded, args),
                                  judge_id=judge_identity(args, overrides))
    return summary


def run_refine(args: argparse.Namespace, overrides: Sequence[str]) -> dict[str, Any]:
    inputs = read_refinement_inputs(args.videos, args.captions)
    loaded = make_judge(args, overrides)
    rows = [{**r, "caption": r["caption"] or "-"} for r in inputs]
    frames = PairFrames(rows, args.videos, loaded.num_frames)
    clips, failed = [], []
    for n in range(len(frames)):
        item = frames[n]
        (failed if item["frames"] is None else clips).append(
            {"key": item["row"]["key"], "video": item["row"]["video"], "frames": item["frames"], "fps": item["fps"],
             "error": item["error"]})
    captioner = VisionLanguageCaptioner(args.captioner, max_new_tokens=args.captioner_max_new_tokens,
                                        max_pixels=args.captioner_max_pixels)
    initial = {r["key"]: r["caption"] for r in inputs if r["caption"]}
    out = refine_captions(loaded.judge, captioner, clips, args.rounds, initial=initial,
                          stop_when_no_gain=not args.all_rounds, max_new_tokens=loaded.max_new_tokens)
    out += [{"key": c["key"], "video": c["video"], "round": 0, "caption": initial.get(c["key"]), "score": None,
             "explanation": "", "error": c["error"], "best": False} for c in failed]
    write_jsonl(out, args.out)
    best = [r for r in out if r["best"]]
    first = {r["key"]: r["score"] for r in out if r["round"] == 0}
    gains = [r["score"] - first[r["key"]] for r in best if r["score"] is not None and first[r["key"]] is not None]
    return {"clips": len(inputs), "video_errors": len(failed), "rounds_run": max((r["round"] for r in out), default=0),
            "mean_first_score": _mean([s for s in first.values() if s is not None]),
            "mean_best_score": _mean([r["score"] for r in best if r["score"] is not None]),
            "mean_gain": _mean(gains)}


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def main(argv: Sequence[str] | None = None) -> Any:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["corrupt"]:
        return generate_main(argv[1:])
    args, overrides = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    run = {"score": run_score, "predictions": run_predictions, "foil": run_foil, "refine": run_refine}[args.command]
    try:
        with hold_file(args.out, f"grove judge {args.command}"):  # appended to: one run at a time
            summary = run(args, overrides)
    except (FolderInUseError, OutputFolderError) as err:
        raise SystemExit(f"error: {err}") from None
    print(json.dumps(summary, indent=2))
    print(f"written to {args.out}")
    return summary
