"""A PrivacyBudget never blocks a deletion, and its ledger is tamper-evident.

Deletions complete when the ledger is missing, moved, read-only, locked or
tampered with: the charge is kept pending on the estimator and settled later.
Each tamper test has a negative control (the same edit with the chain
recomputed is caught only under a key).
"""

import hashlib
import json
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from dp_accounting import dp_event
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from sklearn_dpu.base import planned_fit
from sklearn_dpu.exceptions import (
    BudgetExceededError,
    BudgetUnavailableWarning,
    LedgerTamperedError,
    LedgerUnavailableError,
    PersistenceError,
)
from sklearn_dpu.linear_model import DPLinearRegression, UnlearnableSGDClassifier
from sklearn_dpu.preprocessing import PrivateBoundsScaler
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy import budget as budget_module
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.mechanisms import pure_dp_event

DELTA = 1e-5
G = dp_event.GaussianDpEvent


def _data(n=60):
    X = np.random.default_rng(0).uniform(-1, 1, size=(n, 3))
    return X, X @ [0.5, -0.2, 0.1]


def _fitted(budget):
    X, y = _data()
    return DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0
    ).fit(X, y)


# --------------------------------------------------------------------------
# Never blocked
# --------------------------------------------------------------------------


def _remove(budget, tmp_path, monkeypatch):
    os.remove(budget.path)


def _move(budget, tmp_path, monkeypatch):
    os.rename(budget.path, tmp_path / "moved.sqlite")


def _read_only(budget, tmp_path, monkeypatch):
    if os.geteuid() != 0:
        os.chmod(budget.path, 0o444)
        return
    # root writes through file modes: open the file the way SQLite opens a
    # write-protected one, read-only
    connect = budget_module.PrivacyBudget._connect

    def read_only(self, timeout=budget_module.LOCK_TIMEOUT, create=False):
        uri = f"file:{self.path}?mode=ro"
        return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)

    monkeypatch.setattr(budget_module.PrivacyBudget, "_connect", read_only)
    assert connect is not read_only


def _tamper_delete_first(budget, tmp_path, monkeypatch):
    with sqlite3.connect(budget.path) as db:
        db.execute("DELETE FROM charges WHERE id = (SELECT min(id) FROM charges)")


def _tamper_cap(budget, tmp_path, monkeypatch):
    with sqlite3.connect(budget.path) as db:
        db.execute("UPDATE meta SET value = '1000.0' WHERE key = 'epsilon'")


@pytest.mark.parametrize(
    "breakage",
    [_remove, _move, _read_only, _tamper_delete_first, _tamper_cap],
    ids=lambda f: f.__name__[1:],
)
def test_deletion_completes_and_its_charge_is_kept_pending(
    budget_path, tmp_path, monkeypatch, breakage
):
    budget = PrivacyBudget(50.0, DELTA, budget_path)
    reg = _fitted(budget)
    ledger_before = list(reg.privacy_ledger_)
    breakage(budget, tmp_path, monkeypatch)
    with pytest.warns(BudgetUnavailableWarning, match="charge_pending"):
        reg.delete_samples([0])
    # the deletion happened and its re-release is in the model's own ledger
    assert len(reg.deletion_log_) == 1
    assert len(reg.privacy_ledger_) > len(ledger_before)
    assert len(reg.pending_budget_charges_) == 1
    if breakage in (_remove, _move):
        assert not budget_path.exists()  # no empty ledger re-created
    if breakage is _read_only:  # a read-only ledger can still be inspected
        assert PrivacyBudget(50.0, DELTA, budget_path).spent() == budget.spent()
    monkeypatch.undo()


def test_pending_charge_is_settled_by_one_call(budget_path, tmp_path):
    budget = PrivacyBudget(50.0, DELTA, budget_path)
    reg = _fitted(budget)
    moved = tmp_path / "moved.sqlite"
    os.rename(budget_path, moved)
    with pytest.warns(BudgetUnavailableWarning):
        reg.delete_samples([0])
    with pytest.raises(LedgerUnavailableError, match="does not exist"):
        budget.charge_pending(reg)  # still missing: nothing changes
    assert len(reg.pending_budget_charges_) == 1
    reopened = PrivacyBudget(50.0, DELTA, moved)
    assert reopened.charge_pending(reg) == 0  # kept for the old path
    assert reopened.charge_pending(reg, moved_from=budget_path) == 1
    assert reg.pending_budget_charges_ == []
    assert reopened.history()[-1]["description"] == "DPLinearRegression.delete_samples [deferred]"
    assert reopened.spent().epsilon >= reg.privacy_spent_.epsilon * (1 - 1e-9)
    assert reopened.charge_pending(reg) == 0  # settled once only
    assert len(reopened.history()) == 2


