"""Compact and disk-backed deletion metadata (issue 14: out of core on one machine)."""

import copy
import gc
import pickle
import tracemalloc
from contextlib import nullcontext

import numpy as np
import pytest

from sklearn_dpu import io as dpu_io
from sklearn_dpu.exceptions import PersistenceError, UnlearningError
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.unlearning import disk_backed_rows
from sklearn_dpu.unlearning.state import ChunkRuns, PositionIds, SampleRegistry

from .conftest import memmap_stream


def _stream(n_chunks=4, rows=250, d=10, seed=0, **kw):
    rng = np.random.default_rng(seed)
    reg = DPLinearRegression(feature_norm=4.0, target_bound=1.0, random_state=0, **kw)
    for _ in range(n_chunks):
        X = rng.normal(size=(rows, d))
        reg.partial_fit(X, np.clip(0.3 * X[:, 0], -1, 1))
    return reg


def test_metadata_of_a_positional_stream_is_the_codes_alone():
    # Before: 27 bytes a row at d = 10 (22 of int16 codes, a 4-byte chunk
    # number and a 1-byte flag per row). Now the chunks are one run per call
    # and the flags exist only from the first deletion on.
    reg = _stream()
    registry = reg.unlearning_state_.registry
    per_row = registry.nbytes() / registry.capacity
    assert per_row < 2 * 11 + 0.1
    reg.delete_samples([3, 700])
    assert registry.nbytes() / registry.capacity < 2 * 11 + 1.1  # flags: 1 byte a slot


def test_chunk_runs_read_back_as_the_per_row_chunks():
    chunks = np.array([1, 1, 2, 2, 2, 5, 7, 7], dtype=np.int32)
    runs = ChunkRuns.of(chunks)
    assert len(runs.values) == 4
    np.testing.assert_array_equal(runs.expand(10), np.r_[chunks, 0, 0])
    grown = runs.appended(8, 10, 7).appended(10, 11, 8)
    np.testing.assert_array_equal(grown.expand(11), np.r_[chunks, 7, 7, 8])
    assert len(grown.values) == 5


def test_registry_chunks_and_flags_keep_their_meaning_after_deletions():
    registry = SampleRegistry(2)
    for chunk in (1, 2, 3):
        ids = registry.check_new_ids(None, 10)
        registry.add(ids, np.ones((10, 2), np.int16), chunk=chunk)
    np.testing.assert_array_equal(registry.chunks[:30], np.repeat([1, 2, 3], 10))
    assert registry.alive[:30].all()
    registry.remove(registry.slots_of([0, 15]))
    assert registry.chunks[0] == 0 and registry.chunks[15] == 0 and registry.chunks[16] == 2
    assert not registry.alive[[0, 15]].any() and registry.alive[:30].sum() == 28
    loaded = pickle.loads(pickle.dumps(registry))
    np.testing.assert_array_equal(loaded.chunks[:28], np.repeat([1, 2, 3], [9, 9, 10]))


# --- disk-backed rows ------------------------------------------------------


def _bin_files(folder):
    return sorted(folder.glob("sklearn_dpu_rows_*.bin"))


def _chunks(n_chunks=4, rows=250, d=6, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n_chunks):
        X = rng.normal(size=(rows, d))
        yield X, np.clip(0.3 * X[:, 0], -1, 1), (X[:, 0] - X[:, 1] > 0).astype(int)


def _linear_pair(folder, **kw):
    """The same stream in memory and with the rows in ``folder``."""
    make = lambda: DPLinearRegression(feature_norm=4.0, target_bound=1.0, random_state=0, **kw)  # noqa: E731
    memory, disk = make(), make()
    for k, (X, y, _) in enumerate(_chunks()):
        memory.partial_fit(X, y)
        if k == 0:
            with disk_backed_rows(folder):
                disk.partial_fit(X, y)
        else:  # later calls append to the registry's file, context or not
            disk.partial_fit(X, y)
    return memory, disk


