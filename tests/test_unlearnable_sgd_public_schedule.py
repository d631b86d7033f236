"""UnlearnableSGDClassifier: fixed batches only without a privacy target, a
public ``schedule_size`` that makes a fit's cost exact (budgeted searches), and
deletion reports that show what they released."""

import dataclasses
import pickle

import numpy as np
import pytest
from dp_accounting import dp_event

from sklearn_dpu import BudgetExceededError, PrivacyBudget, UnlearnableSGDClassifier
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.model_selection._private_search import _TRAIN
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.ledger import ApproximateDPBound, Release, privacy_spent, worst_case_events
from sklearn_dpu.privacy.mechanisms import GaussianSteps

from ._doubles import Unreadable
from ._sgd_coupling_controls import as_format_2

_rng = np.random.default_rng(5)
X = _rng.normal(size=(1200, 4)) / 2.0
Y = (X @ np.array([1.0, -1.0, 0.5, 2.0]) > 0).astype(int)
# A cheap public schedule: few steps, a large noise.
CHEAP = dict(schedule_size=1000, max_iter=5, batch_size=100, epsilon=1.0)


@pytest.mark.parametrize("epsilon", [1.0, 1e6])
def test_fixed_batches_are_refused_with_a_privacy_target_before_reading_data(epsilon):
    # Before: fixed batches were charged at rate m / n_ref with n_ref from the
    # noised count, while the true rate is m / n (above it whenever n~ > n).
    est = UnlearnableSGDClassifier(batch_sampling="fixed", epsilon=epsilon, batch_size=30)
    with pytest.raises(ValueError, match=r"epsilon=np.inf"):
        est.fit(Unreadable(X.shape), Y)
    with pytest.raises(ValueError, match=r"epsilon=np.inf"):
        est.partial_fit(Unreadable(X.shape), Y, classes=[0, 1])
    with pytest.raises(ValueError, match=r"epsilon=np.inf"):
        est._fit_release_plan()
    assert not hasattr(est, "coef_")
    # Without a target the thesis's algorithm is offered, and says it is not private.
    fitted = UnlearnableSGDClassifier(
        batch_sampling="fixed", epsilon=np.inf, batch_size=30, random_state=0
    ).fit(X, Y)
    assert fitted.privacy_spent_.epsilon == np.inf


def test_schedule_size_makes_the_fit_an_exact_plan_and_edits_keep_the_schedule():
    est = UnlearnableSGDClassifier(random_state=0, **CHEAP)
    plan = est._fit_release_plan()
    assert plan and all(isinstance(p, Release) for p in plan)  # no count, no bound
    est.fit(X, Y)
    assert [Release.from_dict(e).event for e in est.privacy_ledger_] == [p.event for p in plan]
    assert len(est.privacy_ledger_) == 1  # the run only: no count is released
    assert est.privacy_spent_.epsilon <= 1.0
    state = est.unlearning_state_
    assert state.inclusion_prob == pytest.approx(100 / 1000)  # m / schedule_size
    schedule = (est.n_iter_, est.batch_size_, est.noise_multiplier_, state.schedule.bucket)
    est.delete_samples(range(300))  # would leave the size class of a noised count
    est.partial_fit(X[:5], Y[:5], sample_id=["a", "b", "c", "d", "e"])
    assert (est.n_iter_, est.batch_size_, est.noise_multiplier_, state.schedule.bucket) == schedule
    assert not any(r.reason.endswith("full refit") for r in est.deletion_log_)
    assert not any(r.refit for r in est.insertion_log_)


def test_schedule_size_publishes_nothing_that_depends_on_n():
    published = set()
    for n in (5792, 5793):  # different size classes of the exact count
        rows = np.resize(X, (n, 4))
        labels = np.resize(Y, n)
        est = UnlearnableSGDClassifier(random_state=0, **CHEAP).fit(rows, labels)
        published.add(
            (est.n_iter_, est.batch_size_, est.noise_multiplier_, est.privacy_spent_.epsilon)
        )
    assert len(published) == 1


def test_schedule_size_with_auto_steps_is_planned_exactly_from_the_shape(budget_path):
    budget = PrivacyBudget(epsilon=5.0, delta=1e-5, path=budget_path)
    est = UnlearnableSGDClassifier(schedule_size=1000, epsilon=1.0, budget=budget)
    # Without the data, "auto" steps depend on the unknown number of features.
    assert isinstance(est._fit_release_plan()[-1], ApproximateDPBound)
    est.fit(X, Y)  # the fit plans exactly from the public shape
    assert budget.spent().epsilon == pytest.approx(est.privacy_spent_.epsilon)


def test_budgeted_search_over_a_public_schedule_runs_and_charges_its_plan(budget_path):
    # Before: each SGD fit was an (0.95 eps, 0.9 delta) bound; two of them use
    # 1.8 delta, so every budgeted search over >= 2 candidates was refused.
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    base = UnlearnableSGDClassifier(**CHEAP)
    grid = {"alpha": [1e-4, 1e-3, 1e-2]}
    search = PrivateGridSearch(base, grid, budget=budget, random_state=0).fit(X, Y)
    plans = [
        dataclasses.replace(r, chunks=(_TRAIN, _TRAIN))
        for value in grid["alpha"]
        for r in UnlearnableSGDClassifier(**CHEAP, alpha=value)._fit_release_plan()
    ]
    expected = epsilon_spent(worst_case_events([*plans, search._selection_release()], 1e-5), 1e-5)
    assert len(budget.history()) == 1
    assert budget.spent().epsilon == pytest.approx(expected)
    assert budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)


