"""Margin losses of linear classifiers, with the constants their privacy and
unlearning analyses need.

A linear classifier with ``K`` outputs scores a row ``x`` (already augmented
with its intercept feature) as ``z = W x`` with ``W`` of shape ``(K, p)``. A
loss ``l(z, y)`` gives the per-record gradient ``dl/dW = D (x)^T`` with
``D = dl/dz``, so ``||dl/dW||_F = ||D|| * ||x||``. Each loss below therefore
states two data-independent constants:

``z_lipschitz(K)``
    a bound on ``||dl/dz||_2`` for every ``z`` and label; times the public
    bound on ``||x||`` it is the Lipschitz constant ``G`` of the per-record
    loss in ``W``, i.e. the add/remove sensitivity of a sum of per-record
    gradients (no clipping of gradients is needed).
``z_smoothness(K)``
    a bound on the Hessian of ``l`` in ``z`` (operator norm); times
    ``||x||^2`` it is the smoothness ``H`` that caps the step size
    (``eta <= 1 / (2H)``, Ullah 2024, PhD thesis, Prop. 7). ``inf`` for the
    non-smooth hinge.

This module serves the SGD of :class:`UnlearnableSGDClassifier`; the ERM
solvers of :class:`DPLogisticRegression` use :mod:`._glm_losses` (summed
values, Hessians), with the same logistic and softmax constants.

Binary problems use ``K = 1`` and labels ``y in {0, 1}`` (``z > 0`` means class
1). Multiclass log loss is the multinomial (softmax) loss; multiclass hinge and
modified Huber are one-vs-rest sums, as in :class:`sklearn.linear_model.SGDClassifier`.

Constants: binary logistic ``|l'| <= 1``, ``l'' <= 1/4``; softmax cross-entropy
``||p - e_y|| <= sqrt(2)``, Hessian ``diag(p) - p p^T <= 1/2``; hinge
``|l'| <= 1``; modified Huber ``|l'| <= 4``, ``l'' <= 2``; one-vs-rest sums of
``K`` binary losses multiply the gradient bound by ``sqrt(K)`` ([derived]:
the norm of ``K`` stacked gradients).
"""

import math

import numpy as np
from scipy.special import expit, softmax

__all__ = ["LOSSES", "MarginLoss", "get_loss"]


class MarginLoss:
    """Base class: a loss of the margin ``z`` and an integer label code."""

    name = ""
    has_proba = False

    def dz(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``dl/dz`` for each row: ``Z`` of shape (n, K), ``y`` int codes (n,)."""
        raise NotImplementedError

    def value(self, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-row loss values, shape (n,)."""
        raise NotImplementedError

    def z_lipschitz(self, n_outputs: int) -> float:
        raise NotImplementedError

    def z_smoothness(self, n_outputs: int) -> float:
        raise NotImplementedError


def _signs(y: np.ndarray, n_outputs: int) -> np.ndarray:
    """+1 / -1 targets of shape (n, K): binary (K = 1) or one-vs-rest."""
    if n_outputs == 1:
        return (2.0 * y - 1.0)[:, None]
    signs = -np.ones((len(y), n_outputs))
    signs[np.arange(len(y)), y] = 1.0
    return signs


class LogLoss(MarginLoss):
    """Binary logistic loss, or multinomial cross-entropy for K >= 3."""

    name = "log_loss"
    has_proba = True

    def dz(self, Z, y):
        if Z.shape[1] == 1:
            s = _signs(y, 1)
            return -s * expit(-s * Z)
        D = softmax(Z, axis=1)
        D[np.arange(len(y)), y] -= 1.0
        return D

    def value(self, Z, y):
        if Z.shape[1] == 1:
            return np.logaddexp(0.0, -_signs(y, 1) * Z)[:, 0]
        top = Z.max(axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(Z - top).sum(axis=1))
        return lse - Z[np.arange(len(y)), y]

    def z_lipschitz(self, n_outputs):
        return 1.0 if n_outputs == 1 else math.sqrt(2.0)

    def z_smoothness(self, n_outputs):
        return 0.25 if n_outputs == 1 else 0.5

    @staticmethod
    def proba(Z: np.ndarray) -> np.ndarray:
        if Z.shape[1] == 1:
            p = expit(Z[:, 0])
            return np.column_stack([1.0 - p, p])
        return softmax(Z, axis=1)


class Hinge(MarginLoss):
    """``max(0, 1 - s z)`` (one-vs-rest for K >= 3); not smooth."""

    name = "hinge"

    def dz(self, Z, y):
        s = _signs(y, Z.shape[1])
        return -s * (s * Z < 1.0)

    def value(self, Z, y):
        return np.maximum(0.0, 1.0 - _signs(y, Z.shape[1]) * Z).sum(axis=1)

    def z_lipschitz(self, n_outputs):
        return math.sqrt(n_outputs)

    def z_smoothness(self, n_outputs):
        return math.inf


class ModifiedHuber(MarginLoss):
    """Smoothed hinge: ``max(0, 1 - sz)^2`` for ``sz >= -1``, else ``-4 sz``."""

    name = "modified_huber"
    has_proba = True

    def dz(self, Z, y):
        s = _signs(y, Z.shape[1])
        m = s * Z
        return np.where(m >= -1.0, -2.0 * s * np.maximum(0.0, 1.0 - m), -4.0 * s)

    def value(self, Z, y):
        m = _signs(y, Z.shape[1]) * Z
        return np.where(m >= -1.0, np.maximum(0.0, 1.0 - m) ** 2, -4.0 * m).sum(axis=1)

    def z_lipschitz(self, n_outputs):
        return 4.0 * math.sqrt(n_outputs)

    def z_smoothness(self, n_outputs):
        return 2.0

    @staticmethod
    def proba(Z: np.ndarray) -> np.ndarray:
        # As SGDClassifier: (clip(z, -1, 1) + 1) / 2 per class, then normalized
        # (Zhang 2001); rows with all zeros get the uniform distribution.
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