def test_disk_backed_stream_is_the_in_memory_stream(tmp_path):
    memory, disk = _linear_pair(tmp_path)
    registry = disk.unlearning_state_.registry
    assert registry.on_disk and isinstance(registry.rows, np.memmap)
    assert len(_bin_files(tmp_path)) == 1
    assert registry.memory_nbytes() < 100  # one run per call, no ids, no flags
    assert registry.nbytes() == memory.unlearning_state_.registry.nbytes()
    np.testing.assert_array_equal(disk.coef_, memory.coef_)
    for model in (memory, disk):
        model.delete_samples([3, 700])
    np.testing.assert_array_equal(disk.coef_, memory.coef_)
    assert disk.privacy_ledger_ == memory.privacy_ledger_
    # The deleted rows are zeros in the file itself, not only in this process.
    on_file = np.fromfile(_bin_files(tmp_path)[0], dtype=np.int16).reshape(-1, 7)
    assert not on_file[[3, 700]].any() and on_file[[2, 701]].any()


@pytest.mark.parametrize(
    "make",
    [
        lambda: DPLogisticRegression(feature_norm=3.0, random_state=0),
        lambda: UnlearnableSGDClassifier(feature_norm=3.0, random_state=0),
    ],
    ids=["logistic", "sgd"],
)
def test_disk_backed_classifiers_fit_and_delete_as_in_memory(tmp_path, make):
    X, _, y = next(_chunks(1, rows=400))
    memory = make().fit(X, y)
    with disk_backed_rows(tmp_path):
        disk = make().fit(X, y)
    assert disk.unlearning_state_.registry.on_disk and len(_bin_files(tmp_path)) == 1
    np.testing.assert_array_equal(disk.coef_, memory.coef_)
    memory.delete_samples([5, 17])
    disk.delete_samples([5, 17])
    np.testing.assert_array_equal(disk.coef_, memory.coef_)


def test_compaction_moves_the_rows_to_a_new_file_and_removes_the_old(tmp_path):
    _, disk = _linear_pair(tmp_path)
    before = _bin_files(tmp_path)
    disk.delete_samples(list(range(600)))  # more than half of 1000: compacted
    after = _bin_files(tmp_path)
    assert len(after) == 1 and after != before
    registry = disk.unlearning_state_.registry
    assert registry.size == 400 and isinstance(registry.rows, np.memmap)
    del disk, registry
    gc.collect()
    assert _bin_files(tmp_path) == []  # the working file goes with the registry


def test_pickle_writes_a_checked_snapshot_and_reloads_deletable(tmp_path):
    memory, disk = _linear_pair(tmp_path)
    blob = pickle.dumps(disk)
    (snapshot,) = tmp_path.glob("*.npy")
    saved = snapshot.read_bytes()
    loaded = pickle.loads(blob)
    registry = loaded.unlearning_state_.registry
    assert registry.on_disk and len(_bin_files(tmp_path)) == 2  # its own working file
    assert snapshot.read_bytes() == saved  # a load never writes the snapshot
    again = pickle.loads(blob)  # so the same file loads again, with both rows
    assert again.unlearning_state_.registry.n_samples == 1000
    loaded.delete_samples([10, 900])
    memory.delete_samples([10, 900])
    np.testing.assert_array_equal(loaded.coef_, memory.coef_)
    # A plain pickle's snapshot is implicit: the deletion removes it (it held
    # the deleted rows); models meant to be kept are saved with io.save.
    assert not snapshot.exists()
    assert again.unlearning_state_.registry.n_samples == 1000  # its own working file


def test_skops_save_and_load_keep_a_disk_backed_model_deletable(tmp_path):
    memory, disk = _linear_pair(tmp_path)
    dpu_io.save(disk, tmp_path / "model.skops")
    loaded = dpu_io.load(tmp_path / "model.skops")
    assert loaded.unlearning_state_.registry.on_disk
    loaded.delete_samples([1])
    memory.delete_samples([1])
    np.testing.assert_array_equal(loaded.coef_, memory.coef_)


def test_a_corrupted_or_missing_snapshot_is_refused_and_left_as_it_is(tmp_path):
    _, disk = _linear_pair(tmp_path)
    blob = pickle.dumps(disk)
    (snapshot,) = tmp_path.glob("*.npy")
    data = bytearray(snapshot.read_bytes())
    data[-5] ^= 0x01  # one bit of one stored row
    snapshot.write_bytes(bytes(data))
    n_files = len(list(tmp_path.iterdir()))
    with pytest.raises(PersistenceError, match="is corrupted"):
        pickle.loads(blob)
    assert snapshot.read_bytes() == bytes(data) and len(list(tmp_path.iterdir())) == n_files
    snapshot.write_bytes(bytes(data[:200]))  # truncated
    with pytest.raises(PersistenceError, match="is corrupted"):
        pickle.loads(blob)
    snapshot.unlink()
    with pytest.raises(PersistenceError, match="does not exist"):
        pickle.loads(blob)


