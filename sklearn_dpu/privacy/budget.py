"""A privacy budget shared by every copy of an estimator.

scikit-learn clones, deep-copies and pickles estimators (``GridSearchCV``,
``cross_val_score``, joblib workers). A budget kept inside the Python object
would be copied with them and each copy would spend its own; an accountant
held in the estimator object records nothing of what its clones spent.
:class:`PrivacyBudget` is only a *handle*: the ledger lives in an SQLite file,
every copy of the handle opens the same file, and each charge checks and
spends in one ``BEGIN IMMEDIATE`` transaction, so concurrent processes can
never overspend it together.

The total is the composition of the stored ``dp_accounting`` events by the
accountant of :mod:`sklearn_dpu.privacy.accounting`, not a sum of epsilons.
Every charge is composed with every other, as if each touched every record:
the budget does not know which estimators saw which data.

Tamper evidence: each charge stores a digest chaining it to the previous one
(SHA-256, or HMAC-SHA256 under a key), starting from a digest of the ledger's
parameters, and the ledger stores the number of charges and the last digest.
The chain is verified when a handle opens the ledger, before every check and
charge, and by :meth:`PrivacyBudget.spent`. What it does and does not protect
against is in ``doc/budget.rst``. The storage (the SQLite file, the chain, the
upgrade of format-1 ledgers) is in :mod:`sklearn_dpu.privacy._budget_store`.
"""

import atexit
import json
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dp_accounting import dp_event

from ..exceptions import BudgetExceededError
from ._budget_store import (
    _KEYS,
    LOCK_TIMEOUT,
    LedgerStore,
    _cleanup,
    _key_id,
    upgrade_format_1,
)
from .accounting import epsilon_spent
from .calibration import check_epsilon_delta
from .events import event_from_dict, event_to_dict
from .ledger import PrivacySpent, worst_case_events

if TYPE_CHECKING:  # base imports this module
    from sklearn.pipeline import Pipeline

    from ..base import PrivateEstimatorMixin

__all__ = ["Charge", "PrivacyBudget", "upgrade_ledger"]

# Accountant output is a float; a cap reached exactly must not fail by an ulp.
_TOLERANCE = 1e-9
#: Seconds a mandatory charge (a deletion's re-release) waits for the lock:
#: a deletion is never blocked, its charge is kept pending instead.
MANDATORY_LOCK_TIMEOUT = 5.0


@dataclass(frozen=True)
class Charge:
    """One charge of a :class:`PrivacyBudget`, as listed by :meth:`PrivacyBudget.charges`.

    ``pandas.DataFrame(budget.charges())`` gives one row per charge.

    Parameters
    ----------
    index : int
        Position in the ledger, from 0.
    created : datetime.datetime
        When it was recorded (UTC).
    description : str
        Who released what, e.g. ``"DPLinearRegression.fit"``; suffixed
        ``[over cap]`` for a deletion's re-release recorded past the cap and
        ``[deferred]`` for a charge that was kept pending on the estimator.
    epsilon : float
        Epsilon of this charge alone, at the budget's delta.
    total_epsilon : float
        Epsilon of every charge up to and including this one, composed.
    events : tuple of dp_accounting.dp_event.DpEvent
    digest : str
        Its link in the hash chain.
    """

    index: int
    created: datetime
    description: str
    epsilon: float
    total_epsilon: float
    events: tuple
    digest: str


