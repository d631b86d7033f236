"""A privacy budget shared by every copy of an estimator.

scikit-learn clones, deep-copies and pickles estimators (``GridSearchCV``,
``cross_val_score``, joblib workers). A budget kept inside the Python object
would be copied with them and each copy would spend its own; that is how the
anchor library's accountant records zero after a grid search (digest
``anchors.md`` §1.2). :class:`PrivacyBudget` is only a *handle*: the ledger lives
in an SQLite file, every copy of the handle opens the same file, and each
charge checks and spends in one ``BEGIN IMMEDIATE`` transaction, so concurrent
processes can never overspend it together.

The total is the composition of the stored ``dp_accounting`` events by the
accountant of :mod:`sklearn_dpu.privacy.accounting`, not a sum of epsilons.
Every charge is composed with every other, as if each touched every record:
the budget does not know which estimators saw which data.
"""

import json
import math
import os
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing, contextmanager

from dp_accounting import dp_event

from ..exceptions import BudgetExceededError, PersistenceError
from .accounting import NEIGHBORING_RELATION, epsilon_spent, epsilon_upper_bound
from .events import event_from_dict, event_to_dict
from .ledger import PrivacySpent

__all__ = ["PrivacyBudget"]

_FORMAT_VERSION = 1
# Accountant output is a float; a cap reached exactly must not fail by an ulp.
_TOLERANCE = 1e-9


class PrivacyBudget:
    """A durable (epsilon, delta) cap shared by all estimators that hold it.

    Pass it as ``budget=`` to an estimator. Each release the estimator makes is
    charged before any data is read; a release that would take the composed
    total above ``epsilon`` (at ``delta``) raises
    :class:`~sklearn_dpu.exceptions.BudgetExceededError` and charges nothing.

    Parameters
    ----------
    epsilon : float
        Cap on the composed epsilon, > 0.
    delta : float
        The delta at which the total is measured, in (0, 1).
    path : str or os.PathLike, default=None
        SQLite file holding the ledger. ``None`` creates a new file in the
        temporary directory. Opening an existing ledger requires the same
        ``epsilon`` and ``delta`` it was created with.

    Attributes
    ----------
    path : str
        The ledger file; copies and pickles of the handle refer to it.

    See Also
    --------
    sklearn_dpu.privacy.ledger.privacy_spent : accounting of one estimator.

    Examples
    --------
    >>> from sklearn_dpu.privacy import PrivacyBudget
    >>> budget = PrivacyBudget(epsilon=3.0, delta=1e-5)
    >>> budget.spent().epsilon
    0.0
    """

    def __init__(self, epsilon: float, delta: float, path=None):
        if not (isinstance(epsilon, int | float) and epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
        if not (isinstance(delta, int | float) and 0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if path is None:
            fd, path = tempfile.mkstemp(prefix="sklearn_dpu_budget_", suffix=".sqlite")
            os.close(fd)
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.path = os.fspath(path)
        self._create_or_verify()

    # A handle is its (path, cap): copies and pickles open the same ledger.
    def __getstate__(self):
        return {"epsilon": self.epsilon, "delta": self.delta, "path": self.path}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __copy__(self):
        clone = object.__new__(type(self))
        clone.__setstate__(self.__getstate__())
        return clone

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __repr__(self):
        return f"PrivacyBudget(epsilon={self.epsilon!r}, delta={self.delta!r}, path={self.path!r})"

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=120.0, isolation_level=None)

    def _create_or_verify(self) -> None:
        try:
            with self._closing() as db:
                db.execute("BEGIN IMMEDIATE")
                db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                    " created REAL, description TEXT, events TEXT)"
                )
                stored = dict(db.execute("SELECT key, value FROM meta").fetchall())
                expected = {
                    "format_version": str(_FORMAT_VERSION),
                    "epsilon": repr(self.epsilon),
                    "delta": repr(self.delta),
                    "neighboring_relation": NEIGHBORING_RELATION.name,
                }
                if not stored:
                    db.executemany("INSERT INTO meta VALUES (?, ?)", expected.items())
                db.execute("COMMIT")
        except sqlite3.DatabaseError as err:
            raise PersistenceError(f"{self.path} is not a privacy budget ledger: {err}") from err
        if stored and stored != expected:
            raise ValueError(
                f"{self.path} holds a budget created with {stored}; this handle asks for {expected}"
            )

    @contextmanager
    def _closing(self):
        """An open connection; a damaged file surfaces as PersistenceError."""
        try:
            with closing(self._connect()) as db:
                yield db
        except sqlite3.DatabaseError as err:
            raise PersistenceError(f"{self.path} is not a readable budget ledger: {err}") from err

    def _load_events(self, db) -> list[dp_event.DpEvent]:
        try:
            return [
                event_from_dict(item)
                for (payload,) in db.execute("SELECT events FROM charges ORDER BY id")
                for item in json.loads(payload)
            ]
        except (ValueError, TypeError, KeyError) as err:  # JSONDecodeError is a ValueError
            raise PersistenceError(
                f"{self.path} holds a charge that is not a valid privacy event: {err}"
            ) from err

    def _raise_if_over(self, stored, new, description, bounds=()) -> None:
        total = epsilon_upper_bound([*stored, *new], bounds, self.delta)
        if total > self.epsilon + _TOLERANCE:
            raise BudgetExceededError(
                f"{description} would bring the budget in {self.path} to epsilon="
                f"{total:.4g} at delta={self.delta:g}, above its cap epsilon={self.epsilon:g}"
            )

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
        with self._closing() as db:
            self._raise_if_over(self._load_events(db), list(events), description, bounds)

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
        """
        events = list(events)
        if not events:
            return
        with self._closing() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                self._raise_if_over(self._load_events(db), events, description)
                db.execute(
                    "INSERT INTO charges (created, description, events) VALUES (?, ?, ?)",
                    (time.time(), description, json.dumps([event_to_dict(e) for e in events])),
                )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def charge_over_cap(self, events: Sequence[dp_event.DpEvent], description: str) -> None:
        """Record ``events`` without checking the cap.

        Only for releases that may not be refused (a deletion's re-release):
        the ledger must show what was really spent.
        """
        if not events:
            return
        with self._closing() as db:
            db.execute(
                "INSERT INTO charges (created, description, events) VALUES (?, ?, ?)",
                (
                    time.time(),
                    f"{description} [over cap]",
                    json.dumps([event_to_dict(e) for e in events]),
                ),
            )

    def spent(self) -> PrivacySpent:
        """The composed (epsilon, delta) of everything charged so far."""
        with self._closing() as db:
            return PrivacySpent(epsilon_spent(self._load_events(db), self.delta), self.delta)

    def history(self) -> list[dict]:
        """Every charge: time, description and events (as plain dicts)."""
        with self._closing() as db:
            rows = db.execute("SELECT created, description, events FROM charges ORDER BY id")
            return [
                {"created": created, "description": text, "events": json.loads(payload)}
                for created, text, payload in rows
            ]
