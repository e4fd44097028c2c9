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

    python scripts/sweep.py --config configs/demo.yaml --preset table5 --out runs/sweeps/table5
    python scripts/sweep.py --config configs/demo.yaml --axis config=base,configs/ablations/no_objectness.yaml \\
        --axis model.init_args.lr_scheduler.init_args.warmup_steps=50,200 --out runs/sweeps/grid \\
        -- --trainer.max_epochs=2

Arguments after ``--`` go to every fit/test run (after the point's own).
"""
from __future__ import annotations

import core  # noqa: F401
from core.command_parser import CommandParser
from core.folder_lock import hold_folder
from core.json_file import read_json
from core.output_files import write_json_atomic, write_text_atomic
from core.safe_names import safe_file_name

import argparse
import csv
import gc
import io
import itertools
import shlex
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from metrics.threshold_sweep import DEFAULT_THRESHOLDS, plot_threshold_sweep, threshold_sweep, write_curves_csv

ROOT = Path(__file__).resolve().parent.parent

ABLATIONS = ROOT / "configs" / "ablations"


def _overlays(*names: str) -> list[str]:
    return [arg for name in names for arg in ("--config", str(ABLATIONS / f"{name}.yaml"))]


# The paper's ablations (GROVE paper §6.4): Table 5 (adapters; box decoder + VL + LQ trained or frozen)
# and Figure 6's companion (objectness head on/off); "freezing" takes the three parts one at a time.
PRESETS: dict[str, dict[str, list[str]]] = {
    "table5": {"full": [], "no_adapters": _overlays("no_adapters"),
               "frozen_decoder_vl_lq": _overlays("frozen_decoder_vl_lq")},
    "freezing": {"full": [], "frozen_decoder": _overlays("frozen_decoder"), "frozen_vl_lq": _overlays("frozen_vl_lq"),
                 "frozen_decoder_vl_lq": _overlays("frozen_decoder_vl_lq")},
    "objectness": {"full": [], "no_objectness": _overlays("no_objectness")},
}
# Table 5's columns, then the rest of the headline metrics.
DEFAULT_COLUMNS = ("METEOR", "CIDEr", "AP50", "recall", "mIoU", "CAPTURE")


@dataclass
class SweepPoint:
    name: str
    args: list[str] = field(default_factory=list)


def expand_grid(axes: Sequence[str]) -> list[SweepPoint]:
    """``["KEY=V1,V2", ...]`` -> the cartesian product of the values, one point per combination.

    ``config=base,path/x.yaml`` stacks an overlay (``base``: none); any other KEY becomes
    ``--KEY=value``. A point is named by its values (overlay stems, ``<last key part>=<value>``).
    """
    choices = []
    for axis in axes:
        if "=" not in axis:
            raise ValueError(f"--axis {axis!r}: expected KEY=V1,V2,...")
        key, values = axis.split("=", 1)
        options = []
        for value in (v.strip() for v in values.split(",")):
            if not value:
                raise ValueError(f"--axis {axis!r}: empty value")
            if key == "config":
                label = "base" if value in ("base", "-", "none") else Path(value).stem
                options.append((label, [] if label == "base" else ["--config", value]))
            else:
                options.append((f"{key.split('.')[-1]}={value}", [f"--{key}={value}"]))
        choices.append(options)
    points = []
    for combo in itertools.product(*choices):
        labels = [label for label, _ in combo]
        meaningful = [label for label in labels if label != "base"] or ["base"]
        points.append(SweepPoint(safe_file_name("__".join(meaningful)), [a for _, args in combo for a in args]))
    return points


def parse_points(specs: Sequence[str]) -> list[SweepPoint]:
    """``["NAME=ARGS", ...]`` (ARGS split like a shell; empty for the base config alone)."""
    points = []
    for spec in specs:
        if "=" not in spec:
            raise ValueError(f"--point {spec!r}: expected NAME=ARGS (ARGS may be empty)")
        name, args = spec.split("=", 1)
        points.append(SweepPoint(safe_file_name(name or "point"), shlex.split(args)))
    return points


def _logger_args(out: Path, name: str, version: str) -> list[str]:
    return [f"--trainer.logger.init_args.save_dir={out}", f"--trainer.logger.init_args.name={name}",
            f"--trainer.logger.init_args.version={version}"]


def _has_objectness(cli) -> bool:
    model = getattr(cli.model, "model", None)
    return getattr(model, "objectness_head", None) is not None


def run_point(point: SweepPoint, base_args: Sequence[str], out: Path, extra: Sequence[str] = (),
              thresholds: Sequence[float] = DEFAULT_THRESHOLDS, text_encoder: Any = "minilm",
              cli_main: Callable | None = None) -> dict[str, Any]:
    """Fit, test the best checkpoint and (with an objectness head) re-score at each threshold."""
    if cli_main is None:
        from cli import cli_main
    args = [*base_args, *point.args, *extra]
    fit = cli_main(["fit", *args, *_logger_args(out, point.name, "fit")])
    callback = fit.trainer.checkpoint_callback
    if callback is None:
        raise RuntimeError("the config has no ModelCheckpoint callback: the sweep tests the best checkpoint")
    ckpt = callback.best_model_path or callback.last_model_path
    del fit
    test = cli_main(["test", *args, *_logger_args(out, point.name, "test"), f"--ckpt_path={ckpt}"])
    metrics = {k.split("/", 1)[1]: float(v) for k, v in test.trainer.callback_metrics.items() if k.startswith("test/")}
    result: dict[str, Any] = {"name": point.name, "args": point.args, "checkpoint": ckpt, "metrics": metrics,
                              "test_dir": str(test.trainer.log_dir), "threshold_sweep": None}
    if thresholds and _has_objectness(test):
        records = {r.key: r for r in test.datamodule.datasets["test"].records}
        scored = cli_main(["predict", *args, *_logger_args(out, point.name, "scores"), f"--ckpt_path={ckpt}",
                           "--model.init_args.objectness_threshold=0.0"])
        path = Path(scored.trainer.log_dir) / "predictions_predict.json"
        if not path.exists():
            raise FileNotFoundError(f"{path}: the threshold sweep needs "
                                    "callbacks.prediction_writer.PredictionWriter in the config")
        rows = threshold_sweep(records, read_json(path), thresholds, text_encoder, source=str(path))
        result["threshold_sweep"] = rows
        plot_threshold_sweep({point.name: rows}, path.parent / "threshold_sweep.png")
        del scored
    del test
    gc.collect()
    return result


def _shown(value: Any) -> str:
    return f"{100 * value:.1f}" if isinstance(value, (int, float)) else "-"


def tabulate(results: Sequence[dict[str, Any]], columns: Sequence[str] = DEFAULT_COLUMNS) -> tuple[str, str]:
    """(Markdown, CSV) of the points' test metrics. Markdown shows ``columns`` x100; CSV every metric as is."""
    md = ["| point | arguments | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for r in results:
        args = " ".join(Path(a).stem if a.endswith(".yaml") else a for a in r["args"] if a != "--config")
        if r.get("error"):
            md.append(f"| {r['name']} | {args or '(base)'} | failed: {r['error'].splitlines()[-1][:80]} |"
                      + " |" * (len(columns) - 1))
        else:
            md.append(f"| {r['name']} | {args or '(base)'} | "
                      + " | ".join(_shown(r["metrics"].get(c)) for c in columns) + " |")
    md.append("")
    md.append("Test metrics x100 (" + ", ".join(columns) + "); every metric unscaled in results.csv.")
    all_metrics = sorted({m for r in results for m in r.get("metrics", {})})
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["point", "arguments", *all_metrics, "error"])
    for r in results:
        writer.writerow([r["name"], " ".join(r["args"]), *(r.get("metrics", {}).get(m, "") for m in all_metrics),
                         (r.get("error") or "").splitlines()[-1] if r.get("error") else ""])
    return "\n".join(md) + "\n", buf.getvalue()


def point_inputs(point: SweepPoint, base_args: Sequence[str], extra: Sequence[str],
                 thresholds: Sequence[float]) -> dict[str, Any]:
    """Everything a point's result depends on: a saved result is reused only when these are equal."""
    return {"base": list(base_args), "args": list(point.args), "extra": list(extra),
            "thresholds": [float(t) for t in thresholds]}


def _point_result(point, base_args, out, extra, thresholds, resume, text_encoder, cli_main) -> dict:
    saved = out / point.name / "result.json"
    inputs = point_inputs(point, base_args, extra, thresholds)
    if resume and saved.exists():
        result = read_json(saved)
        if not result.get("error") and result.get("inputs") == inputs:
            print(f"[sweep] {point.name}: done before with the same inputs, reusing {saved}")
            return result
        print(f"[sweep] {point.name}: {saved} " + ("failed" if result.get("error") else "had other inputs")
              + ", run again")
    print(f"[sweep] {point.name}: {' '.join(point.args) or '(base config)'}", flush=True)
    try:
        result = run_point(point, base_args, out, extra, thresholds, text_encoder, cli_main)
    except (Exception, SystemExit):  # noqa: BLE001  (a bad point must not lose the others)
        result = {"name": point.name, "args": point.args, "metrics": {}, "error": traceback.format_exc()}
        print(f"[sweep] {point.name} failed:\n{result['error']}", file=sys.stderr)
    result = {**result, "inputs": inputs}
    write_json_atomic(saved, result)
    return result


def run_sweep(base_args: Sequence[str], points: Sequence[SweepPoint], out: str | Path, extra: Sequence[str] = (),
              thresholds: Sequence[float] = DEFAULT_THRESHOLDS, columns: Sequence[str] = DEFAULT_COLUMNS,
              resume: bool = False, text_encoder: Any = "minilm", cli_main: Callable | None = None) -> list[dict]:
    """Run every point (a failing point is recorded and the sweep goes on), then write the tables and plot."""
    out = Path(out)
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep points must have distinct names, got {names}")
    if isinstance(text_encoder, str):
        from metrics.text_encoder import build_text_encoder

        text_encoder = build_text_encoder(text_encoder)
    with hold_folder(out, "scripts/sweep.py"):  # two sweeps in one folder would overwrite each other's points
        results = [_point_result(point, base_args, out, extra, thresholds, resume, text_encoder, cli_main)
                   for point in points]
    markdown, table_csv = tabulate(results, columns)
    write_text_atomic(out / "results.md", markdown)
    write_text_atomic(out / "results.csv", table_csv)
    curves = {r["name"]: r["threshold_sweep"] for r in results if r.get("threshold_sweep")}
    if curves:
        plot_threshold_sweep(curves, out / "threshold_sweep.png")
        write_curves_csv(curves, out / "threshold_sweep.csv")
    print(f"\n{markdown}\nwritten: {out / 'results.md'}, {out / 'results.csv'}"
          + (f", {out / 'threshold_sweep.png'}" if curves else ""))
    return results


def main(argv: Sequence[str] | None = None) -> list[dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", role="input", action="append", default=[], help="base config(s), stacked in order")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="the paper's ablations: " + ", ".join(
        f"{k} ({', '.join(v)})" for k, v in PRESETS.items()))
    parser.add_argument("--point", action="append", default=[], help='NAME="ARGS" (repeat)')
    parser.add_argument("--axis", action="append", default=[], help="KEY=V1,V2 (repeat for a grid)")
    parser.add_argument("--out", role="output", required=True, help="sweep folder (one sub-folder per point)")
    parser.add_argument("--thresholds", default=",".join(str(t) for t in DEFAULT_THRESHOLDS),
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
    thresholds = [float(t) for t in args.thresholds.split(",") if t.strip()]
    columns = [c for c in args.columns.split(",") if c]
    results = run_sweep(base, points, args.out, extra, thresholds, columns, args.resume, args.text_encoder)
    if any(r.get("error") for r in results):
        sys.exit(1)
    return results


if __name__ == "__main__":
    main()
