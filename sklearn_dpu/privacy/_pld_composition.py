"""The privacy loss distribution of a coalesced history, from cached parts.

:class:`dp_accounting.pld.PLDAccountant` builds the distribution of every
event afresh on each call. An estimator's ledger changes a little at a time:
an :class:`~sklearn_dpu.UnlearnableSGDClassifier` deletion adds one
Poisson-subsampled Gaussian step to a history of a few distinct events, and
its report states the whole history's epsilon. Rebuilding the distribution
of one subsampled Gaussian costs about 30 ms (its privacy loss inverted
point by point on the grid), so rebuilding all of them made such a deletion
about 250 times dearer than one that adds nothing.

:func:`composed_pld` builds the same distribution as ``PLDAccountant``, by
the same ``dp_accounting`` calls in the same order, so the epsilon it gives
is bit for bit the accountant's (tested against it); but every call's result
is cached: a part's single-event distribution, its self-composition and the
prefixes of the composition. A history that differs from the last one in its
last part's count rebuilds only that part's self-composition and the one
composition after it.

Only the event kinds of :func:`_part_pld` are handled here; a history with
any other kind (or a non-private event) is left to the accountant.

References
----------
.. [DGKKM22] V. Doroshenko, B. Ghazi, P. Kamath, R. Kumar and P. Manurangsi,
   "Connect the dots: tighter discrete approximations of privacy loss
   distributions", PoPETs 2022, Section 4 (the pessimistic discretization
   that makes any composition order and grid an upper bound; here the order
   and grid are the accountant's own).
"""

import json
import math
import threading
from collections import OrderedDict
from functools import lru_cache

from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.privacy_accountant import NeighboringRelation

from .events import event_from_dict

__all__ = ["composed_pld"]

# A distribution holds two arrays (remove and add) of one float per grid
# step of its loss support: a single subsampled Gaussian about 5e3 points at
# the SGD steps' multipliers and at most a few 1e5 on the coarse grid of wide
# losses (_pld_step); a part or a prefix 7e4 after a thousand such steps and
# up to about 1e6 for the widest histories measured (multiplier 0.1: 7.5 MB).
# What a deletion needs again is one history's few parts and their prefixes
# (the same with one count raised), so parts and prefixes keep 8 each: of
# the order of 100 MB held for histories that wide, about 5 MB for the SGD's.
_SINGLE_CACHE = 16
_CHAIN_CACHE = 8
# Compositions of prefixes of histories, the most recently kept last.
_PREFIXES: "OrderedDict[tuple, pld_lib.PrivacyLossDistribution]" = OrderedDict()
_PREFIX_LOCK = threading.Lock()


def composed_pld(
    parts: tuple[tuple[str, int], ...], step: float, relation: NeighboringRelation
) -> "pld_lib.PrivacyLossDistribution | None":
    """The PLD of the composition of ``parts``, as ``PLDAccountant`` builds it.

    Parameters
    ----------
    parts : tuple of (str, int)
        The history coalesced: each distinct leaf event's
        :func:`~sklearn_dpu.privacy.events.event_key` and how many times it
        occurs, in the order the accountant composes them.
    step : float
        The grid step (``value_discretization_interval``).
    relation : NeighboringRelation

    Returns
    -------
    PrivacyLossDistribution or None
        ``None`` when a part is of a kind not handled here (the caller then
        asks the accountant).
    """
    pieces = [_part_pld(key, count, step, relation) for key, count in parts]
    if any(piece is None for piece in pieces):
        return None
    # The accountant starts from the identity and composes each part onto
    # what it holds, left to right: the longest prefix composed before is
    # taken up from there.
    start, pld = 0, None
    with _PREFIX_LOCK:
        for end in range(len(parts), 0, -1):
            pld = _PREFIXES.get((parts[:end], step, relation))
            if pld is not None:
                start = end
                break
    if pld is None:
        pld = pld_lib.identity(value_discretization_interval=step)
    for end in range(start + 1, len(parts) + 1):
        pld = pld.compose(pieces[end - 1])
        _remember((parts[:end], step, relation), pld)
    return pld


def _remember(key: tuple, pld: "pld_lib.PrivacyLossDistribution") -> None:
    """Keep ``pld`` as the composition of the prefix ``key``, dropping the
    least recently kept beyond ``_CHAIN_CACHE``."""
    with _PREFIX_LOCK:
        _PREFIXES[key] = pld
        _PREFIXES.move_to_end(key)
        while len(_PREFIXES) > _CHAIN_CACHE:
            _PREFIXES.popitem(last=False)


def _clear_caches() -> None:
    """Forget every cached distribution (for tests)."""
    with _PREFIX_LOCK:
        _PREFIXES.clear()
    _part_pld.cache_clear()
    _single_pld.cache_clear()


@lru_cache(maxsize=_CHAIN_CACHE)
def _part_pld(
    key: str, count: int, step: float, relation: NeighboringRelation
) -> "pld_lib.PrivacyLossDistribution | None":
    """``count`` compositions of one leaf event, built by the calls
    ``PLDAccountant`` makes for it; ``None`` for a kind not handled here."""
    event = _event_of(key)
    if isinstance(event, dp_event.GaussianDpEvent):
        if not event.noise_multiplier > 0:
            return None
        # The accountant composes c Gaussians as one, of multiplier s / sqrt(c).
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=event.noise_multiplier / math.sqrt(count),
            value_discretization_interval=step,
            neighboring_relation=relation,
        )
    single = _single_pld(key, step, relation)
    return None if single is None else single.self_compose(count)


@lru_cache(maxsize=_SINGLE_CACHE)
def _single_pld(
    key: str, step: float, relation: NeighboringRelation
) -> "pld_lib.PrivacyLossDistribution | None":
    """One leaf event that the accountant self-composes; ``None`` for a kind
    not handled here."""
    event = _event_of(key)
    if isinstance(event, dp_event.PoissonSampledDpEvent) and isinstance(
        event.event, dp_event.GaussianDpEvent
    ):
        if not (event.sampling_probability > 0 and event.event.noise_multiplier > 0):
            return None
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=event.event.noise_multiplier,
            value_discretization_interval=step,
            sampling_prob=event.sampling_probability,
            neighboring_relation=relation,
        )
    if relation is not NeighboringRelation.ADD_OR_REMOVE_ONE:
        return None
    if isinstance(event, dp_event.LaplaceDpEvent) and event.noise_multiplier > 0:
        return pld_lib.from_laplace_mechanism(
            parameter=event.noise_multiplier, value_discretization_interval=step
        )
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent) and event.noise_parameter > 0:
        return pld_lib.from_discrete_laplace_mechanism(
            parameter=event.noise_parameter,
            sensitivity=event.sensitivity,
            value_discretization_interval=step,
        )
    return None


def _event_of(key: str) -> dp_event.DpEvent:
    """The event whose :func:`~sklearn_dpu.privacy.events.event_key` is ``key``."""
    return event_from_dict(json.loads(key))
