"""Tests of :class:`sklearn_dpu.privacy.PrivacyBudget`, the SQLite ledger shared
by every copy of an estimator, and by every process that opens it.

Each guarantee is checked against a broken variant where one exists: the
concurrency harness must catch a non-atomic check-then-record charge, and the
cap test shows the charge one past the cap is refused.
"""

import copy
import hashlib
import json
import math
import multiprocessing
import os
import pickle
import sqlite3
import subprocess
import sys
import tempfile
import textwrap

import pytest
from dp_accounting import dp_event

from sklearn_dpu.exceptions import BudgetExceededError, PersistenceError
from sklearn_dpu.privacy import PrivacyBudget, PrivacySpent
from sklearn_dpu.privacy import budget as budget_module
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.ledger import event_to_dict
from sklearn_dpu.privacy.mechanisms import pure_dp_event

from . import _privacy_budget_workers as workers

DELTA = 1e-5
G = dp_event.GaussianDpEvent


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _cap_between(multiplier, k):
    """A cap that exactly k charges of G(multiplier) fit under (k + 1 do not)."""
    low = epsilon_spent([G(multiplier)] * k, DELTA)
    high = epsilon_spent([G(multiplier)] * (k + 1), DELTA)
    return (low + high) / 2


def _lock_is_free(path):
    db = sqlite3.connect(path, timeout=0.5, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


# --------------------------------------------------------------------------
# Basics
# --------------------------------------------------------------------------


def test_new_budget_has_spent_nothing(budget_path):
    budget = PrivacyBudget(3.0, DELTA, budget_path)
    assert budget.spent() == PrivacySpent(0.0, DELTA)
    assert budget.history() == []
    assert budget.path == os.fspath(budget_path)
    assert repr(budget) == (
        f"PrivacyBudget(epsilon=3.0, delta={DELTA!r}, path={budget.path!r}, spent=0, remaining=3)"
    )


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [
        (0, DELTA),
        (-1.0, DELTA),
        (math.inf, DELTA),
        (math.nan, DELTA),
        ("1", DELTA),
        (1.0, 0.0),
        (1.0, 1.0),
        (1.0, -0.1),
        (1.0, math.nan),
    ],
)
def test_invalid_cap_is_refused(budget_path, epsilon, delta):
    with pytest.raises(ValueError):
        PrivacyBudget(epsilon, delta, budget_path)
    assert not budget_path.exists()


def test_default_path_is_a_fresh_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    a, b = PrivacyBudget(1.0, DELTA), PrivacyBudget(1.0, DELTA)
    assert a.path != b.path
    assert os.path.dirname(a.path) == str(tmp_path)
    a.charge([G(5.0)], "a")
    assert b.spent().epsilon == 0.0


def test_cap_is_enforced_exactly(budget_path):
    m, k = 10.0, 12
    cap = _cap_between(m, k)
    budget = PrivacyBudget(cap, DELTA, budget_path)
    for j in range(k):
        budget.charge([G(m)], f"release {j}")
    assert budget.spent().epsilon == pytest.approx(epsilon_spent([G(m)] * k, DELTA))
    before = _digest(budget_path)
    with pytest.raises(BudgetExceededError, match="above its cap"):
        budget.charge([G(m)], "one too many")
    assert _digest(budget_path) == before
    assert len(budget.history()) == k
    assert budget.spent().epsilon <= cap


def test_cap_reached_exactly_is_allowed_but_not_beyond(budget_path):
    m, k = 10.0, 5
    cap = epsilon_spent([G(m)] * k, DELTA)  # exactly k charges' worth
    budget = PrivacyBudget(cap, DELTA, budget_path)
    for j in range(k):
        budget.charge([G(m)], f"release {j}")
    assert budget.spent().epsilon == pytest.approx(cap)
    extra = G(300.0)
    assert epsilon_spent([G(m)] * k + [extra], DELTA) > cap + 1e-6
    with pytest.raises(BudgetExceededError):
        budget.charge([extra], "a little more")


def test_budget_composes_with_the_accountant_not_by_summing(budget_path):
    budget = PrivacyBudget(10.0, DELTA, budget_path)
    budget.charge([G(10.0)], "first")
    budget.charge([G(10.0), pure_dp_event(0.3)], "second")
    expected = epsilon_spent([G(10.0), G(10.0), pure_dp_event(0.3)], DELTA)
    spent = budget.spent()
    assert spent == PrivacySpent(pytest.approx(expected, rel=1e-12), DELTA)
    assert spent.epsilon < 2 * epsilon_spent([G(10.0)], DELTA) + 0.3


