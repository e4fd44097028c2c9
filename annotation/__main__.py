"""Command line: ``grove annotate run ...`` and ``grove annotate score ...``.

run    annotate videos (Stages 1-3) into OUT/annotations (HowToGround1M per-key pickles) + OUT/report.json
score  score an output against ground truth with the project's evaluator
detail-captions  detail captions of images, frames or videos (the CAPTURE paper's five stages)
compare  the proposed pipeline against its alternatives on the same clips (the GROVE paper's Table 6)
"""
from __future__ import annotations

import core  # noqa: F401  (transformers imports torchvision: the shim must run first)
from core.cli_args import non_negative_int, positive_int
from core.command_parser import CommandParser
from core.output_files import write_json_atomic

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Sequence


def _run(args) -> dict:
    from annotation.commands.run import run_annotation
    from annotation.config import load_config

    overrides = {}
    if args.batch_size is not None:
        overrides["engine"] = {"batch_size": args.batch_size}
    config = load_config(args.config, overrides)
    report = run_annotation(config, list(args.config), args.videos, args.out, args.truth, args.engine, args.limit,
                            args.retry_rejected, not args.no_progress, args.ray_address)
    summary = {k: report[k] for k in ("clips", "stages", "wall_s", "rejected_by_reason")}
    print(json.dumps(summary, indent=2))
    print(f"report written to {Path(args.out) / 'report.json'}")
    return report


def _score(args) -> dict:
    from annotation.commands.score import score_output
    from metrics.evaluator.evaluation import format_table

    report = score_output(args.pred, args.truth, args.clips, args.text_encoder,
                          tuple(m for m in args.caption_metrics.split(",") if m), not args.no_capture)
    print(format_table(report))
    cov = report["coverage"]
    print(f"accepted clips: {cov['accepted']} of {cov['truth_clips']} ({cov['accepted_share']:.1%}); "
          f"scored: {cov['scored_clips']}")
    if args.out:
        write_json_atomic(args.out, report)
        print(f"report written to {args.out}")
    return report


def _compare(args) -> dict:
    from annotation.commands.compare import run_compare

    result = run_compare(args.config, args.out, progress=not args.no_progress)
    print((Path(args.out) / "table6.md").read_text())
    print(f"written: {Path(args.out) / 'table6.md'}, {Path(args.out) / 'table6.json'}")
    return result


def _detail(args) -> dict:
    from annotation.commands.detail_captions import run_detail_captions

    result = run_detail_captions(args.config, args.inputs, args.out, args.frames_per_video)
    for key, item in result["captions"].items():
        print(f"{key}: {item['caption']}")
    print(f"written: {args.out}")
    return result


def main(argv: Sequence[str] | None = None) -> dict:
    parser = CommandParser(prog="grove annotate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="annotate videos")
    run.add_argument("--config", role="input", action="append", required=True,
                     help="YAML config; repeat to stack overlays (later files override earlier ones)")
    run.add_argument("--videos", role="input", required=True, help="folder of videos (or of frame folders)")
    run.add_argument("--out", role="output", required=True, help="output folder (re-runs resume in it)")
    run.add_argument("--truth", role="input", default=None,
                     help="ground-truth annotations: the clips to annotate, and the noisy-oracle Stage 1's source")
    run.add_argument("--engine", default="local", choices=("local", "ray"))
    run.add_argument("--ray-address", default=None,
                     help="address of an existing Ray cluster ('auto' or ray://host:10001); default: a local instance")
    run.add_argument("--limit", type=non_negative_int, default=None, help="annotate at most the first N planned clips")
    run.add_argument("--batch-size", type=positive_int, default=None,
                     help="clips per batch (overrides engine.batch_size)")
    run.add_argument("--retry-rejected", action="store_true", help="redo clips rejected by an earlier run")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    score = sub.add_parser("score", help="score an output against ground truth")
    score.add_argument("--pred", role="input", required=True, help="pipeline output folder (OUT or OUT/annotations)")
    score.add_argument("--truth", role="input", required=True,
                       help="ground-truth annotations (any layout the project reads)")
    score.add_argument("--out", role="output", default=None, help="write the report as JSON here")
    score.add_argument("--clips", default="accepted", choices=("accepted", "all"),
                       help="score the accepted clips only, or all GT clips (missing ones as empty)")
    score.add_argument("--text-encoder", default="minilm", help="'minilm', 'exact' or a local HF encoder folder")
    score.add_argument("--caption-metrics", default="BLEU-4,METEOR,ROUGE-L,CIDEr",
                       help="comma-separated; empty to skip (METEOR and the tokenizer need Java)")
    score.add_argument("--no-capture", action="store_true", help="skip CAPTURE")
    compare = sub.add_parser("compare", help="Table 6: the proposed pipeline vs its alternatives, scored")
    compare.add_argument("--config", role="input", required=True, help="comparison YAML (data, base, rows)")
    compare.add_argument("--out", role="output", required=True,
                         help="output folder: table6.md, table6.json, runs/<row>/")
    compare.add_argument("--no-progress", action="store_true", help="no progress bars")
    detail = sub.add_parser("detail-captions", help="detail captions (CAPTURE paper, sec. 4.1) of images/videos")
    detail.add_argument("--config", role="input", required=True,
                        help="YAML with 'detail_captions' (stage models) and 'llm'")
    detail.add_argument("--out", role="output", required=True, help="output JSON file")
    detail.add_argument("--frames-per-video", type=positive_int, default=None, help="frames captioned per video")
    detail.add_argument("inputs", role="input", nargs="+", help="images, folders of frame images, or videos")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from core.folder_lock import FolderInUseError

    from annotation.config import ConfigError
    from formats.records import RecordError

    try:
        return {"run": _run, "score": _score, "compare": _compare, "detail-captions": _detail}[args.command](args)
    except (ConfigError, RecordError, FileNotFoundError, NotADirectoryError, ValueError, FolderInUseError) as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main(sys.argv[1:])
