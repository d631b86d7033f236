"""Exact sufficient statistics of clipped linear-regression data, and their private solve.

A training row ``(x, y)`` is clipped to the public bounds and normalized to
``u = (x / feature_norm, [1], (y - center) / half_range)``, so that
``||x / feature_norm|| <= 1`` and ``|(y - center) / half_range| <= 1``. Its
contribution to the Gram matrix ``sum u u^T`` then has Frobenius norm
``||u||^2 <= 2 + fit_intercept``: that is the add/remove sensitivity of the
released statistic, whatever the data.

Stored rows are coded in fixed point (:func:`~sklearn_dpu.privacy.clipping.to_fixed_point`),
and the Gram matrix is kept as exact integers. Removing a row is then an exact
integer subtraction: after a deletion the statistic is bit-for-bit the one a
fresh fit on the remaining rows computes, with nothing of the deleted row left
in its rounding.

References
----------
.. [Wang18] Y.-X. Wang, "Revisiting differentially private linear regression:
   optimal and adaptive prediction & estimation in unbounded domain", UAI 2018,
   Algorithm 2 (AdaSSP).
.. [Sheffet17] O. Sheffet, "Differentially private ordinary least squares",
   ICML 2017.
"""

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike
from sklearn import config_context
from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data

from .._row_threads import sum_over_row_ranges
from .._transaction import deferred_sigint, on_rollback
from .._validation import (
    INPUT_DTYPES,
    NonFiniteInputError,
    is_dask_collection,
    is_scratch,
)
from ..privacy.clipping import _INSIDE, FIXED_POINT_BITS, clip_rows_l2, clip_scales, to_fixed_point
from ..unlearning.row_store import active_directory, gather_blocks
from ._lifted_solve import lifted_solve, solve_blas

if TYPE_CHECKING:
    import dask.array as da

__all__ = [
    "validate_training_data",
    "GRAM_SCALE",
    "contribution_bound",
    "encode_rows",
    "encode_with_gram",
    "encode_with_gram_dask",
    "encode_training_data",
    "gram_of_codes",
    "subtract_gram_of_codes",
    "is_dask_collection",
    "solve_noisy_gram",
]

_ONE = 1 << FIXED_POINT_BITS
#: Real value of one unit of the integer Gram matrix.
GRAM_SCALE = 2.0 ** (-2 * FIXED_POINT_BITS)
# Exactness of the float64 Gram of codes. A code is an integer of absolute
# value at most 2**14, so a product of two codes is at most 2**28 in absolute
# value, and a sum of k of them at most k * 2**28. Every partial sum BLAS forms
# on the way (in any order, with any blocking or FMA) is such a sum of at most k
# products, hence an integer of absolute value at most k * 2**28; float64
# represents every integer up to 2**53 exactly, so with k <= 2**25 no partial
# sum is ever rounded and the float64 result IS the integer sum, whatever order
# BLAS adds in. Blocks of at most _MAX_EXACT_ROWS rows are therefore summed in
# float64 and then added into an int64 total in int64 arithmetic (add_exact:
# NumPy's default loop for int64 + float64 is float64, which rounds a total
# above 2**53), exact while |total| <= n * 2**28 < 2**63, for n < 2**35 rows.
_MAX_EXACT_ROWS = 1 << 25
_BLOCK = 1 << 16  # rows per block of gram_of_codes (<= _MAX_EXACT_ROWS)
# Bytes of float64 work buffer per block of the fused encoder: about the
# last-level cache, large enough for an efficient syrk and few Python calls
# (measured at n = 1e6, d in {20, 100}: 2 MiB beats 512 KiB by 5-10%).
_ENCODE_BYTES = 1 << 21
_ENCODE_MIN_ROWS, _ENCODE_MAX_ROWS = 256, 1 << 16
# Rows a block has at least (up to d) so that adding its d x d product into
# the total costs little beside forming it (see encode_with_gram).
_ENCODE_GRAM_ROWS = 1024
# feature_norm * 2**-14 is a normal float, computed exactly, from here on.
_SMALLEST_EXACT_NORM = 2.0**-1008