def test_next_mandatory_charge_settles_pending_ones(budget_path, monkeypatch):
    budget = PrivacyBudget(50.0, DELTA, budget_path)
    reg = _fitted(budget)
    monkeypatch.setattr(budget_module, "MANDATORY_LOCK_TIMEOUT", 0.2)
    holder = sqlite3.connect(budget.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the lock
    try:
        start = time.monotonic()
        with pytest.warns(BudgetUnavailableWarning, match="locked"):
            reg.delete_samples([0])
        assert time.monotonic() - start < 30
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(reg.pending_budget_charges_) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.delete_samples([1])
    assert reg.pending_budget_charges_ == []
    descriptions = [h["description"] for h in budget.history()]
    assert descriptions == [
        "DPLinearRegression.fit",
        "DPLinearRegression.delete_samples [deferred]",
        "DPLinearRegression.delete_samples",
    ]


def test_fit_is_refused_while_the_ledger_is_unreachable(budget_path):
    budget = PrivacyBudget(50.0, DELTA, budget_path)
    reg = _fitted(budget)
    state = dict(reg.__dict__)
    os.remove(budget_path)
    X, y = _data()
    with pytest.raises(LedgerUnavailableError):
        reg.partial_fit(X, y)
    assert reg.__dict__.keys() == state.keys()
    assert not budget_path.exists()


def test_pending_charges_count_in_the_next_fit_check(budget_path, tmp_path):
    X, y = _data()
    cap = epsilon_spent([_one_event()] * 2, DELTA) * 1.01  # two fits' worth
    budget = PrivacyBudget(cap, DELTA, budget_path)
    reg = DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0).fit(
        X, y
    )
    os.rename(budget_path, tmp_path / "away.sqlite")
    with pytest.warns(BudgetUnavailableWarning):
        reg.delete_samples([0])
    os.rename(tmp_path / "away.sqlite", budget_path)
    # a second full fit fits under the cap alone, not with the pending charge
    budget.check([_one_event()])
    with pytest.raises(BudgetExceededError):
        reg.fit(X, y)
    assert len(reg.pending_budget_charges_) == 1  # refused fit: still pending


def _one_event():
    return DPLinearRegression(feature_norm=1.0, target_bound=1.0)._fit_release_plan()[0].event


def test_relative_path_is_resolved_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    budget = PrivacyBudget(50.0, DELTA, "relative.sqlite")
    assert budget.path == str(tmp_path / "relative.sqlite")
    reg = _fitted(budget)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.delete_samples([0])
    assert len(budget.history()) == 2
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("path", ["", ":memory:", "file:x.sqlite?mode=memory"])
def test_unshareable_paths_are_refused(path):
    with pytest.raises(ValueError, match="other processes"):
        PrivacyBudget(1.0, DELTA, path)


def test_temporary_ledger_is_removed_at_exit_of_its_creator(tmp_path):
    script = textwrap.dedent(
        """
        import multiprocessing, os, sys
        from dp_accounting import dp_event
        from sklearn_dpu.privacy import PrivacyBudget

        def child(budget):
            budget.charge([dp_event.GaussianDpEvent(20.0)], "child")

        if __name__ == "__main__":
            budget = PrivacyBudget(5.0, 1e-5)
            p = multiprocessing.get_context("spawn").Process(target=child, args=(budget,))
            p.start(); p.join()
            assert p.exitcode == 0
            assert os.path.exists(budget.path), "removed by the child"
            assert len(budget.history()) == 1
            print(budget.path)
        """
    )
    script_path = tmp_path / "make_temp_budget.py"
    script_path.write_text(script)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(script_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    path = result.stdout.strip()
    assert path.startswith(str(tmp_path))
    assert not os.path.exists(path)
    assert [p.name for p in tmp_path.iterdir()] == ["make_temp_budget.py"]


# --------------------------------------------------------------------------
# Tamper evidence
# --------------------------------------------------------------------------


def _ledger_with_charges(path, key=None):
    budget = PrivacyBudget(5.0, DELTA, path, key=key)
    for j in range(3):
        budget.charge([G(10.0 + j)], f"release {j}")
    return budget


def _sql(path, *statements):
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)


