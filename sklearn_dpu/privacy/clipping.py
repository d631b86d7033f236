"""Clipping to data-independent bounds, and the fixed-point code used for exact
statistics.

Every function here is silent: how many rows were clipped depends on private
values, so it is never reported, warned about or stored. The bounds are the
assumptions of every guarantee in M. E. Ullah, "Statistical learning via
stochastic optimization under data privacy considerations" (PhD thesis, Johns
Hopkins University, 2024), Ch. 2: a public bound on the feature norm and on
the loss at zero (labels clipped to a public interval).
"""

from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .._validation import NonFiniteInputError

__all__ = [
    "CLIP_BLOCK_BYTES",
    "MIN_FLOAT32_NORM_BOUND",
    "MIN_NORM_BOUND",
    "clip_block_into",
    "clip_blocks",
    "clip_rows_l2",
    "clip_scales",
    "clip_to_interval",
    "row_norms",
    "scales_to",
    "storable_bound",
    "to_fixed_point",
    "FIXED_POINT_BITS",
]

#: Bits after the binary point of the fixed-point code. With values in [-1, 1]
#: a code fits in int16, a product of two codes in 2**28, and 2**24 products sum
#: exactly in float64 (2**52 < 2**53), so BLAS sums of codes are exact integers.
FIXED_POINT_BITS = 14
# Smallest row-norm bound the estimators accept. Below about 1e-154 the squares
# of entries of a row just above the bound can underflow to zero, its norm then
# reads as 0 and the row escapes clipping (a contribution of d, not 1, times the
# bound squared). At 1e-150 every entry of a row over the bound has a square
# above 1e-300 / d, a normal float64 for any d below 1e8.
MIN_NORM_BOUND = 1e-150
# Smallest row-norm bound for rows stored in float32 (UnlearnableSGDClassifier
# keeps its clipped rows so). Below float32's normal range (1.2e-38) an entry
# rounds with an absolute error of up to 2^-150 (7e-46), not a relative one: at
# a bound of 1e-44, stored rows came out up to 9% longer than the bound, far
# beyond the storage margin of 1e-6 (and the noise is calibrated to the
# bound). At 1e-30 the subnormal entries of a row add at most sqrt(d) 7e-46 to
# its norm, below 1e-6 of the bound for any d up to 1e18; normal entries round
# with a relative error of at most 2^-24 (6e-8).
MIN_FLOAT32_NORM_BOUND = 1e-30
# Largest row-norm bound the estimators accept. Their sensitivities use the
# bound squared (and by a few public factors): at 1e155 that overflowed
# float64 in every estimator (an OverflowError from Python's float power). Up
# to 1e150 every solver fits, deletes and (where it has one) updates with
# finite coefficients, in float64 and float32 alike (measured).
MAX_NORM_BOUND = 1e150
# Largest row-norm bound for float32 data, symmetric to MIN_FLOAT32_NORM_BOUND
# (see check_float32_bound).
MAX_FLOAT32_NORM_BOUND = 1e30


def check_float32_bound(X: Any, feature_norm: Any) -> None:
    """Refuse float32 data with a public row-norm bound outside
    ``[MIN_FLOAT32_NORM_BOUND, MAX_FLOAT32_NORM_BOUND]``.

    A linear model fitted on rows of norm at most ``feature_norm`` has
    coefficients of the order of ``1 / feature_norm``; float32 data give
    float32 coefficients (as scikit-learn's), which overflowed to infinity
    below about 1e-35 (measured, every solver of ``DPLinearRegression`` and
    ``DPLogisticRegression``) and underflow to zero above float32's largest
    value (3.4e38), which no float32 row can reach. The range keeps both
    ``feature_norm`` and ``1 / feature_norm`` eight orders of magnitude
    inside float32's normal range. Called after validation, before any
    charge; reads the dtype of ``X`` (public), never its values.
    """
    if getattr(X, "dtype", None) != np.float32 or isinstance(feature_norm, str):
        return
    if not MIN_FLOAT32_NORM_BOUND <= feature_norm <= MAX_FLOAT32_NORM_BOUND:
        raise ValueError(
            f"feature_norm={feature_norm!r} is outside [{MIN_FLOAT32_NORM_BOUND:g}, "
            f"{MAX_FLOAT32_NORM_BOUND:g}], the bounds for float32 data: the coefficients, of "
            "the order of 1 / feature_norm, would leave float32's range. Pass float64 data, "
            "or scale the features and feature_norm together into that range."
        )


