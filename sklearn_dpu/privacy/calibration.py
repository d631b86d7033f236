"""Noise for a target (epsilon, delta), found with ``dp_accounting``.

Never the textbook ``sigma = Delta sqrt(2 ln(1.25/delta)) / eps``: it is proved
only for eps < 1 ([DR14]_, Theorem A.1) and is loose even there ([BW18]_,
Section 3).

References
----------
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of
   differential privacy", 2014, Theorem A.1 and Section 2.3.
.. [BW18] B. Balle and Y.-X. Wang, ICML 2018, Theorem 8 (analytic Gaussian
   mechanism; implemented by ``dp_accounting.gaussian_mechanism``).
.. [DRS22] J. Dong, A. Roth and W. Su, "Gaussian differential privacy",
   JRSS-B 2022, Corollary 3.3: k Gaussian mechanisms with noise multipliers
   m_i compose exactly to one with multiplier ``(sum_i m_i**-2) ** -0.5``.
"""

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from numbers import Real

import numpy as np
from dp_accounting import dp_event, mechanism_calibration
from dp_accounting.pld import PLDAccountant

from .accounting import NEIGHBORING_RELATION, analytic_gaussian_epsilon

__all__ = [
    "calibrate_noise_multiplier",
    "check_epsilon_delta",
    "gaussian_noise_multiplier",
]


def _real(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool | np.bool_)


def check_epsilon_delta(epsilon: float, delta: float) -> tuple[float, float]:
    """Validate a privacy target and return it as Python floats.

    The one validator for (epsilon, delta) pairs in sklearn_dpu: budgets and
    calibrations call it, so a value is refused the same way everywhere.

    Parameters
    ----------
    epsilon : real
        Finite and > 0. Python and numpy real scalars are accepted; booleans,
        strings, NaN and infinities are not.
    delta : real
        In (0, 0.5). A delta of 1/2 or more allows mechanisms that publish
        records in the clear (the "name and shame" mechanism of [DR14]_,
        Section 2.3, releases each record with probability delta), so it
        promises nothing; meaningful values are well below 1/n for n records.

    Returns
    -------
    (float, float)

    Raises
    ------
    ValueError
        Naming the offending value.
    """
    if not (_real(epsilon) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite real number > 0, got {epsilon!r}")
    if not (_real(delta) and 0 < delta < 0.5):
        why = (
            "a delta of 0 is pure DP, which the Gaussian mechanisms here cannot give"
            if _real(delta) and delta <= 0
            else "a delta of 1/2 or more allows publishing records in the clear"
        )
        raise ValueError(
            f"delta must be a real number in (0, 0.5), got {delta!r}: {why}; use delta "
            "well below 1/n"
        )
    return float(epsilon), float(delta)


@lru_cache(maxsize=256)
def gaussian_noise_multiplier(epsilon: float, delta: float, compositions: int = 1) -> float:
    """Noise multiplier that makes ``compositions`` Gaussian releases (eps, delta)-DP.

    Exact: the analytic Gaussian mechanism [BW18]_ for one release, and the
    exact composition of Gaussians [DRS22]_ for several (a multiplier ``m``
    used ``k`` times is one release with multiplier ``m / sqrt(k)``).

    Parameters
    ----------
    epsilon : float
        Target epsilon, > 0.
    delta : float
        Target delta, in (0, 0.5).
    compositions : int, default=1
        How many releases share the budget, each with this multiplier.

    Returns
    -------
    float
        ``sigma / contribution_bound`` for each release.

    Notes
    -----
    Cached: it is a pure function and every fit of an estimator asks for it.
    """
    epsilon, delta = check_epsilon_delta(epsilon, delta)
    if compositions < 1:
        raise ValueError(f"compositions must be >= 1, got {compositions}")
    return _gaussian_sigma(epsilon, delta) * compositions**0.5


def _gaussian_sigma(epsilon: float, delta: float) -> float:
    """Smallest multiplier (up to 1e-9 relative) whose analytic epsilon is <= ``epsilon``.

    A bisection on log(multiplier) over the analytic epsilon [BW18]_
    (:func:`~sklearn_dpu.privacy.accounting.analytic_gaussian_epsilon`),
    which stays finite for every multiplier in (0, inf), so any finite
    epsilon > 0 gets an answer (1e-300 to 1e300 alike). dp_accounting's own
    ``get_sigma_gaussian`` brackets sigma in [0.1, ...] and fails with a
    root-solver message for epsilon ~ 1e300, and warns on the divisions by
    zero its search meets for epsilon ~ 1e-12; both are avoided here. The
    result is on the private side: it is returned only once checked.
    """

    def eps_of(sigma):
        with np.errstate(all="ignore"):
            return analytic_gaussian_epsilon(sigma, delta)

    # Start near the root: for large epsilon, epsilon ~ 1 / (2 sigma**2) (the
    # privacy loss's mean), so the brackets below take a few steps, not one
    # per halving from 1 (each evaluation is slow at tiny sigma).
    high = 1.0 if epsilon <= 1.0 else (2.0 * epsilon) ** -0.5
    while eps_of(high) > epsilon:
        high *= 2.0
    low = high / 2.0
    while low > 0 and eps_of(low) <= epsilon:
        low, high = low / 2.0, low
    # invariant: eps_of(high) <= epsilon < eps_of(low)
    while high - low > high * 1e-10:
        mid = math.sqrt(low * high) if low > 0 else high / 2.0
        if not low < mid < high:
            break
        if eps_of(mid) <= epsilon:
            high = mid
        else:
            low = mid
    return high


def calibrate_noise_multiplier(
    make_events: Callable[[float], Sequence[dp_event.DpEvent]],
    epsilon: float,
    delta: float,
) -> float:
    """Smallest noise multiplier whose events compose to at most (epsilon, delta).

    For mechanisms that are not all Gaussian: a search by
    ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` over the
    PLD accountant, which returns a value on the private side of the root.
    The bracket is found here first, by doubling or halving from 1 until
    epsilon crosses the target: dp_accounting's own search starts from a tiny
    multiplier whose PLD (epsilon in the hundreds) does not fit in memory.

    Parameters
    ----------
    make_events : callable
        Maps a noise multiplier to the events of the whole computation; more
        noise must mean less epsilon.
    epsilon, delta : float
        Target.

    Returns
    -------
    float
    """

    def make_event(multiplier):
        return dp_event.ComposedDpEvent(list(make_events(multiplier)))

    epsilon, delta = check_epsilon_delta(epsilon, delta)

    def gap(multiplier):
        accountant = PLDAccountant(NEIGHBORING_RELATION).compose(make_event(multiplier))
        return accountant.get_epsilon(delta) - epsilon

    low, high = 1.0, 1.0
    if gap(1.0) > 0:
        while gap(high) > 0:
            low, high = high, 2.0 * high
    else:
        while gap(low) <= 0:
            low, high = low / 2.0, low
    return mechanism_calibration.calibrate_dp_mechanism(
        lambda: PLDAccountant(NEIGHBORING_RELATION),
        make_event,
        target_epsilon=epsilon,
        target_delta=delta,
        bracket_interval=mechanism_calibration.ExplicitBracketInterval(low, high),
        tol=1e-6,
    )