def test_non_private_events_are_never_charged(budget_path):
    budget = PrivacyBudget(100.0, DELTA, budget_path)
    for events in (
        [dp_event.NonPrivateDpEvent()],
        [G(0.0)],
        [G(5.0), dp_event.NonPrivateDpEvent()],
    ):
        with pytest.raises(BudgetExceededError):
            budget.charge(events, "non-private")
    assert budget.history() == []


def test_empty_charge_records_nothing(budget_path):
    budget = PrivacyBudget(1.0, DELTA, budget_path)
    before = _digest(budget_path)
    budget.charge([], "nothing")
    assert budget.history() == [] and _digest(budget_path) == before


def test_history_records_what_was_charged(budget_path):
    budget = PrivacyBudget(10.0, DELTA, budget_path)
    events = [dp_event.SelfComposedDpEvent(G(3.0), 2), pure_dp_event(0.1)]
    budget.charge(events, "fit of Est")
    budget.charge([G(4.0)], "partial_fit of Est")
    history = budget.history()
    assert [h["description"] for h in history] == ["fit of Est", "partial_fit of Est"]
    assert history[0]["events"] == [event_to_dict(e) for e in events]
    assert history[0]["created"] <= history[1]["created"]
    json.dumps(history)  # plain data


# --------------------------------------------------------------------------
# check() and atomic charge()
# --------------------------------------------------------------------------


def test_check_writes_nothing(budget_path):
    budget = PrivacyBudget(_cap_between(10.0, 3), DELTA, budget_path)
    budget.charge([G(10.0)], "first")
    before = (_digest(budget_path), os.stat(budget_path).st_mtime_ns)
    budget.check([G(10.0)], "would fit")
    budget.check([G(10.0), G(10.0)])
    with pytest.raises(BudgetExceededError):
        budget.check([G(10.0)] * 3, "would not fit")
    assert (_digest(budget_path), os.stat(budget_path).st_mtime_ns) == before
    assert len(budget.history()) == 1
    # negative control: the same fingerprint does see a charge
    budget.charge([G(10.0)], "second")
    assert _digest(budget_path) != before[0]


def test_refused_charge_records_none_of_its_events(budget_path):
    budget = PrivacyBudget(1.0, DELTA, budget_path)
    small = G(50.0)
    big = G(0.5)
    budget.check([small])  # alone it fits
    before = _digest(budget_path)
    with pytest.raises(BudgetExceededError):
        budget.charge([small, big], "both")
    assert _digest(budget_path) == before
    assert budget.history() == []
    assert _lock_is_free(budget_path)
    budget.charge([small], "small only")
    assert len(budget.history()) == 1


def test_failure_inside_charge_rolls_back_and_releases_the_lock(budget_path, monkeypatch):
    budget = PrivacyBudget(10.0, DELTA, budget_path)
    budget.charge([G(5.0)], "before")
    before = _digest(budget_path)
    real = budget_module.event_to_dict
    calls = []

    def flaky(event):
        calls.append(event)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(event)

    monkeypatch.setattr(budget_module, "event_to_dict", flaky)
    with pytest.raises(RuntimeError, match="disk on fire"):
        budget.charge([G(5.0), G(6.0)], "interrupted")
    monkeypatch.setattr(budget_module, "event_to_dict", real)
    assert _digest(budget_path) == before
    assert [h["description"] for h in budget.history()] == ["before"]
    assert _lock_is_free(budget_path)
    budget.charge([G(5.0)], "after")
    assert len(budget.history()) == 2


def test_charge_over_cap_records_past_the_cap(budget_path):
    cap = _cap_between(10.0, 1)
    budget = PrivacyBudget(cap, DELTA, budget_path)
    budget.charge([G(10.0)], "fit")
    budget.charge_over_cap([G(10.0), G(10.0)], "deletion re-release")
    assert budget.spent().epsilon == pytest.approx(epsilon_spent([G(10.0)] * 3, DELTA))
    assert budget.spent().epsilon > cap
    assert budget.history()[-1]["description"] == "deletion re-release [over cap]"
    with pytest.raises(BudgetExceededError):
        budget.check([G(1e6)])
    with pytest.raises(BudgetExceededError):
        budget.charge([G(1e6)], "anything more")
    budget.charge_over_cap([dp_event.NonPrivateDpEvent()], "non-private re-release")
    assert budget.spent().epsilon == math.inf


