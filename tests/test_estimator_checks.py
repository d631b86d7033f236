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
    # Seeded for reproducible checks (the candidates are given the label set
    # of all the rows, so a split that leaves a class out still models it).
    PrivateGridSearch(DPLogisticRegression(), {"C": [0.1, 1.0, 10.0, 100.0]}, random_state=0),
    PrivateGridSearch(
        UnlearnableSGDClassifier(), {"alpha": [1e-4, 1e-3, 1e-2, 1e-1]}, random_state=0
    ),
    # the random-run methods, seeded where the run may publish no model (a
    # Poisson K of 0, or the threshold rule stopping first)
    PrivateGridSearch(
        DPLinearRegression(), {"alpha": [0.0, 1.0]}, method="repeat_and_select", expected_runs=2.0
    ),
    PrivateGridSearch(
        DPLogisticRegression(),
        {"C": [0.1, 1.0]},
        method="repeat_and_select",
        distribution="poisson",
        expected_runs=3.0,
        random_state=0,
    ),
    PrivateGridSearch(
        UnlearnableSGDClassifier(schedule_size=1000, max_iter=5),  # exact planned events
        {"alpha": [1e-4, 1e-3]},
        method="repeat_and_select",
        expected_runs=2.0,
        random_state=0,
    ),
    PrivateGridSearch(
        DPLinearRegression(),
        {"alpha": [0.0, 1.0]},
        method="threshold",
        threshold=0.05,
        random_state=0,
    ),
    PrivateGridSearch(
        DPLogisticRegression(),
        {"C": [0.1, 1.0]},
        method="threshold",
        threshold=0.05,
        random_state=0,
    ),
    # a random-run method with sampled candidates, a named scoring and a refit
    PrivateGridSearch(
        DPLinearRegression(),
        param_distributions={"alpha": [0.0, 1.0, 10.0]},
        n_iter=2,
        method="repeat_and_select",
        expected_runs=2.0,
        scoring="neg_mean_absolute_error",
        refit=True,
    ),
    # the GridSearchCV shape: refit on all rows, a named scoring, sampled candidates
    # (refit over UnlearnableSGDClassifier passes too, but takes 50 s of checks)
    PrivateGridSearch(DPLinearRegression(), {"alpha": [0.0, 1.0]}, refit=True, scoring="r2"),
    PrivateGridSearch(
        DPLogisticRegression(),
        param_distributions={"C": [0.1, 1.0, 10.0, 100.0]},
        n_iter=3,
        scoring="accuracy",
        refit=True,
        random_state=0,
    ),
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
