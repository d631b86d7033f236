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
is kept: a part's single-event distribution, its self-composition and the
prefixes of the composition. A history that differs from the last one in its
last part's count rebuilds only that part's self-composition and the one
composition after it.

Only the event kinds of :func:`_handled` are handled here; a history with
any other kind (or a non-private event, or a count below 1) is left to the
accountant, before anything is built.

What is kept is bounded by its memory, 64 MB in all: one
distribution of a long, wide history can take tens of MB (two arrays of a
float per grid step of its loss support), and a cache bounded by count held
gigabytes in a reviewer's test.

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
from collections.abc import Hashable

from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld.pld_pmf import SparsePLDPmf
from dp_accounting.privacy_accountant import NeighboringRelation

from .events import event_from_dict

__all__ = ["composed_pld"]

PLD = pld_lib.PrivacyLossDistribution

# Single events, parts (self-compositions) and prefixes of compositions,
# kept by memory: a single subsampled Gaussian of the SGD steps holds about
# 5e3 grid points, a part or prefix of its deletions 0.1-0.4 MB, five
# thousand steps of a subsampled Gaussian of multiplier 0.9 about 50 MB.
_KEPT_BYTES = 64 << 20
# What a kept distribution costs besides its points (measured about 3 KB for
# one of a few points: objects, key, the table's node), and a sparse point.
_ITEM_BYTES = 4096
_SPARSE_POINT_BYTES = 100


class _Kept:
    """Distributions kept by key, the least recently used dropped first
    once they hold more than ``budget`` bytes (one larger than that is not
    kept). Thread-safe."""

    def __init__(self, budget: int):
        self._budget = budget
        self._items: OrderedDict[Hashable, tuple[PLD, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> "PLD | None":
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, pld: PLD) -> None:
        size = _nbytes(pld)
        if size > self._budget:
            return
        with self._lock:
            previous = self._items.pop(key, None)
            if previous is not None:
                self._bytes -= previous[1]
            self._items[key] = (pld, size)
            self._bytes += size
            while self._bytes > self._budget:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


_KEPT = _Kept(_KEPT_BYTES)


def _nbytes(pld: PLD) -> int:
    """The memory ``pld`` holds: 8 bytes a grid point of a dense PMF, about
    100 a point of a sparse one (a dictionary entry), and ``_ITEM_BYTES``
    for the objects and the key around them. dp_accounting exposes no size
    on the distribution itself, so this reads its private PMF attributes; if
    they are not there, the distribution counts as too large to keep
    (slower, never wrong)."""
    try:
        pmfs = (pld._pmf_remove,) if pld._symmetric else (pld._pmf_remove, pld._pmf_add)
        points = sum(
            int(pmf.size) * (_SPARSE_POINT_BYTES if isinstance(pmf, SparsePLDPmf) else 8)
            for pmf in pmfs
        )
    except AttributeError:
        return _KEPT_BYTES + 1
    return _ITEM_BYTES + points


def composed_pld(
    parts: tuple[tuple[str, int], ...], step: float, relation: NeighboringRelation
) -> "PLD | None":
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
        asks the accountant), decided before anything is built.
    """
    if not all(count >= 1 and _handled(_event_of(key), relation) for key, count in parts):
        return None
    # The accountant starts from the identity and composes each part onto
    # what it holds, left to right: the longest prefix composed before is
    # taken up from there.
    start, pld = 0, None
    for end in range(len(parts), 0, -1):
        pld = _KEPT.get(("prefix", parts[:end], step, relation))
        if pld is not None:
            start = end
            break
    if pld is None:
        pld = pld_lib.identity(value_discretization_interval=step)
    for end in range(start + 1, len(parts) + 1):
        pld = pld.compose(_part_pld(*parts[end - 1], step, relation))
        _KEPT.put(("prefix", parts[:end], step, relation), pld)
    return pld


def _clear_caches() -> None:
    """Forget every kept distribution (for tests)."""
    _KEPT.clear()


def _handled(event: dp_event.DpEvent, relation: NeighboringRelation) -> bool:
    """Whether :func:`_part_pld` builds ``event`` as the accountant does:
    a Gaussian, a Poisson-subsampled Gaussian, and under add/remove a
    Laplace or a discrete Laplace, each with noise (and a sampling rate)
    above 0."""
    if isinstance(event, dp_event.GaussianDpEvent):
        return event.noise_multiplier > 0
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        inner = event.event
        return (
            isinstance(inner, dp_event.GaussianDpEvent)
            and event.sampling_probability > 0
            and inner.noise_multiplier > 0
        )
    if relation is not NeighboringRelation.ADD_OR_REMOVE_ONE:
        return False
    if isinstance(event, dp_event.LaplaceDpEvent):
        return event.noise_multiplier > 0
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent):
        return event.noise_parameter > 0
    return False


def _part_pld(key: str, count: int, step: float, relation: NeighboringRelation) -> PLD:
    """``count`` compositions of one :func:`_handled` leaf event, built by
    the calls ``PLDAccountant`` makes for it (and kept)."""
    kept = _KEPT.get(("part", key, count, step, relation))
    if kept is not None:
        return kept
    event = _event_of(key)
    if isinstance(event, dp_event.GaussianDpEvent):
        # The accountant composes c Gaussians as one, of multiplier s / sqrt(c).
        part = pld_lib.from_gaussian_mechanism(
            standard_deviation=event.noise_multiplier / math.sqrt(count),
            value_discretization_interval=step,
            neighboring_relation=relation,
        )
    else:
        part = _single_pld(key, step, relation).self_compose(count)
    _KEPT.put(("part", key, count, step, relation), part)
    return part


def _single_pld(key: str, step: float, relation: NeighboringRelation) -> PLD:
    """One :func:`_handled` leaf event that the accountant self-composes (kept)."""
    kept = _KEPT.get(("single", key, step, relation))
    if kept is None:
        kept = _build_single(_event_of(key), step, relation)
        _KEPT.put(("single", key, step, relation), kept)
    return kept


def _build_single(event: dp_event.DpEvent, step: float, relation: NeighboringRelation) -> PLD:
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=event.event.noise_multiplier,
            value_discretization_interval=step,
            sampling_prob=event.sampling_probability,
            neighboring_relation=relation,
        )
    if isinstance(event, dp_event.LaplaceDpEvent):
        return pld_lib.from_laplace_mechanism(
            parameter=event.noise_multiplier, value_discretization_interval=step
        )
    return pld_lib.from_discrete_laplace_mechanism(
        parameter=event.noise_parameter,
        sensitivity=event.sensitivity,
        value_discretization_interval=step,
    )


def _event_of(key: str) -> dp_event.DpEvent:
    """The event whose :func:`~sklearn_dpu.privacy.events.event_key` is ``key``."""
    return event_from_dict(json.loads(key))
