"""How ``dp_accounting`` events compose into the (epsilon, delta) reported to users.

This module decides *how to account*; the mechanisms and ledgers only record
*what happened* as ``dp_accounting`` events.

All of sklearn_dpu uses the add/remove-one neighbouring relation: a record is
either in the data set or not, which is also what a deletion changes.

Gaussian-only histories are composed exactly in closed form [DRS22]_ and
converted with the analytic formula of [BW18]_ (both in ``dp_accounting``);
anything else goes through the PLD accountant, tight up to its grid and an
upper bound at any grid step (pessimistic discretization, [DGKKM22]_), and the
RDP accountant [Mir17]_ for events PLD lacks or losses too wide for its grid.

References
----------
.. [BW18] B. Balle and Y.-X. Wang, ICML 2018, Theorem 8.
.. [DGKKM22] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar and P. Manurangsi,
   "Connect the dots: tighter discrete approximations of privacy loss
   distributions", PoPETs 2022, Section 4.
.. [DRS22] J. Dong, A. Roth and W. Su, JRSS-B 2022, Corollary 3.3.
.. [Mir17] I. Mironov, "Renyi differential privacy", CSF 2017, Proposition 3.
"""

import json
import math
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
import scipy.optimize
import scipy.special
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from dp_accounting.privacy_accountant import NeighboringRelation, UnsupportedEventError
from dp_accounting.rdp import RdpAccountant

from ._pld_composition import composed_pld
from .events import event_from_dict, event_key

__all__ = [
    "NEIGHBORING_RELATION",
    "analytic_gaussian_epsilon",
    "epsilon_of_precision",
    "epsilon_spent",
    "epsilon_upper_bound",
    "gaussian_precision",
    "group_events",
]

NEIGHBORING_RELATION = NeighboringRelation.ADD_OR_REMOVE_ONE


def _gaussian_log_delta(sigma: float, epsilon: float) -> float:
    # log delta(epsilon) of the Gaussian mechanism with noise multiplier sigma
    # ([BW18]_ Thm 8): Phi(1/(2 sigma) - eps sigma) - e^eps Phi(-1/(2 sigma) - eps sigma),
    # in logs. scipy.special.log_ndtr is the function scipy.stats.norm.logcdf
    # evaluates, without the distribution machinery's per-call overhead.
    t_star = epsilon * sigma + 1.0 / (2.0 * sigma)
    x = scipy.special.log_ndtr(1.0 / sigma - t_star)
    y = epsilon + scipy.special.log_ndtr(-t_star)
    return float(x + np.log1p(-np.exp(y - x))) if y <= x else -math.inf


def analytic_gaussian_epsilon(sigma: float, delta: float, tol: float = 1e-12) -> float:
    """Smallest epsilon at which the Gaussian mechanism is (epsilon, delta)-DP.

    The analytic Gaussian mechanism's exact privacy profile ([BW18]_ Thm 8)
    inverted by Brent's method to ``tol``: the same search as
    ``dp_accounting.gaussian_mechanism.get_epsilon_gaussian`` (bracket
    ``[0, 1]`` widened tenfold until it holds the root), on the same
    function values, about 50 times faster because each evaluation calls
    ``scipy.special.log_ndtr`` directly. A deletion's report recomposes the
    whole ledger, so this sits on the deletion path.

    Parameters
    ----------
    sigma : float
        Noise standard deviation over the L2 sensitivity (noise multiplier), >= 0.
    delta : float
        In [0, 1].
    tol : float, default=1e-12
        Absolute tolerance of the root search.

    Returns
    -------
    float
        0 when the mechanism is (0, delta)-DP, ``inf`` for ``sigma = 0`` or
        ``delta = 0``.

    Examples
    --------
    >>> round(analytic_gaussian_epsilon(1.0, 1e-5), 6)
    4.377178
    """
    if sigma < 0:
        raise ValueError(f"sigma must be non-negative, got sigma={sigma}.")
    if not 0 <= delta <= 1:
        raise ValueError(f"delta must be in [0, 1], got delta={delta}.")
    if delta == 1 or sigma == math.inf:
        return 0.0
    if sigma == 0 or delta == 0:
        return math.inf
    log_delta = math.log(delta)
    if _gaussian_log_delta(sigma, 0.0) < log_delta:
        return 0.0
    low, high = 0.0, 1.0
    while _gaussian_log_delta(sigma, high) > log_delta:
        low, high = high, high * 10.0
    return float(
        scipy.optimize.brentq(
            lambda eps: _gaussian_log_delta(sigma, eps) - log_delta, low, high, xtol=tol
        )
    )


