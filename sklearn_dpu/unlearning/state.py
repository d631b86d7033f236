"""The metadata that makes deletion possible: versioned, and keyed by sample id.

:class:`SampleRegistry` keeps the stored (encoded) rows of the samples that are
currently in the training set, their ids and the chunk each arrived in. A
deleted row is overwritten with zeros at once, its id leaves the index, and
the next pickle holds only the live rows, in arrival order, exactly what a
fresh fit on the remaining rows would store. Ids of deleted samples are not
kept: an id can be personal data too. Hence an "already deleted" id and an id
that was never added get the same error.
"""

from collections.abc import Hashable, Iterable

import numpy as np

from ..exceptions import StateVersionError, UnlearningError

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


def _as_id_array(ids) -> np.ndarray:
    """Ids as int64, str or (for anything else hashable) object array.

    Lists are not passed through ``np.asarray``, which would turn
    ``["a", 10]`` into ``["a", "10"]`` and make id ``10`` unfindable.
    """
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise ValueError(f"sample_id must be one-dimensional, got shape {ids.shape}")
        if ids.dtype.kind in "iu":
            return ids.astype(np.int64)
        if ids.dtype.kind == "U":
            return ids
        ids = ids.tolist()
    values = list(ids)
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=np.int64)
    if values and all(isinstance(v, str) for v in values):
        return np.asarray(values, dtype=str)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    for value in values:
        if not isinstance(value, Hashable):
            raise TypeError(f"sample ids must be hashable, got {type(value).__name__}")
    return out


def _concat_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == b.dtype or a.dtype.kind == b.dtype.kind == "U":
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

    Notes
    -----
    Size: ``n * n_columns`` items of ``dtype`` plus one id (8 bytes for
    integer ids) and one int32 chunk number per live sample. Lookups use a
    dict from id to slot, rebuilt after unpickling and never persisted.
    """

    FORMAT_VERSION = 1

    def __init__(self, n_columns: int, dtype=np.int16):
        self.rows = np.zeros((0, n_columns), dtype=dtype)
        self.ids = np.zeros(0, dtype=np.int64)
        self.chunks = np.zeros(0, dtype=np.int32)
        self.alive = np.zeros(0, dtype=bool)
        self.size = 0  # slots in use; arrays beyond it are spare capacity
        self.n_seen = 0  # rows ever added; numbers the default ids
        self._slot_of: dict = {}

    @property
    def n_samples(self) -> int:
        return len(self._slot_of)

    def default_ids(self, n: int) -> np.ndarray:
        """Ids for ``n`` new rows when the user gives none: arrival numbers."""
        return np.arange(self.n_seen, self.n_seen + n, dtype=np.int64)

    def check_new_ids(self, ids, n_rows: int) -> np.ndarray:
        """Validate ids for rows about to be added; returns them as an array."""
        ids = _as_id_array(ids)
        if len(ids) != n_rows:
            raise ValueError(f"sample_id has {len(ids)} entries for {n_rows} rows")
        try:
            unique = len(set(ids.tolist())) == len(ids)
        except TypeError as err:
            raise TypeError("sample ids must be hashable") from err
        if not unique:
            raise ValueError("sample_id contains duplicates")
        clash = next((i for i in ids.tolist() if i in self._slot_of), None)
        if clash is not None:
            raise ValueError(f"sample id {clash!r} is already in the training set")
        return ids

    def add(self, ids: np.ndarray, rows: np.ndarray, chunk: int) -> None:
        """Append rows (ids already checked by :meth:`check_new_ids`)."""
        start, stop = self.size, self.size + len(ids)
        if stop > len(self.alive):
            self._reserve(max(stop, 2 * len(self.alive)))
        if start == 0:
            self.ids = np.zeros(len(self.alive), dtype=ids.dtype)
        elif not (self.ids.dtype == ids.dtype or self.ids.dtype.kind == ids.dtype.kind == "U"):
            self.ids = _concat_ids(self.ids, np.zeros(0, dtype=ids.dtype))
        elif self.ids.dtype.kind == "U" and ids.dtype.itemsize > self.ids.dtype.itemsize:
            self.ids = self.ids.astype(ids.dtype)
        self.rows[start:stop] = rows
        self.ids[start:stop] = ids
        self.chunks[start:stop] = chunk
        self.alive[start:stop] = True
        self._slot_of.update(zip(ids.tolist(), range(start, stop), strict=True))
        self.size = stop
        self.n_seen += len(ids)

    def _reserve(self, capacity: int) -> None:
        def grown(array):
            out = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
            out[: self.size] = array[: self.size]
            return out

        self.rows, self.ids = grown(self.rows), grown(self.ids)
        self.chunks, self.alive = grown(self.chunks), grown(self.alive)

    def live(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, ids and chunks of the live samples, in arrival order (copies)."""
        keep = np.flatnonzero(self.alive[: self.size])
        return self.rows[keep], self.ids[keep], self.chunks[keep]

    def slots_of(self, sample_ids: Iterable) -> np.ndarray:
        """Slots of ``sample_ids``; raises :class:`UnlearningError` on a bad request."""
        requested = _as_id_array(sample_ids).tolist()
        if not requested:
            raise UnlearningError("no sample ids given")
        if len(set(requested)) != len(requested):
            raise UnlearningError("the same sample id is requested more than once")
        missing = [i for i in requested if i not in self._slot_of]
        if missing:
            shown = ", ".join(repr(i) for i in missing[:5])
            raise UnlearningError(
                f"{len(missing)} sample id(s) not in the training set (never added, "
                f"or already deleted): {shown}{' ...' if len(missing) > 5 else ''}"
            )
        if len(requested) >= self.n_samples:
            raise UnlearningError(
                "cannot delete every sample of the training set; fit a new estimator instead"
            )
        return np.fromiter((self._slot_of[i] for i in requested), dtype=np.int64)

    def remove(self, slots: np.ndarray) -> None:
        """Forget the rows in ``slots``: zero them, drop their ids from the index."""
        for sample_id in self.ids[slots].tolist():
            del self._slot_of[sample_id]
        self.rows[slots] = 0
        self.chunks[slots] = 0
        self.alive[slots] = False
        if self.ids.dtype == object:
            self.ids[slots] = None
        else:
            self.ids[slots] = 0 if self.ids.dtype.kind in "iu" else ""
        if 2 * self.n_samples < self.size:
            self._compact()

    def _compact(self) -> None:
        self.rows, self.ids, self.chunks = self.live()
        self.size = len(self.ids)
        self.alive = np.ones(self.size, dtype=bool)
        self._slot_of = dict(zip(self.ids.tolist(), range(self.size), strict=True))

    def __getstate__(self):
        rows, ids, chunks = self.live()
        return {
            "rows": rows,
            "ids": ids,
            "chunks": chunks,
            "n_seen": self.n_seen,
            "_format_version": self.FORMAT_VERSION,
        }

    def __setstate__(self, state):
        super().__setstate__(state)
        self.size = len(self.ids)
        self.alive = np.ones(self.size, dtype=bool)
        self._slot_of = dict(zip(self.ids.tolist(), range(self.size), strict=True))
