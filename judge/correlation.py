"""Rank correlation of judge scores with reference scores: Kendall tau-b and Spearman rho.

The judge-evaluation protocol of VATEX-Eval (VC-Inspector paper, section 4): correlate a metric's per-caption scores
with the ground truth (human ratings averaged over annotators, or the generated scores of
synthetic corruptions). Both statistics handle ties as scipy.stats does (tau-b; average ranks).
Unparsable judge answers carry no score; :class:`JudgeCorrelation` counts them and correlates
the rest, never inventing a score for them.

Kendall's tau-b is exact: with few distinct values (judge scores 1-5) it is computed from the
joint count table in O(n + k^2); otherwise from pairwise sign products in row blocks.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torchmetrics import Metric

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


def mean_human_score(ratings) -> np.ndarray:
    """Per-caption mean over annotators of a ``(captions, annotators)`` rating matrix (NaN = no rating)."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"human ratings must be (captions, annotators), got shape {r.shape}")
    if np.isnan(r).all(axis=1).any():
        raise ValueError("every caption needs at least one human rating")
    return np.nanmean(r, axis=1)


class JudgeCorrelation(Metric):
    """Tau-b and rho of parsed judge scores vs references, the share of unparsable answers and
    the mean parsed score.

    ``update(predicted, reference)``: ``predicted`` holds the judge's scores with NaN where the
    answer could not be parsed; ``reference`` the ground truth (NaN rows are skipped entirely,
    for batches where only some captions have human ratings). ``compute`` returns a dict.
    """

    full_state_update = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_state("predicted", default=[], dist_reduce_fx="cat")
        self.add_state("reference", default=[], dist_reduce_fx="cat")

    def update(self, predicted: torch.Tensor, reference: torch.Tensor) -> None:
        predicted = torch.as_tensor(predicted, dtype=torch.float64).detach().reshape(-1)
        reference = torch.as_tensor(reference, dtype=torch.float64).detach().reshape(-1)
        if predicted.shape != reference.shape:
            raise ValueError(f"predicted and reference differ in length: {predicted.numel()} vs {reference.numel()}")
        keep = ~torch.isnan(reference)
        self.predicted.append(predicted[keep].to(self.device))
        self.reference.append(reference[keep].to(self.device))

    def compute(self) -> dict[str, torch.Tensor]:
        pred = _cat(self.predicted)
        ref = _cat(self.reference)
        parsed = ~torch.isnan(pred)
        n = int(pred.numel())
        tau = kendall_tau_b(pred[parsed], ref[parsed]) if parsed.sum() >= 2 else math.nan
        rho = spearman_rho(pred[parsed], ref[parsed]) if parsed.sum() >= 2 else math.nan
        return {
            "kendall_tau_b": torch.tensor(tau, dtype=torch.float64),
            "spearman_rho": torch.tensor(rho, dtype=torch.float64),
            "unparsable": torch.tensor((n - int(parsed.sum())) / n if n else math.nan, dtype=torch.float64),
            "mean_score": pred[parsed].mean() if parsed.any() else torch.tensor(math.nan, dtype=torch.float64),
            "count": torch.tensor(n),
        }


def _cat(state) -> torch.Tensor:
    if isinstance(state, torch.Tensor):
        return state.reshape(-1)
    return torch.cat(state) if state else torch.zeros(0, dtype=torch.float64)
