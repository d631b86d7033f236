"""Deleting samples through meta-estimators.

``Pipeline`` cannot route a ``delete_samples`` call (it is not one of
scikit-learn's routed methods), and a deletion is only as complete as the
least deletable step: a ``StandardScaler`` fitted on the deleted rows still
remembers their mean. :func:`delete_samples` finds every step, through
nested ``Pipeline`` and ``ColumnTransformer`` objects, deletes through those
that can, and names those that hold data-derived state they cannot unlearn,
with the attributes that hold it.
"""

import dataclasses
import warnings
from typing import Any

from sklearn.base import BaseEstimator
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder
from sklearn.utils import get_tags

from .._transaction import atomic, staged_finishes
from ..exceptions import IncompleteUnlearningWarning, UnlearningError
from .ids import deletion_request, sample_id_kind

__all__ = ["IncompleteUnlearningWarning", "delete_samples", "unlearnable_steps"]


# Fitted attributes that describe the input's schema, not its values.
_SCHEMA_ATTRIBUTES = frozenset({"n_features_in_", "feature_names_in_"})


def _is_placeholder(step) -> bool:
    return step is None or (isinstance(step, str) and step in ("passthrough", "drop"))


def _encoder_state(step) -> list[str]:
    """What a OneHotEncoder or OrdinalEncoder learned from the data's values."""
    held = []
    if isinstance(step.categories, str) and step.categories == "auto":
        held.append(
            "categories_ holds the categories found in the data (give categories= "
            "from a public data dictionary)"
        )
    if getattr(step, "min_frequency", None) is not None or (
        getattr(step, "max_categories", None) is not None
    ):
        held.append(
            "infrequent_categories_ holds the categories found rare in the data "
            "(min_frequency / max_categories)"
        )
    return held


def _column_transformer_state(step) -> list[str]:
    """The ColumnTransformer's own data-derived decision: sparse or dense output.

    ``sparse_output_`` compares the density of the transformed data with
    ``sparse_threshold``. The density is fixed by the shape when every sparse
    block is a one-hot encoding with exactly one entry per row and feature
    (``handle_unknown='error'``, ``drop=None``).
    """
    if step.sparse_threshold == 0:
        return []
    fitted = getattr(step, "transformers_", step.transformers)
    variable = [
        name
        for name, transformer, _ in fitted
        if isinstance(transformer, OneHotEncoder)
        and transformer.sparse_output
        and (transformer.handle_unknown != "error" or transformer.drop is not None)
    ]
    if not variable:
        return []
    return [
        "sparse_output_ was chosen from the density of the transformed data (sparse one-hot "
        f"blocks of {', '.join(variable)} with handle_unknown or drop set; pass "
        "sparse_threshold=0 or sparse_output=False)"
    ]


def _data_derived_state(step) -> list[str]:
    """The fitted attributes of ``step`` that depend on the data's values, in words.

    Empty for a step that learns nothing: ``None``, ``'passthrough'``,
    ``'drop'``, a tag ``requires_fit=False``, or an encoder whose categories
    are given.
    """
    if _is_placeholder(step):
        return []
    if isinstance(step, ColumnTransformer):
        return _column_transformer_state(step)
    if isinstance(step, OneHotEncoder | OrdinalEncoder):
        return _encoder_state(step)
    try:
        if get_tags(step).requires_fit is False:
            return []
    except (AttributeError, TypeError):
        pass
    fitted = sorted(
        name
        for name in vars(step)
        if name.endswith("_") and not name.startswith("_") and name not in _SCHEMA_ATTRIBUTES
    )
    return [f"{', '.join(fitted) or 'its fitted state'} learned from the data"]


def _walk(estimator, path):
    """Yield ``(path, step)`` for the steps of nested pipelines and column
    transformers, in order; a ColumnTransformer is yielded itself (for its own
    state) and then its fitted transformers."""
    if isinstance(estimator, Pipeline):
        for name, step in estimator.steps:
            yield from _walk(step, f"{path}.{name}" if path else name)
    elif isinstance(estimator, ColumnTransformer):
        yield path or "columntransformer", estimator
        # The fitted clones live in transformers_, not in transformers.
        for name, step, _ in getattr(estimator, "transformers_", estimator.transformers):
            yield from _walk(step, f"{path}.{name}" if path else name)
    else:
        yield path or type(estimator).__name__, estimator


