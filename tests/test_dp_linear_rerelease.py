"""DPLinearRegression: what deleting costs the remaining rows, and correlated re-release."""

from pathlib import Path

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLinearRegression, _correlated_rerelease
from sklearn_dpu.linear_model._correlated_rerelease import (
    ar1_covariance,
    correlated_noise,
    deleted_row_precision,
    remaining_row_precision,
)
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.calibration import gaussian_noise_multiplier
from sklearn_dpu.privacy.ledger import privacy_spent
from sklearn_dpu.unlearning.planner import gdp_epsilon

from ._stats import n_trials, same_distribution_pvalue

DELTA = 1e-5


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2)) / 2
    return X, X @ [1.0, -0.5] + 0.05 * rng.normal(size=n)


def _noise(est):
    """The noise of the current release (released minus exact, real units)."""
    tree = est.unlearning_state_.statistics
    return tree.released_sum() - tree.exact_sum()


# ------------------------------------------------------------- derivation


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.9, 0.99])
@pytest.mark.parametrize("k", [1, 2, 5, 40])
def test_closed_forms_match_the_ar1_precision_matrix(rho, k):
    precision = np.linalg.inv(ar1_covariance(k + 1, rho))
    ones = np.ones(k + 1)
    assert remaining_row_precision(k, rho) == pytest.approx(ones @ precision @ ones, rel=1e-9)
    for present in range(1, k + 1):  # a row in the first `present` releases only
        a = (np.arange(k + 1) < present).astype(float)
        assert deleted_row_precision(present, rho) == pytest.approx(a @ precision @ a, rel=1e-9)
    # Independent noise: k + 1 releases, and a row in j of them pays j.
    assert remaining_row_precision(k, 0.0) == k + 1
    assert deleted_row_precision(k, 0.0) == pytest.approx(k)


def test_correlated_noise_keeps_the_marginal_law_and_correlates():
    rng = np.random.default_rng(0)
    z0, w = rng.normal(size=(2, 200_000))
    z1 = correlated_noise(z0, w, 0.9)
    assert np.std(z1) == pytest.approx(1.0, abs=0.01)
    assert np.corrcoef(z0, z1)[0, 1] == pytest.approx(0.9, abs=0.01)


# ------------------------------------------------------------- accounting


def _worst_precision(k, rho):
    """Largest exposure (units of one release's mu^2) of any row ever in the
    data after ``k`` single-call deletions: the remaining rows', or the row
    deleted by call ``k`` (in releases 0 .. k-1), the most exposed deleted one."""
    if rho == 0:
        return remaining_row_precision(k, rho)  # a deleted row is in fewer releases
    return max(remaining_row_precision(k, rho), deleted_row_precision(k, rho))


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.5, 0.9])
def test_privacy_spent_is_the_worst_record_ever_in_the_data(rho, tmp_path):
    """privacy_spent_ and the shared budget's charge are the max over every
    record ever in the data: remaining rows and the most exposed deleted one."""
    X, y = _data()
    budget = PrivacyBudget(100.0, DELTA, tmp_path / "budget.db")
    est = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, rerelease_correlation=rho, random_state=0, budget=budget
    )
    est.fit(X, y)
    mu = 1.0 / gaussian_noise_multiplier(1.0, DELTA)
    for k in range(1, 6):
        est.delete_samples([k])
        expected = gdp_epsilon(mu * np.sqrt(_worst_precision(k, rho)), DELTA)
        assert est.privacy_spent_.epsilon == pytest.approx(expected, rel=1e-6)
        assert est.deletion_log_[-1].remaining_epsilon == pytest.approx(expected, rel=1e-6)
        # The budget is charged exactly the growth of that worst case.
        assert budget.spent().epsilon == pytest.approx(expected, rel=1e-6)
    if rho > 0.5:  # the deleted rows set it, and the report says so
        assert est.privacy_spent_.epsilon == pytest.approx(est.deletion_log_[-1].deletion_epsilon)
        assert "samples deleted by this call" in est.deletion_log_[-1].notes[-1]
    elif rho > 0:
        assert "here that of the remaining samples" in est.deletion_log_[-1].notes[-1]
    # Deleting many ids in one call: one more step of each group.
    est.delete_samples(list(range(10, 60)))
    expected = gdp_epsilon(mu * np.sqrt(_worst_precision(6, rho)), DELTA)
    assert est.privacy_spent_.epsilon == pytest.approx(expected, rel=1e-6)
    assert budget.spent().epsilon == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_ledger_composes_to_the_joint_gaussian_mechanism(rho):
    X, y = _data()
    est = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, rerelease_correlation=rho, random_state=0
    ).fit(X, y)
    mu = 1.0 / gaussian_noise_multiplier(1.0, DELTA)
    for k in range(1, 6):
        est.delete_samples([k])
        # The remaining rows' group (chunk 1: the fit and the re-releases).
        live = [e for e in est.privacy_ledger_ if e["chunks"][0] >= 1]
        expected = gdp_epsilon(mu * np.sqrt(remaining_row_precision(k, rho)), DELTA)
        assert privacy_spent(live, DELTA).epsilon == pytest.approx(expected, rel=1e-6)
        # The deleted rows' group (chunk 0) composes to the latest deleted
        # row's exposure, the largest so far; absent with independent noise.
        deleted = [e for e in est.privacy_ledger_ if e["chunks"][0] == 0]
        if rho == 0:
            assert deleted == []
        else:
            exposure = gdp_epsilon(mu * np.sqrt(deleted_row_precision(k, rho)), DELTA)
            assert privacy_spent(deleted, DELTA).epsilon == pytest.approx(exposure, rel=1e-6)
        report = est.deletion_log_[-1]
        if rho == 0:
            assert report.deletion_epsilon is None
        else:  # the deleted row was in the fit and k - 1 re-releases
            exposure = mu * np.sqrt(deleted_row_precision(k, rho))
            assert report.deletion_epsilon == pytest.approx(gdp_epsilon(exposure, DELTA))
            assert report.deletion_delta == DELTA
            assert f"rho={rho:g}" in report.guarantee
    # One call deleting many ids costs one re-release.
    before = est.privacy_spent_.epsilon
    est.delete_samples(list(range(10, 60)))
    assert est.deletion_log_[-1].rerelease_epsilon == pytest.approx(report.rerelease_epsilon)
    assert est.deletion_log_[-1].cost["renoised_sums"] == 1
    expected = gdp_epsilon(mu * np.sqrt(_worst_precision(6, rho)), DELTA)
    assert est.privacy_spent_.epsilon == pytest.approx(expected, rel=1e-6)
    assert est.privacy_spent_.epsilon > before


