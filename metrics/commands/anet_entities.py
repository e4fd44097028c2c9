"""``grove anet-entities``: ActivityNet-Entities grounding evaluation
(:mod:`metrics.protocols.anet_entities`)."""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import unit_float
from core.command_parser import CommandParser
from core.output_files import write_json_atomic
from core.user_errors import UserInputError

from typing import Sequence

from metrics.protocols.anet_entities import (
    IOU_THRESHOLD,
    SPACY_MODEL,
    evaluate_anet_entities,
    evaluate_gt_grounding,
    load_reference,
    load_submission,
    spacy_lemmatizer,
    submission_from_predictions,
)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = CommandParser(description="ActivityNet-Entities grounding evaluation (official definitions).")
    parser.add_argument("--reference", role="input", required=True,
                        help="anet_entities_cleaned_class_thresh50_trainval.json")
    parser.add_argument("--split-file", role="input", default=None, help="split_ids_anet_entities.json")
    parser.add_argument("--split", nargs="+", default=["validation"], help="split(s) to evaluate")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--submission", role="input", help="an official submission file {'results': ...}")
    source.add_argument("--pred", role="input",
                        help="the project's predictions JSON (the format predict writes), keyed {video}_{segment}")
    parser.add_argument("--eval-mode", default="gen", choices=("gen", "GT"))
    parser.add_argument("--iou-threshold", type=unit_float, default=IOU_THRESHOLD)
    parser.add_argument("--spacy-model", default=SPACY_MODEL)
    parser.add_argument("--write-submission", role="output", default=None,
                        help="with --pred: also write the official submission here")
    parser.add_argument("--out", role="output", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    try:  # the protocol's loaders refuse a file of another layout with ValueError
        reference = load_reference(args.reference, args.split_file, args.split)
        submission = load_submission(args.submission) if args.submission else None
    except ValueError as err:
        raise UserInputError(str(err)) from None
    lemmatize = spacy_lemmatizer(args.spacy_model)
    if submission is None:
        from formats.predictions import load_predictions

        submission = submission_from_predictions(load_predictions(args.pred), reference, lemmatize)
        if args.write_submission:
            write_json_atomic(args.write_submission, {"results": submission, "eval_mode": args.eval_mode}, indent=None)
    if args.eval_mode == "GT":
        report = evaluate_gt_grounding(reference, submission, args.iou_threshold)
    else:
        report = evaluate_anet_entities(reference, submission, lemmatize, args.iou_threshold)
    for name, value in report.items():
        print(f"{name:<28} {value:.0f}" if name.startswith("num_") else f"{name:<28} {value:.4f}")
    if args.out:
        write_json_atomic(args.out, {"metrics": report})
    return report