def unlearnable_steps(estimator: BaseEstimator) -> list[str]:
    """Names of the steps that keep data-derived state and cannot delete.

    A step is fine if it has ``delete_samples`` (which states its own
    guarantee, e.g. a private search's certified selection) or learns
    nothing from the data's values (tag ``requires_fit=False``,
    ``'passthrough'``, ``'drop'``, ``OneHotEncoder`` or ``OrdinalEncoder`` with
    given ``categories``). Steps inside a ``ColumnTransformer`` are checked
    one by one, and so is the ColumnTransformer's own choice of a sparse
    output.

    Parameters
    ----------
    estimator : estimator or Pipeline

    Returns
    -------
    list of str
        ``"pipeline.step"`` paths, each with the class and the attributes
        that hold what it learned, e.g. ``"columntransformer.cat
        (OneHotEncoder: categories_ holds the categories found in the data
        ...)"``.
    """
    names = []
    for path, step in _walk(estimator, ""):
        if hasattr(step, "delete_samples"):
            continue
        held = _data_derived_state(step)
        if held:
            names.append(f"{path} ({type(step).__name__}: {'; '.join(held)})")
    return names


def _check_ids_survived(estimator, deletable, positions: bool) -> None:
    """Refuse when a step behind another step numbered its rows by position.

    A transformer returning an array drops a DataFrame's index, so the
    deletable step falls back to row positions, and the labels the caller
    holds would name other people. Whether the pipeline recorded string
    column names (it certainly saw a DataFrame) or not (a DataFrame with
    integer column labels records none, and the step cannot tell it from an
    array), the caller must confirm that the ids are row positions
    (``positions=True``); the refusal says which case it is.
    """
    if not isinstance(estimator, Pipeline):
        return
    first = estimator.steps[0][1]
    lost = [
        path
        for path, step in deletable
        if step is not first and sample_id_kind(step) in ("positions", "mixed")
    ]
    if not lost:
        return
    fix = (
        "Refit with explicit ids (e.g. pipe.fit(X, y, <step>__sample_id=X.index)) or, "
        "when no step outputs a sparse matrix, keep the index through the pipeline "
        "(pipe.set_output(transform='pandas'))."
    )
    if hasattr(estimator, "feature_names_in_") and not positions:
        raise UnlearningError(
            f"this pipeline was fitted on a DataFrame, but step(s) {', '.join(lost)} "
            "received an array (an earlier step dropped the index) and numbered the rows "
            f"by position: deleting index labels would delete other rows. {fix} If the "
            "ids are row positions of the DataFrame passed to fit (e.g. "
            "np.flatnonzero(X.index.isin(labels)) for a single fit), pass positions=True."
        )
    if not positions:
        raise UnlearningError(
            f"step(s) {', '.join(lost)} received an array from an earlier step and "
            "numbered the rows by position, so the ids must be row positions of the data "
            "passed to fit. If the pipeline was fitted on a DataFrame, its index labels "
            f"were lost and would delete other rows: {fix} If the ids are row positions, "
            "pass positions=True."
        )


def _check_positions_confirmed(deletable: list) -> None:
    """Refuse ``positions=True`` when a step's ids are labels: there the same
    numbers name other rows (position 0 is not the row labelled 0)."""
    labelled = [
        path or type(step).__name__
        for path, step in deletable
        if sample_id_kind(step) in ("index", "given")
    ]
    if labelled:
        raise UnlearningError(
            f"positions=True, but step(s) {', '.join(labelled)} know their rows by "
            "DataFrame index labels or sample_id values, not by position: pass those ids "
            "(without positions=True)"
        )


def _check_ids_known(deletable: list, sample_ids: list) -> None:
    """Refuse the request before any step deletes, if a step would refuse it
    (unknown, already deleted, repeated, or every sample): a step that stores
    no ids (a scaler whose release certifies any deletion) must not log a
    deletion that a later step then refuses."""
    for path, step in deletable:
        check = getattr(step, "_check_deletable", None)
        if check is None:
            continue
        try:
            check(sample_ids)
        except UnlearningError as err:
            raise UnlearningError(f"{path or type(step).__name__}: {err}") from err