def test_measured_cost_of_many_deletions():
    """The numbers the docs state (epsilon = 1, delta = 1e-5)."""
    X, y = _data(400)
    spent, live = {}, {}
    for rho in (0.0, 0.5, 0.7, 0.9):
        est = DPLinearRegression(
            feature_norm=1.0, target_bound=1.0, rerelease_correlation=rho, random_state=0
        ).fit(X, y)
        for i in range(100):
            est.delete_samples([i])
            if i + 1 in (1, 10, 100):
                spent[rho, i + 1] = round(est.privacy_spent_.epsilon, 2)
                chunk1 = [e for e in est.privacy_ledger_ if e["chunks"][0] >= 1]
                live[rho, i + 1] = round(privacy_spent(chunk1, DELTA).epsilon, 2)
    table = {rho: [spent[rho, k] for k in (1, 10, 100)] for rho in (0.0, 0.5, 0.7, 0.9)}
    assert table == {
        0.0: [1.47, 3.82, 14.52],
        0.5: [1.17, 2.25, 7.45],
        0.7: [1.45, 2.02, 5.32],
        0.9: [2.51, 2.64, 3.72],
    }
    # With the default estimated bounds (half of epsilon, not re-released).
    est = DPLinearRegression(random_state=0).fit(X, y)
    default = []
    for i in range(100):
        est.delete_samples([i])
        if i + 1 in (1, 10, 100):
            default.append(round(est.privacy_spent_.epsilon, 2))
    assert default == [1.25, 2.52, 8.30]
    # The remaining rows alone, at rho = 0.9.
    assert [live[0.9, k] for k in (1, 10, 100)] == [1.03, 1.26, 2.77]
    # ... and where users read them.
    root = Path(__file__).resolve().parents[1]
    pages = {
        "README.md": (
            *("1.25", "2.52", "8.30"),
            *("1.47", "3.8", "14.5", "1.03", "1.26", "2.77", "2.51", "2.64", "3.72"),
        ),
        "doc/guarantees.rst": (
            *("1.25", "2.52", "8.30"),
            "1.47",
            "3.8",
            "14.5",
            "1.03",
            "1.26",
            "2.77",
            "2.51",
            "2.64",
            "3.72",
        ),
        "doc/user_guide.rst": tuple(str(v) for row in table.values() for v in row),
    }
    for page, numbers in pages.items():
        text = (root / page).read_text()
        for number in numbers:
            assert number in text, (page, number)