def gaussian_precision(events: Iterable[dp_event.DpEvent], start: float = 0.0) -> float | None:
    """Sum of ``count / multiplier**2`` if every event is Gaussian, else None.

    ``start``: the finite precision of events composed before these (the
    sum goes on from it, in order: ``gaussian_precision(a + b)`` is
    ``gaussian_precision(b, start=gaussian_precision(a))`` when the latter
    is finite).
    """
    total = start
    for event in events:
        count = 1
        while isinstance(event, dp_event.SelfComposedDpEvent):
            count *= event.count
            event = event.event
        if count == 0 or isinstance(event, dp_event.NoOpDpEvent):
            continue  # composed zero times: nothing released
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
    # dp_accounting's search meets log1p(-1) = -inf for very wide noise and
    # handles it; the errstate keeps its RuntimeWarnings from reaching users.
    with np.errstate(all="ignore"):
        return analytic_gaussian_epsilon(precision**-0.5, delta)


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
        return epsilon_of_precision(precision, delta)
    return _epsilon_of_coalesced(_coalesced_key(events), float(delta))


def epsilon_of_precision(precision: float, delta: float) -> float:
    """Epsilon at ``delta`` of a Gaussian-only history of the given precision
    (:func:`gaussian_precision`): what :func:`epsilon_spent` gives for it."""
    if precision == 0:
        return 0.0
    if math.isinf(precision):
        return math.inf
    return _gaussian_epsilon(precision, delta)


def epsilon_upper_bound(
    events: Iterable[dp_event.DpEvent],
    bounds: Iterable[tuple[float, float]],
    delta: float,
    precision: float | None = None,
) -> float:
    """Epsilon at ``delta`` of ``events`` composed with releases known only as (eps_i, delta_i)-DP.

    Basic composition [DR14]_ (Theorem 3.16) of the events' exact composition,
    taken at ``delta - sum(delta_i)``, with the bounded releases:
    ``epsilon_spent(events, delta - sum delta_i) + sum eps_i``. ``inf`` when
    the bounds use up ``delta``. ``precision``, when given, must be
    :func:`gaussian_precision` of ``events`` (a caller that keeps it saves
    summing them again).

    References
    ----------
    .. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of
       differential privacy", 2014, Theorem 3.16.
    """

    def spent(at: float) -> float:
        if precision is not None:
            return epsilon_of_precision(precision, at)
        return epsilon_spent(events, at)

    bounds = list(bounds)
    if not bounds:
        return spent(delta)
    rest = delta - sum(d for _, d in bounds)
    if rest <= 0:
        return math.inf
    return spent(rest) + sum(e for e, _ in bounds)


def _leaves(event: dp_event.DpEvent, count: int, out: Counter, by_key: dict) -> None:
    """Multiset of the non-composition events of ``event`` (with multiplicity)."""
    if isinstance(event, dp_event.SelfComposedDpEvent):
        _leaves(event.event, count * event.count, out, by_key)
    elif isinstance(event, dp_event.ComposedDpEvent):
        for inner in event.events:
            _leaves(inner, count, out, by_key)
    elif count and not isinstance(event, dp_event.NoOpDpEvent):
        # An event composed zero times releases nothing: it gets no part
        # (a part of count 0 was composed once, as if released).
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


