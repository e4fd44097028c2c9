"""DetailCaps (CAPTURE paper, section 3.1): detail captions of three LVLMs per image, scored by
experts (DetailCaps-100) or GPT-4 (DetailCaps-4870), against references by GPT-4V / GPT-4O /
Gemini-1.5-Pro.

Release layout (``DetailCaps-4870.parquet`` on the Hugging Face hub; a JSONL with the same fields
is read too): one row per image with ``image`` (identifier or path), ``source``, ``binary`` (the
encoded image, optional), the references ``GT_Caption_GPT4O``, ``GT_Caption_GPT4V``,
``GT_Caption_Gemini15Pro`` (absent or empty ones are skipped), the candidates ``CogVLM``,
``ShareCaptioner``, ``LLaVA_v15``, and their scores as a JSON object string in ``GPT4_Eval``
(``{"CogVLM": s, ...}``; ``score_field`` names another column for the expert split). Rows
without scores are skipped, as in public evaluation scripts. Statistics: PCC, 1 - R^2, Kendall
tau (tau-b) and the per-sample tau over each image's three candidates.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from agreement.benchmarks.items import Benchmark, BenchmarkFormatError, CaptionItem, Visual
from judge.data.readers import iter_jsonl

REFERENCE_FIELDS = ("GT_Caption_GPT4O", "GT_Caption_GPT4V", "GT_Caption_Gemini15Pro")
CANDIDATE_FIELDS = ("CogVLM", "ShareCaptioner", "LLaVA_v15")
DETAILCAPS_STATISTICS = ("pearson_r", "one_minus_r2", "kendall_tau_b", "per_sample_tau")


def _rows(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise RuntimeError(f"{path}: reading parquet needs pyarrow (pip install pyarrow), or convert the "
                               "release to JSONL") from None
        for n, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{path}, row {n}", row
    else:
        for number, row in iter_jsonl(path):
            yield f"{path}, line {number}", row


def read_detailcaps(path: str | Path, name: str | None = None, score_field: str = "GPT4_Eval",
                    use_binary: bool = True) -> Benchmark:
    """DetailCaps-100 or -4870 (module docstring); images from ``binary`` when present, else ``image`` as a path."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"DetailCaps file {path} does not exist")
    items, ratings = [], []
    for where, row in _rows(path):
        if not isinstance(row, dict):
            raise BenchmarkFormatError(f"{where}: expected an object")
        raw = row.get(score_field)
        if raw is None:
            continue
        try:
            scores = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            raise BenchmarkFormatError(f"{where}: field '{score_field}' is not a JSON object") from None
        if not isinstance(scores, dict):
            raise BenchmarkFormatError(f"{where}: field '{score_field}' must map candidate names to scores")
        refs = [" ".join(str(row[f]).split()) for f in REFERENCE_FIELDS if row.get(f)]
        if not refs:
            raise BenchmarkFormatError(f"{where}: no reference caption in {', '.join(REFERENCE_FIELDS)}")
        image = str(row.get("image") or "")
        binary = row.get("binary") if use_binary else None
        if not image and binary is None:
            raise BenchmarkFormatError(f"{where}: neither 'image' nor 'binary' locates the image")
        visual = Visual(image=None if binary is not None else image, image_bytes=binary)
        for model in CANDIDATE_FIELDS:
            if model not in row or model not in scores:
                continue
            try:
                score = float(scores[model])
            except (TypeError, ValueError):
                raise BenchmarkFormatError(f"{where}: score of '{model}' is not a number: {scores[model]!r}") from None
            items.append(CaptionItem(f"{image or where}#{model}", " ".join(str(row[model]).split()), visual, refs,
                                     image or where))
            ratings.append([score])
    if not items:
        raise BenchmarkFormatError(f"{path}: no scored candidate captions")
    name = name or ("DetailCaps-100" if len(items) <= 300 else "DetailCaps-4870")
    return Benchmark(name, items, DETAILCAPS_STATISTICS, ratings=np.asarray(ratings), protocol="mean")
