"""The public row-norm bound's upper limit: above 1e150 its square overflows
float64 in the sensitivities; a clear parameter error, before any charge."""

import numpy as np
import pytest

from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.clipping import (
    MAX_FLOAT32_NORM_BOUND,
    MAX_NORM_BOUND,
    MIN_FLOAT32_NORM_BOUND,
)


def _estimators(norm, budget=None):
    return [
        DPLogisticRegression(feature_norm=norm, budget=budget),
        DPLinearRegression(feature_norm=norm, target_bound=1.0, budget=budget),
        UnlearnableSGDClassifier(feature_norm=norm, budget=budget),
    ]


def _data(estimator):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    if isinstance(estimator, DPLinearRegression):
        return X, np.clip(X[:, 0], -1, 1)
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("index", range(3))
def test_a_bound_above_the_limit_is_refused_before_any_charge(tmp_path, index):
    """Before: feature_norm = 1e155 raised OverflowError (34, 'Numerical
    result out of range') from inside the fit."""
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=tmp_path / "b.sqlite")
    estimator = _estimators(1e155, budget)[index]
    with pytest.raises(ValueError, match="feature_norm"):
        estimator.fit(*_data(estimator))
    assert budget.history() == []


@pytest.mark.parametrize("index", range(3))
def test_the_limit_itself_fits_deletes_and_predicts(index):
    """(Float32 data have their own, narrower, bounds: below.)"""
    estimator = _estimators(MAX_NORM_BOUND)[index]
    X, y = _data(estimator)
    estimator.fit(X, y).delete_samples([3, 5])
    assert np.all(np.isfinite(estimator.coef_))
    assert np.all(np.isfinite(estimator.predict(X).astype(float)))


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize("index", range(2))
def test_float32_data_below_the_float32_bound_is_refused_before_any_charge(tmp_path, index, method):
    """Before: float32 coefficients of the order of 1 / feature_norm came out
    infinite (every solver, feature_norm 1e-150 to 1e-40)."""
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=tmp_path / "b.sqlite")
    estimator = _estimators(1e-40, budget)[index]
    X, y = _data(estimator)
    kwargs = {"classes": [0, 1]} if method == "partial_fit" and index == 0 else {}
    with pytest.raises(ValueError, match="the bounds for float32 data"):
        getattr(estimator, method)((X * 1e-40).astype(np.float32), y, **kwargs)
    assert budget.history() == []
    assert not hasattr(estimator, "coef_")
    # float64 data with the same bound fit (float64 coefficients), and
    # float32 data at the float32 bound give finite float32 coefficients
    getattr(estimator, method)(X * 1e-40, y, **kwargs)
    assert np.all(np.isfinite(estimator.coef_))
    fresh = _estimators(MIN_FLOAT32_NORM_BOUND)[index]
    getattr(fresh, method)((X * 1e-30).astype(np.float32), y, **kwargs)
    assert fresh.coef_.dtype == np.float32 and np.all(np.isfinite(fresh.coef_))


@pytest.mark.parametrize("index", range(3))
def test_float32_data_above_the_float32_bound_is_refused_before_any_charge(tmp_path, index):
    """No float32 row can reach a bound past float32's range: before, 1e39
    fitted and charged a model whose float32 coefficients underflowed to
    about 1e-39 (a new user's report)."""
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=tmp_path / "b.sqlite")
    estimator = _estimators(1e31, budget)[index]
    X, y = _data(estimator)
    with pytest.raises(ValueError, match="the bounds for float32 data"):
        estimator.fit(X.astype(np.float32), y)
    assert budget.history() == []
    estimator.fit(X, y)  # float64 data: the bound is allowed
    fresh = _estimators(MAX_FLOAT32_NORM_BOUND)[index]
    fresh.fit((X * 1e29).astype(np.float32), y)
    assert fresh.coef_.dtype == np.float32 and np.all(np.isfinite(fresh.coef_))
    assert np.any(fresh.coef_ != 0)
