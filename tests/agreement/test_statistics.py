"""Each agreement statistic against scipy (or a hand computation) on random cases with ties."""
import math

import numpy as np
import pytest
from scipy import stats

from agreement import statistics as st


def _cases(seed: int, n: int = 60):
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, n).astype(float)  # Likert ratings: many ties
    metric = np.round(human + rng.normal(0, 1.5, n), 1)  # rounded: ties on the metric side too
    return metric, human


@pytest.mark.parametrize("seed", range(8))
def test_kendall_tau_b_and_c_match_scipy(seed):
    metric, human = _cases(seed)
    assert st.kendall_tau_b(metric, human) == pytest.approx(stats.kendalltau(metric, human, variant="b")[0], abs=1e-12)
    assert st.kendall_tau_c(metric, human) == pytest.approx(stats.kendalltau(metric, human, variant="c")[0], abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_spearman_and_pearson_match_scipy(seed):
    metric, human = _cases(seed)
    assert st.spearman_rho(metric, human) == pytest.approx(stats.spearmanr(metric, human)[0], abs=1e-12)
    assert st.pearson_r(metric, human) == pytest.approx(stats.pearsonr(metric, human)[0], abs=1e-12)


def test_one_minus_r2_hand_case_and_fitted_line_property():
    human = np.array([1.0, 2.0, 3.0, 4.0])
    metric = np.array([1.0, 3.0, 3.0, 2.0])
    # sum (h - m)^2 = 0 + 1 + 0 + 4 = 5; sum (h - 2.5)^2 = 5
    assert st.one_minus_r2(metric, human) == pytest.approx(1.0)
    assert st.one_minus_r2(human, human) == 0.0
    metric, human = _cases(3)
    fit = stats.linregress(metric, human)
    # for least-squares predictions 1 - R^2 is 1 - r^2 (scipy's r)
    assert st.one_minus_r2(fit.intercept + fit.slope * metric, human) == pytest.approx(1 - fit.rvalue ** 2, rel=1e-10)


@pytest.mark.parametrize("seed", range(4))
def test_per_sample_tau_is_mean_of_scipy_tau_per_group(seed):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"img{i}" for i in range(20)], 3)
    human = rng.integers(0, 6, groups.size).astype(float)
    metric = rng.normal(size=groups.size)
    expected = []
    for g in np.unique(groups):
        tau = stats.kendalltau(metric[groups == g], human[groups == g])[0]
        if not math.isnan(tau):
            expected.append(tau)
    value, count = st.per_sample_tau(metric, human, groups)
    assert count == len(expected)
    assert value == pytest.approx(np.mean(expected), abs=1e-12)


def test_foil_accuracy_counts_ties_as_misses_and_as_half():
    original = [0.9, 0.5, 0.5, np.nan, 0.2]
    foil = [0.1, 0.5, 0.7, 0.3, 0.1]
    out = st.foil_accuracy(original, foil)
    assert out["foil_accuracy"] == pytest.approx(2 / 5)  # pairs 0 and 4 won; a tie and a missing score
    assert out["foil_accuracy_half_ties"] == pytest.approx((2 + 0.5 * 2) / 5)
    assert out["foil_ties"] == 2 and out["foil_pairs"] == 5


@pytest.mark.parametrize("seed", range(4))
def test_foil_accuracy_random_against_numpy(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(1, 6, 100).astype(float), rng.integers(1, 6, 100).astype(float)
    out = st.foil_accuracy(a, b)
    assert out["foil_accuracy"] == np.mean(a > b)
    assert out["foil_accuracy_half_ties"] == pytest.approx(np.mean((a > b) + 0.5 * (a == b)))


def test_per_annotator_mean_averages_scipy_over_annotators():
    rng = np.random.default_rng(0)
    ratings = rng.integers(1, 6, (50, 3)).astype(float)
    metric = ratings.mean(1) + rng.normal(0, 1, 50)
    expected = np.mean([stats.kendalltau(metric, ratings[:, a])[0] for a in range(3)])
    assert st.per_annotator_mean(st.kendall_tau_b, metric, ratings) == pytest.approx(expected, abs=1e-12)


def test_undefined_statistics_are_nan_and_bad_input_is_refused():
    assert math.isnan(st.kendall_tau_c([1, 1, 1], [1, 2, 3]))
    assert math.isnan(st.pearson_r([1, 1], [1, 2]))
    with pytest.raises(ValueError, match="equally long"):
        st.pearson_r([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        st.one_minus_r2([1, np.nan], [1, 2])
