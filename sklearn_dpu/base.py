"""Behaviour shared by every private estimator: the release procedure, the
ledger, the budget, persistence.

Every call that publishes something runs one procedure, written once here::

    fit / partial_fit  (_run_update)          delete_samples  (_run_deletion)
    ---------------------------------         ------------------------------
    plan     _plan_releases(params, sizes)    validate ids, DeletionPlan
    check    the budget refuses, or not       charge   never refused
    validate read the data                    execute  (timed)
    charge   the planned releases             ledger   the re-releases
    compute  draw noise, publish              report   one DeletionReport
    ledger   append the releases

An estimator supplies the hooks (``_plan_releases`` and the callables passed
to these two methods); it never charges a budget or appends to its ledger by
hand.
"""

import copy
import dataclasses
import operator
import time
import warnings
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._progress import iteration_progress, print_releases
from ._transaction import atomic, hold_sigint, keep_attributes, on_commit, unstaged
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
from .privacy.ledger import (
    DecodedLedger,
    PrivacySpent,
    Release,
    ReleasePlan,
    privacy_spent,
)
from .unlearning.ids import ID_KIND_NOTES, sample_id_kind
from .unlearning.report import DeletionOutcome, DeletionPlan, DeletionReport

__all__ = ["PrivateEstimatorMixin", "PublicSizes", "STATE_FORMAT_VERSION", "planned_fit"]

#: Format of the estimator state written by pickle, joblib and skops. Bump it
#: when a fitted attribute changes meaning or layout.
STATE_FORMAT_VERSION = 2


@dataclass(frozen=True)
class PublicSizes:
    """Sizes a release plan may depend on: public by construction.

    Shapes that the caller states (the number of features), never the number
    of rows, which is private.

    Attributes
    ----------
    n_features : int or None
        Number of features, when known before the data are read.
    """

    n_features: int | None = None

    @classmethod
    def of(cls, X: Any) -> "PublicSizes":
        """The sizes of training data ``X`` from its shape alone (no value is
        read): the number of columns of a 2-D array-like, else unknown."""
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] == shape[1] and shape[1] >= 1:
            return cls(n_features=int(shape[1]))
        return cls()  # unknown, or no feature: validation will say what is wrong


def _warn_at_commit(message: str, category: type[Warning]) -> None:
    """Warn when the enclosing :func:`~sklearn_dpu._transaction.atomic` block
    commits (at once outside one): a warning of a charge already recorded in
    a shared ledger, raised as an error (``-W error``), must not roll back
    the call the charge is for."""
    on_commit(lambda: warnings.warn(message, category, stacklevel=2))


