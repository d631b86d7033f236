"""Private selection from private candidates: repeat-and-select and the threshold rule.

Both mechanisms run a differentially private *candidate* algorithm ``Q`` (fit
one model, release a noisy score of it) a random number of times and publish
one run. They hold their parameters, draw their randomness (the number of
runs, the stopping coins) and give the ``dp_accounting`` event of the whole
selection, in the style of :mod:`sklearn_dpu.privacy.mechanisms`.

Accounting is in Rényi DP [Mir17]_: ``dp_accounting``'s RDP accountant
implements the bounds of [PS22]_ for ``RepeatAndSelectDpEvent``. The candidate's
event must therefore be RDP-accountable: Gaussian, Laplace, zCDP events and
their compositions and subsamplings. A pure-DP event of the library (discrete
Laplace, see :func:`~sklearn_dpu.privacy.mechanisms.pure_dp_event`) is mapped
to the zCDP event it implies (``epsilon``-DP implies ``epsilon**2 / 2``-zCDP,
[BS16]_ Proposition 1.4), a valid upper bound.

The functions :func:`rdp_truncated_negative_binomial` and
:func:`rdp_poisson` compute the bounds of [PS22]_ (Theorems 2 and 6) from a
candidate's RDP curve, independently of ``dp_accounting``; tests check the
accountant against them.

References
----------
.. [PS22] N. Papernot and T. Steinke, "Hyperparameter tuning with Renyi
   differential privacy", ICLR 2022: Definition 1 (truncated negative
   binomial distribution), Theorem 2 (its RDP bound; logarithmic for
   eta = 0, geometric for eta = 1), Theorem 6 (Poisson).
.. [LT19] J. Liu and K. Talwar, "Private selection from private
   candidates", STOC 2019, Algorithm 1 and Theorem 3.1 (known threshold,
   random stopping with probability gamma: 3 epsilon-DP for an epsilon-DP
   candidate).
.. [BS16] M. Bun and T. Steinke, "Concentrated differential privacy:
   simplifications, extensions, and lower bounds", TCC 2016, Proposition 1.4.
.. [Mir17] I. Mironov, "Renyi differential privacy", CSF 2017,
   Proposition 1 (composition), Proposition 3 (conversion to (epsilon, delta)).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant

from .accounting import NEIGHBORING_RELATION

__all__ = [
    "DISTRIBUTIONS",
    "RepeatAndSelect",
    "ThresholdSelection",
    "liu_talwar_epsilon",
    "rdp_accountable",
    "rdp_poisson",
    "rdp_truncated_negative_binomial",
    "truncated_negative_binomial_gamma",
    "truncated_negative_binomial_mean",
]

# distribution name -> shape of dp_accounting's RepeatAndSelectDpEvent
# (0 logarithmic, 1 geometric, inf Poisson, else truncated negative binomial).
DISTRIBUTIONS = ("truncated_negative_binomial", "logarithmic", "poisson")


def rdp_accountable(event: dp_event.DpEvent) -> dp_event.DpEvent:
    """``event`` in a form the RDP accountant composes, never less private.

    Discrete-Laplace (pure ``epsilon``-DP) leaves become ``ZCDpEvent(epsilon**2
    / 2)`` ([BS16]_ Prop. 1.4); compositions and Poisson subsampling are kept.

    Raises
    ------
    ValueError
        If the event is not private, or has a part the RDP accountant cannot
        compose.
    """
    converted = _convert(event)
    if not RdpAccountant(neighboring_relation=NEIGHBORING_RELATION).supports(converted):
        raise ValueError(f"the RDP accountant cannot compose {event!r}")
    return converted


def _convert(event: dp_event.DpEvent) -> dp_event.DpEvent:
    if isinstance(event, dp_event.NonPrivateDpEvent):
        raise ValueError("a candidate release is not private (NonPrivateDpEvent)")
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent):
        epsilon = float(event.noise_parameter) * float(event.sensitivity)
        return dp_event.ZCDpEvent(rho=epsilon**2 / 2.0)
    if isinstance(event, dp_event.ComposedDpEvent):
        return dp_event.ComposedDpEvent([_convert(e) for e in event.events])
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return dp_event.SelfComposedDpEvent(_convert(event.event), event.count)
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return dp_event.PoissonSampledDpEvent(event.sampling_probability, _convert(event.event))
    return event


def truncated_negative_binomial_mean(gamma: float, eta: float) -> float:
    """E[K] of the truncated negative binomial distribution ([PS22]_ Def. 1).

    ``eta (1 - gamma) / (gamma (1 - gamma**eta))``, and its limit
    ``(1 - gamma) / (gamma log(1 / gamma))`` at ``eta = 0`` (logarithmic).
    """
    if eta == 0:
        return (1.0 - gamma) / (gamma * math.log(1.0 / gamma))
    return eta * (1.0 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


def truncated_negative_binomial_gamma(eta: float, mean: float) -> float:
    """The ``gamma`` in (0, 1) whose truncated negative binomial has mean ``mean``.

    The mean decreases from infinity to 1 as gamma goes from 0 to 1, so it is
    found by bisection (on a log scale, to 1e-12 relative).
    """
    if mean <= 1:
        raise ValueError(f"the mean number of runs must exceed 1, got {mean}")
    low, high = 1e-300, 1.0 - 1e-15
    for _ in range(200):
        mid = math.sqrt(low * high) if high / low > 4 else (low + high) / 2
        if truncated_negative_binomial_mean(mid, eta) > mean:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * high:
            break
    return (low + high) / 2


def rdp_truncated_negative_binomial(
    orders: np.ndarray, rdp: np.ndarray, mean: float, eta: float
) -> np.ndarray:
    """RDP of repeat-and-select with a truncated negative binomial K ([PS22]_ Thm 2).

    If the candidate is ``(lam, eps)``- and ``(lam_hat, eps_hat)``-RDP, the
    selection is ``(lam, eps')``-RDP with::

        eps' = eps + (1 + eta) (1 - 1/lam_hat) eps_hat
                   + (1 + eta) log(1/gamma) / lam_hat + log(E[K]) / (lam - 1)

    for every ``lam_hat`` in ``orders`` (the least is kept); RDP is
    non-decreasing in the order, so each order also takes the least bound of
    the orders above it.
    """
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    gamma = 1.0 / mean if eta == 1 else truncated_negative_binomial_gamma(eta, mean)
    best_hat = np.min((1 + eta) * (1 - 1 / orders) * rdp + (1 + eta) * math.log(1 / gamma) / orders)
    bound = np.full_like(orders, np.inf)
    above_one = orders > 1
    bound[above_one] = rdp[above_one] + best_hat + math.log(mean) / (orders[above_one] - 1)
    return np.minimum.accumulate(bound[::-1])[::-1]


def rdp_poisson(
    orders: np.ndarray, rdp: np.ndarray, mean: float, delta_hat: Callable[[float], float]
) -> np.ndarray:
    """RDP of repeat-and-select with a Poisson K of mean ``mean`` ([PS22]_ Thm 6).

    If the candidate is ``(lam, eps)``-RDP and ``(eps_hat, delta_hat)``-DP with
    ``exp(eps_hat) <= 1 + 1/(lam - 1)``, the selection is
    ``(lam, eps + mean * delta_hat + log(mean) / (lam - 1))``-RDP.
    ``delta_hat(eps_hat)`` is the candidate's privacy profile (any valid upper
    bound), evaluated at ``eps_hat = log(1 + 1/(lam - 1))``.
    """
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    bound = np.full_like(orders, np.inf)
    for i, lam in enumerate(orders):
        if lam > 1:
            eps_hat = math.log1p(1.0 / (lam - 1.0))
            bound[i] = rdp[i] + mean * delta_hat(eps_hat) + math.log(mean) / (lam - 1.0)
    return bound


def liu_talwar_epsilon(candidate_epsilon: float) -> float:
    """Pure-DP epsilon of the threshold rule for an ``epsilon``-DP candidate:
    ``3 epsilon`` ([LT19]_ Thm 3.1)."""
    return 3.0 * float(candidate_epsilon)


@dataclass(frozen=True)
class RepeatAndSelect:
    """Run a candidate ``K`` times, ``K`` random, and publish the best run [PS22]_.

    Parameters
    ----------
    run_event : dp_accounting.dp_event.DpEvent
        RDP-accountable event of one run (see :func:`rdp_accountable`), the
        same for every run.
    expected_runs : float
        E[K], at least 1 (more than 1 for the truncated negative binomial).
    distribution : {"truncated_negative_binomial", "logarithmic", "poisson"}
    eta : float, default=1.0
        Shape of the truncated negative binomial (``eta=1``: geometric),
        positive; ignored by the others.

    Examples
    --------
    >>> from dp_accounting import dp_event
    >>> RepeatAndSelect(dp_event.GaussianDpEvent(2.0), 10.0, "logarithmic").dp_event
    RepeatAndSelectDpEvent(event=GaussianDpEvent(noise_multiplier=2.0), mean=10.0, shape=0.0)
    """

    run_event: dp_event.DpEvent
    expected_runs: float
    distribution: str = "truncated_negative_binomial"
    eta: float = 1.0

    @property
    def shape(self) -> float:
        """The ``shape`` of ``RepeatAndSelectDpEvent``."""
        if self.distribution == "logarithmic":
            return 0.0
        if self.distribution == "poisson":
            return math.inf
        return float(self.eta)

    @property
    def gamma(self) -> float:
        """The halting parameter of a truncated negative binomial K."""
        if self.shape == 1:
            return 1.0 / self.expected_runs
        return truncated_negative_binomial_gamma(self.shape, self.expected_runs)

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return dp_event.RepeatAndSelectDpEvent(
            self.run_event, float(self.expected_runs), self.shape
        )

    def draw_runs(self, rng: np.random.Generator) -> int:
        """Draw K: Poisson (may be 0), logarithmic, or truncated negative binomial."""
        if self.distribution == "poisson":
            return int(rng.poisson(self.expected_runs))
        gamma = self.gamma
        if self.shape == 0:
            return int(rng.logseries(1.0 - gamma))
        while True:  # a negative binomial conditioned on K >= 1 (rejection)
            runs = int(rng.negative_binomial(self.shape, gamma))
            if runs >= 1:
                return runs


@dataclass(frozen=True)
class ThresholdSelection:
    """Liu & Talwar's known-threshold selection with random stopping [LT19]_ Alg. 1.

    Repeat: run the candidate; if its private score passes the threshold,
    publish that run and stop; otherwise stop with probability
    ``stop_probability`` and publish nothing (``None``).

    **Privacy.** For an ``epsilon``-DP candidate it is ``3 epsilon``-DP
    ([LT19]_ Thm 3.1, :func:`liu_talwar_epsilon`). The library's candidates
    are Gaussian, not pure, so the ledger uses an exact equivalence instead:
    drawing ``K`` geometric with parameter ``gamma`` (``P(K = k) = gamma (1 -
    gamma)**(k - 1)``) and publishing the first of ``K`` runs that passes is
    the same algorithm (after each failing run the walk continues with
    probability ``P(K > j | K >= j) = 1 - gamma``). Runs are i.i.d., so the
    first passing run has the law of the passing run of largest independent
    tie-break key, which is the best of ``K`` runs for a fixed order
    (passing before failing, then the key) with failing outputs replaced by
    ``None`` (post-processing). Hence the rule is repeat-and-select with a
    geometric ``K`` of mean ``1 / gamma`` ([PS22]_ Thm 2 with ``eta = 1``),
    and its event ``RepeatAndSelectDpEvent(run, 1 / gamma, shape=1)`` is a
    valid upper bound for any RDP-accountable candidate.

    Parameters
    ----------
    run_event : dp_accounting.dp_event.DpEvent
        RDP-accountable event of one run.
    stop_probability : float
        ``gamma`` in (0, 1].
    """

    run_event: dp_event.DpEvent
    stop_probability: float

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return dp_event.RepeatAndSelectDpEvent(
            self.run_event, 1.0 / float(self.stop_probability), 1.0
        )

    def stops(self, rng: np.random.Generator) -> bool:
        """The coin after a failing run: True to stop without a selection."""
        return bool(rng.random() < self.stop_probability)
