"""Private model selection."""

from ._private_search import PrivateGridSearch

__all__ = ["PrivateGridSearch"]
