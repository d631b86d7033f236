"""Tests of calibration, accounting, the pure-DP event and ledgers
(``sklearn_dpu.privacy.{calibration, accounting, mechanisms.pure_dp_event, ledger}``).

The reference everywhere is Google's ``dp_accounting`` used directly (PLD
accountant under add/remove-one, PLDs built by hand, the RDP accountant), so the
library's closed forms and shortcuts are checked against an accountant they did
not call. Each agreement check is also run on a broken variant (a multiplier
1% too small, a composition that forgets a count, a set instead of a multiset)
and must reject it.
"""

import contextlib
import itertools
import json
import math
import os
import sys
from collections import Counter

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld.common import DifferentialPrivacyParameters
from dp_accounting.privacy_accountant import NeighboringRelation, UnsupportedEventError
from dp_accounting.rdp import RdpAccountant
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sklearn_dpu.privacy.accounting import (
    NEIGHBORING_RELATION,
    epsilon_spent,
    gaussian_precision,
)
from sklearn_dpu.privacy.calibration import (
    calibrate_noise_multiplier,
    gaussian_noise_multiplier,
)
from sklearn_dpu.privacy.ledger import (
    PrivacySpent,
    Release,
    charge_increment,
    event_from_dict,
    event_to_dict,
    privacy_spent,
    worst_case_events,
)
from sklearn_dpu.privacy.mechanisms import pure_dp_event

HYPOTHESIS = settings(derandomize=True, database=None, deadline=None, max_examples=100)
AR = NeighboringRelation.ADD_OR_REMOVE_ONE
G = dp_event.GaussianDpEvent


def test_neighbouring_relation_is_add_remove():
    assert NEIGHBORING_RELATION is AR


# --------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------

# eps from 0.1 to 20 (the classic formula is only valid below 1), delta and the
# number of compositions varied; chosen to keep the PLD work small.
CALIBRATION_GRID = [
    (0.1, 1e-3, 100),
    (0.1, 1e-9, 1),
    (0.5, 1e-5, 10),
    (1.0, 1e-6, 1),
    (1.0, 1e-6, 50),
    (2.0, 1e-6, 7),
    (5.0, 1e-3, 30),
    (5.0, 1e-9, 1),
    (10.0, 1e-9, 3),
    (10.0, 1e-5, 1),
    (20.0, 1e-5, 4),
    (20.0, 1e-3, 1),
]


def _discretization(eps):
    # The PLD of a Gaussian with a small multiplier (large eps) is wide; a
    # coarser grid keeps it fast and is still accurate to ~1e-7 there.
    return 1e-3 if eps >= 5 else 1e-4


def _check_gaussian_calibration(m, eps, delta, k):
    """Raise AssertionError unless k Gaussian releases with multiplier m are
    (eps, delta)-DP and no more private than needed, by three accountants."""
    vdi = _discretization(eps)
    # 1. dp_accounting's PLD accountant on the self-composed event
    acc = PLDAccountant(AR, value_discretization_interval=vdi)
    pld_eps = acc.compose(dp_event.SelfComposedDpEvent(G(m), k)).get_epsilon(delta)
    assert pld_eps <= eps * (1 + 1e-7), ("PLD accountant", pld_eps, eps)
    assert pld_eps >= eps * (1 - 1e-5), ("PLD accountant not tight", pld_eps, eps)
    # 2. an independent composition: the PLD of one Gaussian convolved k times
    # (pessimistic discretisation, hence the 1e-4 slack above the target)
    single = pld_lib.from_gaussian_mechanism(
        m, value_discretization_interval=vdi, neighboring_relation=AR
    )
    fft_eps = single.self_compose(k).get_epsilon_for_delta(delta)
    assert fft_eps <= eps * (1 + 1e-4), ("composed PLD", fft_eps, eps)
    assert fft_eps >= eps * (1 - 1e-5), ("composed PLD not tight", fft_eps, eps)
    # 3. the analytic Gaussian mechanism on the exact composition: never above
    assert get_epsilon_gaussian(m / math.sqrt(k), delta) <= eps


