"""Logistic and softmax losses of GLMs, with the constants their privacy proofs use.

Every function here works on *normalized rows* ``a`` (features clipped to a
public norm and divided by it, then the intercept column) whose Euclidean norm
is at most a public ``row_norm``. Losses are **summed** over rows, not
averaged: under the add/remove-one relation the number of rows is private, so
sensitivities are stated for sums (digest ``diss_dp.md`` §4, A9).

Constants (``G`` = bound on a record's gradient, ``beta`` = bound on the
largest eigenvalue of a record's Hessian, both for every parameter value):

* binary logistic ``log(1 + exp(-s <theta, a>))``, ``s`` in {-1, +1}:
  gradient ``-s sigmoid(-s <theta, a>) a``, so ``G = row_norm``; Hessian
  ``sigmoid(m) sigmoid(-m) a a^T`` with ``sigmoid(m) sigmoid(-m) <= 1/4``, so
  ``beta = row_norm^2 / 4``. The loss at ``theta = 0`` is ``ln 2``
  (dissertation, seed 000, line 427 and digest §5.1: ``G = 1, H = 1/4`` for
  the link, times ``||X||`` and ``||X||^2``).
* multinomial softmax ``log sum_k exp(<theta_k, a>) - <theta_y, a>`` with
  ``theta`` a ``K x p`` matrix (re-derived here; the dissertation covers binary
  GLMs only, digest §4 A2): the gradient is ``(p - e_y) a^T`` with ``p`` the
  softmax probabilities, whose Frobenius norm is
  ``||p - e_y|| ||a|| <= sqrt(2) ||a||`` because
  ``||p - e_y||^2 = (1 - p_y)^2 + sum_{k != y} p_k^2 <= 2 (1 - p_y)^2``; so
  ``G = sqrt(2) row_norm``, attained as ``p -> e_j``, ``j != y``. The Hessian
  is ``(diag(p) - p p^T) (x) a a^T`` and ``diag(p) - p p^T <= I / 2``
  (Böhning's bound), so ``beta = row_norm^2 / 2``. The loss at zero is
  ``ln K``. These are the values in digest ``descent_to_delete.md`` §6.

This module serves the solvers of :class:`DPLogisticRegression`, which need
summed values, Hessians and flattened parameters. The SGD of
:class:`UnlearnableSGDClassifier` needs only per-row margin gradients and more
losses (hinge, modified Huber): those live in :mod:`._margin_losses`, with the
same logistic and softmax constants.
"""

import numpy as np
from scipy.special import expit, log_expit, logsumexp

__all__ = [
    "GLMLoss",
    "binary_logistic_loss",
    "softmax_loss",
]