class PrivacyBudget(LedgerStore):
    """A durable (epsilon, delta) cap shared by all estimators that hold it.

    Pass it as ``budget=`` to an estimator. Each release the estimator makes is
    charged before any data is read; a release that would take the composed
    total above ``epsilon`` (at ``delta``) raises
    :class:`~sklearn_dpu.exceptions.BudgetExceededError` and charges nothing.
    A deletion's re-release is never refused: past the cap it is recorded
    anyway, and when the ledger cannot be reached it is kept pending on the
    estimator (:meth:`charge_pending`).

    Parameters
    ----------
    epsilon : float
        Cap on the composed epsilon, finite and > 0 (numpy scalars accepted).
    delta : float
        The delta at which the total is measured, in (0, 0.5); see
        :func:`~sklearn_dpu.privacy.check_epsilon_delta`.
    path : str or os.PathLike, default=None
        SQLite file holding the ledger, made absolute here (a later
        ``os.chdir`` does not move it). ``None`` creates a new file in the
        temporary directory, removed when the process that created it exits;
        worker processes open it by path. ``""`` and ``":memory:"`` are
        refused: they cannot be shared by copies or processes. Opening an
        existing ledger requires the same ``epsilon`` and ``delta`` it was
        created with.
    key : str or bytes, default=None
        Key of an HMAC-SHA256 hash chain, for ledgers that someone able to
        rewrite the file must not be able to forge. A ``str`` names an
        environment variable holding the key (read at each use, so joblib
        workers, which inherit the environment, can verify the ledger); a
        ``bytes`` key is kept in this process only and never pickled (copies
        of the handle in other processes cannot use it). ``None``: a plain
        SHA-256 chain, which shows accidental and naive edits only.

    Attributes
    ----------
    path : str
        The ledger file, absolute; copies and pickles of the handle refer to it.

    See Also
    --------
    sklearn_dpu.privacy.ledger.privacy_spent : accounting of one estimator.

    Notes
    -----
    The user guide page ``doc/budget.rst`` explains how to check a whole
    search before starting it, what happens when the ledger is missing or
    locked, and what the tamper evidence does and does not protect against.

    Examples
    --------
    >>> from sklearn_dpu.privacy import PrivacyBudget
    >>> from sklearn_dpu.linear_model import DPLinearRegression
    >>> budget = PrivacyBudget(epsilon=3.0, delta=1e-5)
    >>> budget.spent().epsilon
    0.0
    >>> budget.can_afford(DPLinearRegression(epsilon=1.0, budget=budget), n_fits=3)
    True
    >>> budget.can_afford(DPLinearRegression(epsilon=1.0, budget=budget), n_fits=20)
    False
    >>> budget.remaining()
    3.0
    >>> budget.charges()
    []
    """

    def __init__(self, epsilon: float, delta: float, path=None, *, key=None):
        epsilon, delta = check_epsilon_delta(epsilon, delta)
        if key is not None and not isinstance(key, str | bytes):
            raise TypeError("key must be None, an environment variable name (str) or bytes")
        if isinstance(key, bytes) and len(key) < 16:
            raise ValueError("a ledger key must be at least 16 bytes (use secrets.token_bytes(32))")
        if path is not None:
            path = os.fspath(path)
            if path in ("", ":memory:") or path.startswith("file:"):
                raise ValueError(
                    f"path={path!r} is not a file that copies of the budget in other "
                    "processes can open; pass a file path, or None for a temporary file"
                )
        temporary = path is None
        if temporary:
            fd, path = tempfile.mkstemp(prefix="sklearn_dpu_budget_", suffix=".sqlite")
            os.close(fd)
        self.epsilon = epsilon
        self.delta = delta
        self.path = os.path.abspath(path)
        self.key_env = key if isinstance(key, str) else None
        self.key_id = None
        if isinstance(key, bytes):
            self.key_id = _key_id(key)
            _KEYS[self.key_id] = key
        if temporary:
            atexit.register(_cleanup, self.path, os.getpid())
        self._create_or_verify()

    # A handle is its (path, cap, where the key is): copies and pickles open the
    # same ledger. A raw key is never part of the state.
    def __getstate__(self):
        state = {"epsilon": self.epsilon, "delta": self.delta, "path": self.path}
        if self.key_env is not None:
            state["key_env"] = self.key_env
        if self.key_id is not None:
            state["key_id"] = self.key_id
        return state

    def __setstate__(self, state):
        self.__dict__.update({"key_env": None, "key_id": None, **state})

    def __copy__(self):
        clone = object.__new__(type(self))
        clone.__setstate__(self.__getstate__())
        return clone

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __repr__(self):
        try:
            spent = self.spent().epsilon
            status = f"spent={spent:.4g}, remaining={max(self.epsilon - spent, 0.0):.4g}"
        except Exception as err:  # a repr must not fail: say why it cannot read
            status = f"spent=<unreadable: {type(err).__name__}>"
        return (
            f"PrivacyBudget(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"path={self.path!r}, {status})"
        )

    def _raise_if_over(self, stored, new, description, bounds=()) -> None:
        total = stored.epsilon(new, bounds, self.delta)
        if total > self.epsilon + _TOLERANCE:
            raise BudgetExceededError(
                f"{description} would bring the budget in {self.path} to epsilon="
                f"{total:.4g} at delta={self.delta:g}, above its cap epsilon={self.epsilon:g}"
            )

    def _commit(self, entries, timeout: float = LOCK_TIMEOUT) -> None:
        """Record ``entries`` in one transaction, or none of them.

        ``entries`` are ``(events, description, checked)``; the cap is
        checked (on the total with every entry) if any entry is ``checked``.
        """
        entries = [(list(events), text, checked) for events, text, checked in entries if events]
        if not entries:
            return
        key = self._key()
        with self._closing(timeout=timeout) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                rows, digest, verified = self._verify(db)
                stored = self._decoded_events(rows, verified)
                new = [e for events, _, _ in entries for e in events]
                if any(checked for _, _, checked in entries):
                    self._raise_if_over(stored, new, entries[-1][1])
                count = len(rows)
                for events, description, _ in entries:
                    created = time.time()
                    payload = json.dumps([event_to_dict(e) for e in events])
                    cursor = db.execute(
                        "INSERT INTO charges (created, description, events) VALUES (?, ?, ?)",
                        (created, description, payload),
                    )
                    content = json.dumps([cursor.lastrowid, created, description, payload])
                    digest = self._digest(key, digest, content)
                    db.execute(
                        "UPDATE charges SET digest = ? WHERE id = ?", (digest, cursor.lastrowid)
                    )
                    count += 1
                db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'head'", (json.dumps([count, digest]),)
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # ------------------------------------------------------------------
    # Public API
    # ------------------------------------------------------------------

    def check(
        self,
        events: Sequence[dp_event.DpEvent],
        description: str = "this release",
        bounds: Sequence[tuple[float, float]] = (),
    ) -> None:
        """Raise :class:`BudgetExceededError` if charging ``events`` would exceed the cap.

        ``bounds`` are further planned releases known only as (epsilon, delta)
        pairs (:class:`~sklearn_dpu.privacy.ledger.ApproximateDPBound`); they
        are composed by basic composition, an upper bound.
        """
        with self._reading() as db:
            stored = self._load_events(db)
        self._raise_if_over(stored, list(events), description, bounds)

    def charge(self, events: Sequence[dp_event.DpEvent], description: str) -> None:
        """Check and record ``events`` in one transaction.

        Parameters
        ----------
        events : sequence of dp_accounting.dp_event.DpEvent
        description : str
            Who released what; stored with the charge.

        Raises
        ------
        BudgetExceededError
            Nothing is recorded.
        PersistenceError
            The ledger is damaged or was tampered with
            (:class:`~sklearn_dpu.exceptions.LedgerTamperedError`), or cannot
            be reached (:class:`~sklearn_dpu.exceptions.LedgerUnavailableError`).
        """
        self._commit([(events, description, True)])

    def charge_over_cap(
        self,
        events: Sequence[dp_event.DpEvent],
        description: str,
        timeout: float = LOCK_TIMEOUT,
    ) -> None:
        """Record ``events`` without checking the cap.

        Only for releases that may not be refused (a deletion's re-release):
        the ledger must show what was really spent.
        """
        self._commit([(events, f"{description} [over cap]", False)], timeout=timeout)

    def charge_pending(
        self, estimator: "PrivateEstimatorMixin", moved_from: str | os.PathLike | None = None
    ) -> int:
        """Record the charges ``estimator`` kept pending while this ledger was unreachable.

        A deletion is never blocked: when its re-release could not be
        charged (ledger missing, moved, read-only, locked), the estimator
        kept the charge in ``pending_budget_charges_`` and warned with
        :class:`~sklearn_dpu.exceptions.BudgetUnavailableWarning`. This
        records them in one transaction, past the cap if need be (they were
        released already), and removes them from the estimator. The
        estimator's next successful charge to this ledger does the same.

        Parameters
        ----------
        estimator : PrivateEstimatorMixin
            An sklearn_dpu estimator.
        moved_from : str or os.PathLike, default=None
            If the ledger file was moved here, its old path: the charges kept
            pending for the ledger at that path are recorded in this one
            (then ``estimator.set_params(budget=this_budget)`` for later
            charges). By default, those kept for this budget's path.

        Returns
        -------
        int
            How many charges were recorded.
        """
        ledger = self.path if moved_from is None else os.path.abspath(os.fspath(moved_from))
        records = list(getattr(estimator, "pending_budget_charges_", []))
        self._commit(pending_entries(records, ledger))
        kept = [r for r in records if r.get("ledger") != ledger]
        if len(kept) < len(records):
            estimator.pending_budget_charges_ = kept
        return len(records) - len(kept)

    def spent(self) -> PrivacySpent:
        """The composed (epsilon, delta) of everything charged so far (chain verified)."""
        with self._reading() as db:
            stored = self._load_events(db)
        return PrivacySpent(stored.epsilon([], [], self.delta), self.delta)

    def remaining(self) -> float:
        """Epsilon left under the cap at ``delta`` (0 when spent past the cap).

        Composition is not additive: a release of epsilon ``e`` may cost less
        than ``e`` of what remains. Use :meth:`can_afford` for a given release.
        """
        return max(self.epsilon - self.spent().epsilon, 0.0)

    def planned_epsilon(
        self, estimator: "PrivateEstimatorMixin | Pipeline", n_fits: int = 1
    ) -> float:
        """Epsilon the budget would show after ``n_fits`` more fits of ``estimator``.

        Built from the estimator's planning hook
        (:func:`~sklearn_dpu.base.planned_fit`: parameters only, no data):
        each fit charges the worst case of its planned releases, and
        releases known only as (epsilon, delta)-DP bounds are composed by
        basic composition, an upper bound. Charges the estimator keeps
        pending are included. For a pipeline, its final step and every other
        step that charges this budget (a ``PrivateBoundsScaler``, say) are
        planned, each fit charging all of them.
        """
        from ..base import planned_fit  # base imports this module

        if not (isinstance(n_fits, int) and n_fits >= 0):
            raise ValueError(f"n_fits must be an int >= 0, got {n_fits!r}")
        final = getattr(estimator, "_final_estimator", estimator)
        steps = [step for _, step in getattr(estimator, "steps", [])] or [estimator]
        charging = [
            step
            for step in steps
            if step is final
            or (
                hasattr(step, "_plan_releases")
                and getattr(getattr(step, "budget", None), "path", None) == self.path
            )
        ]
        per_fit, bounds, pending = [], [], []
        for step in charging:
            plan = planned_fit(step)
            bounds += [(b.epsilon, b.delta) for b in plan.bounds]
            per_fit += worst_case_events(plan.releases, self.delta)
            records = getattr(step, "pending_budget_charges_", [])
            pending += [e for entry in pending_entries(records, self.path) for e in entry[0]]
        with self._reading() as db:
            stored = self._load_events(db)
        return stored.epsilon([*pending, *per_fit * n_fits], bounds * n_fits, self.delta)

    def can_afford(self, estimator: "PrivateEstimatorMixin | Pipeline", n_fits: int = 1) -> bool:
        """Whether ``n_fits`` more fits of ``estimator`` fit under the cap.

        Ask before a search: ``GridSearchCV`` fits ``n_candidates * n_splits``
        times, plus one refit; ``cross_val_score`` fits ``n_splits`` times.
        Run out of budget inside them and ``cross_val_score`` returns NaN
        scores, ``GridSearchCV`` fails at the refit after spending the rest.
        Only a check: another process may spend the budget in between.
        """
        return self.planned_epsilon(estimator, n_fits) <= self.epsilon + _TOLERANCE

    def charges(self) -> list[Charge]:
        """Every charge (chain verified), with the running total; ``pandas.DataFrame``-ready."""
        with self._reading() as db:
            rows, _ = self._verified_rows(db)
            digests = [
                d for (d,) in db.execute("SELECT digest FROM charges ORDER BY id").fetchall()
            ]
        out, so_far = [], []
        for index, (row, digest) in enumerate(zip(rows, digests, strict=True)):
            events = self._events([row])
            so_far.extend(events)
            out.append(
                Charge(
                    index=index,
                    created=datetime.fromtimestamp(row[1], UTC),
                    description=row[2],
                    epsilon=epsilon_spent(events, self.delta),
                    total_epsilon=epsilon_spent(so_far, self.delta),
                    events=tuple(events),
                    digest=digest,
                )
            )
        return out

    def history(self) -> list[dict]:
        """Every charge: time, description and events (as plain dicts)."""
        with self._reading() as db:
            rows, _ = self._verified_rows(db)
        return [
            {"created": created, "description": text, "events": json.loads(payload)}
            for _, created, text, payload in rows
        ]


def pending_entries(pending: Iterable[dict], ledger: str) -> list[tuple]:
    """``(events, description, checked=False)`` entries of the pending charge
    records kept for the ledger at path ``ledger``."""
    entries = []
    for record in pending:
        if record.get("ledger") != ledger:
            continue
        events = [event_from_dict(e) for e in record["events"]]
        entries.append((events, f"{record['description']} [deferred]", False))
    return entries


def upgrade_ledger(path: str | os.PathLike, key: str | bytes | None = None) -> None:
    """Add the hash chain to a format-1 ledger, in place, in one transaction.

    The chain certifies the charges the file holds *now*: an edit made
    before the upgrade cannot be detected. Its cap is kept.

    Parameters
    ----------
    path : str or os.PathLike
    key : str or bytes, default=None
        As for :class:`PrivacyBudget`.
    """
    path = os.path.abspath(os.fspath(path))
    upgrade_format_1(path, key)
