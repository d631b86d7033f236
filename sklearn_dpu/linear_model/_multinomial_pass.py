"""The summed multinomial (softmax) log loss of fixed rows, one pass per evaluation.

The multiclass solvers of :class:`DPLogisticRegression` evaluate the summed
softmax cross-entropy of :class:`~._losses.LinearModelLoss` many times on the
*same* normalized rows ``A`` and class codes ``y``. The generic path works on
the ``(n, K)`` score matrix: its per-row reductions over ``K`` (a maximum, two
sums) and the library ``logsumexp`` run an inner loop of ``K`` elements per
row, and the softmax's exponentials are computed twice (once for the value,
once for the gradient): at ``K = 3`` and ``p = 11`` an evaluation of 1e5 rows
took 43 ms, 30 of them in ``logsumexp``.

:class:`MultinomialLogLossPass` evaluates block by block on the *transposed*
scores ``Z^T = Theta A_b^T`` (``K x k``, one contiguous row per class): the
reductions over classes are ``K - 1`` element-wise operations on rows of
``k`` values, each row's exponentials are taken once and serve the value and
the gradient, and the block of ``A`` is read from memory once (its scores and
its back-projection ``D^T A_b`` use it while it is in cache).

With ``c`` the largest score of a row, ``m`` the number of classes attaining
it and ``s`` the sum of ``exp(z_k - c)`` over the others (in ``[0, K - m]``),

* the loss is ``logsumexp(z) - z_y = log1p(s / m) + log(m) - (z_y - c)``,
  accurate where the loss is small (``s`` tiny), as ``scipy.special.logsumexp``;
* the gradient in ``z`` is ``p - e_y`` with ``p = exp(z - c) / (m + s)``.

The results equal the generic path's to rounding (the scores come from the
other orientation of the same products; the sums are accumulated block by
block), which ``tests/test_multinomial_pass.py`` checks. The constants of the
loss (and so every sensitivity) are those of :class:`~._losses.LogLoss`;
nothing here touches privacy.
"""

from collections.abc import Callable
from typing import Any

import numpy as np

from ._binary_pass import BinaryLogLossPass, block_rows, fused_pass, row_blocks
from ._losses import LinearModelLoss, LogLoss

__all__ = ["MultinomialLogLossPass", "evaluation_pass", "gradient_function", "multinomial_pass"]

# Bytes of rows and scores per block: as the binary pass, a block stays in
# cache between its scores and its back-projection.
_BLOCK_BYTES = 1 << 21