def test_summary_states_the_cost_to_the_remaining_rows():
    X, y = _data()
    est = (
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, random_state=0)
        .fit(X, y)
        .delete_samples([0, 1, 2])
    )
    text = est.deletion_log_[-1].summary()
    assert "everything published so far (privacy_spent_): eps = 1.465" in text
    assert "one call deleting many ids costs one re-release" in text
    assert "new release to the remaining samples" in est.deletion_log_[-1].guarantee


# ----------------------------------------------------------- exactness


@pytest.mark.statistical
@pytest.mark.parametrize("broken", [False, True])
def test_correlated_rerelease_has_the_law_of_a_fresh_fit(monkeypatch, broken):
    """After two correlated re-releases the released statistics have the law
    of a fresh fit on the remaining rows; a re-noising without the
    sqrt(1 - rho^2) factor (negative control) is detected."""
    if broken:
        monkeypatch.setattr(
            _correlated_rerelease, "correlated_noise", lambda prev, fresh, rho: rho * prev + fresh
        )
    X, y = _data(60)
    n = n_trials(ci=400, full=4000)

    def released(est):
        tree = est.unlearning_state_.statistics
        return tree.released_sum()[np.triu_indices(4)]

    def make(seed):
        return DPLinearRegression(
            feature_norm=1.0, target_bound=1.0, rerelease_correlation=0.9, random_state=seed
        )

    deleted, fresh, correlation = [], [], []
    for t in range(n):
        est = make(t).fit(X, y)
        before = _noise(est)
        est.delete_samples([0]).delete_samples([1])
        deleted.append(released(est))
        fresh.append(released(make(10**6 + t).fit(X[2:], y[2:])))
        correlation.append((before[0, 0], _noise(est)[0, 0]))
    p = same_distribution_pvalue(np.array(deleted), np.array(fresh))
    if broken:
        assert p < 1e-3
    else:
        assert p > 1e-3
        # Two steps of AR(1): correlation rho^2 with the fit's noise.
        assert np.corrcoef(np.array(correlation).T)[0, 1] == pytest.approx(0.81, abs=0.05)


def test_state_keeps_only_the_current_noise():
    X, y = _data()
    est = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, rerelease_correlation=0.9, random_state=0
    ).fit(X, y)
    state = est.unlearning_state_
    np.testing.assert_allclose(state.release_noise, _noise(est), atol=1e-9)
    est.delete_samples([0])
    # The stored noise is the current release's; the exact sums are those of
    # the remaining rows.
    np.testing.assert_allclose(state.release_noise, _noise(est), atol=1e-9)
    refit = DPLinearRegression(feature_norm=1.0, target_bound=1.0, random_state=0).fit(X[1:], y[1:])
    np.testing.assert_array_equal(
        state.statistics.exact_sum(), refit.unlearning_state_.statistics.exact_sum()
    )


# ------------------------------------------------------------ refusals


def test_streams_and_noisy_gd_refuse_correlation_clearly():
    X, y = _data()
    with pytest.raises(ValueError, match="needs solver='ssp'"):
        DPLinearRegression(
            feature_norm=1.0, target_bound=1.0, solver="noisy_gd", rerelease_correlation=0.5
        ).fit(X, y)
    est = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, rerelease_correlation=0.5, random_state=0
    ).fit(X[:100], y[:100])
    coef, ledger = est.coef_.copy(), list(est.privacy_ledger_)
    with pytest.raises(ValueError, match="rerelease_correlation > 0"):
        est.partial_fit(X[100:], y[100:])
    np.testing.assert_array_equal(est.coef_, coef)
    assert est.privacy_ledger_ == ledger
    assert est.unlearning_state_.n_chunks == 1
    with pytest.raises(ValueError):
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, rerelease_correlation=1.0).fit(X, y)


def test_summary_says_whom_the_deletion_epsilon_describes():
    """A correlated re-release's deletion epsilon is each deleted sample's
    exposure through everything published, not a per-call cost; a certified
    deletion's is the distance from a retrain."""
    from sklearn_dpu.unlearning.report import DeletionReport

    X, y = _data()
    est = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, rerelease_correlation=0.9, random_state=0
    ).fit(X, y)
    report = est.delete_samples([0]).deletion_log_[-1]
    assert report.method == "exact" and report.deletion_epsilon is not None
    assert "everything published, before and after this call, shows each of them" in (
        report.summary()
    )
    certified = DeletionReport(1, "certified", "g", deletion_epsilon=0.1, deletion_delta=1e-6)
    assert "deleted samples: within (eps, delta) = (0.1, 1e-06) of a retrain" in (
        certified.summary()
    )
