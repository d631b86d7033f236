"""The private quantile mechanism and PrivateBoundsScaler.

Privacy is checked exactly: the rank utility's add/remove sensitivity on every
small neighbouring pair, and the selection probabilities' ratio between
neighbours against e^epsilon, with negative controls (doubled epsilon, a
sensitivity that is too small) that the same checks reject.
"""

import itertools
import pickle
import warnings

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

from sklearn_dpu import io
from sklearn_dpu.base import PublicSizes
from sklearn_dpu.exceptions import BudgetExceededError, UnlearningError, UnreliableBoundsWarning
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.preprocessing import PrivateBoundsScaler
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.ledger import ApproximateDPBound
from sklearn_dpu.privacy.mechanisms import ExponentialMechanism
from sklearn_dpu.privacy.quantiles import (
    GeometricGrid,
    PrivateQuantile,
    column_mechanisms,
    private_column_quantiles,
    private_norm_bound,
)
from sklearn_dpu.unlearning import delete_samples, unlearnable_steps

from ._stats import n_trials

GRID = GeometricGrid(0.5, 16.0, ratio=2.0, signed=True)  # -16 .. 16, 13 candidates
VALUES = (-20.0, -3.0, 0.0, 0.7, 1.0, 5.0, 30.0)  # inside, on and outside the grid
QUANTILES = (0.0, 0.05, 0.3, 0.5, 0.95, 1.0)


def _neighbours(max_size: int = 3):
    """Every data set of up to ``max_size`` values from VALUES (with repeats),
    with every record that can be added to it."""
    for size in range(1, max_size + 1):
        for data in itertools.combinations_with_replacement(VALUES, size):
            for added in VALUES:
                yield np.array(data), np.array([*data, added])


def _largest_log_ratio(probabilities) -> float:
    """Largest |log P(c | D) - log P(c | D')| over candidates and neighbours."""
    worst = 0.0
    for small, large in _neighbours():
        p, p_next = probabilities(small), probabilities(large)
        worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(p_next)))))
    return worst


@pytest.mark.parametrize("q", QUANTILES)
def test_rank_utility_has_sensitivity_max_q_one_minus_q_and_no_less(q):
    mech = PrivateQuantile(1.0, q, GRID)
    changes = [
        np.max(np.abs(mech.utilities(large) - mech.utilities(small)))
        for small, large in _neighbours()
    ]
    assert max(changes) <= mech.sensitivity + 1e-12
    # The bound is attained: a smaller sensitivity would be wrong.
    assert max(changes) == pytest.approx(max(q, 1 - q))


@pytest.mark.parametrize("q", QUANTILES)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_selection_probabilities_between_neighbours_within_e_to_the_epsilon(q, epsilon):
    mech = PrivateQuantile(epsilon, q, GRID)
    assert _largest_log_ratio(mech.probabilities) <= epsilon + 1e-9


@pytest.mark.parametrize("q", [0.05, 0.5, 0.95])
def test_negative_controls_break_the_ratio_bound(q):
    epsilon = 1.0
    doubled = PrivateQuantile(2 * epsilon, q, GRID)
    assert _largest_log_ratio(doubled.probabilities) > epsilon + 1e-6

    # Dropping the factor 2 of Thm 3.10 (the utility is not monotonic).
    mech = PrivateQuantile(epsilon, q, GRID)
    monotonic = ExponentialMechanism(epsilon, mech.sensitivity, monotonic=True)
    assert _largest_log_ratio(lambda x: monotonic.probabilities(mech.utilities(x))) > epsilon + 1e-6


def test_sensitivity_q_instead_of_max_q_one_minus_q_breaks_the_bound():
    # q = 0.05: the sensitivity q (0.05, a plausible slip) instead of 0.95 is caught.
    mech = PrivateQuantile(1.0, 0.05, GRID)
    wrong = ExponentialMechanism(1.0, 0.05)
    assert _largest_log_ratio(lambda x: wrong.probabilities(mech.utilities(x))) > 1.0 + 1e-6


@pytest.mark.statistical
@pytest.mark.parametrize("q", [0.05, 0.5, 0.95])
@pytest.mark.parametrize("law", ["uniform", "lognormal"])
def test_release_is_within_a_grid_step_of_the_true_quantile(q, law):
    grid = GeometricGrid(1e-3, 1e6, ratio=1.1)
    mech = PrivateQuantile(0.5, q, grid)
    trials = n_trials(ci=20, full=200)
    misses = 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        x = rng.uniform(0, 10, 10_000) if law == "uniform" else rng.lognormal(2.0, 1.5, 10_000)
        # the cell (c_{k-1}, c_k] holding the true quantile, and the one chosen
        cell = np.searchsorted(grid.values, np.quantile(x, q), side="left")
        misses += abs(mech.select(x, rng) - cell) > 1
    assert misses == 0


