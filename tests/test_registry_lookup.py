"""The sample registry's vectorized id lookup against a plain dict's answers.

The registry finds slots by sorted search (typed ids), by arithmetic (row
positions, stored implicitly) or by a dict (object ids, odd requests); every
answer must be the one a ``dict`` from id to slot gives, as before.
"""

import pickle

import numpy as np
import pandas as pd
import pytest

from sklearn_dpu.exceptions import UnlearningError
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.unlearning.ids import requested_ids
from sklearn_dpu.unlearning.state import SampleRegistry


def _registry(ids, n_columns=2):
    registry = SampleRegistry(n_columns)
    request = requested_ids(None, ids) if ids is not None else requested_ids(None, None)
    n = len(ids) if ids is not None else 50
    values = registry.check_new_ids(request, n)
    registry.add(values, np.ones((n, n_columns), dtype=np.int16), chunk=1)
    return registry


def _reference_find(registry, requested):
    """What the dict-based registry answered: -1 for unknown ids."""
    rows, ids, _ = registry.live()
    slots = np.flatnonzero(registry.alive[: registry.size])
    table = dict(zip(ids.tolist(), slots.tolist(), strict=True))
    return [table.get(v, -1) for v in requested]


ID_SETS = {
    "int64": np.array([7, -3, 12, 40, 2**40, 5]),
    "uint64": np.array([2**63 + 5, 1, 2**64 - 1, 9], dtype=np.uint64),
    "float": np.array([0.5, -2.0, 3.25, 1e300, 7.0]),
    "str": np.array(["bob", "alice", "a", "zed", "carol"]),
    "object": np.array(["x", 3, (1, 2), 2.5], dtype=object),
    "positions": None,
}

REQUESTS = [
    [7],
    [7.0],  # equal to the int id 7 in Python
    [np.int32(12), 5],
    ["7"],
    [2**63 + 5],
    [2**64 - 1, 1],
    [2**70],
    [0.5, -2.0],
    [3],
    ["alice", "zed"],
    ["a\x00"],  # NumPy would drop the NUL; Python does not
    [(1, 2)],
    [-1],
    [49, 0],
    [50],
    [float("nan")],
]


@pytest.mark.parametrize("kind", list(ID_SETS))
def test_lookup_matches_a_dict(kind):
    registry = _registry(ID_SETS[kind])
    for request in REQUESTS:
        assert registry._find(request).tolist() == _reference_find(registry, request), request


@pytest.mark.parametrize("kind", list(ID_SETS))
def test_lookup_after_deletions_compaction_and_pickle(kind):
    registry = _registry(ID_SETS[kind])
    rng = np.random.default_rng(0)
    for _ in range(2):  # 4 ids at least: two remain
        _, live_ids, _ = registry.live()
        victim = live_ids.tolist()[int(rng.integers(len(live_ids)))]
        registry.remove(registry.slots_of([victim]))
        with pytest.raises(UnlearningError, match="not in the training set"):
            registry.slots_of([victim])
        for request in REQUESTS + [live_ids.tolist()]:
            assert registry._find(request).tolist() == _reference_find(registry, request)
    loaded = pickle.loads(pickle.dumps(registry))
    _, live_ids, _ = registry.live()
    assert loaded.live()[1].tolist() == live_ids.tolist()
    assert loaded.slots_of(live_ids.tolist()[:1]).tolist() == [0]


def test_positions_are_stored_implicitly_until_compaction():
    registry = _registry(None)
    # No id array; the chunks are one run (12 bytes) and no flags before a deletion.
    assert registry.nbytes() == registry.rows.nbytes + 12
    assert registry._index is None  # the fit builds no lookup structure
    registry.remove(registry.slots_of(list(range(0, 20))))
    assert registry._ids is None  # a deletion alone keeps ids implicit
    registry.remove(registry.slots_of(list(range(20, 30))))  # more than half: compacted
    assert registry.size == 20 and registry.live()[1].tolist() == list(range(30, 50))
    assert registry.slots_of([30, 49]).tolist() == [0, 19]
    registry.add(registry.check_new_ids(None, 2), np.zeros((2, 2), np.int16), chunk=2)
    assert registry.live()[1].tolist()[-2:] == [50, 51]
    assert registry.slots_of([51]).tolist() == [21]


def test_a_reload_keeps_positions_implicit_while_they_equal_the_slots():
    registry = _registry(None)
    loaded = pickle.loads(pickle.dumps(registry))
    assert loaded._ids is None and loaded.nbytes() == registry.nbytes()
    # The last rows deleted: the live ids still equal their slots, but the
    # next default id is n_seen (50), never a deleted row's position.
    registry.remove(registry.slots_of([48, 49]))
    loaded = pickle.loads(pickle.dumps(registry))
    assert loaded._ids is None and loaded.n_seen == 50
    loaded.add(loaded.check_new_ids(None, 2), np.zeros((2, 2), np.int16), chunk=2)
    assert loaded.live()[1].tolist() == [*range(48), 50, 51]
    assert loaded.slots_of([50, 47]).tolist() == [48, 47]
    with pytest.raises(UnlearningError, match="not in the training set"):
        loaded.slots_of([49])
    # A row deleted in the middle: the ids no longer equal the slots.
    registry.remove(registry.slots_of([3]))
    loaded = pickle.loads(pickle.dumps(registry))
    assert loaded._ids is not None
    assert loaded.slots_of([4]).tolist() == [3]


