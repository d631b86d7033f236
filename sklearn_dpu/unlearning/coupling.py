"""Coupling primitives for exact unlearning (verify, then recompute).

An exact unlearner turns a stored sample of ``A(S)`` into a sample of
``A(S')`` for the edited data set ``S'``; it is cheap when it can keep the
stored sample with high probability (dissertation [U24]_ §1.2.4, Ch. 4 and
App. C). This module holds the building blocks:

* **Reflection coupling of two Gaussians** ``P = N(mu_P, s^2 I)`` (old) and
  ``Q = N(mu_Q, s^2 I)`` (new): keep ``x ~ P`` with probability
  ``min(1, phi_Q(x) / phi_P(x))``, otherwise output ``mu_P + mu_Q - x``.
  The output is exactly ``Q`` and the coupling is maximal (Lemma 26; Lemma 27).

  Errata used: the ratio is **new over old**, as in
  Alg. 10, step 15 and Lemma 38; Alg. 13, step 12, the text of §5.4.2
  and Alg. 27, step 4 print it inverted, which is not
  exact. The reflection is Lemma 27's ``mu_P + mu_Q - x``; §1.2.4.1
  prints the translation ``mu_P - mu_Q + x``.

* **Maximal couplings of mini-batch indices** under one edit:

  - fixed-size batches (uniform ``m``-subsets without replacement, Alg. 21):
    a deleted index in a batch is replaced by a uniform index outside the
    batch (Claim 5); an insertion replaces a uniform member of
    each batch with probability ``m / (n + 1)`` (Claims 2 and 6; the
    coupling text prints ``m/n``; ``m/(n+1)`` is right);
  - Poisson batches (each record joins each batch independently with
    probability ``q``) [derived]: a deleted record is
    dropped from its batches and an inserted one joins each batch with
    probability ``q``. Both leave the batches exactly Poisson(``q``) on the
    new data set, and differ from the old ones with the smallest possible
    probability ``q`` per batch, so the coupling is maximal.

* **Calibration**: the noise that makes one edit trigger a recompute with
  probability at most ``rho``.

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024.
"""

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

__all__ = [
    "gaussian_log_ratio",
    "gaussian_tv",
    "noise_for_recompute_rate",
    "poisson_subsample",
    "recompute_probability_bound",
    "reflect",
    "reflection_accepts",
    "replacements_outside",
    "uniform_subsets",
]


# ------------------------------------------------------------------ Gaussians


def gaussian_tv(distance: ArrayLike, sigma: float) -> np.ndarray:
    """TV between ``N(a, s^2 I)`` and ``N(b, s^2 I)`` with ``||a - b|| = distance``.

    ``TV = 2 Phi(distance / (2 s)) - 1`` ([derived] from Lemma 26); with
    ``s = 0`` it is 1 for distinct means and 0 for equal ones.

    Parameters
    ----------
    distance : float or ndarray
    sigma : float

    Returns
    -------
    float or ndarray
    """
    distance = np.asarray(distance, dtype=float)
    if sigma == 0:
        return (distance > 0).astype(float)
    return 2.0 * ndtr(distance / (2.0 * sigma)) - 1.0


def gaussian_log_ratio(
    x: np.ndarray, mean_new: np.ndarray, mean_old: np.ndarray, sigma: float
) -> np.ndarray:
    """``log(phi_new(x) / phi_old(x))`` for isotropic Gaussians of scale ``sigma``.

    ``(||x - mean_old||^2 - ||x - mean_new||^2) / (2 sigma^2)``,
    an O(d) computation. The leading axis indexes independent tests; the
    others are flattened. With ``sigma = 0`` (no noise) the ratio is 0 or
    infinite: ``-inf`` where the means differ, 0 where they agree.

    Returns
    -------
    ndarray of shape (k,)
    """
    k = len(x)
    x, mean_new, mean_old = (np.reshape(a, (k, -1)) for a in (x, mean_new, mean_old))
    if sigma == 0:
        return np.where(np.any(mean_new != mean_old, axis=1), -np.inf, 0.0)
    old = np.einsum("ij,ij->i", x - mean_old, x - mean_old)
    new = np.einsum("ij,ij->i", x - mean_new, x - mean_new)
    return (old - new) / (2.0 * sigma**2)


def reflection_accepts(
    x: np.ndarray,
    mean_old: np.ndarray,
    mean_new: np.ndarray,
    sigma: float,
    uniforms: np.ndarray,
) -> np.ndarray:
    """The rejection step of the reflection coupling: which stored samples to keep.

    Keeps ``x ~ N(mean_old, sigma^2 I)`` when ``u <= phi_new(x) / phi_old(x)``
    (Lemma 26; Alg. 10, step 15), compared in log space.

    Parameters
    ----------
    x, mean_old, mean_new : ndarray of shape (k, ...)
        ``k`` independent tests.
    sigma : float
    uniforms : ndarray of shape (k,)
        Independent Uniform(0, 1) draws.

    Returns
    -------
    ndarray of bool, shape (k,)
    """
    log_ratio = gaussian_log_ratio(x, mean_new, mean_old, sigma)
    with np.errstate(divide="ignore"):
        return np.log(uniforms) <= log_ratio


