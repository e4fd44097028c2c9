"""Rank correlations of judge scores with references, against scipy."""
import math

import numpy as np
import pytest
import scipy.stats
import torch

from judge.training.correlation import JudgeCorrelation, mean_human_score
from metrics.functional.correlation import average_ranks, kendall_tau_b, spearman_rho

pytestmark = pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")


def _random_pairs(rng, n, kind):
    if kind == "discrete":  # judge scores vs generated scores: many ties
        return rng.integers(1, 6, n), rng.integers(1, 6, n)
    if kind == "averaged":  # human scores averaged over 3 annotators
        x = rng.integers(1, 6, n)
        return x, np.clip(x[:, None] + rng.integers(-2, 3, (n, 3)), 1, 5).mean(1)
    x = rng.normal(size=n)
    return x, x + rng.normal(size=n)


@pytest.mark.parametrize("kind", ["discrete", "averaged", "continuous"])
def test_correlations_match_scipy_on_random_data(kind):
    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 50, 400):
        for _ in range(5):
            x, y = _random_pairs(rng, n, kind)
            tau = scipy.stats.kendalltau(x, y, variant="b").statistic
            rho = scipy.stats.spearmanr(x, y).statistic
            assert kendall_tau_b(x, y) == pytest.approx(tau, abs=1e-12, nan_ok=True)
            assert spearman_rho(x, y) == pytest.approx(rho, abs=1e-12, nan_ok=True)


def test_kendall_pairwise_path_matches_scipy(monkeypatch):
    # with many distinct values the joint count table is too large and pairs are compared in
    # blocks; force that path (and blocks smaller than n) on data with and without ties
    import metrics.functional.correlation as corr

    monkeypatch.setattr(corr, "_TABLE_LIMIT", 0)
    monkeypatch.setattr(corr, "_BLOCK", 64)
    rng = np.random.default_rng(1)
    for kind in ("discrete", "averaged", "continuous"):
        x, y = _random_pairs(rng, 300, kind)
        assert kendall_tau_b(x, y) == pytest.approx(scipy.stats.kendalltau(x, y).statistic, abs=1e-12)


def test_correlation_edge_cases():
    assert math.isnan(kendall_tau_b([3, 3, 3], [1, 2, 3])) and math.isnan(spearman_rho([1, 2, 3], [2, 2, 2]))
    assert math.isnan(kendall_tau_b([1], [1]))
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0 and spearman_rho([1, 2, 3], [10, 20, 30]) == 1.0
    assert average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert mean_human_score([[1, 2, 3], [4, np.nan, 5]]).tolist() == [2.0, 4.5]
    with pytest.raises(ValueError, match="finite"):
        kendall_tau_b([1, np.nan], [1, 2])


def test_judge_correlation_metric_skips_unparsable_and_unrated():
    metric = JudgeCorrelation()
    metric.update(torch.tensor([1.0, float("nan"), 3.0, 5.0]), torch.tensor([1.0, 2.0, 4.0, 5.0]))
    metric.update(torch.tensor([2.0, 4.0]), torch.tensor([float("nan"), 3.0]))  # first row has no reference
    out = metric.compute()
    parsed, ref = [1.0, 3.0, 5.0, 4.0], [1.0, 4.0, 5.0, 3.0]
    assert out["count"] == 5 and out["unparsable"].item() == pytest.approx(1 / 5)
    assert out["kendall_tau_b"].item() == pytest.approx(scipy.stats.kendalltau(parsed, ref).statistic)
    assert out["spearman_rho"].item() == pytest.approx(scipy.stats.spearmanr(parsed, ref).statistic)
    assert out["mean_score"].item() == pytest.approx(np.mean(parsed))

