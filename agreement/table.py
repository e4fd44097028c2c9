"""The agreement table as text: metrics as rows, each benchmark's statistics as columns (as the
papers lay theirs out), then what was skipped and why."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

from agreement.benchmarks.items import Benchmark
from agreement.statistics import STATISTICS


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:.4f}"


def format_table(table: Mapping[str, Mapping[str, Mapping[str, float]]], benchmarks: Sequence[Benchmark],
                 skipped: Mapping[str, str]) -> str:
    columns = [(b.name, s) for b in benchmarks for s in b.statistics]
    if not columns:
        lines = ["No benchmark could be read."]
        lines += ["", "Skipped:"] + [f"- {what}: {why}" for what, why in skipped.items()] if skipped else []
        return "\n".join(lines) + "\n"
    header = "| metric | " + " | ".join(f"{b} {STATISTICS[s]}" for b, s in columns) + " |"
    lines = [header, "|" + "---|" * (len(columns) + 1)]
    for metric, cells in table.items():
        row = [_cell(cells.get(b, {}).get(s)) for b, s in columns]
        lines.append(f"| {metric} | " + " | ".join(row) + " |")
    if skipped:
        lines += ["", "Skipped:"] + [f"- {what}: {why}" for what, why in skipped.items()]
    return "\n".join(lines) + "\n"
