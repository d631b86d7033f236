"""PrivateGridSearch: private selection, accounting, deletion through the search."""

import pickle

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

from sklearn_dpu import BudgetExceededError, PrivacyBudget, UnlearningError
from sklearn_dpu import io as dpu_io
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.model_selection import PrivateGridSearch, _split_select
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.calibration import gaussian_noise_multiplier
from sklearn_dpu.privacy.mechanisms import GaussianMechanism, pure_dp_event
from sklearn_dpu.unlearning import delete_samples

from ._doubles import Untouchable
from ._stats import n_trials


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.clip(X @ [0.5, -0.5] + 0.05 * rng.normal(size=n), -1, 1)


def _search(**kwargs):
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0, epsilon=2.0)
    return PrivateGridSearch(base, {"alpha": [0.0, 1e5, 1e6]}, **kwargs)


def test_selects_the_good_candidate():
    X, y = _data()
    picks = [_search(random_state=s).fit(X, y).best_params_["alpha"] for s in range(10)]
    assert picks.count(0.0) >= 9


def test_privacy_is_the_larger_of_training_and_selection():
    X, y = _data()
    search = _search(selection_epsilon=0.5, random_state=0).fit(X, y)
    fit_event = GaussianMechanism(3.0, gaussian_noise_multiplier(2.0, 1e-5)).dp_event
    training = epsilon_spent([fit_event] * 3, 1e-5)  # three candidates on the same rows
    assert search.privacy_spent_.epsilon == pytest.approx(training)
    search = _search(selection_epsilon=9.0, random_state=0).fit(X, y)
    assert search.privacy_spent_.epsilon == pytest.approx(epsilon_spent([pure_dp_event(9.0)], 1e-5))
    assert "validation" not in " ".join(search.cv_results_)  # no score is published
    assert search.cv_results_["epsilon_spent"] == pytest.approx([2.0] * 3)


def test_uses_gem_when_loss_bounds_differ(monkeypatch):
    calls = []
    real = _split_select.GeneralizedExponentialMechanism.select

    def spy(self, costs, sensitivities, rng):
        calls.append(list(sensitivities))
        return real(self, costs, sensitivities, rng)

    monkeypatch.setattr(_split_select.GeneralizedExponentialMechanism, "select", spy)
    X, y = _data()
    grid = {"target_bound": [1.0, 4.0, 16.0]}
    base = DPLinearRegression(feature_norm=1.5, epsilon=2.0)
    picks = [
        PrivateGridSearch(base, grid, random_state=s).fit(X, y).best_params_["target_bound"]
        for s in range(8)
    ]
    assert calls and calls[0] == [4.0, 64.0, 1024.0]
    # the tight range fits the data; the penalty keeps wide ranges from winning
    assert picks.count(1.0) >= 6


@pytest.mark.statistical
def test_selection_frequencies_respect_epsilon():
    # Selection is the only release on the validation rows: changing one of
    # them may change each selection probability by at most e^eps.
    X, y = _data(60)
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0, epsilon=50.0)
    grid = {"alpha": [0.0, 30.0]}
    trials = n_trials(ci=1500, full=10000)

    def picks(X, y):
        return np.mean(
            [
                PrivateGridSearch(base, grid, selection_epsilon=0.5, random_state=s)
                .fit(X, y)
                .best_index_
                for s in range(trials)
            ]
        )

    p = picks(X, y)
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = [1.0, 1.0], -1.0  # a different row, same seeds: same split
    q = picks(X2, y2)
    slack = 4 * np.sqrt(0.25 / trials)
    for a, b in ((p, q), (1 - p, 1 - q)):
        # replacing a row is two add/remove steps: factor e^(2 eps) at most
        assert a <= np.exp(2 * 0.5) * b + slack


def test_deletion_through_the_search():
    X, y = _data(400)
    ids = np.array([f"u{i}" for i in range(400)])
    search = _search(random_state=0).fit(X, y, sample_id=ids)
    train_ids = search.best_estimator_.unlearning_state_.registry.live()[1]
    validation_id = next(i for i in ids if i not in set(train_ids))
    search.delete_samples([train_ids[0], validation_id])
    report = search.deletion_log_[-1]
    assert report.method == "exact model, certified selection"
    assert report.deletion_epsilon > search.privacy_spent_.epsilon  # group of two
    assert "not recomputed" in report.guarantee
    assert search.best_estimator_.deletion_log_[-1].n_deleted == 1
    before = pickle.dumps(search)
    with pytest.raises(UnlearningError):
        search.delete_samples([validation_id])  # already deleted
    with pytest.raises(UnlearningError):
        search.delete_samples(["nobody", train_ids[1]])
    assert pickle.dumps(search) == before


def test_an_unknown_id_error_describes_the_searchs_ids():
    from sklearn_dpu.unlearning.ids import ID_KIND_NOTES

    X, y = _data(400)
    search = _search(random_state=0, refit=True).fit(X, y)  # row positions
    with pytest.raises(UnlearningError) as error:
        search.delete_samples([10**6])
    message = str(error.value)
    assert message.endswith(ID_KIND_NOTES["positions"])
    assert ID_KIND_NOTES["given"] not in message  # the selected model's own ids
    given = _search(random_state=0, refit=True).fit(X, y, sample_id=[f"u{i}" for i in range(400)])
    with pytest.raises(UnlearningError, match="sample_id values or DataFrame index"):
        given.delete_samples(["nobody"])


def test_deletion_through_a_pipeline_and_after_reload(tmp_path):
    X, y = _data(300)
    pipe = make_pipeline(PublicBoundsScaler(), _search(random_state=0)).fit(X, y)
    delete_samples(pipe, [0, 1, 2], positions=True)
    dpu_io.save(pipe, tmp_path / "search.skops")
    loaded = dpu_io.load(tmp_path / "search.skops")
    np.testing.assert_array_equal(loaded.predict(X), pipe.predict(X))
    delete_samples(loaded, [3], positions=True)
    assert len(loaded[-1].deletion_log_) == 2


def test_budget_refuses_the_whole_search_before_reading_data(budget_path):
    budget = PrivacyBudget(epsilon=2.5, delta=1e-5, path=budget_path)
    base = DPLinearRegression(target_bound=1.0, epsilon=2.0, budget=budget)
    search = PrivateGridSearch(base, {"alpha": [0.0, 1.0, 2.0]}, budget=budget)

    with pytest.raises(BudgetExceededError):
        search.fit(Untouchable(), Untouchable())
    assert budget.history() == []
    X, y = _data(200)
    search = PrivateGridSearch(base, {"alpha": [0.0]}, budget=budget, selection_epsilon=0.1)
    search.fit(X, y)
    # one charge for the whole search on the one ledger both handles share
    assert [h["description"] for h in budget.history()] == ["PrivateGridSearch.fit"]
    assert budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)


def test_too_few_samples_is_a_clear_error():
    with pytest.raises(ValueError, match="n_samples = 1"):
        _search(random_state=0).fit([[0.0, 0.0]], [0.0])