def contribution_bound(fit_intercept: bool) -> float:
    """Bound on ``||u u^T||_F = ||u||^2`` for one normalized row."""
    return 3.0 if fit_intercept else 2.0


def encode_rows(
    X: ArrayLike, y: ArrayLike, feature_norm: float, center: float, half_range: float
) -> np.ndarray:
    """Clip, normalize and fixed-point code rows as ``[x / feature_norm, y_normalized]``.

    The reference definition of the code; :func:`encode_with_gram` computes the
    same integers block by block.

    Returns
    -------
    ndarray of shape (n_samples, n_features + 1), dtype int16
    """
    x = clip_rows_l2(np.asarray(X, dtype=np.float64), feature_norm) / feature_norm
    # A target so far out that its normalized value overflows is clipped like
    # any other, without a warning (whose presence would depend on the data).
    with np.errstate(over="ignore"):
        t = np.clip((np.asarray(y, dtype=np.float64) - center) / half_range, -1.0, 1.0)
    return to_fixed_point(np.column_stack([x, t]))


def _prefilter_margin(d: int) -> float:
    """Relative margin of the cheap norm test of :func:`_encode_block_into`.

    Two float64 sums of ``d`` non-negative squares (in any order, of values
    each rounded once) agree to a relative ``(d + 2) * 2**-53`` each; the
    exact test also rounds a square root, a product and ``max_norm * _INSIDE``.
    Sixteen times ``(d + 8) * 2**-52`` covers all of it with room to spare.
    """
    return 16.0 * (d + 8) * np.finfo(np.float64).eps


def add_exact(total: np.ndarray, part: np.ndarray) -> None:
    """``total += part`` for an int64 ``total`` and float64 ``part`` holding
    exact integers (below ``2**53``), in int64 arithmetic.

    ``np.add(total, part, out=total)`` alone would run NumPy's float64 loop
    (the common type of int64 and float64) and round a total above ``2**53``:

    >>> total = np.array([2**53 + 1])
    >>> add_exact(total, np.array([2.0]))
    >>> int(total[0]) - 2**53
    3
    """
    np.add(total, part, out=total, dtype=np.int64, casting="unsafe")


