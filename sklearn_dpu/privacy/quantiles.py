"""Private quantiles: the exponential mechanism over a public grid of candidates.

Used to find data-dependent bounds (feature scales, a row-norm bound) without
knowing them in advance, for a small, charged share of epsilon.

The mechanism. Candidates ``c_0 < c_1 < ... < c_{m-1}`` form a public grid
(:class:`GeometricGrid`: ``lower * ratio**k`` up to ``upper``, optionally
mirrored to negative values with 0 between). Candidate ``c_k`` stands for the
cell ``(c_{k-1}, c_k]`` (the first cell unbounded below, the last unbounded
above, so values outside the grid count toward its ends). For a target
quantile ``q`` of ``n`` values the utility of a cell is minus the distance of
the target rank ``q n`` to the cell's rank interval::

    a_k = #{i : x_i <= c_{k-1}}   (0 for the first cell)
    b_k = #{i : x_i <= c_k}       (n for the last cell)
    u_k = -max(a_k - q n, q n - b_k, 0)

a rank utility in the spirit of the exponential-mechanism quantile of
[Smi11]_ (reviewed by [GJK21]_), which samples intervals between data points;
here the intervals are public grid cells and the release is the cell's upper
end ``c_k`` (the quantile rounded up to the grid). The mechanism selects
``k`` with probability proportional to ``exp(eps u_k / (2 Delta))``: the
exponential mechanism of [DR14]_ Thm 3.10, ``eps``-DP for any utility of
sensitivity ``Delta``.

Sensitivity under add/remove (the relation of the whole library). Add a
record ``x``: ``q n`` grows by ``q``; ``a_k`` and ``b_k`` grow by 0 or 1, and
``a_k`` grows only if ``b_k`` does (``x <= c_{k-1}`` implies ``x <= c_k``).
Three cases: nothing moves but the target (``u_k`` changes by at most
``q``); both ends move (the interval moves by ``1 - q`` relative to the
target, ``u_k`` changes by at most ``1 - q``); only ``b_k`` moves (the
distance to the right end changes by ``q - 1``, to the left end by ``q``,
and the distance is clipped at 0, so at most ``max(q, 1 - q)``). Hence
``Delta = max(q, 1 - q) <= 1``, attained (for ``q = 0.95``: 0.95), and removing
a record is the same statement read backwards. The changes have different
signs for different cells, so the utility is not monotonic and the factor 2
of Thm 3.10 stays. ``tests/test_private_quantiles.py`` checks the bound
exhaustively on small data sets, and the probability ratio against
``e^eps``.

References
----------
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of differential
   privacy", 2014, Theorem 3.10 (exponential mechanism).
.. [Smi11] A. Smith, "Privacy-preserving statistical estimation with optimal
   convergence rates", STOC 2011 (the exponential mechanism with rank utility
   for quantiles).
.. [GJK21] J. Gillenwater, M. Joseph and A. Kulesza, "Differentially private
   quantiles", ICML 2021 (reviews the single-quantile exponential mechanism
   and the per-quantile split of epsilon by basic composition).
"""

from dataclasses import dataclass

import numpy as np
from dp_accounting import dp_event
from numpy.typing import ArrayLike

from .._validation import is_dask_collection
from .clipping import row_norms
from .mechanisms import ExponentialMechanism, pure_dp_event

__all__ = [
    "GeometricGrid",
    "PrivateQuantile",
    "column_mechanisms",
    "private_column_quantiles",
    "private_column_spreads",
    "private_norm_bound",
    "spread_utilities",
]

#: Largest number of candidates a grid may have (memory and time are O(m)).
MAX_GRID_SIZE = 100_000
_LARGEST = np.finfo(np.float64).max


