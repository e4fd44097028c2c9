"""``grove agreement run --config CONFIG --out DIR``: every configured metric on every configured
benchmark, with each benchmark's agreement statistics; writes DIR/table.json
(``{metric: {benchmark: {statistic: value}}}``), DIR/table.md and DIR/skipped.json.

FG-Eval sets are built by the judge's corruption generator (``grove judge corrupt --youcook2
youcookii_annotations_trainval.json --out yc2_fg_eval.jsonl``, or ``--activitynet val_1.json``).
"""
from __future__ import annotations

from core.cli_args import existing_file
from core.command_parser import CommandParser
from core.output_files import refuse_input_as_output, write_text_atomic
from core.user_errors import run_command

import json
from pathlib import Path

import yaml

from agreement.config import ConfigError, build_benchmark, build_scorer
from agreement.media import FrameLoader
from agreement.scorers.base import MissingWeights
from agreement.suite import agreement_statistics, applicable
from agreement.table import format_table


def run(config_path: str, out: str, progress: bool = True, device: str = "cpu") -> dict:
    refuse_input_as_output(out, {"--config": config_path})
    config = yaml.safe_load(Path(config_path).read_text()) or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{config_path}: expected a mapping with 'benchmarks' and 'metrics'")
    paths: dict[str, str] = {}
    if config.get("prepare_synthetic"):
        from agreement.synthetic import prepare_synthetic_benchmarks

        paths = {k: str(v) for k, v in prepare_synthetic_benchmarks(**config["prepare_synthetic"]).items()}
    skipped: dict[str, str] = {}
    benchmarks = []
    for name, spec in (config.get("benchmarks") or {}).items():
        try:
            benchmarks.append(build_benchmark(name, spec, paths))
        except FileNotFoundError as err:
            skipped[f"benchmark {name}"] = str(err)
    scorers = []
    for name, spec in (config.get("metrics") or {}).items():
        try:
            scorers.append(build_scorer(name, spec, device))
        except MissingWeights as err:
            skipped[f"metric {name}"] = str(err)
    num_frames = int(config.get("num_frames", 8))
    loaders = {b.name: FrameLoader(b.media_root, num_frames) for b in benchmarks}
    table: dict[str, dict[str, dict[str, float]]] = {}
    jobs = [(s, b) for s in scorers for b in benchmarks]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc="agreement", unit="cell")
    for scorer, benchmark in jobs:
        reason = applicable(scorer, benchmark)
        if reason is None:
            scores = scorer.score(benchmark.items, loaders[benchmark.name], progress=progress)
            table.setdefault(scorer.name, {})[benchmark.name] = agreement_statistics(benchmark, scores)
        else:
            skipped[f"{scorer.name} on {benchmark.name}"] = reason
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    out_dir = Path(out)
    write_text_atomic(out_dir / "table.json", json.dumps(table, indent=2, allow_nan=True) + "\n")
    write_text_atomic(out_dir / "skipped.json", json.dumps(skipped, indent=2) + "\n")
    text = format_table(table, benchmarks, skipped)
    write_text_atomic(out_dir / "table.md", text)
    print(text)
    return {"table": table, "skipped": skipped}


def main(argv: list[str] | None = None) -> dict:
    """``grove agreement run ...``; bad input (a malformed config, a missing file) ends in one error line."""
    return run_command(_main, argv)


def _main(argv: list[str] | None) -> dict:
    parser = CommandParser(prog="grove agreement", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="score the configured metrics on the configured benchmarks")
    p_run.add_argument("--config", role="input", type=existing_file, required=True)
    p_run.add_argument("--out", role="output", required=True)
    p_run.add_argument("--no-progress", action="store_true")
    p_run.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    return run(args.config, args.out, progress=not args.no_progress, device=args.device)


if __name__ == "__main__":
    main()