def _encode_block_into(
    X: np.ndarray,
    y: np.ndarray,
    feature_norm: float,
    center: float,
    half_range: float,
    features: np.ndarray,
    target: np.ndarray,
    scratch: np.ndarray,
) -> None:
    """Write the codes of rows ``X, y`` (float64) as float64 integers into
    ``features`` (C-contiguous, the rows' shape) and ``target``;
    ``scratch`` is a work buffer of the shape of ``features``.

    The values are exactly those of :func:`encode_rows`, which computes
    ``trunc(clip(v / feature_norm, -1, 1) * 2**14)`` with ``v`` the clipped
    row. Here ``v`` is divided by ``feature_norm * 2**-14`` and clipped to
    ``[-2**14, 2**14]``: scaling by a power of two is exact, so both round the
    same real number to the same float as long as the results are normal
    numbers; where ``v / feature_norm`` is subnormal both truncate to zero, and
    where the scaled quotient overflows both clip to ``2**14``.
    (``feature_norm * 2**-14`` itself is exact when ``feature_norm >=
    2**-1008``; below, the reference order is used.)

    One pass over ``X`` divides every row straight into ``features`` (``x *
    1.0`` is ``x``, so a row inside the ball, scale 1, needs no multiply).
    The clipping test then reads the quotients, which are in cache: a row
    whose squared quotient norm is below ``(2**14 * _INSIDE)**2 (1 -
    margin)`` has a norm below ``feature_norm * _INSIDE`` however
    :func:`~sklearn_dpu.privacy.clipping.clip_scales` rounds it
    (:func:`_prefilter_margin`), hence scale 1; and every entry of it is
    below ``2**14`` in absolute value, so the clip leaves it unchanged. Only
    the other rows (the clipped ones and those within the margin of the
    sphere, overflowing quotients included, and rows whose squares overflow
    in the units of ``X``, which ``clip_scales`` treats apart) go through
    ``clip_scales``, the multiply and the clip, exactly as before. Those are
    also the only rows that can hold a NaN or an infinity (their squared norm
    is NaN or inf): they are checked, and :class:`NonFiniteInputError` raised.
    """
    # A target so far out that its normalized value overflows is clipped like
    # any other, without a warning (whose presence would depend on the data).
    with np.errstate(over="ignore"):
        np.subtract(y, center, out=target)
        np.divide(target, half_range, out=target)
    np.clip(target, -1.0, 1.0, out=target)
    np.multiply(target, _ONE, out=target)
    np.trunc(target, out=target)
    if feature_norm < _SMALLEST_EXACT_NORM:
        if not np.isfinite(X).all():
            raise NonFiniteInputError("Input X contains NaN or infinity.")
        scales = clip_scales(X, feature_norm)
        np.multiply(X, scales[:, None], out=features)
        np.divide(features, feature_norm, out=features)
        np.clip(features, -1.0, 1.0, out=features)
        np.multiply(features, _ONE, out=features)
        np.trunc(features, out=features)
        return
    step = feature_norm / _ONE
    # (A long row may overflow here, silently: it is rewritten below, and a
    # warning's presence would depend on the data.)
    with np.errstate(over="ignore", invalid="ignore"):
        np.divide(X, step, out=features)
        # Squared norms as a BLAS product (any summation order will do here).
        squares = np.square(features, out=scratch) @ np.ones(features.shape[1])
    margin = 1.0 - _prefilter_margin(X.shape[1])
    inside = (_ONE * _INSIDE) ** 2 * margin
    # clip_scales takes another path (and scale) for rows whose squares
    # overflow in the units of X: those go the slow way too.
    with np.errstate(over="ignore"):
        representable = np.finfo(np.float64).max / step / step * margin
    near = np.flatnonzero(~(squares <= min(inside, representable)))  # inf rows included
    if near.size:
        rows = X[near]
        # A NaN or an infinity makes its row's squared norm NaN or inf: the
        # rows checked here are the only ones that can hold one.
        if not np.isfinite(rows).all():
            raise NonFiniteInputError("Input X contains NaN or infinity.")
        scales = clip_scales(rows, feature_norm)
        long = scales != 1.0
        if long.any():
            clipped = (rows[long] * scales[long, None]) / step
            features[near[long]] = np.clip(clipped, -_ONE, _ONE, out=clipped)
        features[near[~long]] = np.clip(features[near[~long]], -_ONE, _ONE)
    np.trunc(features, out=features)


