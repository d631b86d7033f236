"""Deleting samples through meta-estimators.

``Pipeline`` cannot route a ``delete_samples`` call (it is not one of
scikit-learn's routed methods), and a deletion is only as complete as the
least deletable step: a ``StandardScaler`` fitted on the deleted rows still
remembers their mean. :func:`delete_samples` finds every step, deletes
through those that can, and names those that hold data-derived state they
cannot unlearn.
"""

import warnings

from sklearn.pipeline import Pipeline
from sklearn.utils import get_tags

from ..exceptions import UnlearningError
from .ids import as_id_list, sample_id_kind

__all__ = ["IncompleteUnlearningWarning", "delete_samples", "unlearnable_steps"]


class IncompleteUnlearningWarning(UserWarning):
    """A deletion went through, but some step still holds data-derived state."""


def _learns_nothing(step) -> bool:
    if step is None or step == "passthrough":
        return True
    try:
        return get_tags(step).requires_fit is False
    except (AttributeError, TypeError):
        return False


def _walk(estimator, path):
    """Yield ``(path, step)`` for leaves of nested pipelines, in order."""
    if isinstance(estimator, Pipeline):
        for name, step in estimator.steps:
            yield from _walk(step, f"{path}.{name}" if path else name)
    else:
        yield path or type(estimator).__name__, estimator


def unlearnable_steps(estimator) -> list[str]:
    """Names of the steps that keep data-derived state and cannot delete.

    A step is fine if it has ``delete_samples`` (which states its own
    guarantee, e.g. a private search's certified selection) or learns
    nothing (tag ``requires_fit=False``, ``'passthrough'``).

    Parameters
    ----------
    estimator : estimator or Pipeline

    Returns
    -------
    list of str
        ``"pipeline.step"`` paths, with the reason.
    """
    names = []
    for path, step in _walk(estimator, ""):
        if not (hasattr(step, "delete_samples") or _learns_nothing(step)):
            names.append(f"{path} ({type(step).__name__} keeps what it learned from the data)")
    return names


def _check_ids_survived(estimator, deletable) -> None:
    """Refuse when a pipeline saw a DataFrame but a step numbered rows by position.

    A transformer returning an array drops the DataFrame's index, so the
    deletable step fell back to row positions: the labels the caller holds
    would name other people.
    """
    if not (isinstance(estimator, Pipeline) and hasattr(estimator, "feature_names_in_")):
        return
    lost = [path for path, step in deletable if sample_id_kind(step) == "positions"]
    if lost:
        raise UnlearningError(
            f"this pipeline was fitted on a DataFrame, but step(s) {', '.join(lost)} "
            "received an array (an earlier step dropped the index) and numbered the rows "
            "by position: deleting index labels would delete other rows. Refit with "
            "explicit ids (e.g. pipe.fit(X, y, <step>__sample_id=X.index)) or keep the "
            "index through the pipeline (pipe.set_output(transform='pandas'))."
        )


def delete_samples(estimator, sample_ids, *, on_unlearnable="raise"):
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
        :class:`IncompleteUnlearningWarning` naming the steps.

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
    >>> pipe = delete_samples(pipe.fit(X, y), [3, 4])
    >>> pipe[-1].deletion_log_[-1].n_deleted
    2
    """
    if on_unlearnable not in ("raise", "warn"):
        raise ValueError(f"on_unlearnable must be 'raise' or 'warn', got {on_unlearnable!r}")
    sample_ids = as_id_list(sample_ids)
    deletable = [(p, s) for p, s in _walk(estimator, "") if hasattr(s, "delete_samples")]
    if not deletable:
        raise UnlearningError(f"no step of {type(estimator).__name__} can delete samples")
    _check_ids_survived(estimator, deletable)
    blocked = unlearnable_steps(estimator)
    if blocked and on_unlearnable == "raise":
        raise UnlearningError(
            "these steps hold data-derived state they cannot unlearn: "
            + "; ".join(blocked)
            + ". Replace them (e.g. PublicBoundsScaler for a fitted scaler) or pass "
            "on_unlearnable='warn' to delete from the other steps."
        )
    for _, step in deletable:
        step.delete_samples(sample_ids)
    if blocked:
        warnings.warn(
            "deleted, but these steps still hold what they learned from the deleted "
            "samples: " + "; ".join(blocked),
            IncompleteUnlearningWarning,
            stacklevel=2,
        )
    return estimator
