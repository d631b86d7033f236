"""Behaviour shared by every private estimator: the ledger, the budget, persistence."""

import dataclasses
import time
import warnings
from contextlib import contextmanager

from sklearn.utils.validation import check_is_fitted

from .exceptions import (
    BudgetExceededError,
    BudgetUnavailableWarning,
    PersistenceError,
    PrivacyLeakWarning,
    StateVersionError,
)
from .privacy import budget as budget_module
from .privacy.budget import pending_entries
from .privacy.events import event_to_dict
from .privacy.ledger import Release, charge_increment, privacy_spent, worst_case_events
from .unlearning.ids import POSITIONS_NOTE, sample_id_kind

__all__ = ["PrivateEstimatorMixin", "STATE_FORMAT_VERSION"]

#: Format of the estimator state written by pickle, joblib and skops. Bump it
#: when a fitted attribute changes meaning or layout.
STATE_FORMAT_VERSION = 2


class PrivateEstimatorMixin:
    """Ledger, budget and versioned persistence for sklearn_dpu estimators.

    Subclasses have ``delta`` and ``budget`` parameters, and keep every release
    in ``privacy_ledger_`` (a list of plain dicts, see
    :class:`~sklearn_dpu.privacy.ledger.Release`).
    """

    @contextmanager
    def _atomic(self):
        """Restore the fitted attributes if the block raises.

        Methods that mutate nested state (the registry, the statistics) do so
        only after every check that can fail, so a shallow snapshot of the
        attributes is enough to leave a failed call without effect.
        """
        snapshot = dict(self.__dict__)
        try:
            yield
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(snapshot)
            raise

    def _budget_increment(self, planned: list[Release], restart: bool) -> list:
        """Events to charge the budget for ``planned`` releases.

        Computed from parameters and the ledger only, so it can run, and the
        budget can refuse, before any data is read.
        """
        if self.budget is None:
            return []
        before = [] if restart else list(getattr(self, "privacy_ledger_", []))
        after = [*before, *planned]
        return charge_increment(
            worst_case_events(before, self.delta), worst_case_events(after, self.delta)
        )

    def _check_budget(self, increment: list, what: str) -> None:
        """Refuse ``increment`` if it, with any charge kept pending, exceeds the budget."""
        if self.budget is None:
            return
        pending = [e for events, _, _ in self._pending_budget_entries(self.budget) for e in events]
        if increment or pending:
            self.budget.check([*pending, *increment], f"{type(self).__name__}.{what}")

    def _pending_budget_entries(self, budget) -> list[tuple]:
        """Charges kept pending for ``budget``'s ledger, as ``PrivacyBudget._commit`` entries."""
        return pending_entries(getattr(self, "pending_budget_charges_", []), budget.path)

    def _charge_budget(
        self, increment: list, what: str, mandatory: bool = False, budget=None
    ) -> None:
        """Spend ``increment`` on ``budget`` (default: ``self.budget``), and settle
        the charges kept pending for it, in one transaction.

        A mandatory charge (a deletion's re-release) is never refused nor
        blocked: past the cap it is recorded anyway (PrivacyLeakWarning), and
        when the ledger cannot be reached (missing, moved, read-only, locked,
        tampered with) the deletion still completes, its release is in
        ``privacy_ledger_``, and the charge is kept in
        ``pending_budget_charges_`` (BudgetUnavailableWarning) until
        ``budget.charge_pending(estimator)`` or the next successful charge.
        """
        budget = self.budget if budget is None else budget
        if budget is None:
            return
        pending = self._pending_budget_entries(budget)
        if not increment and not pending:
            return
        description = f"{type(self).__name__}.{what}"
        entry = (increment, description, True)
        if not mandatory:
            budget._commit([*pending, entry])
            self._settled_pending(budget, pending)
            return
        timeout = budget_module.MANDATORY_LOCK_TIMEOUT
        over_cap = False
        try:
            try:
                budget._commit([*pending, entry], timeout=timeout)
            except BudgetExceededError:
                over = (increment, f"{description} [over cap]", False)
                budget._commit([*pending, over], timeout=timeout)
                over_cap = True
        except PersistenceError as err:
            if not increment:  # only settling earlier charges: they stay pending
                return
            record = {
                "ledger": budget.path,
                "description": description,
                "events": [event_to_dict(e) for e in increment],
                "created": time.time(),
            }
            self.pending_budget_charges_ = [*getattr(self, "pending_budget_charges_", []), record]
            self._budget_notes = (
                *getattr(self, "_budget_notes", ()),
                f"the shared budget {budget.path} could not be charged for this re-release "
                f"({type(err).__name__}); the charge is kept in pending_budget_charges_ until "
                "budget.charge_pending(estimator) or the next successful charge records it",
            )
            warnings.warn(
                f"{description} completed, but its re-release could not be charged to the "
                f"shared budget: {err}. The charge is kept in pending_budget_charges_ "
                f"({len(self.pending_budget_charges_)} pending); call "
                "budget.charge_pending(estimator) once the ledger is reachable (the next "
                "successful charge also records it).",
                BudgetUnavailableWarning,
                stacklevel=3,
            )
            return
        self._settled_pending(budget, pending)
        if over_cap:
            self._budget_notes = (
                *getattr(self, "_budget_notes", ()),
                f"this re-release was charged to the shared budget {budget.path} past its "
                "cap (deletions are never refused); further fits on it will be refused",
            )
            warnings.warn(
                f"{description} re-released the model past the budget cap of "
                f"{budget.path}: deletions are never refused. Further fits on "
                "this budget will be refused.",
                PrivacyLeakWarning,
                stacklevel=3,
            )

    def _settled_pending(self, budget, pending) -> None:
        if pending:
            self.pending_budget_charges_ = [
                r for r in self.pending_budget_charges_ if r.get("ledger") != budget.path
            ]

    def _fit_release_plan(self) -> list[Release]:
        """The releases one ``fit`` makes, from the parameters alone (an upper bound).

        Every estimator overrides it. ``fit`` uses it for its budget pre-check,
        and :class:`~sklearn_dpu.model_selection.PrivateGridSearch` uses it to
        plan the cost of a whole search before any data is read, so it must not
        depend on data (nor on the exact number of rows).
        """
        raise NotImplementedError(f"{type(self).__name__} does not say what its fit releases")

    def _log_deletion(self, report) -> None:
        """Append ``report`` to ``deletion_log_``, stating what everything
        published so far (this call's re-release included) costs the samples
        that remain: ``remaining_epsilon`` is ``privacy_spent_.epsilon``. The
        first report of an estimator whose ids are row positions says so, and
        a report whose re-release could not be charged to the shared budget (or
        was charged past its cap) says that too."""
        notes = (*report.notes, *self.__dict__.pop("_budget_notes", ()))
        if not self.deletion_log_ and sample_id_kind(self) == "positions":
            notes = (POSITIONS_NOTE, *notes)
        report = dataclasses.replace(
            report, remaining_epsilon=self.privacy_spent_.epsilon, notes=notes
        )
        self.deletion_log_ = [*self.deletion_log_, report]

    def _set_ledger(self, ledger: list[dict]) -> None:
        self.privacy_ledger_ = ledger

    @property
    def privacy_spent_(self):
        """(epsilon, delta) of everything released, composed from ``privacy_ledger_``.

        Computed on access by the accountant (parallel composition over the
        arrival chunks), so releases do not pay for it.
        """
        check_is_fitted(self, "privacy_ledger_")
        return privacy_spent(self.privacy_ledger_, self.delta)

    def __getstate__(self):
        state = super().__getstate__()
        return {
            **state,
            "_sklearn_dpu_state_format": STATE_FORMAT_VERSION,
        }

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop("_sklearn_dpu_state_format", None)
        if version != STATE_FORMAT_VERSION:
            raise StateVersionError(
                f"this {type(self).__name__} was saved with state format {version!r}; "
                f"this sklearn_dpu reads format {STATE_FORMAT_VERSION}"
            )
        super().__setstate__(state)
