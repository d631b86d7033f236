"""Deletion rows on disk: a memory-mapped store for streams larger than memory.

A :class:`~sklearn_dpu.unlearning.state.SampleRegistry` keeps the stored
(clipped, encoded) training rows that exact or certified deletion needs. By
default they live in RAM: ``2 (d + 1)`` bytes a row for
:class:`~sklearn_dpu.linear_model.DPLinearRegression` (int16 codes),
``8 (d + 2)`` for :class:`~sklearn_dpu.linear_model.DPLogisticRegression` and
``4 (d + 1)`` for :class:`~sklearn_dpu.linear_model.UnlearnableSGDClassifier`
(with an intercept, ``d`` features). At ``10**8`` rows and ``d = 10`` that is
2.2 GB, 9.6 GB and 4.4 GB. Inside :func:`disk_backed_rows`, registries created
by ``fit`` or by the first ``partial_fit`` keep their rows in a
memory-mapped file in a directory you choose instead; the ids (none for row
positions), the chunk runs and, after a deletion, one flag byte per row stay in
memory. The operating system pages the rows in and out: the stream's
Python-heap memory no longer grows with its length.

What the files are, and what happens to them:

* The working file (``sklearn_dpu_rows_*.bin``, raw rows) belongs to one
  registry. A deletion overwrites the deleted rows with zeros in it at once
  (and flushes them); when half the rows are deleted the live rows move to a
  new file and the old one is removed. It is removed when the registry is
  garbage collected.
* Pickling (``pickle``, ``joblib``, :func:`sklearn_dpu.io.save`) writes a
  snapshot (``sklearn_dpu_rows_*.npy``, the live rows only) into the same
  directory and records its name, shape, dtype and SHA-256 in the pickle
  (a :class:`RowFile`). Each :func:`sklearn_dpu.io.save` writes a snapshot
  of its own, part of that saved model: it is yours, no deletion removes it;
  keep it with the model file and delete it with the model file. Every other
  snapshot (plain ``pickle`` / ``joblib`` / copies) is implicit: one per
  state of the rows (pickling again before the rows change, as joblib's
  parallel calls, Dask and copies do, reuses it and writes nothing), removed
  by the next deletion of the model that wrote it or of any model loaded from
  it, so no implicit file holds a deleted row: a plain pickle of a
  disk-backed model loads until such a deletion (save with
  :func:`sklearn_dpu.io.save` to keep it). Loading checks the snapshot
  against the record (a missing, truncated or altered file raises
  :class:`~sklearn_dpu.exceptions.PersistenceError` that says which kind of
  snapshot it was, and nothing is loaded) and copies it into a new working
  file, so the snapshot is never modified. To load from a moved directory,
  load inside ``disk_backed_rows(new_directory)``.
* These files hold training data, as a pickle of an in-memory model does:
  store them like the data. A snapshot saved by :func:`sklearn_dpu.io.save`
  before a deletion still holds the deleted rows, as does the model file
  saved then: deleting them is yours to do. The live model, its working
  file and every later snapshot do not.

Examples
--------
>>> import tempfile
>>> import numpy as np
>>> from sklearn_dpu.linear_model import DPLinearRegression
>>> from sklearn_dpu.unlearning import disk_backed_rows
>>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X[:, 0] / 4
>>> with tempfile.TemporaryDirectory() as folder:
...     with disk_backed_rows(folder):
...         reg = DPLinearRegression(feature_norm=4.0, target_bound=1.0, random_state=0)
...         reg = reg.partial_fit(X[:50], y[:50])
...     reg = reg.partial_fit(X[50:], y[50:]).delete_samples([3])
...     reg.unlearning_state_.registry.on_disk
True
"""

import errno
import hashlib
import io
import os
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._transaction import deferred_sigint, in_transaction, on_commit, on_rollback
from ..exceptions import PersistenceError

__all__ = [
    "RowFile",
    "RowStore",
    "active_directory",
    "disk_backed_rows",
    "gather_blocks",
    "kept_snapshots",
]

_DIRECTORY: ContextVar[Path | None] = ContextVar("sklearn_dpu_row_directory", default=None)
# Inside kept_snapshots(): the snapshots written in that block, by store (a
# save may pickle a model more than once: skops calls __getstate__ twice).
_KEPT: ContextVar[dict | None] = ContextVar("sklearn_dpu_kept_snapshots", default=None)
_PREFIX = "sklearn_dpu_rows_"
_BLOCK_BYTES = 1 << 24  # rows copied or hashed 16 MiB at a time