@pytest.mark.parametrize(("eps", "delta", "k"), CALIBRATION_GRID)
def test_gaussian_noise_multiplier_matches_pld(eps, delta, k):
    m = gaussian_noise_multiplier(eps, delta, k)
    _check_gaussian_calibration(m, eps, delta, k)


def test_gaussian_calibration_check_rejects_wrong_multipliers():
    """Negative control: 1% too little noise is caught as non-private and 1% too
    much as not tight, by the same check."""
    eps, delta, k = 1.0, 1e-6, 50
    m = gaussian_noise_multiplier(eps, delta, k)
    with pytest.raises(AssertionError, match="PLD accountant"):
        _check_gaussian_calibration(0.99 * m, eps, delta, k)
    with pytest.raises(AssertionError, match="not tight"):
        _check_gaussian_calibration(1.01 * m, eps, delta, k)


@pytest.mark.parametrize("eps", [0.1, 0.5, 0.9, 2.0, 5.0, 10.0, 15.0, 20.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_classic_gaussian_formula_is_not_used(eps, delta):
    """sigma = sqrt(2 ln(1.25/delta))/eps: loose below eps = 1, invalid (too
    little noise) for large eps; the library returns neither."""
    classic = math.sqrt(2 * math.log(1.25 / delta)) / eps
    m = gaussian_noise_multiplier(eps, delta)
    assert abs(classic / m - 1) > 1e-3
    assert get_epsilon_gaussian(m, delta) <= eps
    eps_classic = get_epsilon_gaussian(classic, delta)
    if eps < 1:
        # valid but loose: 15% or more extra noise, and far below the target eps
        assert classic > 1.15 * m
        assert eps_classic < 0.9 * eps
    if eps >= 10:
        # invalid: the classic sigma is smaller and its real epsilon is larger
        assert classic < m
        assert eps_classic > eps


def test_gaussian_noise_multiplier_composition_and_monotonicity():
    base = gaussian_noise_multiplier(1.0, 1e-5)
    for k in (1, 2, 10, 1000):
        assert gaussian_noise_multiplier(1.0, 1e-5, k) == pytest.approx(
            base * math.sqrt(k), rel=1e-12
        )
    ms = [gaussian_noise_multiplier(e, 1e-5) for e in (0.1, 0.5, 1, 2, 8)]
    assert all(a > b for a, b in itertools.pairwise(ms))
    ms = [gaussian_noise_multiplier(1.0, d) for d in (1e-9, 1e-6, 1e-3, 0.1)]
    assert all(a > b for a, b in itertools.pairwise(ms))


@pytest.mark.parametrize(
    ("eps", "delta", "k"),
    [
        (0.0, 1e-5, 1),
        (-1.0, 1e-5, 1),
        (float("nan"), 1e-5, 1),
        (1.0, 0.0, 1),
        (1.0, 1.0, 1),
        (1.0, 1e-5, 0),
    ],
)
def test_gaussian_noise_multiplier_rejects_bad_targets(eps, delta, k):
    with pytest.raises(ValueError):
        gaussian_noise_multiplier(eps, delta, k)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_calibrate_noise_multiplier_pure_dp_events_hits_target_from_private_side():
    """Calibration for non-Gaussian events: k pure-DP releases whose epsilon is
    1/m, composed with a fixed pure-DP step, as the PLD accountant sees them."""
    eps, delta = 1.5, 1e-6

    def make_events(m):
        return [dp_event.SelfComposedDpEvent(pure_dp_event(1.0 / m), 3), pure_dp_event(0.2)]

    def pld_eps(m):
        events = dp_event.ComposedDpEvent(make_events(m))
        return PLDAccountant(AR).compose(events).get_epsilon(delta)

    m = calibrate_noise_multiplier(make_events, eps, delta)
    assert pld_eps(m) <= eps
    assert pld_eps(m) >= eps - 1e-3  # tight
    # negative control: slightly less noise overshoots the target
    assert pld_eps(m * (1 - 1e-3)) > eps


@contextlib.contextmanager
def _address_space_limit(extra_bytes):
    """Cap this process's address space at its current size + extra_bytes, so an
    absurd allocation fails at once with MemoryError on any machine."""
    resource = pytest.importorskip("resource")
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc/self/statm")
    with open("/proc/self/statm") as f:
        current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_calibrate_noise_multiplier_gaussian_plus_pure_dp_hits_target():
    eps, delta = 1.5, 1e-6

    def make_events(m):
        return [dp_event.SelfComposedDpEvent(G(m), 3), pure_dp_event(0.2)]

    with _address_space_limit(8 * 2**30):
        m = calibrate_noise_multiplier(make_events, eps, delta)
    composed = PLDAccountant(AR).compose(dp_event.ComposedDpEvent(make_events(m)))
    assert eps - 1e-3 <= composed.get_epsilon(delta) <= eps


# --------------------------------------------------------------------------
# Accounting
# --------------------------------------------------------------------------

HETEROGENEOUS = [
    [
        G(1.5),
        dp_event.SelfComposedDpEvent(G(3.0), 4),
        dp_event.ComposedDpEvent(
            [dp_event.SelfComposedDpEvent(dp_event.ComposedDpEvent([G(2.0), G(5.0)]), 3)]
        ),
        dp_event.NoOpDpEvent(),
    ],
    [
        dp_event.SelfComposedDpEvent(
            dp_event.SelfComposedDpEvent(
                dp_event.ComposedDpEvent([G(4.0), dp_event.NoOpDpEvent()]), 5
            ),
            2,
        ),
        G(10.0),
        dp_event.ComposedDpEvent([]),
    ],
]
# 1/m^2 summed with multiplicities, by hand
HETEROGENEOUS_PRECISION = [
    1 / 1.5**2 + 4 / 3.0**2 + 3 * (1 / 2.0**2 + 1 / 5.0**2),
    10 / 4.0**2 + 1 / 10.0**2,
]


def _precision_forgetting_outer_counts(events):
    """Broken variant: nested compositions lose the count of a SelfComposed wrapper."""
    total = 0.0
    for event in events:
        if isinstance(event, dp_event.SelfComposedDpEvent):
            inner = event.event
            if isinstance(inner, dp_event.GaussianDpEvent):
                total += event.count / inner.noise_multiplier**2
            else:
                total += _precision_forgetting_outer_counts([inner])
        elif isinstance(event, dp_event.ComposedDpEvent):
            total += _precision_forgetting_outer_counts(event.events)
        elif isinstance(event, dp_event.GaussianDpEvent):
            total += 1 / event.noise_multiplier**2
    return total


@pytest.mark.parametrize("index", range(len(HETEROGENEOUS)))
def test_closed_form_gaussian_accounting_equals_pld(index):
    events, delta = HETEROGENEOUS[index], 1e-6
    assert gaussian_precision(events) == pytest.approx(HETEROGENEOUS_PRECISION[index], rel=1e-12)
    closed = epsilon_spent(events, delta)
    pld = PLDAccountant(AR).compose(dp_event.ComposedDpEvent(events)).get_epsilon(delta)
    assert closed == pytest.approx(pld, rel=1e-6)
    # negative control: the same comparison rejects a composition that drops counts
    broken = get_epsilon_gaussian(_precision_forgetting_outer_counts(events) ** -0.5, delta)
    assert broken != pytest.approx(pld, rel=1e-2)


def test_gaussian_precision_none_for_non_gaussian():
    assert gaussian_precision([G(1.0), pure_dp_event(1.0)]) is None
    assert (
        gaussian_precision([dp_event.ComposedDpEvent([G(1.0), dp_event.LaplaceDpEvent(1.0)])])
        is None
    )
    assert gaussian_precision([dp_event.PoissonSampledDpEvent(0.1, G(1.0))]) is None
    assert gaussian_precision([G(0.0)]) == math.inf
    assert gaussian_precision([]) == 0.0


@pytest.mark.parametrize(
    "events",
    [
        [G(5.0), pure_dp_event(0.5)],
        [dp_event.LaplaceDpEvent(2.0), dp_event.SelfComposedDpEvent(G(8.0), 2)],
        [dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(0.1, G(2.0)), 5)],
    ],
    ids=["gauss+pure", "laplace+gauss", "poisson"],
)
def test_non_gaussian_events_go_through_pld(events):
    delta = 1e-6
    expected = PLDAccountant(AR).compose(dp_event.ComposedDpEvent(events)).get_epsilon(delta)
    got = epsilon_spent(events, delta)
    # epsilon_spent groups equal events and self-composes them, a different
    # order of the same PLD operations: equal up to floating point
    assert got == pytest.approx(expected, rel=1e-9)
    # and it is the tight composition: below what RDP gives where RDP applies
    rdp = RdpAccountant(neighboring_relation=AR)
    if rdp.supports(dp_event.ComposedDpEvent(events)):
        assert got < rdp.compose(dp_event.ComposedDpEvent(events)).get_epsilon(delta)


def test_events_pld_lacks_go_through_rdp():
    events = [dp_event.ZCDpEvent(0.05), G(3.0)]
    assert not PLDAccountant(AR).supports(dp_event.ComposedDpEvent(events))
    expected = RdpAccountant(neighboring_relation=AR).compose(dp_event.ComposedDpEvent(events))
    assert epsilon_spent(events, 1e-6) == pytest.approx(expected.get_epsilon(1e-6), rel=1e-12)


@pytest.mark.parametrize(
    "event",
    [dp_event.UnsupportedDpEvent(), dp_event.SampledWithoutReplacementDpEvent(100, 10, G(1.0))],
)
def test_events_no_accountant_supports_are_refused_not_reported_finite(event):
    with pytest.raises(UnsupportedEventError):
        epsilon_spent([G(1.0), event], 1e-6)


@pytest.mark.parametrize(
    "events",
    [
        [],
        [dp_event.NoOpDpEvent()],
        [dp_event.SelfComposedDpEvent(dp_event.NoOpDpEvent(), 7)],
        [dp_event.ComposedDpEvent([])],
        [dp_event.ComposedDpEvent([dp_event.NoOpDpEvent(), dp_event.ComposedDpEvent([])])],
    ],
)
def test_empty_history_costs_nothing(events):
    assert epsilon_spent(events, 1e-6) == 0.0


@pytest.mark.parametrize(
    "events",
    [
        [dp_event.NonPrivateDpEvent()],
        [G(0.0)],
        [G(1.0), dp_event.NonPrivateDpEvent()],
        [pure_dp_event(1.0), dp_event.ComposedDpEvent([dp_event.NonPrivateDpEvent()])],
        [dp_event.SelfComposedDpEvent(G(0.0), 3), G(2.0)],
    ],
)
def test_non_private_events_cost_infinity(events):
    assert epsilon_spent(events, 1e-6) == math.inf


def test_epsilon_spent_ignores_event_order_and_grows_with_events():
    events = [G(10.0), pure_dp_event(0.3), dp_event.LaplaceDpEvent(3.0)]
    a = epsilon_spent(events, 1e-6)
    b = epsilon_spent(events[::-1], 1e-6)
    assert a == pytest.approx(b, rel=1e-9)
    assert epsilon_spent(events[:2], 1e-6) < a


# --------------------------------------------------------------------------
# pure_dp_event
# --------------------------------------------------------------------------


def _rr_profile(eps, eps_prime):
    """delta(eps') of binary randomized response, the dominating pair of eps-DP."""
    return max(0.0, (math.exp(eps) - math.exp(eps_prime)) / (1 + math.exp(eps)))


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 3.0, 8.0])
def test_pure_dp_event_has_the_pure_dp_privacy_profile(eps):
    ours = PLDAccountant(AR).compose(pure_dp_event(eps))._pld
    reference = pld_lib.from_privacy_parameters(DifferentialPrivacyParameters(eps, 0.0))
    for fraction in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0, 1.5):
        e = fraction * eps
        d = ours.get_delta_for_epsilon(e)
        assert d == pytest.approx(reference.get_delta_for_epsilon(e), rel=1e-9, abs=1e-15)
        assert d == pytest.approx(_rr_profile(eps, e), rel=1e-9, abs=1e-15)
    assert PLDAccountant(AR).compose(pure_dp_event(eps)).get_epsilon(0.0) == pytest.approx(
        eps, rel=1e-12
    )
    assert epsilon_spent([pure_dp_event(eps)], 0.0) == pytest.approx(eps, rel=1e-12)
    # and it composes like the dominating pair
    composed = PLDAccountant(AR).compose(dp_event.SelfComposedDpEvent(pure_dp_event(eps), 5))
    assert composed.get_epsilon(1e-6) == pytest.approx(
        reference.self_compose(5).get_epsilon_for_delta(1e-6), rel=1e-9
    )


