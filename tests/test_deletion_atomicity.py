"""delete_samples is all-or-nothing: an exception (KeyboardInterrupt included)
raised anywhere in a deletion leaves the estimator, a pipeline around it and
the budget ledger exactly as before, and the same deletion retried gives the
bits of an uninterrupted one."""

import pickle

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

from sklearn_dpu import PrivacyBudget
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
    _dp_linear,
    _unlearnable_sgd,
)
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.preprocessing import PrivateBoundsScaler
from sklearn_dpu.unlearning import delete_samples
from sklearn_dpu.unlearning.state import SampleRegistry

pytestmark = pytest.mark.filterwarnings("ignore")

rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, (300, 3))
Y_CLASS = (X[:, 0] > 0).astype(int)
Y_REG = 0.5 * X[:, 0] - 0.2 * X[:, 1]


def _linear(**kw):
    return DPLinearRegression(random_state=0, **{"feature_norm": 2.0, "target_bound": 1.0, **kw})


def _fit(kind, budget):
    if kind == "linear":
        return _linear(budget=budget).fit(X, Y_REG)
    if kind == "linear_auto":
        return _linear(feature_norm="auto", budget=budget).fit(X, Y_REG)
    if kind == "linear_stream":
        model = _linear(budget=budget)
        for part in np.array_split(np.arange(len(X)), 3):
            model.partial_fit(X[part], Y_REG[part], sample_id=part)
        return model
    if kind == "logistic":
        return DPLogisticRegression(feature_norm=2.0, random_state=0, budget=budget).fit(X, Y_CLASS)
    if kind == "sgd":
        return UnlearnableSGDClassifier(random_state=0, budget=budget).fit(X, Y_CLASS)
    if kind == "search":
        grid = {"epsilon": [0.5, 1.0]}
        search = PrivateGridSearch(_linear(), grid, refit=True, random_state=0, budget=budget)
        return search.fit(X, Y_REG)
    raise ValueError(kind)


def _boom(error):
    def raise_(*args, **kwargs):
        raise error("injected")

    return raise_


# (estimator kind, owner, attribute to replace): points after the first
# in-place edit (the release, the publication), and the budget charge.
POINTS = {
    "linear": [(DPLinearRegression, "_release"), (_dp_linear, "deletion_outcome")],
    "linear_auto": [(DPLinearRegression, "_release")],
    "linear_stream": [(DPLinearRegression, "_release")],
    "logistic": [(DPLogisticRegression, "_publish")],
    "sgd": [(UnlearnableSGDClassifier, "_publish"), (_unlearnable_sgd, "record_edit")],
    "search": [(DPLinearRegression, "_release")],
}
CASES = [
    (kind, owner, name, error)
    for kind, points in POINTS.items()
    for owner, name in [*points, (DPLinearRegression, "_charge_budget")]
    for error in (KeyboardInterrupt, RuntimeError)
]


@pytest.mark.parametrize(("kind", "owner", "name", "error"), CASES)
def test_failed_deletion_changes_nothing(tmp_path, monkeypatch, kind, owner, name, error):
    if name == "_charge_budget":  # every estimator charges through the mixin
        from sklearn_dpu.base import PrivateEstimatorMixin as owner  # noqa: N813
    ids = [0, 5, 9] if kind == "sgd" else list(range(0, 60, 3))
    budget = PrivacyBudget(100.0, 1e-5, path=str(tmp_path / "a.db"))
    model = _fit(kind, budget)
    before, charges = pickle.dumps(model), len(budget.charges())
    with monkeypatch.context() as patch:
        patch.setattr(owner, name, _boom(error))
        with pytest.raises(error):
            model.delete_samples(ids)
    assert pickle.dumps(model) == before
    assert len(budget.charges()) == charges
    model.delete_samples(ids)  # the retry is not refused
    twin = _fit(kind, PrivacyBudget(100.0, 1e-5, path=str(tmp_path / "b.db")))
    twin.delete_samples(ids)
    assert np.array_equal(model.predict(X), twin.predict(X))
    assert len(budget.charges()) == charges + 1


def test_pipeline_undoes_earlier_steps(monkeypatch):
    def fit():
        return make_pipeline(PrivateBoundsScaler(random_state=0), _linear()).fit(X, Y_REG)

    pipe = fit()
    before = pickle.dumps(pipe)
    with monkeypatch.context() as patch:
        patch.setattr(DPLinearRegression, "_release", _boom(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            delete_samples(pipe, [7, 8], positions=True)
    assert pickle.dumps(pipe) == before
    assert len(pipe[0].deletion_log_) == 0
    delete_samples(pipe, [7, 8], positions=True)
    twin = delete_samples(fit(), [7, 8], positions=True)
    assert np.array_equal(pipe.predict(X), twin.predict(X))


def test_registry_removal_is_undone_with_compaction():
    from sklearn_dpu._transaction import atomic

    registry = SampleRegistry(3)
    registry.add(registry.default_ids(10), np.arange(30, dtype=np.int16).reshape(10, 3), chunk=1)
    before = pickle.dumps(registry)
    with pytest.raises(RuntimeError), atomic():
        registry.remove(np.arange(6))  # compacts: fewer than half the rows left
        raise RuntimeError
    assert pickle.dumps(registry) == before
    assert registry.slots_of([0, 9]).tolist() == [0, 9]
