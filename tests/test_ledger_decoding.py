"""A ledger decoded once accounts as its dicts do, and a deletion no longer
re-reads every earlier deletion's record.

:class:`~sklearn_dpu.privacy.ledger.DecodedLedger` must give the same bits as
:func:`~sklearn_dpu.privacy.ledger.privacy_spent`,
:func:`~sklearn_dpu.privacy.ledger.worst_case_events` and
:func:`~sklearn_dpu.privacy.ledger.charge_increment` on the dicts, and those
must still compute what the set-based sweep they replaced computed (written
out below as the reference). An estimator keeps its decoding in step with
``privacy_ledger_`` through fits, deletions, failed calls and persistence.
"""

import copy
import operator
import pickle
from collections import defaultdict

import numpy as np
import pytest
from dp_accounting import dp_event

from sklearn_dpu.exceptions import UnlearningError
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.accounting import epsilon_spent, gaussian_precision
from sklearn_dpu.privacy.ledger import (
    DecodedLedger,
    Release,
    charge_increment,
    privacy_spent,
    worst_case_events,
)
from sklearn_dpu.privacy.mechanisms import pure_dp_event

G = dp_event.GaussianDpEvent
DELTA = 1e-5


def _reference_worst_case(releases, delta):
    """The set-based sweep worst_case_events used before (kept as the reference)."""
    if not releases:
        return []
    opening, closing = defaultdict(list), defaultdict(list)
    for i, release in enumerate(releases):
        opening[release.chunks[0]].append(i)
        closing[release.chunks[1] + 1].append(i)
    groups, active = {}, set()
    for chunk in sorted(opening.keys() | closing.keys()):
        active.difference_update(closing[chunk])
        active.update(opening[chunk])
        key = frozenset(active)
        if key and key not in groups:
            groups[key] = [releases[i].event for i in sorted(active)]
    candidates = [groups[k] for k in groups if not any(k < other for other in groups)]
    if len(candidates) == 1:
        return candidates[0]
    precisions = [gaussian_precision(events) for events in candidates]
    if all(p is not None for p in precisions):
        return candidates[max(range(len(candidates)), key=precisions.__getitem__)]
    return max(candidates, key=lambda events: epsilon_spent(events, delta))


def _random_event(rng, gaussian_only):
    sigma = float(rng.choice([0.5, 1.0, 2.0, 4.0]))
    kinds = ["gaussian", "self", "composed", "noop", "noiseless"]
    if not gaussian_only:
        kinds.append("laplace")
    kind = kinds[rng.integers(len(kinds))]
    if kind == "gaussian":
        return G(sigma)
    if kind == "self":
        return dp_event.SelfComposedDpEvent(G(sigma), int(rng.integers(1, 4)))
    if kind == "composed":
        return dp_event.ComposedDpEvent([G(sigma), dp_event.SelfComposedDpEvent(G(2 * sigma), 2)])
    if kind == "noop":
        return dp_event.NoOpDpEvent()
    if kind == "noiseless":
        return G(0.0) if rng.random() < 0.3 else G(sigma)
    return pure_dp_event(float(rng.choice([0.5, 1.0])))


def _random_release(rng, gaussian_only):
    first = int(rng.integers(1, 5))
    last = int(rng.integers(first, 5))
    return Release("r", _random_event(rng, gaussian_only), (first, last), "ref")


@pytest.mark.parametrize("gaussian_only", [True, False])
def test_decoded_ledger_accounts_as_the_dicts_bit_for_bit(gaussian_only):
    rng = np.random.default_rng(11 if gaussian_only else 12)
    # (ledgers with Laplace events go through the PLD accountant: fewer, shorter)
    for _ in range(120 if gaussian_only else 20):
        size = rng.integers(0, 10 if gaussian_only else 6)
        releases = [_random_release(rng, gaussian_only) for _ in range(size)]
        planned = [_random_release(rng, gaussian_only) for _ in range(rng.integers(1, 3))]
        entries = [r.to_dict() for r in releases]
        decoded = DecodedLedger.of(entries)
        reference = _reference_worst_case(releases, DELTA)
        assert worst_case_events(entries, DELTA) == reference
        assert [decoded.releases[i].event for i in decoded.worst_case(DELTA)] == reference
        assert decoded.spent(DELTA) == privacy_spent(entries, DELTA)
        assert decoded.spent(DELTA).epsilon == epsilon_spent(reference, DELTA)
        after = _reference_worst_case([*releases, *planned], DELTA)
        assert decoded.increment(planned, DELTA) == charge_increment(reference, after)
        # decoding in two parts is decoding at once
        cut = int(rng.integers(0, len(entries) + 1))
        parts = DecodedLedger.of(entries[:cut]).extended(entries[cut:])
        assert parts.releases == decoded.releases
        np.testing.assert_array_equal(parts.chunks, decoded.chunks)
        np.testing.assert_array_equal(parts.keys, decoded.keys)
        np.testing.assert_array_equal(parts.precisions, decoded.precisions)


def test_a_long_gaussian_ledger_sums_its_precision_in_ledger_order():
    # 1/3 and 1/7 terms in an order whose float sum differs from a pairwise
    # (numpy.sum) sum: the decoded precision must be the sequential one.
    releases = [Release("r", G(float(s)), (1, 1), "ref") for s in [1.7, 3.1, 0.9] * 400]
    decoded = DecodedLedger.of(releases)
    terms = decoded.precisions
    sequential = 0.0
    for term in terms:
        sequential += term
    assert sequential != np.sum(terms)  # the control: a pairwise sum would differ
    assert decoded._precision_of(np.arange(len(terms))) == sequential
    assert decoded.spent(DELTA) == privacy_spent(releases, DELTA)


