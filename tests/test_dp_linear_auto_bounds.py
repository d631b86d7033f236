"""DPLinearRegression(feature_norm="auto", target_bound="auto"): bounds estimated
privately, as a planned and charged release."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

import sklearn_dpu.linear_model._linear_bounds as linear_bounds
from sklearn_dpu.base import PublicSizes
from sklearn_dpu.exceptions import UnreliableBoundsWarning
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.linear_model._linear_bounds import (
    AUTO_BOUNDS,
    _statistics_events,
    auto_noise_multiplier,
    bounds_recipe,
    calibration_bounds,
    per_feature_selection_epsilon,
    rescale_features,
)
from sklearn_dpu.linear_model._linear_releases import release_recipe
from sklearn_dpu.linear_model._sufficient_statistics import encode_with_gram
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.calibration import gaussian_noise_multiplier
from sklearn_dpu.privacy.ledger import Release

AUTO = dict(feature_norm="auto", target_bound="auto")
BOUNDS = ("feature_center_", "feature_scale_", "feature_norm_", "target_interval_")


def _bounds_of(reg) -> dict:
    """The published bounds a fit has (which depend on its design)."""
    return {name: getattr(reg, name) for name in BOUNDS if hasattr(reg, name)}


def _heterogeneous(n=3000, d=3, seed=0):
    """Features whose scales differ by 100x, offset, and a target in the thousands."""
    rng = np.random.default_rng(seed)
    scales = np.logspace(0, 2, d)
    X = 50.0 + rng.normal(size=(n, d)) * scales
    y = 3000.0 + (X - 50.0) @ (100.0 / scales) + 20.0 * rng.normal(size=n)
    return X, y


def _r2(model, X, y):
    return 1.0 - np.mean((model.predict(X) - y) ** 2) / np.var(y)


# ------------------------------------------------------------------ privacy


@pytest.mark.parametrize(
    "epsilon, delta, d, kw",
    [
        (0.3, 1e-5, 3, AUTO),
        (1.0, 1e-7, 1, AUTO),
        (4.0, 1e-5, 6, AUTO),
        (1.0, 1e-5, 4, dict(feature_norm="auto")),
        (1.0, 1e-5, 4, dict(target_bound="auto", fit_intercept=False)),
        (2.0, 1e-6, 2, dict(AUTO, solver="noisy_gd", max_iter=20)),
    ],
)
def test_privacy_spent_stays_within_epsilon(epsilon, delta, d, kw):
    X, y = _heterogeneous(n=300, d=d)
    reg = DPLinearRegression(epsilon=epsilon, delta=delta, random_state=0, **kw).fit(X, y)
    spent = reg.privacy_spent_
    assert spent.epsilon <= epsilon
    assert spent.delta == delta
    # The split is real: the Gaussian part is noisier than a fit with public bounds.
    assert reg.unlearning_state_.noise_multiplier > gaussian_noise_multiplier(epsilon, delta)


@pytest.mark.parametrize("n, per_feature", [(400, False), (20000, True)])
def test_ledger_events_are_those_of_the_mechanisms_that_drew_the_noise(n, per_feature):
    X, y = _heterogeneous(n=n, d=3)
    reg = DPLinearRegression(epsilon=1.0, random_state=0, **AUTO).fit(X, y)
    ran = bounds_recipe(
        3, 1.0, auto_features=True, auto_target=True, fit_intercept=True, per_feature=per_feature
    )
    # the count, then 3 centers, 3 scales and the row norm (or one pooled
    # norm), then the target's center and half-range.
    assert len(ran.mechanisms) == (10 if per_feature else 4)
    assert hasattr(reg, "feature_scale_") == per_feature
    assert hasattr(reg, "feature_norm_") != per_feature
    assert sum(m.epsilon for m in ran.mechanisms) == pytest.approx(AUTO_BOUNDS.bounds_share)
    # Recorded: the pooled design's events, which dominate either design.
    upper = calibration_bounds(3, 1.0, auto_features=True, auto_target=True, fit_intercept=True)
    multiplier = auto_noise_multiplier(upper, 1.0, reg.delta)
    ssp = release_recipe("ssp", multiplier, fit_intercept=True, max_iter=1, coef_bound=1.0)
    assert reg.privacy_ledger_ == [upper.release().to_dict(), ssp.release(1, 1).to_dict()]
    assert "as the count chose" in reg.privacy_ledger_[0]["mechanism"]
    assert reg.privacy_spent_.epsilon <= 1.0
    # The noise of the statistics came from the mechanism whose event is charged.
    assert reg.unlearning_state_.statistics.mechanism == ssp.mechanism
    # The plan, from parameters alone (any number of features), is exactly
    # what the fit charged: no refusal can happen after the data are read.
    params = reg.get_params(deep=False)
    for sizes in (PublicSizes(n_features=3), PublicSizes()):
        planned = reg._plan_releases(params, sizes)
        assert planned.exact and not planned.bounds
        assert [r.to_dict() for r in planned.releases] == reg.privacy_ledger_


def test_a_budget_filled_to_the_plan_never_refuses_after_reading_data(tmp_path):
    """A budget whose cap is exactly the planned epsilon (after a Gaussian
    history) accepts the fit whichever design the noisy count picks (before:
    the per-feature design's many small events came out 5e-5 above the
    plan in the budget's accountant, so the fit was refused after reading the
    data, for a reason that depended on the noisy count and charged nothing)."""
    from dp_accounting import dp_event

    history = [dp_event.GaussianDpEvent(0.7)]  # an earlier release on the budget
    probe = PrivacyBudget(1e9, 1e-5)
    probe.charge(history, "earlier release")
    planned = probe.planned_epsilon(DPLinearRegression(epsilon=0.05, budget=probe))
    rng = np.random.default_rng(0)
    for n in (2000, 60000):  # the pooled design, then the per-feature one
        X = rng.normal(size=(n, 2))
        y = X @ [1.0, -2.0] + rng.normal(size=n)
        budget = PrivacyBudget(planned, 1e-5)
        budget.charge(history, "earlier release")
        reg = DPLinearRegression(epsilon=0.05, random_state=0, budget=budget).fit(X, y)
        assert hasattr(reg, "feature_scale_") == (n == 60000)
        assert hasattr(reg, "coef_")


def test_the_design_is_chosen_by_the_noisy_count_not_by_n():
    """Near the threshold both designs occur for the same data (the count's
    noise decides); far from it the choice is stable."""
    each = per_feature_selection_epsilon(2, 1.0, auto_target=True, fit_intercept=True)
    threshold = int(AUTO_BOUNDS.per_feature_rows / each)
    X, y = _heterogeneous(n=threshold, d=2)
    designs = {
        hasattr(DPLinearRegression(random_state=seed, **AUTO).fit(X, y), "feature_scale_")
        for seed in range(12)
    }
    assert designs == {True, False}


def test_budget_refuses_before_reading_data(tmp_path):
    budget = PrivacyBudget(epsilon=0.5, delta=1e-5, path=tmp_path / "ledger.db")
    reg = DPLinearRegression(epsilon=1.0, budget=budget, random_state=0, **AUTO)
    with pytest.raises(Exception, match="budget|exceed"):
        reg.fit(np.full((10, 2), np.nan), np.zeros(10))  # refused, not a NaN error
    assert not hasattr(reg, "coef_")


def _published_bounds(data, seeds):
    X, y = data
    out = []
    for seed in seeds:
        reg = DPLinearRegression(epsilon=1.0, random_state=seed, **AUTO).fit(X, y)
        out.append(np.r_[reg.feature_norm_, reg.target_interval_])
    return np.array(out)


def _leaks(on_d, on_neighbour) -> bool:
    """A published value constant over seeds on each data set but different
    between neighbouring data sets depends on the data without noise."""
    constant = np.all(on_d == on_d[0], axis=0) & np.all(on_neighbour == on_neighbour[0], axis=0)
    return bool(np.any(constant & (on_d[0] != on_neighbour[0])))


def test_published_bounds_differ_between_neighbours_only_through_noise(monkeypatch):
    X, y = _heterogeneous(n=300, d=2, seed=3)  # the pooled design
    seeds = range(8)
    data, neighbour = (X, y), (X[:-1], y[:-1])
    assert not _leaks(_published_bounds(data, seeds), _published_bounds(neighbour, seeds))

    # Negative control: exact quantiles are constant per data set and move
    # with one row: flagged.
    def exact(values, mechanisms, rng):
        return np.array([np.quantile(values[:, j], m.quantile) for j, m in enumerate(mechanisms)])

    def exact_spreads(values, center, resolution, mechanisms, rng):
        return exact(np.abs(np.asarray(values) - center), mechanisms, rng)

    monkeypatch.setattr(linear_bounds, "private_column_quantiles", exact)
    monkeypatch.setattr(linear_bounds, "private_column_spreads", exact_spreads)
    assert _leaks(_published_bounds(data, seeds), _published_bounds(neighbour, seeds))


# ---------------------------------------------------------------- accuracy


def test_coefficients_are_in_the_data_units():
    rng = np.random.default_rng(1)
    X = np.array([1000.0, -5.0, 0.0]) + rng.uniform(-1, 1, size=(20000, 3)) * [10.0, 0.1, 1.0]
    coef = np.array([3.0, -200.0, 7.0])
    y = 40.0 + X @ coef + 0.1 * rng.normal(size=len(X))
    reg = DPLinearRegression(epsilon=1e4, delta=1e-5, random_state=0, **AUTO).fit(X, y)
    exact = LinearRegression().fit(X, y)
    np.testing.assert_allclose(reg.coef_, exact.coef_, rtol=0.15)
    assert _r2(reg, X, y) > 0.95
    # The published bounds are on the data's scale.
    assert np.all(
        np.abs(reg.feature_center_ - X.mean(axis=0)) <= 0.1 * np.abs(X.mean(axis=0)) + 0.1
    )
    spread = np.array([10.0, 0.1, 1.0])
    assert np.all((reg.feature_scale_ > 0.5 * spread) & (reg.feature_scale_ < 4 * spread))


def test_auto_bounds_fit_raw_heterogeneous_data_that_defaults_cannot():
    X, y = _heterogeneous(n=20000, d=3)
    auto = DPLinearRegression(epsilon=1.0, random_state=0, **AUTO).fit(X, y)
    unit = DPLinearRegression(epsilon=1.0, feature_norm=1.0, target_bound=1.0, random_state=0).fit(
        X, y
    )
    assert _r2(auto, X, y) > 0.9
    assert _r2(unit, X, y) < 0.0  # the old defaults


def test_explicit_bounds_publish_nothing_about_clipping():
    X, y = _heterogeneous(n=300, d=2)
    reg = DPLinearRegression(random_state=0, **AUTO).fit(X, y)
    assert set(_bounds_of(reg)) == {"feature_norm_", "target_interval_"}
    reg.set_params(feature_norm=1.0, target_bound=1.0).fit(X, y)
    assert not any(hasattr(reg, name) for name in BOUNDS)
    assert len(reg.privacy_ledger_) == 1
    only_target = DPLinearRegression(target_bound="auto", random_state=0).fit(X, y)
    assert hasattr(only_target, "target_interval_")
    assert not hasattr(only_target, "feature_scale_")


# ---------------------------------------------------------- stream, delete


def test_partial_fit_keeps_the_bounds_of_the_first_fit():
    X, y = _heterogeneous(n=600, d=2)
    reg = DPLinearRegression(random_state=0, **AUTO).fit(X[:300], y[:300])
    before = _bounds_of(reg)
    ledger = list(reg.privacy_ledger_)
    reg.partial_fit(X[300:] * 100.0, y[300:])  # other units: the bounds stay
    assert _bounds_of(reg) == before
    assert reg.privacy_ledger_[:2] == ledger and len(reg.privacy_ledger_) == 3
    assert "Gram" in reg.privacy_ledger_[2]["mechanism"]


def test_deletion_keeps_the_bounds_and_says_so():
    X, y = _heterogeneous(n=3000, d=2)
    reg = DPLinearRegression(epsilon=2.0, random_state=0, **AUTO).fit(X, y)
    assert hasattr(reg, "feature_scale_")  # the per-feature design
    scale, interval = reg.feature_scale_.copy(), reg.target_interval_
    reg.delete_samples([0, 1, 2])
    report = reg.deletion_log_[-1]
    eps_b = AUTO_BOUNDS.bounds_share * 2.0
    assert report.method == "certified"
    # group privacy: the kept (eps_b, 0)-DP bounds are within 3 eps_b for the 3 rows
    assert report.deletion_epsilon == pytest.approx(3 * eps_b)
    assert report.deletion_delta == 0.0
    assert "bounds" in report.guarantee and f"({3 * eps_b:.4g}, 0)" in report.guarantee
    assert any(f"({eps_b:.4g}, 0)-DP" in note and "not recomputed" in note for note in report.notes)
    np.testing.assert_array_equal(reg.feature_scale_, scale)
    assert reg.target_interval_ == interval
    # The statistics are deleted exactly: those of the remaining rows with the same bounds.
    state = reg.unlearning_state_
    bounds = state.bounds
    Z = rescale_features(X[3:], bounds.feature_center, bounds.feature_scale)
    _, gram = encode_with_gram(Z, y[3:], state.feature_norm, state.center, state.half_range, True)
    np.testing.assert_array_equal(state.statistics.nodes[0].exact, gram)
    # Negative control: with the deleted rows, it differs.
    _, full = encode_with_gram(
        rescale_features(X, bounds.feature_center, bounds.feature_scale),
        y,
        state.feature_norm,
        state.center,
        state.half_range,
        True,
    )
    assert not np.array_equal(state.statistics.nodes[0].exact, full)
    reg.delete_samples([3])  # the group grows across calls
    assert reg.deletion_log_[-1].deletion_epsilon == pytest.approx(4 * eps_b)


def test_explicit_bounds_deletion_is_still_exact():
    X, y = _heterogeneous(n=300, d=2)
    reg = DPLinearRegression(feature_norm=3.0, target_bound=300.0, random_state=0)
    reg.fit(X, y).delete_samples([0])
    assert reg.deletion_log_[-1].method == "exact"
    assert reg.deletion_log_[-1].deletion_epsilon is None


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("n", [200, 3000])  # pooled and per-feature designs
def test_auto_on_a_dask_array_is_the_in_memory_fit_bit_for_bit(n):
    # Every selection reads only counts per grid value, counted block by block
    # on the workers and summed exactly: the same bounds, the same model.
    da = pytest.importorskip("dask.array")
    X, y = _heterogeneous(n=n, d=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableBoundsWarning)
        local = DPLinearRegression(random_state=0, **AUTO).fit(X, y)
        dist = DPLinearRegression(random_state=0, **AUTO).fit(
            da.from_array(X, chunks=n // 7), da.from_array(y, chunks=n // 5)
        )
    assert _bounds_of(dist).keys() == _bounds_of(local).keys()
    for name, value in _bounds_of(local).items():
        np.testing.assert_array_equal(getattr(dist, name), value)
    np.testing.assert_array_equal(dist.coef_, local.coef_)
    assert dist.privacy_ledger_ == local.privacy_ledger_


@pytest.mark.parametrize("where", ["X", "y"])
def test_auto_with_nan_is_a_clear_error_and_changes_nothing(where):
    X, y = _heterogeneous(n=200, d=2)
    reg = DPLinearRegression(random_state=0, **AUTO).fit(X, y)
    bounds, coef = _bounds_of(reg), reg.coef_.copy()
    X_bad, y_bad = X.copy(), y.copy()
    (X_bad if where == "X" else y_bad)[5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        reg.fit(X_bad, y_bad)
    assert _bounds_of(reg) == bounds
    np.testing.assert_array_equal(reg.coef_, coef)


def test_bad_bound_strings_are_refused():
    X, y = _heterogeneous(n=50, d=2)
    with pytest.raises(ValueError, match="feature_norm"):
        DPLinearRegression(feature_norm="Auto").fit(X, y)
    with pytest.raises(ValueError, match="target_bound"):
        DPLinearRegression(target_bound="max").fit(X, y)


def test_correlated_rereleases_count_the_bounds_for_the_deleted_rows():
    """With rerelease_correlation > 0 the deleted rows' group (chunk 0) can be
    the most exposed: it must hold the bounds release they were in too
    (before: privacy_spent_ 2.00 instead of 2.12 after five deletions)."""
    X = np.random.default_rng(0).normal(size=(400, 3))
    reg = DPLinearRegression(epsilon=1.0, rerelease_correlation=0.9, random_state=0, **AUTO).fit(
        X, X.sum(axis=1)
    )
    for i in range(5):
        reg.delete_samples([i])
    ledger = [Release.from_dict(entry) for entry in reg.privacy_ledger_]
    bounds = ledger[0]
    assert "eps_b" in bounds.mechanism
    deleted_group = [r.event for r in ledger if r.chunks == (0, 0)]
    assert bounds.event in deleted_group
    with_bounds = epsilon_spent([r.event for r in ledger if r.chunks == (0, 0)], reg.delta)
    assert reg.privacy_spent_.epsilon == pytest.approx(with_bounds)
    without = [e for e in deleted_group if e != bounds.event]
    assert reg.privacy_spent_.epsilon > epsilon_spent(without, reg.delta)


def test_a_budget_at_the_estimators_delta_can_pay_an_auto_fit(tmp_path):
    """fit plans with the public number of features from X's shape (before:
    the (epsilon, delta) bound composed at budget.delta - delta = 0 was
    infinite, so no such budget could ever pay)."""
    X = np.random.default_rng(0).normal(size=(500, 3))
    budget = PrivacyBudget(epsilon=100.0, delta=1e-5, path=tmp_path / "ledger.db")
    reg = DPLinearRegression(epsilon=1.0, delta=1e-5, budget=budget, random_state=0, **AUTO)
    assert np.isfinite(budget.planned_epsilon(reg))
    reg.fit(X, X.sum(axis=1))
    assert budget.spent().epsilon == pytest.approx(reg.privacy_spent_.epsilon)


@pytest.mark.parametrize("n_features", [1, 5])
def test_noisy_gd_with_auto_bounds_stays_within_epsilon(n_features):
    """The calibration composes the events noisy GD records (steps and a
    count), not the single Gaussian they equal in theory (which overshot
    epsilon = 0.01 by the PLD's discretization)."""
    X = np.random.default_rng(0).normal(size=(300, n_features))
    reg = DPLinearRegression(epsilon=0.01, solver="noisy_gd", random_state=0, **AUTO)
    reg.fit(X, X.sum(axis=1))
    assert reg.privacy_spent_.epsilon <= 0.01


def test_too_few_rows_for_the_epsilon_warn_from_the_noisy_count():
    """Selections with rows x epsilon far below their grid's needs are close
    to random: the fit says so (from its noisy count, a charged release);
    with enough rows, or public bounds, it does not."""
    from sklearn_dpu.exceptions import UnreliableBoundsWarning

    X, y = _heterogeneous(n=300, d=2)
    with pytest.warns(UnreliableBoundsWarning, match="noisy count"):
        DPLinearRegression(epsilon=0.1, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
        DPLinearRegression(
            epsilon=0.1, feature_norm=300.0, target_bound=(0, 6000), random_state=0
        ).fit(X, y)


def test_the_correlated_note_composes_the_kept_bounds():
    """With rerelease_correlation > 0 the report's note gives each group's
    epsilon with the estimated bounds they were all in (before: 0.62 for the
    remaining samples, below the fit's own 1.0)."""
    import re

    X = np.random.default_rng(0).normal(size=(3000, 3))
    reg = DPLinearRegression(epsilon=1.0, rerelease_correlation=0.9, random_state=0, **AUTO)
    reg.fit(X, X.sum(axis=1)).delete_samples([1])
    (note,) = [n for n in reg.deletion_log_[-1].notes if "Remaining samples" in n]
    remaining, deleted = (float(v) for v in re.findall(r"eps = ([0-9.]+)", note))
    assert remaining >= 1.0
    assert deleted == pytest.approx(reg.privacy_spent_.epsilon, rel=1e-3)


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 10.0, 300.0])
@pytest.mark.parametrize("gd_steps", [0, 20])
def test_auto_noise_multiplier_is_the_smallest_that_fits(epsilon, gd_steps):
    """The root-finder (regula falsi between two closed-form brackets) returns
    a multiplier whose composition with the bounds' events is within epsilon,
    and 2e-4 less noise would not be: the tolerance the bisection it replaced
    had, reached with a handful of PLD compositions instead of fourteen."""
    delta = 1e-5
    upper = calibration_bounds(5, epsilon, auto_features=True, auto_target=True, fit_intercept=True)
    multiplier = auto_noise_multiplier(upper, epsilon, delta, gd_steps=gd_steps)

    def spent(m):
        return epsilon_spent([*upper.events, *_statistics_events(m, gd_steps)], delta)

    assert spent(multiplier) <= epsilon
    assert spent(multiplier * (1 - 2e-4)) > epsilon