class GLMLoss:
    """A summed GLM loss with its constants, over flattened parameters.

    Parameters
    ----------
    n_classes : int
        2 for the binary logistic loss (one coefficient vector), ``K >= 3``
        for the softmax loss (``K`` vectors).
    n_coef : int
        Length ``p`` of one coefficient vector (features + intercept).
    row_norm : float
        Public bound on ``||a||``.

    Attributes
    ----------
    n_params : int
        ``p`` (binary) or ``K p`` (softmax).
    lipschitz : float
        ``G``, bound on the norm of one record's gradient.
    smoothness : float
        ``beta``, bound on the largest eigenvalue of one record's Hessian.
    loss_at_zero : float
        ``ln 2`` or ``ln K``.
    """

    def __init__(self, n_classes: int, n_coef: int, row_norm: float):
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        self.n_classes = int(n_classes)
        self.n_coef = int(n_coef)
        self.row_norm = float(row_norm)
        self.binary = self.n_classes == 2
        if self.binary:
            self.n_params = self.n_coef
            self.lipschitz = self.row_norm
            self.smoothness = self.row_norm**2 / 4.0
            self.loss_at_zero = float(np.log(2.0))
        else:
            self.n_params = self.n_classes * self.n_coef
            self.lipschitz = float(np.sqrt(2.0)) * self.row_norm
            self.smoothness = self.row_norm**2 / 2.0
            self.loss_at_zero = float(np.log(self.n_classes))

    # The three functions below take ``y``: signs in {-1, +1} (binary) or class
    # indices (softmax), as returned by :meth:`encode_labels`.

    def encode_labels(self, y_index: np.ndarray) -> np.ndarray:
        """Class indices to what the loss uses (signs for the binary loss)."""
        y_index = np.asarray(y_index)
        if self.binary:
            return np.where(y_index == 1, 1.0, -1.0)
        return y_index.astype(np.intp)

    def value_and_grad(self, theta, A, y):
        """Summed loss and its gradient (flattened)."""
        if self.binary:
            return binary_logistic_loss(theta, A, y)
        return softmax_loss(theta, A, y, self.n_classes)

    def gradient(self, theta, A, y) -> np.ndarray:
        """Gradient of the summed loss only (no loss value: cheaper)."""
        if self.binary:
            return A.T @ (-y * expit(-y * (A @ theta)))
        K, p = self.n_classes, self.n_coef
        P = _softmax(A @ theta.reshape(K, p).T)
        P[np.arange(len(y)), y] -= 1.0
        return (P.T @ A).ravel()

    def hessian_operator(self, theta, A, y):
        """A function ``v -> H v`` for the Hessian of the summed loss at ``theta``."""
        if self.binary:
            m = y * (A @ theta)
            weights = expit(m) * expit(-m)
            return lambda v: A.T @ (weights * (A @ v))
        K, p = self.n_classes, self.n_coef
        P = _softmax(A @ theta.reshape(K, p).T)

        def hvp(v):
            Zv = A @ v.reshape(K, p).T
            R = P * (Zv - np.sum(P * Zv, axis=1, keepdims=True))
            return (R.T @ A).ravel()

        return hvp

    def hessian(self, theta, A, y) -> np.ndarray:
        """Dense Hessian of the summed loss (``n_params x n_params``)."""
        if self.binary:
            m = y * (A @ theta)
            weights = expit(m) * expit(-m)
            return A.T @ (A * weights[:, None])
        K, p = self.n_classes, self.n_coef
        P = _softmax(A @ theta.reshape(K, p).T)
        H = np.empty((K, p, K, p))
        for k in range(K):
            for j in range(k, K):
                w = P[:, k] * ((k == j) - P[:, j])
                block = A.T @ (A * w[:, None])
                H[k, :, j, :] = block
                H[j, :, k, :] = block.T
        return H.reshape(K * p, K * p)

    def per_example_grads(self, theta, A, y) -> np.ndarray:
        """Gradients of each row's loss, shape ``(n, n_params)``."""
        if self.binary:
            m = y * (A @ theta)
            return (-y * expit(-m))[:, None] * A
        K, p = self.n_classes, self.n_coef
        P = _softmax(A @ theta.reshape(K, p).T)
        P[np.arange(len(y)), y] -= 1.0
        return (P[:, :, None] * A[:, None, :]).reshape(len(y), K * p)

    def decision(self, theta, A) -> np.ndarray:
        """Margins: ``(n,)`` (binary) or ``(n, K)`` (softmax)."""
        if self.binary:
            return A @ theta
        return A @ theta.reshape(self.n_classes, self.n_coef).T


def _softmax(Z: np.ndarray) -> np.ndarray:
    Z = Z - Z.max(axis=1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


def binary_logistic_loss(theta: np.ndarray, A: np.ndarray, s: np.ndarray):
    """Summed ``log(1 + exp(-s <theta, a>))`` and its gradient.

    Parameters
    ----------
    theta : ndarray of shape (p,)
    A : ndarray of shape (n, p)
    s : ndarray of shape (n,)
        Labels in {-1, +1}.

    Returns
    -------
    value : float
    grad : ndarray of shape (p,)
    """
    m = s * (A @ theta)
    value = -float(np.sum(log_expit(m)))
    grad = A.T @ (-s * expit(-m))
    return value, grad


def softmax_loss(theta: np.ndarray, A: np.ndarray, y: np.ndarray, n_classes: int):
    """Summed multinomial cross-entropy and its gradient.

    Parameters
    ----------
    theta : ndarray of shape (n_classes * p,)
        Row-major ``K x p`` coefficient matrix.
    A : ndarray of shape (n, p)
    y : ndarray of shape (n,)
        Class indices.
    n_classes : int

    Returns
    -------
    value : float
    grad : ndarray of shape (n_classes * p,)
    """
    K, p = n_classes, A.shape[1]
    Z = A @ theta.reshape(K, p).T
    rows = np.arange(len(y))
    value = float(np.sum(logsumexp(Z, axis=1) - Z[rows, y]))
    P = _softmax(Z)
    P[rows, y] -= 1.0
    return value, (P.T @ A).ravel()
