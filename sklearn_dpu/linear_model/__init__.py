"""Private linear models."""

from ._dp_linear import DPLinearRegression
from ._dp_logistic import DPLogisticRegression

__all__ = ["DPLinearRegression", "DPLogisticRegression"]
