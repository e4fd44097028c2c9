"""``grove mevis``: MeViS J, F and J&F of predicted masks (:mod:`metrics.protocols.mevis`)."""
from __future__ import annotations

import core  # noqa: F401
from core.command_parser import CommandParser

from pathlib import Path
from typing import Sequence

from metrics.functional.region_contour import BOUND_TH


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = CommandParser(description="MeViS referring video segmentation: J, F and J&F per expression and overall.")
    parser.add_argument("--split", role="input", required=True,
                        help="a MeViS split folder as distributed (valid_u: meta_expressions.json, mask_dict.json, "
                             "JPEGImages/)")
    parser.add_argument("--pred", role="input", required=True,
                        help="predictions JSON (one clip per expression, keyed {video}_{exp_id}, with masks) or a "
                             "folder in MeViS's submission layout <video>/<exp_id>/<frame>.png")
    parser.add_argument("--bound-th", type=float, default=BOUND_TH,
                        help="F's boundary tolerance: a share of the frame diagonal (< 1) or pixels (>= 1)")
    parser.add_argument("--out", role="output", default=None, help="write the report as JSON here")
    args = parser.parse_args(argv)
    from core.output_files import write_json_atomic

    from formats.predictions import load_predictions
    from metrics.protocols.mevis import (
        evaluate_mevis,
        frame_size,
        json_prediction_masks,
        png_prediction_masks,
        read_mask_dict,
        read_mevis_expressions,
    )

    split, pred = Path(args.split), Path(args.pred)
    expressions = read_mevis_expressions(split / "meta_expressions.json")
    masks = read_mask_dict(split / "mask_dict.json")
    predicted = (png_prediction_masks(pred) if pred.is_dir()
                 else json_prediction_masks(load_predictions(pred), str(pred)))
    report = evaluate_mevis(expressions, masks, predicted, lambda e: frame_size(split, e), args.bound_th,
                            source=str(split / "mask_dict.json"))
    for name, value in report["metrics"].items():
        print(f"{name:<20} {value:.0f}" if name.startswith("num_") else f"{name:<20} {value:.4f}")
    if report["metrics"]["num_missing"]:
        print(f"expressions without a prediction (scored J = F = 0): {report['metrics']['num_missing']:.0f}")
    if args.out:
        write_json_atomic(args.out, report)
    return report["metrics"]
