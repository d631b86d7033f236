"""Sample ids name the right person: index labels, one-id strings, valid ids, short errors."""

import doctest
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sklearn_dpu import UnlearningError
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.unlearning import delete_samples
from sklearn_dpu.unlearning.ids import POSITIONS_NOTE, as_id_list, check_id_array

ESTIMATORS = {
    "linear": DPLinearRegression(feature_norm=1.8, target_bound=1.0, random_state=0),
    "logistic": DPLogisticRegression(random_state=0),
    "sgd": UnlearnableSGDClassifier(random_state=0, max_iter=20),
    "search": PrivateGridSearch(
        DPLinearRegression(feature_norm=1.8, target_bound=1.0),
        {"alpha": [0.0, 1.0]},
        random_state=0,
    ),
}
STREAMING = ["linear", "logistic", "sgd"]


def _frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.uniform(-1, 1, (n, 3)), columns=["a", "b", "c"])
    return X, pd.Series((X["a"] > 0).astype(int), name="y")


def _make(name):
    return clone(ESTIMATORS[name])


def _registry(estimator):
    inner = getattr(estimator, "best_estimator_", estimator)
    return inner.unlearning_state_.registry


def _live_ids(estimator) -> set:
    """Ids the estimator holds (for a search: its model's and the validation part's)."""
    held = set(_registry(estimator).live()[1].tolist())
    return held | getattr(estimator, "_validation_ids", set())


def _partial_fit(estimator, X, y, **kwargs):
    if isinstance(estimator, DPLinearRegression):
        return estimator.partial_fit(X, y, **kwargs)
    return estimator.partial_fit(X, y, classes=[0, 1], **kwargs)


# ------------------------------------------------------- default ids: labels


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_dataframe_ids_are_index_labels_after_a_split(name):
    X, y = _frame()
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.3, random_state=0)
    estimator = _make(name).fit(X_train, y_train)
    # A customer whose label is beyond the training set's length: as a row
    # position it does not exist; as a label it is that customer.
    label = int(X_train.index[X_train.index >= len(X_train)][0])
    other = int(next(i for i in X_train.index if i != label))
    estimator.delete_samples([label])
    live = _live_ids(estimator)
    assert label not in live and other in live
    assert live == set(X_train.index.tolist()) - {label}
    assert estimator.deletion_log_[-1].n_deleted == 1
    assert POSITIONS_NOTE not in estimator.deletion_log_[-1].notes


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_repeated_index_labels_are_refused_at_fit(name):
    X, y = _frame()
    X = pd.concat([X.iloc[:150], X.iloc[:150]])  # labels 0..149 twice
    estimator = _make(name)
    with pytest.raises(ValueError, match="index labels repeat"):
        estimator.fit(X, y.iloc[:300])
    assert not hasattr(estimator, "deletion_log_")  # left unfitted


@pytest.mark.parametrize("name", STREAMING)
def test_array_ids_are_positions_and_the_first_report_says_so(name):
    X, y = _frame()
    estimator = _partial_fit(_make(name), X.to_numpy()[:200], y.to_numpy()[:200])
    _partial_fit(estimator, X.to_numpy()[200:], y.to_numpy()[200:])
    assert _live_ids(estimator) == set(range(300))  # positions continue across calls
    estimator.delete_samples([250])
    estimator.delete_samples([3])
    first, second = estimator.deletion_log_
    assert first.notes[0] == POSITIONS_NOTE and "row positions" in first.summary()
    assert POSITIONS_NOTE not in second.notes


def test_search_with_arrays_notes_positions_once():
    X, y = _frame()
    search = _make("search").fit(X.to_numpy(), y.to_numpy())
    search.delete_samples(7)
    search.delete_samples(8)
    assert search.deletion_log_[0].notes[0] == POSITIONS_NOTE
    assert POSITIONS_NOTE not in search.deletion_log_[1].notes