_EDITS = {
    "delete-middle": ["DELETE FROM charges WHERE id = 2"],
    "delete-last": ["DELETE FROM charges WHERE id = 3"],
    "delete-all": ["DELETE FROM charges"],
    "edit-events": [
        "UPDATE charges SET events = '"
        + json.dumps([{"module_name": "dp_accounting.dp_event", "class_name": "NoOpDpEvent"}])
        + "' WHERE id = 1"
    ],
    "edit-description": ["UPDATE charges SET description = 'nothing' WHERE id = 1"],
    "edit-digest": ["UPDATE charges SET digest = '00' || substr(digest, 3) WHERE id = 1"],
    "edit-ledger-id": ["UPDATE meta SET value = 'ffff' WHERE key = 'ledger_id'"],
    "insert": [
        "INSERT INTO charges (created, description, events, digest) "
        "SELECT created, description, events, digest FROM charges WHERE id = 1"
    ],
}


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("edit", list(_EDITS))
def test_editing_the_ledger_is_detected(budget_path, edit, warm):
    budget = _ledger_with_charges(budget_path)
    if warm:  # the handle has verified every charge: it re-hashes only new ones
        budget.spent()
    _sql(budget_path, *_EDITS[edit])
    for operation in (
        budget.spent,
        budget.remaining,
        budget.history,
        budget.charges,
        lambda: budget.check([G(10.0)]),
        lambda: budget.charge([G(10.0)], "more"),
        lambda: PrivacyBudget(5.0, DELTA, budget_path),
    ):
        with pytest.raises(LedgerTamperedError, match="modified outside sklearn_dpu"):
            operation()
    assert "unreadable: LedgerTamperedError" in repr(budget)


def test_a_handle_hashes_only_the_charges_it_has_not_verified(budget_path, monkeypatch):
    budget = _ledger_with_charges(budget_path)
    other = PrivacyBudget(5.0, DELTA, budget_path)  # another process's handle, say
    calls = []
    real = PrivacyBudget._digest
    monkeypatch.setattr(PrivacyBudget, "_digest", lambda *a: calls.append(1) or real(*a))
    budget.spent()
    calls.clear()
    assert budget.spent() == other.spent()  # verified already: the genesis digest only
    assert len(calls) == 1 + 1  # (and the other handle's own genesis)
    other.charge([G(12.0)], "from the other handle")
    calls.clear()
    spent = budget.spent()
    assert len(calls) == 1 + 1  # the genesis and the new charge
    assert spent == PrivacyBudget(5.0, DELTA, budget_path).spent()
    # control: a fresh handle hashes all four when it opens, then only the genesis
    calls.clear()
    PrivacyBudget(5.0, DELTA, budget_path).spent()
    assert len(calls) == (1 + 4) + 1


def test_a_warm_handle_reads_a_ledger_restored_from_a_backup(budget_path, tmp_path):
    budget = PrivacyBudget(5.0, DELTA, budget_path)
    empty, one = tmp_path / "empty.sqlite", tmp_path / "one.sqlite"
    shutil.copy(budget_path, empty)
    budget.charge([G(3.0)], "one")
    shutil.copy(budget_path, one)
    budget.charge([G(3.0)], "two")
    assert budget.spent().epsilon > PrivacyBudget(5.0, DELTA, one).spent().epsilon
    for backup in (one, empty):
        shutil.copy(backup, budget_path)
        assert budget.spent() == PrivacyBudget(5.0, DELTA, budget_path).spent()
        assert len(budget.charges()) == len(PrivacyBudget(5.0, DELTA, backup).charges())
    assert budget.spent().epsilon == 0.0
    budget.charge([G(0.95)], "after the restore")  # fits under 5 alone, not with the two
    assert budget.spent() == PrivacyBudget(5.0, DELTA, budget_path).spent()


def test_a_warm_handle_decodes_the_charges_verified_by_a_read_that_did_not_decode(budget_path):
    budget = _ledger_with_charges(budget_path)
    other = PrivacyBudget(5.0, DELTA, budget_path)
    budget.spent()
    other.charge([G(20.0)], "a")
    budget.history()  # verifies the new charge, decodes nothing
    other.charge([G(21.0)], "b")
    assert budget.spent() == PrivacyBudget(5.0, DELTA, budget_path).spent()
    assert len(budget.charges()) == 5