class MultinomialLogLossPass:
    """Summed softmax cross-entropy and its gradient over fixed dense rows.

    Parameters
    ----------
    A : ndarray of shape (n, p)
        Dense float64 rows (a strided view is read in place, never copied).
    y : ndarray of shape (n,)
        Class codes in ``0 .. n_classes - 1``.
    n_classes : int
        ``K >= 3``; the parameters are the row-major ``K x p`` matrix, flattened.
    """

    def __init__(self, A: np.ndarray, y: np.ndarray, n_classes: int):
        self.A = A
        n, p = A.shape
        self.n_classes = K = int(n_classes)
        self._y = np.asarray(y, dtype=np.intp)
        self._rows = block_rows(_BLOCK_BYTES, 8 * (p + 3 * K))
        size = min(self._rows, n)
        self._scores = np.empty(K * size)  # Z^T of a block, K rows of k values
        self._other = np.empty(K * size)
        self._row = [np.empty(size) for _ in range(3)]
        self._columns = np.arange(size)

    def _blocks(self):
        return row_blocks(self.A.shape[0], self._rows)

    def _probabilities(self, block, k, Theta, with_value):
        """Fill the block's ``K x k`` scratch with ``p - e_y``; return the
        block's rows of ``A`` and, if asked, its summed loss."""
        K = self.n_classes
        A = self.A[block]
        Z = self._scores[: K * k].reshape(K, k)
        np.matmul(Theta, A.T, out=Z)
        top, total, ties = (row[:k] for row in self._row)
        np.maximum(Z[0], Z[1], out=top)
        for j in range(2, K):
            np.maximum(top, Z[j], out=top)
        np.subtract(Z, top, out=Z)  # z - c: 0 at the largest scores, else < 0
        # Flat positions of the true classes in Z (row y_i, column i).
        true = self._y[block] * k + self._columns[:k]
        value = 0.0
        if with_value:
            value = -float(Z.ravel()[true].sum())  # sum of c - z_y
            other = self._other[: K * k].reshape(K, k)
            np.less(Z, 0.0, out=other)  # 1 off the largest scores, 0 on them
            np.sum(other, axis=0, out=ties)
            np.subtract(K, ties, out=ties)  # m: classes at the largest score
        np.exp(Z, out=Z)
        np.sum(Z, axis=0, out=total)  # m + s
        if with_value:
            np.multiply(Z, other, out=other)  # exp(z - c) off the largest only
            s = np.sum(other, axis=0, out=top)
            np.divide(s, ties, out=s)
            value += float(np.log1p(s, out=s).sum()) + float(np.log(ties, out=ties).sum())
        np.divide(Z, total, out=Z)
        Z.ravel()[true] -= 1.0
        return A, Z, value

    def value_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed loss and its gradient (flattened ``K x p``) at ``theta``."""
        Theta = np.asarray(theta, dtype=float).reshape(self.n_classes, -1)
        grad = np.zeros_like(Theta)
        value = 0.0
        for block, k in self._blocks():
            A, D, total = self._probabilities(block, k, Theta, True)
            value += total
            grad += D @ A
        return value, grad.ravel()

    def gradient(self, theta: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Gradient of the summed loss only (noisy GD's steps), or with
        ``weights`` (one per row) of ``sum_i w_i loss_i`` (the deletion
        fine-tune's, whose deleted rows weigh 0)."""
        Theta = np.asarray(theta, dtype=float).reshape(self.n_classes, -1)
        grad = np.zeros_like(Theta)
        for block, k in self._blocks():
            A, D, _ = self._probabilities(block, k, Theta, False)
            if weights is not None:
                np.multiply(D, weights[block], out=D)
            grad += D @ A
        return grad.ravel()


def multinomial_pass(loss: LinearModelLoss, A: Any, y: np.ndarray) -> MultinomialLogLossPass | None:
    """A :class:`MultinomialLogLossPass` for ``loss`` on ``(A, y)``, or ``None``
    where it does not apply (two classes, another loss, sparse or non-float64
    rows, a subclass overriding the evaluation: the generic
    :meth:`~._losses.LinearModelLoss.value_and_grad` then)."""
    if loss.binary or not isinstance(loss.base_loss, LogLoss):
        return None
    overridden = (
        type(loss).value_and_grad is not LinearModelLoss.value_and_grad
        or type(loss).gradient is not LinearModelLoss.gradient
    )
    if overridden or not isinstance(A, np.ndarray) or A.ndim != 2 or A.dtype != np.float64:
        return None
    if A.shape[0] == 0:
        return None
    return MultinomialLogLossPass(A, y, loss.n_classes)


def evaluation_pass(
    loss: LinearModelLoss, A: Any, y: np.ndarray
) -> BinaryLogLossPass | MultinomialLogLossPass | None:
    """The one-pass evaluation of the summed log loss on ``(A, y)``: binary
    (:func:`~._binary_pass.fused_pass`) or multinomial
    (:func:`multinomial_pass`), or ``None`` (the generic path; also for a
    loss that is not a :class:`~._losses.LinearModelLoss`, whose own
    ``gradient`` is then used)."""
    if not isinstance(loss, LinearModelLoss):
        return None
    fused = fused_pass(loss, A, y)
    return fused if fused is not None else multinomial_pass(loss, A, y)


def gradient_function(
    loss: LinearModelLoss, A: Any, y: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    """``theta -> gradient of the summed loss on (A, y)``: the one-pass
    evaluation's (:func:`evaluation_pass`) where it applies, else the
    loss's own ``gradient`` (the steps of noisy GD and of Langevin)."""
    evaluation = evaluation_pass(loss, A, y)
    if evaluation is None:
        return lambda theta: loss.gradient(theta, A, y)
    return evaluation.gradient