@pytest.mark.filterwarnings("ignore:X (does not have valid|has) feature names")
@pytest.mark.parametrize("name", STREAMING)
def test_positions_and_index_labels_do_not_mix_in_a_stream(name):
    X, y = _frame()
    estimator = _partial_fit(_make(name), X.iloc[:200], y.iloc[:200])
    before = pickle.dumps(estimator)
    with pytest.raises(ValueError, match="pass sample_id"):
        _partial_fit(estimator, X.to_numpy()[200:], y.to_numpy()[200:])
    assert pickle.dumps(estimator) == before
    positional = _partial_fit(_make(name), X.to_numpy()[:200], y.to_numpy()[:200])
    with pytest.raises(ValueError, match="row positions"):
        _partial_fit(positional, X.iloc[200:], y.iloc[200:])
    _partial_fit(positional, X.iloc[200:], y.iloc[200:], sample_id=[f"n{i}" for i in range(100)])


# --------------------------------------------------- a string is one id


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_bare_string_is_one_id(name):
    X, y = _frame(n=200)
    ids = [str(i) for i in range(200)]
    estimator = _make(name).fit(X.to_numpy(), y.to_numpy(), sample_id=ids)
    model_ids = sorted(_live_ids(estimator), key=int)
    target = next(i for i in model_ids if len(i) == 2 and i[0] in model_ids and i[1] in model_ids)
    estimator.delete_samples(target)
    live = _live_ids(estimator)
    assert target not in live and target[0] in live and target[1] in live
    assert estimator.deletion_log_[-1].n_deleted == 1


@pytest.mark.parametrize("name", STREAMING)
def test_scalar_ids_are_one_id(name):
    X, y = _frame(n=200)
    big = np.arange(200, dtype=np.uint64) + np.uint64(2**63 + 5)
    estimator = _make(name).fit(X.to_numpy(), y.to_numpy(), sample_id=big)
    estimator.delete_samples(big[3])  # a numpy scalar
    estimator.delete_samples(2**63 + 9)  # a Python int above int64
    live = _live_ids(estimator)
    assert 2**63 + 8 not in live and 2**63 + 9 not in live and 2**63 + 5 in live
    assert len(live) == 198


def test_pipeline_helper_reads_one_string_as_one_id():
    X, y = _frame(n=200)
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), _make("linear"))
    pipe.fit(X.to_numpy(), y.to_numpy(), dplinearregression__sample_id=[f"{i}" for i in range(200)])
    delete_samples(pipe, "12")
    live = _live_ids(pipe[-1])
    assert "12" not in live and {"1", "2"} <= live


def test_as_id_list():
    assert as_id_list("12") == ["12"] and as_id_list(b"ab") == [b"ab"]
    assert as_id_list(np.int64(4)) == [4] and as_id_list(4) == [4]
    assert as_id_list(np.array(["x", "y"])) == ["x", "y"]
    assert as_id_list(pd.Index([2**63 + 1], dtype=np.uint64)) == [2**63 + 1]
    assert as_id_list((1, 2)) == [1, 2]  # a tuple is a sequence of ids


# ------------------------------------------------------- valid ids at fit


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize(
    "bad",
    [
        np.r_[np.arange(199.0), np.nan],
        [*range(199), float("nan")],
        [*range(199), pd.NA],
        np.array([*map(str, range(199)), None], dtype=object),
        [*map(str, range(199)), ["unhashable"]],
        np.arange(200) % 150,  # repeats
    ],
    ids=["nan-array", "nan-list", "pd.NA", "None", "unhashable", "repeated"],
)
def test_undeletable_ids_are_refused_at_fit(name, bad):
    X, y = _frame(n=200)
    estimator = _make(name)
    with pytest.raises((ValueError, TypeError), match="sample_id"):
        estimator.fit(X.to_numpy(), y.to_numpy(), sample_id=bad)
    assert not hasattr(estimator, "deletion_log_")


@pytest.mark.parametrize("name", STREAMING)
def test_nan_ids_are_refused_at_partial_fit_without_effect(name):
    X, y = _frame(n=200)
    estimator = _make(name).fit(X.to_numpy()[:100], y.to_numpy()[:100], sample_id=np.arange(100.0))
    before = pickle.dumps(estimator)
    with pytest.raises(ValueError, match="NaN"):
        _partial_fit(
            estimator, X.to_numpy()[100:], y.to_numpy()[100:], sample_id=np.full(100, np.nan)
        )
    assert pickle.dumps(estimator) == before


def test_nan_index_labels_are_refused():
    X, y = _frame(n=200)
    X.index = np.r_[np.arange(199.0), np.nan]
    with pytest.raises(ValueError, match="index labels of X"):
        _make("linear").fit(X, y.to_numpy())


