"""Private linear models."""

from ._dp_linear import DPLinearRegression
from ._unlearnable_sgd import UnlearnableSGDClassifier

__all__ = ["DPLinearRegression", "UnlearnableSGDClassifier"]
