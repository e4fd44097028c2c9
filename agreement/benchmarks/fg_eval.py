"""The synthetic FG-Eval sets (VC-Inspector paper, section 4.3): reference captions corrupted by the
project's generator (:mod:`judge.corruption.generator`), each with its generated 1-5 score; a metric
should rank them as the scores do (Kendall tau-b and Spearman rho, Table 1).

ActivityNet-FG-Eval corrupts the ActivityNet Captions test captions, YouCook2-FG-Eval the YouCook2
validation captions. YouCook2's release (``youcookii_annotations_trainval.json``) is
``{"database": {video_id: {"subset", "duration", "annotations": [{"id", "segment": [s, e],
"sentence"}]}}}``; :func:`read_youcook2_captions` turns it into generator sources, one per segment.

Each item keeps the caption the corruption started from as its reference: reference-based
metrics then see the uncorrupted caption, an upper bound rather than a comparable figure.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from agreement.benchmarks.items import Benchmark, BenchmarkFormatError, CaptionItem, Visual
from judge.corruption.data_types import CaptionSource
from judge.readers import read_judge_jsonl

FG_STATISTICS = ("kendall_tau_b", "spearman_rho")


def read_fg_eval(path: str | Path, name: str = "FG-Eval") -> Benchmark:
    """Corruption rows (``key``, ``video``, ``caption``, ``score``, ``original_caption``, clip range)."""
    path = Path(path)
    rows = read_judge_jsonl(path)
    items, ratings = [], []
    for n, row in enumerate(rows):
        if row.get("score") is None:
            raise BenchmarkFormatError(f"{path}, row {n + 1} ('{row['key']}'): no 'score' (not a corruption row)")
        visual = Visual(video=row["video"], start_s=row.get("start_s"), end_s=row.get("end_s"),
                        start_frame=row.get("start_frame"), end_frame=row.get("end_frame"))
        refs = [row["original_caption"]] if isinstance(row.get("original_caption"), str) else []
        items.append(CaptionItem(row["key"], row["caption"], visual, refs, str(row.get("source_key", row["key"]))))
        ratings.append([float(row["score"])])
    if not items:
        raise BenchmarkFormatError(f"{path}: no rows")
    return Benchmark(name, items, FG_STATISTICS, ratings=np.asarray(ratings), protocol="mean")


def read_youcook2_captions(path: str | Path, subset: str | None = "validation",
                           video_template: str = "{video_id}.mp4") -> list[CaptionSource]:
    """YouCook2 segment captions as generator sources keyed ``{video_id}_{segment id}``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise BenchmarkFormatError(f"{path}: cannot read YouCook2 annotations JSON ({err})") from None
    database = data.get("database") if isinstance(data, dict) else None
    if not isinstance(database, dict):
        raise BenchmarkFormatError(f"{path}: expected {{'database': {{video_id: {{...}}}}}}")
    sources = []
    for video_id, entry in database.items():
        where = f"{path}, video '{video_id}'"
        if subset is not None and entry.get("subset") != subset:
            continue
        if not isinstance(entry.get("annotations"), list):
            raise BenchmarkFormatError(f"{where}: missing list 'annotations'")
        for k, ann in enumerate(entry["annotations"]):
            segment, sentence = ann.get("segment"), ann.get("sentence")
            if not (isinstance(segment, list) and len(segment) == 2 and segment[0] < segment[1]):
                raise BenchmarkFormatError(f"{where}, annotation {k}: 'segment' must be [start, end] seconds")
            if not isinstance(sentence, str) or not sentence.strip():
                raise BenchmarkFormatError(f"{where}, annotation {k}: 'sentence' must be a non-empty string")
            sources.append(CaptionSource(key=f"{video_id}_{ann.get('id', k)}",
                                         video=video_template.format(video_id=video_id), caption=sentence.strip(),
                                         start_s=float(segment[0]), end_s=float(segment[1])))
    if not sources:
        raise BenchmarkFormatError(f"{path}: no captions in subset {subset!r}")
    return sources