@pytest.mark.parametrize("reload", [False, True])
@pytest.mark.parametrize("given", [[50, 100, 52], [50, 52, 51, 53]])
def test_given_ids_that_only_start_and_end_like_positions_are_stored(given, reload):
    # After 50 positional rows, ids that begin at 50 and end at the last new
    # slot are positions only if every one equals its slot: else id 51 would
    # name the row of person 100 (or of person 52).
    registry = _registry(None)
    if reload:
        registry = pickle.loads(pickle.dumps(registry))
    ids = registry.check_new_ids(requested_ids(None, given), len(given))
    registry.add(ids, np.zeros((len(given), 2), np.int16), chunk=2)
    assert registry.live()[1].tolist()[50:] == given
    assert registry.slots_of(given).tolist() == list(range(50, 50 + len(given)))
    if 51 not in given:
        with pytest.raises(UnlearningError, match="not in the training set"):
            registry.slots_of([51])


def test_deleting_a_given_id_after_positions_hits_that_row():
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (43, 3)), rng.uniform(-1, 1, 43)
    est = DPLinearRegression(feature_norm=2.0, target_bound=1.0, random_state=0).fit(X[:40], y[:40])
    est.partial_fit(X[40:], y[40:], sample_id=[40, 100, 42])
    est.delete_samples([100])
    live = est.unlearning_state_.registry.live()[1].tolist()
    assert live == [*range(40), 40, 42]
    with pytest.raises(UnlearningError, match="not in the training set"):
        est.delete_samples([41])


def test_default_positions_never_repeat_a_given_id():
    # Positions 0..49, then a person given id 51: the second next default
    # position would be 51 again. Once given ids leave the positional
    # numbering, the stream takes only sample_id.
    registry = _registry(None)
    registry.add(
        registry.check_new_ids(requested_ids(None, [51]), 1), np.zeros((1, 2), np.int16), chunk=2
    )
    assert registry.id_kind == "mixed"
    # Not "(or a DataFrame)": index labels are refused in a mixed stream too.
    with pytest.raises(ValueError, match="then given as sample_id; pass sample_id= for new"):
        registry.check_new_ids(None, 2)
    with pytest.raises(ValueError, match="index labels"):
        registry.check_new_ids(requested_ids(pd.DataFrame({"a": [1.0]}, index=[7]), None), 1)
    loaded = pickle.loads(pickle.dumps(registry))
    assert loaded.id_kind == "mixed" and loaded.live()[1].tolist() == [*range(50), 51]
    with pytest.raises(ValueError, match="row positions, then given"):
        loaded.check_new_ids(None, 1)


def test_given_ids_equal_to_the_next_positions_keep_the_stream_positional():
    registry = _registry(None)
    ids = registry.check_new_ids(requested_ids(None, [50, 51]), 2)
    registry.add(ids, np.zeros((2, 2), np.int16), chunk=2)
    assert registry.id_kind == "positions" and registry._ids is None
    registry.add(registry.check_new_ids(None, 1), np.zeros((1, 2), np.int16), chunk=3)
    assert registry.live()[1].tolist() == list(range(53))


def test_mixed_stream_estimator_refuses_positions_that_would_repeat_an_id():
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (6, 2)), rng.uniform(-1, 1, 6)
    est = DPLinearRegression(feature_norm=2.0, target_bound=1.0, random_state=0).fit(X[:3], y[:3])
    est.partial_fit(X[3:4], y[3:4], sample_id=[4])
    before = est.unlearning_state_.registry.live()[1].tolist()
    with pytest.raises(ValueError, match="pass sample_id="):
        est.partial_fit(X[4:6], y[4:6])
    assert est.unlearning_state_.registry.live()[1].tolist() == before == [0, 1, 2, 4]
    est.delete_samples([4])
    assert est.deletion_log_[-1].notes[0].startswith("the sample ids of the rows added without")


def test_positions_then_given_ids_make_a_mixed_stream():
    registry = _registry(None)
    registry.remove(registry.slots_of([3]))
    ids = registry.check_new_ids(requested_ids(None, ["new"]), 1)
    registry.add(ids, np.zeros((1, 2), np.int16), chunk=2)
    assert registry.live()[1].tolist() == [*range(3), *range(4, 50), "new"]
    assert registry.slots_of(["new", 4]).tolist() == [50, 4]
    with pytest.raises(ValueError, match="already in the training set"):
        registry.check_new_ids(requested_ids(None, [7, "other"]), 2)