def encode_with_gram(
    X: np.ndarray,
    y: np.ndarray,
    feature_norm: float,
    center: float,
    half_range: float,
    fit_intercept: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode_rows` and :func:`gram_of_codes` in one pass over row blocks.

    Each block of rows is clipped and quantized into small float64 buffers
    that stay in cache: the features' codes (contiguous, so that every pass
    over them runs at full speed) and the target's. Their products are exact
    (see the bound at ``_MAX_EXACT_ROWS``): one BLAS ``syrk`` per block
    writes the block's products into a reused ``d x d`` buffer, added into a
    float64 total that moves into int64 (:func:`add_exact`) after at most
    ``_MAX_EXACT_ROWS`` rows, so its sums stay exact integers; two ``gemv``
    give the products with the target and the sums (the intercept column is
    the constant ``_ONE``, so its entries are sums times ``_ONE``), added
    into int64 totals. A block has at least ``min(d, 1024)`` rows, so that
    the ``d x d`` additions cost little beside the block's ``syrk`` (at
    d = 1000, 261-row blocks each making a fresh product and adding it into
    int64 spent as long on that as on the product itself: 4.2 s against
    2.1 s for a bare ``X.T @ X`` at n = 1e5 on one thread, 2.9 s with
    1000-row blocks). A row range holds two ``d x d`` float64 arrays (the
    int64 total is made at the end, once the product's buffer is freed, or
    at a flush, after more than ``_MAX_EXACT_ROWS`` rows: three arrays from
    then on), a block, and a scratch of the rows a part has: about
    ``_ENCODE_BYTES``, at least ``_ENCODE_MIN_ROWS`` (a longer block is
    encoded in parts of that size). The block's int16 codes are written
    once. The
    result is bit-identical to :func:`encode_rows` followed by
    :func:`gram_of_codes`. The blocks run on as many contiguous row ranges as
    the caller lets BLAS use threads (:mod:`sklearn_dpu._row_threads`); their totals are
    exact integers, so the split changes no bit (measured at n = 1e6 on 2
    cores: d = 100 0.65 s -> 0.49 s, d = 20 0.091 s -> 0.087 s).

    Returns
    -------
    codes : ndarray of int16, shape (n_samples, n_features + 1)
    gram : ndarray of int64
    """
    n, d = X.shape
    y = np.asarray(y, dtype=np.float64)
    cached = int(np.clip(_ENCODE_BYTES // (8 * (d + 2)), _ENCODE_MIN_ROWS, _ENCODE_MAX_ROWS))
    rows = max(cached, min(d, _ENCODE_GRAM_ROWS))
    rows = min(rows, max(n, 1))
    codes = np.empty((n, d + 1), dtype=np.int16)

    def encode_range(first: int, last: int) -> tuple:
        # Exact integer blocks of the Gram matrix over rows first .. last - 1:
        # features, their products with the target, their sums, and the
        # target's square and sum.
        # The features' products since the last flush (exact while it sums
        # at most 2**25 rows), the buffer each block's product is written to,
        # and their int64 total, made at the end (after the buffer is freed)
        # or at a flush: two d x d arrays at a time until a flush, as one
        # int64 total and a fresh product each block were.
        recent = np.zeros((d, d), dtype=np.float64)
        product = np.empty((d, d), dtype=np.float64)
        in_recent = 0
        features_gram = None

        def flushed(total):
            if total is None:
                return recent.astype(np.int64)
            add_exact(total, recent)
            return total

        with_target = np.zeros(d, dtype=np.int64)
        sums = np.zeros(d, dtype=np.int64)
        target_square = target_sum = 0
        features_buffer = np.empty((rows, d), dtype=np.float64)
        scratch = np.empty((min(rows, cached), d), dtype=np.float64)
        target_buffer = np.empty(rows, dtype=np.float64)
        ones = np.ones(rows)
        for start in range(first, last, rows):
            stop = min(last, start + rows)
            features, target = features_buffer[: stop - start], target_buffer[: stop - start]
            # Encoded in cache-sized parts (their temporaries, such as the
            # rows near the sphere, stay that small), multiplied as one block.
            for part in range(start, stop, cached):
                end = min(stop, part + cached)
                inside = slice(part - start, end - start)
                _encode_block_into(
                    np.asarray(X[part:end], dtype=np.float64),
                    y[part:end],
                    feature_norm,
                    center,
                    half_range,
                    features[inside],
                    target[inside],
                    scratch[: end - part],
                )
            np.copyto(codes[start:stop, :d], features, casting="unsafe")
            codes[start:stop, d] = target
            # Exact integers: products (or sums) of codes over fewer than 2**25
            # rows, one syrk and two gemv.
            if in_recent + (stop - start) > _MAX_EXACT_ROWS:
                features_gram = flushed(features_gram)
                recent[...], in_recent = 0.0, 0
            np.matmul(features.T, features, out=product)
            recent += product
            in_recent += stop - start
            add_exact(with_target, features.T @ target)
            add_exact(sums, features.T @ ones[: stop - start])
            target_square += int(target @ target)
            target_sum += int(target.sum())
        product = features = features_buffer = scratch = None  # freed before the total
        return flushed(features_gram), with_target, sums, target_square, target_sum

    # On as many row ranges as the caller lets BLAS use threads: the sums are
    # exact integers, so the split changes no bit of the result.
    features_gram, with_target, sums, target_square, target_sum = sum_over_row_ranges(
        encode_range, n, d + 2
    )
    width = d + 1 + fit_intercept  # [features, (intercept), target]
    gram = np.empty((width, width), dtype=np.int64)
    gram[:d, :d] = features_gram
    gram[:d, -1] = gram[-1, :d] = with_target
    gram[-1, -1] = target_square
    if fit_intercept:
        gram[:d, d] = gram[d, :d] = sums * _ONE
        gram[d, d] = n * _ONE * _ONE
        gram[d, -1] = gram[-1, d] = target_sum * _ONE
    return codes, gram


def encode_training_data(
    X: Any,
    y: np.ndarray,
    feature_norm: float,
    center: float,
    half_range: float,
    fit_intercept: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode_with_gram` (or its Dask form) of validated data, whose
    finiteness the encoding pass checks.

    ``X`` may come from :func:`validate_training_data` with ``finite=False``:
    the encoder meets every NaN or infinity on its way (in a row it checks
    anyway, see :func:`_encode_block_into`) and raises
    :class:`~sklearn_dpu._validation.NonFiniteInputError`, so the separate
    pass over the data that scikit-learn's check costs is saved. Run it in
    :func:`~sklearn_dpu._validation.nonfinite_x_reported_first`, which turns
    that error into scikit-learn's, before anything is charged or changed.
    """
    if is_dask_collection(X):
        return encode_with_gram_dask(X, y, feature_norm, center, half_range, fit_intercept)
    return encode_with_gram(X, y, feature_norm, center, half_range, fit_intercept)


def _encode_block(X, y, feature_norm, center, half_range, fit_intercept):
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("Input contains NaN or infinity.")
    return encode_with_gram(X, y, feature_norm, center, half_range, fit_intercept)


def encode_with_gram_dask(
    X: "da.Array",
    y: ArrayLike,
    feature_norm: float,
    center: float,
    half_range: float,
    fit_intercept: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`encode_with_gram` on a Dask array, block by block on the workers.

    Each row block is clipped, coded and reduced where it lives; only the
    int16 codes (a quarter of float64 input) and the small Gram matrices come
    back, in one pass over the data. Inside
    :func:`~sklearn_dpu.unlearning.disk_backed_rows` the codes are written to a
    memory-mapped file a batch of blocks at a time
    (:func:`~sklearn_dpu.unlearning.row_store.gather_blocks`), so the driver
    never holds them all.

    Returns
    -------
    codes : ndarray of int16, shape (n_samples, n_features + 1)
    gram : ndarray of int64
    """
    import dask
    import dask.array as da

    if X.ndim != 2 or np.isnan(X.shape[1]):
        raise ValueError(f"Expected a 2-D Dask array with known columns, got shape {X.shape}")
    X = X.rechunk({1: -1})
    y = da.asarray(y).rechunk((X.chunks[0],))
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y has shape {y.shape}, expected ({X.shape[0]},)")
    encode = dask.delayed(_encode_block, pure=True)
    blocks = [
        encode(xb, yb, feature_norm, center, half_range, fit_intercept)
        for xb, yb in zip(X.to_delayed().ravel(), y.to_delayed().ravel(), strict=True)
    ]
    if active_directory() is not None and blocks:  # codes to disk, a batch of blocks at a time
        codes, grams = gather_blocks(blocks, int(X.shape[0]), int(X.shape[1]) + 1, np.int16)
        return codes, np.sum([gram for (gram,) in grams], axis=0)
    results = dask.compute(*blocks)
    if not results:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    codes = np.concatenate([codes for codes, _ in results])
    return codes, np.sum([gram for _, gram in results], axis=0)


def _code_blocks(codes: np.ndarray, fit_intercept: bool):
    """Blocks of at most ``_BLOCK`` coded rows as float64, in the Gram layout
    ``[features, (intercept), target]``."""
    n, width = codes.shape
    q = width + fit_intercept
    for start in range(0, n, _BLOCK):
        part = codes[start : start + _BLOCK]
        block = np.empty((len(part), q), dtype=np.float64)
        block[:, : width - 1] = part[:, :-1]
        block[:, -1] = part[:, -1]
        if fit_intercept:
            block[:, width - 1] = _ONE
        yield block


def gram_of_codes(codes: np.ndarray, fit_intercept: bool) -> np.ndarray:
    """Exact integer Gram matrix of coded rows, with the intercept column inserted.

    The layout is ``[features, (intercept), target]``, matching
    :func:`solve_noisy_gram`. Blocks of rows are multiplied in float64, which
    is exact (see ``_MAX_EXACT_ROWS``), and summed in int64.

    Parameters
    ----------
    codes : ndarray of int16, shape (n_samples, n_features + 1)
    fit_intercept : bool

    Returns
    -------
    ndarray of int64, shape (q, q) with ``q = n_features + 1 + fit_intercept``
    """
    q = codes.shape[1] + fit_intercept
    gram = np.zeros((q, q), dtype=np.int64)
    for block in _code_blocks(codes, fit_intercept):
        add_exact(gram, block.T @ block)
    return gram


# Float64 entries per temporary of subtract_gram_of_codes (64 KiB): far below
# the allocator's threshold for returning a freed block to the operating
# system (glibc's default mmap threshold is 128 KiB), so each band's product
# reuses the memory of the previous one instead of faulting in fresh pages.
_BAND_ENTRIES = 1 << 13
# Deleted rows up to which subtract_gram_of_codes forms the product in bands.
_FEW_ROWS = 64
# Entries per band of a one-row subtraction (128 KiB of int32 products, one buffer a call).
_OUTER_ENTRIES = 1 << 15


def subtract_gram_of_codes(gram: np.ndarray, codes: np.ndarray, fit_intercept: bool) -> None:
    """``gram -= gram_of_codes(codes, fit_intercept)`` in place (int64 ``gram``).

    Each block's float64 product holds exact integers below ``2**53``; it is
    cast to int64 inside the subtraction's buffer. The product is formed a band
    of ``gram``'s rows at a time, so a deletion makes no ``q x q`` temporary
    (at q = 1000 a fresh 8 MB product costs a page fault every 4 KiB on the
    first deletion). The entries are exact integers, so the bands give the
    same values as one product. A block of many rows is multiplied whole:
    its product's cost dwarfs the faults, and bands would read it once each.

    One row (the usual deletion) is subtracted as an int32 outer product
    instead: its entries are products of two codes, at most ``2**28`` in
    absolute value, so exact in int32, and it skips the float-to-int cast of
    the subtraction (measured at q = 1002: 1.0 ms against 3.5 ms; 1.4 ms
    with int64 products). Inside :func:`~sklearn_dpu._transaction.atomic`,
    a failure, here or later, adds back what was subtracted (exact; no copy
    when it succeeds), and a Ctrl-C waits for the subtraction to end.
    """
    q = gram.shape[0]
    done: list = []  # the (block, first band row, rows) subtracted so far
    on_rollback(lambda: _add_back(gram, done))
    with deferred_sigint():
        for block in _code_blocks(codes, fit_intercept):
            if len(block) == 1:
                _subtract_outer(gram, block[0])  # all or nothing: no allocation midway
                done.append((block, 0, q))
                continue
            rows = max(1, _BAND_ENTRIES // q) if len(block) <= _FEW_ROWS else q
            for first in range(0, q, rows):
                part = gram[first : first + rows]
                product = block[:, first : first + rows].T @ block
                np.subtract(part, product, out=part, dtype=np.int64, casting="unsafe")
                done.append((block, first, rows))


def _add_back(gram: np.ndarray, done: list) -> None:
    """Undo the bands of :func:`subtract_gram_of_codes` listed in ``done``."""
    for block, first, rows in done:
        part = gram[first : first + rows]
        product = block[:, first : first + rows].T @ block
        np.add(part, product, out=part, dtype=np.int64, casting="unsafe")


def _subtract_outer(gram: np.ndarray, row: np.ndarray) -> None:
    """``gram -= outer(row, row)`` (``row``: float64 integers), a band of
    rows at a time; the products in int32 when they fit (codes are at most
    ``2**14`` in absolute value), else in int64."""
    q = len(row)
    fits = float(np.max(np.abs(row), initial=0.0)) ** 2 <= np.iinfo(np.int32).max
    row = row.astype(np.int32 if fits else np.int64)
    rows = max(1, _OUTER_ENTRIES // q)
    buffer = np.empty(rows * q, dtype=row.dtype)
    for first in range(0, q, rows):
        part = gram[first : first + rows]
        product = buffer[: part.size].reshape(part.shape)
        np.multiply(row[first : first + rows, None], row, out=product)
        np.subtract(part, product, out=part)


def noise_spectral_bound(sigma: float, size: int, failure: float = 1e-3) -> float:
    """High-probability bound on the spectral norm of the symmetric Gram noise.

    The noise has variance ``sigma**2`` on the diagonal and ``sigma**2 / 2``
    off it, so ``E ||E|| <= 2 sqrt(size sigma**2 / 2)``; ``||E||`` is
    1-Lipschitz in the isometric coordinates where the noise is
    ``N(0, sigma**2 I)``, so it exceeds its mean by ``sigma t`` with
    probability at most ``exp(-t**2 / 2)``. Uses only public quantities.
    """
    return sigma * (np.sqrt(2.0 * size) + np.sqrt(2.0 * np.log(1.0 / failure)))


def solve_noisy_gram(
    noisy_gram: np.ndarray,
    n_coef: int,
    ridge: np.ndarray,
    sigma: float,
    fit_intercept: bool = False,
    work: np.ndarray | None = None,
    low_precision: np.ndarray | None = None,
) -> np.ndarray:
    """Least squares from a released Gram matrix, safe against indefinite noise.

    With ``A`` the released ``X^T X`` block of the features and ``b`` the
    ``X^T y`` block, returns ``(A + ridge_diag + lam I)^{-1} b`` where ``lam``
    lifts the smallest eigenvalue of the (ridged) released ``A`` to the
    spectral bound of the noise, so the system is positive definite with a
    high-probability margin and cannot blow up. This is AdaSSP's
    eigenvalue-floor rule [Wang18]_, with the smallest eigenvalue read off the
    released matrix (post-processing) instead of paying for a separate
    release; how the lifted system is solved:
    :mod:`sklearn_dpu.linear_model._lifted_solve`.

    With an intercept (the column of ones, after the features), the intercept
    is eliminated exactly first and is never penalized: with ``s`` the
    released column sums, ``n`` the released count and ``t`` the released sum
    of the targets, the slopes solve the centered system
    ``(A - s s^T / n + ridge + lam I) w = b - s t / n`` (the Schur complement of
    ``n``), and the intercept is ``(t - s^T w) / n``. Lifting the intercept
    with the features, as a plain ridge on the augmented matrix does, shrinks
    it towards 0 by ``n / (n + lam)``: at a small ``n`` that bias alone can
    cost more than the whole signal (on raw ``load_diabetes`` at epsilon = 1
    it took the median test R^2 from 0.28 to 0.01).

    Parameters
    ----------
    noisy_gram : ndarray of shape (n_coef + 1, n_coef + 1)
        Layout ``[features, (intercept), target]``.
    n_coef : int
        Coefficients, the intercept included.
    ridge : ndarray of shape (n_coef,)
        Data-independent penalty added to the diagonal (the intercept's entry
        is not used when ``fit_intercept``).
    sigma : float
        Noise standard deviation on the Gram diagonal.
    fit_intercept : bool, default=False
        Whether coefficient ``n_coef - 1`` is the intercept.
    work : ndarray of float64, default=None
        C-contiguous scratch of shape ``(n_slopes, n_slopes)`` (``n_slopes``:
        ``n_coef`` less the intercept) that the slopes' system is built and
        factored in, overwritten. Default: a fresh array (8 MB at d = 1000, a
        page fault every 4 KiB when the process has not held that much
        before). Same result either way.
    low_precision : ndarray of float32, default=None
        C-contiguous scratch of the same shape for the float32 copy the
        eigenvalue bound iterates on
        (:func:`~sklearn_dpu.linear_model._lifted_solve.smallest_eigenvalue_lower_bound`).
        Default: a fresh array. Same result either way.

    Returns
    -------
    ndarray of shape (n_coef,)

    References
    ----------
    .. [Wang18] Y.-X. Wang, "Revisiting differentially private linear
       regression: optimal and adaptive prediction & estimation in unbounded
       domain", UAI 2018, Algorithm 2 (AdaSSP).
    """
    n_slopes = n_coef - 1 if fit_intercept else n_coef
    floor = noise_spectral_bound(sigma, n_slopes) if sigma > 0 else 0.0
    b = noisy_gram[:n_slopes, n_coef]
    count = total = sums = None
    if fit_intercept:
        sums, total = noisy_gram[:n_slopes, n_slopes], noisy_gram[n_slopes, n_coef]
        # The released count, kept at least at the floor the slopes get (a
        # count drowned in noise must not divide by ~0).
        count = max(float(noisy_gram[n_slopes, n_slopes]), floor, 1.0)
        b = b - sums * (total / count)

    def slopes_matrix() -> np.ndarray:
        # One owned copy of the block, updated in place from here on (at d = 1000
        # every q x q temporary costs about as much as a Lanczos step sequence).
        block = noisy_gram[:n_slopes, :n_slopes]
        if is_scratch(work, (n_slopes, n_slopes)):
            A = work
            np.copyto(A, block)
        else:
            A = np.array(block, dtype=np.float64, copy=True)
        A.flat[:: n_slopes + 1] += ridge[:n_slopes]
        if fit_intercept:
            # A -= s s^T / count as one in-place BLAS rank-1 update (A is
            # symmetric, so its C-ordered buffer is the Fortran one of A^T = A).
            scaled = sums / np.sqrt(count)  # alpha = -1 keeps A exactly symmetric
            A = scipy.linalg.blas.dger(-1.0, scaled, scaled, a=A.T, overwrite_a=True).T
        return A

    if not n_slopes:
        w = np.zeros(0)
    else:
        with solve_blas(n_slopes):  # BLAS on one thread up to 1024 slopes
            w = lifted_solve(slopes_matrix(), b, floor, slopes_matrix, low_precision)
    if not fit_intercept:
        return w
    return np.append(w, (total - sums @ w) / count)


def validate_training_data(
    estimator: BaseEstimator, X: Any, y: Any, reset: bool, finite: bool = True
) -> tuple[Any, Any, int]:
    """Validate training data for ``estimator``: returns ``(X, y, n_rows)``.

    In-memory data go through scikit-learn's ``validate_data``; a Dask array
    is checked for its shape here, for finite values here too unless
    ``finite=False``, and block-wise when encoded. With
    ``finite=False`` the values of ``X`` are not checked for NaN and
    infinities (``y`` always is): the caller must pass it through
    :func:`encode_training_data`, which does, before using it. With
    ``finite=True`` they are checked even under
    ``sklearn.config_context(assume_finite=True)``: the 'auto' bounds are
    charged before they are drawn from ``X``, and a NaN would reach them.
    """
    if not is_dask_collection(X):
        with config_context(assume_finite=False) if finite else nullcontext():
            X, y = validate_data(
                estimator,
                X,
                y,
                dtype=INPUT_DTYPES,
                y_numeric=True,
                reset=reset,
                ensure_all_finite=finite,
            )
        return X, y, len(X)
    n_rows, n_features = X.shape
    if np.isnan(n_rows):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    if finite:
        # Read before anything is released or charged (the 'auto' bounds are
        # released before the rows are encoded): one pass on the workers.
        import dask
        import dask.array as da

        finite_x, finite_y = dask.compute(da.isfinite(X).all(), da.isfinite(y).all())
        if not (finite_x and finite_y):
            raise ValueError(f"Input {'X' if not finite_x else 'y'} contains NaN or infinity.")
    if reset:
        estimator.__dict__.pop("feature_names_in_", None)
        estimator.n_features_in_ = int(n_features)
    elif n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )
    return X, y, int(n_rows)
