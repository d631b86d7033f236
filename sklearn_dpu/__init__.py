"""sklearn_dpu: differentially private and unlearnable scikit-learn estimators."""

from .exceptions import (
    BudgetExceededError,
    BudgetUnavailableWarning,
    IncompleteUnlearningWarning,
    LedgerTamperedError,
    LedgerUnavailableError,
    PersistenceError,
    PrivacyLeakWarning,
    SelectionFailedError,
    StateVersionError,
    UnlearningError,
    UnreliableBoundsWarning,
)
from .linear_model import DPLinearRegression, DPLogisticRegression, UnlearnableSGDClassifier
from .model_selection import PrivateGridSearch
from .preprocessing import PrivateBoundsScaler, PublicBoundsScaler
from .privacy import PrivacyBudget

__version__ = "0.1.0.dev0"

__all__ = [
    "BudgetExceededError",
    "BudgetUnavailableWarning",
    "DPLinearRegression",
    "DPLogisticRegression",
    "IncompleteUnlearningWarning",
    "LedgerTamperedError",
    "LedgerUnavailableError",
    "PersistenceError",
    "PrivacyBudget",
    "PrivacyLeakWarning",
    "PrivateBoundsScaler",
    "PrivateGridSearch",
    "PublicBoundsScaler",
    "SelectionFailedError",
    "StateVersionError",
    "UnlearnableSGDClassifier",
    "UnlearningError",
    "UnreliableBoundsWarning",
    "__version__",
]
