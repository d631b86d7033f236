"""A search refuses bad data before anything is charged.

The random-run methods (``repeat_and_select``, ``threshold``) charge their
exact plan before any candidate is fitted: values every candidate would
refuse must be refused first, by the search, leaving the budget's ledger and
the search as they were.
"""

import numpy as np
import pytest
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.utils import check_array

from sklearn_dpu import PrivacyBudget
from sklearn_dpu.linear_model import DPLogisticRegression, UnlearnableSGDClassifier
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.model_selection._search_results import check_values_like_candidates

rng = np.random.default_rng(0)
X = rng.normal(size=(400, 4))
Y = (X[:, 0] > 0).astype(int)


def _estimator(name):
    if name == "sgd":
        return UnlearnableSGDClassifier(
            feature_norm=3.0, max_iter=10, schedule_size=300, random_state=0
        )
    return DPLogisticRegression(feature_norm=3.0, random_state=0)


@pytest.mark.parametrize("method", ["split_select", "repeat_and_select", "threshold"])
@pytest.mark.parametrize("name", ["sgd", "logistic"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_x_is_refused_before_any_charge(tmp_path, method, name, bad):
    budget = PrivacyBudget(100.0, 1e-3, path=tmp_path / "ledger.db")
    search = PrivateGridSearch(
        _estimator(name), {"random_state": [0, 1]}, method=method, random_state=0, budget=budget
    )
    before = dict(search.__dict__)
    X_bad = X.copy()
    X_bad[350, 2] = bad
    with pytest.raises(ValueError) as raised:
        search.fit(X_bad, Y)
    with pytest.raises(ValueError) as expected:
        check_array(X_bad, input_name="X", estimator=search)
    assert str(raised.value) == str(expected.value)
    assert budget.spent().epsilon == 0.0
    assert budget.charges() == []
    assert search.__dict__.keys() == before.keys()
    assert all(search.__dict__[key] is before[key] for key in before)


@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_a_nan_label_is_refused_before_any_charge(method):
    budget = PrivacyBudget(100.0, 1e-3)
    search = PrivateGridSearch(
        _estimator("logistic"), {"random_state": [0, 1]}, method=method, budget=budget
    )
    y = Y.astype(float)
    y[3] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        search.fit(X, y)
    assert budget.spent().epsilon == 0.0


class _Search:
    def __init__(self, estimator):
        self.estimator = estimator


def test_a_pipeline_that_imputes_lets_nan_through_but_not_infinity():
    # The check follows the estimator's tags: what its candidates accept.
    imputing = _Search(make_pipeline(SimpleImputer(), _estimator("logistic")))
    X_nan, X_inf = X.copy(), X.copy()
    X_nan[5, 1], X_inf[5, 1] = np.nan, np.inf
    check_values_like_candidates(imputing, X_nan, Y)
    with pytest.raises(ValueError, match="infinity"):
        check_values_like_candidates(imputing, X_inf, Y)
    with pytest.raises(ValueError, match="NaN"):
        check_values_like_candidates(_Search(_estimator("logistic")), X_nan, Y)
