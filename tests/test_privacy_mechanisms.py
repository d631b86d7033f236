"""Tests of the noise and selection mechanisms, clipping, tree aggregation and
release generators (``sklearn_dpu.privacy``).

Privacy is a proof obligation: every check that noise is large enough, or that a
probability ratio is bounded, is run a second time on a deliberately broken
variant (too little noise, a missing factor 2, a skipped normalisation) and must
fail there. Those negative controls live in the same test, right after the
positive check.
"""

import dataclasses
import math
import warnings

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from sklearn_dpu import _row_threads
from sklearn_dpu.privacy import mechanisms
from sklearn_dpu.privacy.accounting import NEIGHBORING_RELATION
from sklearn_dpu.privacy.calibration import gaussian_noise_multiplier
from sklearn_dpu.privacy.clipping import (
    FIXED_POINT_BITS,
    clip_rows_l2,
    clip_to_interval,
    to_fixed_point,
)
from sklearn_dpu.privacy.mechanisms import (
    ExponentialMechanism,
    GaussianMechanism,
    GeneralizedExponentialMechanism,
    LaplaceMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    pure_dp_event,
)
from sklearn_dpu.privacy.random import release_generator
from sklearn_dpu.privacy.tree_aggregation import TreeAggregator

from ._privacy_reference import (
    chisquare_pvalue,
    em_probabilities,
    gem_scores_loop,
    log_softmax,
    max_abs_log_ratio,
    max_abs_log_ratio_from_logs,
    pf_probabilities,
    pf_probabilities_by_enumeration,
    rnm_probabilities,
    selection_log_ratio_lower_bound,
    variance_pvalue,
)
from ._stats import audit_epsilon_lower_bound, n_trials

HYPOTHESIS = settings(derandomize=True, database=None, deadline=None, max_examples=150)

# A two-sided p-value below this rejects "the sample has the claimed law". With
# fixed seeds every test is deterministic; the threshold only sets the margin.
REJECT = 1e-4


def _draws(select, n, seed):
    rng = np.random.default_rng(seed)
    return np.array([select(rng) for _ in range(n)])


# --------------------------------------------------------------------------
# Gaussian mechanism
# --------------------------------------------------------------------------


def test_gaussian_sigma_and_event():
    mech = GaussianMechanism(contribution_bound=2.5, noise_multiplier=1.5)
    assert mech.sigma == pytest.approx(3.75)
    assert mech.dp_event == dp_event.GaussianDpEvent(noise_multiplier=1.5)


def test_gaussian_release_returns_new_float_array_and_keeps_input():
    mech = GaussianMechanism(1.0, 1.0)
    value = np.arange(6, dtype=np.int64).reshape(2, 3)
    before = value.copy()
    out = mech.release(value, np.random.default_rng(0))
    assert out.dtype == np.float64 and out.shape == (2, 3)
    assert np.array_equal(value, before)
    assert not np.shares_memory(out, value)
    # same generator state -> same release; the noise is not zero
    again = mech.release(value, np.random.default_rng(0))
    assert np.array_equal(out, again)
    assert not np.array_equal(out, value)