def test_uint64_ids_stay_exact_through_pickling():
    X, y = _frame(n=200)
    ids = np.arange(200, dtype=np.uint64) + np.uint64(2**64 - 1000)
    estimator = pickle.loads(
        pickle.dumps(_make("linear").fit(X.to_numpy(), y.to_numpy(), sample_id=ids))
    )
    assert _live_ids(estimator) == set(ids.tolist())
    estimator.delete_samples([2**64 - 1000])
    assert 2**64 - 1000 not in _live_ids(estimator)


def test_numeric_ids_are_checked_without_an_object_pass():
    ids = np.arange(10**6, dtype=np.float64)
    assert check_id_array(ids).dtype == np.float64
    assert check_id_array(pd.RangeIndex(10**6)).dtype == np.int64


# ------------------------------------------------- errors do not leak ids


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_unknown_ids_are_counted_and_shown_truncated(name):
    X, y = _frame(n=200)
    emails = [f"customer{i}@example-company.com" for i in range(200)]
    estimator = _make(name).fit(X.to_numpy(), y.to_numpy(), sample_id=emails)
    unknown = [f"stranger{i}@example-company.com" for i in range(10)]
    with pytest.raises(UnlearningError) as info:
        estimator.delete_samples(unknown)
    message = str(info.value)
    assert "10" in message and "(and 7 more)" in message
    assert not any(address in message for address in unknown)


def test_clashing_ids_at_partial_fit_are_counted_and_truncated():
    X, y = _frame(n=200)
    emails = [f"customer{i}@example-company.com" for i in range(100)]
    estimator = _make("linear").fit(X.to_numpy()[:100], y.to_numpy()[:100], sample_id=emails)
    with pytest.raises(ValueError, match="100 sample id") as info:
        estimator.partial_fit(X.to_numpy()[100:], y.to_numpy()[100:], sample_id=emails)
    assert not any(address in str(info.value) for address in emails)


# ---------------------------------------------------------- pipelines


def test_pipeline_that_lost_the_index_refuses_to_delete_labels():
    X, y = _frame()
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.3, random_state=0)
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), _make("linear"))
    pipe.fit(X_train, y_train)  # the scaler returns an array: the index is gone
    before = pickle.dumps(pipe)
    with pytest.raises(UnlearningError, match="dropped the index.*pass positions=True"):
        delete_samples(pipe, [int(X_train.index[0])])
    assert pickle.dumps(pipe) == before
    # The caller who confirms that the ids are row positions is served.
    delete_samples(pipe, [0], positions=True)
    assert pipe[-1].deletion_log_[-1].n_deleted == 1
    assert 0 not in _live_ids(pipe[-1])


def test_positions_are_refused_where_a_step_knows_its_rows_by_label():
    # Index 199 .. 0: position 0 is the row labelled 199.
    X, y = _frame(n=200)
    X.index = X.index[::-1]
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), _make("linear"))
    pipe.set_output(transform="pandas").fit(X, y)
    before = pickle.dumps(pipe)
    with pytest.raises(UnlearningError, match="by DataFrame index labels or sample_id values"):
        delete_samples(pipe, [0], positions=True)
    assert pickle.dumps(pipe) == before


def test_pipeline_keeping_the_index_deletes_labels():
    X, y = _frame()
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.3, random_state=0)
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), _make("linear"))
    pipe.set_output(transform="pandas").fit(X_train, y_train)
    label = int(X_train.index[X_train.index >= len(X_train)][0])
    delete_samples(pipe, label)
    assert _live_ids(pipe[-1]) == set(X_train.index.tolist()) - {label}


# ---------------------------------------------------------- residues


def test_only_positional_streams_pickle_the_row_counter():
    X, y = _frame(n=200)
    labelled = _make("linear").fit(X, y)
    labelled.delete_samples([5])
    state = _registry(labelled).__getstate__()
    assert state["n_seen"] is None and state["id_kind"] == "index"

    positional = _make("linear").fit(X.to_numpy(), y.to_numpy())
    positional.delete_samples([199])  # the last position
    positional = pickle.loads(pickle.dumps(positional))
    positional.partial_fit(X.to_numpy()[:1], y.to_numpy()[:1])
    # the new row gets position 200, never the deleted row's 199
    assert 199 not in _live_ids(positional) and 200 in _live_ids(positional)
    n_deleted = sum(r.n_deleted for r in positional.deletion_log_)
    assert _registry(positional).n_seen == len(_live_ids(positional)) + n_deleted