def _parts_of(key: str) -> tuple[tuple[str, int], ...]:
    """The ``(leaf event key, count)`` pairs of a :func:`_coalesced_key`."""
    return tuple((leaf, count) for leaf, count in json.loads(key))


def _from_parts(parts: tuple[tuple[str, int], ...]) -> dp_event.ComposedDpEvent:
    """The composition :func:`_parts_of` a key describes."""
    events = []
    for leaf, count in parts:
        event = event_from_dict(json.loads(leaf))
        if count > 1:
            event = dp_event.SelfComposedDpEvent(event, count)
        events.append(event)
    return dp_event.ComposedDpEvent(events)


# dp_accounting's default PLD grid step. A PLD holds one point per step over
# the support of an event's privacy loss, so an event whose loss spans a range
# W needs W / step points: a subsampled Gaussian with noise multiplier 0.01
# spans ~1.2e4 nats, 1.2e8 points, tens of GiB. Above _PLD_MAX_WIDTH the step
# grows to W / _PLD_COARSE_POINTS (a few times cheaper per composition, for
# an epsilon that differs in the seventh digit).
_PLD_STEP = 1e-4
_PLD_MAX_WIDTH = 20.0
_PLD_COARSE_POINTS = 1e5
# Above this step (nats) the PLD grid overflows (exp of the step); events that
# wide are beyond epsilon ~1e5 and are accounted by RDP instead.
_PLD_MAX_STEP = 1.0
# Gaussian tails kept by the PLD, in standard deviations (dp_accounting
# truncates at a tail mass far below 1e-15, about 8 standard deviations).
_TAIL_SDS = 8.0


def _loss_width(event: dp_event.DpEvent) -> float:
    """An estimate of the width of one leaf event's privacy-loss support, in nats.

    The loss of a Gaussian mechanism (sensitivity 1, noise multiplier s) at
    output x is (1 - 2x) / (2 s**2); over x within _TAIL_SDS standard
    deviations of either mean it spans (1 + 2 _TAIL_SDS s) / s**2. Laplace
    with scale b spans 2 / b, the pure-DP (discrete Laplace) event 2 epsilon.
    Subsampling only shrinks the loss. Used only to size the PLD grid.
    """
    while isinstance(
        event, dp_event.PoissonSampledDpEvent | dp_event.SampledWithoutReplacementDpEvent
    ):
        event = event.event
    if isinstance(event, dp_event.GaussianDpEvent) and event.noise_multiplier > 0:
        s = event.noise_multiplier
        return (1.0 + 2.0 * _TAIL_SDS * s) / s**2
    if isinstance(event, dp_event.LaplaceDpEvent) and event.noise_multiplier > 0:
        return 2.0 / event.noise_multiplier
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent):
        return 2.0 * event.noise_parameter * event.sensitivity
    return 0.0


def _pld_step(composed: dp_event.ComposedDpEvent) -> float:
    """PLD grid step for ``composed`` (a coalesced history): the default one
    unless a leaf's loss is so wide that the default grid would not fit in memory.

    Any step gives a valid upper bound: the PLD accountant rounds each loss
    up to the grid (pessimistic estimate; Doroshenko et al. 2022, Section 4),
    so a coarser grid only loosens epsilon. Above the threshold (a Gaussian
    noise multiplier below ~0.86, epsilon above ~6 at delta 1e-5) a step of
    width / 1e5 changes epsilon by little and makes each composition several
    times cheaper. Measured, one Gaussian with multiplier 0.5 (epsilon ~10)
    and a discrete Laplace: 10.3092457 at step 1e-4, 10.3092460 at 1e-3
    (0.55 s against 0.05 s); multiplier 0.21: 31.2989524 and 31.2989525. And
    at delta 1e-5, 200 Poisson-sampled Gaussians (multiplier 0.1, rate
    0.05): 1213.3368 at both step 1e-4 and 2.6e-3 (27 s and 1.7 GB
    against 1.6 s and 0.16 GB); 1000 of them at rate 0.001: 341.2503 against
    341.2512 (17 s against 0.5 s).
    """
    width = max(
        (
            _loss_width(e.event if isinstance(e, dp_event.SelfComposedDpEvent) else e)
            for e in composed.events
        ),
        default=0.0,
    )
    if width <= _PLD_MAX_WIDTH:
        return _PLD_STEP
    return width / _PLD_COARSE_POINTS


