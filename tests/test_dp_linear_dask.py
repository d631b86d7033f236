"""DPLinearRegression on Dask arrays: statistics reduced block by block."""

import pickle

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.privacy import PrivacyBudget

da = pytest.importorskip("dask.array")


def _data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(5000, 4))
    return X, np.clip(X @ [0.3, -0.2, 0.1, 0.0], -1, 1)


def test_dask_fit_equals_the_in_memory_fit_bit_for_bit():
    X, y = _data()
    local = DPLinearRegression(target_bound=1.0, random_state=0, feature_norm=2.0).fit(X, y)
    distributed = DPLinearRegression(target_bound=1.0, random_state=0, feature_norm=2.0).fit(
        da.from_array(X, chunks=700), da.from_array(y, chunks=1100)
    )
    np.testing.assert_array_equal(distributed.coef_, local.coef_)
    np.testing.assert_array_equal(
        distributed.unlearning_state_.statistics.nodes[0].exact,
        local.unlearning_state_.statistics.nodes[0].exact,
    )
    distributed.delete_samples([10, 11])
    local.delete_samples([10, 11])
    np.testing.assert_array_equal(distributed.coef_, local.coef_)


def test_partial_fit_with_dask_chunks():
    X, y = _data()
    reg = DPLinearRegression(target_bound=1.0, random_state=0, feature_norm=2.0)
    reg.partial_fit(da.from_array(X[:2500], chunks=500), y[:2500])
    reg.partial_fit(da.from_array(X[2500:], chunks=500), da.from_array(y[2500:], chunks=500))
    assert reg.unlearning_state_.registry.n_samples == 5000
    assert reg.score(X, y) > 0.9


def test_bad_dask_input_raises_and_changes_nothing():
    X, y = _data()
    reg = DPLinearRegression(target_bound=1.0, random_state=0, feature_norm=2.0).fit(X, y)
    before = pickle.dumps(reg)
    X_nan = X.copy()
    X_nan[4321, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        reg.fit(da.from_array(X_nan, chunks=1000), y)
    with pytest.raises(ValueError, match="features"):
        reg.partial_fit(da.from_array(X[:, :3], chunks=1000), y)
    assert pickle.dumps(reg) == before


@pytest.mark.parametrize(
    "params",
    [{}, {"feature_norm": 2.0}, {"solver": "ambssgd"}],
    ids=["auto bounds", "auto target", "ambssgd auto"],
)
@pytest.mark.parametrize("bad", ["X", "y"])
def test_non_finite_dask_input_with_auto_bounds_is_refused_before_any_charge(params, bad, tmp_path):
    # The 'auto' bounds are released before the rows are encoded: a NaN found
    # only then would have charged (and spent) the bounds' share of the budget.
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (2000, 3))
    y = X[:, 1].copy()
    (X if bad == "X" else y)[1999] = np.nan
    budget = PrivacyBudget(10.0, 1e-3, str(tmp_path / "budget.sqlite"))
    est = DPLinearRegression(budget=budget, random_state=0, **params)
    with pytest.raises(ValueError, match=f"{bad} contains NaN"):
        est.fit(da.from_array(X, chunks=(500, 3)), da.from_array(y, chunks=500))
    assert budget.spent().epsilon == 0.0
    assert not [name for name in vars(est) if name.endswith("_")]
