"""Losses of linear models, with the constants their privacy proofs use.

One family serves every linear estimator of the package: the ERM solvers of
:class:`DPLogisticRegression` (summed values, gradients, Hessians over
flattened parameters) and the SGD of :class:`UnlearnableSGDClassifier`
(per-record gradients of the margin).

Two layers, in the spirit of scikit-learn's ``sklearn._loss`` and
``sklearn.linear_model._linear_loss.LinearModelLoss``:

* a **pointwise margin loss** ``l(z, y)`` (:class:`LogLoss`, :class:`Hinge`,
  :class:`ModifiedHuber`) of the ``K`` scores ``z = W a`` of one row and its
  integer label code, with its data-independent constants
  (:class:`LossConstants`);
* :class:`LinearModelLoss`, the loss **summed** over rows of a linear model
  with flattened coefficients ``theta`` (``K p`` values), with the constants
  in ``theta`` on rows of norm at most a public ``row_norm``.

Rows ``a`` are *normalized*: features clipped to a public norm and divided by
it (or not, for the SGD), then the intercept feature. Losses are summed, not
averaged: under the add/remove-one relation the number of rows is private, so
sensitivities are stated for sums ([U24]_ Ch. 2, whose guarantees are for
summed objectives).

Binary problems have ``K = 1`` output and labels ``y in {0, 1}`` (``z > 0``
means class 1; signs ``y in {-1, +1}`` are accepted too); the sign ``s`` of
the label enters the binary losses. Multiclass
log loss is the multinomial (softmax) loss; multiclass hinge and modified
Huber are one-vs-rest sums, as in :class:`sklearn.linear_model.SGDClassifier`.

The constants (each stated once, in :meth:`MarginLoss.constants`)
-----------------------------------------------------------------
A record's gradient in ``W`` is ``D a^T`` with ``D = dl/dz``, so its Frobenius
norm is ``||D|| ||a||``; its Hessian is ``H_z (x) a a^T`` with ``H_z`` the
Hessian of ``l`` in ``z``, whose largest eigenvalue is that of ``H_z`` times
``||a||^2``. Hence, with ``r`` the public bound on ``||a||``:

* ``G = z_lipschitz * r`` bounds a record's gradient for every parameter value
  (the add/remove sensitivity of a gradient sum; no clipping needed);
* ``beta = z_smoothness * r^2`` bounds a record's Hessian (the smoothness that
  caps step sizes, ``eta <= 1 / (2 beta)`` in [U24]_ Prop. 7, and enters the
  Jacobian term of objective perturbation).

Per loss (derivations):

* binary logistic ``log(1 + exp(-s z))``: ``l' = -s sigmoid(-s z)``, so
  ``|l'| <= 1``; ``l'' = sigmoid(z) sigmoid(-z) <= 1/4`` (at ``z = 0``);
  ``l(0) = ln 2``. These are the constants ``G = 1``, ``H = 1/4`` of the
  logistic link in [U24]_ Ch. 2 (GLM assumptions), times ``||a||`` and
  ``||a||^2``.
* softmax cross-entropy ``logsumexp(z) - z_y`` (re-derived here; [U24]_
  covers binary GLMs only): ``dl/dz = p - e_y`` with ``p`` the softmax, and
  ``||p - e_y||^2 = (1 - p_y)^2 + sum_{k != y} p_k^2 <= 2 (1 - p_y)^2 <= 2``,
  so ``z_lipschitz = sqrt(2)`` (approached as ``p -> e_j``, ``j != y``). The
  Hessian ``diag(p) - p p^T <= I / 2`` (Böhning's bound [B92]_), so
  ``z_smoothness = 1/2`` (attained at ``p = (1/2, 1/2, 0, ...)``);
  ``l(0) = ln K``. Neel et al. [NRS21]_ use the same constants for
  regularized logistic regression.
* hinge ``max(0, 1 - s z)`` per output: ``|l'| <= 1`` per output, so
  ``z_lipschitz = sqrt(K)`` (the norm of ``K`` stacked bounds, attained when
  every output is inside its margin); not smooth (``z_smoothness = inf``);
  ``l(0) = K``.
* modified Huber ([Z04]_): ``max(0, 1 - s z)^2`` for ``s z >= -1``, else
  ``-4 s z``, per output: ``|l'| <= 4`` (``|2 (1 - m)| <= 4`` on
  ``m in [-1, 1]``, ``4`` below), so ``z_lipschitz = 4 sqrt(K)``;
  ``l'' in {0, 2}``, so ``z_smoothness = 2``; ``l(0) = K``.

``tests/test_losses.py`` checks every constant numerically (random search and
finite differences), with a halved constant as negative control.

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024.
.. [B92] D. Böhning, "Multinomial logistic regression algorithm", Annals of
   the Institute of Statistical Mathematics 44(1), 1992.
.. [NRS21] S. Neel, A. Roth and S. Sharifi-Malvajerdi, "Descent-to-Delete:
   gradient-based methods for machine unlearning", ALT 2021.
.. [Z04] T. Zhang, "Solving large scale linear prediction problems using
   stochastic gradient descent algorithms", ICML 2004.
.. [ZE02] B. Zadrozny and C. Elkan, "Transforming classifier scores into
   accurate multiclass probability estimates", KDD 2002.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit, logsumexp

from ._sparse_rows import dense_rows, weighted_gram

__all__ = [
    "LOSSES",
    "Hinge",
    "LinearModelLoss",
    "LogLoss",
    "LossConstants",
    "MarginLoss",
    "ModifiedHuber",
    "get_loss",
]


@dataclass(frozen=True)
class LossConstants:
    """Data-independent constants of a margin loss with ``K`` outputs.

    Attributes
    ----------
    z_lipschitz : float
        Bound on ``||dl/dz||_2`` for every ``z`` and label.
    z_smoothness : float
        Bound on the operator norm of the Hessian of ``l`` in ``z``
        (``inf`` for a non-smooth loss).
    value_at_zero : float
        ``l(0, y)``, the same for every label.
    """

    z_lipschitz: float
    z_smoothness: float
    value_at_zero: float


def _binary_dz(s: np.ndarray, margin: np.ndarray) -> np.ndarray:
    """``-s * expit(-margin)`` for ``margin = s * z``, computed in place in
    ``s`` and ``margin`` (consumed): the operations of ``-s * expit(-s * z)``
    (``-(s z)`` is ``(-s) z`` exactly), hence its bits, with no temporary."""
    D = expit(np.negative(margin, out=margin), out=margin)
    return np.multiply(np.negative(s, out=s), D, out=D)


def _signs(y: np.ndarray, n_outputs: int) -> np.ndarray:
    """+1 / -1 targets of shape (n, K): binary (K = 1) or one-vs-rest.

    Binary labels may be codes in {0, 1} or signs in {-1, +1}: 1 is +1, any
    other value -1.
    """
    if n_outputs == 1:
        return np.where(y == 1, 1.0, -1.0)[:, None]
    signs = -np.ones((len(y), n_outputs))
    signs[np.arange(len(y)), y] = 1.0
    return signs


def _softmax(Z: np.ndarray) -> np.ndarray:
    Z = Z - Z.max(axis=1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


@dataclass(frozen=True)
class MarginLoss:
    """A loss of the scores ``Z`` (n, K) of rows and their integer label codes."""

    name = ""
    has_proba = False

    def constants(self, n_outputs: int) -> LossConstants:
        """The constants for ``n_outputs`` scores (see the module docstring)."""
        raise NotImplementedError

    def z_lipschitz(self, n_outputs: int) -> float:
        """Bound on ``||dl/dz||``: :attr:`LossConstants.z_lipschitz`."""
        return self.constants(n_outputs).z_lipschitz

    def z_smoothness(self, n_outputs: int) -> float:
        """Bound on the Hessian in ``z``: :attr:`LossConstants.z_smoothness`."""
        return self.constants(n_outputs).z_smoothness

    def value(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-row loss values, shape (n,)."""
        raise NotImplementedError

    def dz(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``dl/dz`` for each row: ``Z`` of shape (n, K), ``y`` int codes (n,)."""
        raise NotImplementedError

    def value_and_dz(self, Z: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(value(Z, y), dz(Z, y))``; a loss may share their work."""
        return self.value(Z, y), self.dz(Z, y)

    def hessian_z(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Hessians in ``z`` of each row, shape (n, K, K)."""
        raise NotImplementedError(f"{self.name} has no Hessian here")

    def hessian_z_operator(
        self, Z: np.ndarray, y: np.ndarray
    ) -> Callable[[np.ndarray], np.ndarray]:
        """A function ``V -> (H_z v_i)_i`` for directions ``V`` of shape (n, K)."""
        raise NotImplementedError(f"{self.name} has no Hessian here")


@dataclass(frozen=True)
class LogLoss(MarginLoss):
    """Binary logistic loss (K = 1), or multinomial cross-entropy for K >= 3."""

    name = "log_loss"
    has_proba = True

    def constants(self, n_outputs: int) -> LossConstants:
        if n_outputs == 1:
            return LossConstants(1.0, 0.25, float(np.log(2.0)))
        return LossConstants(math.sqrt(2.0), 0.5, float(np.log(n_outputs)))

    def value(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if Z.shape[1] == 1:
            return -log_expit(_signs(y, 1) * Z)[:, 0]
        return logsumexp(Z, axis=1) - Z[np.arange(len(y)), y]

    def dz(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if Z.shape[1] == 1:
            s = _signs(y, 1)
            return _binary_dz(s, s * Z)
        D = _softmax(Z)
        D[np.arange(len(y)), y] -= 1.0
        return D

    def value_and_dz(self, Z: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if Z.shape[1] != 1:
            return self.value(Z, y), self.dz(Z, y)
        # Binary: the signs and margins once, for both.
        s = _signs(y, 1)
        margin = s * Z
        values = log_expit(margin[:, 0])
        return np.negative(values, out=values), _binary_dz(s, margin)

    def hessian_z(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if Z.shape[1] == 1:
            m = _signs(y, 1) * Z
            return (expit(m) * expit(-m))[:, :, None]
        P = _softmax(Z)
        return P[:, :, None] * (np.eye(Z.shape[1])[None] - P[:, None, :])

    def hessian_z_operator(
        self, Z: np.ndarray, y: np.ndarray
    ) -> Callable[[np.ndarray], np.ndarray]:
        if Z.shape[1] == 1:
            m = _signs(y, 1) * Z
            weights = expit(m) * expit(-m)
            return lambda V: weights * V
        P = _softmax(Z)
        return lambda V: P * (V - np.sum(P * V, axis=1, keepdims=True))

    @staticmethod
    def proba(Z: np.ndarray) -> np.ndarray:
        if Z.shape[1] == 1:
            p = expit(Z[:, 0])
            return np.column_stack([1.0 - p, p])
        return _softmax(Z)


@dataclass(frozen=True)
class Hinge(MarginLoss):
    """``max(0, 1 - s z)`` (one-vs-rest for K >= 3); not smooth."""

    name = "hinge"

    def constants(self, n_outputs: int) -> LossConstants:
        return LossConstants(math.sqrt(n_outputs), math.inf, float(n_outputs))

    def value(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, 1.0 - _signs(y, Z.shape[1]) * Z).sum(axis=1)

    def dz(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        s = _signs(y, Z.shape[1])
        return -s * (s * Z < 1.0)


@dataclass(frozen=True)
class ModifiedHuber(MarginLoss):
    """Smoothed hinge: ``max(0, 1 - sz)^2`` for ``sz >= -1``, else ``-4 sz``."""

    name = "modified_huber"
    has_proba = True

    def constants(self, n_outputs: int) -> LossConstants:
        return LossConstants(4.0 * math.sqrt(n_outputs), 2.0, float(n_outputs))

    def value(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        m = _signs(y, Z.shape[1]) * Z
        return np.where(m >= -1.0, np.maximum(0.0, 1.0 - m) ** 2, -4.0 * m).sum(axis=1)

    def dz(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        s = _signs(y, Z.shape[1])
        m = s * Z
        return np.where(m >= -1.0, -2.0 * s * np.maximum(0.0, 1.0 - m), -4.0 * s)

    @staticmethod
    def proba(Z: np.ndarray) -> np.ndarray:
        # As SGDClassifier.predict_proba: (clip(z, -1, 1) + 1) / 2 per class,
        # then normalized (Zadrozny and Elkan, [ZE02]_); rows with all zeros
        # get the uniform distribution.
        if Z.shape[1] == 1:
            p = (np.clip(Z[:, 0], -1.0, 1.0) + 1.0) / 2.0
            return np.column_stack([1.0 - p, p])
        P = (np.clip(Z, -1.0, 1.0) + 1.0) / 2.0
        total = P.sum(axis=1, keepdims=True)
        uniform = total[:, 0] == 0
        P[uniform] = 1.0
        total[uniform] = Z.shape[1]
        return P / total


LOSSES = {loss.name: loss for loss in (LogLoss(), Hinge(), ModifiedHuber())}


def get_loss(name: str) -> MarginLoss:
    """The loss object for a ``loss=`` parameter value."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; expected one of {sorted(LOSSES)}") from None


@dataclass(frozen=True)
class LinearModelLoss:
    """A margin loss summed over the rows of a linear model, over flattened parameters.

    Parameters ``theta`` are the row-major ``K x p`` coefficient matrix,
    flattened (``K = 1`` for two classes). Labels are integer class codes, as
    returned by :meth:`encode_labels`.

    Parameters
    ----------
    n_classes : int
        2 for a binary problem (one coefficient vector), ``K >= 3`` otherwise
        (``K`` vectors).
    n_coef : int
        Length ``p`` of one coefficient vector (features + intercept).
    row_norm : float
        Public bound on ``||a||``.
    base_loss : MarginLoss, default=LogLoss()
        The pointwise loss; the Hessian methods need one that has a Hessian.

    Attributes
    ----------
    n_outputs, n_params : int
        ``K`` (1 when binary) and ``K p``.
    lipschitz : float
        ``G = z_lipschitz r``, bound on the norm of one record's gradient.
    smoothness : float
        ``beta = z_smoothness r^2``, bound on the largest eigenvalue of one
        record's Hessian.
    loss_at_zero : float
        A record's loss at ``theta = 0``.
    """

    n_classes: int
    n_coef: int
    row_norm: float
    base_loss: MarginLoss = LogLoss()

    def __post_init__(self):
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {self.n_classes}")
        object.__setattr__(self, "n_classes", int(self.n_classes))
        object.__setattr__(self, "n_coef", int(self.n_coef))
        object.__setattr__(self, "row_norm", float(self.row_norm))

    # ------------------------------------------------------------ constants

    @property
    def binary(self) -> bool:
        return self.n_classes == 2

    @property
    def n_outputs(self) -> int:
        return 1 if self.binary else self.n_classes

    @property
    def n_params(self) -> int:
        return self.n_outputs * self.n_coef

    @property
    def constants(self) -> LossConstants:
        """The pointwise loss's constants in the margin (see the module docstring)."""
        return self.base_loss.constants(self.n_outputs)

    @property
    def z_smoothness(self) -> float:
        return self.constants.z_smoothness

    @property
    def lipschitz(self) -> float:
        return self.constants.z_lipschitz * self.row_norm

    @property
    def smoothness(self) -> float:
        return self.constants.z_smoothness * self.row_norm**2

    @property
    def loss_at_zero(self) -> float:
        return self.constants.value_at_zero

    # --------------------------------------------------------------- values

    def encode_labels(self, y_index: np.ndarray) -> np.ndarray:
        """Class indices to the integer codes the loss uses."""
        return np.asarray(y_index).astype(np.intp)

    def decision(self, theta: np.ndarray, A: np.ndarray) -> np.ndarray:
        """Margins: ``(n,)`` (binary) or ``(n, K)``."""
        if self.binary:
            return A @ theta
        return A @ theta.reshape(self.n_classes, self.n_coef).T

    def _scores(self, theta, A) -> np.ndarray:
        # (n, K); binary margins as a matrix-vector product, then a column.
        Z = self.decision(theta, A)
        return Z[:, None] if self.binary else Z

    def _backproject(self, D: np.ndarray, A: np.ndarray) -> np.ndarray:
        # sum_i D_i a_i^T, flattened.
        if self.binary:
            return A.T @ D[:, 0]
        return (D.T @ A).ravel()

    def value_and_grad(
        self, theta: np.ndarray, A: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """Summed loss and its gradient (flattened)."""
        values, D = self.base_loss.value_and_dz(self._scores(theta, A), y)
        return float(np.sum(values)), self._backproject(D, A)

    def gradient(self, theta: np.ndarray, A: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Gradient of the summed loss only (no loss value: cheaper)."""
        return self._backproject(self.base_loss.dz(self._scores(theta, A), y), A)

    def per_example_grads(self, theta: np.ndarray, A: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Gradients of each row's loss, shape ``(n, n_params)``."""
        A = dense_rows(A)  # one batch of sparse rows: dense per-example gradients
        D = self.base_loss.dz(self._scores(theta, A), y)
        if self.binary:
            return D * A
        return (D[:, :, None] * A[:, None, :]).reshape(len(y), self.n_params)

    def hessian_operator(
        self, theta: np.ndarray, A: np.ndarray, y: np.ndarray
    ) -> Callable[[np.ndarray], np.ndarray]:
        """A function ``v -> H v`` for the Hessian of the summed loss at ``theta``."""
        hz = self.base_loss.hessian_z_operator(self._scores(theta, A), y)
        K, p = self.n_outputs, self.n_coef

        def hvp(v):
            if self.binary:
                return A.T @ hz((A @ v)[:, None])[:, 0]
            return (hz(A @ v.reshape(K, p).T).T @ A).ravel()

        return hvp

    def hessian(self, theta: np.ndarray, A: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Dense Hessian of the summed loss (``n_params x n_params``)."""
        Hz = self.base_loss.hessian_z(self._scores(theta, A), y)
        K, p = self.n_outputs, self.n_coef
        if self.binary:
            return weighted_gram(A, Hz[:, 0, 0])
        H = np.empty((K, p, K, p))
        for k in range(K):
            for j in range(k, K):
                block = weighted_gram(A, Hz[:, k, j])
                H[k, :, j, :] = block
                H[j, :, k, :] = block.T
        return H.reshape(K * p, K * p)
