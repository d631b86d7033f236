"""Dask input for :class:`~sklearn_dpu.linear_model.UnlearnableSGDClassifier`:
the stored rows stay on the workers, the batches of many steps are fetched
per round trip.

The run is the same mechanism as in memory ([U24]_ Alg. 21 / 9 and the
unlearning of Alg. 22 / 10), step for step: the batches
(Poisson or fixed-size subsets of the live slots), the noise and the
unlearning coupling are drawn on the driver from the same generator, in the
same order, before the rows of a step are read; only *where* the stored
rows live changes. Each step's gradient needs the previous step's iterate,
so the steps themselves cannot run on the workers without one round trip per
step (a Dask task costs about 64 in-memory batch gradients, see
``benchmarks/bench_dask.py``). Instead:

* the stored rows (clipped in float64, rounded once to float32, label code
  appended: the values of the in-memory storage) are computed block by block
  on the workers and persisted there (:class:`WorkerRows`);
* the training loop gathers the rows of the batches of a *block of steps* in
  one Dask computation (``np.take`` of each Dask block's slots on its worker,
  about ``WorkerRows.chunk_values`` values per round trip) and runs those
  steps on the driver. The batch indices are public randomness drawn before
  any row is read, so prefetching them changes no value: a seeded fit is
  bit-identical to the same fit on the numpy array.

What reaches the driver: the rows of every step's batch, one block of steps
at a time (an epoch brings about ``n`` rows through the driver, never more
than one block's ``chunk_values`` values at once), the label classes (as
in memory, ``classes_`` is published) and the deleted rows' values when a
deletion computes their gradients. A deletion zeroes the deleted rows on the
workers (the blocks holding them are recomputed and persisted again). Calls
that need all rows in memory bring them to the driver and the registry keeps
them there from then on: ``partial_fit`` after a Dask ``fit``, the
compaction after half the rows were deleted, pickling and
``feature_norm='auto'`` (whose private bound is computed in memory: the Dask
input is then read into memory as before).

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024,
   Algorithms 9, 10, 21 and 22 (the coupled noisy SGD and its unlearning,
   implemented in ``_coupled_sgd``; nothing here changes them, only where
   the stored rows live).
"""

import os
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..privacy.clipping import clip_rows_l2

__all__ = ["WorkerRows", "validate_dask"]


