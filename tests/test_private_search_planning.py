"""PrivateGridSearch plans with the estimators' planning hook, and reports
deletions through the base class's procedure (issue 9)."""

import numpy as np
import pytest

from sklearn_dpu import PrivacyBudget
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.model_selection import PrivateGridSearch, _private_search, _split_select
from sklearn_dpu.model_selection._group_privacy import group_epsilon
from sklearn_dpu.privacy.ledger import Release
from sklearn_dpu.unlearning.report import DeletionCost


def _regression(n=400, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d)
    return X, np.clip(X @ np.full(d, 0.5), -1, 1)


def test_planned_epsilon_of_a_search_is_what_it_charges(budget_path):
    # Before: a search had no planning hook, so planned_epsilon raised.
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    search = PrivateGridSearch(
        DPLinearRegression(target_bound=1.0), {"alpha": [0.0, 1.0, 10.0]}, budget=budget
    )
    planned = budget.planned_epsilon(search)
    assert budget.can_afford(search)
    search.set_params(random_state=0).fit(*_regression())
    assert budget.spent().epsilon == pytest.approx(planned)
    assert budget.planned_epsilon(search, 0) == pytest.approx(planned)


def test_candidates_are_planned_with_the_public_number_of_features(budget_path, monkeypatch):
    # Before: candidates were planned from their parameters alone, never told
    # the number of columns that X's shape states.
    seen = []
    planned_fit = _private_search.planned_fit

    def recording(estimator, sizes=None):
        seen.append(sizes)
        return planned_fit(estimator, sizes)

    monkeypatch.setattr(_private_search, "planned_fit", recording)
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    PrivateGridSearch(
        DPLinearRegression(target_bound=1.0), {"alpha": [0.0, 1.0]}, budget=budget, random_state=0
    ).fit(*_regression(d=5))
    assert [s.n_features for s in seen] == [5, 5]


def test_a_deletion_report_states_work_not_time():
    # Before: the report copied the selected model's retrain estimate as a
    # dict, with its wall-time estimates.
    X, y = _regression()
    search = PrivateGridSearch(
        DPLinearRegression(target_bound=1.0), {"alpha": [0.0, 1.0]}, random_state=0
    ).fit(X, y)
    train_row = next(i for i in range(len(y)) if i not in search._validation_ids)
    search.delete_samples(train_row)
    report, inner = search.deletion_log_[-1], search.best_estimator_.deletion_log_[-1]
    assert isinstance(report.retrain_cost, DeletionCost)
    assert isinstance(report.cost, DeletionCost)
    assert not any("wall_time" in key for key in report.retrain_cost)
    work = {k: v for k, v in dict(inner.retrain_cost).items() if "wall_time" not in k}
    assert dict(report.retrain_cost) == work and work
    assert report.rerelease_epsilon == inner.rerelease_epsilon


def test_a_correlated_rerelease_keeps_the_inner_rerelease_epsilon():
    # Guard: the inner model's new ledger entries hold accounting entries
    # besides its re-release; the report's rerelease_epsilon is the re-release's.
    X, y = _regression()
    search = PrivateGridSearch(
        DPLinearRegression(target_bound=1.0, rerelease_correlation=0.5),
        {"alpha": [0.0, 1.0]},
        random_state=0,
    ).fit(X, y)
    train_rows = [i for i in range(len(y)) if i not in search._validation_ids][:2]
    n_before = len(search.privacy_ledger_)
    search.delete_samples(train_rows)
    inner = search.best_estimator_.deletion_log_[-1]
    assert len(search.privacy_ledger_) - n_before > 1  # re-release and accounting
    assert search.deletion_log_[-1].rerelease_epsilon == inner.rerelease_epsilon


def test_a_budget_spent_meanwhile_leaves_every_budget_uncharged(tmp_path, monkeypatch):
    # Guard for base._charge_budgets: with two budgets, the fit's charge is
    # checked on both before either is charged. Another process spends the
    # estimator's budget while the candidates train: the search's own budget
    # must not be charged for a search that is then refused.
    from sklearn_dpu import BudgetExceededError
    from sklearn_dpu.privacy.mechanisms import pure_dp_event

    own = PrivacyBudget(epsilon=10.0, delta=1e-5, path=tmp_path / "own.sqlite")
    inner = PrivacyBudget(epsilon=10.0, delta=1e-5, path=tmp_path / "inner.sqlite")
    fit_candidate = _split_select.fit_candidate

    def meanwhile(estimator, X, y, sample_id, split):
        if not inner.history():
            PrivacyBudget(10.0, 1e-5, path=inner.path).charge([pure_dp_event(9.5)], "elsewhere")
        return fit_candidate(estimator, X, y, sample_id, split)

    monkeypatch.setattr(_split_select, "fit_candidate", meanwhile)
    search = PrivateGridSearch(
        DPLinearRegression(target_bound=1.0, budget=inner),
        {"alpha": [0.0, 1.0]},
        budget=own,
        random_state=0,
    )
    with pytest.raises(BudgetExceededError):
        search.fit(*_regression())
    assert own.history() == []
    assert [h["description"] for h in inner.history()] == ["elsewhere"]
    assert not hasattr(search, "best_estimator_")