class PrivateEstimatorMixin:
    """Ledger, budget and versioned persistence for sklearn_dpu estimators.

    Subclasses have ``delta`` and ``budget`` parameters, and keep every release
    in ``privacy_ledger_`` (a list of plain dicts, see
    :class:`~sklearn_dpu.privacy.ledger.Release`).
    """

    @contextmanager
    def _atomic(self):
        """Run the block all-or-nothing (:func:`~sklearn_dpu._transaction.atomic`).

        The fitted attributes are restored if the block raises
        (``KeyboardInterrupt`` included), and so is the nested state that
        registered its in-place edits (the registry's removals, the
        statistics, an SGD run): an undo log, never a copy of the rows. A
        block nested in another (a search's selected model, a pipeline's
        step) that completes is undone too if the outer block fails.
        """
        with atomic():
            keep_attributes(self)
            yield

    def _budget_increment(self, planned: list[Release], restart: bool) -> list:
        """Events to charge the budget for ``planned`` releases.

        Computed from parameters and the ledger only, so it can run, and the
        budget can refuse, before any data is read.
        """
        if not self._budgets():
            return []
        before = DecodedLedger.of(()) if restart else self._decoded_ledger()
        return before.increment(planned, self.delta)

    def _check_budget(self, increment: list, what: str, bounds=()) -> None:
        """Refuse ``increment`` (and the (epsilon, delta) ``bounds`` of releases
        not known exactly yet) if, with any charge kept pending, it exceeds a budget."""
        for budget in self._budgets():
            pending = [e for events, _, _ in self._pending_budget_entries(budget) for e in events]
            if increment or pending or bounds:
                budget.check(
                    [*pending, *increment], f"{type(self).__name__}.{what}", bounds=list(bounds)
                )

    def _budgets(self) -> list:
        """The budgets this estimator charges: its ``budget``, if any.

        A meta-estimator that charges several budgets (its own and its
        estimator's) overrides it; :meth:`_run_update` and
        :meth:`_run_deletion` charge each of them once.
        """
        budget = getattr(self, "budget", None)
        return [] if budget is None else [budget]

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
            _warn_at_commit(
                f"{description} completed, but its re-release could not be charged to the "
                f"shared budget: {err}. The charge is kept in pending_budget_charges_ "
                f"({len(self.pending_budget_charges_)} pending); call "
                "budget.charge_pending(estimator) once the ledger is reachable (the next "
                "successful charge also records it).",
                BudgetUnavailableWarning,
            )
            return
        self._settled_pending(budget, pending)
        if over_cap:
            self._budget_notes = (
                *getattr(self, "_budget_notes", ()),
                f"this re-release was charged to the shared budget {budget.path} past its "
                "cap (deletions are never refused); further fits on it will be refused",
            )
            _warn_at_commit(
                f"{description} re-released the model past the budget cap of "
                f"{budget.path}: deletions are never refused. Further fits on "
                "this budget will be refused.",
                PrivacyLeakWarning,
            )

    def _charge_budgets(self, increment: list, what: str, mandatory: bool = False) -> None:
        """:meth:`_charge_budget` on every budget of :meth:`_budgets`.

        With several budgets, a refusable charge is checked on all of them
        first, so that a budget that refuses leaves every other uncharged.
        """
        budgets = self._budgets()
        if not mandatory and len(budgets) > 1:
            for budget in budgets:
                budget.check(increment, f"{type(self).__name__}.{what}")
        for budget in budgets:
            self._charge_budget(increment, what, mandatory=mandatory, budget=budget)

    def _settled_pending(self, budget, pending) -> None:
        if pending:
            self.pending_budget_charges_ = [
                r for r in self.pending_budget_charges_ if r.get("ledger") != budget.path
            ]

    # ------------------------------------------------------------ the template

    def _plan_releases(self, params: Mapping[str, Any], sizes: PublicSizes) -> ReleasePlan:
        """What one ``fit`` with ``params`` adds to the ledger: the planning hook.

        From parameters and public sizes alone (never data nor the exact
        number of rows): exact :class:`~sklearn_dpu.privacy.ledger.Release`
        records, or :class:`~sklearn_dpu.privacy.ledger.ApproximateDPBound`
        where the events depend on a noised count drawn during the fit.
        ``fit``'s budget pre-check uses it, and so do
        :class:`~sklearn_dpu.model_selection.PrivateGridSearch` (for every
        candidate, before any data is read) and
        :meth:`~sklearn_dpu.privacy.PrivacyBudget.planned_epsilon`. Every
        estimator overrides it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not say what its fit releases")

    def _fit_release_plan(self) -> list:
        """:meth:`_plan_releases` for the current parameters, as a list of entries."""
        return self._plan_releases(self.get_params(deep=False), PublicSizes()).entries

    def _run_update(
        self,
        what: str,
        plan: ReleasePlan,
        validate: Callable[[], Any],
        compute: Callable[[Any], Any],
        sizes: PublicSizes | None = None,
    ) -> None:
        """Run ``fit`` or ``partial_fit``: plan, check, validate, charge, compute, ledger.

        ``sizes`` are the public sizes ``plan`` was made with: after
        validation the data must have them (an array-like whose ``shape``
        disagrees with its values is refused before any charge).

        1. ``plan`` (from :meth:`_plan_releases`, or from the fitted state for
           ``partial_fit``) is checked against the budget before any data is read;
        2. ``validate()`` reads the data and returns what ``compute`` needs;
           it may raise (nothing has changed);
        3. an exact plan is charged, then ``compute(data)`` draws the noise and
           publishes the model;
        4. a plan that was only an upper bound (``plan.exact`` False) is
           charged for what ``compute`` returns: the exact releases, known
           once a noised count or a coupled run has been drawn (an error
           that names ``releases_made``, raised after a noisy release
           decided what ``compute`` did next, is charged for them). The
           charge comes before anything is returned to the caller; if it is refused
           (another process spent the budget after the check), the estimator
           is restored, nested state included: ``compute`` of a
           ``partial_fit`` edits the stored state in place, which
           :meth:`_atomic`'s shallow snapshot would not undo, so it edits deep
           copies of the fitted attributes and the snapshot keeps the
           originals (only when a budget could refuse).
        5. the releases are appended to ``privacy_ledger_`` (which a fit
           replaces).

        Call it inside ``with self._atomic():``. ``compute`` must read the
        fitted state from ``self`` (not from variables bound before the call),
        since it may be handed copies.
        """
        self._check_plan(plan, what)
        data = validate()
        planned_features = None if sizes is None else sizes.n_features
        if planned_features is not None and planned_features != self.n_features_in_:
            raise ValueError(
                f"X's shape says {planned_features} features, but its values have "
                f"{self.n_features_in_}: the releases were planned from the shape"
            )
        ledger = [] if plan.restart else getattr(self, "privacy_ledger_", [])
        planned = plan.releases if plan.exact else ()
        with iteration_progress(self, what, ledger, planned):
            made = self._charged_compute(what, plan, data, compute)
        before = [] if plan.restart else list(self.privacy_ledger_)
        self._set_ledger([*before, *(r.to_dict() for r in made)])
        print_releases(self, what, self.privacy_ledger_[len(before) :])

    def _charged_compute(self, what: str, plan: ReleasePlan, data: Any, compute) -> list:
        """:meth:`_run_update`'s charge and compute; returns the releases made."""
        if plan.exact:
            self._charge_budgets(self._budget_increment(plan.releases, plan.restart), what)
            compute(data)
            made = list(plan.releases)
        else:
            if not plan.restart and any(budget is not None for budget in self._budgets()):
                # compute edits the stored state in place: let it edit copies, so
                # that _atomic's snapshot still holds the untouched originals
                self.__dict__.update(self._fitted_copy())
            try:
                made = list(compute(data))
            except Exception as error:
                # A computation that failed after a noisy release decided
                # what it did next (a search's refit, which follows its
                # selection) names the releases made: the budgets pay for
                # them all the same.
                spent = list(getattr(error, "releases_made", ()))
                if spent:
                    self._charge_budgets(self._budget_increment(spent, plan.restart), what)
                raise
            self._charge_budgets(self._budget_increment(made, plan.restart), what)
        return made

    def _fitted_copy(self) -> dict:
        """Deep copies of the fitted attributes (names ending in ``_``)."""
        return {
            name: copy.deepcopy(value)
            for name, value in self.__dict__.items()
            if name.endswith("_")
        }

    def _check_plan(self, plan: ReleasePlan, what: str) -> None:
        """Step 1 of :meth:`_run_update`: refuse ``plan`` if a budget cannot pay it.

        Its releases' worst case, with their (epsilon, delta) bounds, is
        checked against every budget of :meth:`_budgets`. A meta-estimator
        whose plan spans disjoint parts of the data overrides it.
        """
        bounds = [(b.epsilon, b.delta) for b in plan.bounds]
        self._check_budget(self._budget_increment(plan.releases, plan.restart), what, bounds)

    def _run_deletion(
        self,
        n_deleted: int,
        plan: DeletionPlan,
        execute: Callable[[], DeletionOutcome],
    ) -> None:
        """Run ``delete_samples``: execute, report, charge.

        The ids were validated and ``plan`` made before this call, inside
        :meth:`_atomic`. ``execute()`` changes the state (registering the
        undo of every in-place edit) and is timed (the report's only timing).
        Then the ledger grows and one
        :class:`~sklearn_dpu.unlearning.report.DeletionReport` is made
        (:meth:`_deletion_entry`), its ``rerelease_epsilon`` composed from the
        re-releases alone; then the re-releases (planned, or named by the
        execution) with the plan's accounting entries are charged,
        mandatorily (never refused nor blocked, see :meth:`_charge_budget`):
        the commit point, after which a SIGINT is held until the call
        completes, the report is logged with the charge's notes, and the
        releases are printed (``verbose``) when the call commits. An
        exception before the charge (in ``execute``, in the accountant, or
        while the charge waits for the ledger's lock) leaves the estimator
        exactly as it was and the ledger without the charge.

        Run by :func:`sklearn_dpu.unlearning.delete_samples`, every step of
        the pipeline executes, then every step makes its report, then every
        step charges: a failing step undoes the others before any charge.
        """
        what = "delete_samples"
        budgets = self._budgets()  # with the frozen parameters in effect
        with unstaged() as stage:  # a nested deletion (a search's model) finishes at once
            started = time.perf_counter()
            outcome = execute()
            elapsed = time.perf_counter() - started
        made = tuple(plan.releases if plan.releases is not None else outcome.releases or ())
        entries = [*made, *plan.accounting]
        increment = self._budget_increment(entries, False) if budgets else []
        delta = self._ledger_delta()
        rerelease = outcome.rerelease_epsilon
        if rerelease is None and made:
            # Composed as the ledger composes them: in parallel across chunks
            # (a stream's retrain replays one release per chunk).
            rerelease = privacy_spent(made, delta).epsilon
        report = DeletionReport(
            n_deleted=int(n_deleted),
            method=outcome.method or plan.method,
            guarantee=outcome.guarantee,
            cost=dataclasses.replace(outcome.cost, wall_time_s=elapsed),
            retrain_cost=outcome.retrain_cost,
            deletion_epsilon=outcome.deletion_epsilon,
            deletion_delta=outcome.deletion_delta,
            rerelease_epsilon=rerelease,
            reason=plan.reason if outcome.reason is None else outcome.reason,
            notes=outcome.notes,
        )

        logged = []

        def prepare() -> None:
            # Everything that can fail (the accountant's remaining epsilon)
            # before the charge: a failure here is rolled back, uncharged.
            if entries:
                self._set_ledger([*self.privacy_ledger_, *(r.to_dict() for r in entries)])
            logged.append(self._deletion_entry(report))

        def charge() -> None:
            # The commit point: once a shared ledger holds the charge, a
            # Ctrl-C waits for the call to complete (hold_sigint), and what
            # remains cannot fail but printing, which runs at the commit.
            hold_sigint()
            for budget in budgets:
                self._charge_budget(increment, what, mandatory=True, budget=budget)
            self._append_deletion(logged[0])
            dicts = [r.to_dict() for r in entries]
            on_commit(lambda: print_releases(self, f"{what} ({report.method})", dicts))

        if stage is None:
            prepare()
            charge()
        else:  # sklearn_dpu.unlearning.delete_samples: every step prepares, then charges
            stage.append((prepare, charge))

    def _check_deletable(self, sample_ids: list) -> None:
        """Raise :class:`~sklearn_dpu.exceptions.UnlearningError` if
        ``delete_samples(sample_ids)`` would refuse, changing nothing.

        :func:`sklearn_dpu.unlearning.delete_samples` asks every step of a
        pipeline before any step deletes. By default the ids are checked
        against ``unlearning_state_.registry``, if the estimator keeps one
        (unknown, already deleted, repeated, or every sample).
        """
        registry = getattr(getattr(self, "unlearning_state_", None), "registry", None)
        if registry is not None:
            registry.slots_of(sample_ids)

    @contextmanager
    def _frozen_params_in_effect(self, frozen: Mapping[str, Any]):
        """Run the block with the parameters the fitted state was made with.

        A deletion re-releases what the fit released: a ``set_params`` since
        the fit (which a ``partial_fit`` would refuse) must not change its
        noise, its bounds or what its report states. The current values are
        put back afterwards.
        """
        current = {name: getattr(self, name) for name in frozen}
        self.__dict__.update(frozen)
        try:
            yield
        finally:
            self.__dict__.update(current)

    def _n_deleted_since_fit(self, n_new: int) -> int:
        """Rows deleted since the fit, ``n_new`` of this call included: the
        group a release kept through deletions is stated for (public: the
        requesters named them)."""
        return sum(map(operator.attrgetter("n_deleted"), self.deletion_log_)) + int(n_new)

    def _changed_params(self, frozen: Mapping[str, Any]) -> list[str]:
        """Names of the parameters whose value differs from ``frozen``, the
        values a fitted state was made with (``partial_fit`` refuses them)."""
        return [name for name, value in frozen.items() if not _same(getattr(self, name), value)]

    def _ledger_delta(self) -> float:
        """The delta at which this estimator states its epsilons: the one its
        fitted state was made with (a ``set_params`` since, which a deletion
        does not apply either, restates nothing), else the parameter."""
        frozen = getattr(getattr(self, "unlearning_state_", None), "frozen_params", None)
        if frozen is not None and "delta" in frozen:
            return frozen["delta"]
        fitted = self.__dict__.get("_fit_delta")  # kept by a fit without frozen params
        return self.delta if fitted is None else fitted

    def _deletion_entry(self, report):
        """``report`` stating what everything published so far (this call's
        re-release included) costs the samples that remain:
        ``remaining_epsilon`` is ``privacy_spent_.epsilon``. The first report
        of an estimator whose ids are row positions says so."""
        notes = report.notes
        kind = sample_id_kind(self)
        if not self.deletion_log_ and kind in ("positions", "mixed"):
            notes = (ID_KIND_NOTES[kind], *notes)
        return dataclasses.replace(
            report, remaining_epsilon=self.privacy_spent_.epsilon, notes=notes
        )

    def _append_deletion(self, report) -> None:
        """Append a :meth:`_deletion_entry` to ``deletion_log_``, with the
        notes of its charge: a re-release that could not be charged to the
        shared budget (or was charged past its cap) says so."""
        budget_notes = self.__dict__.pop("_budget_notes", ())
        if budget_notes:
            report = dataclasses.replace(report, notes=(*report.notes, *budget_notes))
        self.deletion_log_ = [*self.deletion_log_, report]

    def _set_ledger(self, ledger: list[dict]) -> None:
        """Publish ``ledger`` as ``privacy_ledger_``; when it starts with the
        dicts the current decoding decodes, that decoding is extended by the
        rest instead of being redone (:meth:`_decoded_ledger`)."""
        decoded = self.__dict__.get("_decoded")
        if decoded is not None and _starts_with(ledger, decoded):
            decoded = decoded.extended(ledger[len(decoded.entries) :])
        else:
            decoded = None
        self.privacy_ledger_ = ledger
        self._decoded = decoded

    def _decoded_ledger(self) -> DecodedLedger:
        """``privacy_ledger_`` decoded
        (:class:`~sklearn_dpu.privacy.ledger.DecodedLedger`), redone unless
        the ledger holds exactly the dicts it decodes (not after a restore,
        a load, a copy or an entry replaced: the dicts themselves are read,
        never edited in place). Not persisted."""
        ledger = getattr(self, "privacy_ledger_", [])
        decoded = self.__dict__.get("_decoded")
        if not (
            decoded is not None
            and len(decoded.entries) == len(ledger)
            and _starts_with(ledger, decoded)
        ):
            decoded = self._decoded = DecodedLedger.of(ledger)
        return decoded

    @property
    def privacy_spent_(self) -> PrivacySpent:
        """(epsilon, delta) of everything released, composed from ``privacy_ledger_``.

        Computed on access by the accountant (parallel composition over the
        arrival chunks), so releases do not pay for it.
        """
        check_is_fitted(self, "privacy_ledger_")
        return self._decoded_ledger().spent(self._ledger_delta())

    def __getstate__(self):
        state = super().__getstate__()
        state = {name: value for name, value in state.items() if name != "_decoded"}
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