@dataclass(frozen=True)
class GeometricGrid:
    """Public candidates ``lower * ratio**k`` from ``lower`` to ``upper``.

    The last candidate is ``upper`` itself. With ``signed=True`` the grid is
    mirrored: ``-upper .. -lower, 0, lower .. upper``.

    Parameters
    ----------
    lower, upper : float
        Public limits, ``0 < lower < upper < inf``.
    ratio : float, default=1.1
        Ratio of consecutive positive candidates (> 1): the relative
        resolution of the released value.
    signed : bool, default=False

    Examples
    --------
    >>> GeometricGrid(1.0, 8.0, ratio=2.0).values
    array([1., 2., 4., 8.])
    >>> GeometricGrid(1.0, 3.0, ratio=2.0, signed=True).values
    array([-3., -2., -1.,  0.,  1.,  2.,  3.])
    """

    lower: float
    upper: float
    ratio: float = 1.1
    signed: bool = False

    def __post_init__(self):
        lower, upper, ratio = float(self.lower), float(self.upper), float(self.ratio)
        if not (np.isfinite(lower) and np.isfinite(upper) and 0 < lower < upper):
            raise ValueError(f"the grid needs 0 < lower < upper < inf, got {lower!r}, {upper!r}")
        if not (np.isfinite(ratio) and ratio > 1):
            raise ValueError(f"the grid ratio must be a finite number > 1, got {ratio!r}")
        if self.size > MAX_GRID_SIZE:
            raise ValueError(
                f"the grid would have {self.size} candidates (more than {MAX_GRID_SIZE}); "
                "raise ratio or narrow [lower, upper]"
            )

    @property
    def n_positive(self) -> int:
        """Number of positive candidates."""
        steps = (np.log(float(self.upper)) - np.log(float(self.lower))) / np.log(float(self.ratio))
        return int(np.ceil(steps - 1e-9)) + 1

    @property
    def size(self) -> int:
        return 2 * self.n_positive + 1 if self.signed else self.n_positive

    def cell_widths(self, values: ArrayLike) -> np.ndarray:
        """Widths of the grid cells that hold ``values``.

        A release ``c_k`` says only that the quantile is in ``(c_{k-1}, c_k]``:
        its resolution is ``c_k - c_{k-1}``. The first cell, unbounded below,
        and the values above the grid get the width of their neighbour.

        >>> GeometricGrid(1.0, 3.0, ratio=2.0, signed=True).cell_widths([0.0, 2.0, -3.0])
        array([1., 1., 1.])
        """
        grid = self.values
        index = np.searchsorted(grid, np.asarray(values, dtype=np.float64))
        index = np.clip(index, 1, grid.size - 1)
        return grid[index] - grid[index - 1]

    @property
    def values(self) -> np.ndarray:
        """The candidates, increasing."""
        k = np.arange(self.n_positive, dtype=np.float64)
        positive = np.minimum(float(self.lower) * float(self.ratio) ** k, float(self.upper))
        positive[-1] = float(self.upper)
        if not self.signed:
            return positive
        return np.concatenate([-positive[::-1], [0.0], positive])


def _as_sample(values: ArrayLike) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"values must be a 1-D array, got shape {x.shape}")
    if x.size == 0:
        raise ValueError("values is empty: a quantile needs at least one value")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite (no NaN or infinity)")
    return x


