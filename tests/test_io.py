"""Persistence: skops with the library's types trusted, versioned state, clear errors."""

import pickle

import numpy as np
import pandas as pd
import pytest
import skops.io
from sklearn.base import BaseEstimator, TransformerMixin, clone, is_classifier
from sklearn.pipeline import make_pipeline

from sklearn_dpu import PersistenceError, PrivacyBudget, StateVersionError
from sklearn_dpu import base as dpu_base
from sklearn_dpu import io as dpu_io
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.linear_model._coupled_sgd import CoupledSGDState
from sklearn_dpu.linear_model._dp_logistic import LogisticUnlearningState
from sklearn_dpu.linear_model._linear_state import LinearStatisticsState
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.unlearning.state import SampleRegistry

from ._sgd_coupling_controls import as_format_2
from .test_estimator_checks import ESTIMATORS


def _data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(60, 3))
    return X, X @ [0.3, 0.1, -0.2]


def _exercised(estimator):
    """Fit, stream and delete, so every state type appears."""
    X, y = _data()
    if is_classifier(estimator):
        y = (y > 0).astype(int)
    estimator = estimator.fit(X[:40], y[:40])
    deleted = [0, 1]
    if hasattr(estimator, "partial_fit"):
        estimator.partial_fit(X[40:], y[40:])
        deleted = [0, 41]
    if hasattr(estimator, "delete_samples"):
        estimator.delete_samples(deleted)
    return estimator


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_trusted_types_cover_every_fitted_estimator(tmp_path, estimator):
    path = tmp_path / "model.skops"
    estimator = clone(estimator)
    if "random_state" in estimator.get_params():
        estimator.set_params(random_state=0)
    fitted = _exercised(estimator)
    dpu_io.save(fitted, path)
    untrusted = set(skops.io.get_untrusted_types(file=path))
    assert untrusted <= set(dpu_io.TRUSTED_TYPES), untrusted - set(dpu_io.TRUSTED_TYPES)
    loaded = dpu_io.load(path)
    X, _ = _data()
    method = "predict" if hasattr(fitted, "predict") else "transform"
    np.testing.assert_array_equal(getattr(loaded, method)(X), getattr(fitted, method)(X))


def test_pipeline_with_a_budget_round_trips(tmp_path, budget_path):
    X, y = _data()
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    pipe = make_pipeline(PublicBoundsScaler(), DPLinearRegression(budget=budget, random_state=0))
    pipe.fit(X, y)
    dpu_io.save(pipe, tmp_path / "pipe.skops")
    loaded = dpu_io.load(tmp_path / "pipe.skops")
    assert loaded[-1].budget.path == budget.path
    loaded[-1].delete_samples([3])
    assert len(budget.history()) == 2


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda blob: blob[: len(blob) // 2],
        lambda blob: b"not a zip file at all",
        lambda blob: blob.replace(b"schema.json", b"schemb.json"),
    ],
    ids=["truncated", "garbage", "broken-archive"],
)
def test_corrupted_files_fail_clearly(tmp_path, corrupt):
    path = tmp_path / "model.skops"
    dpu_io.save(_exercised(DPLinearRegression(random_state=0)), path)
    path.write_bytes(corrupt(path.read_bytes()))
    before = path.read_bytes()
    with pytest.raises(PersistenceError, match="model.skops"):
        dpu_io.load(path)
    assert path.read_bytes() == before


def test_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        dpu_io.load(tmp_path / "nope.skops")


def test_future_estimator_format_is_refused(tmp_path, monkeypatch):
    fitted = _exercised(DPLinearRegression(random_state=0))
    monkeypatch.setattr(dpu_base, "STATE_FORMAT_VERSION", 99)
    dpu_io.save(fitted, tmp_path / "future.skops")
    blob = pickle.dumps(fitted)
    monkeypatch.undo()
    with pytest.raises(StateVersionError, match="format 99"):
        dpu_io.load(tmp_path / "future.skops")
    with pytest.raises(StateVersionError, match="format 99"):
        pickle.loads(blob)


