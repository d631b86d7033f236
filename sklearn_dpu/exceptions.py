"""Exceptions and warnings raised by sklearn_dpu."""

__all__ = [
    "BudgetExceededError",
    "BudgetUnavailableWarning",
    "IncompleteUnlearningWarning",
    "LedgerTamperedError",
    "LedgerUnavailableError",
    "PersistenceError",
    "PrivacyLeakWarning",
    "SelectionFailedError",
    "StateVersionError",
    "UnlearningError",
]


class BudgetExceededError(RuntimeError):
    """A release would take a :class:`~sklearn_dpu.privacy.PrivacyBudget` past its cap.

    Raised before the estimator reads any data; nothing is charged.
    """


class UnlearningError(ValueError):
    """A deletion request cannot be honoured as asked (unknown, duplicate or
    already-deleted id, deleting every sample, or a pipeline step that holds
    data-derived state it cannot unlearn). The estimator is left unchanged."""


class SelectionFailedError(ValueError):
    """A private selection ended without a winner: the threshold rule of
    :class:`~sklearn_dpu.model_selection.PrivateGridSearch` stopped before any
    noisy score passed, or ``repeat_and_select`` drew zero runs. No model is
    published, but the search's privacy was spent and its budgets charged
    (an outcome of the mechanism: retrying pays again). ``epsilon_spent``
    is that cost, at the search's ``delta``.
    """

    def __init__(self, message: str, epsilon_spent: float | None = None):
        super().__init__(message)
        self.epsilon_spent = epsilon_spent


class StateVersionError(ValueError):
    """A persisted estimator state has a format version this release cannot read."""


class PersistenceError(ValueError):
    """A file could not be loaded: it is corrupted, not an sklearn_dpu file, or
    holds types that are not trusted."""


class PrivacyLeakWarning(UserWarning):
    """An operation voids or weakens the stated privacy guarantee.

    Emitted only on conditions that depend on public parameters, never on the
    values of private data.
    """


class UnreliableBoundsWarning(UserWarning):
    """Privately estimated bounds (``"auto"``) are close to random: the rows,
    known through a noisy count (a charged DP release, so the warning is
    post-processing of it), are too few for the epsilon each selection gets.
    Public bounds, or more epsilon, fix it."""


class LedgerUnavailableError(PersistenceError):
    """A :class:`~sklearn_dpu.privacy.PrivacyBudget` ledger cannot be reached:
    its file is missing or moved, read-only, locked by another process past
    the timeout, or its key is not available in this process.

    A fit is refused; a deletion completes and keeps its charge pending
    (:class:`BudgetUnavailableWarning`).
    """


class LedgerTamperedError(PersistenceError):
    """A :class:`~sklearn_dpu.privacy.PrivacyBudget` ledger's hash chain is
    broken: a charge was deleted, edited or inserted outside sklearn_dpu, or
    the key is not the one it was created with. Its total cannot be trusted."""


class BudgetUnavailableWarning(UserWarning):
    """A deletion's re-release could not be charged to the shared budget.

    The deletion happened and is recorded in the estimator's own
    ``privacy_ledger_``; the charge is kept in its ``pending_budget_charges_``
    until ``budget.charge_pending(estimator)`` or its next successful charge
    records it. Emitted on conditions of the ledger file, never of the data.
    """


class IncompleteUnlearningWarning(UserWarning):
    """A deletion went through, but some step of a pipeline still holds
    data-derived state it cannot unlearn (the warning names the step and the
    attribute)."""
