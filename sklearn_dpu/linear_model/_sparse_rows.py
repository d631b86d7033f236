"""Sparse (``scipy.sparse``) training rows for the linear models.

scikit-learn's :class:`~sklearn.linear_model.LogisticRegression` takes CSR
input (one-hot pipelines produce it). The private estimators take it with
the same mechanisms: the privacy argument of every solver is about the rows
*after* clipping to the public norm bound, and nothing in it depends on how
the rows are stored.

* **Clipping** scales each row by a factor (a diagonal matrix applied to the
  stored non-zeros, never a dense copy of the matrix). The factor is computed
  as :func:`~sklearn_dpu.privacy.clipping.clip_scales` computes it for a
  dense row (the same overflow-safe rule), from the row's non-zeros: a row's
  norm is the norm of its non-zeros. Each stored value goes through the same
  two float64 operations as its dense counterpart (times the factor, divided
  by the bound), so the normalized entries equal the dense ones bit for bit
  wherever the factors do (the row norms are sums in another order: a row
  within an ulp of the bound may differ by an ulp).
* **The noise** is the same: the mechanisms read public sizes and
  parameters only.
* **Sums** over rows (gradients, Hessians, the Gram matrix) are sparse
  products, in float64; results that enter a release or a solver step are
  dense ``p``-vectors or ``p x p`` matrices, as for dense input. Summation
  orders differ from BLAS, so models agree with the dense ones to rounding,
  not bit for bit.
* **Deletion metadata** (:class:`SparseRows` in a
  :class:`SparseSampleRegistry`) stays sparse: a deleted row's entries are
  removed from the storage at once, not overwritten by stored zeros (whose
  positions would keep its sparsity pattern).

Per-example gradients of DP-SGD (``partial_fit``) are dense for one batch
only (``batch_size x p``).

References
----------
.. [1] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024,
   Ch. 2: the row norm bound every sensitivity rests on.
"""

from typing import Any

import numpy as np
import numpy.typing
import scipy.sparse as sp

from .._row_threads import sum_over_row_ranges
from ..privacy.clipping import _INSIDE, scales_to, storable_bound
from ..unlearning.state import SampleRegistry

__all__ = [
    "SparseRows",
    "SparseSampleRegistry",
    "dense_rows",
    "gram_matrix",
    "clip_sparse",
    "in_storage_of",
    "is_sparse",
    "new_registry",
    "sparse_clip_scales",
    "sparse_clipped_rows",
    "sparse_normalized_rows",
    "sparse_row_norms",
    "squared_frobenius",
    "take_rows",
    "weighted_gram",
]


def is_sparse(A: Any) -> bool:
    """Whether ``A`` is a scipy sparse matrix or array."""
    return sp.issparse(A)


def canonical_sparse(X: Any) -> Any:
    """A validated training ``X`` as the rows its mechanisms may read.

    Dense ``X`` is returned as it is. A sparse ``X`` is copied (the caller's
    matrix is never edited), its duplicate entries summed (a row's values are
    what a dense row would hold: its norm, its clipping) and the sums checked
    finite: two finite duplicates can overflow to infinity, which would
    escape the row's clipping. Called in validation, before any charge.
    """
    if not is_sparse(X):
        return X
    X = sp.csr_array(X, copy=True)
    X.sum_duplicates()
    if not np.all(np.isfinite(X.data)):
        raise ValueError(
            f"Input X contains infinity or a value too large for {X.dtype!r} (after "
            "summing the sparse matrix's duplicate entries)."
        )
    return X


def _entry_rows(X: sp.csr_array) -> np.ndarray:
    """The row of each stored value of a CSR matrix."""
    return np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))


def _norms_and_parts(X: sp.csr_array) -> tuple[np.ndarray, tuple]:
    """Row norms from the non-zeros, and for rows whose squares overflow:
    their index, largest entry and norm relative to it (as for dense rows)."""
    n = X.shape[0]
    data = np.asarray(X.data, dtype=np.float64)
    rows = _entry_rows(X)
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.bincount(rows, weights=data * data, minlength=n))
    overflowed = np.flatnonzero(np.isinf(norms))
    if not overflowed.size:
        return norms, (overflowed, None, None)
    largest = np.zeros(n)
    np.maximum.at(largest, rows, np.abs(data))
    scaled = data / np.where(largest[rows] > 0, largest[rows], 1.0)
    relative = np.sqrt(np.bincount(rows, weights=scaled * scaled, minlength=n))
    largest, relative = largest[overflowed], relative[overflowed]
    with np.errstate(over="ignore"):
        norms[overflowed] = largest * relative
    return norms, (overflowed, largest, relative)


