"""Deletion through pipelines, and sample ids routed through them."""

import numpy as np
import pytest
import sklearn
from sklearn.model_selection import cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, StandardScaler

from sklearn_dpu import UnlearningError
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.unlearning import (
    IncompleteUnlearningWarning,
    delete_samples,
    unlearnable_steps,
)


def _data(n=80):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, size=(n, 3))
    return X, (X @ [0.3, 0.1, -0.2]) / 10


def test_delete_through_a_private_pipeline():
    X, y = _data()
    pipe = make_pipeline(
        PublicBoundsScaler(bounds=(0, 10)),
        Normalizer(),
        FunctionTransformer(np.tanh),
        DPLinearRegression(feature_norm=np.sqrt(3), random_state=0),
    ).fit(X, y)
    assert unlearnable_steps(pipe) == []
    assert delete_samples(pipe, [1, 2, 3]) is pipe
    assert pipe[-1].deletion_log_[-1].n_deleted == 3


def test_a_fitted_scaler_is_named_and_nothing_changes():
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), DPLinearRegression(random_state=0)).fit(X, y)
    coef = pipe[-1].coef_.copy()
    with pytest.raises(UnlearningError, match="standardscaler"):
        delete_samples(pipe, [1])
    np.testing.assert_array_equal(pipe[-1].coef_, coef)
    assert pipe[-1].deletion_log_ == []
    with pytest.warns(IncompleteUnlearningWarning, match="standardscaler"):
        delete_samples(pipe, [1], on_unlearnable="warn")
    assert pipe[-1].deletion_log_[-1].n_deleted == 1


def test_nested_pipelines_are_walked():
    X, y = _data()
    inner = make_pipeline(PublicBoundsScaler(bounds=(0, 10)), StandardScaler())
    pipe = make_pipeline(inner, DPLinearRegression(random_state=0)).fit(X, y)
    assert any("standardscaler" in step for step in unlearnable_steps(pipe))


def test_a_pipeline_without_deletable_steps_is_refused():
    X, y = _data()
    with pytest.raises(UnlearningError, match="no step"):
        delete_samples(make_pipeline(StandardScaler()).fit(X), [0])


def test_sample_ids_are_routed_to_the_estimator():
    X, y = _data()
    ids = [f"u{i}" for i in range(len(y))]
    with sklearn.config_context(enable_metadata_routing=True):
        reg = DPLinearRegression(random_state=0).set_fit_request(sample_id=True)
        pipe = make_pipeline(PublicBoundsScaler(bounds=(0, 10)), reg)
        pipe.fit(X, y, sample_id=ids)
        result = cross_validate(pipe, X, y, cv=3, params={"sample_id": ids})
    assert len(result["test_score"]) == 3
    delete_samples(pipe, ["u5", "u6"])
    assert pipe[-1].unlearning_state_.registry.n_samples == len(y) - 2


def test_step_parameters_route_without_metadata_routing():
    X, y = _data()
    pipe = make_pipeline(PublicBoundsScaler(bounds=(0, 10)), DPLinearRegression(random_state=0))
    pipe.fit(X, y, dplinearregression__sample_id=[f"u{i}" for i in range(len(y))])
    delete_samples(pipe, ["u0"])