def test_clashing_new_ids_are_refused_without_change():
    registry = _registry(np.array(["a", "b", "c"]))
    with pytest.raises(ValueError, match="1 sample id.s. are already in the training set: 'b'"):
        registry.check_new_ids(requested_ids(None, ["d", "b"]), 2)
    assert registry.n_samples == 3 and registry.live()[1].tolist() == ["a", "b", "c"]


def test_errors_name_unknown_ids_and_refuse_deleting_everything():
    registry = _registry(np.arange(4))
    with pytest.raises(UnlearningError, match="2 of 3 sample id.s. are not in .*: 9, 'x'"):
        registry.slots_of([1, 9, "x"])
    with pytest.raises(UnlearningError, match="requested more than once"):
        registry.slots_of([1, 1])
    with pytest.raises(UnlearningError, match="cannot delete every sample"):
        registry.slots_of([0, 1, 2, 3])


def test_fit_adopts_the_codes_and_keeps_no_id_array():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)
    reg = DPLinearRegression(feature_norm=2.0, target_bound=3.0, random_state=0).fit(X, y)
    registry = reg.unlearning_state_.registry
    assert registry._ids is None and registry.rows.shape == (300, 4)
    reg.delete_samples([5, 299])
    assert registry.n_samples == 298 and not registry.alive[[5, 299]].any()
    assert not registry.rows[[5, 299]].any()


def test_a_linear_deletion_reads_the_chunks_of_its_rows_only(monkeypatch):
    # chunks[slots] expanded the run-length record to every slot: a one-row
    # deletion at n = 1e7 cost 30 ms instead of 2 (O(n), not O(1) in n).
    from sklearn_dpu.linear_model import DPLinearRegression
    from sklearn_dpu.unlearning.state import ChunkRuns

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3000, 3))
    est = DPLinearRegression(feature_norm=2.0, target_bound=1.0, random_state=0)
    est.partial_fit(X[:1500], X[:1500, 0]).partial_fit(X[1500:], X[1500:, 0])

    def expand(*args, **kwargs):
        raise AssertionError("a deletion expanded the chunk runs of every slot")

    monkeypatch.setattr(ChunkRuns, "expand", expand)
    est.delete_samples([10, 2000])
    assert est.unlearning_state_.registry.chunks_of(np.array([0, 1499, 1500, 2999])).tolist() == [
        1,
        1,
        2,
        2,
    ]


def test_a_string_id_ending_in_nul_is_kept_exactly():
    registry = _registry(np.array(["a\x00", "a", "b"], dtype=object).tolist())
    assert registry.live()[1].tolist() == ["a\x00", "a", "b"]
    assert registry.slots_of(["a\x00"]).tolist() == [0]
    assert registry.slots_of(["a"]).tolist() == [1]


@pytest.mark.parametrize("tz", [None, "Europe/Paris"])
def test_datetime_index_ids_survive_skops_and_pickle(tmp_path, tz):
    from sklearn_dpu import io as dpu_io

    index = pd.date_range("2020-01-01", periods=8, freq="h", tz=tz)
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(-1, 1, (8, 2)), index=index)
    y = rng.uniform(-1, 1, 8)
    est = DPLinearRegression(feature_norm=2.0, target_bound=1.0, random_state=0).fit(X, y)
    dpu_io.save(est, tmp_path / "m.skops")
    for loaded in (dpu_io.load(tmp_path / "m.skops"), pickle.loads(pickle.dumps(est))):
        ids = loaded.unlearning_state_.registry.live()[1]
        assert ids.tolist() == list(index)
        loaded.delete_samples([index[3]])
        assert loaded.unlearning_state_.registry.live()[1].tolist() == [
            t for i, t in enumerate(index) if i != 3
        ]


def test_a_format_3_positional_stream_with_a_given_id_above_n_seen_loads_as_mixed():
    # Written before "mixed" existed: 3 positions, then sample_id=[4].
    registry = _registry(None)
    registry.add(
        registry.check_new_ids(requested_ids(None, [60]), 1), np.zeros((1, 2), np.int16), chunk=2
    )
    state = {**registry.__getstate__(), "_format_version": 3, "id_kind": "positions"}
    loaded = SampleRegistry.__new__(SampleRegistry)
    loaded.__setstate__(state)
    assert loaded.id_kind == "mixed"
    with pytest.raises(ValueError, match="row positions, then given"):
        loaded.check_new_ids(None, 11)
    plain = SampleRegistry.__new__(SampleRegistry)
    plain.__setstate__({**_registry(None).__getstate__(), "_format_version": 3})
    assert plain.id_kind == "positions"


def test_timestamps_are_not_merged_with_equal_datetime64_ids():
    ids = np.empty(3, dtype=object)
    ids[:] = [pd.Timestamp(0), np.datetime64(1, "ps"), pd.Timestamp(2)]
    registry = _registry(ids.tolist())
    loaded = pickle.loads(pickle.dumps(registry))
    assert loaded.slots_of([pd.Timestamp(0)]).tolist() == [0]
    assert loaded.slots_of([np.datetime64(1, "ps")]).tolist() == [1]
