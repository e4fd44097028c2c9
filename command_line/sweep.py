"""Ablation sweeps: fit then test every point of a grid of overrides, each in its own run folder.

A point is a list of command-line arguments stacked on the base config(s): overlay configs
(``--config configs/ablations/no_adapters.yaml``) and/or key overrides
(``--model.init_args.train_decoder=false``). Points come from a preset (the paper's tables), from
``--point NAME="ARGS"``, or from the cartesian product of ``--axis KEY=V1,V2`` (``config`` as the
KEY takes overlay files; ``base`` means none). For each point, in ``OUT/<point>/``:

* ``fit/``: the training run (TensorBoard logs, checkpoints);
* ``test/``: the test run of the best checkpoint (metrics, ``predictions_test.json``);
* ``scores/``: with an objectness head, predictions of every box with its score
  (``objectness_threshold=0``) re-scored at thresholds 0.0-0.5 (the paper's Figure 6);
* ``result.json``: the point's arguments, checkpoint and metrics (``--resume`` skips points that have one).

Then ``OUT/results.md`` / ``OUT/results.csv`` tabulate the test metrics of all points and
``OUT/threshold_sweep.{png,csv}`` put their threshold curves side by side.

    grove sweep --config configs/demo.yaml --preset table5 --out runs/sweeps/table5
    grove sweep --config configs/demo.yaml --axis config=base,configs/ablations/no_objectness.yaml \\
        --axis model.init_args.lr_scheduler.init_args.warmup_steps=50,200 --out runs/sweeps/grid \\
        -- --trainer.max_epochs=2

Arguments after ``--`` go to every fit/test run (after the point's own).
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import existing_file, unit_float
from core.command_parser import CommandParser

import argparse
import sys
from typing import Sequence

from metrics.protocols.threshold_sweep import DEFAULT_THRESHOLDS
from sweeps.points import PRESETS, SweepPoint, expand_grid, parse_points
from sweeps.runner import run_sweep
from sweeps.tables import DEFAULT_COLUMNS

__all__ = ["PRESETS", "SweepPoint", "expand_grid", "main", "parse_points", "run_sweep"]


def _thresholds(text: str) -> list[float]:
    """``0.1,0.2`` -> [0.1, 0.2] (empty: no threshold sweep); each a number in [0, 1]."""
    values = [t.strip() for t in text.split(",") if t.strip()]
    return [unit_float(t) for t in values]


def main(argv: Sequence[str] | None = None) -> list[dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", role="input", action="append", default=[], type=existing_file,
                        help="base config(s), stacked in order")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="the paper's ablations: " + ", ".join(
        f"{k} ({', '.join(v)})" for k, v in PRESETS.items()))
    parser.add_argument("--point", action="append", default=[], help='NAME="ARGS" (repeat)')
    parser.add_argument("--axis", action="append", default=[], help="KEY=V1,V2 (repeat for a grid)")
    parser.add_argument("--out", role="output", required=True, help="sweep folder (one sub-folder per point)")
    parser.add_argument("--thresholds", type=_thresholds, default=list(DEFAULT_THRESHOLDS),
                        help="objectness thresholds to re-score at; empty to skip")
    parser.add_argument("--columns", default=",".join(DEFAULT_COLUMNS), help="metrics in results.md")
    parser.add_argument("--text-encoder", default="minilm", help="phrase encoder for recall in the threshold sweep")
    parser.add_argument("--resume", action="store_true",
                        help="reuse points whose result.json succeeded with the same configs, args and thresholds")
    parser.add_argument("--dry-run", action="store_true", help="print the points and stop")
    args = parser.parse_args(argv)

    points = [SweepPoint(n, list(a)) for n, a in PRESETS[args.preset].items()] if args.preset else []
    points += parse_points(args.point) + (expand_grid(args.axis) if args.axis else [])
    if not points:
        parser.error("no points: give --preset, --point or --axis")
    base = [a for c in args.config for a in ("--config", c)]
    if args.dry_run:
        for p in points:
            print(f"{p.name}: fit/test {' '.join([*base, *p.args, *extra])}")
        return []
    thresholds = args.thresholds
    columns = [c for c in args.columns.split(",") if c]
    from cli import cli_main

    results = run_sweep(base, points, args.out, extra, thresholds, columns, args.resume, args.text_encoder,
                        cli_main=cli_main)
    if any(r.get("error") for r in results):
        sys.exit(1)
    return results
