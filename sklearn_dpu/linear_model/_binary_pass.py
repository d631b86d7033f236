"""The summed binary log loss of fixed rows, in one fused pass per evaluation.

The solvers of :class:`DPLogisticRegression` evaluate the summed loss of
:class:`~._losses.LinearModelLoss` (binary :class:`~._losses.LogLoss`) many
times on the *same* normalized rows ``A`` and labels ``y``. The generic path
reads ``A`` twice per evaluation (``A @ theta``, then ``A.T @ D``), recomputes
the signs of the labels and allocates several ``n``-long temporaries, and
evaluates ``log_expit`` and ``expit`` separately. :class:`BinaryLogLossPass`
prepares the signs once, then evaluates block by block: a block of rows is
read from memory once (its margins and its back-projection use it while it is
in cache), and one exponential per row gives the loss and its derivative.

With the margin ``m = s z`` (``s`` the label's sign) and ``e = exp(-|m|)``
(in ``(0, 1]``, no overflow):

* ``log(1 + exp(-m)) = max(-m, 0) + log(1 + e)``;
* ``dl/dz = -s expit(-m)`` with ``expit(-m) = e / (1 + e)`` for ``m >= 0``
  and ``1 / (1 + e)`` otherwise.

``sum_i log(1 + e_i)`` is summed from ``log1p(e_i)``, one per row. (A
logarithm of products of 512 factors, one multiplication per row, was
tried: its rounding, far below the value's scale, still exceeded the
value changes an Armijo line search compares when the constrained solve
runs its inner problems at ``1e-3`` of the tolerance, and Newton then ran
to its step limit: 25 to 100 times slower.)

The results equal the generic path's to rounding (a few ulps: the sums are
accumulated block by block), which ``tests/test_binary_pass.py`` checks. The
constants of the loss (and so every sensitivity) are those of
:class:`~._losses.LogLoss`; nothing here touches privacy.
"""

from collections.abc import Iterator
from typing import Any

import numpy as np

from .._row_threads import sum_over_row_ranges
from ._losses import LinearModelLoss, LogLoss

__all__ = ["BinaryLogLossPass", "ZeroHessianCache", "fused_pass", "fuses"]

# Bytes of rows per block: a block stays in cache between its margins and its
# back-projection (2 MiB measured best at p = 11, 101 and 501 on a 1 MiB L2).
_BLOCK_BYTES = 1 << 21
_MIN_ROWS, _MAX_ROWS = 512, 32768
# Columns from which the Newton matrix is formed in single precision (below,
# the cast of each block costs more than the faster rank-k update saves).
_SINGLE_HESSIAN_COLUMNS = 32