def test_pure_dp_profile_comparison_has_power():
    """Negative controls: the profile check above rejects the continuous Laplace
    event (a pure-DP mechanism, but not the dominating pair: using it for an
    arbitrary eps-DP mechanism would under-count) and a sensitivity-2 event."""
    eps = 1.0
    for other in (dp_event.LaplaceDpEvent(1 / eps), dp_event.DiscreteLaplaceDpEvent(eps, 2)):
        pld = PLDAccountant(AR).compose(other)._pld
        assert pld.get_delta_for_epsilon(0.5 * eps) != pytest.approx(
            _rr_profile(eps, 0.5 * eps), rel=1e-3
        )
    laplace = PLDAccountant(AR).compose(dp_event.LaplaceDpEvent(1 / eps))._pld
    assert laplace.get_delta_for_epsilon(0.5) < _rr_profile(eps, 0.5)


# --------------------------------------------------------------------------
# Ledger: encoding
# --------------------------------------------------------------------------

_positive = st.floats(min_value=0.05, max_value=50.0)
_leaf = st.one_of(
    st.builds(G, _positive),
    st.builds(dp_event.LaplaceDpEvent, _positive),
    st.builds(dp_event.DiscreteLaplaceDpEvent, _positive, st.integers(1, 4)),
    st.builds(dp_event.ZCDpEvent, st.floats(0.001, 2.0)),
    st.just(dp_event.NoOpDpEvent()),
    st.just(dp_event.NonPrivateDpEvent()),
    st.builds(dp_event.RandomizedResponseDpEvent, st.floats(0.0, 1.0), st.integers(1, 5)),
)
_events = st.recursive(
    _leaf,
    lambda children: st.one_of(
        st.builds(dp_event.SelfComposedDpEvent, children, st.integers(1, 100)),
        st.builds(dp_event.ComposedDpEvent, st.lists(children, max_size=4)),
        st.builds(dp_event.PoissonSampledDpEvent, st.floats(0.0, 1.0), children),
        st.builds(
            dp_event.SampledWithoutReplacementDpEvent, st.just(100), st.integers(1, 100), children
        ),
    ),
    max_leaves=12,
)


