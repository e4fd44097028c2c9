"""Rank correlation of judge scores with reference scores: Kendall tau-b and Spearman rho.

The judge-evaluation protocol of VATEX-Eval (VC-Inspector paper, section 4): correlate a metric's per-caption scores
with the ground truth (human ratings averaged over annotators, or the generated scores of
synthetic corruptions). Both statistics handle ties as scipy.stats does (tau-b; average ranks).
Unparsable judge answers carry no score; :class:`JudgeCorrelation` counts them and correlates
the rest, never inventing a score for them.

The statistics themselves are :mod:`metrics.functional.correlation`.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torchmetrics import Metric

from metrics.functional.correlation import kendall_tau_b, spearman_rho


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