def sparse_row_norms(X: Any) -> np.ndarray:
    """Euclidean norms of the rows of a sparse ``X``, without a warning
    (overflow-safe, as :func:`~sklearn_dpu.privacy.clipping.row_norms`)."""
    return _norms_and_parts(sp.csr_array(X))[0]


def sparse_clip_scales(X: Any, max_norm: float) -> np.ndarray:
    """The factor each row of a sparse ``X`` is multiplied by to clip it to
    ``max_norm``: :func:`~sklearn_dpu.privacy.clipping.clip_scales`'s rule,
    with a margin that grows with the row's non-zeros.

    The squares of a row are summed one after another (``np.bincount``), so
    a norm can read low by up to ``(k + 1) / 2`` units in the last place for
    ``k`` non-zeros: 2e-12 of it at ``k = 2e4``, beyond the fixed ``1e-12``
    margin (a row just above the bound then escaped clipping by that much).
    The target is lowered by ``(k + 2)`` machine epsilons more.
    """
    X = sp.csr_array(X)
    norms, parts = _norms_and_parts(X)
    nonzeros = np.diff(X.indptr).astype(np.float64)
    return scales_to(
        max_norm * (_INSIDE - (nonzeros + 2.0) * np.finfo(np.float64).eps), norms, parts
    )


def sparse_normalized_rows(
    X: Any, y_index: np.ndarray | None, norm_bound: float, fit_intercept: bool
) -> "SparseRows":
    """:func:`~sklearn_dpu.linear_model._logistic_solvers.normalized_rows` for
    sparse ``X``: rows clipped to ``norm_bound``, divided by it, the intercept
    column appended; labels kept beside the design, not in it."""
    X = sp.csr_array(X, dtype=np.float64)
    X.sum_duplicates()  # canonical: one stored value per entry (as a dense row has)
    scale = sparse_clip_scales(X, norm_bound)
    data = X.data * scale[_entry_rows(X)]
    np.divide(data, norm_bound, out=data)
    design = sp.csr_array((data, X.indices.copy(), X.indptr.copy()), shape=X.shape)
    if fit_intercept:
        ones = sp.csr_array(np.ones((X.shape[0], 1)))
        design = sp.hstack([design, ones], format="csr")
    labels = np.zeros(X.shape[0]) if y_index is None else np.asarray(y_index, dtype=np.float64)
    return SparseRows(sp.csr_array(design), labels)


def dense_rows(A: Any) -> np.ndarray:
    """``A`` as a dense array: for a batch of rows only (DP-SGD's per-example
    gradients), never the whole training set."""
    return A.toarray() if sp.issparse(A) else A


def gram_matrix(A: Any) -> np.ndarray:
    """``A^T A``, dense ``p x p`` (a sparse product for sparse ``A``).

    Dense rows are summed over row ranges, each range's product on one BLAS
    thread (:func:`~sklearn_dpu._row_threads.sum_over_row_ranges`): at
    n = 1e5, p = 501 on 2 cores a threaded product took 270 ms, two ranges
    about 200, and they leave no BLAS worker spinning on a core the passes
    after them need.
    """
    if sp.issparse(A):
        return np.asarray((A.T @ A).toarray())
    if not isinstance(A, np.ndarray):  # rows on Dask workers
        return A.T @ A
    return sum_over_row_ranges(lambda start, stop: A[start:stop].T @ A[start:stop], *A.shape)


def weighted_gram(A: Any, w: np.ndarray) -> np.ndarray:
    """``A^T diag(w) A``, dense ``p x p``."""
    if sp.issparse(A):
        return np.asarray((A.T @ sp.csr_array(A.multiply(w[:, None]))).toarray())
    return A.T @ (A * w[:, None])


def squared_frobenius(A: Any) -> float:
    """``sum_ij A_ij^2``."""
    if sp.issparse(A):
        return float(np.dot(A.data, A.data))
    return float(np.einsum("ij,ij->", A, A))