def _is_plain(value):
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, bool | int | float | str)


@HYPOTHESIS
@given(event=_events)
def test_event_dict_round_trip(event):
    data = event_to_dict(event)
    assert _is_plain(data)
    assert event_from_dict(data) == event
    assert event_from_dict(json.loads(json.dumps(data))) == event


def _nest(payload):
    """Hide a payload inside otherwise valid nested events."""
    ok = event_to_dict(G(1.0))
    return [
        payload,
        {**event_to_dict(dp_event.ComposedDpEvent([G(1.0)])), "events": [ok, payload]},
        {**event_to_dict(dp_event.SelfComposedDpEvent(G(1.0), 2)), "event": payload},
        {**event_to_dict(dp_event.PoissonSampledDpEvent(0.5, G(1.0))), "event": payload},
    ]


_BAD_PAYLOADS = [
    {"module_name": "os", "class_name": "system", "command": "echo pwned"},
    {"module_name": "builtins", "class_name": "eval", "source": "1"},
    {"module_name": "subprocess", "class_name": "Popen", "args": ["true"]},
    {"module_name": "dp_accounting.rdp.rdp_privacy_accountant", "class_name": "RdpAccountant"},
    {"module_name": "dp_accounting", "class_name": "GaussianDpEvent", "noise_multiplier": 1.0},
    {"module_name": "evil_module_never_imported", "class_name": "X"},
    {"class_name": "GaussianDpEvent", "noise_multiplier": 1.0},
] + [
    {"module_name": dp_event.__name__, "class_name": name}
    for name in (
        "importlib",
        "attr",
        "typing",
        "List",
        "Protocol",
        "DpEventNamedTuple",
        "__class__",
        "__builtins__",
        "__loader__",
        "NotAnEvent",
    )
]


