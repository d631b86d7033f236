"""Preprocessing that keeps pipelines private and deletable."""

from ._private_bounds import PrivateBoundsScaler
from ._public_bounds import PublicBoundsScaler

__all__ = ["PrivateBoundsScaler", "PublicBoundsScaler"]
