"""The synthetic FG-Eval sets (VC-Inspector paper, section 4.3): reference captions corrupted by the
project's generator (:mod:`judge.data.corruption.generator`), each with its generated 1-5 score; a metric
should rank them as the scores do (Kendall tau-b and Spearman rho, Table 1).

ActivityNet-FG-Eval corrupts the ActivityNet Captions test captions, YouCook2-FG-Eval the YouCook2
validation captions (``youcookii_annotations_trainval.json``, read by
:func:`judge.data.readers.read_youcook2_captions`): ``grove judge corrupt --youcook2 FILE --out ...``.

Each item keeps the caption the corruption started from as its reference: reference-based
metrics then see the uncorrupted caption, an upper bound rather than a comparable figure.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from agreement.benchmarks.items import Benchmark, BenchmarkFormatError, CaptionItem, Visual
from judge.data.readers import read_judge_jsonl

FG_STATISTICS = ("kendall_tau_b", "spearman_rho")


def read_fg_eval(path: str | Path, name: str = "FG-Eval") -> Benchmark:
    """Corruption rows (``key``, ``video``, ``caption``, ``score``, ``original_caption``, clip range)."""
    path = Path(path)
    rows = read_judge_jsonl(path)
    items, ratings, first_row = [], [], {}
    for n, row in enumerate(rows):
        if row.get("score") is None:
            raise BenchmarkFormatError(f"{path}, row {n + 1} ('{row['key']}'): no 'score' (not a corruption row)")
        if row["key"] in first_row:  # one caption scored twice would weigh twice in the correlations
            raise BenchmarkFormatError(f"{path}, row {n + 1}: key '{row['key']}' is also row {first_row[row['key']]}; "
                                       "keys must be unique (remove or rename one of the two rows)")
        first_row[row["key"]] = n + 1
        visual = Visual(video=row["video"], start_s=row.get("start_s"), end_s=row.get("end_s"),
                        start_frame=row.get("start_frame"), end_frame=row.get("end_frame"))
        refs = [row["original_caption"]] if isinstance(row.get("original_caption"), str) else []
        items.append(CaptionItem(row["key"], row["caption"], visual, refs, str(row.get("source_key", row["key"]))))
        ratings.append([float(row["score"])])
    if not items:
        raise BenchmarkFormatError(f"{path}: no rows")
    return Benchmark(name, items, FG_STATISTICS, ratings=np.asarray(ratings), protocol="mean")
