"""Score benchmarks with metrics and compute each benchmark's agreement statistics."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from agreement import statistics as st
from agreement.benchmarks.items import Benchmark

_PAIRWISE = {"kendall_tau_b": st.kendall_tau_b, "kendall_tau_c": st.kendall_tau_c,
             "spearman_rho": st.spearman_rho, "pearson_r": st.pearson_r, "one_minus_r2": st.one_minus_r2}


def agreement_statistics(benchmark: Benchmark, scores: np.ndarray) -> dict[str, float]:
    """The benchmark's statistics of ``scores`` (one per item, NaN = unscored, left out), plus
    ``items`` (scored) and ``unscored`` counts; FOIL benchmarks count unscored sides as ties."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if scores.size != len(benchmark.items):
        raise ValueError(f"{benchmark.name}: {scores.size} scores for {len(benchmark.items)} items")
    unscored = int(np.isnan(scores).sum())
    if benchmark.is_foil:
        pairs = np.asarray(benchmark.foil_pairs)
        out = st.foil_accuracy(scores[pairs[:, 0]], scores[pairs[:, 1]])
        return {**{k: v for k, v in out.items() if k in benchmark.statistics or k in ("foil_ties", "foil_pairs")},
                "unscored": float(unscored)}
    keep = ~np.isnan(scores)
    if benchmark.protocol == "mean":
        human = benchmark.mean_rating()
        keep &= ~np.isnan(human)
    out: dict[str, float] = {}
    for name in benchmark.statistics:
        if name == "per_sample_tau":
            groups = [i.group for i, k in zip(benchmark.items, keep) if k]
            value, count = st.per_sample_tau(scores[keep], benchmark.mean_rating()[keep], groups)
            out[name], out["per_sample_groups"] = value, float(count)
        elif benchmark.protocol == "per_annotator":
            out[name] = st.per_annotator_mean(_PAIRWISE[name], scores[keep], benchmark.ratings[keep])
        else:
            out[name] = _PAIRWISE[name](scores[keep], human[keep]) if keep.sum() >= 2 else math.nan
    out["items"], out["unscored"] = float(keep.sum()), float(unscored)
    return out


def applicable(scorer: Any, benchmark: Benchmark) -> str | None:
    """Why the scorer cannot run on the benchmark (None when it can)."""
    if getattr(scorer, "uses_references", False) and not all(i.references for i in benchmark.items):
        return "the benchmark gives no reference captions (a reference-based metric)"
    return None
