"""Composition shortcuts of the accountant and the ledger give unchanged results."""

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant

from sklearn_dpu.privacy import _pld_composition, accounting, ledger
from sklearn_dpu.privacy.accounting import NEIGHBORING_RELATION, epsilon_spent
from sklearn_dpu.privacy.events import event_key
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


@pytest.mark.parametrize("zero", [dp_event.LaplaceDpEvent(2.0), STEP])
def test_an_event_composed_zero_times_releases_nothing(zero):
    # With a pure-DP event in the history, the count-0 part once went through
    # the split and the PLD as one release (2.415 here instead of 1.993).
    gaussian = dp_event.GaussianDpEvent(2.0)
    history = [dp_event.SelfComposedDpEvent(zero, 0), gaussian]
    assert epsilon_spent(history, 1e-5) == epsilon_spent([gaussian], 1e-5)
    assert epsilon_spent(
        [dp_event.LaplaceDpEvent(2.0), dp_event.SelfComposedDpEvent(STEP, 0)], 1e-5
    ) == (epsilon_spent([dp_event.LaplaceDpEvent(2.0)], 1e-5))
    assert epsilon_spent([dp_event.SelfComposedDpEvent(zero, 0)], 1e-5) == 0.0


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


# The PLD of a coalesced history from cached parts (_pld_composition) must be
# the accountant's own, bit for bit: same calls, same order.
_GAUSS = dp_event.GaussianDpEvent(2.5)
_LAPLACE = dp_event.LaplaceDpEvent(4.0)
_DISCRETE = dp_event.DiscreteLaplaceDpEvent(0.3, 1)
_TINY = dp_event.GaussianDpEvent(0.3)
_HISTORIES = [
    [_GAUSS],
    [dp_event.SelfComposedDpEvent(_GAUSS, 3)],
    [STEP],
    [dp_event.SelfComposedDpEvent(STEP, 7), OTHER],
    [dp_event.SelfComposedDpEvent(STEP, 8), OTHER, _GAUSS],
    [dp_event.SelfComposedDpEvent(_LAPLACE, 2), STEP],
    [dp_event.SelfComposedDpEvent(_DISCRETE, 3), _GAUSS, OTHER],
    # noise so small that the grid is coarser than the default (_pld_step)
    [dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(0.05, _TINY), 4), _GAUSS],
]


def _by_parts(events, delta):
    parts = _parts(events)
    return accounting._epsilon_of_events(accounting._from_parts(parts), parts, delta)


def _accountant(events, delta):
    composed = accounting._from_parts(_parts(events))
    step = accounting._pld_step(composed)
    pld = PLDAccountant(NEIGHBORING_RELATION, value_discretization_interval=step)
    return pld.compose(composed).get_epsilon(delta)


def _parts(events):
    return accounting._parts_of(accounting._coalesced_key(events))


def _clear_part_caches():
    _pld_composition._clear_caches()


@pytest.mark.parametrize("delta", [1e-5, 1e-2])
def test_cached_parts_give_the_accountants_bits(delta):
    _clear_part_caches()
    steps = set()
    for events in _HISTORIES:  # every kind here is built from parts, not left to the accountant
        step = accounting._pld_step(accounting._from_parts(_parts(events)))
        steps.add(step)
        assert _pld_composition.composed_pld(_parts(events), step, NEIGHBORING_RELATION)
    assert len(steps) == 2  # the default grid and a coarser one
    expected = [_accountant(events, delta) for events in _HISTORIES]
    # Every history through the caches, twice and in both orders: later ones
    # reuse parts and prefixes built for earlier ones, which must not have
    # been changed by that use.
    for order in (_HISTORIES, _HISTORIES[::-1], _HISTORIES):
        got = {id(events): _by_parts(events, delta) for events in order}
        assert [got[id(events)] for events in _HISTORIES] == expected


def test_kinds_not_handled_go_to_the_accountant():
    subsampled_laplace = dp_event.PoissonSampledDpEvent(0.1, _LAPLACE)
    silent = dp_event.GaussianDpEvent(0.0)
    parts = ((event_key(subsampled_laplace), 1), (event_key(STEP), 2))
    assert _pld_composition.composed_pld(parts, 1e-4, NEIGHBORING_RELATION) is None
    events = [subsampled_laplace, STEP, STEP]
    assert _by_parts(events, 1e-5) == _accountant(events, 1e-5)
    silent_parts = ((event_key(silent), 1),)
    assert _pld_composition.composed_pld(silent_parts, 1e-4, NEIGHBORING_RELATION) is None
    assert _by_parts([silent, STEP], 1e-5) == float("inf")
    # a part of count 0 is left to the accountant too (it used to raise
    # here); a history's key has none: an event composed zero times is no part
    zero_parts = ((event_key(_GAUSS), 0), (event_key(_LAPLACE), 1))
    assert _pld_composition.composed_pld(zero_parts, 1e-4, NEIGHBORING_RELATION) is None
    zero = [dp_event.SelfComposedDpEvent(_GAUSS, 0), _LAPLACE]
    assert _parts(zero) == _parts([_LAPLACE])
    assert _by_parts(zero, 1e-5) == _accountant([_LAPLACE], 1e-5)