def test_future_metadata_format_is_refused(monkeypatch):
    fitted = _exercised(DPLinearRegression(random_state=0))
    monkeypatch.setattr(SampleRegistry, "FORMAT_VERSION", 7)
    blob = pickle.dumps(fitted)
    monkeypatch.undo()
    with pytest.raises(StateVersionError, match="SampleRegistry state has format version 7"):
        pickle.loads(blob)


def _refused_both_ways(fitted, tmp_path, monkeypatch, match):
    """Save ``fitted`` by skops and by pickle under the monkeypatched format,
    undo the patches, and check both files are refused with StateVersionError."""
    dpu_io.save(fitted, tmp_path / "old.skops")
    blob = pickle.dumps(fitted)
    monkeypatch.undo()
    with pytest.raises(StateVersionError, match=match):
        dpu_io.load(tmp_path / "old.skops")
    with pytest.raises(StateVersionError, match=match):
        pickle.loads(blob)


def test_linear_state_saved_under_its_former_module_loads(tmp_path, monkeypatch):
    """LinearStatisticsState moved from _dp_linear to _linear_state (same
    layout, same state format): files that name it by its former path still
    load, by skops and by pickle."""
    fitted = _exercised(DPLinearRegression(random_state=0))
    monkeypatch.setattr(LinearStatisticsState, "__module__", "sklearn_dpu.linear_model._dp_linear")
    dpu_io.save(fitted, tmp_path / "before_move.skops")
    blob = pickle.dumps(fitted)
    monkeypatch.undo()
    assert b"_linear_state" not in blob
    for loaded in (dpu_io.load(tmp_path / "before_move.skops"), pickle.loads(blob)):
        assert type(loaded.unlearning_state_) is LinearStatisticsState
        np.testing.assert_array_equal(loaded.coef_, fitted.coef_)
        loaded.delete_samples([2])


def test_logistic_state_of_dict_chunks_is_refused(tmp_path, monkeypatch):
    """A DPLogisticRegression file of format 1 (chunks stored as dicts) fails
    with StateVersionError, on skops and on pickle, instead of loading a state
    the estimator cannot read."""
    fitted = _exercised(DPLogisticRegression(solver="output", C=0.05, random_state=0))
    state = fitted.unlearning_state_
    old_chunks = [{**vars(c), "config": vars(c.config)} for c in state.chunks]
    monkeypatch.setattr(LogisticUnlearningState, "FORMAT_VERSION", 1)
    monkeypatch.setattr(state, "chunks", old_chunks)
    _refused_both_ways(fitted, tmp_path, monkeypatch, "format version 1")


def test_logistic_state_of_format_2_is_refused(tmp_path, monkeypatch):
    """Format 2 named the per-chunk model ChunkRecord; format 3 (ChunkModel)
    refuses such a file with StateVersionError, on skops and on pickle."""
    fitted = _exercised(DPLogisticRegression(solver="output", C=0.05, random_state=0))
    assert LogisticUnlearningState.FORMAT_VERSION == 3
    monkeypatch.setattr(LogisticUnlearningState, "FORMAT_VERSION", 2)
    _refused_both_ways(fitted, tmp_path, monkeypatch, "format version 2")


def _sgd_with_old_format(monkeypatch, version, plan=None):
    """A fitted SGD that saves as state format ``version`` (1: the schedule
    stored as ``plan``, a dict; 2: as a RunPlan), with the edit bookkeeping
    in its stored run."""
    X, y = _data()
    fitted = UnlearnableSGDClassifier(random_state=0, max_iter=5, batch_size=20)
    fitted.fit(X, y > 0)
    as_format_2(fitted, monkeypatch, plan)
    monkeypatch.setattr(CoupledSGDState, "FORMAT_VERSION", version)
    return fitted