def test_a_moved_snapshot_loads_inside_disk_backed_rows(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    _, disk = _linear_pair(first)
    blob = pickle.dumps(disk)
    for snapshot in first.glob("*.npy"):
        snapshot.rename(second / snapshot.name)
    with disk_backed_rows(second):
        loaded = pickle.loads(blob)
    assert len(_bin_files(second)) == 1
    loaded.delete_samples([0])


def test_unknown_id_leaves_the_disk_backed_model_and_its_file_unchanged(tmp_path):
    _, disk = _linear_pair(tmp_path)
    (working,) = _bin_files(tmp_path)
    before, coef = working.read_bytes(), disk.coef_.copy()
    with pytest.raises(UnlearningError, match="not in the training set"):
        disk.delete_samples([3, 10**9])
    assert working.read_bytes() == before
    np.testing.assert_array_equal(disk.coef_, coef)
    assert disk.unlearning_state_.registry.n_samples == 1000


def test_a_deep_copy_gets_its_own_file(tmp_path):
    _, disk = _linear_pair(tmp_path)
    twin = copy.deepcopy(disk)
    assert len(_bin_files(tmp_path)) == 2 and not list(tmp_path.glob("*.npy"))
    twin.delete_samples([4])
    assert disk.unlearning_state_.registry.rows[4].any()


def test_disk_backed_rows_needs_an_existing_directory(tmp_path):
    with pytest.raises(NotADirectoryError, match="existing directory"):
        with disk_backed_rows(tmp_path / "missing"):
            pass


def test_partial_fit_over_a_memmap_4x_the_allowed_memory_with_rows_on_disk(tmp_path):
    # The benchmark's goal (benchmarks/bench_dask.py) at a test's size: the
    # stream's Python-heap peak is at most a quarter of the data. With the
    # rows in memory it is not (int16 codes of 21 columns are 0.25 of the
    # float64 data by themselves, before their growth margin).
    n, d, chunk = 40_000, 20, 2_000
    data = memmap_stream(tmp_path / "Xy.npy", n, d)
    store = tmp_path / "store"
    store.mkdir()
    peaks = {}
    for on_disk in (False, True):
        reg = DPLinearRegression(feature_norm=4.0, target_bound=1.0, random_state=0)
        tracemalloc.start()
        try:
            for start in range(0, n, chunk):
                block = data[start : start + chunk]
                context = disk_backed_rows(store) if on_disk and start == 0 else nullcontext()
                with context:
                    reg.partial_fit(block[:, :d], block[:, d])
            peaks[on_disk] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert reg.unlearning_state_.registry.on_disk == on_disk
    assert peaks[True] <= 0.25 * data.nbytes < peaks[False]


# --- Dask fits with the rows on disk -----------------------------------------


@pytest.mark.parametrize(
    "make, target",
    [
        (lambda: DPLinearRegression(feature_norm=3.0, target_bound=1.0, random_state=0), 1),
        (lambda: DPLogisticRegression(feature_norm=3.0, solver="noisy_gd", random_state=0), 2),
    ],
    ids=["linear", "logistic"],
)
def test_dask_fit_writes_its_rows_to_disk_and_deletes_as_in_memory(tmp_path, make, target):
    da = pytest.importorskip("dask.array")
    X, y_reg, y_clf = next(_chunks(1, rows=3000))
    y = y_reg if target == 1 else y_clf
    Xd, yd = da.from_array(X, chunks=(500, X.shape[1])), da.from_array(y, chunks=500)
    memory = make().fit(Xd, yd)
    with disk_backed_rows(tmp_path):
        disk = make().fit(Xd, yd)
    registry = disk.unlearning_state_.registry
    assert registry.on_disk and registry.memory_nbytes() < 100
    np.testing.assert_array_equal(registry.rows, memory.unlearning_state_.registry.rows)
    np.testing.assert_allclose(disk.coef_, memory.coef_, rtol=1e-12, atol=1e-14)
    memory.delete_samples([7, 2999])
    disk.delete_samples([7, 2999])
    np.testing.assert_allclose(disk.coef_, memory.coef_, rtol=1e-12, atol=1e-14)
    gc.collect()
    assert len(_bin_files(tmp_path)) == 1  # the scratch file of the gather is gone


def test_dask_fit_with_rows_on_disk_never_holds_all_the_codes(tmp_path):
    da = pytest.importorskip("dask.array")
    # Enough rows that all the codes outweigh the encoder's per-block buffers
    # (about 1 MB per Dask block in flight) by a wide margin.
    n, d = 500_000, 10
    path = tmp_path / "X.npy"
    data = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d))
    data[:] = np.random.default_rng(0).normal(size=(n, d))
    data.flush()
    del data
    X = np.load(path, mmap_mode="r")
    Xd, yd = da.from_array(X, chunks=(5000, d)), da.from_array(np.clip(X[:, 0], -1, 1), 5000)
    store = tmp_path / "store"
    store.mkdir()
    codes_bytes, peaks = n * (d + 1) * 2, {}
    for on_disk in (False, True):
        est = DPLinearRegression(feature_norm=3.0, target_bound=1.0, random_state=0)
        tracemalloc.start()
        try:
            with disk_backed_rows(store) if on_disk else nullcontext():
                est.fit(Xd, yd)
            peaks[on_disk] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    # In memory: all the codes (and their concatenation); on disk: a few blocks.
    assert peaks[False] > codes_bytes and peaks[True] < 0.5 * codes_bytes