def test_a_long_history_of_distinct_events_composes_without_recursion():
    # 600 distinct events: a recursive prefix overflowed Python's stack near 500.
    events = [dp_event.DiscreteLaplaceDpEvent(1e-3 * (1 + k / 600), 1) for k in range(600)]
    assert _by_parts(events, 1e-5) == _accountant(events, 1e-5)


def test_one_more_step_does_not_rebuild_the_step(monkeypatch):
    # What makes an UnlearnableSGDClassifier deletion cheap: a history one
    # step longer than the last reuses the step's single-event distribution
    # (its construction is most of the cost).
    _clear_part_caches()
    accounting._epsilon_of_coalesced.cache_clear()
    built = []
    original = _pld_composition.pld_lib.from_gaussian_mechanism

    def counting(**kwargs):
        built.append(kwargs.get("sampling_prob", 1.0))
        return original(**kwargs)

    monkeypatch.setattr(_pld_composition.pld_lib, "from_gaussian_mechanism", counting)
    first = epsilon_spent([dp_event.SelfComposedDpEvent(STEP, 5), OTHER], 1e-5)
    assert sorted(built) == [0.05, 0.05]
    built.clear()
    second = epsilon_spent([dp_event.SelfComposedDpEvent(STEP, 6), OTHER], 1e-5)
    assert built == [] and second > first


def test_a_changed_last_part_composes_once_and_parts_are_built_once(monkeypatch):
    _clear_part_caches()
    composed, built = [], []
    pld_class = _pld_composition.pld_lib.PrivacyLossDistribution
    original_compose = pld_class.compose
    original_build = _pld_composition.pld_lib.from_gaussian_mechanism

    def counting_compose(self, other, *args, **kwargs):
        composed.append(1)
        return original_compose(self, other, *args, **kwargs)

    def counting_build(**kwargs):
        built.append(1)
        return original_build(**kwargs)

    monkeypatch.setattr(pld_class, "compose", counting_compose)
    monkeypatch.setattr(_pld_composition.pld_lib, "from_gaussian_mechanism", counting_build)
    relation, step = NEIGHBORING_RELATION, 1e-4
    # Many distinct events: each is built once.
    leaves = [
        dp_event.PoissonSampledDpEvent(0.05, dp_event.GaussianDpEvent(2.0 + k / 7))
        for k in range(18)
    ]
    parts = tuple(sorted((event_key(leaf), 2) for leaf in leaves))
    first = _pld_composition.composed_pld(parts, step, relation)
    assert len(built) == len(parts) and len(composed) == len(parts)
    # The same history with its last count raised: one new part, one composition.
    built.clear(), composed.clear()
    raised = (*parts[:-1], (parts[-1][0], 3))
    second = _pld_composition.composed_pld(raised, step, relation)
    assert built == [] and len(composed) == 1
    assert second.get_epsilon_for_delta(1e-5) > first.get_epsilon_for_delta(1e-5)


def test_a_changed_middle_part_recomposes_only_that_part(monkeypatch):
    # A deletion that raises the count of an event sorted before another
    # (the SGD's first-time tests sort before its recomputes) rebuilds the
    # later parts' compositions from the kept parts, not by self-composing.
    _clear_part_caches()
    calls = []
    pld_class = _pld_composition.pld_lib.PrivacyLossDistribution
    original = pld_class.self_compose

    def counting(self, count, *args, **kwargs):
        calls.append(count)
        return original(self, count, *args, **kwargs)

    monkeypatch.setattr(pld_class, "self_compose", counting)
    first, second = STEP, OTHER
    parts = _parts(
        [dp_event.SelfComposedDpEvent(first, 5), dp_event.SelfComposedDpEvent(second, 3)]
    )
    _pld_composition.composed_pld(parts, 1e-4, NEIGHBORING_RELATION)
    calls.clear()
    raised = ((parts[0][0], parts[0][1] + 1), parts[1])
    _pld_composition.composed_pld(raised, 1e-4, NEIGHBORING_RELATION)
    assert calls == [raised[0][1]]
