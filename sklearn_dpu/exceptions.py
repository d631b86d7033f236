"""Exceptions and warnings raised by sklearn_dpu."""

__all__ = [
    "BudgetExceededError",
    "PersistenceError",
    "PrivacyLeakWarning",
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
