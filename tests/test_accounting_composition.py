"""Composition shortcuts of the accountant and the ledger give unchanged results."""

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant

from sklearn_dpu.privacy import accounting, ledger
from sklearn_dpu.privacy.accounting import NEIGHBORING_RELATION, epsilon_spent
from sklearn_dpu.privacy.ledger import Release, privacy_spent, worst_case_events

STEP = dp_event.PoissonSampledDpEvent(0.05, dp_event.GaussianDpEvent(1.5))
OTHER = dp_event.PoissonSampledDpEvent(0.05, dp_event.GaussianDpEvent(3.0))


def _direct(events, delta):
    pld = PLDAccountant(NEIGHBORING_RELATION)
    return pld.compose(dp_event.ComposedDpEvent(list(events))).get_epsilon(delta)


def test_coalescing_equal_events_matches_direct_composition():
    events = [
        dp_event.SelfComposedDpEvent(STEP, 3),
        dp_event.ComposedDpEvent([STEP, OTHER]),
        STEP,
        dp_event.NoOpDpEvent(),
    ]
    expected = _direct([dp_event.SelfComposedDpEvent(STEP, 5), OTHER], 1e-5)
    assert epsilon_spent(events, 1e-5) == pytest.approx(expected, rel=1e-9)
    # Order does not matter: same multiset, same key, same number.
    assert epsilon_spent(list(reversed(events)), 1e-5) == epsilon_spent(events, 1e-5)


def test_nonprivate_event_still_infinite():
    assert epsilon_spent([STEP, dp_event.NonPrivateDpEvent()], 1e-5) == float("inf")


def _release(event, first, last):
    return Release("m", event, (first, last), "r").to_dict()


def test_dominated_chunk_groups_are_not_evaluated(monkeypatch):
    # Chunk 1 saw every release; chunk 2 saw a subset: chunk 1 is the worst
    # case without computing anything.
    entries = [_release(STEP, 1, 1), _release(OTHER, 1, 2)]

    def boom(*args, **kwargs):
        raise AssertionError("epsilon computed for a dominated group")

    monkeypatch.setattr(ledger, "epsilon_spent", boom)
    events = worst_case_events(entries, 1e-5)
    assert [e.to_named_tuple() for e in events] == [
        STEP.to_named_tuple(),
        OTHER.to_named_tuple(),
    ]


def test_incomparable_chunk_groups_pick_the_larger_epsilon():
    entries = [_release(STEP, 1, 1), _release(OTHER, 2, 2)]
    events = worst_case_events(entries, 1e-5)
    assert events[0].to_named_tuple() == STEP.to_named_tuple()
    assert privacy_spent(entries, 1e-5).epsilon == pytest.approx(_direct([STEP], 1e-5), rel=1e-9)


def test_memo_is_keyed_by_delta():
    accounting._epsilon_of_coalesced.cache_clear()
    a = epsilon_spent([STEP, OTHER], 1e-5)
    b = epsilon_spent([STEP, OTHER], 1e-3)
    assert b < a


def test_event_to_dict_matches_the_named_tuple_encoding():
    events = [
        dp_event.ComposedDpEvent(
            [dp_event.SelfComposedDpEvent(STEP, 5), dp_event.NonPrivateDpEvent()]
        ),
        dp_event.SampledWithoutReplacementDpEvent(100, 10, dp_event.LaplaceDpEvent(2.0)),
        dp_event.GaussianDpEvent(1.25),
    ]
    for event in events:
        assert ledger.event_to_dict(event) == _named_tuple_encoding(event.to_named_tuple())
        assert ledger.event_from_dict(ledger.event_to_dict(event)) == event


def _named_tuple_encoding(value):
    """dp_accounting's own encoding (to_named_tuple), as nested plain dicts."""
    if hasattr(value, "_fields"):
        return {name: _named_tuple_encoding(getattr(value, name)) for name in value._fields}
    if isinstance(value, list | tuple):
        return [_named_tuple_encoding(v) for v in value]
    return value
