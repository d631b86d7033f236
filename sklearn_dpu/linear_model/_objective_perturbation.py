r"""Objective perturbation for binary logistic regression, accounted as Gaussian DP.

The mechanism (Chaudhuri, Monteleoni & Sarwate 2011, Alg. 2; Kifer, Smith &
Thakurta 2012, Thm 2, Gaussian version) releases

.. math:: \theta^{OP} = \arg\min_\theta\ \sum_i \ell(\theta; a_i, s_i)
          + \tfrac{\Lambda}{2}\|\theta\|^2 + b^\top\theta,
          \qquad b \sim N(0, \sigma^2 I),

for the logistic loss on normalized rows (``||a|| <= r``), unconstrained, with
a public ridge ``Lambda``.

**Privacy, re-derived for the add/remove-one relation.** The map
``b -> theta`` is a bijection with ``b(theta; D) = -grad F_D(theta)`` and
Jacobian ``J_D(theta) = hess F_D(theta)`` (``F_D`` the ridge objective), so
``p_D(theta) = nu(b(theta; D)) det J_D(theta)``. Let ``D' = D + {z}``,
``z = (a, s)``. The record's gradient is ``g(theta) = t(theta) v`` with the
*fixed* vector ``v = -s a`` (``||v|| <= r = G``) and ``t = sigmoid(-s <theta,
a>)`` in ``(0, 1)``: for the binary logistic loss only the length of the
gradient depends on ``theta``, not its direction. Then

* mechanism on ``D``: ``log p_D/p_D' = (t^2 V^2 - 2 t V w) / (2 sigma^2) +
  log det J_D/det J_D'`` with ``w = <b, v>/V ~ N(0, sigma^2)``. The first term
  is convex in ``t``, so at most its value at ``t in {0, 1}``:
  ``max(0, L)`` with ``L ~ N(mu^2/2, mu^2)``, ``mu = V/sigma <= G/sigma``;
  the second is ``<= 0`` (``J_D' = J_D + l'' a a^T``).
* mechanism on ``D'``: likewise ``<= eps_J + max(0, L)`` with
  ``eps_J = log(1 + beta/Lambda)``, ``beta = r^2/4`` (matrix determinant
  lemma, ``J_D >= Lambda I``).

With ``H_e(P||Q) = E_P[(1 - e^{eps - loss})_+]``, both directions are bounded
by ``B(eps) = E[(1 - exp(eps - eps_J - max(0, L)))_+]`` for ``eps >= 0`` (and
``eps < 0`` follows by the symmetry ``H_{e^eps}(P||Q) = 1 - e^eps + e^eps
H_{e^-eps}(Q||P)``, shared by the Gaussian pair). The mechanism is therefore
``mu'``-GDP (Dong, Roth & Su 2022, Cor. 2.13) as soon as
``B(eps) <= delta_{mu'}(eps)`` for all ``eps >= 0``. Writing both sides as
``int_eps^inf e^{eps - x} P(X > x) dx``, the tail difference
``P(eps_J + max(0, L) > x) - P(L' > x)`` changes sign once (from ``+`` to
``-``: it is ``1 - P(L' > x) >= 0`` below ``eps_J`` and a difference of normal
tails with linearly ordered arguments above), so the condition at ``eps = 0``
implies it for every ``eps >= 0``. At ``eps = 0`` both sides are explicit
(``E[e^{-max(0, L)}] = 2 Phi(-mu/2)``), which gives the closed form

.. math:: \mu' = -2\,\Phi^{-1}\big(e^{-\varepsilon_J}\,\Phi(-\mu/2)\big).

``mu' = mu`` when ``eps_J = 0``. Because the result is Gaussian DP, the release
composes *exactly* with the other Gaussian releases of the fit.

**Inexact minimization** (approximate minima perturbation, Iyengar et al.
2019, Alg. 1): the solver stops at ``theta_hat`` with
``||theta_hat - theta^OP|| <= gamma/Lambda`` (certified), and we release
``theta_hat + N(0, sigma_2^2 I)``. Given ``theta^OP`` and ``D`` the noise
``b`` is determined, so ``theta_hat = h(D, theta^OP)`` with
``||h(D, .) - h(D', .)|| <= 2 gamma / Lambda``: a Gaussian mechanism of
sensitivity ``2 gamma/Lambda`` composed adaptively after the first.

Multiclass problems use one-vs-rest (the fixed gradient direction above is
what the binary proof needs; the softmax gradient turns with ``theta``), each
class at ``mu_class = mu / sqrt(K)`` (exact GDP composition).

References
----------
.. [CMS11] K. Chaudhuri, C. Monteleoni and A. D. Sarwate, "Differentially
   private empirical risk minimization", JMLR 2011, Algorithm 2, Theorem 9.
.. [KST12] D. Kifer, A. Smith and A. Thakurta, "Private convex empirical risk
   minimization and high-dimensional regression", COLT 2012, Theorem 2.
.. [INS19] R. Iyengar et al., "Towards practical differentially private
   convex optimization", IEEE S&P 2019, Algorithm 1 (AMP).
.. [DRS22] J. Dong, A. Roth and W. Su, "Gaussian differential privacy",
   JRSS-B 2022, Corollary 2.13 (GDP as a family of (eps, delta)).
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from ..privacy.mechanisms import GaussianDP

__all__ = [
    "ApproximateMinimaNoise",
    "ObjectivePerturbation",
    "jacobian_epsilon",
    "objective_perturbation_mu",
    "objective_perturbation_noise_mu",
]


def jacobian_epsilon(smoothness: float, Lambda: float) -> float:
    """``eps_J = log(1 + beta / Lambda)``: the Jacobian term of the privacy loss."""
    return float(np.log1p(smoothness / Lambda))


def objective_perturbation_mu(noise_mu: float, eps_jacobian: float) -> float:
    """GDP parameter of objective perturbation.

    Parameters
    ----------
    noise_mu : float
        ``G / sigma`` (gradient bound over the noise standard deviation).
    eps_jacobian : float
        From :func:`jacobian_epsilon`.

    Returns
    -------
    float
        ``mu' = -2 Phi^{-1}(exp(-eps_J) Phi(-noise_mu / 2))``.
    """
    return float(-2.0 * ndtri(np.exp(-eps_jacobian) * ndtr(-noise_mu / 2.0)))


def objective_perturbation_noise_mu(target_mu: float, eps_jacobian: float) -> float:
    """Largest ``G / sigma`` whose objective perturbation is ``target_mu``-GDP.

    The inverse of :func:`objective_perturbation_mu`.

    Raises
    ------
    ValueError
        If ``eps_J`` is so large that no noise reaches ``target_mu`` (the ridge
        is too weak for the privacy asked): ``exp(eps_J) Phi(-mu/2) >= 1/2``.
    """
    level = np.exp(eps_jacobian) * ndtr(-target_mu / 2.0)
    if level >= 0.5:
        raise ValueError(
            "objective perturbation cannot reach this privacy with this "
            "regularization: the Jacobian term log(1 + beta/Lambda) = "
            f"{eps_jacobian:.3g} is too large; "
            "use a smaller C (stronger regularization) or another solver"
        )
    return float(-2.0 * ndtri(level))


@dataclass(frozen=True)
class ObjectivePerturbation(GaussianDP):
    """The linear terms ``b ~ N(0, sigma^2 I)`` of ``classes`` one-vs-rest
    problems, together ``mu``-GDP ([CMS11]_, [KST12]_; accounting above).

    Each class is ``mu / sqrt(classes)``-GDP (exact composition [DRS22]_):
    its noise ``sigma = gradient_bound / noise_mu`` is the largest whose
    certificate (:func:`objective_perturbation_mu`) meets that with the
    Jacobian term ``eps_jacobian``.

    Parameters
    ----------
    mu : float
        Gaussian-DP parameter of all the classes together.
    gradient_bound : float
        ``G``, the bound on a record's gradient of the binary loss.
    eps_jacobian : float
        From :func:`jacobian_epsilon`.
    classes : int, default=1
        Problems solved (1 for a binary problem).
    """

    gradient_bound: float
    eps_jacobian: float
    classes: int = 1

    @property
    def noise_mu(self) -> float:
        """``G / sigma`` of each class."""
        return objective_perturbation_noise_mu(self.mu / math.sqrt(self.classes), self.eps_jacobian)

    @property
    def certified_mu_class(self) -> float:
        """The Gaussian-DP parameter certified for each class."""
        return objective_perturbation_mu(self.noise_mu, self.eps_jacobian)

    @property
    def sigma(self) -> float:
        """Standard deviation of each coordinate of ``b``."""
        return self.gradient_bound / self.noise_mu

    def linear_term(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """One class's ``b``."""
        return rng.normal(0.0, self.sigma, size=size)


@dataclass(frozen=True)
class ApproximateMinimaNoise(GaussianDP):
    """The output noise of approximate minima perturbation [INS19]_ for
    ``classes`` problems, together ``mu``-GDP.

    A solution certified within ``tolerance / ridge`` of the perturbed
    minimizer is a function of the data of sensitivity ``2 tolerance /
    ridge``; each class adds Gaussian noise for ``mu / sqrt(classes)``-GDP.

    Parameters
    ----------
    mu : float
    tolerance : float
        Certified gradient norm ``tau`` of the solver.
    ridge : float
        ``Lambda``, the ridge of the summed objective.
    classes : int, default=1
    """

    tolerance: float
    ridge: float
    classes: int = 1

    @property
    def sigma(self) -> float:
        """Standard deviation of each coordinate of the noise."""
        return (2.0 * self.tolerance / self.ridge) / (self.mu / math.sqrt(self.classes))

    def release(self, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One class's solution plus its noise."""
        return theta + rng.normal(0.0, self.sigma, size=theta.shape)
