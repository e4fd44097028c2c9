"""``grove pointing``: pointing-game accuracy of a predictions file (:mod:`metrics.protocols.pointing`)."""
from __future__ import annotations

import core  # noqa: F401
from core.command_parser import CommandParser

import json
import pickle
import sys
from pathlib import Path
from typing import Any, Sequence

from formats.pointing_records import POINTING_DATASETS
from metrics.protocols import pointing as protocol
from metrics.protocols.pointing import MISSING_POLICIES, evaluate_files


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = CommandParser(prog="grove pointing", description=protocol.__doc__.split("\n\n")[0])
    parser.add_argument("--gt", role="input", required=True, help="full_annotations.pkl of the benchmark")
    parser.add_argument("--pred", role="input", required=True, nargs="+",
                        help="predictions: the project's JSON (several: the per-process files of a multi-GPU "
                             "predict) or the released inference's pickle")
    parser.add_argument("--dataset", required=True, choices=sorted(POINTING_DATASETS))
    parser.add_argument("--missing", default="miss", choices=MISSING_POLICIES,
                        help="a ground-truth clip without prediction: its boxed seconds are misses, or an error")
    parser.add_argument("--out", role="output", help="also write the report as JSON here")
    args = parser.parse_args(argv)
    try:
        report = evaluate_files(args.gt, args.pred, args.dataset, args.missing)
    except (OSError, ValueError, pickle.UnpicklingError) as err:  # an unsafe pickle is an UnpicklingError
        parser.exit(2, f"error: {err}\n")
    print(f"Pointing-game accuracy ({args.dataset}): {report['accuracy']:.2f}% "
          f"({report['correct']} / {report['valid']} boxed seconds, {report['clips']} clips)")
    if report["missing_clips"]:
        print(f"  {report['missing_clips']} clip(s) without prediction counted as misses, "
              f"e.g. {report['missing_examples'][:3]}", file=sys.stderr)
    if report["duplicate_clips"]:
        print(f"  warning: {args.gt}: {report['duplicate_clips']} segment(s) listed more than once, each copy "
              f"scored as the released script does, e.g. {report['duplicate_examples'][:3]}", file=sys.stderr)
    if report["unscored_seconds"]:
        print(f"  {report['unscored_seconds']} boxed second(s) beyond their clip's final_boxes not counted",
              file=sys.stderr)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report

