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

__all__ = ["gd_noise_multipliers", "noisy_projected_gd"]

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


def noisy_projected_gd(
    gram: np.ndarray,
    n_samples: int,
    n_coef: int,
    row_norm: float,
    radius: float,
    n_steps: int,
    grad_multiplier: float,
    count_multiplier: float,
    ridge: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
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
    n_steps : int
        ``T``.
    grad_multiplier, count_multiplier : float
        From :func:`gd_noise_multipliers`.
    ridge : ndarray of shape (n_coef,)
        Data-independent penalty ``sum_j ridge_j w_j^2``.
    rng : numpy.random.Generator

    Returns
    -------
    w : ndarray of shape (n_coef,)
    noisy_count : float
        The released (noised, charged) record count the steps were normalized by.
    """
    A, b = gram[:n_coef, :n_coef], gram[:n_coef, n_coef]
    lipschitz = 2.0 * row_norm * (row_norm * radius + 1.0)
    grad_sigma = grad_multiplier * lipschitz
    noisy_count = max(1.0, n_samples + rng.normal(0.0, count_multiplier))
    smoothness = 2.0 * row_norm**2  # H~ = H ||a||^2 with H = 2
    avg_sigma = grad_sigma / noisy_count
    step = min(
        radius / (np.sqrt(n_steps) * max(np.sqrt(smoothness), avg_sigma * np.sqrt(n_coef))),
        1.0 / (4.0 * smoothness),
    )
    noise = rng.normal(0.0, grad_sigma, size=(n_steps, n_coef))
    w = np.zeros(n_coef)
    total = np.zeros(n_coef)
    for t in range(n_steps):
        gradient = 2.0 * (A @ w - b) + 2.0 * ridge * w
        w = w - step * (gradient + noise[t]) / noisy_count
        norm = np.linalg.norm(w)
        if norm > radius:
            w *= radius / norm
        total += w
    return total / n_steps, float(noisy_count)