def test_a_handle_shared_by_threads_keeps_events_with_the_rows_they_decode(tmp_path):
    # Thread B verifies ledger X; the file is restored to Y (as many charges,
    # others); thread A verifies Y on the same handle; B then decodes X's
    # rows. The handle must not take X's events for Y's.
    path = tmp_path / "budget.sqlite"
    PrivacyBudget(3.0, DELTA, path)
    shutil.copy(path, tmp_path / "empty")
    PrivacyBudget(3.0, DELTA, path).charge([G(20.0)], "cheap")
    shutil.copy(path, tmp_path / "X")
    shutil.copy(tmp_path / "empty", path)
    PrivacyBudget(3.0, DELTA, path).charge([G(1.5)], "expensive")
    shutil.copy(path, tmp_path / "Y")
    shutil.copy(tmp_path / "X", path)
    handle = PrivacyBudget(3.0, DELTA, path)
    with handle._reading() as db:  # thread B
        rows, _, verified = handle._verify(db)
        shutil.copy(tmp_path / "Y", path)
        handle.history()  # thread A
        assert handle._decoded_events(rows, verified).events == (G(20.0),)  # X's, for B
    assert handle.spent() == PrivacyBudget(3.0, DELTA, path).spent()
    with pytest.raises(BudgetExceededError):
        handle.charge([G(1.6)], "next")


def test_editing_the_cap_is_detected(budget_path):
    budget = _ledger_with_charges(budget_path)
    _sql(budget_path, "UPDATE meta SET value = '50.0' WHERE key = 'epsilon'")
    with pytest.raises(ValueError, match="created with"):
        budget.spent()
    with pytest.raises(LedgerTamperedError):
        PrivacyBudget(50.0, DELTA, budget_path)


def _rechain(path, key=None):
    """What an attacker who knows the format does: delete a row, recompute the chain."""
    handle = object.__new__(PrivacyBudget)
    handle.__setstate__({"epsilon": 5.0, "delta": DELTA, "path": str(path)})
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM charges WHERE id = 2")
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key != 'head'").fetchall())
        digest = handle._digest(key, "", json.dumps(sorted(meta.items())))
        rows = db.execute("SELECT id, created, description, events FROM charges ORDER BY id")
        rows = rows.fetchall()
        for row in rows:
            digest = handle._digest(key, digest, json.dumps(list(row)))
            db.execute("UPDATE charges SET digest = ? WHERE id = ?", (digest, row[0]))
        db.execute(
            "UPDATE meta SET value = ? WHERE key = 'head'", (json.dumps([len(rows), digest]),)
        )


def test_a_keyed_chain_resists_an_attacker_who_recomputes_it(tmp_path, monkeypatch):
    # negative control: without a key, a recomputed chain passes (documented limit)
    plain = _ledger_with_charges(tmp_path / "plain.sqlite")
    spent = plain.spent().epsilon
    _rechain(plain.path)
    assert plain.spent().epsilon < spent
    # with a key the attacker does not have, the same rewrite is refused
    monkeypatch.setenv("LEDGER_KEY", "k" * 32)
    keyed = _ledger_with_charges(tmp_path / "keyed.sqlite", key="LEDGER_KEY")
    _rechain(keyed.path)
    with pytest.raises(LedgerTamperedError):
        keyed.spent()
    # nor can the attacker fall back to an unkeyed chain
    with pytest.raises(ValueError, match="chain"):
        PrivacyBudget(5.0, DELTA, keyed.path)


def test_the_key_is_never_pickled_and_a_wrong_key_is_refused(tmp_path, monkeypatch):
    secret = b"0123456789abcdef-secret-key-bytes"
    budget = _ledger_with_charges(tmp_path / "bytes.sqlite", key=secret)
    state = pickle.dumps(budget)
    assert secret not in state and hashlib.sha256(secret).hexdigest().encode() not in state
    assert pickle.loads(state).spent() == budget.spent()  # same process: key known
    monkeypatch.setenv("LEDGER_KEY", "right-key-right-key")
    env_budget = _ledger_with_charges(tmp_path / "env.sqlite", key="LEDGER_KEY")
    assert b"right-key" not in pickle.dumps(env_budget)
    monkeypatch.setenv("LEDGER_KEY", "wrong-key-wrong-key")
    with pytest.raises(LedgerTamperedError, match="not the key"):
        env_budget.spent()
    monkeypatch.delenv("LEDGER_KEY")
    with pytest.raises(LedgerUnavailableError, match="not set"):
        env_budget.spent()