@pytest.mark.parametrize("version", [1, 2])
def test_sgd_state_of_an_old_format_converts_its_plan_and_bookkeeping(
    tmp_path, monkeypatch, version
):
    """A CoupledSGDState of format 1 stored its schedule as a dict with
    RunPlan's keys, format 2 as a RunPlan, both with the estimator's edit
    bookkeeping: skops and pickle load it as an SGDSchedule and an
    edit_ledger_, and the loaded model edits exactly as the current format
    does."""
    X, y = _data()
    current = UnlearnableSGDClassifier(random_state=0, max_iter=5, batch_size=20).fit(X, y > 0)
    schedule = current.unlearning_state_.schedule
    old = _sgd_with_old_format(monkeypatch, version, dict(vars(schedule)) if version == 1 else None)
    dpu_io.save(old, tmp_path / "old.skops")
    blob = pickle.dumps(old)
    monkeypatch.undo()
    for loaded in (dpu_io.load(tmp_path / "old.skops"), pickle.loads(blob)):
        assert loaded.unlearning_state_.schedule == schedule
        assert not hasattr(loaded.unlearning_state_, "plan")
        assert not hasattr(loaded.unlearning_state_, "_legacy_bookkeeping")
        assert loaded.edit_ledger_.params == current.edit_ledger_.params
        loaded.delete_samples([0, 1, 2])
        again = pickle.loads(pickle.dumps(current)).delete_samples([0, 1, 2])
        np.testing.assert_array_equal(loaded.coef_, again.coef_)
        assert loaded.privacy_ledger_ == again.privacy_ledger_
        assert loaded.edit_ledger_.counters == again.edit_ledger_.counters


def test_sgd_state_of_format_1_with_an_unknown_plan_is_refused(tmp_path, monkeypatch):
    old = _sgd_with_old_format(monkeypatch, 1, {"bucket": 40, "noise": 1.0})
    _refused_both_ways(old, tmp_path, monkeypatch, "CoupledSGDState state has format version 1")


class Doubler(TransformerMixin, BaseEstimator):
    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return 2 * np.asarray(X)


def test_untrusted_types_are_named_and_can_be_trusted_explicitly(tmp_path):
    X, y = _data()
    pipe = make_pipeline(Doubler(), DPLinearRegression(random_state=0)).fit(X, y)
    dpu_io.save(pipe, tmp_path / "pipe.skops")
    name = f"{__name__}.Doubler"
    with pytest.raises(PersistenceError, match=name):
        dpu_io.load(tmp_path / "pipe.skops")
    loaded = dpu_io.load(tmp_path / "pipe.skops", trusted=[name])
    np.testing.assert_array_equal(loaded.predict(X), pipe.predict(X))


def test_a_pickle_naming_the_format_2_logistic_record_is_refused_by_version():
    """Format-2 files pickled the per-chunk models as ``ChunkRecord``, a class
    that no longer exists: loading one says which format it is, instead of
    failing inside pickle with an AttributeError."""
    payload = b"csklearn_dpu.linear_model._logistic_releases\nChunkRecord\n."
    with pytest.raises(StateVersionError, match="format 2"):
        pickle.loads(payload)


@pytest.mark.parametrize(
    "ids",
    [
        pd.timedelta_range("1h", periods=20, freq="h"),
        ["a", pd.Timestamp(0), *[f"r{i}" for i in range(18)]],
    ],
    ids=["Timedelta", "Timestamp among strings"],
)
def test_ids_a_skops_file_cannot_rebuild_are_refused_before_writing(tmp_path, ids):
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (20, 2)), rng.uniform(-1, 1, 20)
    est = DPLinearRegression(feature_norm=2.0, target_bound=1.0, random_state=0)
    est.fit(X, y, sample_id=ids)
    path = tmp_path / "m.skops"
    with pytest.raises(PersistenceError, match="cannot be saved in a skops file"):
        dpu_io.save(est, path)
    assert not path.exists()
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-1, 1)), clone(est))
    pipe.fit(X, y, dplinearregression__sample_id=ids)
    with pytest.raises(PersistenceError, match="cannot be saved in a skops file"):
        dpu_io.save(pipe, path)
    # Ids of the same kinds as strings save and load.
    strings = [str(v) for v in ids]
    dpu_io.save(est.fit(X, y, sample_id=strings), path)
    assert dpu_io.load(path).unlearning_state_.registry.live()[1].tolist() == strings