def test_values_outside_the_grid_release_its_ends():
    mech = PrivateQuantile(1.0, 0.5, GeometricGrid(1.0, 100.0, ratio=2.0))
    rng = np.random.default_rng(0)
    assert mech.release(np.full(1000, 1e-6), rng) == 1.0
    assert mech.release(np.full(1000, 3.0), rng) == 4.0  # rounded up to the grid
    assert mech.release(np.full(1000, 1e9), rng) == 100.0


@pytest.mark.parametrize(
    "values, match",
    [
        ([1.0, np.nan], "finite"),
        ([1.0, np.inf], "finite"),
        ([], "empty"),
        ([[1.0, 2.0]], "1-D"),
    ],
)
def test_bad_values_are_refused_clearly(values, match):
    mech = PrivateQuantile(1.0, 0.5, GRID)
    with pytest.raises(ValueError, match=match):
        mech.release(values, np.random.default_rng(0))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lower=0.0, upper=1.0), "lower < upper"),
        (dict(lower=2.0, upper=1.0), "lower < upper"),
        (dict(lower=1.0, upper=np.inf), "lower < upper"),
        (dict(lower=1.0, upper=2.0, ratio=1.0), "ratio"),
        (dict(lower=1e-300, upper=1e300, ratio=1.0001), "candidates"),
    ],
)
def test_bad_grids_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GeometricGrid(**kwargs)


def test_column_quantiles_and_norm_bound():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 3)) * [1.0, 10.0, 1000.0]
    grid = GeometricGrid(1e-3, 1e6, ratio=1.1)
    mechanisms = column_mechanisms(3, 3.0, 0.5, grid)
    assert all(m.epsilon == 1.0 for m in mechanisms)
    scales = private_column_quantiles(np.abs(X), mechanisms, rng)
    true = np.quantile(np.abs(X), 0.5, axis=0)
    assert np.all((true / 1.1 <= scales) & (scales <= true * 1.1**2))
    norm = private_norm_bound(X / scales, PrivateQuantile(1.0, 0.9, grid), rng)
    true_norm = np.quantile(np.linalg.norm(X / scales, axis=1), 0.9)
    assert true_norm / 1.1 <= norm <= true_norm * 1.1**2
    with pytest.raises(ValueError, match="mechanisms for"):
        private_column_quantiles(X[:, :2], mechanisms, rng)


# ------------------------------------------------------------------ the scaler


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 3)) * [1.0, 50.0, 1e4] + [0.0, 100.0, 0.0]


def test_scaler_maps_onto_minus_one_one_with_a_public_norm_bound():
    X = _data(5000)
    scaler = PrivateBoundsScaler(epsilon=1.0, center=True, random_state=0).fit(X)
    Z = scaler.transform(X)
    assert np.abs(Z).max() <= 1.0
    assert scaler.feature_norm_ == pytest.approx(np.sqrt(3))
    assert np.all(np.linalg.norm(Z, axis=1) <= scaler.feature_norm_ + 1e-12)
    # each scale within a factor 2 (the grid ratio) of the 0.95 quantile of |x - center|
    true = np.quantile(np.abs(X - scaler.center_), 0.95, axis=0)
    assert np.all((true / 2 <= scaler.scale_) & (scaler.scale_ <= true * 2))


@pytest.mark.parametrize("center", [False, True])
def test_scaler_ledger_plan_and_budget(budget_path, center):
    budget = PrivacyBudget(epsilon=1.0, delta=1e-5, path=budget_path)
    scaler = PrivateBoundsScaler(epsilon=0.3, center=center, budget=budget, random_state=0)
    plan = scaler._fit_release_plan()
    assert plan == [ApproximateDPBound(0.3, 0.0, "private feature scales (pure epsilon-DP)")]
    scaler.fit(_data())
    assert len(scaler.privacy_ledger_) == 1
    assert scaler.privacy_spent_.epsilon <= 0.3 + 1e-9
    exact = scaler._plan_releases(scaler.get_params(deep=False), PublicSizes(n_features=3))
    assert [r.to_dict() for r in exact.releases] == scaler.privacy_ledger_
    assert budget.spent().epsilon == pytest.approx(scaler.privacy_spent_.epsilon)


def test_scaler_refused_by_budget_and_bad_input_leave_it_unchanged(budget_path):
    scaler = PrivateBoundsScaler(epsilon=0.5, random_state=0).fit(_data())
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(scaler).items()}
    bad = _data()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        scaler.fit(bad)
    scaler.set_params(budget=PrivacyBudget(epsilon=0.1, delta=1e-5, path=budget_path))
    with pytest.raises(BudgetExceededError):
        scaler.fit(_data())
    scaler.set_params(budget=None)
    after = vars(scaler)
    assert before.keys() == after.keys()
    for key, value in before.items():
        assert np.array_equal(value, after[key]) if isinstance(value, np.ndarray) else True
    assert scaler.privacy_ledger_ == before["privacy_ledger_"]