@dataclass(frozen=True)
class PrivateQuantile:
    """An ``epsilon``-DP quantile of 1-D values, chosen from a public grid.

    The exponential mechanism [DR14]_ Thm 3.10 with a rank utility
    [Smi11]_ [GJK21]_ on the grid's cells, of add/remove sensitivity
    ``max(q, 1 - q)`` (cells and derivation in
    :mod:`sklearn_dpu.privacy.quantiles`). The release is the grid value at or
    just above the quantile; values outside the grid count toward its ends,
    so the release is the lowest candidate when the quantile is below it and
    ``grid.upper`` when above it. Counts come from one sort and one
    ``searchsorted``: ``O(n log n + m log n)``.

    Parameters
    ----------
    epsilon : float
        Pure-DP parameter of the release.
    quantile : float
        Target quantile ``q`` in ``[0, 1]``.
    grid : GeometricGrid
        The public candidates.

    Examples
    --------
    >>> import numpy as np
    >>> mech = PrivateQuantile(1.0, 0.5, GeometricGrid(0.01, 100.0, ratio=1.1))
    >>> x = np.random.default_rng(0).uniform(0, 10, size=10_000)
    >>> float(np.round(mech.release(x, np.random.default_rng(1)), 2))
    5.39
    >>> mech.dp_event
    DiscreteLaplaceDpEvent(noise_parameter=1.0, sensitivity=1)
    """

    epsilon: float
    quantile: float
    grid: GeometricGrid

    def __post_init__(self):
        if not (np.isfinite(self.epsilon) and self.epsilon > 0):
            raise ValueError(f"epsilon must be a finite number > 0, got {self.epsilon!r}")
        if not 0.0 <= self.quantile <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {self.quantile!r}")

    @property
    def sensitivity(self) -> float:
        """Add/remove sensitivity of the rank utility: ``max(q, 1 - q)``."""
        return max(float(self.quantile), 1.0 - float(self.quantile))

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return pure_dp_event(self.epsilon)

    @property
    def _selection(self) -> ExponentialMechanism:
        return ExponentialMechanism(float(self.epsilon), self.sensitivity)

    def utilities(self, values: ArrayLike) -> np.ndarray:
        """The rank utility of every candidate (larger is better).

        Candidate ``c_k`` stands for the cell ``(c_{k-1}, c_k]`` (the first
        cell is unbounded below, the last above), whose values have ranks
        ``a_k = #{x_i <= c_{k-1}}`` to ``b_k = #{x_i <= c_k}``; the utility is
        minus the distance from ``q n`` to ``[a_k, b_k]``: 0 for the cell that
        holds the quantile (released rounded up to ``c_k``).
        """
        x = np.sort(_as_sample(values))
        return self.utilities_of_counts(np.searchsorted(x, self.grid.values, side="right"), x.size)

    def utilities_of_counts(self, upto: ArrayLike, n: int) -> np.ndarray:
        """:meth:`utilities` from the counts ``upto[k] = #{x_i <= c_k}`` and ``n``.

        The utility reads the values only through these counts, which are
        sums over the values: counted block by block (on Dask workers) and
        added, they give the same utilities, hence the same release.
        """
        upto = np.array(upto, dtype=np.intp)
        upto[-1] = n
        after = np.concatenate([[0], upto[:-1]])
        target = float(self.quantile) * n
        return -np.maximum(np.maximum(after - target, target - upto), 0.0)

    def release_counts(self, upto: ArrayLike, n: int, rng: np.random.Generator) -> float:
        """:meth:`release` from the counts of :meth:`utilities_of_counts`."""
        index = self._selection.select(self.utilities_of_counts(upto, n), rng)
        return float(self.grid.values[index])

    def probabilities(self, values: ArrayLike) -> np.ndarray:
        """The exact probability of selecting each candidate."""
        return self._selection.probabilities(self.utilities(values))

    def select(self, values: ArrayLike, rng: np.random.Generator) -> int:
        """Return the index of the selected candidate."""
        return self._selection.select(self.utilities(values), rng)

    def release(self, values: ArrayLike, rng: np.random.Generator) -> float:
        """Return the selected candidate value."""
        return float(self.grid.values[self.select(values, rng)])


def _as_matrix(X: ArrayLike) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array, got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X is empty (shape {X.shape})")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite (no NaN or infinity)")
    return X


