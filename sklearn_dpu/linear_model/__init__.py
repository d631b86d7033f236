"""Private linear models."""

from ._dp_linear import DPLinearRegression

__all__ = ["DPLinearRegression"]