def _published(scaler) -> dict:
    return {
        "scale_": tuple(scaler.scale_),
        "center_": tuple(scaler.center_),
        "feature_norm_": scaler.feature_norm_,
        "privacy_ledger_": repr(scaler.privacy_ledger_),
        "privacy_spent_": tuple(scaler.privacy_spent_),
    }


def _leaks(fit_published, data_a, data_b, seeds) -> list[str]:
    """Published values constant over seeds within each data set but different
    between the two neighbours: they depend on the data without noise."""
    a = [fit_published(data_a, s) for s in seeds]
    b = [fit_published(data_b, s) for s in seeds]
    leaks = []
    for key in a[0]:
        values_a, values_b = {p[key] for p in a}, {p[key] for p in b}
        if len(values_a) == 1 and len(values_b) == 1 and values_a != values_b:
            leaks.append(key)
    return leaks


def test_published_values_differ_between_neighbours_only_through_noise():
    X = _data(60)
    X_next = np.vstack([X, [[5.0, 1e3, 1e6]]])  # one added, extreme record
    seeds = range(12)

    def fit_published(data, seed):
        scaler = PrivateBoundsScaler(epsilon=0.5, center=True, random_state=seed).fit(data)
        return _published(scaler)

    assert _leaks(fit_published, X, X_next, seeds) == []
    # Every published value that depends on the data varies with the seed.
    scales = {fit_published(X, s)["scale_"] for s in seeds}
    assert len(scales) > 1

    # Negative control: a scale read from the data without noise is caught.
    def exact_published(data, seed):
        return {**fit_published(data, seed), "scale_": tuple(np.quantile(np.abs(data), 0.95, 0))}

    assert _leaks(exact_published, X, X_next, seeds) == ["scale_"]


def test_scaler_deletion_is_certified_and_changes_nothing_published():
    scaler = PrivateBoundsScaler(epsilon=0.2, random_state=0).fit(_data())
    scale, ledger = scaler.scale_.copy(), list(scaler.privacy_ledger_)
    scaler.set_params(epsilon=5.0)  # the report states the fit's epsilon
    scaler.delete_samples([3, "never-seen"])
    report = scaler.deletion_log_[-1]
    assert report.method == "certified"
    # group privacy: two rows deleted from a 0.2-DP release are within 0.4
    assert report.deletion_epsilon == pytest.approx(0.4) and report.deletion_delta == 0.0
    assert report.rerelease_epsilon is None and report.n_deleted == 2
    assert any("not checked" in note for note in report.notes)
    assert np.array_equal(scaler.scale_, scale) and scaler.privacy_ledger_ == ledger
    for bad in ([], [1, 1], [[1, 2]]):
        with pytest.raises(UnlearningError):
            scaler.delete_samples(bad)
    assert len(scaler.deletion_log_) == 1
    scaler.delete_samples(7)  # the group grows across calls
    assert scaler.deletion_log_[-1].deletion_epsilon == pytest.approx(0.6)
    assert scaler.n_deleted_ == 3


def test_a_request_a_later_step_refuses_leaves_the_scaler_untouched():
    """The scaler stores no ids and accepts any; the pipeline checks the ids
    against the steps that keep them before any step deletes."""
    X = _data(500)
    pipe = make_pipeline(
        PrivateBoundsScaler(epsilon=0.5, random_state=0),
        DPLinearRegression(epsilon=2.0, feature_norm=np.sqrt(3), target_bound=5.0, random_state=0),
    ).fit(X, X[:, 0])
    delete_samples(pipe, [2], positions=True)
    for refused in ([10_000], [2], [5, 5]):  # unknown, already deleted, repeated
        with pytest.raises(UnlearningError):
            delete_samples(pipe, refused, positions=True)
    assert [len(step.deletion_log_) for step in (pipe[0], pipe[-1])] == [1, 1]
    assert pipe[0].n_deleted_ == 1


def test_scaler_in_a_pipeline_deletes_completely():
    X = _data(2000)
    y = X[:, 0] - X[:, 1] / 50
    pipe = make_pipeline(
        PrivateBoundsScaler(epsilon=0.5, center=True, random_state=0),
        DPLinearRegression(epsilon=2.0, feature_norm=np.sqrt(3), target_bound=5.0, random_state=0),
    ).fit(X, y)
    assert unlearnable_steps(pipe) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnreliableBoundsWarning)  # says so, from a noisy count
        delete_samples(pipe, [0, 5], positions=True)
    assert pipe[0].deletion_log_[-1].method == "certified"
    assert pipe[-1].deletion_log_[-1].n_deleted == 2
    assert not any("INCOMPLETE" in n for n in pipe[0].deletion_log_[-1].notes)


