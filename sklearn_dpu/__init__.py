"""sklearn_dpu: differentially private and unlearnable scikit-learn estimators."""

from .exceptions import (
    BudgetExceededError,
    PersistenceError,
    PrivacyLeakWarning,
    StateVersionError,
    UnlearningError,
)
from .linear_model import DPLinearRegression, DPLogisticRegression, UnlearnableSGDClassifier
from .model_selection import PrivateGridSearch
from .privacy import PrivacyBudget

__version__ = "0.1.0.dev0"

__all__ = [
    "BudgetExceededError",
    "DPLinearRegression",
    "DPLogisticRegression",
    "PersistenceError",
    "PrivacyBudget",
    "PrivacyLeakWarning",
    "PrivateGridSearch",
    "StateVersionError",
    "UnlearnableSGDClassifier",
    "UnlearningError",
    "__version__",
]
