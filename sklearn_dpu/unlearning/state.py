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

from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike

from ..exceptions import StateVersionError, UnlearningError
from .ids import IdRequest, check_request, describe_ids, requested_ids

__all__ = ["SampleRegistry", "VersionedState"]


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


def _same_kind(a: np.dtype, b: np.dtype) -> bool:
    return a == b or (a.kind == b.kind and a.kind in "US")


def _concat_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _same_kind(a.dtype, b.dtype):
        return np.concatenate([a, b])
    out = np.empty(len(a) + len(b), dtype=object)
    out[: len(a)] = a.tolist()
    out[len(a) :] = b.tolist()
    return out


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
    id_kind : {"given", "index", "positions"} or None
        Where the ids of the stream's first call came from: ``sample_id``, a
        DataFrame's index labels, or row positions (see
        :mod:`sklearn_dpu.unlearning.ids`). Row positions continue across
        calls only in a stream that started with them, and index labels
        cannot follow them: mixing the two would let two people share an id.
    n_seen : int
        Rows ever added, deleted ones included: the next default id.

    Notes
    -----
    Size: ``n * n_columns`` items of ``dtype`` plus one id (8 bytes for
    integer ids) and one int32 chunk number per live sample. Lookups use a
    dict from id to slot, never persisted, built by the first lookup (a fit
    that is never edited does not pay for it).

    What a pickle holds beyond a fresh fit on the remaining rows: ``id_kind``
    (a public fact about the input), and, only when ``id_kind`` is
    ``"positions"``, ``n_seen``. It is needed: the next default id must be
    ``n_seen``, never a deleted row's position, or a repeated deletion request
    for that position would delete someone else. It equals the live rows plus
    the sum of ``n_deleted`` over the estimator's ``deletion_log_`` since the
    last ``fit``, so it tells nothing the log does not; the largest live
    position bounds it from below. Ids, rows and chunks of deleted samples are
    not kept. Ids (given, index or positions) are not pickled for other kinds.
    """

    FORMAT_VERSION = 2

    def __init__(self, n_columns: int, dtype=np.int16):
        self.rows = np.zeros((0, n_columns), dtype=dtype)
        self.ids = np.zeros(0, dtype=np.int64)
        self.chunks = np.zeros(0, dtype=np.int32)
        self.alive = np.zeros(0, dtype=bool)
        self.size = 0  # slots in use; arrays beyond it are spare capacity
        self.n_seen = 0  # rows ever added; numbers the default ids
        self.id_kind = None  # set by the first check_new_ids
        self._index: dict | None = None  # id -> slot; see _slot_of

    @property
    def _slot_of(self) -> dict:
        """Id -> slot of the live samples, built on the first lookup."""
        if self._index is None:
            live = np.flatnonzero(self.alive[: self.size])
            self._index = dict(zip(self.ids[live].tolist(), live.tolist(), strict=True))
        return self._index

    @property
    def n_samples(self) -> int:
        return int(np.count_nonzero(self.alive[: self.size]))

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
        ndarray of shape (n_rows,)
        """
        request = ids if isinstance(ids, IdRequest) else requested_ids(None, ids)
        stream = self.id_kind
        if request.kind == "positions" and stream not in (None, "positions"):
            source = "given as sample_id" if stream == "given" else "DataFrame index labels"
            raise ValueError(
                f"the ids of this estimator's rows were {source}; pass sample_id= (or a "
                "DataFrame) for new rows too: numbering them by position could give two "
                "people the same id"
            )
        if request.kind == "index" and stream == "positions":
            raise ValueError(
                "the ids of this estimator's rows are row positions (no sample_id, array "
                "input); the index labels of a DataFrame could repeat them: pass sample_id="
            )
        values = self.default_ids(n_rows) if request.values is None else request.values
        if len(values) != n_rows:
            raise ValueError(f"sample_id has {len(values)} entries for {n_rows} rows")
        if self.n_samples and not self._slot_of.keys().isdisjoint(values.tolist()):
            clash = [i for i in values.tolist() if i in self._slot_of]  # error path only
            raise ValueError(
                f"{len(clash)} sample id(s) are already in the training set: {describe_ids(clash)}"
            )
        if stream is None:  # a fresh registry, discarded if the call fails later
            self.id_kind = request.kind
        return values

    def add(self, ids: np.ndarray, rows: np.ndarray, chunk: int, *, adopt: bool = False) -> None:
        """Append rows (ids already checked by :meth:`check_new_ids`).

        ``adopt=True``: ``rows`` is a new array nothing else will write to;
        an empty registry keeps it as its storage instead of copying it.
        """
        start, stop = self.size, self.size + len(ids)
        storage = (self.rows.dtype, self.rows.shape[1:])
        if (
            adopt
            and start == 0
            and (rows.dtype, rows.shape[1:]) == storage
            and rows.flags.c_contiguous
        ):
            self._reserve(stop, rows=rows)
        elif stop > len(self.alive):
            self._reserve(max(stop, 2 * len(self.alive)))
        if start == 0:
            self.ids = np.zeros(len(self.alive), dtype=ids.dtype)
        elif not _same_kind(self.ids.dtype, ids.dtype):
            self.ids = _concat_ids(self.ids, np.zeros(0, dtype=ids.dtype))
        elif self.ids.dtype.kind in "US" and ids.dtype.itemsize > self.ids.dtype.itemsize:
            self.ids = self.ids.astype(ids.dtype)
        if self.rows is not rows:
            self.rows[start:stop] = rows
        self.ids[start:stop] = ids
        self.chunks[start:stop] = chunk
        self.alive[start:stop] = True
        if self._index is not None:
            self._index.update(zip(ids.tolist(), range(start, stop), strict=True))
        self.size = stop
        self.n_seen += len(ids)

    def _reserve(self, capacity: int, rows: np.ndarray | None = None) -> None:
        def grown(array):
            out = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
            out[: self.size] = array[: self.size]
            return out

        self.rows = grown(self.rows) if rows is None else rows
        self.ids = grown(self.ids)
        self.chunks, self.alive = grown(self.chunks), grown(self.alive)

    def live(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, ids and chunks of the live samples, in arrival order (copies)."""
        keep = np.flatnonzero(self.alive[: self.size])
        return self.rows[keep], self.ids[keep], self.chunks[keep]

    def slots_of(self, sample_ids: Iterable) -> np.ndarray:
        """Slots of ``sample_ids``; raises :class:`UnlearningError` on a bad request.

        ``sample_ids`` is read by :func:`~sklearn_dpu.unlearning.ids.as_id_list`:
        a bare string or scalar is one id. Error messages show at most a few
        ids, truncated.
        """
        requested = check_request(sample_ids)
        slots = np.array(list(map(self._slot_of.get, requested)), dtype=object)
        unknown = np.flatnonzero(slots == None)  # noqa: E711 (elementwise)
        if len(unknown):
            raise UnlearningError(
                f"{len(unknown)} of {len(requested)} sample id(s) are not in the training "
                "set (never added, or already deleted): "
                f"{describe_ids([requested[k] for k in unknown])}"
            )
        if len(requested) >= self.n_samples:
            raise UnlearningError(
                "cannot delete every sample of the training set; fit a new estimator instead"
            )
        return slots.astype(np.int64)

    def remove(self, slots: np.ndarray) -> None:
        """Forget the rows in ``slots``: zero them, drop their ids from the index."""
        if self._index is not None:
            for sample_id in self.ids[slots].tolist():
                del self._index[sample_id]
        self.rows[slots] = 0
        self.chunks[slots] = 0
        self.alive[slots] = False
        self.ids[slots] = None if self.ids.dtype == object else self.ids.dtype.type()
        if 2 * self.n_samples < self.size:
            self._compact()

    def _compact(self) -> None:
        self.rows, self.ids, self.chunks = self.live()
        self.size = len(self.ids)
        self.alive = np.ones(self.size, dtype=bool)
        self._index = None

    def __getstate__(self):
        rows, ids, chunks = self.live()
        return {
            "rows": rows,
            "ids": ids,
            "chunks": chunks,
            "id_kind": self.id_kind,
            # Only a positional stream needs it (the next default id); see Notes.
            "n_seen": self.n_seen if self.id_kind == "positions" else None,
            "_format_version": self.FORMAT_VERSION,
        }

    def __setstate__(self, state):
        state = dict(state)
        if state.get("_format_version") == 1:  # before id_kind: ids defaulted to positions
            state.update(_format_version=self.FORMAT_VERSION, id_kind="positions")
        super().__setstate__(state)
        if self.n_seen is None:
            self.n_seen = len(self.ids)  # not used: positions cannot join this stream
        self.size = len(self.ids)
        self.alive = np.ones(self.size, dtype=bool)
        self._index = None
