"""Deletion: reports, the versioned metadata, and deletion through pipelines."""

from .pipeline import IncompleteUnlearningWarning, delete_samples, unlearnable_steps
from .report import DeletionReport
from .state import SampleRegistry, VersionedState

__all__ = [
    "DeletionReport",
    "IncompleteUnlearningWarning",
    "SampleRegistry",
    "VersionedState",
    "delete_samples",
    "unlearnable_steps",
]
