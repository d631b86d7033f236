"""Deletion: reports, the versioned metadata, and deletion through pipelines."""

from .pipeline import IncompleteUnlearningWarning, delete_samples, unlearnable_steps
from .report import DeletionReport
from .row_store import RowFile, disk_backed_rows
from .state import SampleRegistry, VersionedState

__all__ = [
    "DeletionReport",
    "IncompleteUnlearningWarning",
    "RowFile",
    "SampleRegistry",
    "VersionedState",
    "delete_samples",
    "disk_backed_rows",
    "unlearnable_steps",
]
