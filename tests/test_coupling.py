"""The coupling primitives: reflection coupling, batch-index couplings, calibration."""

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from sklearn_dpu.unlearning.coupling import (
    gaussian_log_ratio,
    gaussian_tv,
    noise_for_recompute_rate,
    poisson_subsample,
    recompute_probability_bound,
    reflect,
    reflection_accepts,
    replacements_outside,
    uniform_subsets,
)

from ._stats import n_trials, same_distribution_pvalue


def _couple(x, old, new, sigma, rng, inverted=False):
    old, new = np.broadcast_to(old, x.shape), np.broadcast_to(new, x.shape)
    uniforms = rng.random(len(x))
    if inverted:
        # Negative control: the old-over-new ratio of Alg. 13 / Alg. 27.
        with np.errstate(divide="ignore"):
            accepted = np.log(uniforms) <= -gaussian_log_ratio(x, new, old, sigma)
    else:
        accepted = reflection_accepts(x, old, new, sigma, uniforms)
    y = np.where(accepted[:, None], x, reflect(x, old, new))
    return accepted, y


@pytest.mark.statistical
def test_reflection_coupling_is_exact_and_maximal():
    """Lemma 26: y ~ Q and P(accept) = 1 - TV; the inverted ratio
    printed in Alg. 13 / 27 (negative control) is rejected by the same test."""
    n = n_trials(ci=40_000, full=400_000)
    rng = np.random.default_rng(0)
    d, sigma = 3, 1.0
    old, new = np.zeros(d), np.array([0.8, -0.3, 0.2])
    x = old + sigma * rng.standard_normal((n, d))
    target = new + sigma * rng.standard_normal((n, d))

    accepted, y = _couple(x, old, new, sigma, rng)
    assert same_distribution_pvalue(y, target) > 1e-3
    tv = gaussian_tv(np.linalg.norm(new - old), sigma)
    test = stats.binomtest(int(accepted.sum()), n, 1.0 - tv)
    assert test.pvalue > 1e-3

    _, wrong = _couple(x, old, new, sigma, rng, inverted=True)
    assert same_distribution_pvalue(wrong, target) < 1e-6


def test_reflect_is_an_involution_that_swaps_the_densities():
    rng = np.random.default_rng(1)
    old, new, x = rng.normal(size=(3, 4))
    y = reflect(x, old, new)
    np.testing.assert_allclose(reflect(y, old, new), x)
    # phi_new(y) = phi_old(x): equal distances to the swapped means (Lemma 27).
    assert np.linalg.norm(y - new) == pytest.approx(np.linalg.norm(x - old))


def test_log_ratio_and_zero_noise():
    x = np.array([[1.0, 0.0]])
    lr = gaussian_log_ratio(x, np.array([[1.0, 0.0]]), np.array([[0.0, 0.0]]), 1.0)
    assert lr[0] == pytest.approx(0.5)  # (||x-old||^2 - ||x-new||^2) / 2
    # sigma = 0: sub-sample GD, reject iff the mean moved.
    same = gaussian_log_ratio(x, x, x, 0.0)
    moved = gaussian_log_ratio(x, x + 1.0, x, 0.0)
    assert same[0] == 0.0 and moved[0] == -np.inf
    assert gaussian_tv(0.0, 0.0) == 0.0 and gaussian_tv(1.0, 0.0) == 1.0


@pytest.mark.parametrize("shift", [1.0, 2.0])
def test_noise_for_recompute_rate_meets_the_target(shift):
    for rate, T, q in [(0.05, 50, 0.01), (0.1, 10, 0.5), (0.01, 200, 0.002)]:
        sigma = noise_for_recompute_rate(rate, T, q, shift)
        bound = recompute_probability_bound(sigma, T, q, shift)
        assert bound <= rate
        assert bound == pytest.approx(rate, rel=1e-6)
        assert recompute_probability_bound(sigma * 0.99, T, q, shift) > rate


def test_no_noise_when_subsampling_suffices():
    # 1 - (1 - q)^T = 1 - 0.99^5 < 0.1: sub-sample GD (Alg. 19) meets the target.
    assert noise_for_recompute_rate(0.1, 5, 0.01, 1.0) == 0.0
    assert recompute_probability_bound(0.0, 5, 0.01, 1.0) == pytest.approx(1 - 0.99**5)


def test_poisson_subsample_is_bernoulli_per_cell():
    rng = np.random.default_rng(2)
    sets, items = poisson_subsample(400, 50, 0.03, rng)
    flat = sets * 50 + items
    assert np.all(np.diff(flat) > 0)  # sorted, no repeats
    counts = np.bincount(items, minlength=50)
    assert stats.chisquare(counts).pvalue > 1e-3
    assert stats.binomtest(len(flat), 400 * 50, 0.03).pvalue > 1e-3
    s, i = poisson_subsample(3, 4, 1.0, rng)
    assert len(s) == 12
    assert len(poisson_subsample(3, 4, 0.0, rng)[0]) == 0


def test_uniform_subsets_and_replacements():
    rng = np.random.default_rng(3)
    sub = uniform_subsets(2000, 6, 3, rng)
    assert all(len(set(row)) == 3 for row in sub)
    keys = [tuple(r) for r in sub]
    counts = np.array([keys.count(c) for c in combinations(range(6), 3)])
    assert stats.chisquare(counts).pvalue > 1e-3

    pool = np.arange(10)
    batches = np.tile([0, 1, 2], (3000, 1))
    rep = replacements_outside(batches, pool, rng)
    assert not np.isin(rep, [0, 1, 2]).any()
    assert stats.chisquare(np.bincount(rep, minlength=10)[3:]).pvalue > 1e-3


def _subset_counts(batches, universe, m):
    keys = [tuple(sorted(b)) for b in batches]
    return np.array([keys.count(c) for c in combinations(universe, m)])


@pytest.mark.statistical
def test_claim5_deletion_coupling_transports_batches():
    """Replace the deleted index by a uniform index outside the batch: the
    batches become uniform m-subsets of the remaining indices (Claim 5)."""
    rng = np.random.default_rng(4)
    n, m, trials = 6, 3, n_trials(ci=6000, full=60_000)
    batches = uniform_subsets(trials, n, m, rng)
    hit = (batches == 0).any(axis=1)
    pool = np.arange(1, n)
    rep = replacements_outside(batches[hit], np.arange(n), rng)
    out = batches.copy()
    out[hit] = np.where(batches[hit] == 0, rep[:, None], batches[hit])
    assert stats.chisquare(_subset_counts(out, pool, m)).pvalue > 1e-3


@pytest.mark.statistical
def test_claim6_insertion_coupling_needs_m_over_n_plus_1():
    """Swap a uniform member for the new index with probability m/(n+1): the
    batches become uniform m-subsets of n+1 indices (Claim 6). With m/n (the
    coupling text's typo in the thesis, an erratum) the same test fails."""
    rng = np.random.default_rng(5)
    n, m, trials = 5, 2, n_trials(ci=20_000, full=100_000)

    def insert(prob):
        batches = uniform_subsets(trials, n, m, rng)
        swap = rng.random(trials) < prob
        where = rng.integers(0, m, size=trials)
        batches[swap, where[swap]] = n
        return stats.chisquare(_subset_counts(batches, range(n + 1), m)).pvalue

    assert insert(m / (n + 1)) > 1e-3
    assert insert(m / n) < 1e-6


def test_a_recompute_rate_of_one_needs_no_noise():
    assert noise_for_recompute_rate(1.0, 50, 0.1, 2.0) == 0.0