def block_rows(block_bytes: int, row_bytes: int) -> int:
    """Rows per block of a fused pass: ``block_bytes`` of rows and scratch,
    within ``[512, 32768]``."""
    return int(np.clip(block_bytes // max(row_bytes, 1), _MIN_ROWS, _MAX_ROWS))


def row_blocks(n: int, rows: int, offset: int = 0) -> Iterator[tuple[slice, int]]:
    """``(slice, length)`` of the consecutive blocks of ``rows`` rows of ``n``,
    the slices shifted by ``offset`` (the blocks of a row range).

    >>> list(row_blocks(5, 2, offset=10))
    [(slice(10, 12, None), 2), (slice(12, 14, None), 2), (slice(14, 15, None), 1)]
    """
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        yield slice(offset + start, offset + stop), stop - start


class BinaryLogLossPass:
    """Summed binary log loss and gradient over fixed dense rows, one pass each.

    Parameters
    ----------
    A : ndarray of shape (n, p)
        Dense rows (a strided view is read in place, never copied).
    y : ndarray of shape (n,)
        Labels: 1 is the positive class, any other value the negative one
        (as :class:`~._losses.LogLoss`).
    """

    def __init__(self, A: np.ndarray, y: np.ndarray):
        self.A = A
        n, p = A.shape
        self._signs = np.where(np.asarray(y) == 1, 1.0, -1.0)
        self._rows = block_rows(_BLOCK_BYTES, 8 * p)
        # Curvatures expit(m) expit(-m) of the last value_and_grad, for a
        # Hessian at the same point without recomputing the margins.
        self._curvature = np.empty(n)
        self._curvature_at = None

    def _summed(self, fn):
        """``fn(start, stop)`` summed over the row ranges of
        :func:`sklearn_dpu._row_threads.sum_over_row_ranges`."""
        return sum_over_row_ranges(fn, self.A.shape[0], self.A.shape[1])

    def _scratch(self, start, stop, count):
        return [np.empty(min(self._rows, stop - start)) for _ in range(count)]

    def _block(self, block, k, theta, scratch):
        """Fill ``w`` with ``expit(-m)`` of the block's margins ``m``, return
        the block's summed loss and keep the block's curvatures
        ``expit(m) expit(-m) = e / (1 + e)^2``."""
        A, s = self.A[block], self._signs[block]
        m, e, w, negative = (array[:k] for array in scratch)
        np.matmul(A, theta, out=m)
        np.multiply(m, s, out=m)
        np.abs(m, out=e)
        np.negative(e, out=e)
        np.exp(e, out=e)
        total = -float(np.minimum(m, 0.0, out=w).sum())
        total += float(np.log1p(e, out=w).sum())
        np.add(e, 1.0, out=w)
        np.divide(1.0, w, out=w)
        np.multiply(e, w, out=e)
        np.multiply(e, w, out=self._curvature[block])
        # expit(-m) is e / (1 + e) (now in ``e``) for m >= 0 and 1 / (1 + e)
        # (``w``) otherwise: max(e, w [m < 0]) selects it exactly, since
        # 0 <= e <= w (e = e_0 w with e_0 <= 1) and w [m >= 0] is 0. Four
        # plain ufuncs are ~10x faster than a masked copy (``where=``).
        np.less(m, 0.0, out=negative)
        np.multiply(w, negative, out=w)
        np.maximum(e, w, out=w)
        np.multiply(w, s, out=w)  # -dl/dz
        return A, w, total

    def _value_and_grad_range(self, theta, start, stop):
        grad = np.zeros(self.A.shape[1])
        value = 0.0
        scratch = self._scratch(start, stop, 4)
        for block, k in row_blocks(stop - start, self._rows, start):
            A, w, total = self._block(block, k, theta, scratch)
            value += total
            grad -= w @ A
        return value, grad

    def value_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed loss and its gradient at ``theta``."""
        self._curvature_at = None
        value, grad = self._summed(
            lambda start, stop: self._value_and_grad_range(theta, start, stop)
        )
        self._curvature_at = np.array(theta, dtype=float)
        return value, grad

    def hessian(self, theta: np.ndarray, stride: int = 1) -> np.ndarray:
        """Dense Hessian ``sum_i expit(m_i) expit(-m_i) a_i a_i^T`` at ``theta``,
        to single precision from ``_SINGLE_HESSIAN_COLUMNS`` columns.

        The matrix only chooses a Newton step: the solver certifies its point
        by the gradient, computed in double precision, so the precision of
        this matrix changes how fast the steps converge, never what is
        certified. From 32 columns each block's (weighted) rows are cast to
        float32 and their rank-k update is a single-precision ``syrk``,
        accumulated in float64 across blocks: 1.4 to 1.6 times faster at
        p = 50 to 128 (n = 1e5, one thread), relative error ~6e-8, and the
        same number of Newton steps on the solver benchmark's data. A matrix
        that overflows single precision (rows far outside the estimators'
        unit ball) is formed again in double precision.

        With ``stride > 1`` the matrix is estimated from every ``stride``-th
        row (rows ``0, stride, 2 stride, ...``: a fixed rule, no randomness),
        its sum scaled by ``n / m`` for the ``m`` rows read: a subsampled
        Newton matrix (Roosta-Khorasani and Mahoney 2019), for the same
        reason the precision may be lowered.

        Blockwise ``W^T W`` with ``W`` the rows scaled by the square roots of
        their curvatures (a symmetric rank-k update), summed over the row
        ranges of :func:`~sklearn_dpu._row_threads.sum_over_row_ranges` (a
        threaded BLAS barely speeds up these thin rank-k updates: measured at
        n = 1e5, p = 101 on 2 cores, 43 ms on 2 BLAS threads against 46 ms on
        one; two row ranges split them); the curvatures of the last
        :meth:`value_and_grad` are reused when ``theta`` is its point. At
        ``theta = 0``, where the solvers start, every curvature is ``1/4``
        and the Hessian is formed as ``A^T A / 4`` instead, without weighting
        the rows (the same values; see the code for when the same bits).
        """
        theta = np.asarray(theta, dtype=float)
        if theta.shape == (self.A.shape[1],) and not np.any(theta):
            # Every margin is 0 and every curvature expit(0) expit(-0) = 1/4:
            # the Hessian is A^T A / 4, formed without the margins and
            # without a weighted copy of each block (that copy took 13 of
            # 44 ms at n = 1e5, p = 101, one thread). The weights
            # sqrt(1/4) = 1/2 and the final 1/4 are powers of two, so when
            # BLAS forms both products (rows of unit column stride, as the
            # estimators' normalized rows) and no product over- or
            # underflows, these are the weighted pass's bits, which
            # tests/test_binary_pass.py checks. Rows of another column stride
            # (NumPy's own product) agree to rounding; rows near 1e154, far
            # outside the estimators' unit ball, can overflow A^T A.
            H = self._in_precision(self._gram_range, stride)
            H *= 0.25
            return H
        if self._curvature_at is None or not np.array_equal(theta, self._curvature_at):
            self.value_and_grad(theta)
        return self._in_precision(self._hessian_range, stride)

    def _in_precision(self, range_fn, stride: int = 1) -> np.ndarray:
        """``range_fn(rows, curvatures, dtype, start, stop)`` summed over the
        row ranges of every ``stride``-th row (scaled by ``n / m``), in
        single precision from ``_SINGLE_HESSIAN_COLUMNS`` columns (double if
        that overflows)."""
        n, p = self.A.shape
        rows, curvatures = self.A[::stride], self._curvature[::stride]
        m = rows.shape[0]

        def summed(dtype):
            H = sum_over_row_ranges(
                lambda start, stop: range_fn(rows, curvatures, dtype, start, stop), m, p
            )
            if m != n:
                H *= n / m
            return H

        if p >= _SINGLE_HESSIAN_COLUMNS:
            H = summed(np.float32)
            if np.all(np.isfinite(H)):
                return H
        return summed(np.float64)

    def _gram_range(self, rows, curvatures, dtype, start, stop):
        p = rows.shape[1]
        G = np.zeros((p, p))
        cast = None if dtype == np.float64 else np.empty((min(self._rows, stop - start), p), dtype)
        for block, k in row_blocks(stop - start, self._rows, start):
            part = rows[block]
            if cast is not None:
                part = cast[:k]
                part[...] = rows[block]
            G += part.T @ part
        return G

    def _hessian_range(self, rows, curvatures, dtype, start, stop):
        p = rows.shape[1]
        H = np.zeros((p, p))
        scaled = np.empty((min(self._rows, stop - start), p), dtype)
        (root,) = self._scratch(start, stop, 1)
        for block, k in row_blocks(stop - start, self._rows, start):
            np.sqrt(curvatures[block], out=root[:k])
            # The same products as ``A * root[:, None]`` (one multiplication
            # each, so bit for bit, then rounded to ``dtype``), written by
            # einsum's row-scaling loop: 1.3 to 1.5 times faster on the
            # strided rows at p = 11 to 501.
            W = np.einsum("ij,i->ij", rows[block], root[:k], out=scaled[:k], casting="same_kind")
            H += W.T @ W
        return H

    def _gradient_range(self, theta, start, stop):
        # dl/dz = expit(z) - y = (tanh(z / 2) - s) / 2 for the label's sign s:
        # one tanh per row (a third of expit's time, measured at n = 1e5) and
        # one subtraction, the halvings exact (powers of two) and moved out of
        # the rows' loop, onto theta and the summed gradient. Where the
        # gradient is small (1 - tanh near 0) its absolute error is an ulp of
        # 1, not of the value: noisy steps, whose noise is many orders above
        # that, are its only callers. |tanh - s| <= 2, so a row's term keeps
        # the loss's bound |dl/dz| <= 1 whatever the margin.
        half = 0.5 * np.asarray(theta, dtype=float)
        grad = np.zeros(self.A.shape[1])
        (m_all,) = self._scratch(start, stop, 1)
        for block, k in row_blocks(stop - start, self._rows, start):
            A, m = self.A[block], m_all[:k]
            np.matmul(A, half, out=m)
            np.tanh(m, out=m)
            np.subtract(m, self._signs[block], out=m)
            grad += m @ A
        grad *= 0.5
        return grad

    def gradient(self, theta: np.ndarray) -> np.ndarray:
        """Gradient of the summed loss only: one ``tanh`` per margin, no loss
        value, no curvature (the steps of noisy GD and Langevin). Accurate to
        an ulp of 1 per row (absolute), not relative to a small gradient."""
        return self._summed(lambda start, stop: self._gradient_range(theta, start, stop))


class ZeroHessianCache:
    """The summed binary log loss's Hessian at ``theta = 0``, formed once for
    several solves on the same rows.

    At ``theta = 0`` every margin is 0 and every row's curvature is
    ``expit(0) expit(-0) = 1/4`` exactly, whatever its label: the
    one-vs-rest solves of objective perturbation (the same rows, other
    labels, each from zero) would each form this same matrix, bit for bit.
    The first one to need it forms it (:meth:`BinaryLogLossPass.hessian`);
    the others read a copy.

    Attributes
    ----------
    matrix : ndarray of shape (p, p) or None
        The Hessian, once formed.
    """

    def __init__(self):
        self.matrix = None
        self.stride = 1

    def hessian(self, fused: BinaryLogLossPass, theta: np.ndarray, stride: int = 1) -> np.ndarray:
        """``fused.hessian(theta, stride)``, from the cache when ``theta`` is 0
        (a copy: the solvers add their ridge to it in place)."""
        if np.any(theta):
            return fused.hessian(theta, stride)
        if self.matrix is None or self.stride != stride:
            self.matrix, self.stride = fused.hessian(theta, stride), stride
        return self.matrix.copy()


def fused_pass(loss: LinearModelLoss, A: Any, y: np.ndarray) -> BinaryLogLossPass | None:
    """A :class:`BinaryLogLossPass` for ``loss`` on ``(A, y)``, or ``None`` where
    it does not apply (multiclass, another loss, sparse or non-float64 rows,
    a subclass overriding ``value_and_grad`` or ``gradient``: the generic
    :meth:`~._losses.LinearModelLoss.value_and_grad` then)."""
    if not fuses(loss):
        return None
    if not isinstance(A, np.ndarray) or A.ndim != 2 or A.dtype != np.float64:
        return None
    if A.shape[0] == 0:
        return None
    return BinaryLogLossPass(A, y)


def fuses(loss: LinearModelLoss) -> bool:
    """Whether ``loss`` has the fused pass on dense float64 rows: the binary
    log loss, its evaluation and gradient not overridden (a subclass keeps
    its own)."""
    return (
        loss.binary
        and isinstance(loss.base_loss, LogLoss)
        and type(loss).value_and_grad is LinearModelLoss.value_and_grad
        and type(loss).gradient is LinearModelLoss.gradient
    )