def test_default_ids_of_a_call_are_a_range_not_an_array():
    registry = SampleRegistry(2)
    ids = registry.check_new_ids(None, 10**9)  # no 8 GB array of positions
    assert isinstance(ids, PositionIds) and len(ids) == 10**9
    assert ids[5:8].tolist() == [5, 6, 7] and ids[3] == 3
    np.testing.assert_array_equal(np.asarray(ids[:4]), np.arange(4))
    small = registry.check_new_ids(None, 6)
    registry.add(small, np.ones((6, 2), np.int16), chunk=1)
    assert registry._ids is None and registry.slots_of([5]).tolist() == [5]


_MAKERS = [
    lambda: DPLinearRegression(feature_norm=3.0, target_bound=1.0, random_state=0),
    lambda: DPLogisticRegression(feature_norm=3.0, random_state=0),
    lambda: UnlearnableSGDClassifier(feature_norm=3.0, random_state=0),
]


@pytest.mark.parametrize("make", _MAKERS, ids=["linear", "logistic", "sgd"])
def test_a_deletion_after_the_directory_is_gone_completes(tmp_path, make):
    # Compaction cannot create its new file; it is skipped (best effort): the
    # deletion completes as in memory, the deleted rows are zeros in the
    # still-mapped file, and the ids are gone. Before: the registry dropped
    # the ids, then raised: coef_ unchanged, no report, retry refused.
    import shutil

    X, y_reg, y = next(_chunks(1, rows=200))
    target = y_reg if "Linear" in type(make()).__name__ else y
    memory = make().fit(X, target)
    folder = tmp_path / "rows"
    folder.mkdir()
    with disk_backed_rows(folder):
        disk = make().fit(X, target)
    shutil.rmtree(folder)
    for model in (memory, disk):
        model.delete_samples(list(range(120)))  # > half: compaction due
    registry = disk.unlearning_state_.registry
    assert registry.n_samples == 80 and len(disk.deletion_log_) == 1
    assert not registry.rows[:120].any()
    np.testing.assert_array_equal(disk.coef_, memory.coef_)
    assert disk.privacy_ledger_ == memory.privacy_ledger_
    for model in (memory, disk):
        model.delete_samples([150, 199])  # still deletable, as in memory
    np.testing.assert_array_equal(disk.coef_, memory.coef_)


def _no_room(monkeypatch):
    import errno
    import os

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)