def _format_1_ledger(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute(
            "CREATE TABLE charges (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " created REAL, description TEXT, events TEXT)"
        )
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [
                ("format_version", "1"),
                ("epsilon", "5.0"),
                ("delta", repr(DELTA)),
                ("neighboring_relation", "ADD_OR_REMOVE_ONE"),
            ],
        )
        events = json.dumps(
            [
                {
                    "module_name": "dp_accounting.dp_event",
                    "class_name": "GaussianDpEvent",
                    "noise_multiplier": 10.0,
                }
            ]
        )
        db.execute(
            "INSERT INTO charges (created, description, events) VALUES (1.0, 'old fit', ?)",
            (events,),
        )


def test_an_old_format_ledger_names_the_upgrade(budget_path):
    _format_1_ledger(budget_path)
    with pytest.raises(PersistenceError, match="upgrade_ledger"):
        PrivacyBudget(5.0, DELTA, budget_path)
    budget_module.upgrade_ledger(budget_path)
    budget = PrivacyBudget(5.0, DELTA, budget_path)
    assert budget.spent().epsilon == pytest.approx(epsilon_spent([G(10.0)], DELTA))
    budget.charge([G(10.0)], "new fit")
    assert [h["description"] for h in budget.history()] == ["old fit", "new fit"]


# --------------------------------------------------------------------------
# What is spent, what is left, what a search will cost
# --------------------------------------------------------------------------


def test_charges_table_and_remaining(budget_path):
    budget = PrivacyBudget(5.0, DELTA, budget_path)
    assert budget.remaining() == 5.0
    budget.charge([G(10.0)], "first")
    budget.charge([G(10.0), G(12.0)], "second")
    frame = pd.DataFrame(budget.charges())
    assert list(frame["description"]) == ["first", "second"]
    assert list(frame.columns[:5]) == [
        "index",
        "created",
        "description",
        "epsilon",
        "total_epsilon",
    ]
    assert frame["total_epsilon"].is_monotonic_increasing
    assert frame["total_epsilon"].iloc[-1] == pytest.approx(budget.spent().epsilon)
    assert frame["epsilon"].iloc[1] == pytest.approx(epsilon_spent([G(10.0), G(12.0)], DELTA))
    assert budget.remaining() == pytest.approx(5.0 - budget.spent().epsilon)
    assert f"remaining={budget.remaining():.4g}" in repr(budget)
    os.remove(budget_path)
    assert "unreadable: LedgerUnavailableError" in repr(budget)


@pytest.mark.parametrize("n_jobs", [1])
def test_can_afford_predicts_whether_a_grid_search_completes(tmp_path, n_jobs):
    X, y = _data(90)
    grid, cv = {"alpha": [0.0, 1.0]}, 3
    n_fits = len(grid["alpha"]) * cv + 1  # every candidate and fold, and the refit
    for cap, affordable in (
        (epsilon_spent([_one_event()] * n_fits, DELTA) * 1.001, True),
        (epsilon_spent([_one_event()] * (n_fits - 1), DELTA) * 1.001, False),
    ):
        budget = PrivacyBudget(cap, DELTA, tmp_path / f"{affordable}.sqlite")
        est = DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0)
        assert budget.can_afford(est, n_fits) is affordable
        assert budget.can_afford(est, 1)
        search = GridSearchCV(est, grid, cv=cv, n_jobs=n_jobs)
        if affordable:
            search.fit(X, y)
            assert budget.spent().epsilon == pytest.approx(budget.planned_epsilon(est, 0))
        else:
            # what can_afford warns about: the search spends the rest, then fails
            with pytest.raises(BudgetExceededError):
                search.fit(X, y)
            assert len(budget.history()) == n_fits - 1