def test_can_afford_several_cheap_fits_with_a_public_schedule(budget_path):
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    assert budget.can_afford(UnlearnableSGDClassifier(**CHEAP), 5)
    # Without it, two approximate bounds exceed the budget's delta.
    assert not budget.can_afford(UnlearnableSGDClassifier(epsilon=0.01), 2)


def test_a_refused_search_says_to_set_schedule_size(budget_path):
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    search = PrivateGridSearch(
        UnlearnableSGDClassifier(epsilon=0.5), {"alpha": [1e-4, 1e-3]}, budget=budget
    )
    with pytest.raises(BudgetExceededError, match="schedule_size"):
        search.fit(Unreadable(X.shape), Y)
    assert budget.history() == []


def test_a_deletion_that_tests_the_reserve_reports_its_cost(budget_path):
    # Before: the model was unchanged, the edit's ledger entry raised
    # privacy_spent_ and was charged, yet rerelease_epsilon was None.
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    est = UnlearnableSGDClassifier(epsilon=1.0, budget=budget, random_state=0)
    for k in range(3):
        est.partial_fit(X[400 * k : 400 * (k + 1)], Y[400 * k : 400 * (k + 1)], classes=[0, 1])
    found = False
    for start in range(0, 200, 5):
        coef, size = est.coef_.copy(), len(est.privacy_ledger_)
        est.delete_samples(range(start, start + 5))
        report = est.deletion_log_[-1]
        if len(est.privacy_ledger_) > size and np.array_equal(coef, est.coef_):
            found = True
            break
        assert (report.rerelease_epsilon is None) == (len(est.privacy_ledger_) == size)
    assert found
    added = privacy_spent(est.privacy_ledger_[-1:], 1e-5).epsilon
    assert report.rerelease_epsilon == pytest.approx(added) and added > 0
    assert budget.charges()[-1].epsilon == pytest.approx(added)
    assert "re-release cost" in report.summary() and "reserve" in report.reason


def test_a_model_saved_before_schedule_size_existed_loads_and_edits(monkeypatch):
    est = UnlearnableSGDClassifier(random_state=0, max_iter=5, batch_size=100).fit(X, Y)
    as_format_2(est, monkeypatch)
    del est.__dict__["schedule_size"]  # as pickled by the previous release
    del est.unlearning_state_.frozen_params["schedule_size"]
    blob = pickle.dumps(est)
    monkeypatch.undo()
    loaded = pickle.loads(blob)
    assert loaded.edit_ledger_.params.schedule_size is None
    assert loaded.get_params()["schedule_size"] is None
    loaded.delete_samples([1, 2])
    loaded.partial_fit(X[:1], Y[:1], sample_id=["new"])


def test_fixed_batches_are_never_accounted_even_with_a_public_schedule():
    # A reviewer's reproduction: fixed batches draw m of the real n rows, so no
    # public size bounds their rate; with schedule_size and a noise multiplier
    # the run used to be charged at rate m / schedule_size (eps 0.0014 where
    # the same argument at the true rate gives 1.48).
    import math

    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    params = dict(
        batch_sampling="fixed",
        epsilon=np.inf,
        noise_multiplier=5.0,
        max_iter=10,
        batch_size=50,
        schedule_size=100_000,
        random_state=0,
    )
    est = UnlearnableSGDClassifier(**params).fit(X, y)
    assert math.isinf(est.privacy_spent_.epsilon)
    budget = PrivacyBudget(0.01, 1e-5)
    with pytest.raises(BudgetExceededError):
        UnlearnableSGDClassifier(**params, budget=budget).fit(X, y)
    assert budget.spent().epsilon == 0.0


def test_a_run_at_rate_one_keeps_its_poisson_subsampled_event():
    """A public schedule whose batch reaches the whole schedule_size (rate 1)
    records each step as a Poisson-subsampled Gaussian at rate 1, as every
    other rate is: the ledger keeps one form of event whatever the rate
    (GaussianSteps' default would record a bare Gaussian at rate 1)."""
    est = UnlearnableSGDClassifier(
        random_state=0, schedule_size=400, max_iter=3, batch_size=400
    ).fit(X, Y)
    assert est.unlearning_state_.schedule.inclusion == 1.0
    step = est.privacy_ledger_[-1]["event"]["event"]
    assert step["class_name"] == "PoissonSampledDpEvent"
    assert step["sampling_probability"] == 1.0
    assert GaussianSteps(1.0, 2.0, 3).step_event == dp_event.GaussianDpEvent(2.0)
    sampled = GaussianSteps(1.0, 2.0, 3, sampling_rate=1.0, poisson_sampled=True)
    assert sampled.step_event == dp_event.PoissonSampledDpEvent(1.0, dp_event.GaussianDpEvent(2.0))
