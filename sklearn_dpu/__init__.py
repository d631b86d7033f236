"""sklearn_dpu: differentially private and unlearnable scikit-learn estimators."""

from .exceptions import (
    BudgetExceededError,
    PersistenceError,
    PrivacyLeakWarning,
    StateVersionError,
    UnlearningError,
)
from .linear_model import DPLinearRegression, DPLogisticRegression
from .privacy import PrivacyBudget

__version__ = "0.1.0.dev0"

__all__ = [
    "BudgetExceededError",
    "DPLinearRegression",
    "DPLogisticRegression",
    "PersistenceError",
    "PrivacyBudget",
    "PrivacyLeakWarning",
    "StateVersionError",
    "UnlearningError",
    "__version__",
]