def _block_counts(block, grids, norms):
    """Per column of one block, ``#{values <= c}`` for each value ``c`` of its grid."""
    x = np.asarray(block, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if not np.all(np.isfinite(x)):
        raise ValueError("X must be finite (no NaN or infinity)")
    if norms:
        x = np.minimum(row_norms(x), np.finfo(np.float64).max)[:, None]
    return [np.searchsorted(np.sort(x[:, j]), grid, side="right") for j, grid in enumerate(grids)]


def _dask_counts(X, mechanisms, norms: bool, grids=None) -> tuple[list[np.ndarray], int]:
    """Grid counts of a Dask array's columns (or row norms), block by block on
    the workers, summed exactly in block order; and the number of rows.
    ``grids``: the values to count up to, per column, instead of the
    mechanisms' grids."""
    import dask

    if X.ndim == 2:
        X = X.rechunk({1: -1})
    if X.shape[0] == 0 or (X.ndim == 2 and X.shape[1] == 0):
        raise ValueError(f"X is empty (shape {X.shape})")
    if grids is None:
        grids = [m.grid.values for m in mechanisms]
    task = dask.delayed(_block_counts, pure=True)
    parts = dask.compute(*[task(block, grids, norms) for block in X.to_delayed().ravel()])
    counts = [np.sum([part[j] for part in parts], axis=0) for j in range(len(grids))]
    return counts, int(X.shape[0])


def column_mechanisms(
    n_features: int, epsilon: float, quantile: float, grid: GeometricGrid
) -> tuple[PrivateQuantile, ...]:
    """One quantile mechanism per column, ``epsilon / n_features`` each.

    A record has a value in every column, so the ``d`` selections all read
    it: they compose, and by basic composition ([DR14]_ Thm 3.16) ``d``
    selections at ``epsilon / d`` are ``epsilon``-DP together (the ledger
    holds the ``d`` events, and the accountant may state less at a positive
    delta). One joint exponential mechanism over the product grid would need
    ``m**d`` candidates; [GJK21]_ discuss the same split for several quantiles.
    """
    share = float(epsilon) / int(n_features)
    return tuple(PrivateQuantile(share, quantile, grid) for _ in range(int(n_features)))


def private_column_quantiles(
    X: ArrayLike, mechanisms: tuple[PrivateQuantile, ...], rng: np.random.Generator
) -> np.ndarray:
    """Release a private quantile of every column of ``X``.

    For scales, pass ``np.abs(X)`` (or ``np.abs(X - center)`` with a public or
    already released ``center``).

    Parameters
    ----------
    X : array-like or Dask array of shape (n_samples, n_features)
        A Dask array is counted block by block on the workers
        (:meth:`PrivateQuantile.utilities_of_counts`): the same release.
    mechanisms : tuple of PrivateQuantile
        One per column (see :func:`column_mechanisms`).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_features,)
        The released grid values, in column order.
    """
    if is_dask_collection(X):  # counts per grid value on the workers: the same selections
        if X.ndim != 2 or len(mechanisms) != X.shape[1]:
            raise ValueError(f"{len(mechanisms)} mechanisms for X of shape {X.shape}")
        counts, n = _dask_counts(X, mechanisms, norms=False)
        return np.array(
            [m.release_counts(c, n, rng) for m, c in zip(mechanisms, counts, strict=True)]
        )
    X = _as_matrix(X)
    if len(mechanisms) != X.shape[1]:
        raise ValueError(f"{len(mechanisms)} mechanisms for {X.shape[1]} columns")
    return np.array([m.release(X[:, j], rng) for j, m in enumerate(mechanisms)])


def private_column_spreads(
    X: ArrayLike,
    center: ArrayLike,
    resolution: ArrayLike,
    mechanisms: tuple[PrivateQuantile, ...],
    rng: np.random.Generator,
) -> np.ndarray:
    """Release a private quantile of ``|x_j - center_j|`` over the rows off the
    center, for every column.

    A row is at the center when ``center_j - resolution_j <= x_j <=
    center_j``: in the grid cell a released center stands for (its
    ``resolution`` is :meth:`GeometricGrid.cell_widths`), or exactly at a
    public center (``resolution`` 0). A spread that also counted those rows
    would be 0 (the grid's lowest value) for any feature with more than half
    of its rows at one value: a 0/1 column whose ones are a minority, a
    one-hot column, a count that is mostly 0, a standardized binary column.
    Rows would then be clipped at a tiny fraction of their distance to the
    center, and a linear model fitted on the clipped rows extrapolates to the
    unclipped ones by the inverse of that fraction. Here the spread is that
    of the rows that vary.

    Privacy: ``center`` and ``resolution`` are public (released before, or
    parameters), so which rows count is decided row by row. Adding a row at
    the center changes no utility; adding any other row changes them as it
    does for :class:`PrivateQuantile` on the rows off the center: the same
    sensitivity, ``max(q, 1 - q)``, and the same ``epsilon`` per column.

    Parameters
    ----------
    X : array-like or Dask array of shape (n_samples, n_features)
    center, resolution : array-like of shape (n_features,)
    mechanisms : tuple of PrivateQuantile
        One per column, on positive (unsigned) grids.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n_features,)
        The released grid values, in column order (a column with no row off
        the center gets a draw uniform over its grid: every utility is 0).
    """
    center = np.asarray(center, dtype=np.float64)
    resolution = np.asarray(resolution, dtype=np.float64)
    if any(m.grid.signed for m in mechanisms):
        raise ValueError("spreads are released on positive grids")
    grids = [_spread_grid(m) for m in mechanisms]
    if is_dask_collection(X):
        if X.ndim != 2 or len(mechanisms) != X.shape[1]:
            raise ValueError(f"{len(mechanisms)} mechanisms for X of shape {X.shape}")
        distances = X.rechunk({1: -1}).map_blocks(
            _off_center_distances, center, resolution, dtype=np.float64
        )
        counts, n = _dask_counts(distances, mechanisms, norms=False, grids=grids)
    else:
        X = _as_matrix(X)
        if len(mechanisms) != X.shape[1]:
            raise ValueError(f"{len(mechanisms)} mechanisms for {X.shape[1]} columns")
        distances = _off_center_distances(X, center, resolution)
        counts = _block_counts(distances, grids, norms=False)
        n = X.shape[0]
    return np.array(
        [
            m.release_counts(*_off_center(upto, n), rng)
            for m, upto in zip(mechanisms, counts, strict=True)
        ]
    )


def _off_center_distances(X: np.ndarray, center: np.ndarray, resolution: np.ndarray) -> np.ndarray:
    """``|X - center|``, -1 for the rows at the center (a distance beyond
    float64 is its largest value: the top cell)."""
    X = np.asarray(X, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        distances = np.minimum(np.abs(X - center), _LARGEST)
        at_center = (X >= center - resolution) & (X <= center)
    return np.where(at_center, -1.0, distances)


def _spread_grid(mechanism: PrivateQuantile) -> np.ndarray:
    """The values a spread's counts go up to: -1, the distance of the rows at
    the center (below every positive grid value), then the grid."""
    return np.concatenate([[-1.0], mechanism.grid.values])


def _off_center(upto: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """The counts of :meth:`PrivateQuantile.utilities_of_counts` for the rows
    off the center, from ``upto = #{d <= (-1, *grid)}`` over all rows."""
    at_center = int(upto[0])
    return upto[1:] - at_center, n - at_center


def spread_utilities(
    mechanism: PrivateQuantile, values: ArrayLike, center: float, resolution: float
) -> np.ndarray:
    """The utilities :func:`private_column_spreads` selects from, for one
    column's ``values`` (its privacy is checked on them)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    d = np.sort(_off_center_distances(x, np.array([center]), np.array([resolution]))[:, 0])
    upto = np.searchsorted(d, _spread_grid(mechanism), side="right")
    return mechanism.utilities_of_counts(*_off_center(upto, d.size))


def private_norm_bound(X: ArrayLike, mechanism: PrivateQuantile, rng: np.random.Generator) -> float:
    """Release a private quantile of the L2 norms of the rows of ``X``.

    A bound for ``feature_norm``: at quantile ``q`` about a share ``1 - q`` of
    the rows are longer and will be clipped to it. Rescale ``X`` first (for
    example by :func:`private_column_quantiles`) so that the grid can be narrow.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    mechanism : PrivateQuantile
    rng : numpy.random.Generator

    Returns
    -------
    float
    """
    if is_dask_collection(X):  # counts per grid value on the workers: the same selection
        (counts,), n = _dask_counts(X, [mechanism], norms=True)
        return mechanism.release_counts(counts, n, rng)
    # overflow-safe: whether a row's norm overflows must not decide an error
    norms = np.minimum(row_norms(_as_matrix(X)), np.finfo(np.float64).max)  # inf: the top cell
    return mechanism.release(norms, rng)
