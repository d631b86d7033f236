"""scikit-learn's estimator checks on every estimator and transformer of the library."""

import pytest
from sklearn.utils.estimator_checks import (
    check_dataframe_column_names_consistency,
    check_param_validation,
    parametrize_with_checks,
)

from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.preprocessing import PrivateBoundsScaler, PublicBoundsScaler

ESTIMATORS = [
    DPLinearRegression(),
    DPLinearRegression(solver="noisy_gd", max_iter=50),
    DPLinearRegression(solver="ambssgd"),
    DPLinearRegression(feature_norm=1.0, target_bound=1.0),  # the defaults are "auto"
    DPLogisticRegression(),
    DPLogisticRegression(solver="output"),
    DPLogisticRegression(solver="objective"),
    DPLogisticRegression(solver="noisy_gd"),
    DPLogisticRegression(solver="langevin"),
    DPLogisticRegression(feature_norm="auto"),
    PublicBoundsScaler(),
    PrivateBoundsScaler(),
    PrivateBoundsScaler(center=True, ratio=1.5),
    PrivateGridSearch(DPLinearRegression(), {"alpha": [0.0, 1.0]}),
    PrivateGridSearch(DPLinearRegression(), {"target_bound": [1.0, 3.0]}),
    # the search over every estimator of the library, with a 4-value grid
    PrivateGridSearch(DPLinearRegression(), {"alpha": [0.0, 1.0, 10.0, 100.0]}),
    PrivateGridSearch(DPLogisticRegression(), {"C": [0.1, 1.0, 10.0, 100.0]}),
    PrivateGridSearch(UnlearnableSGDClassifier(), {"alpha": [1e-4, 1e-3, 1e-2, 1e-1]}),
    UnlearnableSGDClassifier(),
    UnlearnableSGDClassifier(
        solver="sgd", batch_sampling="fixed", loss="modified_huber", epsilon=float("inf")
    ),
    UnlearnableSGDClassifier(loss="hinge", noise_multiplier=1.0, coupling_share=1.0),
    UnlearnableSGDClassifier(feature_norm="auto"),
]

# Checks an estimator cannot pass, with the reason. Empty: every check passes.
EXPECTED_FAILURES: dict = {}


@parametrize_with_checks(
    ESTIMATORS,
    expected_failed_checks=lambda est: EXPECTED_FAILURES.get(type(est), {}),
    xfail_strict=True,
)
def test_sklearn_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_dataframe_column_names(estimator):
    pytest.importorskip("pandas")
    check_dataframe_column_names_consistency(type(estimator).__name__, estimator)