def test_can_afford_plans_every_step_of_a_pipeline_that_charges_the_budget(tmp_path):
    """A private scaler and a model sharing one budget: each fit charges both
    (before, only the final step was planned and can_afford said yes to a
    search that then failed at its refit)."""
    X, y = _data(90)
    budget = PrivacyBudget(50.0, DELTA, tmp_path / "pipe.sqlite")
    pipe = make_pipeline(
        PrivateBoundsScaler(epsilon=0.2, budget=budget, random_state=0),
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0),
    )
    planned = budget.planned_epsilon(pipe, 3)
    for _ in range(3):
        pipe.fit(X, y)
    assert budget.spent().epsilon <= planned + 1e-9
    # planning the final step alone (the scaler on no budget) undercounts
    fresh = PrivacyBudget(50.0, DELTA, tmp_path / "fresh.sqlite")
    model = DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=fresh, random_state=0)
    assert fresh.planned_epsilon(make_pipeline(PrivateBoundsScaler(), model), 3) < (
        budget.spent().epsilon
    )
    with pytest.raises(NotImplementedError, match="plan a Pipeline's steps"):
        planned_fit(pipe)


# --------------------------------------------------------------------------
# Processes killed mid-run
# --------------------------------------------------------------------------

_CHARGER = textwrap.dedent(
    """
    import sys, time
    from dp_accounting import dp_event
    from sklearn_dpu.exceptions import BudgetExceededError
    from sklearn_dpu.privacy import PrivacyBudget

    path, cap, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    budget = PrivacyBudget(cap, 1e-5, path)
    print("ready", flush=True)
    sys.stdin.readline()
    j = 0
    while True:
        try:
            budget.charge([dp_event.GaussianDpEvent(30.0)], f"{name} charge {j}")
        except BudgetExceededError:
            break
        print(f"{name} charge {j}", flush=True)
        j += 1
        time.sleep(0.01)  # a run of releases, not a burst: every worker gets the lock
    print("done", flush=True)
    """
)


def test_six_processes_three_killed_keep_the_ledger_consistent(tmp_path):
    path = tmp_path / "shared.sqlite"
    m, k = 30.0, 150
    cap = (epsilon_spent([G(m)] * k, DELTA) + epsilon_spent([G(m)] * (k + 1), DELTA)) / 2
    budget = PrivacyBudget(cap, DELTA, path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHARGER, str(path), repr(cap), f"w{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        victims, printed = procs[:3], {}
        # victims start first (SQLite's lock is not fair: a late starter could
        # find the budget spent), and are killed while the survivors charge
        for i, p in enumerate(victims):
            p.stdin.write("go\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == f"w{i} charge 0"
        for p in procs[3:]:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in victims:
            time.sleep(0.05)
            os.kill(p.pid, signal.SIGKILL)
        # readers never see a half-written state, nor a false broken chain
        while any(p.poll() is None for p in procs[3:]):
            assert budget.spent().epsilon <= cap
        for i, p in enumerate(procs):
            out, _ = p.communicate(timeout=240)
            lines = out.split("\n") if i >= 3 else [f"w{i} charge 0", *out.split("\n")]
            printed[f"w{i}"] = [line for line in lines if " charge " in line]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs[:3]] == [-signal.SIGKILL] * 3
    assert [p.returncode for p in procs[3:]] == [0] * 3
    recorded = [h["description"] for h in budget.history()]  # the chain verifies
    assert len(recorded) == len(set(recorded))
    for name, lines in printed.items():
        mine = [d for d in recorded if d.startswith(f"{name} ")]
        # a charge committed just before the kill may be unprinted, never the reverse
        assert set(lines) <= set(mine) and len(mine) - len(lines) <= 1
    # the survivors ran until refused: the ledger is full, and never over the cap
    assert len(recorded) == k
    assert budget.spent().epsilon <= cap


def _estimators(budget):
    from sklearn_dpu.linear_model import DPLogisticRegression, UnlearnableSGDClassifier

    return [
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0),
        DPLogisticRegression(feature_norm=1.0, budget=budget, random_state=0),
        UnlearnableSGDClassifier(budget=budget, random_state=0),
    ]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["linear", "logistic", "unlearnable_sgd"])
def test_every_estimator_completes_a_deletion_without_its_ledger(tmp_path, which):
    X, _ = _data(80)
    y = (X[:, 0] > 0).astype(int) if which else X[:, 0]
    path = tmp_path / "budget.sqlite"
    budget = PrivacyBudget(500.0, DELTA, path)
    est = _estimators(budget)[which].fit(X, y)
    charged = len(budget.history())
    os.rename(path, tmp_path / "away.sqlite")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3):
            est.delete_samples([i])
    assert len(est.deletion_log_) == 3
    pending = getattr(est, "pending_budget_charges_", [])
    assert all(issubclass(w.category, BudgetUnavailableWarning) for w in caught)
    assert len(caught) == len(pending)  # one warning per charge kept pending
    os.rename(tmp_path / "away.sqlite", path)
    assert budget.charge_pending(est) == len(pending)
    assert len(budget.history()) == charged + len(pending)
    # the budget shows at least what the model says it released
    assert budget.spent().epsilon >= est.privacy_spent_.epsilon * (1 - 1e-9)


