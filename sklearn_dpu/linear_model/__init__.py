"""Private linear models."""

from ._dp_linear import DPLinearRegression
from ._dp_logistic import DPLogisticRegression
from ._unlearnable_sgd import UnlearnableSGDClassifier

__all__ = ["DPLinearRegression", "DPLogisticRegression", "UnlearnableSGDClassifier"]