def _encode_block(X, y, classes, bound):
    """One block's stored rows: the in-memory ``_encode`` on a block."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).ravel()
    if not np.all(np.isfinite(X)):
        raise ValueError("Input X contains NaN or infinity.")
    if not np.isin(y, classes).all():
        raise ValueError("`classes` must include every label of y")
    rows = np.empty((X.shape[0], X.shape[1] + 1), dtype=np.float32)
    clip_rows_l2(X, bound, out=rows[:, :-1])
    rows[:, -1] = np.searchsorted(classes, y)
    return rows


def _take(block, local):
    return np.take(block, local, axis=0)


def _zeroed(block, local):
    block = block.copy()
    block[local] = 0
    return block


class WorkerRows:
    """A registry's stored rows as a persisted Dask array on the workers.

    Quacks like the ndarray a :class:`~sklearn_dpu.unlearning.state.SampleRegistry`
    keeps for the operations of a fitted run: :meth:`take` (one Dask
    computation for any set of slots), zeroing rows (``rows[slots] = 0``,
    recomputing the blocks that hold them), and ``np.asarray`` (all rows to
    the driver, for the calls that need them in memory).

    Parameters
    ----------
    array : dask.array.Array of shape (n, n_features + 1), float32
        Persisted stored rows, whole rows per block.
    """

    # Values gathered per round trip by the training loop (``_gathered_chunks``
    # reads it): more steps per Dask computation than the in-memory cache-sized
    # chunks, so the round trip's latency is spread over many batches.
    chunk_values = 1 << 22

    def __init__(self, array: Any):
        self.array = array
        self.offsets = np.concatenate([[0], np.cumsum(array.chunks[0])]).astype(np.int64)
        self._blocks = array.to_delayed().ravel()
        self.flags = SimpleNamespace(c_contiguous=True)  # adopted by the registry as is

    @classmethod
    def encode(cls, X: Any, y: Any, classes: np.ndarray, bound: float) -> "WorkerRows":
        """Stored rows of ``X``, ``y`` (Dask, aligned blocks) computed and
        persisted on the workers: rows clipped to ``bound``, label codes of
        ``classes`` beside them."""
        import dask.array as da

        rows = da.map_blocks(
            _encode_block,
            X,
            y[:, None],
            classes,
            float(bound),
            dtype=np.float32,
            chunks=(X.chunks[0], (X.shape[1] + 1,)),
        )
        return cls(rows.persist())

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.offsets[-1]), int(self.array.shape[1]))

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nbytes(self) -> int:
        """Bytes the rows take on the workers."""
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def _by_block(self, slots: np.ndarray):
        slots = np.asarray(slots, dtype=np.int64)
        block = np.searchsorted(self.offsets, slots, side="right") - 1
        order = np.argsort(block, kind="stable")
        bounds = np.searchsorted(block[order], np.arange(len(self._blocks) + 1))
        for b in range(len(self._blocks)):
            chosen = order[bounds[b] : bounds[b + 1]]
            if len(chosen):
                yield b, chosen, slots[chosen] - self.offsets[b]

    def take(self, slots: np.ndarray) -> np.ndarray:
        """Rows of ``slots`` (in that order), gathered in one Dask computation."""
        import dask

        out = np.empty((len(slots), self.shape[1]), dtype=self.dtype)
        parts = list(self._by_block(slots))
        task = dask.delayed(_take, pure=True)
        values = dask.compute(*[task(self._blocks[b], local) for b, _, local in parts])
        for (_, chosen, _), rows in zip(parts, values, strict=True):
            out[chosen] = rows
        return out

    def __getitem__(self, key) -> "WorkerRows | np.ndarray":
        if isinstance(key, slice) and range(len(self))[key] == range(len(self)):
            return self
        return self.take(np.arange(len(self))[key])

    def __setitem__(self, key, value) -> None:
        """Zero rows (a deletion); the blocks holding them are recomputed and persisted."""
        import dask
        import dask.array as da

        if not np.all(np.asarray(value) == 0):
            raise ValueError("rows stored on the workers can only be zeroed")
        slots = np.arange(len(self))[key]
        blocks = list(self._blocks)
        for b, _, local in self._by_block(slots):
            blocks[b] = dask.delayed(_zeroed, pure=True)(blocks[b], local)
        shapes = np.diff(self.offsets)
        array = da.concatenate(
            [
                da.from_delayed(block, (int(rows), self.shape[1]), dtype=self.dtype)
                for block, rows in zip(blocks, shapes, strict=True)
            ]
        )
        self.__init__(array.persist())

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        rows = np.asarray(self.array.compute())
        return rows if dtype is None else rows.astype(dtype)

    def copy_into(self, target: np.ndarray) -> None:
        """``target[:] = self``, a few blocks at a time (``os.cpu_count()``
        per Dask computation): a registry on disk never holds all the rows."""
        import dask

        batch = max(1, os.cpu_count() or 1)
        for first in range(0, len(self._blocks), batch):
            values = dask.compute(*self._blocks[first : first + batch])
            for b, rows in enumerate(values, start=first):
                target[self.offsets[b] : self.offsets[b + 1]] = rows

    def __deepcopy__(self, memo) -> "WorkerRows":
        # Never written in place (zeroing persists a new array): share it.
        return WorkerRows(self.array)

    def __reduce__(self):
        # Pickled as the ndarray of its rows: a saved model reloads in memory.
        return (np.asarray, (np.asarray(self),))


def validate_dask(estimator: Any, X: Any, y: Any, sample_id: Any, classes: Any) -> tuple:
    """``fit``'s validation of Dask ``X``, ``y``: what ``validate`` returns
    in memory, ``(registry, ids, (X, y), classes_)``, with ``X`` and ``y``
    Dask arrays of aligned blocks. Finiteness and labels are checked on the
    workers before anything is charged or released."""
    import dask
    import dask.array as da
    from sklearn.utils.multiclass import check_classification_targets

    from ..unlearning.state import SampleRegistry
    from ._dask_sums import _aligned

    X, y = _aligned(X, y)
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"X must hold numbers, got dtype {X.dtype}")
    n, d = (int(s) for s in X.shape)
    if n == 0:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    given = classes is not None
    checks = [da.isfinite(X).all()]
    if given:
        classes_ = np.unique(np.asarray(classes))
        checks.append(da.isin(y, classes_).all())
    else:
        checks.append(da.unique(y))
    finite, labels = dask.compute(*checks)
    if not finite:
        raise ValueError("Input X contains NaN or infinity.")
    if given and not labels:
        raise ValueError("`classes` must include every label of y")
    if not given:
        classes_ = np.unique(np.asarray(labels))
    check_classification_targets(classes_)
    if len(classes_) < 2:
        raise ValueError(
            f"{type(estimator).__name__} needs samples of at least 2 classes in the data, "
            f"but the data contain only one class: {classes_[0]!r}"
        )
    estimator.n_features_in_ = d  # validate_data's bookkeeping, for an array
    estimator.__dict__.pop("feature_names_in_", None)
    registry = SampleRegistry(d + 1, dtype=np.float32)
    ids = registry.check_new_ids(registry.default_ids(n) if sample_id is None else sample_id, n)
    return registry, ids, (X, y), classes_