@pytest.mark.statistical
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 4)])
def test_gaussian_release_noise_std_matches_sigma(shape):
    """Chi-square test of the noise variance; a half-multiplier variant fails it."""
    mech = GaussianMechanism(contribution_bound=3.0, noise_multiplier=1.7)
    value = np.full(shape, 5.0)
    n = n_trials(ci=20_000 // int(np.prod(shape)) + 1, full=200_000 // int(np.prod(shape)) + 1)
    rng = np.random.default_rng(12)
    residuals = np.stack([mech.release(value, rng) - value for _ in range(n)])
    assert variance_pvalue(residuals, mech.sigma) > REJECT
    # the mean is the value (unbiased noise): z-test on the grand mean
    z = residuals.mean() / (mech.sigma / math.sqrt(residuals.size))
    assert abs(z) < 4.5

    # negative control: half the multiplier is detected by the same test
    weak = GaussianMechanism(contribution_bound=3.0, noise_multiplier=1.7 / 2)
    rng = np.random.default_rng(12)
    weak_res = np.stack([weak.release(value, rng) - value for _ in range(n)])
    assert variance_pvalue(weak_res, mech.sigma) < REJECT


@pytest.mark.statistical
def test_gaussian_release_passes_privacy_audit():
    """Calibrated Gaussian on neighbouring sums: the audit lower bound stays below
    epsilon; the same audit proves a half-multiplier mechanism violates it."""
    epsilon, delta, bound = 2.0, 1e-3, 3.0
    n = n_trials(ci=200_000, full=1_000_000)
    mech = GaussianMechanism(bound, gaussian_noise_multiplier(epsilon, delta))
    rng = np.random.default_rng(3)
    # one call releases n independent scalar sums; D' adds a record of norm `bound`
    out_d = mech.release(np.zeros(n), rng)
    out_d2 = mech.release(np.full(n, bound), rng)
    assert audit_epsilon_lower_bound(out_d, out_d2, delta) < epsilon

    weak = dataclasses.replace(mech, noise_multiplier=mech.noise_multiplier / 2)
    rng = np.random.default_rng(3)
    out_d = weak.release(np.zeros(n), rng)
    out_d2 = weak.release(np.full(n, bound), rng)
    assert audit_epsilon_lower_bound(out_d, out_d2, delta) > epsilon


def _isometry(M):
    """M -> (M_ii, sqrt(2) M_ij for i < j): symmetric matrices (Frobenius) -> R^k."""
    q = M.shape[-1]
    iu = np.triu_indices(q, 1)
    diag = np.diagonal(M, axis1=-2, axis2=-1)
    return np.concatenate([diag, math.sqrt(2.0) * M[..., iu[0], iu[1]]], axis=-1)


def _isotropy_ok(vectors, sigma):
    """Each coordinate has variance sigma^2 and coordinates are uncorrelated."""
    n, k = vectors.shape
    pvalues = [variance_pvalue(vectors[:, j], sigma) for j in range(k)]
    if min(pvalues) * k < REJECT:
        return False
    corr = np.corrcoef(vectors, rowvar=False)
    off = corr[~np.eye(k, dtype=bool)]
    # sample correlations of independent normals are ~ N(0, 1/n)
    return bool(np.max(np.abs(off)) * math.sqrt(n) < 5.0)


def _naive_symmetric_noise(sigma, q, rng):
    """Broken variant: the upper triangle noised entrywise with sigma, mirrored."""
    upper = np.triu(rng.normal(0.0, sigma, size=(q, q)))
    return upper + np.triu(upper, 1).T


def _too_small_symmetric_noise(sigma, q, rng):
    """Broken variant: off-diagonal std sigma / 2 instead of sigma / sqrt(2)."""
    upper = np.triu(rng.normal(0.0, sigma / 2, size=(q, q)), 1)
    noise = upper + upper.T
    noise[np.diag_indices(q)] = rng.normal(0.0, sigma, size=q)
    return noise


@pytest.fixture(params=["banded", "tiled"])
def symmetric_layout(request, monkeypatch):
    """``release_symmetric``'s two draw orders: the tiled one (from
    ``q = _TILED_FROM`` on) forced at small ``q`` with tiles of 2 rows, so
    that diagonal, off-diagonal and narrower last tiles all occur."""
    if request.param == "tiled":
        monkeypatch.setattr(mechanisms, "_NOISE_TILE", 2)
        monkeypatch.setattr(mechanisms, "_TILED_FROM", 3)
    return request.param


@pytest.mark.statistical
def test_release_symmetric_is_isotropic_under_the_frobenius_isometry(symmetric_layout):
    q, n = 5, n_trials(ci=6_000, full=60_000)
    mech = GaussianMechanism(contribution_bound=2.0, noise_multiplier=0.8)
    sigma = mech.sigma
    M = np.arange(q * q, dtype=float).reshape(q, q)
    M = M + M.T
    before = M.copy()
    rng = np.random.default_rng(5)
    releases = np.stack([mech.release_symmetric(M, rng) for _ in range(n)])
    assert np.array_equal(M, before)
    noise = releases - M
    assert np.array_equal(noise, np.swapaxes(noise, 1, 2))  # exactly symmetric

    diag = np.diagonal(noise, axis1=1, axis2=2)
    off = noise[:, *np.triu_indices(q, 1)]
    assert variance_pvalue(diag, sigma) > REJECT
    assert variance_pvalue(off, sigma / math.sqrt(2)) > REJECT
    # the isometry really is one: ||v(A)|| = ||A||_F on random symmetric A
    A = rng.normal(size=(q, q))
    A = A + A.T
    assert np.linalg.norm(_isometry(A)) == pytest.approx(np.linalg.norm(A, "fro"))
    # and the noise it induces is isotropic N(0, sigma^2 I): a Gaussian mechanism
    # with the same L2 (= Frobenius) sensitivity
    assert _isotropy_ok(_isometry(noise), sigma)

    # negative controls: the same isotropy check rejects entrywise noising of the
    # upper triangle (anisotropic) and an off-diagonal std of sigma/2 (too small)
    rng = np.random.default_rng(5)
    naive = np.stack([_naive_symmetric_noise(sigma, q, rng) for _ in range(n)])
    assert not _isotropy_ok(_isometry(naive), sigma)
    small = np.stack([_too_small_symmetric_noise(sigma, q, rng) for _ in range(n)])
    assert not _isotropy_ok(_isometry(small), sigma)


@pytest.mark.statistical
def test_release_symmetric_passes_privacy_audit_on_an_outer_product(symmetric_layout):
    """D' adds a record u u^T with ||u u^T||_F = ||u||^2 = contribution bound."""
    epsilon, delta, q = 2.0, 1e-3, 3
    n = n_trials(ci=8_000, full=100_000)
    u = np.array([1.0, 1.0, 0.5])
    bound = float(u @ u)
    contrib = np.outer(u, u)
    assert np.linalg.norm(contrib, "fro") == pytest.approx(bound)
    direction = _isometry(contrib) / bound

    def audit(noise_fn):
        rng = np.random.default_rng(8)
        a = np.stack([noise_fn(rng) for _ in range(n)])
        b = np.stack([contrib + noise_fn(rng) for _ in range(n)])
        return audit_epsilon_lower_bound(_isometry(a) @ direction, _isometry(b) @ direction, delta)

    mech = GaussianMechanism(bound, gaussian_noise_multiplier(epsilon, delta))
    zero = np.zeros((q, q))
    assert audit(lambda rng: mech.release_symmetric(zero, rng)) < epsilon
    # negative control: the same release with half the multiplier
    weak = dataclasses.replace(mech, noise_multiplier=mech.noise_multiplier / 2)
    assert audit(lambda rng: weak.release_symmetric(zero, rng)) > epsilon


@pytest.mark.parametrize("q", [1, 2, 127, 128, 129, 300])
def test_release_symmetric_adds_each_normal_at_both_places(q):
    # The banded mirror must add the k-th normal of the stream (upper triangle
    # row by row, then the diagonal) at (i, j) and (j, i), exactly, across
    # band boundaries, whatever M (symmetric or not).
    mech = GaussianMechanism(contribution_bound=3.0, noise_multiplier=1.3)
    M = np.random.default_rng(q).normal(size=(q, q))
    stream = np.random.default_rng(11)
    upper = stream.normal(0.0, mech.sigma / np.sqrt(2.0), size=q * (q - 1) // 2)
    diagonal = stream.normal(0.0, mech.sigma, size=q)
    expected = M.copy()
    rows, cols = np.triu_indices(q, 1)
    expected[rows, cols] += upper
    expected[cols, rows] += upper
    expected[np.diag_indices(q)] += diagonal
    released = mech.release_symmetric(M, np.random.default_rng(11))
    assert np.array_equal(released, expected)


@pytest.mark.parametrize("q, tile", [(5, 2), (7, 3), (12, 4), (12, 12)])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_tiled_symmetric_noise_layout_whatever_the_threads(monkeypatch, q, tile, parts):
    # From _TILED_FROM on: tile row I draws from the I-th child stream, tile
    # (I, J) for J >= I in order; s Z above the diagonal and its transpose
    # below, sigma (Z + Z^T) / 2 on the diagonal tiles. Exactly, however many
    # threads take the rows.
    monkeypatch.setattr(mechanisms, "_NOISE_TILE", tile)
    monkeypatch.setattr(mechanisms, "_TILED_FROM", 1)
    monkeypatch.setattr(_row_threads, "_MIN_ENTRIES", 1)
    monkeypatch.setattr(_row_threads, "blas_threads", lambda: parts)
    mech = GaussianMechanism(contribution_bound=3.0, noise_multiplier=1.3)
    M = np.random.default_rng(q).normal(size=(q, q))
    M += M.T
    n_tiles = -(-q // tile)
    entropy = np.random.default_rng(11).integers(0, 2**63, size=4)
    seeds = np.random.SeedSequence([int(e) for e in entropy]).spawn(n_tiles)
    expected = M.copy()
    for i, seed in enumerate(seeds):
        stream = np.random.Generator(np.random.SFC64(seed))
        rows = slice(i * tile, min(q, (i + 1) * tile))
        for j in range(i, n_tiles):
            cols = slice(j * tile, min(q, (j + 1) * tile))
            Z = stream.standard_normal((rows.stop - rows.start, cols.stop - cols.start))
            if i == j:
                expected[rows, rows] += (Z + Z.T) * (mech.sigma / 2.0)
            else:
                expected[rows, cols] += Z * (mech.sigma / np.sqrt(2.0))
                expected[cols, rows] += (Z * (mech.sigma / np.sqrt(2.0))).T
    released = mech.release_symmetric(M, np.random.default_rng(11))
    np.testing.assert_array_equal(released, expected)
    noise = released - M
    np.testing.assert_array_equal(noise, noise.T)


@pytest.mark.parametrize("q, tile", [(5, 2), (7, 3), (12, 4), (12, 12), (40, 128)])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_release_scaled_symmetric_is_release_symmetric_of_the_scaled_codes(
    monkeypatch, q, tile, parts
):
    # The cast and scale done tile by tile (the tiled draw, q >= tile) or
    # before the banded draw (q = 40 < _TILED_FROM) give the bits of casting,
    # scaling and then releasing, with the same generator; every entry of a
    # given ``out`` is written (it starts as NaN) and it is the result.
    monkeypatch.setattr(mechanisms, "_NOISE_TILE", tile)
    monkeypatch.setattr(mechanisms, "_TILED_FROM", min(tile, 4 * 128))
    monkeypatch.setattr(_row_threads, "_MIN_ENTRIES", 1)
    monkeypatch.setattr(_row_threads, "blas_threads", lambda: parts)
    mech = GaussianMechanism(contribution_bound=3.0, noise_multiplier=1.3)
    codes = np.random.default_rng(q).integers(-(2**40), 2**40, size=(q, q))
    codes += codes.T
    before = codes.copy()
    scale = 2.0**-20 / 3.0
    expected = mech.release_symmetric(
        np.multiply(codes, scale, dtype=np.float64), np.random.default_rng(11)
    )
    out = np.full((q, q), np.nan)
    released = mech.release_scaled_symmetric(codes, scale, np.random.default_rng(11), out=out)
    assert released is out
    np.testing.assert_array_equal(released, expected)
    fresh = mech.release_scaled_symmetric(codes, scale, np.random.default_rng(11))
    np.testing.assert_array_equal(fresh, expected)
    np.testing.assert_array_equal(codes, before)
    # an ``out`` that cannot take the release is not written: a new array is
    wrong = np.zeros((q, q), dtype=np.float32)
    other = mech.release_scaled_symmetric(codes, scale, np.random.default_rng(11), out=wrong)
    assert other is not wrong and not wrong.any()
    np.testing.assert_array_equal(other, expected)


def test_release_scaled_symmetric_at_the_real_tile_size_on_two_threads(monkeypatch):
    # The tiles' scratch must be each thread's own: at q = 1002 (8 tile rows
    # of 128) two threads interleave, and a shared buffer gives other bits.
    monkeypatch.setattr(_row_threads, "blas_threads", lambda: 2)
    mech = GaussianMechanism(contribution_bound=3.0, noise_multiplier=1.3)
    q = 1002
    codes = np.random.default_rng(q).integers(-(2**40), 2**40, size=(q, q))
    codes += codes.T
    scale = 2.0**-20 / 3.0
    scaled = np.multiply(codes, scale, dtype=np.float64)
    for seed in range(3):
        expected = mech.release_symmetric(scaled, np.random.default_rng(seed))
        released = mech.release_scaled_symmetric(codes, scale, np.random.default_rng(seed))
        np.testing.assert_array_equal(released, expected)


def test_release_scaled_symmetric_never_writes_over_its_codes():
    # An ``out`` sharing memory with ``codes`` is not used: the tiles would
    # read codes the tiles before them overwrote.
    mech = GaussianMechanism(contribution_bound=3.0, noise_multiplier=1.3)
    q = 520
    buffer = np.zeros((q + 1, q))
    codes = buffer[1:].view(np.int64)
    codes[...] = np.arange(q)[:, None] + np.arange(q)
    before = codes.copy()
    expected = mech.release_symmetric(
        np.multiply(codes, 0.5, dtype=np.float64), np.random.default_rng(4)
    )
    out = buffer[:-1]
    released = mech.release_scaled_symmetric(codes, 0.5, np.random.default_rng(4), out=out)
    assert released is not out
    np.testing.assert_array_equal(codes, before)
    np.testing.assert_array_equal(released, expected)


def test_release_symmetric_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        GaussianMechanism(1.0, 1.0).release_symmetric(np.zeros((2, 3)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="square"):
        GaussianMechanism(1.0, 1.0).release_scaled_symmetric(
            np.zeros((2, 3), dtype=np.int64), 1.0, np.random.default_rng(0)
        )


# --------------------------------------------------------------------------
# Laplace mechanism
# --------------------------------------------------------------------------


def test_laplace_scale_and_event():
    mech = LaplaceMechanism(l1_bound=3.0, epsilon=0.5)
    assert mech.scale == pytest.approx(6.0)
    assert mech.dp_event == dp_event.LaplaceDpEvent(noise_multiplier=2.0)
    # the event is eps-DP and no better: PLD delta(eps) ~ 0, delta(0.999 eps) > 0
    pld = PLDAccountant(NEIGHBORING_RELATION).compose(mech.dp_event)
    assert pld.get_epsilon(1e-12) == pytest.approx(0.5, abs=1e-6)
    assert pld.get_epsilon(1e-6) > 0.49


@pytest.mark.statistical
def test_laplace_noise_has_the_claimed_scale():
    mech = LaplaceMechanism(l1_bound=2.0, epsilon=0.8)
    n = n_trials(ci=50_000, full=500_000)
    value = np.full(n, -3.0)
    noise = mech.release(value, np.random.default_rng(1)) - value
    assert stats.kstest(noise, stats.laplace(scale=mech.scale).cdf).pvalue > REJECT
    # negative control: half the scale is rejected
    weak = LaplaceMechanism(l1_bound=2.0, epsilon=1.6)
    noise = weak.release(value, np.random.default_rng(1)) - value
    assert stats.kstest(noise, stats.laplace(scale=mech.scale).cdf).pvalue < REJECT


@pytest.mark.statistical
def test_laplace_passes_privacy_audit():
    epsilon, bound = 1.0, 2.0
    n = n_trials(ci=100_000, full=1_000_000)

    def audit(mech):
        rng = np.random.default_rng(4)
        return audit_epsilon_lower_bound(
            mech.release(np.zeros(n), rng), mech.release(np.full(n, bound), rng), 0.0
        )

    assert audit(LaplaceMechanism(bound, epsilon)) < epsilon
    # negative control: a mechanism that claims epsilon but adds half the noise
    assert audit(LaplaceMechanism(bound / 2, epsilon)) > epsilon


# --------------------------------------------------------------------------
# Exponential mechanism
# --------------------------------------------------------------------------


def _neighbours(rng, n_pairs, monotone):
    """Random utility vectors and neighbours moved by at most Delta = 1 each.

    Most moves are vertices of the allowed box (where ratios are extreme)."""
    for _ in range(n_pairs):
        n = int(rng.integers(2, 7))
        u = rng.uniform(-4, 4, n) * rng.choice([0.1, 1.0, 5.0])
        size = np.where(rng.random(n) < 0.8, 1.0, rng.random(n))
        if monotone:
            d = size * rng.choice([-1.0, 1.0])
        else:
            d = size * rng.choice([-1.0, 1.0], n)
        yield u, u + d


def test_em_probabilities_match_reference_and_event():
    rng = np.random.default_rng(0)
    for monotonic in (False, True):
        mech = ExponentialMechanism(epsilon=0.7, sensitivity=2.0, monotonic=monotonic)
        assert mech.dp_event == pure_dp_event(0.7)
        for _ in range(50):
            u = rng.normal(size=5) * 10
            assert np.allclose(
                mech.probabilities(u), em_probabilities(u, 0.7, 2.0, monotonic), rtol=1e-12, atol=0
            )
    # huge utility ranges do not overflow
    p = ExponentialMechanism(1.0, 1e-6).probabilities([0.0, 1e6, -1e300])
    assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0) and p[1] == 1.0


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [1.0, np.nan], [np.inf, 0.0]])
def test_selection_mechanisms_reject_bad_scores(bad):
    rng = np.random.default_rng(0)
    for mech in (
        ExponentialMechanism(1.0, 1.0),
        PermuteAndFlip(1.0, 1.0),
        ReportNoisyMax(1.0, 1.0),
    ):
        with pytest.raises(ValueError):
            mech.select(bad, rng)


def test_em_privacy_ratio_is_exactly_bounded():
    """max |log P(i) - log P'(i)| over neighbouring utilities is <= eps, computed
    exactly from ``probabilities``; dropping the factor 2 breaks it."""
    epsilon = 1.0
    rng = np.random.default_rng(1)
    pairs = list(_neighbours(rng, 2000, monotone=False))
    mech = ExponentialMechanism(epsilon, sensitivity=1.0)
    worst = max(max_abs_log_ratio(mech.probabilities(u), mech.probabilities(v)) for u, v in pairs)
    assert worst <= epsilon * (1 + 1e-12)
    assert worst > 0.9 * epsilon  # the check is tight: the worst case is nearly reached

    # negative control: the monotonic variant (no factor 2) on non-monotone moves
    broken = ExponentialMechanism(epsilon, sensitivity=1.0, monotonic=True)
    worst = max(
        max_abs_log_ratio(broken.probabilities(u), broken.probabilities(v)) for u, v in pairs
    )
    assert worst > 1.5 * epsilon


def test_em_monotonic_privacy_ratio_is_exactly_bounded():
    epsilon = 0.8
    rng = np.random.default_rng(2)
    pairs = list(_neighbours(rng, 2000, monotone=True))
    mech = ExponentialMechanism(epsilon, sensitivity=1.0, monotonic=True)
    worst = max(max_abs_log_ratio(mech.probabilities(u), mech.probabilities(v)) for u, v in pairs)
    assert worst <= epsilon * (1 + 1e-12)
    assert worst > 0.9 * epsilon
    # negative control: a 25% too large exponent
    broken = ExponentialMechanism(1.25 * epsilon, sensitivity=1.0, monotonic=True)
    worst = max(
        max_abs_log_ratio(broken.probabilities(u), broken.probabilities(v)) for u, v in pairs
    )
    assert worst > epsilon


@pytest.mark.statistical
def test_em_select_frequencies_match_probabilities():
    u = np.array([0.0, 1.0, 2.5, 2.0, -1.0])
    mech = ExponentialMechanism(epsilon=1.2, sensitivity=1.0)
    n = n_trials(ci=20_000, full=200_000)
    draws = _draws(lambda rng: mech.select(u, rng), n, seed=3)
    assert chisquare_pvalue(draws, mech.probabilities(u)) > REJECT
    # negative control: the test tells apart the law of a 2*eps mechanism
    assert chisquare_pvalue(draws, ExponentialMechanism(2.4, 1.0).probabilities(u)) < REJECT


# --------------------------------------------------------------------------
# Permute-and-flip
# --------------------------------------------------------------------------


def test_pf_reference_law_matches_enumeration_of_orders():
    rng = np.random.default_rng(9)
    for _ in range(40):
        u = rng.normal(size=int(rng.integers(1, 7))) * 3
        for monotonic in (False, True):
            assert np.allclose(
                pf_probabilities(u, 1.0, 1.0, monotonic),
                pf_probabilities_by_enumeration(u, 1.0, 1.0, monotonic),
                rtol=1e-12,
                atol=1e-15,
            )


@pytest.mark.statistical
@pytest.mark.parametrize("monotonic", [False, True])
def test_pf_select_follows_exact_law(monotonic):
    u = np.array([0.0, 1.0, 2.5, 2.0, -1.0])
    mech = PermuteAndFlip(epsilon=1.2, sensitivity=1.0, monotonic=monotonic)
    assert mech.dp_event == pure_dp_event(1.2)
    exact = pf_probabilities(u, 1.2, 1.0, monotonic)
    assert exact.sum() == pytest.approx(1.0)
    n = n_trials(ci=20_000, full=200_000)
    draws = _draws(lambda rng: mech.select(u, rng), n, seed=4)
    assert chisquare_pvalue(draws, exact) > REJECT
    # negative control: PF's law is not EM's, and the test can tell
    assert chisquare_pvalue(draws, em_probabilities(u, 1.2, 1.0, monotonic)) < REJECT


def test_pf_exact_privacy_ratio():
    """The exact PF law (reference formula, checked against the sampler above)
    satisfies the e^eps bound on neighbours, general and monotone."""
    epsilon = 1.0
    rng = np.random.default_rng(6)
    general = list(_neighbours(rng, 1000, monotone=False))
    monotone = list(_neighbours(rng, 1000, monotone=True))

    def worst(pairs, monotonic, eps=epsilon):
        return max(
            max_abs_log_ratio(
                pf_probabilities(u, eps, 1.0, monotonic), pf_probabilities(v, eps, 1.0, monotonic)
            )
            for u, v in pairs
        )

    assert worst(general, False) <= epsilon * (1 + 1e-9)
    assert worst(monotone, True) <= epsilon * (1 + 1e-9)
    # negative control: the monotone factor on non-monotone neighbours
    assert worst(general, True) > 1.5 * epsilon


@pytest.mark.statistical
def test_pf_empirical_privacy_ratio_on_tight_instance():
    """u = (0, 0) vs u' = (D, -D): the exact ratio P(1)/P'(1) is e^eps (tight).
    The high-confidence lower bound of the empirical log-ratio stays <= eps; the
    same estimate exceeds eps for PF run without the factor 2."""
    epsilon = 1.0
    u, v = np.array([0.0, 0.0]), np.array([1.0, -1.0])
    n = n_trials(ci=8_000, full=200_000)

    def bound(mech):
        a = _draws(lambda rng: mech.select(u, rng), n, seed=10)
        b = _draws(lambda rng: mech.select(v, rng), n, seed=11)
        return selection_log_ratio_lower_bound(a, b, 2)

    assert bound(PermuteAndFlip(epsilon, 1.0)) <= epsilon
    assert bound(PermuteAndFlip(epsilon, 1.0, monotonic=True)) > epsilon


@pytest.mark.statistical
def test_pf_is_never_worse_than_em_in_expectation():
    """[MS20] Thm 2: E_PF[u] >= E_EM[u] for every utility vector (exact), and the
    library's sampler achieves it empirically."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(2, 7))
        u = rng.uniform(-3, 3, n) * rng.choice([0.3, 1.0, 4.0])
        eps = float(rng.choice([0.1, 1.0, 3.0]))
        for monotonic in (False, True):
            e_pf = pf_probabilities(u, eps, 1.0, monotonic) @ u
            e_em = em_probabilities(u, eps, 1.0, monotonic) @ u
            assert e_pf >= e_em - 1e-12

    u = np.array([0.0, 1.0, 2.5, 2.0, -1.0, 0.5])
    e_em = em_probabilities(u, 1.0, 1.0) @ u
    n = n_trials(ci=20_000, full=200_000)

    def not_worse_than_em(mech):
        """The upper confidence bound of the mean selected utility reaches E_EM."""
        sel = u[_draws(lambda rng: mech.select(u, rng), n, seed=12)]
        return sel.mean() + 4.5 * sel.std() / math.sqrt(n) >= e_em

    assert not_worse_than_em(PermuteAndFlip(1.0, 1.0))
    # negative control: PF with half the epsilon (too much noise) is worse than EM
    assert not not_worse_than_em(PermuteAndFlip(0.5, 1.0))


# --------------------------------------------------------------------------
# Report noisy max
# --------------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("monotonic", [False, True])
def test_rnm_select_follows_exact_law(monotonic):
    u = np.array([0.0, 1.0, 0.3])
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, monotonic=monotonic)
    assert mech.dp_event == pure_dp_event(1.0)
    scale = (1.0 if monotonic else 2.0) / 1.0
    exact = rnm_probabilities(u, scale)
    assert exact.sum() == pytest.approx(1.0, abs=1e-9)
    n = n_trials(ci=20_000, full=200_000)
    draws = _draws(lambda rng: mech.select(u, rng), n, seed=13)
    assert chisquare_pvalue(draws, exact) > REJECT
    # negative control: the law with the other noise scale is rejected
    assert chisquare_pvalue(draws, rnm_probabilities(u, 3.0 - scale)) < REJECT


def test_rnm_exact_privacy_ratio():
    """Exact (quadrature) selection laws on neighbouring utilities."""
    eps = 1.0
    general = [
        (np.array([0.0, 0.0]), np.array([1.0, -1.0])),
        (np.array([0.0, 0.5, -0.3]), np.array([1.0, -0.5, 0.7])),
        (np.array([2.0, 0.0, 0.0]), np.array([1.0, 1.0, -1.0])),
    ]
    monotone = [
        (np.array([0.0, 0.0]), np.array([1.0, 0.0])),
        (np.array([0.0, 0.5, -0.3]), np.array([1.0, 0.5, 0.7])),
        (np.array([2.0, 0.0, 0.0]), np.array([2.0, 1.0, 1.0])),
    ]

    def worst(pairs, scale):
        return max(
            max_abs_log_ratio(rnm_probabilities(u, scale), rnm_probabilities(v, scale))
            for u, v in pairs
        )

    assert worst(general, 2.0 / eps) <= eps
    assert worst(monotone, 1.0 / eps) <= eps
    # negative control: the monotone scale Delta/eps on non-monotone neighbours
    assert worst(general, 1.0 / eps) > eps


@pytest.mark.statistical
def test_rnm_empirical_privacy_ratio():
    epsilon = 1.0
    u, v = np.array([0.0, 0.0]), np.array([1.0, -1.0])
    n = n_trials(ci=10_000, full=200_000)

    def bound(mech):
        a = _draws(lambda rng: mech.select(u, rng), n, seed=14)
        b = _draws(lambda rng: mech.select(v, rng), n, seed=15)
        return selection_log_ratio_lower_bound(a, b, 2)

    assert bound(ReportNoisyMax(epsilon, 1.0)) <= epsilon
    # negative control: half the noise (monotone scale) on non-monotone neighbours;
    # the exact log-ratio is 2 eps - log(1 + eps) = 1.31
    assert bound(ReportNoisyMax(epsilon, 1.0, monotonic=True)) > epsilon


# --------------------------------------------------------------------------
# Generalized exponential mechanism
# --------------------------------------------------------------------------


def _gem_instances(rng, n_instances):
    for _ in range(n_instances):
        n = int(rng.integers(2, 8))
        gamma = 10.0 ** rng.uniform(-2, 1, n)
        gamma[rng.random(n) < 0.25] = 0.0  # zero-sensitivity (data-independent) costs
        q = rng.uniform(0, 1, n) * rng.choice([0.1, 1.0, 10.0, 50.0])
        yield q, gamma


def _gem_neighbour(rng, q, gamma):
    """Each cost moved by at most its own sensitivity (vertices mostly)."""
    size = np.where(rng.random(q.size) < 0.8, 1.0, rng.random(q.size))
    d = gamma * size * rng.choice([-1.0, 1.0], q.size)
    q2 = q + d
    assert np.all(q2[gamma == 0] == q[gamma == 0])
    return q2


def test_gem_normalized_scores_match_loop_reference():
    rng = np.random.default_rng(20)
    gem = GeneralizedExponentialMechanism(epsilon=0.7, beta=0.1)
    for q, gamma in _gem_instances(rng, 300):
        assert np.allclose(
            gem.normalized_scores(q, gamma),
            gem_scores_loop(q, gamma, 0.7, 0.1),
            rtol=1e-12,
            atol=1e-12,
        )


def _gem_log_probabilities(gem, q, gamma, check=True):
    """log P(i) = -eps s_i / 2 - logsumexp, from the normalised scores.

    Costs far apart make ``probabilities`` underflow to 0 for some candidates
    (exp(-2500) == 0.0), so exact ratios are taken in log space; ``check``
    verifies that ``probabilities`` is the exponential of these."""
    log_p = log_softmax(-gem.epsilon * gem.normalized_scores(q, gamma) / 2.0)
    if check:
        assert np.allclose(gem.probabilities(q, gamma), np.exp(log_p), rtol=1e-9, atol=1e-300)
    return log_p


def test_gem_privacy_ratio_is_exactly_bounded():
    """(a) worst exact log-probability ratio over random neighbouring cost pairs
    is <= eps; (d) plain EM with the smallest sensitivity violates it."""
    epsilon = 1.0
    gem = GeneralizedExponentialMechanism(epsilon, beta=0.05)
    assert gem.dp_event == pure_dp_event(epsilon)
    rng = np.random.default_rng(21)
    worst = 0.0
    worst_em = 0.0
    for q, gamma in _gem_instances(rng, 500):
        log_p = _gem_log_probabilities(gem, q, gamma)
        for _ in range(3):
            q2 = _gem_neighbour(rng, q, gamma)
            log_p2 = _gem_log_probabilities(gem, q2, gamma, check=False)
            worst = max(worst, max_abs_log_ratio_from_logs(log_p, log_p2))
            if np.any(gamma > 0):
                em = ExponentialMechanism(epsilon, sensitivity=float(gamma[gamma > 0].min()))
                worst_em = max(
                    worst_em,
                    max_abs_log_ratio_from_logs(
                        log_softmax(em.log_weights(-q)), log_softmax(em.log_weights(-q2))
                    ),
                )
    assert worst <= epsilon * (1 + 1e-9)
    assert worst > 0.3 * epsilon  # not vacuous
    # negative control: skipping the normalisation (plain EM on the costs with
    # the smallest sensitivity) is far from eps-DP on the same pairs
    assert 2 * epsilon < worst_em < math.inf


@pytest.mark.statistical
def test_gem_utility_guarantee_thm34():
    """(b) P(chosen cost > min_j (q_j + 4 gamma_j ln(N/beta)/eps)) <= beta, exactly
    from ``probabilities``; a variant without the penalty t*gamma fails."""
    rng = np.random.default_rng(22)
    for eps in (0.3, 1.0, 4.0):
        for beta in (0.01, 0.05, 0.3):
            gem = GeneralizedExponentialMechanism(eps, beta=beta)
            for q, gamma in _gem_instances(rng, 100):
                bound = np.min(q + 4 * gamma * math.log(q.size / beta) / eps)
                p = gem.probabilities(q, gamma)
                assert p[q > bound + 1e-9].sum() <= beta + 1e-12

    # The guarantee is not vacuous: on this instance it is what keeps the five
    # noisy high-sensitivity candidates away. Without the penalty (t = 0, i.e.
    # beta = N in the formula) they win 5/6 of the time.
    q = np.array([0.0, 10.0, 10.0, 10.0, 10.0, 10.0])
    gamma = np.array([0.01, 100.0, 100.0, 100.0, 100.0, 100.0])
    eps, beta = 1.0, 0.05
    bound = np.min(q + 4 * gamma * math.log(q.size / beta) / eps)
    good = GeneralizedExponentialMechanism(eps, beta)
    assert good.probabilities(q, gamma)[q > bound].sum() <= beta
    no_penalty = GeneralizedExponentialMechanism(eps, beta=float(q.size))
    assert no_penalty.probabilities(q, gamma)[q > bound].sum() > beta

    # empirical check with the sampler
    n = n_trials(ci=4_000, full=40_000)
    draws = _draws(lambda r: good.select(q, gamma, r), n, seed=23)
    assert np.mean(q[draws] > bound) <= beta


def test_gem_equal_sensitivities_is_em_with_twice_the_sensitivity():
    """(c) All gamma_j = gamma gives EM on -costs with 2 gamma."""
    rng = np.random.default_rng(24)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        gamma = float(10 ** rng.uniform(-2, 1))
        q = rng.normal(size=n) * rng.choice([0.1, 1, 20])
        eps, beta = float(rng.choice([0.2, 1.0, 5.0])), float(rng.choice([0.01, 0.2]))
        gem = GeneralizedExponentialMechanism(eps, beta)
        em = ExponentialMechanism(eps, sensitivity=2 * gamma)
        assert np.allclose(
            gem.probabilities(q, np.full(n, gamma)), em.probabilities(-q), rtol=1e-10, atol=1e-15
        )
    # and the factor is 2, not 1: EM with sensitivity gamma differs
    q = np.array([0.0, 1.0, 2.0])
    assert not np.allclose(
        GeneralizedExponentialMechanism(1.0).probabilities(q, [1.0, 1.0, 1.0]),
        ExponentialMechanism(1.0, 1.0).probabilities(-q),
    )


def test_gem_dominant_candidate_is_selected():
    gem = GeneralizedExponentialMechanism(1.0, beta=0.05)
    p = gem.probabilities([0.0, 100.0, 120.0, 150.0], [0.01, 0.01, 0.02, 0.01])
    assert p[0] > 1 - 1e-12


def test_gem_zero_sensitivity_candidates():
    """A data-independent (gamma = 0) candidate worse than another one is never
    chosen; the best data-independent candidate competes normally."""
    gem = GeneralizedExponentialMechanism(1.0, beta=0.05)
    p = gem.probabilities([1.0, 2.0, 1.5], [0.0, 0.0, 0.1])
    assert p[1] == 0.0 and p[0] > 0 and p[2] > 0 and p.sum() == pytest.approx(1.0)


def test_gem_tied_zero_sensitivity_candidates():
    gem = GeneralizedExponentialMechanism(1.0, beta=0.05)
    q = np.array([0.0, 0.0, 10.0, 10.0])
    gamma = np.array([0.0, 0.0, 1.0, 1.0])
    assert np.array_equal(gem.normalized_scores(q, gamma)[:2], [0.0, 0.0])
    p = gem.probabilities(q, gamma)
    bound = np.min(q + 4 * gamma * math.log(q.size / 0.05) / 1.0)
    assert p[q > bound].sum() <= 0.05
    assert np.allclose(gem.probabilities([3.0, 3.0], [0.0, 0.0]), [0.5, 0.5])


@pytest.mark.statistical
def test_gem_select_frequencies_match_probabilities():
    q = np.array([0.2, 0.5, 0.3, 1.0, 0.25])
    gamma = np.array([0.1, 0.05, 0.0, 0.3, 0.2])
    gem = GeneralizedExponentialMechanism(2.0, beta=0.1)
    p = gem.probabilities(q, gamma)
    n = n_trials(ci=5_000, full=100_000)
    draws = _draws(lambda rng: gem.select(q, gamma, rng), n, seed=25)
    assert chisquare_pvalue(draws, p) > REJECT
    assert chisquare_pvalue(draws, np.full(5, 0.2)) < REJECT  # the test has power


@pytest.mark.parametrize(
    "gamma", [[1.0, -0.1], [1.0], [1.0, np.inf], [1.0, np.nan]], ids=["neg", "shape", "inf", "nan"]
)
def test_gem_rejects_bad_sensitivities(gamma):
    with pytest.raises(ValueError):
        GeneralizedExponentialMechanism(1.0).probabilities([0.0, 1.0], gamma)


# --------------------------------------------------------------------------
# Clipping
# --------------------------------------------------------------------------


def _robust_row_norms(X):
    X = np.asarray(X, dtype=np.float64)
    scale = np.max(np.abs(X), axis=1, keepdims=True)
    scale[scale == 0] = 1.0
    return scale[:, 0] * np.sqrt(np.sum((X / scale) ** 2, axis=1))


_finite = st.floats(min_value=-1e150, max_value=1e150, allow_nan=False, allow_subnormal=True)
_matrices = hnp.arrays(
    np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=6), elements=_finite
)


# The overflow RuntimeWarning on zero rows is test_clip_rows_l2_is_silent's bug.
@pytest.mark.filterwarnings("ignore:overflow encountered in divide:RuntimeWarning")
@HYPOTHESIS
@given(X=_matrices, max_norm=st.floats(min_value=1e-6, max_value=1e6))
def test_clip_rows_l2_never_exceeds_bound(X, max_norm):
    before = X.copy()
    Y = clip_rows_l2(X, max_norm)
    assert np.array_equal(X, before)  # input untouched
    assert Y.shape == X.shape
    assert np.all(_robust_row_norms(Y) <= max_norm)
    # rows already inside the ball are returned unchanged (bit for bit)
    inside = _robust_row_norms(X) < max_norm * (1 - 1e-9)
    assert np.array_equal(Y[inside], X[inside])
    # clipped rows keep their direction (a non-negative multiple of the row)
    assert np.all(Y * X >= 0)


@HYPOTHESIS
@given(
    X=hnp.arrays(
        np.float64,
        (3, 4),
        elements=st.one_of(
            st.floats(min_value=1e100, max_value=1e300),
            st.floats(min_value=-1e300, max_value=-1e100),
            st.floats(min_value=-1e-300, max_value=1e-300),
        ),
    )
)
def test_clip_rows_l2_bound_holds_for_huge_and_tiny_norms(X):
    Y = clip_rows_l2(X, 1.0)
    assert np.all(np.isfinite(Y))
    assert np.all(_robust_row_norms(Y) <= 1.0)


def test_clip_rows_l2_is_silent():
    X = np.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Y = clip_rows_l2(X, 10.0)
    assert np.array_equal(Y, X)


def test_clip_rows_l2_silent_on_rows_without_zero_norm():
    X = np.array([[1e-200, 0.0], [3.0, 4.0], [1e200, 1e200]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clip_rows_l2(X, 1.0)


def test_clip_rows_l2_float32_never_exceeds_bound():
    X = (np.random.default_rng(0).normal(size=(10_000, 50)) * 10).astype(np.float32)
    Y = clip_rows_l2(X, 1.0)
    assert np.all(_robust_row_norms(Y) <= 1.0)


def test_clip_rows_l2_huge_rows_land_on_the_sphere():
    Y = clip_rows_l2(np.array([[1e200, -1e200, 0.0]]), 2.0)
    assert _robust_row_norms(Y)[0] == pytest.approx(2.0)


def test_clip_rows_l2_scales_long_rows_onto_the_sphere():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [-6.0, 8.0]])
    Y = clip_rows_l2(X, 1.0)
    assert np.allclose(_robust_row_norms(Y), [1.0, 0.5, 0.0, 1.0])
    assert (
        np.allclose(Y[0], [0.6, 0.8])
        and np.array_equal(Y[1], X[1])
        and np.array_equal(Y[2], [0, 0])
    )


@HYPOTHESIS
@given(
    A=hnp.arrays(
        np.float64, hnp.array_shapes(max_dims=2, max_side=8), elements=st.floats(-1.5, 1.5)
    ),
    bits=st.integers(1, 14),
)
def test_to_fixed_point_never_increases_magnitude(A, bits):
    codes = to_fixed_point(A, bits)
    assert codes.dtype == np.int16 and codes.shape == A.shape
    decoded = codes.astype(np.float64) / (1 << bits)
    clipped = np.clip(A, -1, 1)
    assert np.all(np.abs(decoded) <= np.abs(clipped))
    assert np.all(np.abs(decoded - clipped) < 2.0**-bits)  # truncation error < 1 ulp of the code
    assert np.all(np.sign(decoded) * np.sign(clipped) >= 0)
    assert np.all(np.abs(codes.astype(np.int64)) <= 1 << bits)


def test_to_fixed_point_extremes_and_row_norms():
    codes = to_fixed_point(np.array([-1.0, 1.0, -5.0, 5.0, 0.99999]))
    assert codes.tolist() == [-16384, 16384, -16384, 16384, 16383]
    assert FIXED_POINT_BITS == 14
    rng = np.random.default_rng(0)
    X = clip_rows_l2(rng.normal(size=(500, 6)), 1.0)
    decoded = to_fixed_point(X).astype(float) / 2**FIXED_POINT_BITS
    assert np.all(np.linalg.norm(decoded, axis=1) <= 1.0)
    for bits in (0, 15):
        with pytest.raises(ValueError):
            to_fixed_point(X, bits)


@HYPOTHESIS
@given(
    y=hnp.arrays(np.float64, st.integers(0, 10), elements=st.floats(-1e6, 1e6)),
    low=st.floats(-10, 0),
    width=st.floats(0, 10),
)
def test_clip_to_interval(y, low, width):
    high = low + width
    before = y.copy()
    out = clip_to_interval(y, low, high)
    assert np.array_equal(y, before)
    assert np.all((out >= low) & (out <= high))
    inside = (y >= low) & (y <= high)
    assert np.array_equal(out[inside], y[inside])


# --------------------------------------------------------------------------
# Tree aggregation
# --------------------------------------------------------------------------


def _fenwick_prefix(t):
    """The dyadic intervals (first, last) of the Fenwick decomposition of 1..t."""
    out = []
    while t > 0:
        low = t & -t
        out.append((t - low + 1, t))
        t -= low
    return sorted(out)


def test_tree_nodes_partition_chunks_in_fenwick_form_and_sums_are_exact():
    mech = GaussianMechanism(1.0, 1.0)
    tree = TreeAggregator(mech, symmetric=False, scale=0.5)
    rng = np.random.default_rng(30)
    created = []
    total = np.zeros(3, dtype=object)
    for t in range(1, 41):
        # integers near 2**50: float64 arithmetic would lose the low bits
        chunk = rng.integers(-(2**50), 2**50, size=3, dtype=np.int64)
        node = tree.append(chunk, rng)
        created.append((node.first, node.last))
        total = total + chunk.astype(object)
        assert tree.n_chunks == t
        assert [(n.first, n.last) for n in tree.nodes] == _fenwick_prefix(t)
        assert (node.first, node.last) == (t - (t & -t) + 1, t)
        exact = sum((n.exact.astype(object) for n in tree.nodes), np.zeros(3, dtype=object))
        assert exact.tolist() == total.tolist()
        assert all(n.exact.dtype == np.int64 for n in tree.nodes)
        assert np.allclose(tree.exact_sum(), total.astype(float) * 0.5, rtol=1e-15)

    # every chunk is in at most floor(log2 T) + 1 nodes ever created; chunk 1 in exactly that
    T = len(created)
    counts = [sum(first <= c <= last for first, last in created) for c in range(1, T + 1)]
    assert max(counts) == counts[0] == math.floor(math.log2(T)) + 1
    for t in range(1, T + 1):
        assert (
            sum(first <= 1 <= last for first, last in created[:t]) == math.floor(math.log2(t)) + 1
        )


def test_tree_append_copies_its_input():
    tree = TreeAggregator(GaussianMechanism(1.0, 1.0), symmetric=False, scale=1.0)
    chunk = np.array([1, 2, 3], dtype=np.int64)
    tree.append(chunk, np.random.default_rng(0))
    chunk[:] = 100
    tree.append(np.array([1, 1, 1], dtype=np.int64), np.random.default_rng(1))
    assert tree.nodes[0].exact.tolist() == [2, 3, 4]
    assert tree.exact_sum().tolist() == [2.0, 3.0, 4.0]


@pytest.mark.statistical
def test_tree_noise_variance_is_number_of_nodes_times_sigma_squared():
    """released_sum - exact_sum is the sum of one noise per stored node."""
    mech = GaussianMechanism(contribution_bound=2.0, noise_multiplier=0.75)
    dim = n_trials(ci=4_000, full=40_000)
    rng = np.random.default_rng(31)
    tree = TreeAggregator(mech, symmetric=False, scale=0.25)
    for t in range(1, 13):
        tree.append(rng.integers(-1000, 1000, size=dim), rng)
        residual = tree.released_sum() - tree.exact_sum()
        n_nodes = bin(t).count("1")
        assert len(tree.nodes) == n_nodes
        assert variance_pvalue(residual, mech.sigma * math.sqrt(n_nodes)) > REJECT
        if n_nodes > 1:
            # negative control: the same test rejects "one noise only"
            assert variance_pvalue(residual, mech.sigma) < REJECT


@pytest.mark.statistical
def test_tree_symmetric_noise():
    mech = GaussianMechanism(contribution_bound=1.0, noise_multiplier=1.3)
    q, reps = 3, n_trials(ci=1_500, full=15_000)
    rng = np.random.default_rng(32)
    diag, off = [], []
    for _ in range(reps):
        tree = TreeAggregator(mech, symmetric=True, scale=1.0)
        for _ in range(3):  # t = 3: two nodes
            A = rng.integers(-5, 5, size=(q, q))
            tree.append(A + A.T, rng)
        residual = tree.released_sum() - tree.exact_sum()
        assert np.array_equal(residual, residual.T)
        diag.append(np.diag(residual))
        off.append(residual[np.triu_indices(q, 1)])
    assert variance_pvalue(np.array(diag), mech.sigma * math.sqrt(2)) > REJECT
    assert variance_pvalue(np.array(off), mech.sigma) > REJECT  # 2 nodes * sigma^2 / 2
    assert variance_pvalue(np.array(diag), mech.sigma) < REJECT  # negative control


def test_tree_renoise_changes_only_that_node():
    mech = GaussianMechanism(1.0, 1.0)
    tree = TreeAggregator(mech, symmetric=False, scale=1.0)
    rng = np.random.default_rng(33)
    for _ in range(7):  # nodes (1..4), (5..6), (7..7)
        tree.append(rng.integers(0, 10, size=50), rng)
    node = tree.node_of(5)
    assert (node.first, node.last) == (5, 6)
    assert tree.node_of(1).last == 4 and tree.node_of(7).first == 7
    with pytest.raises(KeyError):
        tree.node_of(8)
    before = [(n.exact.copy(), n.noisy.copy()) for n in tree.nodes]
    released = tree.released_sum()
    node.exact -= 3  # e.g. a deleted record
    tree.renoise(node, np.random.default_rng(34))
    for n, (exact, noisy) in zip(tree.nodes, before, strict=True):
        if n is node:
            assert not np.any(n.noisy == noisy)  # fresh noise everywhere
            assert np.array_equal(n.exact, exact - 3)
            # the new noise has the mechanism's variance
            assert variance_pvalue(n.noisy - n.exact, mech.sigma) > 1e-3
        else:
            assert np.array_equal(n.exact, exact) and np.array_equal(n.noisy, noisy)
    assert np.allclose(tree.released_sum() - released, node.noisy - before[1][1])


# --------------------------------------------------------------------------
# Release generators
# --------------------------------------------------------------------------


def test_release_generator_int_seeds_are_reproducible_and_streams_distinct():
    a = release_generator(42, 3).normal(size=8)
    assert np.array_equal(a, release_generator(42, 3).normal(size=8))
    assert np.array_equal(a, release_generator(np.int64(42), 3).normal(size=8))
    firsts = {tuple(release_generator(42, k).normal(size=4)) for k in range(200)}
    assert len(firsts) == 200
    seeds = {tuple(release_generator(s, 0).normal(size=4)) for s in range(200)}
    assert len(seeds) == 200
    # consecutive release streams are uncorrelated
    x = release_generator(7, 0).normal(size=20_000)
    y = release_generator(7, 1).normal(size=20_000)
    assert abs(np.corrcoef(x, y)[0, 1]) * math.sqrt(x.size) < 4.5


def test_release_generator_none_draws_fresh_entropy():
    draws = {tuple(release_generator(None, 0).normal(size=4)) for _ in range(50)}
    assert len(draws) == 50


def test_release_generator_random_state():
    a = release_generator(np.random.RandomState(0), 1).normal(size=5)
    b = release_generator(np.random.RandomState(0), 1).normal(size=5)
    assert np.array_equal(a, b)
    rs = np.random.RandomState(0)
    c = release_generator(rs, 1).normal(size=5)
    d = release_generator(rs, 1).normal(size=5)  # the RandomState moved on
    assert np.array_equal(a, c) and not np.array_equal(c, d)


@pytest.mark.parametrize("bad", [np.random.default_rng(0), "0", 1.5])
def test_release_generator_rejects_other_types(bad):
    with pytest.raises(TypeError):
        release_generator(bad, 0)


@pytest.mark.parametrize("d", [2, 100])
def test_rows_whose_norm_exceeds_the_largest_float_are_clipped_to_the_bound(d):
    """A finite row whose true norm is above ~1.8e308 must still end on the
    sphere (a norm capped at the largest float left it sqrt(d) / sqrt(2)
    times too long), and nothing warns."""
    X = np.vstack([np.full(d, 1.5e308 / np.sqrt(d / 2)), np.full(d, 1e200), np.zeros(d)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clipped = clip_rows_l2(X, 2.0)
    norms = np.sqrt((clipped**2).sum(axis=1))
    assert np.all(norms <= 2.0) and norms[0] > 1.99 and norms[2] == 0.0


def test_norm_bounds_whose_squares_underflow_are_refused():
    # Below ~1e-154 the squares of a row just above the bound underflow to 0:
    # its norm reads 0 and the row escaped clipping (||u||^2 = 25 against a
    # bound of 2 at feature_norm = 2**-537). Such bounds are refused before
    # anything is read; the smallest accepted one still clips exactly.
    from sklearn.utils._param_validation import InvalidParameterError

    from sklearn_dpu.linear_model import (
        DPLinearRegression,
        DPLogisticRegression,
        UnlearnableSGDClassifier,
    )
    from sklearn_dpu.privacy.clipping import MIN_NORM_BOUND, clip_rows_l2

    X, y = np.ones((20, 2)), np.r_[np.zeros(10), np.ones(10)]
    for estimator in (DPLinearRegression, DPLogisticRegression, UnlearnableSGDClassifier):
        with pytest.raises(InvalidParameterError, match="feature_norm"):
            estimator(feature_norm=2.0**-537).fit(X, y)
    rows = np.full((3, 50), 1.7 * MIN_NORM_BOUND) * np.array([[1.0], [3.0], [100.0]])
    clipped = clip_rows_l2(rows, MIN_NORM_BOUND)
    assert np.all(np.linalg.norm(clipped / MIN_NORM_BOUND, axis=1) <= 1.0 + 1e-12)
