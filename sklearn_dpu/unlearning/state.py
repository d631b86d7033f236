"""The metadata that makes deletion possible: versioned, and keyed by sample id.

:class:`SampleRegistry` keeps the stored (encoded) rows of the samples that are
currently in the training set, their ids and the chunk each arrived in. A
deleted row is overwritten with zeros at once, its id leaves the index, and
the next pickle holds only the live rows, in arrival order, what a fresh fit
on the remaining rows would store (plus, when the ids are row positions, the
count of rows ever added: see :class:`SampleRegistry`). Ids of deleted samples are not
kept: an id can be personal data too. Hence an "already deleted" id and an id
that was never added get the same error.
"""

import copy
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .._transaction import in_transaction, on_rollback
from ..exceptions import StateVersionError, UnlearningError
from ._id_index import IdIndex, _request_array
from .ids import (
    ID_KIND_NOTES,
    IdRequest,
    check_request,
    decode_datetime_ids,
    describe_ids,
    encode_datetime_ids,
    requested_ids,
)
from .row_store import RowStore, active_directory

__all__ = ["ChunkRuns", "PositionIds", "SampleRegistry", "VersionedState"]


class VersionedState:
    """Base of persisted metadata objects: refuses formats it does not know.

    Subclasses set ``FORMAT_VERSION`` and bump it whenever the meaning or
    layout of their state changes.
    """

    FORMAT_VERSION = 1

    def __getstate__(self):
        return {**self.__dict__, "_format_version": self.FORMAT_VERSION}

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop("_format_version", None)
        if version != self.FORMAT_VERSION:
            raise StateVersionError(
                f"{type(self).__name__} state has format version {version!r}; this "
                f"sklearn_dpu reads version {self.FORMAT_VERSION}. Load it with the "
                "sklearn_dpu release that wrote it, or refit."
            )
        self.__dict__.update(state)


def _counts_from(ids: ArrayLike, start: int) -> bool:
    """Whether ``ids`` are the integers ``start, start + 1, ...`` (an empty
    request is): the default positions from ``start``, or slots."""
    if isinstance(ids, PositionIds):
        return ids.start == start or len(ids) == 0
    ids = np.asarray(ids)
    return (
        ids.ndim == 1
        and ids.dtype.kind in "iu"
        and bool(np.array_equal(ids, np.arange(start, start + len(ids), dtype=np.int64)))
    )


def _below(ids: np.ndarray | None, n_seen: int | None) -> bool:
    """Whether every id is an integer below ``n_seen`` (none can be a later
    default position); ``n_seen=None`` (not recorded): below ``len(ids)``."""
    ids = np.zeros(0, dtype=np.int64) if ids is None else np.asarray(ids)
    n_seen = len(ids) if n_seen is None else n_seen
    return ids.dtype.kind in "iu" and (len(ids) == 0 or int(ids.max()) < n_seen)


def _same_kind(a: np.dtype, b: np.dtype) -> bool:
    return a == b or (a.kind == b.kind and a.kind in "US")


def _concat_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _same_kind(a.dtype, b.dtype):
        return np.concatenate([a, b])
    out = np.empty(len(a) + len(b), dtype=object)
    out[: len(a)] = a.tolist()
    out[len(a) :] = b.tolist()
    return out


@dataclass(frozen=True)
class ChunkRuns:
    """The arrival chunk of consecutive slots, run-length coded.

    Rows arrive a call at a time and each call is one chunk, so the chunk
    numbers of the slots are a few runs: ``values[i]`` covers the slots from
    ``starts[i]`` to the next start (the last run to ``stop``). Memory is
    ``12`` bytes per run instead of ``4`` per row.

    Attributes
    ----------
    starts : ndarray of int64
    values : ndarray of int32
    stop : int
        End of the last run.
    """

    starts: np.ndarray
    values: np.ndarray
    stop: int

    @classmethod
    def empty(cls) -> "ChunkRuns":
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), 0)

    @classmethod
    def of(cls, chunks: np.ndarray) -> "ChunkRuns":
        """The runs of a per-slot chunk array (slots ``0 .. len(chunks)``)."""
        chunks = np.asarray(chunks, dtype=np.int32).reshape(-1)
        if len(chunks) == 0:
            return cls.empty()
        starts = np.flatnonzero(np.r_[True, chunks[1:] != chunks[:-1]])
        return cls(starts.astype(np.int64), chunks[starts], len(chunks))

    def appended(self, start: int, stop: int, chunk: int) -> "ChunkRuns":
        """The runs with slots ``start .. stop`` (``start == self.stop``) in ``chunk``."""
        if stop <= start:
            return self
        if len(self.values) and self.values[-1] == chunk and self.stop == start:
            return ChunkRuns(self.starts, self.values, stop)
        return ChunkRuns(
            np.append(self.starts, start), np.append(self.values, np.int32(chunk)), stop
        )

    def expand(self, capacity: int) -> np.ndarray:
        """The chunk of every slot below ``capacity`` (0 beyond ``stop``), a new array."""
        out = np.zeros(capacity, dtype=np.int32)
        if len(self.values):
            ends = np.append(self.starts[1:], self.stop)
            out[: self.stop] = np.repeat(self.values, ends - self.starts)
        return out

    def at(self, slots: np.ndarray) -> np.ndarray:
        """The chunk of each of ``slots`` (all below ``stop``): a binary search
        per slot over the runs, without expanding them."""
        slots = np.asarray(slots, dtype=np.int64)
        return self.values[np.searchsorted(self.starts, slots, side="right") - 1]

    def nbytes(self) -> int:
        return self.starts.nbytes + self.values.nbytes


