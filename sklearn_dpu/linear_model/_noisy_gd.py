"""Projected noisy gradient descent for least squares (dissertation Alg. 1, Thm 8).

Ullah's dissertation [U24]_, Algorithm 1 with Theorem 8 and Corollary 3,
with these errata:

* the update uses the gradient (the algorithm as printed uses the loss);
* the loop runs ``t = 0 .. T-1`` from ``w_0 = 0`` and the output averages
  ``w_1 .. w_T`` (as printed the loop starts at ``t = 1``);
* the step size is ``min(D / (sqrt(T) max(sqrt(H~) ||Y||, sigma sqrt(p))),
  1 / (4 H~))`` (Theorem 8 as printed misplaces the square root; Cor. 3 caps
  the step at ``1 / (4 H ||X||)`` where ``1 / (4 H ||X||^2)`` is meant).

Privacy does not use the dissertation's constant: each step releases the *sum*
of per-record gradients plus Gaussian noise (add/remove relation, no public
``n``), the step normalization uses a separately noised count, and the noise
multipliers are calibrated so that the whole run composes exactly to the
target (epsilon, delta). Projection onto ``B(D)`` bounds each record's gradient
``2 (a.w - t) a`` by ``G = 2 r (r D + 1)`` with ``r = max ||a||`` (Lemma 2
of [U24]_ in its direct squared-loss form); privacy holds for any ``D``.

For squared loss the sum gradient is ``2 (A w - b)`` with ``A, b`` the exact
sufficient statistics, so a step costs O(p^2), not O(n p).

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization
   under data privacy considerations", PhD thesis, Johns Hopkins University,
   2024, Algorithm 1, Theorem 8, Lemma 2, Corollary 3.
"""

import numpy as np

from .._progress import step_ticker
from ..privacy.mechanisms import GaussianCount, GaussianSteps

__all__ = ["gd_mechanisms", "gd_noise_multipliers", "gradient_bound", "noisy_projected_gd"]

# Share of the privacy budget (in GDP precision) given to the record count.
_COUNT_SHARE = 0.1


def gd_noise_multipliers(total_multiplier: float, n_steps: int) -> tuple[float, float]:
    """Split a single-release noise multiplier between ``n_steps`` gradients and a count.

    ``1/total**2 = n_steps / m_grad**2 + 1 / m_count**2`` (exact Gaussian
    composition), with the count taking ``_COUNT_SHARE`` of it.
    """
    precision = total_multiplier**-2
    grad = (n_steps / ((1.0 - _COUNT_SHARE) * precision)) ** 0.5
    count = (1.0 / (_COUNT_SHARE * precision)) ** 0.5
    return grad, count


def gradient_bound(row_norm: float, radius: float) -> float:
    """``G = 2 r (r D + 1)``: bound on one record's squared-loss gradient on ``B(D)``."""
    return 2.0 * row_norm * (row_norm * radius + 1.0)


def gd_mechanisms(
    total_multiplier: float, n_steps: int, row_norm: float, radius: float
) -> tuple[GaussianSteps, GaussianCount]:
    """The mechanisms of one run: ``n_steps`` noisy gradient sums and a noised count.

    Their multipliers split ``total_multiplier`` (:func:`gd_noise_multipliers`),
    so together they compose exactly to one Gaussian release of it; the
    gradient sums' contribution bound is :func:`gradient_bound`.
    """
    grad, count = gd_noise_multipliers(total_multiplier, n_steps)
    steps = GaussianSteps(gradient_bound(row_norm, radius), grad, int(n_steps))
    return steps, GaussianCount(count)


def noisy_projected_gd(
    gram: np.ndarray,
    n_samples: int,
    n_coef: int,
    row_norm: float,
    radius: float,
    steps: GaussianSteps,
    count: GaussianCount,
    ridge: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Run projected noisy GD on the squared loss and return the averaged iterate.

    Parameters
    ----------
    gram : ndarray of shape (n_coef + 1, n_coef + 1)
        Exact (secret) ``[A, b; b^T, .]`` in normalized units.
    n_samples : int
        Exact count; released only through its noised copy.
    n_coef : int
    row_norm : float
        Bound ``r`` on ``||a||`` for a normalized feature row ``a``.
    radius : float
        ``D``, radius of the constraint ball.
    steps : GaussianSteps
        The ``T`` noisy gradient sums; its contribution bound must be at least
        :func:`gradient_bound` ``(row_norm, radius)``. From :func:`gd_mechanisms`.
    count : GaussianCount
        The noised record count. From :func:`gd_mechanisms`.
    ridge : ndarray of shape (n_coef,)
        Data-independent penalty ``sum_j ridge_j w_j^2``.
    rng : numpy.random.Generator

    Returns
    -------
    w : ndarray of shape (n_coef,)
    noisy_count : float
        The released (noised, charged) record count the steps were normalized by.
    """
    if steps.contribution_bound < gradient_bound(row_norm, radius):
        raise ValueError(
            f"the gradient noise is calibrated to a contribution bound of "
            f"{steps.contribution_bound}, below the gradient bound "
            f"{gradient_bound(row_norm, radius)} of the ball"
        )
    A, b = gram[:n_coef, :n_coef], gram[:n_coef, n_coef]
    n_steps = int(steps.steps)
    grad_sigma = steps.sigma
    noisy_count = max(1.0, count.release(n_samples, rng))
    smoothness = 2.0 * row_norm**2  # H~ = H ||a||^2 with H = 2
    avg_sigma = grad_sigma / noisy_count
    step = min(
        radius / (np.sqrt(n_steps) * max(np.sqrt(smoothness), avg_sigma * np.sqrt(n_coef))),
        1.0 / (4.0 * smoothness),
    )
    noise = steps.noise((n_coef,), rng)
    w = np.zeros(n_coef)
    total = np.zeros(n_coef)
    tick = step_ticker(n_steps, "noisy GD", steps)
    for t in range(n_steps):
        gradient = 2.0 * (A @ w - b) + 2.0 * ridge * w
        w = w - step * (gradient + noise[t]) / noisy_count
        norm = np.linalg.norm(w)
        if norm > radius:
            w *= radius / norm
        total += w
        if tick is not None:
            tick(t)
    return total / n_steps, float(noisy_count)