@pytest.mark.parametrize(
    "payload", _BAD_PAYLOADS, ids=lambda p: f"{p.get('module_name')}.{p['class_name']}"
)
def test_event_from_dict_refuses_foreign_classes(payload):
    for data in _nest(payload):
        with pytest.raises(ValueError):
            event_from_dict(data)
    assert "evil_module_never_imported" not in sys.modules


def test_release_dict_round_trip():
    event = dp_event.ComposedDpEvent([dp_event.SelfComposedDpEvent(G(20.0), 3), pure_dp_event(0.5)])
    release = Release("noisy sum", event, (np.int64(2), np.int64(5)), "[BW18] Thm 8")
    data = release.to_dict()
    assert data["neighboring_relation"] == "ADD_OR_REMOVE_ONE"
    assert data["chunks"] == [2, 5] and all(type(c) is int for c in data["chunks"])
    assert _is_plain(data)
    back = Release.from_dict(json.loads(json.dumps(data)))
    assert back == release
    assert back.chunks == (2, 5)
    # entries may be Release objects or their dicts, with the same accounting
    assert privacy_spent([release], 1e-5) == privacy_spent([data], 1e-5)
    assert isinstance(privacy_spent([data], 1e-5), PrivacySpent)


def test_release_from_dict_refuses_foreign_event():
    data = Release("x", G(1.0), (1, 1), "ref").to_dict()
    data["event"] = {"module_name": "os", "class_name": "system"}
    with pytest.raises(ValueError):
        Release.from_dict(data)


