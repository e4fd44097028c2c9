"""Correlation statistics, once for the project: Kendall tau-b and tau-c, Spearman rho (on average
ranks) and Pearson r. The judge's :class:`judge.training.correlation.JudgeCorrelation` and the agreement
tables (:mod:`agreement.statistics`) use these functions.

Ties are handled as scipy.stats does (tau-b; average ranks); each function returns NaN where the
statistic is undefined (fewer than two values, a constant input). Kendall's tau-b is exact: with
few distinct values (judge scores 1-5) it is computed from the joint count table in O(n + k^2);
otherwise from pairwise sign products in row blocks.
"""
from __future__ import annotations

import math

import numpy as np
import torch

_TABLE_LIMIT = 4_000_000  # joint tables up to this many cells; larger inputs go pairwise
_BLOCK = 1024


def _as_pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64).reshape(-1)
    y = np.asarray(y.detach().cpu() if isinstance(y, torch.Tensor) else y, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"correlation needs equally long inputs, got {x.size} and {y.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("correlation inputs must be finite (drop unparsable answers first)")
    return x, y


def _tied_pairs(codes: np.ndarray) -> int:
    counts = np.bincount(codes)
    return int((counts * (counts - 1) // 2).sum())


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b (ties corrected); NaN when either input is constant or has < 2 values."""
    x, y = _as_pair(x, y)
    n = x.size
    if n < 2:
        return math.nan
    _, xc = np.unique(x, return_inverse=True)
    _, yc = np.unique(y, return_inverse=True)
    kx, ky = int(xc.max()) + 1, int(yc.max()) + 1
    if kx * ky <= _TABLE_LIMIT:
        table = np.zeros((kx, ky), dtype=np.int64)
        np.add.at(table, (xc, yc), 1)
        # strictly-greater-in-both counts: suffix sums along both axes, shifted by one
        above = np.zeros((kx + 1, ky + 1), dtype=np.int64)
        above[:-1, :-1] = table[::-1, ::-1].cumsum(0).cumsum(1)[::-1, ::-1]
        below = np.zeros((kx + 1, ky + 1), dtype=np.int64)  # greater x, smaller y
        below[:-1, 1:] = table[::-1, :].cumsum(0)[::-1, :].cumsum(1)
        concordant = int((table * above[1:, 1:]).sum())
        discordant = int((table * below[1:, :-1]).sum())
        s = concordant - discordant
    else:
        s = 0
        for start in range(0, n, _BLOCK):
            stop = min(n, start + _BLOCK)
            sx = np.sign(x[start:stop, None] - x[None, :])
            sy = np.sign(y[start:stop, None] - y[None, :])
            s += int((sx * sy).sum())
        s //= 2  # every unordered pair was counted twice
    n0 = n * (n - 1) // 2
    denom = math.sqrt(float(n0 - _tied_pairs(xc)) * float(n0 - _tied_pairs(yc)))
    return math.nan if denom == 0 else s / denom


def average_ranks(x) -> np.ndarray:
    """1-based ranks with ties given their average rank (scipy.stats.rankdata 'average')."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    _, codes, counts = np.unique(x, return_inverse=True, return_counts=True)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (first + (counts + 1) / 2.0)[codes]


def spearman_rho(x, y) -> float:
    """Spearman's rho: Pearson correlation of average ranks; NaN for constant input or n < 2."""
    x, y = _as_pair(x, y)
    if x.size < 2:
        return math.nan
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx * rx).sum()) * float((ry * ry).sum()))
    return math.nan if denom == 0 else float((rx * ry).sum() / denom)


def kendall_tau_c(x, y) -> float:
    """Stuart's tau-c: ``2 S / (n^2 (m - 1) / m)`` with ``m`` the smaller number of distinct values.

    ``S`` (concordant minus discordant pairs) is recovered exactly from tau-b and its tie terms.
    """
    x, y = _as_pair(x, y)
    n = x.size
    m = min(np.unique(x).size, np.unique(y).size)
    if n < 2 or m < 2:
        return math.nan
    n0 = n * (n - 1) // 2
    ties_x, ties_y = (_tied_pairs(np.unique(v, return_inverse=True)[1]) for v in (x, y))
    s = round(kendall_tau_b(x, y) * math.sqrt(float(n0 - ties_x) * float(n0 - ties_y)))
    return 2.0 * s / (n * n * (m - 1) / m)


def pearson_r(x, y) -> float:
    """Pearson's linear correlation coefficient (CAPTURE's PCC)."""
    x, y = _as_pair(x, y)
    if x.size < 2:
        return math.nan
    dx, dy = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return math.nan if denom == 0 else float(dx @ dy) / denom
