"""Compact and disk-backed deletion metadata (issue 14: out of core on one machine)."""

import pickle

import numpy as np

from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.unlearning.state import ChunkRuns, SampleRegistry


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