@pytest.mark.parametrize("make", _MAKERS, ids=["linear", "logistic", "sgd"])
def test_a_full_disk_is_an_error_that_changes_nothing(tmp_path, make, monkeypatch):
    # Before: sparse files (os.truncate) whose blocks the memory map wrote
    # later; on a full disk that is SIGBUS, the process dies. Now the blocks
    # are reserved first (posix_fallocate): no room is an OSError.
    X, y_reg, y = next(_chunks(1, rows=200))
    target = y_reg if "Linear" in type(make()).__name__ else y
    with disk_backed_rows(tmp_path):
        model = make().partial_fit(X[:100], target[:100], **_classes(make))
    registry = model.unlearning_state_.registry
    before = (pickle.dumps(model.privacy_ledger_), model.coef_.copy(), registry.n_samples)
    files = sorted(tmp_path.iterdir())
    _no_room(monkeypatch)
    with pytest.raises(OSError, match="cannot reserve"):
        model.partial_fit(np.repeat(X, 3, axis=0), np.repeat(target, 3), **_classes(make))
    after = (pickle.dumps(model.privacy_ledger_), model.coef_, registry.n_samples)
    assert after[0] == before[0] and after[2] == before[2]
    np.testing.assert_array_equal(after[1], before[1])
    with pytest.raises(OSError, match="cannot reserve"):
        pickle.dumps(model)  # the snapshot
    with disk_backed_rows(tmp_path), pytest.raises(OSError, match="cannot reserve"):
        make().fit(X, target)
    assert sorted(tmp_path.iterdir()) == files  # no partial file left


def _classes(make):
    return {"classes": [0, 1]} if "Linear" not in type(make()).__name__ else {}


def _npy(folder):
    return sorted(folder.glob("sklearn_dpu_rows_*.npy"))


def _holds_row(path, row):
    return bool((np.load(path) == row).all(axis=1).any())


def test_repeated_pickling_reuses_one_snapshot_and_a_deletion_removes_it(tmp_path):
    # Before: every pickle (joblib's parallel predict, dask tokenize,
    # copy.copy, skops' two __getstate__ calls) wrote a new full snapshot;
    # nothing referenced them and later deletions could not reach the rows.
    from joblib import Parallel, delayed

    _, disk = _linear_pair(tmp_path)
    pickle.dumps(disk)
    (first,) = _npy(tmp_path)
    Parallel(n_jobs=2)(delayed(disk.predict)(np.ones((3, 6))) for _ in range(4))
    copy.copy(disk), pickle.dumps(disk)
    assert _npy(tmp_path) == [first]  # the rows did not change: the same file
    saved = tmp_path / "model.skops"
    dpu_io.save(disk, saved)  # explicit: a snapshot of its own, the user's
    (users,) = set(_npy(tmp_path)) - {first}
    disk.partial_fit(np.ones((5, 6)), np.zeros(5))
    pickle.dumps(disk)
    pickle.dumps(disk)
    assert len(_npy(tmp_path)) == 3  # one implicit per generation, and the saved one
    row = disk.unlearning_state_.registry.rows[7].copy()
    disk.delete_samples([7])
    # The implicit snapshots are gone; the saved model's stays (the user's),
    # and is the only file still holding the deleted row.
    assert _npy(tmp_path) == [users] and _holds_row(users, row)
    assert dpu_io.load(saved).unlearning_state_.registry.n_samples == 1000
    pickle.dumps(disk)
    assert [p for p in _npy(tmp_path) if _holds_row(p, row)] == [users]


def test_a_model_loaded_from_a_plain_pickle_removes_that_snapshot_when_it_deletes(tmp_path):
    # dump -> load (another process, or pickle.loads) -> delete: the snapshot
    # the model was loaded from held the deleted row and nothing removed it.
    _, disk = _linear_pair(tmp_path)
    row = disk.unlearning_state_.registry.rows[7].copy()
    blob = pickle.dumps(disk)
    del disk
    gc.collect()
    loaded = pickle.loads(blob)
    loaded.delete_samples([7])
    pickle.dumps(loaded)
    assert not [p for p in _npy(tmp_path) if _holds_row(p, row)]
    with pytest.raises(PersistenceError, match="plain pickle.*sklearn_dpu.io.save"):
        pickle.loads(blob)  # its snapshot went with the deletion, as documented


