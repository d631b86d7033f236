"""Noise for a target (epsilon, delta), found with ``dp_accounting``.

Never the textbook ``sigma = Delta sqrt(2 ln(1.25/delta)) / eps``: it holds only
for eps < 1 (digest ``diss_dp.md`` §4, A10) and is loose below that.

References
----------
.. [BW18] B. Balle and Y.-X. Wang, ICML 2018, Theorem 8 (analytic Gaussian
   mechanism; implemented by ``dp_accounting.gaussian_mechanism``).
.. [DRS22] J. Dong, A. Roth and W. Su, "Gaussian differential privacy",
   JRSS-B 2022, Corollary 3.3: k Gaussian mechanisms with noise multipliers
   m_i compose exactly to one with multiplier ``(sum_i m_i**-2) ** -0.5``.
"""

from collections.abc import Callable, Sequence
from functools import lru_cache

from dp_accounting import dp_event, mechanism_calibration
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian, get_sigma_gaussian
from dp_accounting.pld import PLDAccountant

from .accounting import NEIGHBORING_RELATION

__all__ = ["calibrate_noise_multiplier", "gaussian_noise_multiplier"]

# brentq returns sigma within 1e-12 of the root, on either side; this margin
# puts it on the private side.
_SAFETY = 1.0 + 1e-9


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
        Target delta, in (0, 1).
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
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if compositions < 1:
        raise ValueError(f"compositions must be >= 1, got {compositions}")
    single = get_sigma_gaussian(epsilon, delta) * _SAFETY
    while get_epsilon_gaussian(single, delta) > epsilon:
        single *= _SAFETY
    return single * compositions**0.5


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
