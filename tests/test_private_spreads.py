"""Spreads released off the center (feature scales and the target's
half-range of DPLinearRegression's estimated bounds).

A spread that counted the rows at the center was the grid's lowest value for
any feature with more than half of its rows there (a 0/1 or one-hot column, a
mostly-zero count, a standardized binary column); rows were then clipped at a
tiny fraction of their distance and the linear model extrapolated by its
inverse (R^2 of -600 with a 0/1 column whose ones are 30% of the rows). The
privacy of the release is checked exactly, as for the quantiles, with rows at,
near and off the center.
"""

import itertools
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_regression
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split

from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.privacy.quantiles import (
    GeometricGrid,
    PrivateQuantile,
    column_mechanisms,
    private_column_quantiles,
    private_column_spreads,
    spread_utilities,
)

GRID = GeometricGrid(0.25, 8.0, ratio=2.0)  # 0.25 .. 8, 6 candidates
CENTER, RESOLUTION = 1.0, 0.5
# at the center, in its cell, on its lower edge and just below it, just above
# the center, off it (also within the first scale cell), and beyond the grid
VALUES = (1.0, 0.7, 0.5, 0.5 - 1e-12, 1 + 1e-12, 1.1, 1.3, 0.0, 4.0, -30.0)
AT_CENTER = (1.0, 0.7, 0.5)


def _neighbours(max_size: int = 3):
    for size in range(1, max_size + 1):
        for data in itertools.combinations_with_replacement(VALUES, size):
            for added in VALUES:
                yield np.array(data), np.array([*data, added])


def _largest_log_ratio(mech, epsilon=None) -> float:
    selection = (
        mech._selection if epsilon is None else type(mech._selection)(epsilon, mech.sensitivity)
    )
    worst = 0.0
    for small, large in _neighbours():
        p, p_next = (
            selection.probabilities(spread_utilities(mech, x, CENTER, RESOLUTION))
            for x in (small, large)
        )
        worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(p_next)))))
    return worst


@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, 0.95])
def test_rows_at_the_center_change_nothing_and_the_others_max_q_one_minus_q(q):
    mech = PrivateQuantile(1.0, q, GRID)
    changes = [
        np.max(
            np.abs(
                spread_utilities(mech, large, CENTER, RESOLUTION)
                - spread_utilities(mech, small, CENTER, RESOLUTION)
            )
        )
        for small, large in _neighbours()
    ]
    assert max(changes) <= mech.sensitivity + 1e-12
    assert max(changes) == pytest.approx(max(q, 1 - q))


@pytest.mark.parametrize("q", [0.3, 0.5, 0.95])
def test_a_row_at_the_center_changes_no_utility(q):
    mech = PrivateQuantile(1.0, q, GRID)
    for small, _ in _neighbours():
        for added in AT_CENTER:
            np.testing.assert_array_equal(
                spread_utilities(mech, [*small, added], CENTER, RESOLUTION),
                spread_utilities(mech, small, CENTER, RESOLUTION),
            )


@pytest.mark.parametrize("q", [0.3, 0.5, 0.95])
@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_selection_probabilities_between_neighbours_within_e_to_the_epsilon(q, epsilon):
    assert _largest_log_ratio(PrivateQuantile(epsilon, q, GRID)) <= epsilon + 1e-9


@pytest.mark.parametrize("q", [0.3, 0.5, 0.95])
def test_negative_control_twice_the_epsilon_breaks_the_ratio_bound(q):
    assert _largest_log_ratio(PrivateQuantile(1.0, q, GRID), 2.0) > 1.0 + 1e-6


def test_the_release_is_the_selection_from_these_utilities():
    X = np.array([[1.0, 0.0], [1.0, 3.0], [1.2, 0.0], [3.0, 0.0], [0.0, 2.0]])
    center, resolution = np.array([1.0, 0.0]), np.array([0.5, 0.0])
    mechs = column_mechanisms(2, 2.0, 0.5, GRID)
    for seed in range(20):
        rng, expected_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        expected = [
            GRID.values[
                m._selection.select(spread_utilities(m, X[:, j], center[j], r), expected_rng)
            ]
            for j, (m, r) in enumerate(zip(mechs, resolution, strict=True))
        ]
        np.testing.assert_array_equal(
            private_column_spreads(X, center, resolution, mechs, rng), expected
        )


