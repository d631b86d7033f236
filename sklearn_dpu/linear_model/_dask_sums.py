"""Row sums of GLM losses over Dask collections: reduced on the workers.

:class:`~sklearn_dpu.linear_model.DPLogisticRegression` fits on a Dask array
(or DataFrame) with the same solvers and the same mechanisms as in memory.
Its solvers read the data only through sums over rows: the gradient (and
loss) sum of every step, the Hessian of a Newton step, the Gram matrix
``A^T A`` of the noisy-GD preconditioner. Here those sums are computed block
by block where the blocks live (:class:`DaskRows`, normalized rows persisted
on the workers) and only the ``p``-vectors and ``p x p`` matrices come back;
the driver adds the blocks' sums in block order and the mechanism adds its
noise once, to the total, exactly as to the in-memory sum. The released
statistic is the same function of the data; the privacy analysis (Ullah 2024,
Alg. 1 / Thm 8 for noisy GD, Alg. 3 / Thm 12 with the erratum on its noise
for output perturbation) needs nothing else.

Floating point: the in-memory sum is one BLAS product over all rows, here a
sum of per-block products, so the two differ by rounding (a relative 1e-15 per
sum). Noisy GD's iterates and the certified solver's stopping point move by
that much, times the conditioning of the run: coefficients agree to about
1e-9 relative with the same seed, not bit for bit. The noise draws are the
same, in the same order.

References
----------
.. [1] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024:
   Alg. 1 / Thm 8; Alg. 3 / Thm 12 with the erratum on its noise.
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np

from ..privacy.clipping import row_norms
from ..privacy.quantiles import PrivateQuantile
from ..unlearning.row_store import active_directory, gather_blocks
from ._logistic_solvers import normalized_rows
from ._losses import LinearModelLoss
from ._sufficient_statistics import is_dask_collection

__all__ = [
    "DaskInput",
    "DaskLoss",
    "DaskRows",
    "as_dask_array",
    "dask_classification_rows",
    "design",
    "release_norm_bound",
    "validate_fit",
]


def as_dask_array(data: Any, name: str) -> Any:
    """A Dask array from a Dask array, DataFrame or Series (lengths computed)."""
    import dask.array as da

    if isinstance(data, da.Array):
        return data
    if hasattr(data, "to_dask_array"):
        return data.to_dask_array(lengths=True)
    raise TypeError(f"{name} must be a Dask array, DataFrame or Series, got {type(data)!r}")


def _rows_block(X, y, classes, norm_bound, fit_intercept):
    """Normalized rows ``[a, class index]`` of one block (run on a worker)."""
    X = np.asarray(X, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        raise ValueError("Input X contains NaN or infinity.")
    y = np.asarray(y).ravel()
    index = np.searchsorted(classes, y)
    index = np.minimum(index, len(classes) - 1)
    if len(y) and not np.array_equal(classes[index], y):
        raise ValueError("y contains labels that are not in classes_")
    return normalized_rows(X, index, norm_bound, fit_intercept)


def _aligned(X: Any, y: Any) -> tuple[Any, Any]:
    """``X`` as a 2-D Dask array of whole rows per block and ``y`` chunked
    like its rows (a Dask collection or an in-memory vector)."""
    import dask.array as da

    X = as_dask_array(X, "X")
    if X.ndim != 2 or np.isnan(X.shape[1]) or np.isnan(X.shape[0]):
        raise ValueError(f"Expected a 2-D Dask array with known shape, got {X.shape}")
    X = X.rechunk({1: -1})
    y = as_dask_array(y, "y") if is_dask_collection(y) else da.from_array(np.asarray(y))
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y has shape {y.shape}, expected ({X.shape[0]},)")
    return X, y.rechunk((X.chunks[0],))


def dask_classification_rows(
    X: Any,
    y: Any,
    norm_bound: float,
    fit_intercept: bool,
    classes: np.ndarray | None = None,
    persist: bool = True,
) -> tuple["DaskRows", np.ndarray]:
    """Clip and normalize a Dask classification data set on the workers.

    Returns the rows (persisted unless ``persist=False``) and the label set
    (``np.unique`` of ``y``, computed on the workers, unless ``classes`` is given).
    """
    import dask.array as da

    X, y = _aligned(X, y)
    if classes is None:
        classes = np.unique(np.asarray(da.unique(y).compute()))
    width = X.shape[1] + int(fit_intercept) + 1
    rows = da.map_blocks(
        _rows_block,
        X,
        y[:, None],
        classes,
        norm_bound,
        fit_intercept,
        dtype=np.float64,
        chunks=(X.chunks[0], (width,)),
    )
    return DaskRows(rows.persist() if persist else rows), classes


def _block_parts(rows):
    return rows[:, :-1], rows[:, -1].astype(np.intp)


def _value_and_grad(loss, theta, rows):
    A, y = _block_parts(rows)
    return loss.value_and_grad(theta, A, y)


def _gradient(loss, theta, rows):
    A, y = _block_parts(rows)
    return loss.gradient(theta, A, y)


def _hessian(loss, theta, rows):
    A, y = _block_parts(rows)
    return loss.hessian(theta, A, y)


def _hvp(loss, theta, v, rows):
    A, y = _block_parts(rows)
    return loss.hessian_operator(theta, A, y)(v)


def _gram(rows):
    A = rows[:, :-1]
    return A.T @ A


def _squares(rows):
    A = rows[:, :-1]
    return float(np.einsum("ij,ij->", A, A))


@dataclass(frozen=True)
class DaskRows:
    """Normalized rows ``[a, class index]`` persisted on the workers.

    Stands for the design matrix ``A`` in the solvers: ``len``, ``shape``,
    ``A.T @ A`` (the Gram matrix) and ``np.einsum("ij,ij->", A, A)`` are sums
    computed block by block on the workers.
    """

    rows: Any  # dask.array.Array of shape (n, p + 1)

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self), int(self.rows.shape[1]) - 1)

    def map_sum(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args, block)`` on every block, summed in block order."""
        import dask

        task = dask.delayed(function, pure=True)
        parts = dask.compute(*[task(*args, block) for block in self.rows.to_delayed().ravel()])
        if isinstance(parts[0], tuple):
            return tuple(reduce(np.add, column) for column in zip(*parts, strict=True))
        return reduce(np.add, parts)

    @property
    def T(self) -> "_Transposed":
        return _Transposed(self)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.einsum and args[0] == "ij,ij->" and args[1] is self and args[2] is self:
            return self.map_sum(_squares)
        return NotImplemented

    def compute(self) -> np.ndarray:
        """The rows, gathered in the driver's memory."""
        return np.asarray(self.rows.compute())


