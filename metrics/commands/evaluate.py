"""Offline evaluator: ``grove evaluate --gt <annotations> --pred <predictions.json>``.

GT in any annotation layout the project reads (project JSON, one pickle of all records, a folder
of per-key pickles); predictions in the JSON format predict writes. Two protocols (``docs/evaluation_protocols.md``):

* ``project`` (default): :mod:`metrics.functional.grounding`; clips missing from the predictions count as
  empty predictions and are listed; predicted clips absent from the GT are listed and ignored.
* ``official``: the GROVE release's ``eval_iground.py`` (:mod:`metrics.protocols.official_iground`), for
  comparison with published figures; it needs the local ``bert-base-uncased`` folder.

Predicted boxes that cannot be right are rejected (:mod:`metrics.evaluator.prediction_validation`) unless
``--invalid skip`` drops and counts them; a corrupt file in a GT folder is skipped and counted
(``--on-corrupt raise`` stops instead). Prints a table and optionally writes the report as JSON.
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import unit_float
from core.command_parser import CommandParser
from core.output_files import write_json_atomic

import argparse
import pickle
from pathlib import Path
from typing import Any, Sequence

from formats.records import ON_CORRUPT, RecordError
from metrics.evaluator.evaluation import LEVEL_CHOICES, PROTOCOLS, evaluate_files, format_table
from metrics.evaluator.prediction_validation import INVALID_POLICIES, OFF_GRID_POLICIES

# The evaluation itself is metrics.evaluator.evaluation; this module is the command only.


def build_parser() -> argparse.ArgumentParser:
    """Every command-line option of the evaluator (one place, so options can be added beside them)."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gt", role="input", required=True,
                        help="annotation file or folder (JSON, pickle, per-key pickles)")
    parser.add_argument("--pred", role="input", required=True, help="predictions JSON (the format predict writes)")
    parser.add_argument("--protocol", default="project", choices=PROTOCOLS,
                        help="'project' (default) or 'official' (the GROVE release's eval_iground.py)")
    parser.add_argument("--level", default="both", choices=sorted(LEVEL_CHOICES),
                        help="video, frame, both, or center: only each clip's centre annotated frame (the GROVE "
                             "paper's Table 2 'Center' set-up; docs/metrics.md)")
    parser.add_argument("--score-source", default="constant", choices=("constant", "objectness"))
    parser.add_argument("--text-encoder", default=None,
                        help="'minilm' (project default), 'exact' or a local HF encoder folder; the official "
                             "protocol needs the local bert-base-uncased folder")
    parser.add_argument("--caption-metrics", default="BLEU-4,METEOR,ROUGE-L,CIDEr",
                        help="comma-separated; empty to skip (METEOR and the tokenizer need Java)")
    parser.add_argument("--no-capture", action="store_true", help="skip CAPTURE")
    parser.add_argument("--capture-conventions", default="default", choices=("default", "official", "project"),
                        help="CAPTURE scoring conventions (docs/metrics.md); 'default' scores as capture-metric "
                             "0.1.13 except its substring synonyms and order-dependent matching")
    parser.add_argument("--capture-stop-words", default="authors", choices=("authors", "project"),
                        help="CAPTURE's stop list: the authors' (from capture-metric 0.1.13, as published "
                             "numbers) or the project's abstract_nouns.txt (docs/metrics.md)")
    parser.add_argument("--objectness-threshold", type=unit_float, default=None,
                        help="drop predicted boxes scored below this before evaluating")
    parser.add_argument("--invalid", default="error", choices=INVALID_POLICIES,
                        help="predicted boxes that cannot be right: 'error' (default) or 'skip' (drop and count)")
    parser.add_argument("--off-grid", default="error", choices=OFF_GRID_POLICIES,
                        help="predicted frames with boxes that are not annotated frames of their clip: 'error' "
                             "(default; names clip and frames) or 'nearest' (map each to the nearest annotated "
                             "frame, counted in the report)")
    parser.add_argument("--on-corrupt", default="skip", choices=ON_CORRUPT,
                        help="an unreadable file in a GT folder: 'skip' (default; counted) or 'raise'")
    parser.add_argument("--out", role="output", default=None, help="write the report as JSON here")
    return parser


def _located(err: Exception, gt: str) -> str:
    """The error's message; for GT that is not UTF-8 text, the file and line of the first bad byte."""
    if not isinstance(err.__context__, UnicodeDecodeError) or not Path(gt).is_file():
        return str(err)
    with open(gt, "rb") as f:
        for number, line in enumerate(f, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                return (f"{gt}, line {number}: not UTF-8 text (byte {line[bad.start]:#04x} at column {bad.start + 1}); "
                        "save the file as UTF-8")
    return str(err)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the evaluator on ``argv`` (default: the command line); returns the report."""
    args = build_parser().parse_args(argv)
    encoder = args.text_encoder
    if encoder is None and args.protocol == "project":
        encoder = "minilm"
    try:
        report = evaluate_files(args.gt, args.pred, args.level, args.score_source, encoder,
                                tuple(m for m in args.caption_metrics.split(",") if m), not args.no_capture,
                                args.objectness_threshold, protocol=args.protocol, invalid=args.invalid,
                                on_corrupt=args.on_corrupt, capture_conventions=args.capture_conventions,
                                capture_stop_words=args.capture_stop_words, off_grid=args.off_grid)
    except (ValueError, RecordError, OSError, pickle.UnpicklingError) as err:
        raise SystemExit(f"error: {_located(err, args.gt)}") from None
    print(format_table(report))
    if args.out:
        write_json_atomic(args.out, report)
        print(f"report written to {args.out}")
    return report

