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

import json
import math
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant
from dp_accounting.privacy_accountant import NeighboringRelation
from dp_accounting.rdp import RdpAccountant

from .events import event_from_dict, event_key

__all__ = [
    "NEIGHBORING_RELATION",
    "epsilon_spent",
    "epsilon_upper_bound",
    "gaussian_precision",
    "group_events",
]

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


@lru_cache(maxsize=1024)
def _gaussian_epsilon(precision: float, delta: float) -> float:
    # Pure function of two floats, and the same values recur (one release of
    # a given estimator, a deletion's re-release), so caching is exact.
    return float(get_epsilon_gaussian(precision**-0.5, delta))


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
        return _gaussian_epsilon(precision, delta)
    return _epsilon_of_coalesced(_coalesced_key(events), float(delta))


def epsilon_upper_bound(
    events: Iterable[dp_event.DpEvent], bounds: Iterable[tuple[float, float]], delta: float
) -> float:
    """Epsilon at ``delta`` of ``events`` composed with releases known only as (eps_i, delta_i)-DP.

    Basic composition [DR14]_ (Theorem 3.16) of the events' exact composition,
    taken at ``delta - sum(delta_i)``, with the bounded releases:
    ``epsilon_spent(events, delta - sum delta_i) + sum eps_i``. ``inf`` when
    the bounds use up ``delta``.

    References
    ----------
    .. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of
       differential privacy", 2014, Theorem 3.16.
    """
    bounds = list(bounds)
    if not bounds:
        return epsilon_spent(events, delta)
    rest = delta - sum(d for _, d in bounds)
    if rest <= 0:
        return math.inf
    return epsilon_spent(events, rest) + sum(e for e, _ in bounds)


def _leaves(event: dp_event.DpEvent, count: int, out: Counter, by_key: dict) -> None:
    """Multiset of the non-composition events of ``event`` (with multiplicity)."""
    if isinstance(event, dp_event.SelfComposedDpEvent):
        _leaves(event.event, count * event.count, out, by_key)
    elif isinstance(event, dp_event.ComposedDpEvent):
        for inner in event.events:
            _leaves(inner, count, out, by_key)
    elif not isinstance(event, dp_event.NoOpDpEvent):
        key = event_key(event)
        out[key] += count
        by_key[key] = event


def _coalesced_key(events: list) -> str:
    """A canonical key for the composition of ``events``.

    Composition is associative and commutative, so a history is determined by
    the multiset of its non-composed events. Grouping equal events into one
    ``SelfComposedDpEvent`` lets PLD self-compose them by repeated squaring
    instead of building one distribution per ledger entry (estimators that
    release many identical steps would otherwise pay per entry).
    """
    counts: Counter = Counter()
    _leaves(dp_event.ComposedDpEvent(list(events)), 1, counts, {})
    return json.dumps(sorted(counts.items()))


def _from_key(key: str) -> dp_event.DpEvent:
    parts = []
    for leaf, count in json.loads(key):
        event = event_from_dict(json.loads(leaf))
        if count > 1:
            event = dp_event.SelfComposedDpEvent(event, count)
        parts.append(event)
    return dp_event.ComposedDpEvent(parts)


@lru_cache(maxsize=256)
def _epsilon_of_coalesced(key: str, delta: float) -> float:
    # Pure function of its arguments (the accountants are deterministic), so
    # memoizing it changes no result; it spares recomposing an unchanged
    # ledger each time it is read.
    composed = _from_key(key)
    pld = PLDAccountant(NEIGHBORING_RELATION)
    if pld.supports(composed):
        return float(pld.compose(composed).get_epsilon(delta))
    rdp = RdpAccountant(neighboring_relation=NEIGHBORING_RELATION)
    return float(rdp.compose(composed).get_epsilon(delta))


def group_events(event: dp_event.DpEvent, group_size: int) -> dp_event.DpEvent:
    """The same mechanism seen by a group of ``group_size`` records.

    Adding or removing k records moves a sum of contributions bounded by C by
    at most k C, so a Gaussian or Laplace noise multiplier is divided by k
    (exactly); a pure epsilon-DP event becomes (k epsilon)-DP (group privacy,
    Dwork & Roth Thm 2.2). Used to state what a deletion of k samples
    leaves of a release that cannot be recomputed.

    Raises
    ------
    ValueError
        For an event whose group behaviour is not known here.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if isinstance(event, dp_event.NoOpDpEvent):
        return event
    if isinstance(event, dp_event.GaussianDpEvent):
        return dp_event.GaussianDpEvent(event.noise_multiplier / group_size)
    if isinstance(event, dp_event.LaplaceDpEvent):
        return dp_event.LaplaceDpEvent(event.noise_multiplier / group_size)
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent) and event.sensitivity == 1:
        return dp_event.DiscreteLaplaceDpEvent(event.noise_parameter * group_size, 1)
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        # Amplification by subsampling is not worked out for groups here;
        # subsampling can only help, so dropping it is a valid upper bound.
        return group_events(event.event, group_size)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return dp_event.SelfComposedDpEvent(group_events(event.event, group_size), event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        return dp_event.ComposedDpEvent([group_events(e, group_size) for e in event.events])
    raise ValueError(f"no group-privacy rule for {type(event).__name__}")