@contextmanager
def disk_backed_rows(directory: str | os.PathLike) -> Iterator[Path]:
    """Keep the deletion rows of registries created in this block in ``directory``.

    Parameters
    ----------
    directory : str or path-like
        An existing directory on a local disk with room for the rows (see the
        module notes for their size) and, when the model is saved, a snapshot.

    Yields
    ------
    Path
        The directory.

    Raises
    ------
    NotADirectoryError
        ``directory`` is not an existing directory.
    """
    path = Path(directory)
    if not path.is_dir():
        raise NotADirectoryError(f"disk_backed_rows needs an existing directory, got {path}")
    token = _DIRECTORY.set(path.resolve())
    try:
        yield path
    finally:
        _DIRECTORY.reset(token)


@contextmanager
def kept_snapshots() -> Iterator[None]:
    """Snapshots written in this block are the user's: deletions never remove them.

    :func:`sklearn_dpu.io.save` writes its model inside it.
    """
    token = _KEPT.set({})
    try:
        yield
    finally:
        _KEPT.reset(token)


def active_directory() -> Path | None:
    """The directory of the innermost :func:`disk_backed_rows` block, if any."""
    return _DIRECTORY.get()


@dataclass(frozen=True)
class RowFile:
    """The record, in a pickle, of a snapshot of disk-backed rows.

    Attributes
    ----------
    directory : str
        Where the snapshot was written.
    name : str
        Its file name (an ``.npy`` file).
    shape : tuple of int
        ``(live rows, row width)``.
    dtype : str
    sha256 : str
        Hex digest of the whole file.
    kept : bool
        Written by :func:`sklearn_dpu.io.save` (inside :func:`kept_snapshots`):
        the user's file, never removed by a deletion. An implicit snapshot (a
        plain pickle, joblib, a copy) is removed by the next deletion of any
        model holding it, the one loaded from it included. Records saved
        before this field existed read as implicit.
    """

    directory: str
    name: str
    shape: tuple
    dtype: str
    sha256: str
    kept: bool = False


def _unlink(path: str) -> None:
    try:
        os.remove(path)
    except OSError:  # gone already, or still mapped where that forbids removal
        pass


def _new_file(directory: Path, suffix: str) -> str:
    handle, name = tempfile.mkstemp(prefix=_PREFIX, suffix=suffix, dir=directory)
    os.close(handle)
    return name


def _set_size(path: str, nbytes: int) -> None:
    """Make the file ``nbytes`` long with its blocks allocated now.

    A sparse file (``os.truncate`` alone) would get its blocks when the
    memory map first writes them, and a full disk then kills the process
    (SIGBUS). ``os.posix_fallocate`` reserves them here: no room is an
    :class:`OSError` before any row is written.
    """
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None and nbytes > 0:
        fd = os.open(path, os.O_RDWR)
        try:
            fallocate(fd, 0, nbytes)
            return
        except OSError as err:
            if err.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise _no_room(path, nbytes, err) from err
        finally:
            os.close(fd)
    os.truncate(path, nbytes)  # no fallocate here: a sparse file


def _no_room(path: str, nbytes: int, err: OSError) -> OSError:
    return type(err)(
        err.errno,
        f"cannot reserve {nbytes} bytes for deletion rows in {os.path.dirname(path)} "
        f"({os.strerror(err.errno) if err.errno else err}); nothing was changed: free "
        "space there, or use another disk_backed_rows directory",
    )