def _data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(400, 3))
    return X, X @ np.array([0.5, -0.2, 0.1])


def _fitted(budget=None):
    est = DPLinearRegression(feature_norm=2.0, target_bound=2.0, random_state=0, budget=budget)
    return est.fit(*_data())


def test_an_estimator_keeps_its_decoding_in_step_with_its_ledger(tmp_path):
    budget = PrivacyBudget(1e6, DELTA, tmp_path / "budget.sqlite")
    est = _fitted(budget)
    for k in range(6):
        decoded_before = est._decoded_ledger()
        est.delete_samples([k])
        # extended, not rebuilt: the earlier records are the same objects
        assert est._decoded.entries == tuple(est.privacy_ledger_)
        kept = est._decoded.releases[: len(decoded_before.releases)]
        assert all(map(operator.is_, kept, decoded_before.releases))
        assert est.privacy_spent_ == privacy_spent(est.privacy_ledger_, est.delta)
    # the budget was charged the worst case of the estimator's ledger, no less
    assert budget.spent().epsilon >= est.privacy_spent_.epsilon - 1e-9
    # a refused deletion leaves the ledger and its decoding as they were
    ledger, decoded = est.privacy_ledger_, est._decoded
    with pytest.raises(UnlearningError):
        est.delete_samples([10_000])
    assert est.privacy_ledger_ is ledger and est._decoded is decoded
    # persisted without it; a copy or a reload decodes its own ledger
    assert "_decoded" not in est.__getstate__()
    for other in (pickle.loads(pickle.dumps(est)), copy.deepcopy(est)):
        assert other.privacy_spent_ == est.privacy_spent_
        other.delete_samples([50])
        assert other.privacy_spent_ == privacy_spent(other.privacy_ledger_, other.delta)


@pytest.mark.parametrize(
    "change",
    [
        lambda ledger, costly: [costly, *ledger[1:]],  # another list, the same length
        lambda ledger, costly: ledger[:1],  # a shorter one
        lambda ledger, costly: ledger.__setitem__(0, costly),  # an entry replaced in place
        lambda ledger, costly: ledger.append(costly),  # an entry added in place
    ],
    ids=["other-list", "shorter", "replaced", "appended"],
)
def test_a_ledger_changed_outside_a_release_is_decoded_afresh(change):
    est = _fitted()
    est.delete_samples([0])
    before = est.privacy_spent_  # decoded now
    costly = Release("a costlier release", G(0.1), (1, 1), "ref").to_dict()
    changed = change(est.privacy_ledger_, costly)
    if changed is not None:
        est.privacy_ledger_ = changed
    assert est.privacy_spent_ == privacy_spent(est.privacy_ledger_, est.delta)
    assert est.privacy_spent_ != before


def test_a_refit_is_accounted_afresh():
    est = _fitted()
    first = est.privacy_spent_
    est.set_params(epsilon=3 * est.epsilon).fit(*_data())  # a ledger of the same length
    assert est.privacy_spent_ == privacy_spent(est.privacy_ledger_, est.delta)
    assert est.privacy_spent_.epsilon > first.epsilon


@pytest.mark.parametrize("chunks", [(5, 2), (0, 1 << 62), (-(1 << 62), 0)])
def test_a_release_with_impossible_chunks_is_refused(chunks):
    with pytest.raises(ValueError, match="first <= last"):
        Release("r", G(1.0), chunks, "ref")
    record = Release("r", G(1.0), (1, 1), "ref").to_dict()
    with pytest.raises(ValueError, match="first <= last"):
        Release.from_dict({**record, "chunks": list(chunks)})


def test_a_budgets_stored_events_compose_as_the_whole_list():
    from sklearn_dpu.privacy._budget_store import StoredEvents
    from sklearn_dpu.privacy.accounting import epsilon_upper_bound

    rng = np.random.default_rng(5)
    for trial in range(60):
        gaussian_only = trial % 3 != 0
        stored = StoredEvents()
        events = []
        for _ in range(int(rng.integers(1, 5))):
            part = [_random_event(rng, gaussian_only) for _ in range(rng.integers(0, 4))]
            stored, events = stored.extended(part), events + part
            assert stored.events == tuple(events)
            assert stored.precision == gaussian_precision(events)
        new = [_random_event(rng, gaussian_only) for _ in range(rng.integers(0, 3))]
        bounds = [(0.1, 1e-7)] if trial % 2 else []
        assert stored.epsilon(new, bounds, DELTA) == epsilon_upper_bound(
            [*events, *new], bounds, DELTA
        )


@pytest.mark.parametrize("inner", [(1, 1), (2, 2)], ids=["left", "right"])
def test_a_group_inside_its_neighbour_is_not_a_candidate(inner):
    # chunks 1-2 hold a wide release and, on one side, a narrow one: the chunk
    # without the narrow one is inside its neighbour, so one group is compared
    from sklearn_dpu.privacy.ledger import _worst_case_group

    chunks = np.array([(1, 2), inner, (4, 4)])
    compared = []

    def precision_of(indices):
        compared.append(tuple(indices))
        return float(len(indices))

    worst = _worst_case_group(chunks, DELTA, precision_of, lambda indices: [])
    assert list(worst) == [0, 1]
    assert sorted(compared) == [(0, 1), (2,)]  # not the group (0,) inside (0, 1)