def _pure_epsilon(event: dp_event.DpEvent) -> float | None:
    """Epsilon of a pure-DP leaf event (discrete Laplace, Laplace), else None."""
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent):
        return float(event.noise_parameter) * float(event.sensitivity)
    if isinstance(event, dp_event.LaplaceDpEvent) and event.noise_multiplier > 0:
        return 1.0 / float(event.noise_multiplier)
    return None


@lru_cache(maxsize=256)
def _epsilon_of_coalesced(key: str, delta: float) -> float:
    """The smaller of two valid upper bounds on the composition's epsilon:
    the whole history by PLD (or RDP), and basic composition (Dwork & Roth
    2014, Thm 3.16) of its pure-DP events' epsilons with the rest at ``delta``.

    The second is the tight one when the pure events are large (a bound
    released for a share of a large epsilon: the PLD's coarse grid then
    overshoots their exact sum) or the whole is tiny (the grid's step, 1e-4
    nats, is then larger than epsilon), and the only one when RDP, the
    fallback for very wide losses, cannot compose them (it has no discrete
    Laplace).
    """
    parts = _parts_of(key)
    composed = _from_parts(parts)
    pure, rest = 0.0, []
    for event in composed.events:
        count, leaf = 1, event
        if isinstance(leaf, dp_event.SelfComposedDpEvent):
            count, leaf = leaf.count, leaf.event
        epsilon = _pure_epsilon(leaf)
        if epsilon is None:
            rest.append(event)
        else:
            pure += count * epsilon
    if pure == 0.0:
        return _epsilon_of_events(composed, parts, delta)
    try:
        whole = _epsilon_of_events(composed, parts, delta)
    except UnsupportedEventError:  # RDP has no discrete Laplace: the split only
        whole = math.inf
    # The rest by epsilon_spent: in closed form when it is all Gaussian, which
    # the PLD's grid (1e-4 nats) cannot resolve at a small epsilon.
    split = pure + epsilon_spent(rest, delta) if rest else pure
    return min(whole, split)


def _epsilon_of_events(
    composed: dp_event.ComposedDpEvent, parts: tuple[tuple[str, int], ...], delta: float
) -> float:
    # Pure function of its arguments (the accountants are deterministic); the
    # caller memoizes it, which spares recomposing an unchanged ledger.
    # ``parts`` are ``composed``'s (_parts_of its coalesced key): they name
    # the cached distributions composed_pld builds it from, the accountant's
    # own bits.
    step = _pld_step(composed)
    if step <= _PLD_MAX_STEP:
        try:
            with np.errstate(all="ignore"):
                pld = composed_pld(parts, step, NEIGHBORING_RELATION)
                if pld is not None:
                    return float(pld.get_epsilon_for_delta(delta))
                accountant = PLDAccountant(NEIGHBORING_RELATION, value_discretization_interval=step)
                if accountant.supports(composed):
                    return float(accountant.compose(composed).get_epsilon(delta))
        except (OverflowError, FloatingPointError):  # pragma: no cover - guarded by the step
            pass
    # RDP [Mir17]_: a valid, looser upper bound, in closed form per order, so
    # its cost does not grow with the privacy loss.
    rdp = RdpAccountant(neighboring_relation=NEIGHBORING_RELATION)
    with np.errstate(all="ignore"):
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