# --------------------------------------------------------------------------
# Copies, pickles, reopening, corruption
# --------------------------------------------------------------------------


def test_copies_and_pickles_share_the_ledger(budget_path):
    budget = PrivacyBudget(10.0, DELTA, budget_path)
    handles = [
        copy.copy(budget),
        copy.deepcopy(budget),
        pickle.loads(pickle.dumps(budget)),
        copy.deepcopy({"estimator_params": {"budget": budget}})["estimator_params"]["budget"],
    ]
    for i, handle in enumerate(handles):
        assert handle is not budget
        assert (handle.path, handle.epsilon, handle.delta) == (
            budget.path,
            budget.epsilon,
            budget.delta,
        )
        handle.charge([G(20.0)], f"copy {i}")
    expected = epsilon_spent([G(20.0)] * len(handles), DELTA)
    for handle in [budget, *handles]:
        assert handle.spent().epsilon == pytest.approx(expected)
    # the pickle is the handle only: (cap, path), no connection, no ledger content
    assert budget.__getstate__() == {"epsilon": 10.0, "delta": DELTA, "path": budget.path}


def test_reopening_requires_the_same_cap(budget_path):
    budget = PrivacyBudget(2.0, DELTA, budget_path)
    budget.charge([G(5.0)], "first")
    again = PrivacyBudget(2, DELTA, budget_path)  # same cap, int or float
    assert again.spent() == budget.spent()
    for epsilon, delta in ((2.5, DELTA), (2.0, 1e-6), (1e9, DELTA)):
        with pytest.raises(ValueError, match="created with"):
            PrivacyBudget(epsilon, delta, budget_path)
    assert len(budget.history()) == 1


def test_corrupted_file_gives_persistence_error(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 500)
    with pytest.raises(PersistenceError):
        PrivacyBudget(1.0, DELTA, garbage)

    good = tmp_path / "good.sqlite"
    budget = PrivacyBudget(5.0, DELTA, good)
    for j in range(40):
        budget.charge([G(30.0)], "x" * 2000 + str(j))
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(PersistenceError):
        PrivacyBudget(5.0, DELTA, truncated)

    foreign = tmp_path / "foreign.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE meta (a, b, c)")
    db.commit()
    db.close()
    with pytest.raises(PersistenceError):
        PrivacyBudget(1.0, DELTA, foreign)


def _tamper(path, payload):
    db = sqlite3.connect(path)
    db.execute("UPDATE charges SET events = ? WHERE id = 1", (payload,))
    db.commit()
    db.close()


_TAMPERED = [
    json.dumps([{"module_name": "os", "class_name": "system", "command": "echo pwned"}]),
    json.dumps([{"module_name": "dp_accounting.dp_event", "class_name": "importlib"}]),
    "{not json",
]


@pytest.mark.parametrize("payload", _TAMPERED, ids=["os.system", "module-attr", "bad-json"])
def test_tampered_ledger_fails_closed(budget_path, payload):
    """A ledger whose stored events are not dp_accounting events is refused: no
    spent value, no check, no charge."""
    budget = PrivacyBudget(5.0, DELTA, budget_path)
    budget.charge([G(10.0)], "first")
    _tamper(budget_path, payload)
    before = _digest(budget_path)
    for operation in (
        budget.spent,
        lambda: budget.check([G(10.0)]),
        lambda: budget.charge([G(10.0)], "more"),
    ):
        with pytest.raises(ValueError):
            operation()
    assert _digest(budget_path) == before


@pytest.mark.parametrize("payload", _TAMPERED, ids=["os.system", "module-attr", "bad-json"])
def test_tampered_ledger_raises_persistence_error(budget_path, payload):
    budget = PrivacyBudget(5.0, DELTA, budget_path)
    budget.charge([G(10.0)], "first")
    _tamper(budget_path, payload)
    with pytest.raises(PersistenceError):
        budget.spent()


def test_ledger_corrupted_after_opening_fails_closed(budget_path):
    budget = PrivacyBudget(5.0, DELTA, budget_path)
    budget.charge([G(10.0)], "first")
    budget_path.write_bytes(b"garbage" * 1000)
    for operation in (
        budget.spent,
        lambda: budget.check([G(10.0)]),
        lambda: budget.charge([G(10.0)], "more"),
    ):
        with pytest.raises((PersistenceError, sqlite3.DatabaseError)):
            operation()