class _Flags:
    c_contiguous = True  # SampleRegistry.add may adopt the storage


class SparseRows:
    """Registry rows ``[a, class index]`` with ``a`` a CSR row.

    Indexing follows the dense rows a :class:`SampleRegistry` holds:
    ``rows[keys]`` selects rows, ``rows[:, :-1]`` is the design matrix (CSR)
    and ``rows[:, -1]`` the labels.

    Parameters
    ----------
    design : scipy.sparse.csr_array of shape (n, p)
    labels : ndarray of shape (n,)
    """

    flags = _Flags()

    def __init__(self, design: sp.csr_array, labels: np.ndarray):
        self.design = design
        self.labels = labels

    @classmethod
    def empty(cls, n_columns: int, dtype: np.typing.DTypeLike = np.float64) -> "SparseRows":
        return cls(sp.csr_array((0, n_columns - 1), dtype=dtype), np.zeros(0, dtype=dtype))

    @classmethod
    def of_dense(cls, rows: np.ndarray) -> "SparseRows":
        """Dense registry rows ``[a, label]`` in sparse storage."""
        return cls(sp.csr_array(rows[:, :-1]), np.array(rows[:, -1]))

    @property
    def dtype(self) -> np.dtype:
        return self.design.dtype

    def toarray(self) -> np.ndarray:
        """The dense rows ``[a, label]`` (for a chunk joining a dense stream)."""
        return np.column_stack([self.design.toarray(), self.labels]).astype(self.dtype)

    def take(self, slots: np.ndarray) -> np.ndarray:
        """Dense rows ``[a, label]`` of ``slots``: one batch, as ``rows[slots]``
        of a dense registry would give them."""
        out = np.zeros((len(slots), self.shape[1]), dtype=self.dtype)
        out[:, :-1] = self.design[np.asarray(slots, dtype=np.intp)].toarray()
        out[:, -1] = self.labels[slots]
        return out

    @property
    def shape(self) -> tuple[int, int]:
        return (self.design.shape[0], self.design.shape[1] + 1)

    def __len__(self) -> int:
        return self.design.shape[0]

    @property
    def nbytes(self) -> int:
        d = self.design
        return d.data.nbytes + d.indices.nbytes + d.indptr.nbytes + self.labels.nbytes

    def _rows(self, key) -> np.ndarray | slice:
        if isinstance(key, slice):
            return key
        key = np.asarray(key)
        return np.flatnonzero(key) if key.dtype == bool else key.astype(np.intp)

    def __getitem__(self, key):
        if isinstance(key, tuple):
            rows, column = key
            if rows != slice(None):
                raise IndexError("SparseRows selects rows first, then [:, :-1] or [:, -1]")
            if column == slice(None, -1):
                return self.design
            if isinstance(column, int) and column == -1:
                return self.labels
            raise IndexError(f"unsupported column index {column!r}")
        rows = self._rows(key)
        return SparseRows(sp.csr_array(self.design[rows]), self.labels[rows])

    def __setitem__(self, key, value) -> None:
        if isinstance(value, SparseRows):  # appending into the spare rows at the end
            start, stop, _ = key.indices(len(self))
            if self.design[start:stop].nnz:
                raise ValueError("SparseRows writes only into empty spare rows")
            parts = [self.design[:start], value.design, self.design[stop:]]
            self.design = sp.csr_array(sp.vstack(parts, format="csr"))
            self.labels[start:stop] = value.labels
            return
        if not (np.isscalar(value) and value == 0):
            raise ValueError("SparseRows rows can only be set to 0 (deleted) or appended")
        deleted = np.zeros(len(self), dtype=bool)
        deleted[self._rows(key)] = True
        self._drop_entries(deleted)
        self.labels[deleted] = 0.0

    def _drop_entries(self, deleted: np.ndarray) -> None:
        """Remove the stored values of the ``deleted`` rows (no explicit zeros)."""
        d = self.design
        keep = ~deleted[_entry_rows(d)]
        counts = np.diff(d.indptr) * ~deleted
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(d.indptr.dtype)
        self.design = sp.csr_array((d.data[keep], d.indices[keep], indptr), shape=d.shape)

    def grown(self, capacity: int) -> "SparseRows":
        """A copy with empty rows up to ``capacity`` (cheap: only ``indptr`` grows)."""
        d = self.design
        pad = np.full(capacity - d.shape[0], d.indptr[-1], dtype=d.indptr.dtype)
        design = sp.csr_array(
            (d.data, d.indices, np.concatenate([d.indptr, pad])), shape=(capacity, d.shape[1])
        )
        labels = np.zeros(capacity, dtype=self.labels.dtype)
        labels[: len(self.labels)] = self.labels
        return SparseRows(design, labels)