@dataclass(frozen=True)
class _Transposed:
    of: DaskRows

    def __matmul__(self, other):
        if other is not self.of:
            return NotImplemented
        return self.of.map_sum(_gram)


class DaskLoss:
    """A :class:`LinearModelLoss` whose sums run over :class:`DaskRows`.

    Every constant is the wrapped loss's; ``value_and_grad``, ``gradient``,
    ``hessian`` and ``hessian_operator`` take the rows' own labels (the
    ``y`` argument, from :meth:`encode_labels`, is ignored).
    """

    def __init__(self, loss: LinearModelLoss):
        self.loss = loss

    def __getattr__(self, name):
        return getattr(self.loss, name)

    def encode_labels(self, y_index: Any) -> None:
        return None

    def value_and_grad(
        self, theta: np.ndarray, A: DaskRows, y: Any = None
    ) -> tuple[float, np.ndarray]:
        value, grad = A.map_sum(_value_and_grad, self.loss, np.asarray(theta))
        return float(value), grad

    def gradient(self, theta: np.ndarray, A: DaskRows, y: Any = None) -> np.ndarray:
        return A.map_sum(_gradient, self.loss, np.asarray(theta))

    def hessian(self, theta: np.ndarray, A: DaskRows, y: Any = None) -> np.ndarray:
        return A.map_sum(_hessian, self.loss, np.asarray(theta))

    def hessian_operator(
        self, theta: np.ndarray, A: DaskRows, y: Any = None
    ) -> Callable[[np.ndarray], np.ndarray]:
        theta = np.asarray(theta)
        return lambda v: A.map_sum(_hvp, self.loss, theta, np.asarray(v))


def _check_block(X, y):
    """Finiteness of one block, and its labels (run on a worker)."""
    if not np.all(np.isfinite(np.asarray(X, dtype=np.float64))):
        raise ValueError("Input X contains NaN or infinity.")
    return np.unique(np.asarray(y).ravel())


def _norm_counts(X, grid):
    """``#{rows of the block with L2 norm <= c}`` for every grid value ``c``."""
    norms = np.minimum(row_norms(np.asarray(X, dtype=np.float64)), np.finfo(np.float64).max)
    return np.searchsorted(np.sort(norms), grid, side="right")