def test_the_deletion_requests_page_examples_run():
    page = Path(__file__).parents[1] / "doc" / "deletion_requests.rst"
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10 and result.failed == 0


def test_registry_pickles_of_format_1_load_as_positions():
    X, y = _frame(n=50)
    estimator = _make("linear").fit(X.to_numpy(), y.to_numpy())
    registry = _registry(estimator)
    state = {**registry.__getstate__(), "_format_version": 1}
    del state["id_kind"]
    old = type(registry).__new__(type(registry))
    old.__setstate__(state)
    assert old.id_kind == "positions" and old.n_seen == 50
    assert old.default_ids(2).tolist() == [50, 51]


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_bare_string_is_not_a_list_of_ids_at_fit_either(name):
    X, y = _frame(3)
    est = _make(name)
    with pytest.raises(TypeError, match="one id per row"):
        est.fit(X.to_numpy(), y.to_numpy(), sample_id="abc")
    assert not hasattr(est, "privacy_ledger_")


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_boolean_ids_are_refused_since_true_equals_one(name):
    X, y = _frame()
    with pytest.raises(TypeError, match="boolean"):
        _make(name).fit(X, y, sample_id=[True, *range(1, len(X))])
    est = _make(name).fit(X.to_numpy(), y.to_numpy())
    before = pickle.dumps(est)
    for request in (False, np.array([True, False]), [1, True], pd.Series([True, False])):
        with pytest.raises(TypeError, match="boolean"):
            est.delete_samples(request)
    assert pickle.dumps(est) == before


def test_a_dataframe_is_not_a_list_of_ids():
    # Iterating a DataFrame yields its column labels: deleting "the rows of
    # X.loc[[4]]" would delete ids 0 and 1 (the columns) instead of id 4.
    rows = pd.DataFrame({0: [1.0], 1: [2.0]}, index=[4])
    with pytest.raises(TypeError, match="sample ids are a DataFrame"):
        as_id_list(rows)
    assert as_id_list(rows.index) == [4]


@pytest.mark.parametrize(
    "ids",
    [np.array([True, 2, 3], dtype=object), pd.Index([True, 2, 3], dtype=object)],
    ids=["object array", "Index"],
)
def test_booleans_are_refused_as_ids_in_any_container(ids):
    with pytest.raises(TypeError, match="booleans"):
        check_id_array(ids)


def test_a_dataframe_is_not_a_sample_id_column():
    frame = pd.DataFrame({"uid": [101, 102]})
    with pytest.raises(TypeError, match="sample_id is a DataFrame"):
        check_id_array(frame)
    assert check_id_array(frame["uid"]).tolist() == [101, 102]


def test_a_row_of_x_is_not_a_list_of_ids():
    # Whole-number features: read as ids, the row {"age": 3, "orders": 2}
    # would delete customers 3 and 2 instead of the row's own customer.
    X = pd.DataFrame({"age": [3.0, 1.0, 2.0, 0.5] * 5, "orders": [2.0, 0.0, 1.0, 3.0] * 5})
    y = np.arange(20) % 2
    est = DPLogisticRegression(feature_norm=5.0, random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="as a row of X is"):
        est.delete_samples(X.loc[0])
    # The same row from a frame that also holds the target, columns reordered.
    with_target = X.assign(y=y)[["y", "orders", "age"]]
    with pytest.raises(TypeError, match="as a row of X is"):
        est.delete_samples(with_target.loc[0])
    assert est.unlearning_state_.registry.n_samples == 20
    est.delete_samples([X.loc[0].name])
    assert est.unlearning_state_.registry.n_samples == 19


def test_an_unknown_id_error_says_what_the_ids_are():
    X, y = np.random.default_rng(0).uniform(-1, 1, (20, 2)), np.arange(20) % 2
    est = DPLogisticRegression(feature_norm=2.0, random_state=0).fit(X, y)
    with pytest.raises(UnlearningError, match="ids are row positions"):
        est.delete_samples(["cust-3"])
    given = DPLogisticRegression(feature_norm=2.0, random_state=0)
    given.fit(X, y, sample_id=[f"c{i}" for i in range(20)])
    with pytest.raises(UnlearningError, match="sample_id values or DataFrame index labels"):
        given.delete_samples([3])