def planned_fit(
    estimator: "PrivateEstimatorMixin", sizes: PublicSizes | None = None
) -> ReleasePlan:
    """What one ``fit`` of ``estimator`` adds to its ledger, before any data is read.

    The estimator's planning hook
    (:meth:`PrivateEstimatorMixin._plan_releases`) with its current
    parameters and the public ``sizes``. Used by
    :class:`~sklearn_dpu.model_selection.PrivateGridSearch` for every
    candidate and by
    :meth:`~sklearn_dpu.privacy.PrivacyBudget.planned_epsilon`.

    Parameters
    ----------
    estimator : PrivateEstimatorMixin
        An sklearn_dpu estimator.
    sizes : PublicSizes, default=None
        Public sizes (the number of features when the caller knows it);
        ``None`` for none.

    Returns
    -------
    ReleasePlan

    Raises
    ------
    NotImplementedError
        If the estimator cannot say what its fit releases.
    """
    sizes = PublicSizes() if sizes is None else sizes
    if not hasattr(estimator, "_plan_releases"):
        raise NotImplementedError(
            f"{type(estimator).__name__} cannot say what its fit releases: it is not an "
            "sklearn_dpu estimator (plan a Pipeline's steps one by one)"
        )
    return estimator._plan_releases(estimator.get_params(deep=False), sizes)


def _starts_with(ledger: list, decoded: DecodedLedger) -> bool:
    """Whether ``ledger`` starts with the dicts ``decoded`` decodes (compared
    by identity, a C loop: about 20 us per thousand entries)."""
    return len(ledger) >= len(decoded.entries) and all(map(operator.is_, ledger, decoded.entries))


def _same(a, b) -> bool:
    """Whether two parameter values are equal (sequences by their elements)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, tuple | list | np.ndarray) or isinstance(b, tuple | list | np.ndarray):
        return np.array_equal(
            np.atleast_1d(np.asarray(a, dtype=object)), np.atleast_1d(np.asarray(b, dtype=object))
        )
    return bool(a == b)
