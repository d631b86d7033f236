"""How ``dp_accounting`` events compose into the (epsilon, delta) reported to users.

This module decides *how to account*; the mechanisms and ledgers only record
*what happened* as ``dp_accounting`` events.

All of sklearn_dpu uses the add/remove-one neighbouring relation: a record is
either in the data set or not, which is also what a deletion changes.

Gaussian-only histories are composed exactly in closed form [DRS22]_ and
converted with the analytic formula of [BW18]_ (both in ``dp_accounting``);
anything else goes through the PLD accountant, which is numerically tight
(digest ``anchors.md`` §5.1), and the RDP accountant only for events PLD lacks.

References
----------
.. [BW18] B. Balle and Y.-X. Wang, ICML 2018, Theorem 8.
.. [DRS22] J. Dong, A. Roth and W. Su, JRSS-B 2022, Corollary 3.3.
"""

import functools
import math
from collections.abc import Iterable

from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import RdpAccountant

__all__ = ["NEIGHBORING_RELATION", "epsilon_spent", "gaussian_precision"]

NEIGHBORING_RELATION = NeighboringRelation.ADD_OR_REMOVE_ONE


def gaussian_precision(events: Iterable[dp_event.DpEvent]) -> float | None:
    """Sum of ``count / multiplier**2`` if every event is Gaussian, else None."""
    total = 0.0
    for event in events:
        count = 1
        while isinstance(event, dp_event.SelfComposedDpEvent):
            count *= event.count
            event = event.event
        if isinstance(event, dp_event.NoOpDpEvent):
            continue
        if isinstance(event, dp_event.ComposedDpEvent):
            inner = gaussian_precision(event.events)
            if inner is None:
                return None
            total += count * inner
        elif isinstance(event, dp_event.GaussianDpEvent):
            if event.noise_multiplier == 0:
                return math.inf
            total += count / event.noise_multiplier**2
        else:
            return None
    return total


@functools.lru_cache(maxsize=1024)
def _gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """Cached ``get_epsilon_gaussian``: a root search, pure in its arguments, that
    ledgers evaluate after every release."""
    return float(get_epsilon_gaussian(noise_multiplier, delta))


def epsilon_spent(events: Iterable[dp_event.DpEvent], delta: float) -> float:
    """Epsilon at ``delta`` of the adaptive composition of ``events``.

    Parameters
    ----------
    events : iterable of dp_accounting.dp_event.DpEvent
    delta : float

    Returns
    -------
    float
        0 for an empty history, ``inf`` if an event is not private.
    """
    events = list(events)
    precision = gaussian_precision(events)
    if precision is not None:
        if precision == 0:
            return 0.0
        if math.isinf(precision):
            return math.inf
        return _gaussian_epsilon(precision**-0.5, delta)
    composed = dp_event.ComposedDpEvent(events)
    pld = PLDAccountant(NEIGHBORING_RELATION)
    if pld.supports(composed):
        return float(pld.compose(composed).get_epsilon(delta))
    rdp = RdpAccountant(neighboring_relation=NEIGHBORING_RELATION)
    return float(rdp.compose(composed).get_epsilon(delta))