def delete_samples(
    estimator: BaseEstimator,
    sample_ids: Any,
    *,
    on_unlearnable: str = "raise",
    positions: bool = False,
) -> BaseEstimator:
    """Delete samples from every deletable step of ``estimator``.

    Parameters
    ----------
    estimator : estimator or Pipeline
        Fitted; steps with ``delete_samples`` must know the same sample ids.
    sample_ids : hashable or iterable of hashable
        One id (a bare string or scalar is one id) or several.
    on_unlearnable : {"raise", "warn"}, default="raise"
        What to do when a step holds data-derived state it cannot unlearn:
        raise :class:`~sklearn_dpu.exceptions.UnlearningError` before
        touching anything, or delete what can be deleted and warn with
        :class:`IncompleteUnlearningWarning` naming the steps; the deletion
        reports of the deleting steps then say that the deletion is incomplete.
    positions : bool, default=False
        Confirm that ``sample_ids`` are row positions. Required when a step of
        a ``Pipeline`` behind another step numbered its rows by position (it
        received an array and no ``sample_id``): the pipeline may have been
        fitted on a DataFrame whose index labels an earlier step dropped, and
        then labels and positions name different people.

    Returns
    -------
    estimator
        The same object.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn_dpu.linear_model import DPLinearRegression
    >>> from sklearn_dpu.preprocessing import PublicBoundsScaler
    >>> from sklearn_dpu.unlearning import delete_samples
    >>> X, y = np.random.default_rng(0).uniform(-1, 1, (100, 2)), np.zeros(100)
    >>> pipe = make_pipeline(PublicBoundsScaler(), DPLinearRegression(random_state=0))
    >>> pipe = delete_samples(pipe.fit(X, y), [3, 4], positions=True)
    >>> pipe[-1].deletion_log_[-1].n_deleted
    2
    """
    if on_unlearnable not in ("raise", "warn"):
        raise ValueError(f"on_unlearnable must be 'raise' or 'warn', got {on_unlearnable!r}")
    sample_ids = deletion_request(estimator, sample_ids)
    deletable = [(p, s) for p, s in _walk(estimator, "") if hasattr(s, "delete_samples")]
    if not deletable:
        raise UnlearningError(f"no step of {type(estimator).__name__} can delete samples")
    blocked = unlearnable_steps(estimator)
    if blocked and on_unlearnable == "raise":
        raise UnlearningError(
            "these steps hold data-derived state they cannot unlearn: "
            + "; ".join(blocked)
            + ". Replace them (e.g. PublicBoundsScaler for a fitted scaler) or pass "
            "on_unlearnable='warn' to delete from the other steps."
        )
    _check_ids_survived(estimator, deletable, positions)
    if positions:
        _check_positions_confirmed(deletable)
    _check_ids_known(deletable, sample_ids)
    # All or nothing: every step executes its deletion (undone, with the
    # steps before it, if one fails), then every step charges and logs.
    with atomic():
        with staged_finishes() as finishes:
            for _, step in deletable:
                step.delete_samples(sample_ids)
        for prepare, _ in finishes:  # all that can fail, for every step
            prepare()
        for _, charge in finishes:  # then the charges: the commit point
            charge()
    if blocked:
        note = (
            "INCOMPLETE: deleted through a pipeline whose other steps still hold what they "
            "learned from the deleted samples (" + "; ".join(blocked) + "); this report's "
            "guarantee covers this estimator's state only, and names derived from that "
            "state (e.g. feature_names_in_) may still show it"
        )
        for _, step in deletable:
            log = getattr(step, "deletion_log_", None)
            if log:
                step.deletion_log_ = [
                    *log[:-1],
                    dataclasses.replace(log[-1], notes=(*log[-1].notes, note)),
                ]
        warnings.warn(
            "deleted, but these steps still hold what they learned from the deleted "
            "samples: " + "; ".join(blocked),
            IncompleteUnlearningWarning,
            stacklevel=2,
        )
    return estimator
