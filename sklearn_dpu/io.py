"""Save and load estimators through skops, with sklearn_dpu's own types trusted.

skops never unpickles: loading instantiates only the types it is told to
trust, so a file from someone else cannot run code. :func:`load` trusts
scikit-learn and numpy types (skops' defaults) and the library types in
:data:`TRUSTED_TYPES`; anything else must be reviewed and passed explicitly.

A saved estimator holds its deletion metadata: the clipped training rows
that :meth:`delete_samples` needs. Treat the file as you treat the data.
"""

import os
from collections.abc import Iterator, Sequence
from typing import IO, Any

import numpy as np
import skops.io

from .exceptions import PersistenceError, StateVersionError

__all__ = ["TRUSTED_TYPES", "load", "save"]

#: Fully qualified names of the library's types that may appear in a saved
#: estimator; :func:`load` trusts exactly these (plus skops' defaults).
TRUSTED_TYPES = (
    "sklearn_dpu.linear_model._langevin.LangevinConfig",
    "sklearn_dpu.privacy.langevin.LangevinRun",
    "sklearn_dpu.linear_model._dp_linear.DPLinearRegression",
    "sklearn_dpu.linear_model._linear_state.LinearStatisticsState",
    "sklearn_dpu.linear_model._linear_bounds.ReleasedBounds",
    # Its name before it moved (the same class, re-exported): files saved then load.
    "sklearn_dpu.linear_model._dp_linear.LinearStatisticsState",
    "sklearn_dpu.linear_model._unlearnable_sgd.UnlearnableSGDClassifier",
    "sklearn_dpu.linear_model._coupled_sgd.CoupledSGDState",
    "sklearn_dpu.linear_model._coupled_sgd.InsertionRecord",
    "sklearn_dpu.linear_model._sgd_edits.SGDEditLedger",
    "sklearn_dpu.linear_model._sgd_plan.SGDParams",
    "sklearn_dpu.linear_model._sgd_plan.SGDSchedule",
    # The name of SGDSchedule in files of state format 2 (converted on load).
    "sklearn_dpu.linear_model._sgd_plan.RunPlan",
    "sklearn_dpu.model_selection._private_search.PrivateGridSearch",
    "sklearn_dpu.linear_model._dp_logistic.DPLogisticRegression",
    "sklearn_dpu.linear_model._logistic_deletion.LogisticUnlearningState",
    "sklearn_dpu.linear_model._logistic_releases.ChunkModel",
    "sklearn_dpu.linear_model._logistic_releases.GaussianPart",
    "sklearn_dpu.linear_model._logistic_releases.ReleaseConfig",
    "sklearn_dpu.preprocessing._private_bounds.PrivateBoundsScaler",
    "sklearn_dpu.preprocessing._public_bounds.PublicBoundsScaler",
    "sklearn_dpu.privacy.budget.PrivacyBudget",
    "sklearn_dpu.privacy.ledger.PrivacySpent",
    "sklearn_dpu.privacy.mechanisms.GaussianMechanism",
    "sklearn_dpu.privacy.tree_aggregation.TreeAggregator",
    "sklearn_dpu.privacy.tree_aggregation.TreeNode",
    "sklearn_dpu.unlearning.report.DeletionCost",
    "sklearn_dpu.unlearning.report.DeletionReport",
    "sklearn_dpu.unlearning.state.SampleRegistry",
    # The record of a disk-backed registry's snapshot file (checked on load).
    "sklearn_dpu.unlearning.row_store.RowFile",
    # Storage of a fit on scipy.sparse input.
    "sklearn_dpu.linear_model._sparse_rows.SparseRows",
    "sklearn_dpu.linear_model._sparse_rows.SparseSampleRegistry",
    "scipy.sparse._csr.csr_array",  # skops stores it as an npz container
)