def test_without_rows_at_the_center_the_release_is_the_plain_quantile():
    # continuous data: no row at the center, the same bits as before
    X = np.random.default_rng(1).normal(size=(2000, 3)) * [1.0, 30.0, 0.1]
    center = np.array([0.5, -0.25, 2.0])
    grid = GeometricGrid(1e-3, 1e3, ratio=1.25)
    mechs = column_mechanisms(3, 1.0, 0.5, grid)
    for seed in range(5):
        np.testing.assert_array_equal(
            private_column_spreads(X, center, np.zeros(3), mechs, np.random.default_rng(seed)),
            private_column_quantiles(np.abs(X - center), mechs, np.random.default_rng(seed)),
        )


def test_dask_spreads_equal_the_in_memory_ones():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.random(3000) < 0.2, rng.normal(size=3000), np.zeros(3000)])
    center, resolution = np.array([0.0, 0.01, 0.0]), np.array([0.0, 0.02, 0.0])
    mechs = column_mechanisms(3, 1.0, 0.5, GeometricGrid(1e-3, 1e3, ratio=1.1))
    for seed in range(3):
        np.testing.assert_array_equal(
            private_column_spreads(
                da.from_array(X, chunks=(400, 2)),
                center,
                resolution,
                mechs,
                np.random.default_rng(seed),
            ),
            private_column_spreads(X, center, resolution, mechs, np.random.default_rng(seed)),
        )


def test_cell_widths_are_the_resolution_of_a_release():
    grid = GeometricGrid(1.0, 8.0, ratio=2.0, signed=True)  # -8 -4 -2 -1 0 1 2 4 8
    np.testing.assert_array_equal(grid.cell_widths([-8.0, -4.0, 0.0, 1.0, 8.0]), [4, 4, 1, 1, 4])
    # any value: the width of the cell that holds it
    np.testing.assert_array_equal(grid.cell_widths([-9.0, 3.0, 0.5, 20.0]), [4, 2, 1, 4])


def _binary_data(share_of_ones, seed=0):
    rng = np.random.default_rng(seed)
    X, y = make_regression(n_samples=20000, n_features=5, noise=10, random_state=seed)
    flag = (rng.random(20000) < share_of_ones).astype(float)
    return np.column_stack([X, flag]), y + 20 * flag


@pytest.mark.parametrize("share_of_ones", [0.3, 0.7])
def test_a_zero_one_column_is_scaled_by_its_values_not_by_the_grid(share_of_ones):
    # Before: scale 0.003 (ones a minority) or 0.028 (a majority, the center
    # 1.0078), R^2 -400 to -1500 at epsilon 1, worse at 10.
    X, y = _binary_data(share_of_ones)
    Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
    best = LinearRegression().fit(Xtr, ytr).score(Xte, yte)
    for seed in range(3):
        model = DPLinearRegression(epsilon=10, random_state=seed).fit(Xtr, ytr)
        assert model.feature_scale_[-1] >= 1.0
        assert model.score(Xte, yte) > best - 0.01


def test_accuracy_on_diabetes_does_not_fall_as_epsilon_grows():
    # Its 'sex' column takes two (standardized) values: at epsilon 100 and
    # 1000 fits gave R^2 from -7 to -27 before.
    X, y = load_diabetes(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
    best = LinearRegression().fit(Xtr, ytr).score(Xte, yte)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = [
            DPLinearRegression(epsilon=eps, random_state=seed).fit(Xtr, ytr).score(Xte, yte)
            for eps in (100, 1000)
            for seed in range(3)
        ]
    assert min(scores) > best - 0.05


def test_a_mostly_zero_target_keeps_its_range():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20000, 3))
    y = np.where(rng.random(20000) < 0.6, 0.0, 10 + 5 * X[:, 0])
    model = DPLinearRegression(epsilon=10, random_state=0).fit(X, y)
    low, high = model.target_interval_
    assert high >= 10  # the nonzero targets are not clipped to about 0
    assert model.score(X, y) > LinearRegression().fit(X, y).score(X, y) - 0.02