def reflect(x: np.ndarray, mean_old: np.ndarray, mean_new: np.ndarray) -> np.ndarray:
    """Point reflection through the midpoint of the means: ``mean_old + mean_new - x``.

    Lemma 27: it maps ``N(mean_old, s^2 I)`` onto
    ``N(mean_new, s^2 I)``, is its own inverse and has unit Jacobian, as
    Lemma 26 requires. (§1.2.4.1 prints a translation instead: erratum.)
    """
    return mean_old + mean_new - x


# ------------------------------------------------------------- calibration


def recompute_probability_bound(
    sigma: float, n_steps: int, inclusion_prob: float, max_shift: float
) -> float:
    """Upper bound on the probability that one edit triggers a recompute.

    Each of ``n_steps`` steps uses the edited record with probability
    ``inclusion_prob``, independently of everything before it; a step that
    uses it is rejected with probability at most
    ``tau = TV(N(0, s^2), N(max_shift, s^2))`` where ``max_shift`` bounds how
    far the edit can move the step's mean. Hence
    ``P(recompute) <= 1 - (1 - inclusion_prob * tau) ** n_steps``. This is the
    argument of Lemma 30 with the exact Gaussian TV in place of
    its Pinsker bound [derived].

    Returns
    -------
    float
    """
    tau = float(gaussian_tv(max_shift, sigma))
    return (
        float(-math.expm1(n_steps * math.log1p(-min(inclusion_prob * tau, 1.0))))
        if inclusion_prob * tau < 1.0
        else 1.0
    )


def noise_for_recompute_rate(
    rate: float, n_steps: int, inclusion_prob: float, max_shift: float
) -> float:
    """Smallest ``sigma`` with :func:`recompute_probability_bound` at most ``rate``.

    Returns 0 when no noise is needed (sub-sample GD: a step that uses the
    edited record is always recomputed, and ``1 - (1 - q)^T <= rate``).

    Parameters
    ----------
    rate : float
        Target probability in (0, 1].
    n_steps, inclusion_prob, max_shift
        As in :func:`recompute_probability_bound`.

    Returns
    -------
    float
    """
    if not 0 < rate <= 1:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    if max_shift == 0 or inclusion_prob == 0 or rate == 1:
        return 0.0  # rate 1 allows every edit to recompute: no noise needed
    # Per-step rejection probability that meets the target with equality.
    tau = -math.expm1(math.log1p(-rate) / n_steps) / inclusion_prob
    if tau >= 1.0:
        return 0.0
    # TV = 2 Phi(shift / (2 s)) - 1 = tau  <=>  s = shift / (2 Phi^-1((1 + tau) / 2)).
    sigma = max_shift / (2.0 * float(ndtri((1.0 + tau) / 2.0)))
    # Guard against rounding putting the bound a hair above the target.
    while recompute_probability_bound(sigma, n_steps, inclusion_prob, max_shift) > rate:
        sigma *= 1.0 + 1e-9
    return sigma


# ---------------------------------------------------------- batch indices


def poisson_subsample(
    n_sets: int, n_items: int, prob: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Independent Bernoulli(``prob``) membership of each item in each set.

    Draws the gaps between successes of the ``n_sets * n_items`` coins from a
    geometric law, so the cost is proportional to the number of members, not
    to ``n_sets * n_items``.

    Returns
    -------
    sets, items : ndarray of int64
        The memberships, sorted by set, then by item.
    """
    total = n_sets * n_items
    if total == 0 or prob <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    if prob >= 1:
        flat = np.arange(total, dtype=np.int64)
    else:
        chunks, end = [], -1
        expected = total * prob
        while True:
            size = int(expected + 6.0 * math.sqrt(expected) + 16)
            positions = end + np.cumsum(rng.geometric(prob, size=size), dtype=np.int64)
            chunks.append(positions[positions < total])
            end = int(positions[-1])
            if end >= total:
                break
        flat = np.concatenate(chunks)
    return flat // n_items, flat % n_items


def uniform_subsets(n_sets: int, n_items: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``n_sets`` independent uniform ``size``-subsets of ``range(n_items)``.

    Returns
    -------
    ndarray of int64, shape (n_sets, size)
        Each row sorted.
    """
    if size > n_items:
        raise ValueError(f"cannot draw {size} distinct items out of {n_items}")
    out = np.empty((n_sets, size), dtype=np.int64)
    for i in range(n_sets):
        out[i] = rng.choice(n_items, size=size, replace=False)
    out.sort(axis=1)
    return out


def replacements_outside(
    batches: np.ndarray, pool: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """For each row of ``batches``, one uniform element of ``pool`` not in that row.

    The deletion coupling of fixed-size batches (Claim 5): the
    deleted index is replaced by ``i ~ Uniform([n] \\ b_t)``. Rejection
    sampling; each draw succeeds with probability ``1 - m / n``.

    Parameters
    ----------
    batches : ndarray of shape (k, m)
    pool : ndarray of shape (n,)
        The current items (``n > m``).

    Returns
    -------
    ndarray of shape (k,)
    """
    k = len(batches)
    if len(pool) <= batches.shape[1]:
        raise ValueError("the pool has no item outside the batch")
    out = np.empty(k, dtype=pool.dtype)
    todo = np.arange(k)
    while len(todo):
        draws = pool[rng.integers(0, len(pool), size=len(todo))]
        clash = (batches[todo] == draws[:, None]).any(axis=1)
        out[todo[~clash]] = draws[~clash]
        todo = todo[clash]
    return out
