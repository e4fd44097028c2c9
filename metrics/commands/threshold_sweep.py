"""``grove threshold-sweep``: re-score saved predictions at objectness thresholds
(:mod:`metrics.protocols.threshold_sweep`)."""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import unit_float_list
from core.command_parser import CommandParser

import argparse
import warnings
from pathlib import Path
from typing import Sequence

from metrics.protocols import threshold_sweep as protocol
from metrics.protocols.threshold_sweep import (
    DEFAULT_THRESHOLDS,
    LEVELS,
    markdown_rows,
    plot_threshold_sweep,
    threshold_sweep,
    under_filtered_clips,
    write_curves_csv,
)


def _named(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH`` (named after its folder)."""
    if "=" in spec and not Path(spec).exists():
        name, path = spec.split("=", 1)
        return name, Path(path)
    return Path(spec).parent.name or Path(spec).stem, Path(spec)


def main(argv: Sequence[str] | None = None) -> dict[str, list[dict[str, float]]]:
    parser = CommandParser(description=protocol.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gt", role="input", required=True,
                        help="annotation file or folder (any layout the evaluator reads)")
    parser.add_argument("--pred", required=True, action="append",
                        help="predictions JSON saved with objectness_threshold=0.0; repeat (NAME=PATH) to compare runs")
    parser.add_argument("--out", role="output", required=True, help="folder for threshold_sweep.{csv,json,png}")
    parser.add_argument("--thresholds", type=unit_float_list, default=list(DEFAULT_THRESHOLDS),
                        help="comma-separated objectness thresholds in [0, 1]")
    parser.add_argument("--level", default="both", choices=sorted(LEVELS))
    parser.add_argument("--score-source", default="constant", choices=("constant", "objectness"))
    parser.add_argument("--text-encoder", default="minilm", help="'minilm', 'exact' or a local HF encoder folder")
    args = parser.parse_args(argv)

    from core.output_files import refuse_input_as_output, write_json_atomic

    from formats.predictions import load_predictions
    from formats.records import read_ground_truth
    from metrics.text_encoder import build_text_encoder

    thresholds = list(args.thresholds)
    refuse_input_as_output(args.out, {"--gt": args.gt, **{f"--pred {spec}": _named(spec)[1] for spec in args.pred}})
    records, _ = read_ground_truth(args.gt)
    encoder = build_text_encoder(args.text_encoder)
    out = Path(args.out)
    curves: dict[str, list[dict[str, float]]] = {}
    for spec in args.pred:
        name, path = _named(spec)
        predictions = load_predictions(path)
        short = under_filtered_clips(records, predictions)
        if short and min(thresholds) < 0.5:
            warnings.warn(f"{path}: {len(short)} clip(s) (e.g. {short[0]}) hold fewer boxes than phrases x frames: "
                          "they were probably saved with objectness_threshold > 0, so low thresholds are not "
                          "re-scored correctly. Save predictions with --model.init_args.objectness_threshold=0.0.")
        curves[name] = threshold_sweep(records, predictions, thresholds, encoder, args.level, args.score_source,
                                       source=str(path))
        print(f"\n{name} ({path}):\n{markdown_rows(curves[name])}")
    out.mkdir(parents=True, exist_ok=True)
    write_curves_csv(curves, out / "threshold_sweep.csv")
    write_json_atomic(out / "threshold_sweep.json", curves)
    png = plot_threshold_sweep(curves, out / "threshold_sweep.png")
    print(f"\nwritten: {out / 'threshold_sweep.csv'}, {out / 'threshold_sweep.json'}, {png}")
    return curves