def test_ledger_corrupted_after_opening_raises_persistence_error(budget_path):
    budget = PrivacyBudget(5.0, DELTA, budget_path)
    budget.charge([G(10.0)], "first")
    budget_path.write_bytes(b"garbage" * 1000)
    with pytest.raises(PersistenceError):
        budget.spent()


# --------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------


def _assert_charges_consistent(budget, reported):
    """The invariant concurrent charging must keep: never above the cap, and the
    ledger holds exactly the charges the workers saw succeed."""
    assert sorted(h["description"] for h in budget.history()) == sorted(reported)
    assert budget.spent().epsilon <= budget.epsilon + 1e-9


def test_concurrent_processes_never_overspend(tmp_path):
    """Three processes (two spawned children and this one) charge one ledger at
    once, released together by a barrier. Phase 1 uses PrivacyBudget.charge;
    phase 2, the negative control, a non-atomic check-then-record in the same
    processes and harness."""
    m, k, n_workers, attempts = 10.0, 10, 3, 6
    atomic = (str(tmp_path / "shared.sqlite"), _cap_between(m, k))
    racy = (str(tmp_path / "racy.sqlite"), _cap_between(m, 1))
    budgets = [PrivacyBudget(cap, DELTA, path) for path, cap in (atomic, racy)]

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n_workers)
    queue = ctx.Queue()
    procs = [
        ctx.Process(
            target=workers.concurrent_session,
            args=(atomic, racy, DELTA, m, attempts, w, barrier, queue),
        )
        for w in range(n_workers - 1)
    ]
    for p in procs:
        p.start()
    try:
        workers.concurrent_session(atomic, racy, DELTA, m, attempts, n_workers - 1, barrier, queue)
        results = [queue.get(timeout=240) for _ in range(n_workers)]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    charged = [d for _, ok, _ in results for d in ok]
    recorded = [d for _, _, ok in results for d in ok]

    _assert_charges_consistent(budgets[0], charged)
    # identical charges: exactly k of the 18 attempts fit, whatever the interleaving
    assert len(charged) == k
    assert {d.split(" charge")[0] for d in charged} <= {f"worker {w}" for w in range(n_workers)}

    # negative control: every worker passed the check before any recorded, so
    # the racy ledger holds three charges where one fits, and the check catches it
    assert len(recorded) == n_workers
    with pytest.raises(AssertionError):
        _assert_charges_consistent(budgets[1], recorded)


_CHILD = textwrap.dedent(
    """
    import os, sys
    from dp_accounting import dp_event
    from sklearn_dpu.privacy import PrivacyBudget
    from sklearn_dpu.privacy import budget as budget_module

    path = sys.argv[1]
    budget = PrivacyBudget(3.0, 1e-5, path)
    budget.charge([dp_event.GaussianDpEvent(8.0)], "child charge 1")
    budget.charge([dp_event.GaussianDpEvent(9.0), dp_event.GaussianDpEvent(7.0)], "child charge 2")

    # then die inside a third charge, after its INSERT and before its COMMIT
    class DyingConnection:
        def __init__(self, db):
            self.db = db
        def execute(self, sql, *args):
            if sql == "COMMIT":
                os._exit(17)
            return self.db.execute(sql, *args)
        def close(self):
            self.db.close()

    connect = budget_module.PrivacyBudget._connect
    budget_module.PrivacyBudget._connect = lambda self, **kw: DyingConnection(connect(self, **kw))
    budget.charge([dp_event.GaussianDpEvent(50.0)], "never committed")
    os._exit(0)
    """
)


def test_ledger_survives_process_exit_and_a_crash_mid_charge(tmp_path):
    path = tmp_path / "restart.sqlite"
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 17, result.stderr
    budget = PrivacyBudget(3.0, 1e-5, path)
    assert [h["description"] for h in budget.history()] == ["child charge 1", "child charge 2"]
    assert budget.spent().epsilon == pytest.approx(epsilon_spent([G(8.0), G(9.0), G(7.0)], 1e-5))
    assert _lock_is_free(path)
    budget.charge([G(8.0)], "parent")
    assert len(budget.history()) == 3
