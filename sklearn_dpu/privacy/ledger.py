"""What an estimator released: a list of :class:`Release` records.

A record says which mechanism ran, its ``dp_accounting`` event, and which
chunks of the data it touched. Chunks are the blocks in which data arrived
(``fit`` is chunk 1, each later ``partial_fit`` call the next one). Knowing the
chunks lets the ledger apply parallel composition: a record's privacy loss is
the composition of only the releases that touched its chunk, so releases built
by tree aggregation cost a logarithmic, not linear, number of compositions.

Records are stored in estimators (``privacy_ledger_``) as plain dicts, so they
survive pickling, JSON and skops without trusting any extra type. Decoding an
event only ever instantiates classes of ``dp_accounting.dp_event``.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from dp_accounting import dp_event

from .accounting import (
    NEIGHBORING_RELATION,
    epsilon_of_precision,
    epsilon_spent,
    gaussian_precision,
)
from .events import event_from_dict, event_key, event_to_dict

__all__ = [
    "ApproximateDPBound",
    "DecodedLedger",
    "PrivacySpent",
    "Release",
    "ReleasePlan",
    "charge_increment",
    "event_from_dict",
    "event_to_dict",
    "privacy_spent",
    "worst_case_events",
]


# Chunks are numbered well inside int64, so that a sweep over them never overflows.
_CHUNK_LIMIT = 1 << 62


class PrivacySpent(NamedTuple):
    """The (epsilon, delta) of everything an estimator or budget released."""

    epsilon: float
    delta: float


@dataclass(frozen=True)
class Release:
    """One release: the mechanism, its event and the chunks whose records it used.

    Parameters
    ----------
    mechanism : str
        What was released and how, in words.
    event : dp_accounting.dp_event.DpEvent
    chunks : tuple of (int, int)
        First and last chunk (inclusive) whose records the release depends on:
        integers, the first not after the last, below ``2**62`` in absolute
        value (else ValueError).
    reference : str
        The theorem the privacy of this release rests on.
    """

    mechanism: str
    event: dp_event.DpEvent
    chunks: tuple[int, int]
    reference: str

    def __post_init__(self):
        first, last = self.chunks
        if not (-_CHUNK_LIMIT < first <= last < _CHUNK_LIMIT):
            raise ValueError(
                f"a release's chunks are a first and a last chunk, first <= last, below "
                f"2**62 in absolute value; got {self.chunks!r}"
            )

    @classmethod
    def of(
        cls, mechanisms: Any, mechanism: str, chunks: tuple[int, int], reference: str
    ) -> "Release":
        """The record of a release made by ``mechanisms``.

        The event is read from the mechanism objects that draw the noise, so
        the ledger and the noise come from the same numbers.

        Parameters
        ----------
        mechanisms : mechanism or sequence of mechanisms
            Objects with a ``dp_event`` property (see
            :mod:`sklearn_dpu.privacy.mechanisms`); several compose.
        mechanism : str
            What was released and how, in words.
        chunks : tuple of (int, int)
        reference : str

        Examples
        --------
        >>> from sklearn_dpu.privacy.mechanisms import GaussianCount, GaussianSteps
        >>> run = Release.of(
        ...     [GaussianSteps(1.0, 3.0, steps=5), GaussianCount(2.0)],
        ...     "noisy GD and a noised count", (1, 1), "Dwork & Roth 2014, Thm A.1")
        >>> run.event  # doctest: +NORMALIZE_WHITESPACE
        ComposedDpEvent(events=[SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=3.0),
                                count=5), GaussianDpEvent(noise_multiplier=2.0)])
        """
        if hasattr(mechanisms, "dp_event"):
            event = mechanisms.dp_event
        else:
            event = dp_event.ComposedDpEvent([m.dp_event for m in mechanisms])
        return cls(mechanism, event, (int(chunks[0]), int(chunks[1])), reference)

    def to_dict(self) -> dict:
        return {
            "mechanism": self.mechanism,
            "event": event_to_dict(self.event),
            "chunks": [int(self.chunks[0]), int(self.chunks[1])],
            "reference": self.reference,
            "neighboring_relation": NEIGHBORING_RELATION.name,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Release":
        relation = data.get("neighboring_relation", NEIGHBORING_RELATION.name)
        if relation != NEIGHBORING_RELATION.name:
            raise ValueError(
                f"release accounted under {relation}; sklearn_dpu composes only "
                f"{NEIGHBORING_RELATION.name} releases"
            )
        return cls(
            mechanism=data["mechanism"],
            event=event_from_dict(data["event"]),
            chunks=(int(data["chunks"][0]), int(data["chunks"][1])),
            reference=data["reference"],
        )


@dataclass(frozen=True)
class ApproximateDPBound:
    """A planned release known, before any data is read, only to be (epsilon, delta)-DP.

    Some releases have parameters that depend on a noised count drawn during
    ``fit`` (the steps and sampling rate of a run calibrated to a target
    epsilon), so no ``dp_accounting`` event for them exists at planning time;
    their calibration guarantees only ``(epsilon, delta)``. A budget check
    composes such bounds with known events by basic composition
    (:func:`~sklearn_dpu.privacy.accounting.epsilon_upper_bound`), which is
    sound and never below what the exact events will compose to. The ledger
    and the charge always hold the exact events.

    Parameters
    ----------
    epsilon : float
    delta : float
    mechanism : str
        What will be released, in words.
    """

    epsilon: float
    delta: float
    mechanism: str = ""


@dataclass(frozen=True)
class ReleasePlan:
    """What one call (``fit``, ``partial_fit``) will add to ``privacy_ledger_``,
    known before any data is read.

    Made by an estimator's ``_plan_releases`` hook from its parameters and
    public sizes only; the budget check, the charge and the ledger of the call
    all come from it (see :meth:`~sklearn_dpu.base.PrivateEstimatorMixin._run_update`).

    Parameters
    ----------
    releases : tuple of Release
        Entries whose events are known before the data are read.
    bounds : tuple of ApproximateDPBound, default=()
        Entries known only to be (epsilon, delta)-DP before the data are read
        (their events depend on a noised count drawn by the call).
    exact : bool, default=True
        Whether ``releases`` are exactly what the call records. When False
        (always, if there are ``bounds``), ``releases`` and ``bounds`` are
        upper bounds used to refuse the call before any data is read, and the
        call reports the exact entries once it knows them.
    restart : bool, default=False
        The call replaces the ledger (``fit``) instead of extending it.
    """

    releases: tuple[Release, ...]
    bounds: tuple[ApproximateDPBound, ...] = ()
    exact: bool = True
    restart: bool = False

    def __post_init__(self):
        object.__setattr__(self, "releases", tuple(self.releases))
        object.__setattr__(self, "bounds", tuple(self.bounds))
        if self.bounds:
            object.__setattr__(self, "exact", False)

    @property
    def entries(self) -> list:
        """The releases then the bounds, as one list."""
        return [*self.releases, *self.bounds]


def _releases(entries: Iterable) -> list[Release]:
    return [e if isinstance(e, Release) else Release.from_dict(e) for e in entries]


def _worst_case_group(
    chunks: np.ndarray,
    delta: float,
    precision_of: Callable[[np.ndarray], float | None],
    events_of: Callable[[np.ndarray], list],
) -> np.ndarray:
    """Indices (ascending) of the releases that touched the most exposed chunk.

    ``chunks`` holds each release's first and last chunk, shape ``(n, 2)``.
    At every chunk where the releases touching it change (a release's first
    chunk, or the one after its last) the set of releases touching it is a
    group; the candidates are the groups no other group contains, compared
    by Gaussian precision (``precision_of`` a group's indices) when every
    candidate has one, else by the composed epsilon of their events
    (``events_of``). Ties go to the group of the earliest chunk.

    The releases are intervals of chunks, so a group contained in another
    is contained in the next group on that side (every interval through both
    chunks crosses every chunk between them): comparing each group with its
    two neighbours finds the maximal ones, in ``O(groups n)``.
    """
    if not len(chunks):
        return np.zeros(0, dtype=np.intp)
    first, last = chunks[:, 0], chunks[:, 1]
    # The groups in chunk order; two consecutive ones always differ (a release
    # opens or closes at every boundary).
    runs = [(first <= c) & (last >= c) for c in np.unique(np.concatenate([first, last + 1]))]

    def inside(mask: np.ndarray, other: np.ndarray) -> bool:
        return not (mask & ~other).any()

    candidates = [
        np.flatnonzero(mask)
        for j, mask in enumerate(runs)
        if mask.any()
        and not (j > 0 and inside(mask, runs[j - 1]))
        and not (j + 1 < len(runs) and inside(mask, runs[j + 1]))
    ]
    if len(candidates) == 1:
        return candidates[0]
    precisions = [precision_of(indices) for indices in candidates]
    if all(p is not None for p in precisions):
        return candidates[max(range(len(candidates)), key=precisions.__getitem__)]
    return max(candidates, key=lambda indices: epsilon_spent(events_of(indices), delta))


def _chunk_array(releases: Sequence[Release]) -> np.ndarray:
    return np.array([r.chunks for r in releases], dtype=np.int64).reshape(-1, 2)


def worst_case_events(entries: Iterable, delta: float) -> list[dp_event.DpEvent]:
    """Events that touched the most exposed chunk (largest composed epsilon).

    Parameters
    ----------
    entries : iterable of Release or dict
    delta : float

    Returns
    -------
    list of dp_accounting.dp_event.DpEvent
    """
    releases = _releases(entries)

    def events_of(indices: np.ndarray) -> list:
        return [releases[i].event for i in indices]

    def precision_of(indices: np.ndarray) -> float | None:
        return gaussian_precision(events_of(indices))

    return events_of(_worst_case_group(_chunk_array(releases), delta, precision_of, events_of))


def privacy_spent(entries: Iterable, delta: float) -> PrivacySpent:
    """(epsilon, delta) of a ledger under parallel composition across chunks."""
    return PrivacySpent(epsilon_spent(worst_case_events(entries, delta), delta), delta)


def charge_increment(
    before: Sequence[dp_event.DpEvent], after: Sequence[dp_event.DpEvent]
) -> list[dp_event.DpEvent]:
    """Events to charge a shared budget when a ledger's worst case moves.

    The multiset difference ``after - before`` (events compared by value).
    Summed over a ledger's history
    these increments contain every worst-case set the ledger ever had, so the
    budget's total is never below the estimator's own ``privacy_spent_``.
    """
    after = list(after)
    return _keyed_increment(
        list(map(event_key, before)), list(map(event_key, after)), after.__getitem__
    )


def _keyed_increment(
    before_keys: list[str], after_keys: list[str], event_at: Callable[[int], dp_event.DpEvent]
) -> list[dp_event.DpEvent]:
    """:func:`charge_increment` with the events' keys (:func:`event_key`)
    given; ``event_at(i)``, the ``i``-th event of ``after``, is read only for
    the events charged: for each key, its last event in ``after``."""
    last = {key: i for i, key in enumerate(after_keys)}
    missing = Counter(after_keys)
    missing.subtract(Counter(before_keys))
    return [event_at(last[k]) for k, count in missing.items() for _ in range(max(count, 0))]


@dataclass(frozen=True, eq=False)
class DecodedLedger:
    """A ledger decoded once, so that accounting it again costs no decoding.

    An estimator's ``privacy_ledger_`` is a list of plain dicts; every
    deletion accounts it again (its budget increment, its report's
    ``remaining_epsilon``). Decoding each entry (its :class:`Release`, its
    chunks, its event's canonical key for :func:`charge_increment`, its
    Gaussian precision) once, and only the new entries when the ledger
    grows, keeps a deletion's bookkeeping from re-reading every earlier
    deletion's record. What it computes is what :func:`privacy_spent`,
    :func:`worst_case_events` and :func:`charge_increment` compute from the
    dicts, the same bits: a Gaussian group's precision is the same per-event
    terms summed in the same order (``np.add.accumulate`` adds sequentially).

    Parameters
    ----------
    entries : tuple of dict
        The ledger's entries (the estimator's dicts themselves).
    releases : tuple of Release
        ``entries`` decoded.
    chunks : ndarray of shape (n_releases, 2)
        Each release's first and last chunk.
    keys : ndarray of object, shape (n_releases,)
        :func:`~sklearn_dpu.privacy.events.event_key` of each release's event.
    precisions : ndarray of shape (n_releases,)
        :func:`~sklearn_dpu.privacy.accounting.gaussian_precision` of each
        release's event alone (NaN: not Gaussian).

    Examples
    --------
    >>> from dp_accounting import dp_event
    >>> first = Release("a count", dp_event.GaussianDpEvent(2.0), (1, 1), "[DR14] Thm A.1")
    >>> ledger = DecodedLedger.of([first.to_dict()])
    >>> ledger.extended([first.to_dict()]).spent(1e-5) == privacy_spent([first] * 2, 1e-5)
    True
    """

    entries: tuple
    releases: tuple[Release, ...]
    chunks: np.ndarray
    keys: np.ndarray
    precisions: np.ndarray

    @classmethod
    def of(cls, entries: Iterable) -> "DecodedLedger":
        """Decode ``entries`` (dicts or :class:`Release` records)."""
        empty = np.zeros(0)
        none = cls((), (), empty.reshape(0, 2).astype(np.int64), empty.astype(object), empty)
        return none.extended(entries)

    def extended(self, entries: Iterable) -> "DecodedLedger":
        """This ledger followed by ``entries`` (only they are decoded)."""
        entries = tuple(entries)
        releases = tuple(_releases(entries))
        keys = np.empty(len(releases), dtype=object)
        keys[:] = [event_key(r.event) for r in releases]
        precisions = [gaussian_precision([r.event]) for r in releases]
        return DecodedLedger(
            self.entries + entries,
            self.releases + releases,
            np.concatenate([self.chunks, _chunk_array(releases)]),
            np.concatenate([self.keys, keys]),
            np.concatenate([self.precisions, np.array(precisions, dtype=float)]),
        )

    def _events_of(self, indices: np.ndarray) -> list:
        return [self.releases[i].event for i in indices]

    def _precision_of(self, indices: np.ndarray) -> float | None:
        # gaussian_precision of the events in this order, from the per-event
        # terms (0.0 + x is x, and a no-op event's term 0.0 adds nothing);
        # with a non-Gaussian or noiseless event (NaN, inf), the function
        # itself, whose early returns decide.
        terms = self.precisions[indices]
        if not len(terms):
            return 0.0
        if not np.isfinite(terms).all():
            return gaussian_precision(self._events_of(indices))
        return float(np.add.accumulate(terms)[-1])

    def worst_case(self, delta: float) -> np.ndarray:
        """Indices of :func:`worst_case_events`, ascending."""
        return _worst_case_group(self.chunks, delta, self._precision_of, self._events_of)

    def spent(self, delta: float) -> PrivacySpent:
        """:func:`privacy_spent` of the ledger."""
        indices = self.worst_case(delta)
        precision = self._precision_of(indices)
        if precision is not None:
            return PrivacySpent(epsilon_of_precision(precision, delta), delta)
        return PrivacySpent(epsilon_spent(self._events_of(indices), delta), delta)

    def increment(self, planned: Sequence[Release], delta: float) -> list[dp_event.DpEvent]:
        """:func:`charge_increment` of the worst cases before and after
        ``planned`` is appended: what a shared budget is charged for it."""
        after = self.extended(planned)
        worst = after.worst_case(delta)
        return _keyed_increment(
            list(self.keys[self.worst_case(delta)]),
            list(after.keys[worst]),
            lambda i: after.releases[worst[i]].event,
        )