# --------------------------------------------------------------------------
# Ledger: parallel composition over chunks
# --------------------------------------------------------------------------


def _release(event, first, last):
    return Release("m", event, (first, last), "ref")


def _brute_force_worst_epsilon(releases, delta):
    last = max(r.chunks[1] for r in releases)
    return max(
        epsilon_spent([r.event for r in releases if r.chunks[0] <= c <= r.chunks[1]], delta)
        for c in range(1, last + 1)
    )


def test_disjoint_chunks_do_not_compose():
    delta = 1e-5
    releases = [_release(G(1.0), c, c) for c in range(1, 6)]
    assert privacy_spent(releases, delta).epsilon == pytest.approx(epsilon_spent([G(1.0)], delta))
    assert worst_case_events(releases, delta) == [G(1.0)]
    # negative control: ignoring the chunks would compose all five
    assert (
        epsilon_spent([r.event for r in releases], delta)
        > 2 * privacy_spent(releases, delta).epsilon
    )


def test_overlapping_chunks_compose():
    delta = 1e-5
    releases = [_release(G(1.0), 1, 2), _release(G(2.0), 2, 3), _release(G(1.0), 4, 4)]
    assert sorted(e.noise_multiplier for e in worst_case_events(releases, delta)) == [1.0, 2.0]
    assert privacy_spent(releases, delta).epsilon == pytest.approx(
        epsilon_spent([G(1.0), G(2.0)], delta)
    )
    # a release covering everything composes with every chunk
    releases.append(_release(G(3.0), 1, 4))
    assert privacy_spent(releases, delta).epsilon == pytest.approx(
        epsilon_spent([G(1.0), G(2.0), G(3.0)], delta)
    )
    assert worst_case_events([], delta) == []
    assert privacy_spent([], delta) == PrivacySpent(0.0, delta)