def _offsets(n, rng):
    # features that vary by far less than their offset, a target too
    X = np.column_stack(
        [rng.integers(2015, 2021, n), 40.70 + 0.1 * rng.random(n), 1000 + 10 * rng.normal(size=n)]
    ).astype(float)
    y = 290 + 2 * (X[:, 0] - 2017.5) + 100 * (X[:, 1] - 40.75) + 0.3 * (X[:, 2] - 1000)
    return X, y + rng.normal(size=n)


def test_offset_features_and_target_keep_their_resolution():
    # The rows in the center's cell leave a feature's spread: with the
    # features' center grid at 1% (a cell of 20 years, 0.4 degrees), years
    # and latitudes lost their rows and R^2 fell to 0.25 and 0.19 (0.93
    # before); with the target's 9% cells as its band, an offset target's
    # range tripled (R^2 0.79 -> -0.68).
    rng = np.random.default_rng(4)
    X, y = _offsets(20000, rng)
    X_test, y_test = _offsets(5000, rng)
    best = LinearRegression().fit(X, y).score(X_test, y_test)
    for seed in range(3):
        model = DPLinearRegression(epsilon=10, random_state=seed).fit(X, y)
        assert model.score(X_test, y_test) > best - 0.05
        low, high = model.target_interval_
        assert high - low < 40  # y is 290 +- 8: its range stays near its spread


def test_rows_just_above_the_center_are_off_it():
    # The band is the cell the released center stands for, [c - w, c]: a row
    # above c, however close, is off the center (a symmetric band is caught).
    mech = PrivateQuantile(1.0, 0.5, GRID)
    empty = spread_utilities(mech, [4.0], CENTER, RESOLUTION)
    for above in (1 + 1e-12, 1.1, 1.3):
        assert not np.array_equal(spread_utilities(mech, [4.0, above], CENTER, RESOLUTION), empty)
    for at in AT_CENTER:
        np.testing.assert_array_equal(spread_utilities(mech, [4.0, at], CENTER, RESOLUTION), empty)


def test_the_bounds_leave_out_the_cell_of_the_released_center(monkeypatch):
    # End to end: draw passes the released centers and their cells' widths
    # (public values), never data-derived ones, and floors the spreads.
    from sklearn_dpu.linear_model import _linear_bounds

    seen = {}
    real = _linear_bounds.private_column_spreads

    def spy(X, center, resolution, mechanisms, rng):
        seen.setdefault("calls", []).append((np.array(center), np.array(resolution)))
        return real(X, center, resolution, mechanisms, rng)

    monkeypatch.setattr(_linear_bounds, "private_column_spreads", spy)
    rng = np.random.default_rng(5)
    # the second feature lies within one cell of its center: no row off it
    X = np.column_stack([rng.normal(size=20000), 1000.0 + 0.01 * rng.random(20000)])
    y = X[:, 0] + rng.normal(size=20000)
    model = DPLinearRegression(epsilon=10, random_state=0).fit(X, y)
    (center, resolution), (target_center, target_resolution) = seen["calls"]
    np.testing.assert_array_equal(center, model.feature_center_)
    grid = _linear_bounds.AUTO_BOUNDS.center_grid()
    np.testing.assert_array_equal(resolution, grid.cell_widths(model.feature_center_))
    assert target_resolution.tolist() == [0.0]  # the target: exact ties only
    assert target_center[0] == pytest.approx(np.mean(model.target_interval_), rel=1e-12)
    assert model.feature_scale_[1] >= 3 * resolution[1]  # the floor
