"""Running an ablation sweep: fit, test the best checkpoint and re-score at objectness thresholds for
every point, each in its own run folder; a failing point is recorded and the sweep goes on.

The runs go through the project's LightningCLI, which the entry point passes in as ``cli_main``
(``command_line.grove_cli.cli_main``: this package sits below the command line).
"""
from __future__ import annotations

from core.folder_lock import hold_folder
from core.json_file import read_json
from core.output_files import write_json_atomic, write_text_atomic

import gc
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

from metrics.protocols.threshold_sweep import (
    DEFAULT_THRESHOLDS,
    plot_threshold_sweep,
    threshold_sweep,
    write_curves_csv,
)
from sweeps.points import SweepPoint
from sweeps.tables import DEFAULT_COLUMNS, tabulate


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
        raise TypeError("run_point needs cli_main (command_line.grove_cli.cli_main) to fit and test")
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
    with hold_folder(out, "grove sweep"):  # two sweeps in one folder would overwrite each other's points
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
