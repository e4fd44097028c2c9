"""Agreement statistics of the VC-Inspector and CAPTURE papers: how well a metric's scores follow
human (or generated) ratings.

* Kendall tau-b and Spearman rho (VC-Inspector paper, section 4; VATEX-Eval protocol of EMScore);
* Kendall tau-c (the CLIPScore and PAC-S protocol for Flickr8K-Expert);
* Pearson's correlation coefficient, 1 - R^2 with the metric's raw scores as the prediction of the
  ratings, Kendall tau and the per-sample tau (CAPTURE paper, section 5.1.1: tau within each
  image's candidates, averaged over images);
* pairwise FOIL accuracy (VC-Inspector paper, Table 5): the correct caption must score higher than
  its FOIL. EMScore's and PAC-S's evaluation scripts compare with a strict ``>``, so a tie counts as
  a miss (``foil_accuracy``); ``foil_accuracy_half_ties`` counts a tie as half, the expected
  accuracy of breaking it at random (the convention of this project's judge commands).

The correlations themselves are :mod:`metrics.functional.correlation`. Ties are handled as scipy.stats does.
Every function returns NaN where the statistic is undefined (fewer than two values, a constant input).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from metrics.functional.correlation import kendall_tau_b, kendall_tau_c, pearson_r, spearman_rho

__all__ = ["kendall_tau_b", "kendall_tau_c", "spearman_rho", "pearson_r", "one_minus_r2", "per_sample_tau",
           "foil_accuracy", "per_annotator_mean", "STATISTICS"]


def _vectors(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"agreement statistics need equally long inputs, got {x.size} and {y.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("agreement statistics need finite inputs (drop unscored items first)")
    return x, y


def one_minus_r2(metric, human) -> float:
    """``1 - R^2`` of the metric's scores taken as they are as predictions of the ratings:
    ``sum (human - metric)^2 / sum (human - mean human)^2`` (CAPTURE paper: R^2 measures both the
    correlation and how far the metric's values are from the ratings, so no line is fitted)."""
    metric, human = _vectors(metric, human)
    if human.size < 2:
        return math.nan
    total = float(((human - human.mean()) ** 2).sum())
    return math.nan if total == 0 else float(((human - metric) ** 2).sum()) / total


def per_sample_tau(metric, human, groups: Sequence) -> tuple[float, int]:
    """Mean over groups (the candidates of one image) of Kendall tau-b within the group, and the
    number of groups it averages: a group whose tau is undefined (one candidate, or all its ratings
    or scores tied) has no order to agree with and is left out."""
    metric, human = _vectors(metric, human)
    groups = np.asarray(list(groups), dtype=object)
    if groups.size != metric.size:
        raise ValueError(f"per_sample_tau: {groups.size} group labels for {metric.size} scores")
    _, codes = np.unique(groups.astype(str), return_inverse=True)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    taus = [kendall_tau_b(metric[idx], human[idx]) for idx in np.split(order, bounds)]
    taus = [t for t in taus if not math.isnan(t)]
    return (float(np.mean(taus)) if taus else math.nan), len(taus)


def foil_accuracy(original, foil) -> dict[str, float]:
    """Share of pairs whose correct caption scores strictly higher (ties are misses), the same with
    ties as half, and the number of ties and pairs. A pair with a missing score (NaN) is a tie."""
    original = np.asarray(original, dtype=np.float64).reshape(-1)
    foil = np.asarray(foil, dtype=np.float64).reshape(-1)
    if original.shape != foil.shape:
        raise ValueError(f"{original.size} original scores but {foil.size} FOIL scores")
    n = original.size
    if n == 0:
        return {"foil_accuracy": math.nan, "foil_accuracy_half_ties": math.nan, "foil_ties": 0.0, "foil_pairs": 0.0}
    missing = np.isnan(original) | np.isnan(foil)
    wins = (~missing & (original > foil)).sum()
    ties = (missing | (original == foil)).sum()
    return {"foil_accuracy": float(wins / n), "foil_accuracy_half_ties": float((wins + 0.5 * ties) / n),
            "foil_ties": float(ties), "foil_pairs": float(n)}


def per_annotator_mean(statistic, metric, ratings) -> float:
    """Mean over annotators of ``statistic(metric, ratings[:, a])`` (EMScore's VATEX-Eval protocol:
    each annotator's ratings are correlated on their own, then the correlations averaged)."""
    ratings = np.asarray(ratings, dtype=np.float64)
    if ratings.ndim != 2:
        raise ValueError(f"ratings must be (items, annotators), got shape {ratings.shape}")
    metric = np.asarray(metric, dtype=np.float64).reshape(-1)
    values = []
    for column in ratings.T:
        keep = ~np.isnan(column)
        values.append(statistic(metric[keep], column[keep]))
    return float(np.mean(values))


# statistic name in table.json -> what the papers call it
STATISTICS = {
    "kendall_tau_b": "Kendall tau-b",
    "kendall_tau_c": "Kendall tau-c",
    "spearman_rho": "Spearman rho",
    "pearson_r": "PCC",
    "one_minus_r2": "1 - R^2",
    "per_sample_tau": "sample tau",
    "foil_accuracy": "accuracy (ties miss)",
    "foil_accuracy_half_ties": "accuracy (ties half)",
}