def test_each_io_save_keeps_its_own_snapshot(tmp_path):
    # A save of a copy, and a save of a model loaded from another save, each
    # wrote no snapshot of their own: another model's deletion, or removing
    # the first saved model with its snapshot, broke them.
    _, disk = _linear_pair(tmp_path)
    copied = pickle.loads(pickle.dumps(disk))
    dpu_io.save(copied, tmp_path / "copy.skops")
    disk.delete_samples([0])
    assert dpu_io.load(tmp_path / "copy.skops").unlearning_state_.registry.n_samples == 1000
    first = tmp_path / "v1.skops"
    dpu_io.save(disk, first)
    before = set(_npy(tmp_path))
    dpu_io.save(dpu_io.load(first), tmp_path / "v2.skops")
    (second_snapshot,) = set(_npy(tmp_path)) - before
    for path in before - {second_snapshot}:
        path.unlink()
    assert dpu_io.load(tmp_path / "v2.skops").unlearning_state_.registry.n_samples == 999


def test_io_save_writes_exactly_one_snapshot(tmp_path):
    _, disk = _linear_pair(tmp_path)
    dpu_io.save(disk, tmp_path / "model.skops")
    assert len(_npy(tmp_path)) == 1
    disk.delete_samples([3])
    assert len(_npy(tmp_path)) == 1  # saved explicitly: kept
    dpu_io.save(disk, tmp_path / "model2.skops")
    assert len(_npy(tmp_path)) == 2


@pytest.mark.parametrize(
    "name", ["../elsewhere/sklearn_dpu_rows_x.npy", "/tmp/sklearn_dpu_rows_x.npy", "secret.npy"]
)
def test_a_snapshot_record_must_name_a_bare_snapshot_file(tmp_path, name):
    # Before: the recorded name was joined to the directory as it was, so an
    # altered record could make a load read any .npy file.
    import dataclasses

    _, disk = _linear_pair(tmp_path)
    registry = disk.unlearning_state_.registry
    state = registry.__getstate__()
    state["row_file"] = dataclasses.replace(state["row_file"], name=name)
    with pytest.raises(PersistenceError, match="not a bare"):
        SampleRegistry.__new__(SampleRegistry).__setstate__(state)


def test_a_snapshot_loads_from_its_recorded_directory_inside_another_block(tmp_path):
    # Before: inside disk_backed_rows(other) only `other` was searched.
    first, other = tmp_path / "a", tmp_path / "b"
    first.mkdir(), other.mkdir()
    _, disk = _linear_pair(first)
    blob = pickle.dumps(disk)
    with disk_backed_rows(other):
        loaded = pickle.loads(blob)
    assert loaded.unlearning_state_.registry.n_samples == 1000
    assert len(_bin_files(other)) == 1  # its working file goes to the active directory


def test_pickling_after_the_directory_is_gone_is_a_persistence_error(tmp_path):
    import shutil

    folder = tmp_path / "rows"
    folder.mkdir()
    _, disk = _linear_pair(folder)
    shutil.rmtree(folder)
    with pytest.raises(PersistenceError, match="cannot write the deletion rows snapshot"):
        pickle.dumps(disk)


def test_dask_sgd_fit_on_disk_copies_the_worker_rows_block_by_block(tmp_path, monkeypatch):
    # Before: the registry's `rows[start:stop] = WorkerRows` materialized all
    # the rows on the driver in one array (WorkerRows.__array__).
    da = pytest.importorskip("dask.array")
    from sklearn_dpu.linear_model import _sgd_dask

    X, _, y = next(_chunks(1, rows=400))
    Xd, yd = da.from_array(X, chunks=(50, 6)), da.from_array(y, chunks=50)
    make = lambda: UnlearnableSGDClassifier(feature_norm=3.0, random_state=0)  # noqa: E731
    memory = make().fit(Xd, yd)

    def refused(self, dtype=None, copy=None):
        raise AssertionError("all the worker rows were brought to the driver")

    monkeypatch.setattr(_sgd_dask.WorkerRows, "__array__", refused)
    with disk_backed_rows(tmp_path):
        disk = make().fit(Xd, yd)
    registry = disk.unlearning_state_.registry
    assert registry.on_disk and isinstance(registry.rows, np.memmap)
    monkeypatch.undo()
    np.testing.assert_array_equal(
        registry.rows[:400], np.asarray(memory.unlearning_state_.registry.rows)
    )
    np.testing.assert_array_equal(disk.coef_, memory.coef_)
