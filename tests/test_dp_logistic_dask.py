"""DPLogisticRegression on Dask collections: loss sums reduced on the workers."""

import numpy as np
import pytest
from dask.callbacks import Callback

from sklearn_dpu.linear_model import DPLogisticRegression
from sklearn_dpu.privacy import PrivacyBudget

da = pytest.importorskip("dask.array")


def _data(n_classes=2, n=6000):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    if n_classes == 2:
        return X, (X @ [1.0, -2.0, 0.5, 0.0] > 0).astype(int)
    return X, np.digitize(X[:, 0] - X[:, 1], [-0.5, 0.5])


class _TaskNames(Callback):
    """Names of the functions the Dask scheduler ran."""

    def __init__(self):
        super().__init__()
        self.names = []

    def _pretask(self, key, dask, state):
        task = dask[key]
        function = getattr(task, "func", None)
        self.names.append(getattr(function, "__name__", ""))


@pytest.mark.parametrize("solver", ["noisy_gd", "output"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_dask_fit_matches_the_in_memory_fit(solver, n_classes):
    X, y = _data(n_classes)
    kw = dict(epsilon=1.0, feature_norm=4.0, solver=solver, random_state=0)
    local = DPLogisticRegression(**kw).fit(X, y)
    with _TaskNames() as tasks:
        dist = DPLogisticRegression(**kw).fit(
            da.from_array(X, chunks=(1000, 2)), da.from_array(y, chunks=1500)
        )
    # The gradient sums ran block by block in the scheduler, not on gathered rows.
    ran = set(tasks.names)
    assert ran & {"_gradient", "_value_and_grad", "_hessian"}, ran
    # Same mechanisms, same noise: only the summation order of the blocks differs.
    assert dist.privacy_ledger_ == local.privacy_ledger_
    assert dist.solver_ == local.solver_ == solver
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dist.intercept_, local.intercept_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(dist.classes_, local.classes_)
    # The registry holds the same rows: deletions behave the same.
    np.testing.assert_array_equal(
        dist.unlearning_state_.registry.live()[1], local.unlearning_state_.registry.live()[1]
    )
    dist.delete_samples([3, 4])
    local.delete_samples([3, 4])
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-9, atol=1e-12)


def test_constrained_output_on_dask():
    X, y = _data()
    kw = dict(feature_norm=4.0, solver="output", coef_bound=1.0, random_state=1)
    local = DPLogisticRegression(**kw).fit(X, y)
    dist = DPLogisticRegression(**kw).fit(da.from_array(X, chunks=2000), y)
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-9, atol=1e-12)


def test_dask_dataframe():
    # dask.dataframe needs pyarrow, which the test extra does not install.
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = _data()
    kw = dict(feature_norm=4.0, solver="output", random_state=1)
    local = DPLogisticRegression(**kw).fit(X, y)
    frame = dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=3)
    labels = dd.from_pandas(pd.Series(y), npartitions=3)
    dist = DPLogisticRegression(**kw).fit(frame, labels)
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-9, atol=1e-12)
    assert dist.n_features_in_ == 4


def test_bad_dask_input_is_refused_before_the_budget_is_charged(tmp_path):
    X, y = _data()
    X = X.copy()
    X[4500, 1] = np.nan
    budget = PrivacyBudget(10.0, 1e-3, tmp_path / "b.sqlite")
    clf = DPLogisticRegression(feature_norm=4.0, solver="noisy_gd", budget=budget)
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(da.from_array(X, chunks=1000), da.from_array(y, chunks=1000))
    assert budget.spent().epsilon == 0.0
    assert not hasattr(clf, "coef_")
    with pytest.raises(ValueError, match="Dask"):
        DPLogisticRegression(solver="objective").fit(da.from_array(X[:10]), y[:10])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_feature_norm_from_counts_on_the_workers(seed):
    # The private median of the row norms reads only counts per grid cell:
    # summed over blocks they are the in-memory counts, so the bound is the same.
    X, y = _data(n=3000)
    X = X * np.random.default_rng(seed).uniform(0.5, 20.0)
    kw = dict(feature_norm="auto", solver="noisy_gd", random_state=seed)
    local = DPLogisticRegression(**kw).fit(X, y)
    with _TaskNames() as tasks:
        dist = DPLogisticRegression(**kw).fit(da.from_array(X, chunks=700), y)
    assert "_norm_counts" in tasks.names
    assert dist.feature_norm_ == local.feature_norm_
    assert dist.privacy_ledger_ == local.privacy_ledger_
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-9, atol=1e-12)