# Rounding the scaling factor could push a clipped norm a few ulps above the
# bound; aiming slightly inside keeps ``norm <= max_norm`` exact.
_INSIDE = 1.0 - 1e-12

#: Bytes of float64 rows per block when rows are clipped into a buffer, block
#: by block (the block stays in cache from its norms to its copy). Measured at
#: n = 1e5 on one thread: 2^20 to 2^22 equally fast (d = 10 and 500), 2^16
#: twice as slow from the per-block overhead.
CLIP_BLOCK_BYTES = 1 << 21


def clip_scales(X: np.ndarray, max_norm: float) -> np.ndarray:
    """The factor :func:`clip_rows_l2` multiplies each row of a float64 ``X`` by.

    ``X * clip_scales(X, max_norm)[:, None]`` is ``clip_rows_l2(X, max_norm)``
    bit for bit (a test checks it): 1 for rows of norm at most ``max_norm``
    (times ``1 - 1e-12``), else the factor that puts the row just inside the
    sphere. For callers that write the clipped rows into a buffer of their own.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)
    max_norm : float
        Public bound.

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    norms, parts = _norms_and_parts(X)
    return scales_to(max_norm * _INSIDE, norms, parts)


def scales_to(target: float | np.ndarray, norms: np.ndarray, parts: tuple) -> np.ndarray:
    """Each row's clipping factor to ``target`` (a number, or one per row),
    from its norm and, for the rows whose squares overflow, the ``(index,
    largest entry, norm relative to it)`` parts: 1 for rows within the
    target. Shared by the dense and the sparse clips."""
    huge, largest, relative = parts
    target = np.broadcast_to(target, norms.shape)
    # Positions, not a mask: most rows are inside their bound, and indexing
    # by a short list of positions skips the three full-length mask reads.
    long = np.flatnonzero(norms > target)
    scale = np.ones_like(norms)
    # Dividing only where the norm is large avoids overflow warnings on zero
    # rows: a warning's presence would depend on private values.
    scale[long] = target[long] / norms[long]
    if huge.size:  # norms that overflowed: target / (largest * relative) when long
        # (a bound above ~1e154 can hold a row whose squares overflow)
        target_h = target[huge]
        over = relative > target_h / largest
        scale[huge[over]] = _huge_row_scales(target_h[over], largest[over], relative[over])
        scale[huge[~over]] = 1.0
    return scale


def _huge_row_scales(target: np.ndarray, largest: np.ndarray, relative: np.ndarray) -> np.ndarray:
    """``target / (largest * relative)`` for rows whose squares overflow,
    never above the exact quotient.

    With ``largest`` near the float64 maximum and a small ``target`` the
    quotient is subnormal, where a float has few significant bits: rounded to
    nearest it could leave the clipped row longer than its bound (by 3e-9 of
    it at a bound of 1e-8, 1.9 times it at 3.6e-15). Each of the two
    divisions errs by at most half a subnormal step there, so two steps down
    put a subnormal scale below the exact one (a scale of 0 drops the row:
    clipping more is always safe). Normal scales err by ``2**-52`` relative,
    inside the ``1e-12`` margin of the target.
    """
    scale = (target / largest) / relative
    step = np.finfo(np.float64).smallest_subnormal
    subnormal = scale < np.finfo(np.float64).tiny
    scale[subnormal] = np.maximum(scale[subnormal] - 2.0 * step, 0.0)
    return scale


def row_norms(X: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows of a finite float64 ``X``, without a warning.

    Rows with entries above ~1e154 (whose squares overflow) are rescaled by
    their largest entry first; a norm above the largest float is ``inf``
    (never a smaller number: a clipping scale computed from it must not
    leave the row longer than its bound). No warning depends on the values.
    """
    norms, _ = _norms_and_parts(X)
    return norms


