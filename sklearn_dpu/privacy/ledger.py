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

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from dp_accounting import dp_event

from .accounting import NEIGHBORING_RELATION, epsilon_spent, gaussian_precision
from .events import event_from_dict, event_key, event_to_dict

__all__ = [
    "ApproximateDPBound",
    "PrivacySpent",
    "Release",
    "ReleasePlan",
    "charge_increment",
    "event_from_dict",
    "event_to_dict",
    "privacy_spent",
    "worst_case_events",
]


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
        First and last chunk (inclusive) whose records the release depends on.
    reference : str
        The theorem the privacy of this release rests on.
    """

    mechanism: str
    event: dp_event.DpEvent
    chunks: tuple[int, int]
    reference: str

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
    if not releases:
        return []
    opening, closing = defaultdict(list), defaultdict(list)
    for i, release in enumerate(releases):
        opening[release.chunks[0]].append(i)
        closing[release.chunks[1] + 1].append(i)
    groups: dict[frozenset, list] = {}
    active: set[int] = set()
    for chunk in sorted(opening.keys() | closing.keys()):
        active.difference_update(closing[chunk])
        active.update(opening[chunk])
        key = frozenset(active)
        if key and key not in groups:
            groups[key] = [releases[i].event for i in sorted(active)]
    # A chunk whose releases are a subset of another chunk's is never the
    # worst case (composing more releases cannot lower epsilon): skip it, so
    # epsilon is only computed for the groups that can be maximal.
    keys = [k for k in groups if not any(k < other for other in groups)]
    candidates = [groups[k] for k in keys]
    if len(candidates) == 1:
        return candidates[0]
    precisions = [gaussian_precision(events) for events in candidates]
    if all(p is not None for p in precisions):
        return candidates[max(range(len(candidates)), key=precisions.__getitem__)]
    return max(candidates, key=lambda events: epsilon_spent(events, delta))


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

    by_key = {event_key(event): event for event in after}
    missing = Counter(map(event_key, after))
    missing.subtract(Counter(map(event_key, before)))
    return [by_key[k] for k, count in missing.items() for _ in range(max(count, 0))]
