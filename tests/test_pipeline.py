"""Deletion through pipelines, and sample ids routed through them."""

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.compose import make_column_transformer
from sklearn.model_selection import cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, Normalizer, OneHotEncoder, StandardScaler

from sklearn_dpu import UnlearningError
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.model_selection import PrivateGridSearch
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
    assert delete_samples(pipe, [1, 2, 3], positions=True) is pipe
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
        delete_samples(pipe, [1], on_unlearnable="warn", positions=True)
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


# --- every estimator of the library, through Pipeline and PrivateGridSearch ---

_LIBRARY = {
    "DPLinearRegression": (DPLinearRegression, {"alpha": [0.0, 1.0]}),
    "DPLogisticRegression": (DPLogisticRegression, {"C": [0.1, 10.0]}),
    "UnlearnableSGDClassifier": (UnlearnableSGDClassifier, {"alpha": [1e-4, 1e-2]}),
}


def _task_data(name, n=300):
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 10, size=(n, 3))
    if name == "DPLinearRegression":
        return X, np.clip((X @ [0.3, 0.1, -0.2]) / 10, -1, 1)
    return X, (X[:, 0] > 5).astype(int)


@pytest.mark.parametrize("name", sorted(_LIBRARY))
@pytest.mark.parametrize("through_search", [False, True], ids=["pipeline", "search"])
def test_every_estimator_deletes_through_pipeline_and_search(name, through_search):
    cls, grid = _LIBRARY[name]
    X, y = _task_data(name)
    final = cls(random_state=0)
    if through_search:
        final = PrivateGridSearch(final, grid, random_state=0)
    pipe = make_pipeline(PublicBoundsScaler(bounds=(0, 10)), final)
    ids = [f"u{i}" for i in range(len(y))]
    step = type(final).__name__.lower()
    pipe.fit(X, y, **{f"{step}__sample_id": ids})
    model = pipe[-1].best_estimator_ if through_search else pipe[-1]
    live = set(model.unlearning_state_.registry.live()[1].tolist())
    chosen = [i for i in ids if i in live][:3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert delete_samples(pipe, chosen) is pipe
    assert model.unlearning_state_.registry.n_samples == len(live) - 3
    assert pipe[-1].deletion_log_[-1].n_deleted == 3
    if through_search:
        assert pipe[-1].n_deleted_ == 3
    assert pipe.predict(X).shape == (len(y),)
    with pytest.raises(UnlearningError):
        delete_samples(pipe, chosen[:1])  # already deleted


def test_sample_ids_are_routed_through_pipeline_search_and_cross_validate():
    X, y = _data(200)
    ids = [f"u{i}" for i in range(len(y))]
    with sklearn.config_context(enable_metadata_routing=True):
        search = PrivateGridSearch(
            DPLinearRegression(feature_norm=1.0, target_bound=1.0, random_state=0),
            {"alpha": [0.0, 1.0]},
            random_state=0,
        ).set_fit_request(sample_id=True)
        pipe = make_pipeline(PublicBoundsScaler(bounds=(0, 10)), search)
        pipe.fit(X, y, sample_id=ids)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a failed scoring is only a warning
            result = cross_validate(pipe, X, y, cv=3, params={"sample_id": ids})
    assert np.isfinite(result["test_score"]).all() and len(result["test_score"]) == 3
    live = pipe[-1].best_estimator_.unlearning_state_.registry.live()[1].tolist()
    assert set(live) <= set(ids)
    delete_samples(pipe, [live[0], "u0" if "u0" != live[0] else "u1"])
    assert pipe[-1].n_deleted_ == 2


def test_a_bare_string_is_one_id_through_a_pipeline():
    X, y = _data(40)
    ids = [str(i) for i in range(len(y))]
    pipe = make_pipeline(PublicBoundsScaler(bounds=(0, 10)), DPLinearRegression(random_state=0))
    pipe.fit(X, y, dplinearregression__sample_id=ids)
    delete_samples(pipe, "12")
    assert pipe[-1].deletion_log_[-1].n_deleted == 1
    delete_samples(pipe, ["1", "2"])  # "12" was one id: these are still there
    assert pipe[-1].unlearning_state_.registry.n_samples == len(y) - 3


# --- ColumnTransformer ---


def _mixed_data(n=120):
    rng = np.random.default_rng(2)
    X = np.column_stack(
        [rng.uniform(0, 10, size=(n, 2)), rng.integers(0, 3, size=n), rng.normal(size=(n, 2))]
    )
    return X, np.clip(X[:, 0] / 10 - 0.5, -1, 1)


def _column_pipeline(categorical, **kwargs):
    columns = make_column_transformer(
        (PublicBoundsScaler(bounds=(0, 10)), [0, 1]),
        (categorical, [2]),
        ("passthrough", [3]),
        ("drop", [4]),
        **kwargs,
    )
    return make_pipeline(columns, DPLinearRegression(feature_norm=3.0, random_state=0))


def test_a_column_transformer_without_learned_state_deletes_silently():
    X, y = _mixed_data()
    fixed = OneHotEncoder(categories=[[0.0, 1.0, 2.0]], sparse_output=False)
    pipe = _column_pipeline(fixed).fit(X, y)
    assert unlearnable_steps(pipe) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        delete_samples(pipe, [0, 1], positions=True)
    assert pipe[-1].deletion_log_[-1].n_deleted == 2
    # a sparse one-hot block with one entry per row: the density is public
    pipe = _column_pipeline(OneHotEncoder(categories=[[0.0, 1.0, 2.0]])).fit(X, y)
    assert unlearnable_steps(pipe) == []


def test_a_column_transformer_names_the_step_and_attribute_that_learned():
    X, y = _mixed_data()
    pipe = _column_pipeline(OneHotEncoder(sparse_output=False), remainder=StandardScaler())
    pipe.fit(X, y)
    blocked = unlearnable_steps(pipe)
    assert blocked == [
        "columntransformer.onehotencoder (OneHotEncoder: categories_ holds the categories "
        "found in the data (give categories= from a public data dictionary))",
    ]
    coef = pipe[-1].coef_.copy()
    with pytest.raises(UnlearningError, match=r"columntransformer\.onehotencoder"):
        delete_samples(pipe, [0], positions=True)
    np.testing.assert_array_equal(pipe[-1].coef_, coef)
    assert pipe[-1].deletion_log_ == []

    scaled = make_column_transformer(
        (StandardScaler(), [0, 1]),
        (OneHotEncoder(categories=[[0.0, 1.0, 2.0]], min_frequency=5), [2]),
    )
    pipe = make_pipeline(scaled, DPLinearRegression(feature_norm=3.0, random_state=0)).fit(X, y)
    blocked = " | ".join(unlearnable_steps(pipe))
    assert "columntransformer.standardscaler (StandardScaler: mean_, n_samples_seen_" in blocked
    assert "columntransformer.onehotencoder (OneHotEncoder: infrequent_categories_" in blocked
    with pytest.warns(IncompleteUnlearningWarning, match="StandardScaler: mean_"):
        delete_samples(pipe, [0], on_unlearnable="warn", positions=True)


def test_a_data_dependent_sparse_choice_is_named():
    X, y = _mixed_data()
    lenient = OneHotEncoder(categories=[[0.0, 1.0, 2.0]], handle_unknown="ignore")
    pipe = _column_pipeline(lenient).fit(X, y)
    (blocked,) = unlearnable_steps(pipe)
    assert blocked.startswith("columntransformer (ColumnTransformer: sparse_output_ was chosen")
    dense = _column_pipeline(lenient, sparse_threshold=0).fit(X, y)
    assert unlearnable_steps(dense) == []


def test_positions_behind_a_step_must_be_confirmed_so_a_lost_index_cannot_delete_another_person():
    # A DataFrame with integer column labels records no feature_names_in_: the
    # pipeline cannot tell it saw a DataFrame, and the model behind the scaler
    # numbered its rows by position. Deleting the label 253 must not silently
    # delete whoever sits at position 253.
    pd = pytest.importorskip("pandas")
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(-1, 1, (1000, 2)), index=np.arange(1000) + 0)
    y = X[0] - X[1]
    X_train, _, y_train, _ = train_test_split(X, y, random_state=0)
    victim = int(X_train.index[0])
    pipe = make_pipeline(
        PublicBoundsScaler(bounds=(-1, 1)), DPLinearRegression(feature_norm=2.0, random_state=0)
    ).fit(X_train, y_train)
    assert not hasattr(pipe, "feature_names_in_")
    coef = pipe[-1].coef_.copy()
    with pytest.raises(UnlearningError, match="positions=True"):
        delete_samples(pipe, victim)
    np.testing.assert_array_equal(pipe[-1].coef_, coef)
    # the fixes the message names both delete the right person
    kept = make_pipeline(
        PublicBoundsScaler(bounds=(-1, 1)), DPLinearRegression(feature_norm=2.0, random_state=0)
    ).set_output(transform="pandas")
    kept.fit(X_train, y_train)
    delete_samples(kept, victim)
    assert victim not in kept[-1].unlearning_state_.registry.live()[1].tolist()
    # a step that is the pipeline's first step saw the raw input: no confirmation needed
    first = make_pipeline(DPLinearRegression(random_state=0)).fit(X_train.to_numpy(), y_train)
    delete_samples(first, [0])


def test_an_incomplete_deletion_says_so_in_the_reports_an_auditor_reads():
    X, y = _mixed_data()
    pipe = _column_pipeline(OneHotEncoder(sparse_output=False)).fit(X, y)
    with pytest.warns(IncompleteUnlearningWarning):
        delete_samples(pipe, [0], on_unlearnable="warn", positions=True)
    (note,) = [n for n in pipe[-1].deletion_log_[-1].notes if n.startswith("INCOMPLETE")]
    assert "columntransformer.onehotencoder" in note and "categories_" in note
    # a complete deletion carries no such note
    fixed = OneHotEncoder(categories=[[0.0, 1.0, 2.0]], sparse_output=False)
    pipe = _column_pipeline(fixed).fit(X, y)
    delete_samples(pipe, [0], positions=True)
    assert not any(n.startswith("INCOMPLETE") for n in pipe[-1].deletion_log_[-1].notes)