def test_the_deletion_report_says_when_the_budget_could_not_be_charged(tmp_path):
    path = tmp_path / "budget.sqlite"
    budget = PrivacyBudget(500.0, DELTA, path)
    reg = _fitted(budget)
    reg.delete_samples([0])
    assert not any("could not be charged" in n for n in reg.deletion_log_[-1].notes)
    os.rename(path, tmp_path / "away.sqlite")
    with pytest.warns(BudgetUnavailableWarning):
        reg.delete_samples([1])
    notes = reg.deletion_log_[-1].notes
    assert any("could not be charged" in n and "charge_pending" in n for n in notes)
    os.rename(tmp_path / "away.sqlite", path)
    reg.delete_samples([2])  # settles the pending charge: nothing to report any more
    assert not any("could not be charged" in n for n in reg.deletion_log_[-1].notes)


def test_the_deletion_report_says_when_it_was_charged_past_the_cap(tmp_path):
    budget = PrivacyBudget(1.0, DELTA, tmp_path / "budget.sqlite")
    reg = _fitted(budget)
    with pytest.warns(Warning, match="past the budget cap"):
        reg.delete_samples([0])
    assert any("past its cap" in n for n in reg.deletion_log_[-1].notes)


class _SpendsWhenRead:
    """New rows whose reading lets another handle of the budget spend it: the
    race between a partial_fit's pre-check and its charge."""

    def __init__(self, rows, other):
        self.rows, self.other, self.shape = rows, other, rows.shape

    def __len__(self):
        return len(self.rows)

    def __array__(self, dtype=None, copy=None):
        if self.other is not None:
            other, self.other = self.other, None
            epsilon = 4.0
            while epsilon > 1e-4:  # spend as much of the rest as it will take
                try:
                    other.charge([pure_dp_event(epsilon)], "another process")
                except BudgetExceededError:
                    epsilon /= 2
        return np.asarray(self.rows, dtype=dtype)


def test_a_partial_fit_refused_after_its_run_leaves_the_stored_run_as_it_was(tmp_path):
    """The SGD's insertion plan is inexact: the coupled run is edited, then
    charged. A refused charge must leave no inserted row in the stored run
    (before: 50 uncharged rows stayed in it and reached later models)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (400, 3))
    budget = PrivacyBudget(10.0, DELTA, tmp_path / "race.sqlite")
    est = UnlearnableSGDClassifier(
        schedule_size=400, max_iter=20, random_state=0, budget=budget
    ).fit(X, X[:, 0] > 0)
    before = pickle.dumps((est.unlearning_state_, est.edit_ledger_, est.privacy_ledger_))
    new = rng.uniform(-0.5, 0.5, (50, 3))
    other = PrivacyBudget(10.0, DELTA, budget.path)
    with pytest.raises(BudgetExceededError):
        est.partial_fit(_SpendsWhenRead(new, other), new[:, 0] > 0)
    after = pickle.dumps((est.unlearning_state_, est.edit_ledger_, est.privacy_ledger_))
    assert after == before
    assert est.unlearning_state_.registry.n_samples == 400


class _LyingShape:
    """An array-like whose shape disagrees with its values."""

    shape = (300, 1)

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.values, dtype=dtype)

    def __len__(self):
        return len(self.values)


def test_a_shape_that_lies_about_the_features_is_refused_before_any_charge(tmp_path):
    """Releases planned from X's shape must be those drawn: a shape of 1
    feature over 20-feature values recorded a noise multiplier of 5.47 while
    4.12 was drawn, so the ledger understated later re-releases."""
    X = np.random.default_rng(0).normal(size=(300, 20))
    budget = PrivacyBudget(50.0, DELTA, tmp_path / "shape.sqlite")
    reg = DPLinearRegression(
        feature_norm="auto", target_bound="auto", budget=budget, random_state=0
    )
    with pytest.raises(ValueError, match="shape says 1 features"):
        reg.fit(_LyingShape(X), X.sum(axis=1))
    assert budget.history() == [] and not hasattr(reg, "privacy_ledger_")