@dataclass(frozen=True)
class PositionIds:
    """The default ids ``start, start + 1, ..., start + n - 1`` without an array.

    What :meth:`SampleRegistry.check_new_ids` returns for row positions: a
    ``fit`` of ``n`` rows does not allocate ``8 n`` bytes of ids that the
    registry would not keep. Slicing gives another range; ``np.asarray``
    gives the int64 array.
    """

    start: int
    n: int
    dtype = np.dtype(np.int64)
    ndim = 1

    def __len__(self) -> int:
        return self.n

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def __getitem__(self, key):
        if isinstance(key, slice) and key.step in (None, 1):
            first, last, _ = key.indices(self.n)
            return PositionIds(self.start + first, max(0, last - first))
        return np.asarray(self)[key]

    def __array__(self, dtype=None, copy=None):
        return np.arange(self.start, self.start + self.n, dtype=dtype or np.int64)

    def tolist(self) -> list:
        return list(range(self.start, self.start + self.n))


class SampleRegistry(VersionedState):
    """Rows, ids and arrival chunks of the samples currently held.

    Parameters
    ----------
    n_columns : int
        Width of a stored row.
    dtype : numpy dtype, default=np.int16
        Storage type of rows.

    Attributes
    ----------
    id_kind : {"given", "index", "positions", "mixed"} or None
        Where the ids of the stream's first call came from: ``sample_id``, a
        DataFrame's index labels, or row positions (see
        :mod:`sklearn_dpu.unlearning.ids`). Row positions continue across
        calls only in a stream that started with them, and index labels
        cannot follow them: mixing the two would let two people share an id.
        ``"mixed"``: a positional stream that then received ``sample_id``
        values other than the next positions; from then on it takes only
        ``sample_id`` (a later position could repeat a given id).
    n_seen : int
        Rows ever added, deleted ones included: the next default id.

    Notes
    -----
    Size: ``n * n_columns`` items of ``dtype`` (the capacity grows by
    doubling), the arrival chunks as runs (:class:`ChunkRuns`, 12 bytes per
    ``fit`` / ``partial_fit`` call, not per row), one ``alive`` flag byte per
    slot from the first deletion on (none before), and the ids: none while the ids are row positions
    that still equal the slots (``id == slot``, until the first compaction,
    which happens once half the rows are deleted; a pickle holds them, and
    loading it makes them implicit again), else one id per slot (8
    bytes for integer ids). Lookups are vectorized
    (:class:`~sklearn_dpu.unlearning._id_index.IdIndex`: a sorted copy of the
    ids, or a dict for ``object`` ids), built on the first lookup and never
    persisted: ``fit`` builds none.

    What a pickle holds beyond a fresh fit on the remaining rows: ``id_kind``
    (a public fact about the input), and, only when ``id_kind`` is
    ``"positions"``, ``n_seen``. It is needed: the next default id must be
    ``n_seen``, never a deleted row's position, or a repeated deletion request
    for that position would delete someone else. It equals the live rows plus
    the sum of ``n_deleted`` over the estimator's ``deletion_log_`` since the
    last ``fit``, so it tells nothing the log does not; the largest live
    position bounds it from below. Ids, rows and chunks of deleted samples are
    not kept. The pickled layout is the live rows, ids and chunks, whatever
    the in-memory layout of the ids (``Timestamp`` ids, from a
    ``DatetimeIndex``, as int64 ticks and their unit and zone: skops files
    cannot hold ``Timestamp`` objects).
    """

    # 2: id_kind; 3: the rows may be in a snapshot file (disk-backed); 4:
    # id_kind "mixed", Timestamp ids as ticks (an older release would misread
    # both).
    FORMAT_VERSION = 4

    def __init__(self, n_columns: int, dtype=np.int16):
        self.rows = np.zeros((0, n_columns), dtype=dtype)
        self._ids: np.ndarray | None = None  # None: ids are the slots (positions)
        self._runs = ChunkRuns.empty()  # arrival chunk of every slot, run-length coded
        self._alive: np.ndarray | None = None  # None: the slots below size are all alive
        self.size = 0  # slots in use; arrays beyond it are spare capacity
        self.n_seen = 0  # rows ever added; numbers the default ids
        self.id_kind = None  # set by the first check_new_ids
        self._n_live = 0
        self._index: IdIndex | None = None  # built on the first lookup
        directory = active_directory()
        # Rows in a memory-mapped file (see sklearn_dpu.unlearning.row_store).
        self._store = None if directory is None else RowStore(directory)

    @property
    def on_disk(self) -> bool:
        """Whether the rows live in a memory-mapped file.

        See :func:`~sklearn_dpu.unlearning.disk_backed_rows`.
        """
        return self._store is not None

    @property
    def n_samples(self) -> int:
        return self._n_live

    @property
    def capacity(self) -> int:
        """Slots allocated (``size`` of them in use)."""
        return len(self.rows)

    @property
    def chunks(self) -> np.ndarray:
        """The arrival chunk of every slot (capacity included; 0 where no live row).

        A new array built from the run-length record (``4`` bytes a slot while
        it is in use): read it once per operation, not per sample.
        """
        chunks = self._runs.expand(self.capacity)
        if self._alive is not None:
            chunks[~self._alive] = 0
        return chunks

    def chunks_of(self, slots: np.ndarray) -> np.ndarray:
        """The arrival chunk of each of the live ``slots``: ``chunks[slots]``
        in ``O(len(slots) log runs)``, not ``O(capacity)``."""
        return self._runs.at(slots)

    @property
    def alive(self) -> np.ndarray:
        """Whether each slot (capacity included) holds a live row.

        Kept as a flag array only from the first deletion on; before that
        every slot below ``size`` is live and this is a new array.
        """
        if self._alive is not None:
            return self._alive
        alive = np.zeros(self.capacity, dtype=bool)
        alive[: self.size] = True
        return alive

    @property
    def ids(self) -> np.ndarray:
        """The id of every slot (capacity included); materialized for positions."""
        if self._ids is None:
            return np.arange(self.capacity, dtype=np.int64)
        return self._ids

    def ids_of(self, slots: np.ndarray) -> np.ndarray:
        """The ids in ``slots``."""
        return np.asarray(slots, dtype=np.int64) if self._ids is None else self._ids[slots]

    def nbytes(self) -> int:
        """Bytes of the stored rows, ids, chunk runs and flags (not of the lookup cache).

        Disk-backed rows count here too; :meth:`memory_nbytes` leaves them out.
        """
        return self.rows.nbytes + self.memory_nbytes() - self._memory_rows_nbytes()

    def _memory_rows_nbytes(self) -> int:
        return 0 if self._store is not None else self.rows.nbytes

    def memory_nbytes(self) -> int:
        """Bytes held in memory: :meth:`nbytes` less disk-backed rows."""
        ids = 0 if self._ids is None else self._ids.nbytes
        alive = 0 if self._alive is None else self._alive.nbytes
        return self._memory_rows_nbytes() + ids + self._runs.nbytes() + alive

    def default_ids(self, n: int) -> np.ndarray:
        """Ids for ``n`` new rows when the user gives none: arrival numbers."""
        return np.arange(self.n_seen, self.n_seen + n, dtype=np.int64)

    def check_new_ids(self, ids: IdRequest | ArrayLike | None, n_rows: int) -> np.ndarray:
        """Validate ids for rows about to be added; returns them as an array.

        Parameters
        ----------
        ids : IdRequest, array-like or None
            From :func:`~sklearn_dpu.unlearning.ids.requested_ids` (which read
            a DataFrame's index); an array is taken as given ids and ``None``
            as row positions.
        n_rows : int

        Returns
        -------
        ndarray of shape (n_rows,), or PositionIds
            Row positions come back as a :class:`PositionIds` range (no array).
        """
        request = ids if isinstance(ids, IdRequest) else requested_ids(None, ids)
        stream = self.id_kind
        if request.kind == "positions" and stream not in (None, "positions"):
            source = {
                "given": "given as sample_id",
                "index": "DataFrame index labels",
                "mixed": "row positions, then given as sample_id",
            }[stream]
            also = "" if stream == "mixed" else " (or a DataFrame)"  # mixed: index refused
            raise ValueError(
                f"the ids of this estimator's rows were {source}; pass sample_id={also} for "
                "new rows too: numbering them by position could give two people the same id"
            )
        if request.kind == "index" and stream in ("positions", "mixed"):
            raise ValueError(
                "the ids of this estimator's rows are row positions (no sample_id, array "
                "input); the index labels of a DataFrame could repeat them: pass sample_id="
            )
        values = PositionIds(self.n_seen, n_rows) if request.values is None else request.values
        if len(values) != n_rows:
            raise ValueError(f"sample_id has {len(values)} entries for {n_rows} rows")
        # Default positions start at n_seen, above every id of a positional
        # stream (other ids make it "mixed", see add): only given or index
        # ids can clash.
        if self._n_live and request.values is not None:  # (PositionIds: never)
            present = self._lookup().any_of(values)
            if present.any():
                clash = values[present].tolist()  # error path only
                raise ValueError(
                    f"{len(clash)} sample id(s) are already in the training set: "
                    f"{describe_ids(clash)}"
                )
        if stream is None:  # a fresh registry, discarded if the call fails later
            self.id_kind = request.kind
        return values

    def add(self, ids: np.ndarray, rows: np.ndarray, chunk: int, *, adopt: bool = False) -> None:
        """Append rows (ids already checked by :meth:`check_new_ids`).

        ``adopt=True``: ``rows`` is a new array nothing else will write to;
        an empty registry keeps it as its storage instead of copying it (it
        is zeroed in place by deletions).
        """
        start, stop = self.size, self.size + len(ids)
        if self.id_kind == "positions" and not _counts_from(ids, self.n_seen):
            self.id_kind = "mixed"  # given ids: later defaults could repeat one
        positions = self.id_kind == "positions" and self._ids is None and ids.dtype == np.int64
        # Every id, not only the ends: [40, 100, 42] after 40 rows must be
        # stored, or id 41 would name the row of person 100.
        implicit = positions and _counts_from(ids, start)
        storage = (self.rows.dtype, self.rows.shape[1:])
        if (
            adopt
            and self._store is None
            and start == 0
            and self.capacity == 0
            and (rows.dtype, rows.shape[1:]) == storage
            and rows.flags.c_contiguous
        ):
            self.rows = rows
            self._ids = None if implicit else np.array(ids)
        else:
            if stop > self.capacity:
                self._reserve(max(stop, 2 * self.capacity))
            if not implicit:
                self._store_ids(start, stop, ids)
            copy_into = getattr(rows, "copy_into", None)  # rows on Dask workers
            if copy_into is not None:
                copy_into(self.rows[start:stop])  # a few blocks at a time
            else:
                self.rows[start:stop] = rows
            if self._alive is not None:
                self._alive[start:stop] = True
        self._runs = self._runs.appended(start, stop, chunk)
        self._index = None  # rebuilt on the next lookup
        if self._store is not None:
            self._store.changed()
        self.size = stop
        self.n_seen += len(ids)
        self._n_live += len(ids)

    def _store_ids(self, start: int, stop: int, ids: np.ndarray) -> None:
        ids = np.asarray(ids)
        if self._ids is None and start > 0:  # first non-slot ids: materialize the slots'
            slots = np.arange(self.capacity, dtype=np.int64)
            self._ids = np.where(self.alive, slots, 0)  # deleted rows' ids are not kept
        if self._ids is None or start == 0:
            self._ids = np.zeros(self.capacity, dtype=ids.dtype)
        elif not _same_kind(self._ids.dtype, ids.dtype):
            self._ids = _concat_ids(self._ids, np.zeros(0, dtype=ids.dtype))
        elif self._ids.dtype.kind in "US" and ids.dtype.itemsize > self._ids.dtype.itemsize:
            self._ids = self._ids.astype(ids.dtype)
        self._ids[start:stop] = ids

    def _reserve(self, capacity: int) -> None:
        def grown(array):
            out = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
            out[: self.size] = array[: self.size]
            return out

        if self._store is not None:
            self.rows = self._store.grow(self.rows[: self.size], capacity)
        else:
            self.rows = grown(self.rows)
        if self._alive is not None:
            self._alive = grown(self._alive)
        if self._ids is not None:
            self._ids = grown(self._ids)

    def live(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, ids and chunks of the live samples, in arrival order (copies)."""
        keep = self.live_slots()
        return self.rows[keep], self.ids_of(keep), self._runs.expand(self.size)[keep]

    def live_slots(self) -> np.ndarray:
        """The slots of the live rows, in arrival order."""
        if self._alive is None:
            return np.arange(self.size, dtype=np.int64)
        return np.flatnonzero(self._alive[: self.size])

    def _lookup(self) -> IdIndex:
        if self._index is None:
            live = self.live_slots()
            self._index = IdIndex(self.ids_of(live), live)
        return self._index

    def _find(self, requested: list) -> np.ndarray:
        """Slots of the ids in ``requested``, -1 where unknown (vectorized)."""
        if self._ids is not None:
            return self._lookup().find(requested)
        # Ids are the slots: integers in range whose slot is alive.
        values = _request_array(requested, np.dtype(np.int64))
        if values is None:  # not plain integers: the exact dict path
            return self._lookup().find(requested)
        inside = (values >= 0) & (values < self.size)
        slots = np.where(inside, values, 0)
        if self._alive is not None:
            inside &= self._alive[slots]
        return np.where(inside, slots, -1)

    def slots_of(self, sample_ids: Iterable) -> np.ndarray:
        """Slots of ``sample_ids``; raises :class:`UnlearningError` on a bad request.

        ``sample_ids`` is read by :func:`~sklearn_dpu.unlearning.ids.as_id_list`:
        a bare string or scalar is one id. Error messages show at most a few
        ids, truncated.
        """
        requested = check_request(sample_ids)
        slots = self._find(requested)
        unknown = np.flatnonzero(slots < 0)
        if len(unknown):
            raise UnlearningError(
                f"{len(unknown)} of {len(requested)} sample id(s) are not in the training "
                "set (never added, or already deleted): "
                f"{describe_ids([requested[k] for k in unknown.tolist()])}; "
                + ID_KIND_NOTES.get(self.id_kind, "")
            )
        if len(requested) >= self.n_samples:
            raise UnlearningError(
                "cannot delete every sample of the training set; fit a new estimator instead"
            )
        return slots.astype(np.int64)

    def remove(self, slots: np.ndarray) -> None:
        """Forget the rows in ``slots``: zero them, drop their ids from the index.

        Inside :func:`~sklearn_dpu._transaction.atomic`, the removal is undone
        if the block fails: the rows and ids of ``slots`` are kept aside
        until then (O(k) for k slots), and a compaction's new arrays are
        dropped for the old ones, kept by reference. A disk-backed registry
        (:func:`~sklearn_dpu.unlearning.disk_backed_rows`) gets its rows,
        ids and working file back (a compaction removes the former file when
        the block commits), but not the implicit snapshot files the removal
        deleted.
        """
        if in_transaction():
            self._keep_for_rollback(slots)
        if self._index is not None:
            self._index.drop(self.ids_of(slots))
        self.rows[slots] = 0
        if isinstance(self.rows, np.memmap):
            self.rows.flush()  # the zeros reach the file now
        if self._alive is None:
            self._alive = self.alive
        self._alive[slots] = False
        if self._ids is not None:
            self._ids[slots] = None if self._ids.dtype == object else self._ids.dtype.type()
        self._n_live -= len(slots)
        if self._store is not None:
            self._store.changed(deleted=True)
        if 2 * self.n_samples < self.size:
            self._compact()

    def _keep_for_rollback(self, slots: np.ndarray) -> None:
        """Register the undo of :meth:`remove` ``(slots)``."""
        saved = dict(self.__dict__)
        rows, alive, ids = self.rows, self._alive, self._ids
        removed = rows[slots]  # a copy: the k rows
        removed_ids = None if ids is None else ids[slots]

        def undo() -> None:
            rows[slots] = removed
            if isinstance(rows, np.memmap):
                rows.flush()
            if alive is not None:
                alive[slots] = True
            if ids is not None:
                ids[slots] = removed_ids
            self.__dict__.clear()
            self.__dict__.update(saved)
            self._index = None  # its ids were dropped: rebuilt at the next lookup

        on_rollback(undo)

    def _compact(self) -> None:
        if self._store is not None:  # the live rows move to a new file; the old is removed
            keep = self.live_slots()
            ids, chunks = self.ids_of(keep), self._runs.expand(self.size)[keep]
            try:
                rows = self._store.allocate(
                    len(keep), self.rows.shape[1], self.rows.dtype, self.rows, keep
                )
            except OSError:
                # Best effort: no room or no directory for a new file. The
                # deleted rows are already zeros in the current file, and the
                # registry stays as it is (uncompacted); a later deletion tries again.
                return
            self.rows = rows
            self._ids = ids
        else:
            self.rows, self._ids, chunks = self.live()
        self.size = len(self._ids)
        self._runs = ChunkRuns.of(chunks)
        self._alive = None
        self._index = None

    def saved_ids(self, keep: np.ndarray | None = None) -> tuple[np.ndarray, tuple | None]:
        """The live ids (or those of the slots ``keep``) as a file holds them,
        and their encoding (:func:`~sklearn_dpu.unlearning.ids.encode_datetime_ids`:
        ``Timestamp`` ids as ticks)."""
        return encode_datetime_ids(self.ids_of(self.live_slots() if keep is None else keep))

    def _id_state(self, keep: np.ndarray) -> dict:
        """What a pickle of the slots ``keep`` holds besides their rows."""
        ids, datetime_ids = self.saved_ids(keep)
        state = {
            "ids": ids,
            "chunks": self._runs.expand(self.size)[keep],
            "id_kind": self.id_kind,
            # Only a positional stream needs it (the next default id); see Notes.
            "n_seen": self.n_seen if self.id_kind == "positions" else None,
            "_format_version": self.FORMAT_VERSION,
        }
        if datetime_ids is not None:
            state["datetime_ids"] = datetime_ids
        return state

    def __getstate__(self):
        keep = self.live_slots()
        state = self._id_state(keep)
        if self._store is None:
            return {"rows": self.rows[keep], **state}
        # Disk-backed: the live rows in a snapshot file, checked on load.
        return {"row_file": self._store.snapshot(self.rows, keep), **state}

    def __deepcopy__(self, memo):
        """A copy with its own rows (a new working file for disk-backed rows)."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        if self._store is None:  # as the default deepcopy: through the pickled state
            new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
            return new
        store = RowStore(self._store.directory)
        keep = self.live_slots()
        rows = store.allocate(len(keep), self.rows.shape[1], self.rows.dtype, self.rows, keep)
        empty = np.zeros((0, self.rows.shape[1]), self.rows.dtype)
        new.__setstate__({"rows": empty, **copy.deepcopy(self._id_state(keep), memo)})
        new.rows, new._store = rows, store
        return new

    def __setstate__(self, state):
        state = dict(state)
        if state.get("_format_version") == 1:  # before id_kind: ids defaulted to positions
            state.update(_format_version=2, id_kind="positions")
        if state.get("_format_version") == 2:  # format 3 without a snapshot file
            state["_format_version"] = 3
        if state.get("_format_version") == 3:  # format 4 without its new cases
            state["_format_version"] = 4
            if state.get("id_kind") == "positions" and not _below(
                state.get("ids"), state.get("n_seen")
            ):
                # Written before "mixed": a given id at or above n_seen could be
                # repeated by the next default positions.
                state["id_kind"] = "mixed"
        store = None
        if state.get("_format_version") == self.FORMAT_VERSION and "row_file" in state:
            store, state["rows"] = RowStore.from_snapshot(state.pop("row_file"))
        ids = state.pop("ids", None)
        datetime_ids = state.pop("datetime_ids", None)
        if datetime_ids is not None:
            ids = decode_datetime_ids(ids, datetime_ids)
        state_chunks = np.asarray(state.pop("chunks", np.zeros(0, dtype=np.int32)))
        super().__setstate__(state)
        self._store = store
        ids = np.zeros(0, dtype=np.int64) if ids is None else ids
        if self.n_seen is None:
            self.n_seen = len(ids)  # not used: positions cannot join this stream
        self.size = self._n_live = len(ids)
        # Positions that equal their slots (no deletion, or only of the last
        # rows, before the pickle) are kept implicit again, as after ``fit``:
        # a reload does not cost 8 bytes a row.
        slots = self.id_kind == "positions" and ids.dtype == np.int64 and _counts_from(ids, 0)
        self._ids = None if slots else ids
        self._runs = ChunkRuns.of(state_chunks)
        self._alive = None
        self._index = None