def save(estimator: Any, file: str | os.PathLike | IO[bytes]) -> None:
    """Write ``estimator`` (any scikit-learn object) to ``file`` in skops format.

    Parameters
    ----------
    estimator : object
    file : str, os.PathLike or file-like

    Raises
    ------
    PersistenceError
        The model's sample ids include a type that a skops file cannot
        rebuild (``pandas.Timedelta``; ``Timestamp`` ids mixed with other
        kinds). Nothing is written.

    Notes
    -----
    A model whose deletion rows are on disk
    (:func:`~sklearn_dpu.unlearning.disk_backed_rows`) is saved with a snapshot
    file of its rows beside them; the snapshot is yours, as the model file
    is: the model's later deletions do not remove it (delete it with the
    model file).
    """
    from .unlearning.row_store import kept_snapshots  # noqa: PLC0415

    _check_ids_persist(estimator)
    with kept_snapshots():
        skops.io.dump(estimator, file)


def _check_ids_persist(estimator: Any) -> None:
    """Refuse, before anything is written, sample ids that a skops file
    cannot rebuild (e.g. ``pandas.Timedelta``, or ``Timestamp`` mixed with
    other ids): :func:`load` would fail on the file, and its deletion
    metadata would be lost. One id of each type is tried.
    """
    for registry in _registries(estimator):
        ids, _ = registry.saved_ids()
        if ids.dtype != object:
            continue
        values = ids.tolist()
        for kind, value in dict(zip(map(type, values), values, strict=True)).items():
            if not _round_trips(value):
                raise PersistenceError(
                    f"sample ids of type {kind.__module__}.{kind.__qualname__} cannot be "
                    "saved in a skops file (skops cannot rebuild them): fit with sample_id "
                    "as strings (e.g. X.index.astype(str)), or save with pickle or joblib "
                    "(for files you trust only)"
                )


def _round_trips(value: Any) -> bool:
    """Whether a skops file gives ``value`` back, equal, in an object array."""
    array = np.empty(1, dtype=object)
    array[0] = value
    try:
        blob = skops.io.dumps(array)
        back = skops.io.loads(blob, trusted=skops.io.get_untrusted_types(data=blob))
        return bool(back[0] == value) and type(back[0]) is type(value)
    except Exception:  # noqa: BLE001  (any failure to rebuild is the answer)
        return False


def _registries(root: Any) -> Iterator[Any]:
    """The sample registries reachable from ``root`` through the attributes,
    lists, tuples and dicts of scikit-learn and sklearn_dpu objects."""
    from .unlearning.state import SampleRegistry  # noqa: PLC0415

    stack, seen = [root], set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, SampleRegistry):
            yield obj
        elif isinstance(obj, list | tuple):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif type(obj).__module__.split(".")[0] in ("sklearn", "sklearn_dpu"):
            stack.extend(getattr(obj, "__dict__", {}).values())


def load(file: str | os.PathLike | IO[bytes], *, trusted: Sequence[str] = ()) -> Any:
    """Load an estimator written by :func:`save`.

    Parameters
    ----------
    file : str, os.PathLike or file-like
    trusted : sequence of str, default=()
        Further type names to trust, after review.

    Returns
    -------
    object

    Raises
    ------
    PersistenceError
        The file is missing, corrupted, not a skops file, or holds an
        untrusted type. Nothing is instantiated in that case.
    StateVersionError
        The file holds a state format this release does not read.
    """
    try:
        found = skops.io.get_untrusted_types(file=file)
    except FileNotFoundError:
        raise
    except Exception as err:
        raise PersistenceError(f"{_name(file)} is not a readable skops file: {err}") from err
    untrusted = sorted(set(found) - set(TRUSTED_TYPES) - set(trusted))
    if untrusted:
        raise PersistenceError(
            f"{_name(file)} holds types that are not trusted: {untrusted}. Review them "
            "and pass them in trusted= to load the file."
        )
    try:
        return skops.io.load(file, trusted=found)
    except StateVersionError:
        raise
    except Exception as err:
        raise PersistenceError(f"{_name(file)} could not be loaded: {err}") from err


def _name(file) -> str:
    return os.fspath(file) if isinstance(file, str | os.PathLike) else "the file"