def test_tree_aggregation_pattern_costs_log_t_releases():
    delta, m = 1e-5, 4.0
    releases = []
    for t in range(1, 65):
        releases.append(_release(G(m), t - (t & -t) + 1, t))
        worst = worst_case_events(releases, delta)
        depth = math.floor(math.log2(t)) + 1
        assert len(worst) == depth
        assert privacy_spent(releases, delta).epsilon == pytest.approx(
            get_epsilon_gaussian(m / math.sqrt(depth), delta), rel=1e-12
        )
    # negative control: without parallel composition all 64 releases would count
    assert (
        epsilon_spent([r.event for r in releases], delta)
        > 2 * privacy_spent(releases, delta).epsilon
    )


def test_worst_case_with_mixed_events_is_chosen_by_epsilon():
    delta = 1e-5
    # chunk 1 holds one pure 3.0-DP release; chunks 2-3 two weak Gaussians. The
    # Gaussian precision ordering does not apply; epsilon decides.
    releases = [_release(pure_dp_event(3.0), 1, 1), _release(G(5.0), 2, 3), _release(G(5.0), 2, 2)]
    assert worst_case_events(releases, delta) == [pure_dp_event(3.0)]
    releases.append(_release(G(0.5), 3, 3))
    assert sorted(e.noise_multiplier for e in worst_case_events(releases, delta)) == [0.5, 5.0]
    assert privacy_spent(releases, delta).epsilon == pytest.approx(
        _brute_force_worst_epsilon(releases, delta)
    )


_gauss_release = st.builds(
    lambda m, first, length: _release(G(m), first, first + length),
    st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0]),
    st.integers(1, 8),
    st.integers(0, 4),
)


@HYPOTHESIS
@given(releases=st.lists(_gauss_release, min_size=1, max_size=8))
def test_worst_case_matches_brute_force(releases):
    delta = 1e-6
    worst = worst_case_events(releases, delta)
    expected = _brute_force_worst_epsilon(releases, delta)
    assert epsilon_spent(worst, delta) == pytest.approx(expected, rel=1e-12)
    # the worst case is the multiset of releases that touch some chunk
    covering = [
        Counter(
            json.dumps(event_to_dict(r.event)) for r in releases if r.chunks[0] <= c <= r.chunks[1]
        )
        for c in range(1, 14)
    ]
    assert Counter(json.dumps(event_to_dict(e)) for e in worst) in covering


# --------------------------------------------------------------------------
# Ledger: charge increments
# --------------------------------------------------------------------------


def _key(event):
    return json.dumps(event_to_dict(event), sort_keys=True)


def _contains(big, small):
    big, small = Counter(map(_key, big)), Counter(map(_key, small))
    return all(big[k] >= v for k, v in small.items())


def _replay(history, increment, delta):
    """Charge the increments of a ledger's history; check the invariant after
    every step: the charged multiset contains the current worst case (so the
    budget's epsilon is never below the estimator's)."""
    charged, before, ledger_now = [], [], []
    for step in history:
        if step is None:  # a refit: the ledger restarts
            ledger_now = []
        else:
            ledger_now = [*ledger_now, step]
        after = worst_case_events(ledger_now, delta)
        charged.extend(increment(before, after))
        before = after
        assert _contains(charged, after)
        assert epsilon_spent(charged, delta) >= privacy_spent(ledger_now, delta).epsilon
    return charged


