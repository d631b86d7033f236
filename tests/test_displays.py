"""The displays draw exactly the values they are built from, and refuse bad input."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

from sklearn_dpu.inspection import (
    BudgetTimelineDisplay,
    DeletionCostDisplay,
    PrivacyUtilityDisplay,
)
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.unlearning import DeletionReport


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 3))
    y = X @ [0.5, -0.3, 0.2] + 0.05 * rng.normal(size=300)
    return X[:200], y[:200], X[200:], y[200:]


def _linear(**params):
    return DPLinearRegression(feature_norm=2.0, target_bound=1.5, **params)


# PrivacyUtilityDisplay ------------------------------------------------------


def test_privacy_utility_from_estimator_plots_the_scores_it_measured(data):
    X_train, y_train, X_test, y_test = data
    display = PrivacyUtilityDisplay.from_estimator(
        _linear(),
        X_train,
        y_train,
        X_test,
        y_test,
        epsilons=[0.1, 1.0, 10.0],
        n_repeats=3,
        non_private_estimator=LinearRegression(),
        random_state=0,
    )
    assert display.scores.shape == (3, 3)
    np.testing.assert_array_equal(display.line_.get_xdata(), [0.1, 1.0, 10.0])
    np.testing.assert_array_equal(display.line_.get_ydata(), np.median(display.scores, axis=1))
    # The repeats drew different noise: fresh seeds per fit.
    assert np.all(np.ptp(display.scores, axis=1) > 0)
    expected = LinearRegression().fit(X_train, y_train).score(X_test, y_test)
    assert display.non_private_score == pytest.approx(expected)
    assert display.reference_line_.get_ydata()[0] == pytest.approx(expected)
    assert display.spread_ is not None
    assert display.ax_.get_xscale() == "log"
    assert display.ax_.get_xlabel() == "epsilon"
    assert display.ax_.get_ylabel() == "test score"
    assert display.line_.get_label() == "DPLinearRegression"
    assert display.figure_ is display.ax_.figure
    # Utility grows with epsilon on this easy problem.
    assert display.line_.get_ydata()[-1] > display.line_.get_ydata()[0]
    # Seeded: the same figure again.
    again = PrivacyUtilityDisplay.from_estimator(
        _linear(),
        X_train,
        y_train,
        X_test,
        y_test,
        epsilons=[0.1, 1.0, 10.0],
        n_repeats=3,
        random_state=0,
    )
    np.testing.assert_array_equal(again.scores, display.scores)


def test_privacy_utility_on_a_pipeline_charges_the_budget_per_fit(data, budget_path):
    X_train, y_train, X_test, y_test = data
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), _linear(budget=budget))
    display = PrivacyUtilityDisplay.from_estimator(
        pipe,
        X_train,
        y_train,
        X_test,
        y_test,
        epsilons=[0.5, 1.0],
        n_repeats=2,
        param_name="dplinearregression__epsilon",
        scoring="neg_mean_squared_error",
    )
    assert len(budget.charges()) == 4
    assert display.ax_.get_ylabel() == "test neg_mean_squared_error"
    assert np.all(display.scores <= 0)


def test_privacy_utility_refuses_bad_input(data):
    X_train, y_train, X_test, y_test = data
    with pytest.raises(ValueError, match="no parameter 'epsilon'"):
        PrivacyUtilityDisplay.from_estimator(
            make_pipeline(_linear()), X_train, y_train, X_test, y_test, epsilons=[1.0]
        )
    for epsilons in ([], [0.0, 1.0], [1.0, np.inf], [[1.0]]):
        with pytest.raises(ValueError, match="epsilons"):
            PrivacyUtilityDisplay.from_scores(epsilons, [0.5] * max(len(epsilons), 1))
    with pytest.raises(ValueError, match="increasing"):
        PrivacyUtilityDisplay.from_scores([1.0, 0.1], [0.5, 0.5])
    with pytest.raises(ValueError, match="one row per epsilon"):
        PrivacyUtilityDisplay.from_scores([0.1, 1.0], [[0.5, 0.5]])
    with pytest.raises(ValueError, match="n_repeats"):
        PrivacyUtilityDisplay.from_estimator(
            _linear(), X_train, y_train, X_test, y_test, epsilons=[1.0], n_repeats=0
        )


def test_privacy_utility_from_scores_draws_on_a_given_axis():
    fig, ax = plt.subplots()
    display = PrivacyUtilityDisplay.from_scores(
        [0.1, 1.0], [0.2, 0.8], name="mine", ax=ax, score_name="accuracy"
    )
    assert display.ax_ is ax and display.figure_ is fig
    assert display.spread_ is None and display.reference_line_ is None
    np.testing.assert_array_equal(display.line_.get_ydata(), [0.2, 0.8])
    assert display.line_.get_label() == "mine"
    assert ax.get_ylabel() == "accuracy"


# DeletionCostDisplay --------------------------------------------------------


def test_deletion_cost_plots_the_reported_wall_times(data):
    X_train, y_train, _, _ = data
    reg = _linear(random_state=0).fit(X_train, y_train)
    reg.delete_samples([0]).delete_samples([1, 2, 3])
    display = DeletionCostDisplay.from_estimator(reg, retrain_time=0.5)
    times = [r.cost.wall_time_s for r in reg.deletion_log_]
    np.testing.assert_array_equal(display.line_.get_xdata(), [1, 2])
    np.testing.assert_array_equal(display.line_.get_ydata(), times)
    np.testing.assert_array_equal(display.n_deleted, [1, 3])
    assert display.methods == ("exact", "exact")
    assert display.retrain_line_.get_ydata()[0] == 0.5
    assert display.ax_.get_yscale() == "log"
    assert display.ax_.get_ylabel() == "seconds per call"
    assert display.line_.get_label() == "DPLinearRegression"
    display.figure_.canvas.draw()
    ticks = [t for t in display.ax_.get_xticks() if 1 <= t <= 2]
    assert ticks and all(float(t).is_integer() for t in ticks)  # calls: no 1.5

    per_sample = DeletionCostDisplay.from_reports(reg.deletion_log_, per_sample=True)
    np.testing.assert_allclose(per_sample.line_.get_ydata(), np.divide(times, [1, 3]))
    assert per_sample.retrain_line_ is None
    assert per_sample.ax_.get_ylabel() == "seconds per deleted sample"

    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), _linear(random_state=0))
    pipe.fit(X_train, y_train)
    pipe[-1].delete_samples([5])
    assert len(DeletionCostDisplay.from_estimator(pipe).line_.get_ydata()) == 1


def test_deletion_cost_refuses_bad_input(data):
    X_train, y_train, _, _ = data
    with pytest.raises(ValueError, match="no deletion_log_"):
        DeletionCostDisplay.from_estimator(_linear())
    reg = _linear(random_state=0).fit(X_train, y_train)
    with pytest.raises(ValueError, match="no deletion reports"):
        DeletionCostDisplay.from_estimator(reg)
    with pytest.raises(TypeError, match="not a DeletionReport"):
        DeletionCostDisplay.from_reports([{"wall_time_s": 1.0}])
    untimed = DeletionReport(n_deleted=1, method="exact", guarantee="exact")
    with pytest.raises(ValueError, match="wall_time_s"):
        DeletionCostDisplay.from_reports([untimed])
    reg.delete_samples([0])
    for bad in (0.0, -1.0, np.nan, "1s", True):
        with pytest.raises(ValueError, match="retrain_time"):
            DeletionCostDisplay.from_estimator(reg, retrain_time=bad)
    with pytest.raises(ValueError, match="n_deleted"):
        DeletionCostDisplay(wall_times=[0.1, 0.2], n_deleted=[1])


# BudgetTimelineDisplay ------------------------------------------------------


def test_budget_timeline_plots_the_ledger(data, budget_path):
    X_train, y_train, _, _ = data
    budget = PrivacyBudget(epsilon=4.0, delta=1e-5, path=budget_path)
    for epsilon in (0.5, 1.0, 0.5):
        _linear(epsilon=epsilon, budget=budget, random_state=0).fit(X_train, y_train)
    display = BudgetTimelineDisplay.from_budget(budget)
    charges = budget.charges()
    np.testing.assert_array_equal(display.line_.get_xdata(), [0, 1, 2, 3])
    np.testing.assert_array_equal(
        display.line_.get_ydata(), [0.0, *(c.total_epsilon for c in charges)]
    )
    assert display.line_.get_ydata()[-1] == pytest.approx(budget.spent().epsilon)
    assert display.cap_line_.get_ydata()[0] == 4.0
    assert display.descriptions == tuple(c.description for c in charges)
    assert display.ax_.get_ylabel() == "epsilon spent (delta = 1e-05)"
    assert display.ax_.get_xlabel() == "charges"
    assert display.line_.get_drawstyle() == "steps-post"


def test_budget_timeline_of_an_empty_budget_and_bad_input(budget_path):
    display = BudgetTimelineDisplay.from_budget(PrivacyBudget(1.0, 1e-5, path=budget_path))
    np.testing.assert_array_equal(display.line_.get_ydata(), [0.0])
    with pytest.raises(TypeError, match="PrivacyBudget"):
        BudgetTimelineDisplay.from_budget(str(budget_path))
    with pytest.raises(ValueError, match="non-decreasing"):
        BudgetTimelineDisplay(total_epsilon=[1.0, 0.5], epsilon_cap=2.0)
    with pytest.raises(ValueError, match="epsilon_cap"):
        BudgetTimelineDisplay(total_epsilon=[1.0], epsilon_cap=0.0)
    with pytest.raises(ValueError, match="descriptions"):
        BudgetTimelineDisplay(total_epsilon=[1.0], epsilon_cap=2.0, descriptions=[])


def test_privacy_utility_refuses_before_any_fit_what_the_budget_cannot_afford(data, budget_path):
    """All the display's fits are planned and checked first (before: the
    first fits were charged, then the display failed with no figure)."""
    from sklearn_dpu.exceptions import BudgetExceededError

    X_train, y_train, X_test, y_test = data
    budget = PrivacyBudget(epsilon=1.0, delta=1e-5, path=budget_path)
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), _linear(budget=budget))
    with pytest.raises(BudgetExceededError):
        PrivacyUtilityDisplay.from_estimator(
            pipe,
            X_train,
            y_train,
            X_test,
            y_test,
            epsilons=[0.5, 1.0],
            n_repeats=2,
            param_name="dplinearregression__epsilon",
        )
    assert budget.charges() == []
    # Within the cap: every fit runs and is charged.
    PrivacyUtilityDisplay.from_estimator(
        pipe,
        X_train,
        y_train,
        X_test,
        y_test,
        epsilons=[0.25],
        n_repeats=2,
        param_name="dplinearregression__epsilon",
    )
    assert len(budget.charges()) == 2


@pytest.mark.parametrize(
    "spent", [[1.0, 1.47], [0.2, 0.4, 2.9], [2.5], [0.1, 0.2, 0.3], [0.05] * 8]
)
def test_budget_timeline_legend_leaves_every_point_visible(spent):
    display = BudgetTimelineDisplay(total_epsilon=spent, epsilon_cap=3.0).plot()
    display.figure_.canvas.draw()
    box = display.ax_.get_legend().get_window_extent()
    points = display.ax_.transData.transform(
        np.column_stack([display.line_.get_xdata(), display.line_.get_ydata()])
    )
    covered = [box.contains(x, y) for x, y in points]
    assert not any(covered), f"the legend covers points {np.flatnonzero(covered).tolist()}"