def new_registry(X: Any, n_columns: int, dtype: np.typing.DTypeLike = np.float64) -> SampleRegistry:
    """The registry for training rows ``X``: sparse storage for sparse ``X``
    (whatever later chunks are: a stream keeps its first storage, see
    :func:`in_storage_of`)."""
    if is_sparse(X):
        return SparseSampleRegistry(n_columns, dtype=dtype)
    return SampleRegistry(n_columns, dtype=dtype)


def in_storage_of(
    rows: "np.ndarray | SparseRows", registry: SampleRegistry
) -> "np.ndarray | SparseRows":
    """``rows`` in the storage of ``registry``: a chunk of a stream is stored
    as the stream's first chunk was (a dense chunk joining a sparse stream is
    made sparse; a sparse chunk joining a dense stream is densified, that
    chunk only)."""
    sparse_registry = isinstance(registry, SparseSampleRegistry)
    if sparse_registry and not isinstance(rows, SparseRows):
        return SparseRows.of_dense(rows)
    if not sparse_registry and isinstance(rows, SparseRows):
        return rows.toarray()
    return rows


def take_rows(
    rows: "np.ndarray | SparseRows", slots: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """Dense rows of ``slots`` of a registry's storage (into ``out`` if given)."""
    if not isinstance(rows, np.ndarray):  # SparseRows, or rows kept on Dask workers
        if out is None:
            return rows.take(slots)
        out[...] = rows.take(slots)
        return out
    if out is None:
        return rows[slots]
    return np.take(rows, slots, axis=0, out=out, mode="clip")  # unbuffered


def sparse_clipped_rows(
    X: Any, codes: np.ndarray, max_norm: float, dtype: np.typing.DTypeLike
) -> SparseRows:
    """Rows clipped to ``max_norm`` in float64, rounded once to ``dtype``,
    the label codes beside them (the storage of
    :class:`~sklearn_dpu.linear_model.UnlearnableSGDClassifier` for sparse X;
    the same values as :func:`~sklearn_dpu.privacy.clipping.clip_rows_l2`
    with a ``dtype`` output)."""
    X = sp.csr_array(X, dtype=np.float64)
    X.sum_duplicates()
    scale = sparse_clip_scales(X, storable_bound(max_norm, dtype))
    data = (X.data * scale[_entry_rows(X)]).astype(dtype)
    design = sp.csr_array((data, X.indices.copy(), X.indptr.copy()), shape=X.shape)
    return SparseRows(design, np.asarray(codes, dtype=dtype))


def clip_sparse(X: Any, max_norm: float) -> sp.csr_array:
    """Sparse ``X`` with rows clipped to ``max_norm`` (float64, a diagonal scaling)."""
    X = sp.csr_array(X, dtype=np.float64)
    X.sum_duplicates()
    scale = sparse_clip_scales(X, max_norm)
    return sp.csr_array((X.data * scale[_entry_rows(X)], X.indices, X.indptr), shape=X.shape)


class SparseSampleRegistry(SampleRegistry):
    """A :class:`~sklearn_dpu.unlearning.state.SampleRegistry` whose rows are
    :class:`SparseRows`: storage proportional to the non-zeros, deleted rows'
    entries removed at once (their pattern is not kept either)."""

    def __init__(self, n_columns: int, dtype: np.typing.DTypeLike = np.float64):
        super().__init__(n_columns, dtype=dtype)
        self.rows = SparseRows.empty(n_columns, dtype)
        self._store = None  # sparse rows stay in memory, even inside disk_backed_rows

    def _reserve(self, capacity: int) -> None:
        rows = self.rows[: self.size].grown(capacity)
        self.rows = np.zeros((self.size, 0))  # the base grows the other arrays
        super()._reserve(capacity)
        self.rows = rows
