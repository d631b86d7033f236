"""Preprocessing that keeps pipelines private and deletable."""

from ._public_bounds import PublicBoundsScaler

__all__ = ["PublicBoundsScaler"]