def test_scaler_round_trips_through_pickle_and_skops(tmp_path):
    X = _data()
    scaler = PrivateBoundsScaler(epsilon=0.5, center=True, random_state=0).fit(X)
    scaler.delete_samples([1])
    for loaded in (
        pickle.loads(pickle.dumps(scaler)),
        _skops_round_trip(scaler, tmp_path / "scaler.skops"),
    ):
        assert np.array_equal(loaded.transform(X), scaler.transform(X))
        assert loaded.privacy_ledger_ == scaler.privacy_ledger_
        assert loaded.deletion_log_ == scaler.deletion_log_


def _skops_round_trip(estimator, path):
    io.save(estimator, path)
    return io.load(path)


@pytest.mark.parametrize("value", [1e200, 1.7e308, -1.7e308])
def test_one_extreme_finite_row_raises_and_warns_nothing(value):
    """Whether a fit fails or warns must not depend on one row's magnitude
    (before: a norm overflowing to inf raised 'values must be finite' in the
    logistic's bound, and the linear rescaling warned of an overflow)."""
    from sklearn_dpu.linear_model import DPLinearRegression, DPLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = X[:, 0]
    X[0, 0] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnreliableBoundsWarning)  # says so, from a noisy count
        DPLogisticRegression(feature_norm="auto", random_state=0).fit(X, y > 0)
        DPLinearRegression(feature_norm="auto", target_bound="auto", random_state=0).fit(X, y)
        PrivateBoundsScaler(random_state=0).fit(X)
        assert np.isfinite(
            private_norm_bound(X, PrivateQuantile(1.0, 0.5, GeometricGrid(1e-3, 1e6)), rng)
        )


def test_a_refusal_of_the_sgd_after_a_scaler_leaves_both_logs_unchanged():
    """The SGD with fixed batches refuses to go below batch_size rows: the
    pipeline asks it (through _check_deletable) before the scaler logs."""
    from sklearn_dpu.linear_model import UnlearnableSGDClassifier

    X = _data(40)
    pipe = make_pipeline(
        PrivateBoundsScaler(random_state=0),
        UnlearnableSGDClassifier(
            epsilon=np.inf, batch_sampling="fixed", batch_size=35, max_iter=5, random_state=0
        ),
    ).fit(X, X[:, 0] > 0)
    with pytest.raises(UnlearningError, match="batch_sampling='fixed'"):
        delete_samples(pipe, list(range(10)), positions=True)
    assert pipe[0].deletion_log_ == [] and pipe[-1].deletion_log_ == []


def test_counts_summed_over_blocks_give_the_same_utilities_and_release():
    # The rank utility reads the values only through #{x <= c} per grid value:
    # counted per block and summed (as on Dask workers), it is the same.
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.lognormal(size=999), [0.0, 1e300, 5e-3]])
    mech = PrivateQuantile(0.7, 0.9, GeometricGrid(1e-2, 1e2, ratio=1.2))
    counts = sum(
        np.searchsorted(np.sort(block), mech.grid.values, side="right")
        for block in np.array_split(x, 7)
    )
    np.testing.assert_array_equal(mech.utilities_of_counts(counts, x.size), mech.utilities(x))
    assert mech.release_counts(counts, x.size, np.random.default_rng(3)) == mech.release(
        x, np.random.default_rng(3)
    )


def test_dask_column_quantiles_and_norm_bound_equal_the_in_memory_ones():
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(8).normal(size=(3000, 3)) * [1.0, 30.0, 0.1]
    grid = GeometricGrid(1e-3, 1e3, ratio=1.1)
    mechs = column_mechanisms(3, 1.0, 0.5, grid)
    Xd = da.from_array(np.abs(X), chunks=(400, 2))
    for seed in range(3):
        np.testing.assert_array_equal(
            private_column_quantiles(Xd, mechs, np.random.default_rng(seed)),
            private_column_quantiles(np.abs(X), mechs, np.random.default_rng(seed)),
        )
        norm = PrivateQuantile(0.5, 0.5, grid)
        assert private_norm_bound(
            da.from_array(X, chunks=500), norm, np.random.default_rng(seed)
        ) == private_norm_bound(X, norm, np.random.default_rng(seed))


def test_scaler_keeps_float32_and_computes_in_float64():
    """float32 in, float32 out (as PublicBoundsScaler and StandardScaler),
    the same values as the float64 transform rounded once."""
    X = np.random.default_rng(0).normal(size=(500, 3))
    scaler = PrivateBoundsScaler(epsilon=1.0, random_state=0).fit(X)
    out = scaler.transform(X.astype(np.float32))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(
        out,
        ((X.astype(np.float32) - scaler.center_) / scaler.scale_).clip(-1, 1).astype(np.float32),
    )