def _block_rows(width: int, dtype: np.dtype) -> int:
    return max(1, _BLOCK_BYTES // max(1, width * dtype.itemsize))


def _copy_rows(source: np.ndarray, keep: np.ndarray | None, target: np.ndarray) -> None:
    """``target[:] = source[keep]`` (or ``source[:len(target)]``) a block at a time."""
    step = _block_rows(target.shape[1], target.dtype)
    for start in range(0, len(target), step):
        stop = min(len(target), start + step)
        part = source[start:stop] if keep is None else source[keep[start:stop]]
        target[start:stop] = part


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


class RowStore:
    """The working file of one registry's rows (removed when the store is collected).

    Parameters
    ----------
    directory : Path
    """

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.path: str | None = None
        self._finalizer: weakref.finalize | None = None
        # The snapshot of the current rows, if one exists: reused by every
        # pickle until the rows change (joblib, dask and copies pickle often).
        self._current: tuple[Path, RowFile] | None = None
        # Snapshots this store wrote outside kept_snapshots(): removed by the
        # next deletion, so no file of ours keeps a deleted row.
        self._written: list[Path] = []

    def changed(self, *, deleted: bool = False) -> None:
        """The rows changed: the next pickle writes a new snapshot; after a
        deletion, the snapshots this store wrote (not kept ones) are removed."""
        self._current = None
        if deleted:
            for path in self._written:
                _unlink(str(path))
            self._written = []

    def snapshot(self, rows: np.ndarray, keep: np.ndarray) -> RowFile:
        """The record of a snapshot of ``rows[keep]`` (see :meth:`write_snapshot`).

        Inside :func:`kept_snapshots` (``sklearn_dpu.io.save``) always a new
        file, the user's: one per saved model, so removing one saved model
        and its snapshot never breaks another. Otherwise the current implicit
        snapshot while it is on disk, else a new one, removed by this store's
        next deletion.
        """
        kept = _KEPT.get()
        if kept is not None:
            if id(self) not in kept:  # the store is held too: its id is not reused
                kept[id(self)] = (self, self.write_snapshot(rows, keep))
            return kept[id(self)][1]
        if self._current is not None and self._current[0].is_file():
            return self._current[1]
        record = self.write_snapshot(rows, keep)
        path = Path(record.directory) / record.name
        self._current = (path, record)
        self._written.append(path)
        return record

    def _open(self, path: str, capacity: int, width: int, dtype: np.dtype) -> np.ndarray:
        if capacity == 0:
            return np.zeros((0, width), dtype=dtype)
        return np.memmap(path, dtype=dtype, mode="r+", shape=(capacity, width))

    def _adopt(self, path: str) -> None:
        """Make ``path`` the working file; remove the previous one (inside
        :func:`~sklearn_dpu._transaction.atomic`, when the block commits; if
        it fails, the previous file is the working file again and ``path``
        is removed)."""
        old_path, old_finalizer = self.path, self._finalizer
        if not in_transaction():
            self.path, self._finalizer = path, weakref.finalize(self, _unlink, path)
            if old_finalizer is not None:
                old_finalizer()  # removes the old file now
            return
        with deferred_sigint():  # no Ctrl-C between the switch and its undo
            new_finalizer = weakref.finalize(self, _unlink, path)
            self.path, self._finalizer = path, new_finalizer

            def undo() -> None:
                new_finalizer()  # removes the new file
                self.path, self._finalizer = old_path, old_finalizer

            on_rollback(undo)
            if old_finalizer is not None:
                on_commit(old_finalizer)

    def allocate(
        self,
        capacity: int,
        width: int,
        dtype: np.dtype,
        source: np.ndarray | None = None,
        keep: np.ndarray | None = None,
    ) -> np.ndarray:
        """A new zero-filled working file of ``capacity`` rows, holding
        ``source[keep]`` (or the first rows of ``source``) at its start;
        the previous working file is removed after the copy."""
        dtype = np.dtype(dtype)
        path = _new_file(self.directory, ".bin")
        try:
            _set_size(path, capacity * width * dtype.itemsize)  # reads as zeros
            rows = self._open(path, capacity, width, dtype)
            if source is not None:
                count = len(source) if keep is None else len(keep)
                _copy_rows(source, keep, rows[:count])
                if isinstance(rows, np.memmap):
                    rows.flush()
            self._adopt(path)
        except BaseException:  # a Ctrl-C before the adoption leaves no file behind
            _unlink(path)
            raise
        return rows

    def grow(self, rows: np.ndarray, capacity: int) -> np.ndarray:
        """``rows`` (this store's working file) extended to ``capacity`` rows in place."""
        if self.path is None or len(rows) == 0:
            return self.allocate(capacity, rows.shape[1], rows.dtype, source=rows)
        if isinstance(rows, np.memmap):
            rows.flush()
        _set_size(self.path, capacity * rows.shape[1] * rows.dtype.itemsize)
        return self._open(self.path, capacity, rows.shape[1], rows.dtype)

    def write_snapshot(self, rows: np.ndarray, keep: np.ndarray) -> RowFile:
        """Write ``rows[keep]`` to a new ``.npy`` file in the directory: its record.

        Plain buffered writes (no memory map), after reserving the file's
        size: a full disk is an :class:`OSError`, and the partial file is removed.
        """
        shape = (len(keep), rows.shape[1])
        header = {
            "descr": np.lib.format.dtype_to_descr(rows.dtype),
            "fortran_order": False,
            "shape": shape,
        }
        try:
            path = _new_file(self.directory, ".npy")
        except OSError as err:
            raise PersistenceError(
                f"cannot write the deletion rows snapshot into {self.directory}: {err}"
            ) from err
        digest = hashlib.sha256()
        try:
            buffer = io.BytesIO()
            np.lib.format.write_array_header_1_0(buffer, header)
            _set_size(path, buffer.tell() + len(keep) * rows.shape[1] * rows.dtype.itemsize)
            with open(path, "r+b") as handle:
                handle.write(buffer.getvalue())
                digest.update(buffer.getvalue())
                step = _block_rows(rows.shape[1], rows.dtype)
                for start in range(0, len(keep), step):
                    block = np.ascontiguousarray(rows[keep[start : start + step]])
                    digest.update(block.data)
                    handle.write(block.data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            _unlink(path)
            raise
        return RowFile(
            str(self.directory),
            os.path.basename(path),
            shape,
            rows.dtype.str,
            digest.hexdigest(),
            kept=_KEPT.get() is not None,
        )

    @classmethod
    def from_snapshot(cls, record: RowFile) -> tuple["RowStore", np.ndarray]:
        """Check the snapshot of ``record`` and copy it into a new working file.

        The snapshot is searched in the active :func:`disk_backed_rows`
        directory if there is one, then where it was written; the new working
        file goes to the active directory if any, else where the snapshot was
        written. The snapshot is only read; its recorded name must be a bare
        ``sklearn_dpu_rows_*.npy`` file name.

        Raises
        ------
        PersistenceError
            The snapshot is missing, its recorded name is not a bare snapshot
            file name, or its bytes, shape or dtype are not the recorded ones.
        """
        name = record.name
        if (
            not isinstance(name, str)
            or not name.startswith(_PREFIX)
            or not name.endswith(".npy")
            or os.path.basename(name) != name
            or "/" in name
            or (os.altsep is not None and os.altsep in name)
            or os.path.isabs(name)
        ):
            raise PersistenceError(
                f"the deletion rows record names {name!r}, not a bare "
                f"{_PREFIX}*.npy file name: refused (the file was altered)"
            )
        active = active_directory()
        places = [Path(record.directory)] if active is None else [active, Path(record.directory)]
        found = [place / name for place in places if (place / name).is_file()]
        if not found:
            raise PersistenceError(
                f"the deletion rows snapshot {name} of this model does not exist in "
                f"{' nor in '.join(str(place) for place in dict.fromkeys(places))}. "
                + (
                    "It was written by sklearn_dpu.io.save: keep it at that path, or load "
                    "inside sklearn_dpu.unlearning.disk_backed_rows(<directory holding it>)"
                    if record.kept
                    else "It was written by a plain pickle (pickle, joblib, a copy), whose "
                    "snapshot the model's next deletion removes so that no file keeps a "
                    "deleted row: keep models with sklearn_dpu.io.save, whose snapshots "
                    "are kept"
                )
            )
        path = found[0]
        directory = active or Path(record.directory)
        if _sha256(path) != record.sha256:
            raise PersistenceError(
                f"the deletion rows snapshot {path} is corrupted: its SHA-256 is not the one "
                "recorded when the model was saved; deletion cannot use it (refit, or "
                "restore the file)"
            )
        try:
            snapshot = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as err:  # pragma: no cover - caught by the digest
            raise PersistenceError(
                f"the deletion rows snapshot {path} is unreadable: {err}"
            ) from err
        if snapshot.shape != tuple(record.shape) or snapshot.dtype != np.dtype(record.dtype):
            raise PersistenceError(  # pragma: no cover - caught by the digest
                f"the deletion rows snapshot {path} has shape {snapshot.shape} and dtype "
                f"{snapshot.dtype}, not the recorded {tuple(record.shape)}, {record.dtype}"
            )
        store = cls(directory)
        rows = store.allocate(len(snapshot), snapshot.shape[1], snapshot.dtype, source=snapshot)
        if not record.kept:
            # An implicit snapshot: this model's next deletion removes it, as
            # the store that wrote it would have (it may be gone: another
            # process, or a pickle's only trace), so no file keeps a deleted row.
            store._current = (path, record)
            store._written.append(path)
        return store, rows


def gather_blocks(tasks: list, n_rows: int, width: int, dtype: np.typing.DTypeLike) -> tuple:
    """Compute Dask tasks a few at a time, writing their rows into a scratch file.

    For a Dask fit inside :func:`disk_backed_rows`: the rows every task returns
    (the first item of a tuple result) go, in task order, into a memory-mapped
    file in the active directory as each batch of ``os.cpu_count()`` tasks
    completes, so the driver holds a batch of blocks at a time, never all
    the rows. The file is removed when the returned array (and every view of
    it) is collected.

    Parameters
    ----------
    tasks : list of dask.delayed
    n_rows : int
        Rows returned by all the tasks together.
    width : int
    dtype : dtype

    Returns
    -------
    rows : ndarray of shape (n_rows, width)
        Memory-mapped.
    rest : list of tuple
        The other items of each task's result, in task order.
    """
    import dask

    store = RowStore(active_directory() or Path(tempfile.gettempdir()))
    rows = store.allocate(n_rows, width, np.dtype(dtype))
    rest, position = [], 0
    batch = max(1, os.cpu_count() or 1)
    for start in range(0, len(tasks), batch):
        for result in dask.compute(*tasks[start : start + batch]):
            block, others = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
            rows[position : position + len(block)] = block
            position += len(block)
            rest.append(others)
    if position != n_rows:
        raise ValueError(f"the Dask blocks hold {position} rows, their shape says {n_rows}")
    if isinstance(rows, np.memmap):
        rows.flush()
        rows._sklearn_dpu_store = store  # the file lives as long as the array
    return rows, rest