@dataclass(frozen=True)
class DaskInput:
    """A validated Dask data set: ``X`` with whole rows per block, ``y`` aligned."""

    X: Any
    y: Any

    def __len__(self) -> int:
        return int(self.X.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self), int(self.X.shape[1]))

    def norm_counts(self, grid: np.ndarray) -> np.ndarray:
        """Counts of rows with norm at most each grid value, summed over the blocks."""
        import dask

        task = dask.delayed(_norm_counts, pure=True)
        parts = dask.compute(*[task(block, grid) for block in self.X.to_delayed().ravel()])
        return reduce(np.add, parts)


def release_norm_bound(X: DaskInput, mechanism: PrivateQuantile, rng: np.random.Generator) -> float:
    """The private quantile of the rows' norms from counts made on the workers.

    The exponential mechanism's utility reads the norms only through the
    counts of norms at most each grid value (:meth:`PrivateQuantile.utilities_of_counts`),
    integers summed exactly over the blocks: the release is the in-memory one,
    draw for draw.
    """
    return mechanism.release_counts(X.norm_counts(mechanism.grid.values), len(X), rng)


def validate_fit(estimator: Any, X: Any, y: Any) -> tuple[DaskInput, np.ndarray, None]:
    """Validate a Dask fit of a logistic regression: ``(data, classes, None)``.

    Public parameters are checked first; then one pass over the blocks on the
    workers checks that ``X`` is finite and collects the label set, before
    anything is charged.
    """
    import dask

    if estimator.solver in ("objective", "langevin"):
        raise ValueError(
            f"solver={estimator.solver!r} does not take Dask input; use 'output', "
            "'noisy_gd' or 'auto'"
        )
    X, y = _aligned(X, y)
    task = dask.delayed(_check_block, pure=True)
    blocks = zip(X.to_delayed().ravel(), y.to_delayed().ravel(), strict=True)
    labels = dask.compute(*[task(xb, yb) for xb, yb in blocks])
    classes = np.unique(np.concatenate(labels)) if labels else np.array([])
    estimator.__dict__.pop("feature_names_in_", None)
    estimator.n_features_in_ = int(X.shape[1])
    return DaskInput(X, y), classes, None


def design(estimator: Any, X: Any, y_index: Any, rows: Any = None) -> tuple[Any, Any, Any]:
    """The registry rows, the design matrix and the loss a solver reads.

    In memory: the normalized rows (``rows`` when given, already computed),
    their first columns and the loss. From a
    :class:`DaskInput`: the rows normalized (with the bound in use, released
    or public) and persisted on the workers, gathered once for the deletion
    registry, and a :class:`DaskLoss`, so that the solver's sums run on the
    workers.

    Inside :func:`~sklearn_dpu.unlearning.disk_backed_rows` on the local
    scheduler the rows are not persisted (that would hold them all in this
    process): they are written to a memory-mapped file a batch of blocks at a
    time (:func:`~sklearn_dpu.unlearning.row_store.gather_blocks`) and the
    solver's sums read that file.

    Deletion after such a fit reads the stored rows of the registry (in
    memory, or in the file with ``disk_backed_rows``): nothing is gathered
    from, or recomputed on, the workers, and the model keeps no reference to
    the Dask collection (it would keep deleted rows reachable from the model).
    """
    if isinstance(X, DaskInput):
        local_disk = active_directory() is not None and not _on_a_cluster()
        rows, _ = dask_classification_rows(
            X.X,
            X.y,
            estimator._norm_bound(),
            bool(estimator.fit_intercept),
            estimator.classes_,
            persist=not local_disk,
        )
        if active_directory() is not None:  # to disk, a batch of blocks at a time
            tasks = list(rows.rows.to_delayed().ravel())
            gathered, _ = gather_blocks(tasks, *rows.rows.shape, np.float64)
        else:
            gathered = rows.compute()
        if not _on_a_cluster():  # the blocks are in this process: keep one copy, as views
            rows = DaskRows(_from_array(gathered, rows.rows.chunks[0]))
        return gathered, rows, DaskLoss(estimator._loss())
    if rows is None:
        rows = estimator._rows(X, y_index)
    return rows, rows[:, :-1], estimator._loss()


def _on_a_cluster() -> bool:
    """Whether Dask computes on a distributed cluster (a ``Client`` is the default)."""
    import dask

    return dask.config.get("scheduler", None) == "dask.distributed"


def _from_array(rows: np.ndarray, chunks: tuple) -> Any:
    import dask.array as da

    return da.from_array(rows, chunks=(chunks, (rows.shape[1],)), asarray=False)