def _norms_and_parts(X: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Row norms, and for the rows whose squares overflow their index,
    largest entry and norm relative to it (``norm = largest * relative``).
    A row holding an infinity is rescaled too, to a NaN norm (``inf / inf``),
    silently, as a row holding a NaN has one."""
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    overflowed = np.flatnonzero(np.isinf(norms))
    if not overflowed.size:
        return norms, (overflowed, None, None)
    rows = X[overflowed]
    largest = np.max(np.abs(rows), axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        relative = np.sqrt(np.einsum("ij,ij->i", *(2 * [rows / largest[:, None]])))
        norms[overflowed] = largest * relative
    return norms, (overflowed, largest, relative)


def clip_rows_l2(X: np.ndarray, max_norm: float, out: np.ndarray | None = None) -> np.ndarray:
    """Scale every row of ``X`` with Euclidean norm above ``max_norm`` onto the sphere.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Not modified.
    max_norm : float
        Public bound; must not be computed from ``X``.
    out : ndarray of shape (n_samples, n_features), default=None
        Where to write the clipped rows (a float32 ``out`` receives the
        float64 result rounded once, as an assignment would: the caller
        accounts for that rounding); saves a float64 copy of the data.

    Returns
    -------
    ndarray of shape (n_samples, n_features)
        ``out``, or a new float64 array, whose rows have norm at most
        ``max_norm`` before they are rounded into a lower-precision ``out``
        (into float32, up to about ``6e-8`` of it above: the caller's
        margin). Computed in float64 whatever the input type: float32
        rounding would overshoot the bound.

    Notes
    -----
    Into ``out`` the rows go by blocks of ``CLIP_BLOCK_BYTES`` of float64
    (at least two rows each; each cast to float64 on its own, never the whole
    of a float32 ``X``):
    a row's scale depends on that row only, so the values are those of the
    whole-array computation, and each block is read from memory once, for
    its norms, and copied from the cache; a block whose rows are mostly
    clipped is multiplied by its scales in one pass instead of copied and
    then rewritten where clipped. At n = 1e5, d = 500 on one thread, no row
    clipped: 88 ms before the blocks, 80-84 ms; 16% clipped: 135 ms, 97-104
    ms; all clipped: 122 ms. An ``UnlearnableSGDClassifier`` fit there with
    a bound that clips nearly every row took 520-540 ms, now 300 ms (2
    threads: 340-360 ms, now 220 ms). With ``out``, a block holding a NaN or
    an infinity raises :class:`~sklearn_dpu._validation.NonFiniteInputError`
    (:func:`clip_block_into`; earlier blocks are written), so a caller may
    skip scikit-learn's own finiteness pass; without ``out``, such rows are
    returned as they are.

    Examples
    --------
    >>> clip_rows_l2(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0).round(6)
    array([[0.6, 0.8],
           [0.3, 0.4]])
    """
    if out is None:
        X = np.asarray(X, dtype=np.float64)
        return X * clip_scales(X, max_norm)[:, None]
    X = np.asarray(X)
    max_norm = storable_bound(max_norm, out.dtype)
    for rows in clip_blocks(X.shape[0], X.shape[1]):
        clip_block_into(X[rows], max_norm, out[rows])
    return out


def clip_blocks(n: int, d: int, start: int = 0) -> list[slice]:
    """Blocks of rows ``start .. start + n - 1`` of about ``CLIP_BLOCK_BYTES``
    of float64 (``d`` columns), none of one row unless ``n`` is one: a lone
    row cast from a Fortran-ordered array is contiguous, and einsum then sums
    its squares in another order than it does a row of the strided whole
    (1e-15 apart).

    Examples
    --------
    >>> clip_blocks(5, 1 << 20)
    [slice(0, 2, None), slice(2, 5, None)]
    """
    step = max(2, CLIP_BLOCK_BYTES // (8 * max(d, 1)))
    starts = list(range(start, start + n, step))
    if len(starts) > 1 and start + n - starts[-1] == 1:
        starts.pop()  # the last row joins the block before it
    stops = [*starts[1:], start + n]
    return [slice(first, stop) for first, stop in zip(starts, stops, strict=True)]


def clip_block_into(
    X: np.ndarray, max_norm: float, out: np.ndarray, divisor: float | None = None
) -> None:
    """``out[...] = clip_rows_l2(X, max_norm)``, divided by ``divisor`` if
    given, for one block of rows (:func:`clip_blocks`), bit for bit.

    Rows inside the ball have scale 1 and ``x * 1 == x`` exactly: when few
    rows are scaled, the block is copied (a plain, unbuffered cast) or
    divided and only those rows are rewritten; when more than a quarter are,
    the whole block is multiplied by its scales (then divided), the same
    values (at d = 500 the copy and the gather took 3.6 times as long with
    every row scaled, 0.7 times with none). Only a row that is scaled can
    overflow its cast or its division, and it is rewritten: no warning
    depends on the values.

    Raises :class:`~sklearn_dpu._validation.NonFiniteInputError` when a row
    holds a NaN or an infinity, before anything is written: a row's norm
    (:func:`row_norms`) is NaN exactly then (a NaN entry makes the sum of
    squares NaN; an infinite one makes it infinite, and the row is then
    rescaled by its largest entry, ``inf / inf``; a finite row's norm is
    finite, or ``inf`` when it overflows). The check reads the block's norms
    only, so the clip is the pass that validates the rows. Raises
    :class:`TypeError` for an ``out`` that does not hold floating-point
    values, whatever the rows (a cast would truncate the clipped values).
    """
    if not np.issubdtype(out.dtype, np.floating):
        raise TypeError(f"out must hold floating-point values, not {out.dtype}")
    X = np.asarray(X, dtype=np.float64)
    norms, parts = _norms_and_parts(X)
    if np.isnan(norms).any():
        raise NonFiniteInputError("Input X contains NaN or infinity.")
    scale = scales_to(max_norm * _INSIDE, norms, parts)
    scaled = np.flatnonzero(scale != 1.0)
    with np.errstate(over="ignore"):
        if 4 * scaled.size > len(X):
            if divisor is None and out.dtype == X.dtype:
                np.multiply(X, scale[:, None], out=out)
            elif divisor is None:
                # The product in float64 (the block is in cache), then one
                # plain cast: a multiply straight into a float32 ``out``
                # casts through numpy's buffers. Same bits; every row
                # clipped, n = 1e5, one thread: 3-14% less time by medians
                # of 21 interleaved runs at d = 10 to 500.
                out[...] = X * scale[:, None]
            else:
                np.divide(np.multiply(X, scale[:, None]), divisor, out=out)
            return
        if divisor is None:
            out[...] = X
        else:
            np.divide(X, divisor, out=out)
    if scaled.size:
        clipped = X[scaled] * scale[scaled, None]
        out[scaled] = clipped if divisor is None else clipped / divisor


def storable_bound(max_norm: float, dtype: DTypeLike) -> float:
    """``max_norm``, lowered to the largest value ``dtype`` holds: a row
    clipped to a longer norm could round to ``inf`` when stored (a float32
    bound above 3.4e38), and whether it did would depend on the data.
    Clipping to a smaller bound is always safe."""
    return min(float(max_norm), float(np.finfo(dtype).max))


def clip_to_interval(y: np.ndarray, low: float, high: float) -> np.ndarray:
    """Clip values to the public interval ``[low, high]`` (a new array)."""
    return np.clip(y, low, high)


def to_fixed_point(A: np.ndarray, bits: int = FIXED_POINT_BITS) -> np.ndarray:
    """Encode values in [-1, 1] as int16 multiples of ``2**-bits``, rounding toward zero.

    Rounding toward zero never increases an absolute value, so a row norm bound
    that held before encoding still holds after it, and sensitivities computed
    for the real values stay valid for the codes.

    Parameters
    ----------
    A : ndarray
        Values in [-1, 1].
    bits : int, default=FIXED_POINT_BITS
        At most 14, so that codes fit in int16.

    Returns
    -------
    ndarray of dtype int16
    """
    if not 0 < bits <= 14:
        raise ValueError(f"bits must be in (0, 14], got {bits}")
    return np.trunc(np.clip(A, -1.0, 1.0) * (1 << bits)).astype(np.int16)