def test_a_pipeline_given_as_the_estimator_is_refused_with_the_way_to_do_it():
    from sklearn.pipeline import make_pipeline

    from sklearn_dpu.preprocessing import PrivateBoundsScaler

    pipe = make_pipeline(PrivateBoundsScaler(), DPLinearRegression())
    with pytest.raises(ValueError, match="put the search inside the pipeline"):
        PrivateGridSearch(pipe, {"dplinearregression__alpha": [0.0, 1.0]}).fit(
            np.zeros((10, 2)), np.zeros(10)
        )


def test_a_released_target_range_bounds_the_validation_loss():
    """With target_bound='auto' each candidate's loss is clipped to its own
    released target_interval_ (a DP release on the training part), and the
    selection is the generalized exponential mechanism, whose sensitivities
    may differ per candidate (before: refused)."""
    from sklearn_dpu.model_selection._private_search import _selection
    from sklearn_dpu.model_selection._scoring import default_loss as _loss_bound
    from sklearn_dpu.privacy.mechanisms import GeneralizedExponentialMechanism

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = 200.0 + X @ [30.0, -10.0, 5.0] + rng.normal(size=600)
    search = PrivateGridSearch(
        DPLinearRegression(random_state=0), {"alpha": [0.0, 1.0]}, random_state=0
    )
    assert _loss_bound(DPLinearRegression()) == ("squared error", None, None)
    assert isinstance(
        _selection(search.get_params(deep=False), [DPLinearRegression()] * 2),
        GeneralizedExponentialMechanism,
    )
    search.fit(X, y)
    model = search.best_estimator_
    low, high = model.target_interval_
    assert _loss_bound(model) == ("squared error", (high - low) ** 2, (low, high))
    assert search.score(X, y) > 0.5


def test_the_search_report_covers_what_the_selected_model_states():
    """The search publishes the selected model's re-releases: its deletion
    epsilon composes the selection's group bound with the model's own
    statement (before: 1.10 for the search against 2.51 inside it)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (400, 3))
    base = DPLinearRegression(feature_norm=3.0, rerelease_correlation=0.9)
    search = PrivateGridSearch(base, {"alpha": [0.0, 1.0]}, random_state=0).fit(X, X.sum(axis=1))
    train_id = search.best_estimator_.unlearning_state_.registry.live()[1][0]
    search.delete_samples([train_id])
    inner = search.best_estimator_.deletion_log_[-1]
    outer = search.deletion_log_[-1]
    assert inner.deletion_epsilon is not None
    assert outer.deletion_epsilon > inner.deletion_epsilon


def test_a_pipeline_checks_the_search_before_any_step_deletes():
    from sklearn.pipeline import make_pipeline

    from sklearn_dpu.exceptions import UnlearningError
    from sklearn_dpu.preprocessing import PrivateBoundsScaler
    from sklearn_dpu.unlearning import delete_samples

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (400, 3))
    pipe = make_pipeline(
        PrivateBoundsScaler(random_state=0),
        PrivateGridSearch(DPLinearRegression(feature_norm=2.0), {"alpha": [0.0, 1.0]}),
    ).fit(X, X.sum(axis=1))
    for refused in ([10_000], [1, 1]):
        with pytest.raises(UnlearningError):
            delete_samples(pipe, refused, positions=True)
    assert pipe[0].deletion_log_ == [] and pipe[-1].deletion_log_ == []


def test_a_validation_only_deletion_keeps_the_selected_models_statement():
    """The search's figure covers every row deleted so far: a later call that
    touches only validation rows must still include what the selected model
    states (before: 5.19 where 7.70 was due)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (400, 3))
    base = DPLinearRegression(feature_norm=3.0, rerelease_correlation=0.9)
    search = PrivateGridSearch(base, {"alpha": [0.0, 1.0]}, random_state=0).fit(X, X.sum(axis=1))
    train_id = search.best_estimator_.unlearning_state_.registry.live()[1][0]
    search.delete_samples([train_id])
    inner = search.best_estimator_.deletion_log_[-1].deletion_epsilon
    validation_id = next(iter(search._validation_ids))
    search.delete_samples([validation_id])
    assert search.best_estimator_.deletion_log_[-1].deletion_epsilon == inner  # untouched
    fit_events = [
        Release.from_dict(e).event for e in search.privacy_ledger_[: search._n_fit_releases]
    ]
    retained = group_epsilon(fit_events, 2, search.delta)
    assert search.deletion_log_[-1].deletion_epsilon == pytest.approx(retained + inner)