# The worst chunk jumps from chunk 1 (one G(4)) to chunk 2 (five G(8)): the
# increment must charge all five copies at once.
_JUMP = [_release(G(4.0), 1, 1)] + [_release(G(8.0), 2, 2)] * 5


@HYPOTHESIS
@example(history=_JUMP)
@given(history=st.lists(st.one_of(_gauss_release, st.none()), min_size=1, max_size=10))
def test_summed_increments_contain_every_worst_case(history):
    _replay(history, charge_increment, 1e-6)


def test_summed_increments_with_non_gaussian_events():
    history = [
        _release(pure_dp_event(0.5), 1, 1),
        _release(G(20.0), 2, 2),
        _release(G(20.0), 2, 2),
        None,
        _release(pure_dp_event(0.2), 1, 1),
        _release(pure_dp_event(0.5), 1, 3),
    ]
    _replay(history, charge_increment, 1e-6)


def test_charge_increment_basic_properties():
    a, b = G(1.0), pure_dp_event(1.0)

    def bag(events):
        return Counter(map(_key, events))

    assert bag(charge_increment([], [a, a, b])) == bag([a, a, b])
    assert bag(charge_increment([a], [a, a, b])) == bag([a, b])
    assert charge_increment([a, b], [a, b]) == []
    assert charge_increment([a, a, b], [a]) == []
    # events are compared by value, not identity
    assert charge_increment([G(1.0)], [G(1.0)]) == []


def test_increment_invariant_check_rejects_set_difference():
    """Negative controls: charging a set (not multiset) difference misses the
    second identical release on the same chunk, and the replay catches it."""

    def set_increment(before, after):
        seen = {_key(e) for e in before}
        return [e for e in after if _key(e) not in seen]

    def one_copy_increment(before, after):
        return list({_key(e): e for e in charge_increment(before, after)}.values())

    history = [_release(G(1.0), 1, 1), _release(G(1.0), 1, 1)]
    _replay(history, charge_increment, 1e-6)
    with pytest.raises(AssertionError):
        _replay(history, set_increment, 1e-6)
    # and an increment that charges one copy of each new event misses the jump
    _replay(_JUMP, charge_increment, 1e-6)
    with pytest.raises(AssertionError):
        _replay(_JUMP, one_copy_increment, 1e-6)


def test_epsilon_upper_bound_is_basic_composition_and_never_below_the_exact_composition():
    from sklearn_dpu.privacy.accounting import epsilon_upper_bound

    known = [dp_event.GaussianDpEvent(3.0)]
    other = dp_event.GaussianDpEvent(2.0)
    eps_other = epsilon_spent([other], 1e-6)
    bound = epsilon_upper_bound(known, [(eps_other, 1e-6)], 1e-5)
    assert bound == pytest.approx(epsilon_spent(known, 1e-5 - 1e-6) + eps_other)
    # The exact composition of the same releases is never above the bound.
    assert epsilon_spent([*known, other], 1e-5) <= bound
    assert epsilon_upper_bound(known, [], 1e-5) == epsilon_spent(known, 1e-5)
    assert epsilon_upper_bound(known, [(0.1, 1e-5)], 1e-5) == math.inf


@pytest.mark.parametrize("delta", [0.0, 1e-300, 1e-12, 1e-5, 0.1, 1.0])
def test_analytic_gaussian_epsilon_equals_dp_accounting(delta):
    # The library's own inversion of Balle & Wang's Thm 8 (on the deletion
    # path: a report recomposes the ledger) must give dp_accounting's value,
    # bit for bit, across noise multipliers from tiny to huge.
    from sklearn_dpu.privacy.accounting import analytic_gaussian_epsilon

    for sigma in [0.0, *np.geomspace(1e-3, 1e4, 40), math.inf]:
        with np.errstate(all="ignore"):
            expected = get_epsilon_gaussian(sigma, delta)
        assert analytic_gaussian_epsilon(sigma, delta) == expected, (sigma, delta)
    with pytest.raises(ValueError, match="sigma"):
        analytic_gaussian_epsilon(-1.0, delta)
