"""Worker functions of :class:`~sklearn_dpu.linear_model.DPLogisticRegression`
that read and write the estimator's state.

The public class (``_dp_logistic.py``) is the API and the release hooks of
:class:`~sklearn_dpu.base.PrivateEstimatorMixin`; the functions here carry
out one deletion request (:func:`delete_samples`, planned and charged through
:meth:`~sklearn_dpu.base.PrivateEstimatorMixin._run_deletion`), set the
fitted attributes from the released model (:func:`publish`) and validate
in-memory training data (:func:`validated_fit_data`,
:func:`validated_stream_data`), the clip checking that ``X`` is finite. The
recipes they call are in :mod:`sklearn_dpu.linear_model._logistic_deletion`,
:mod:`sklearn_dpu.linear_model._langevin` and
:mod:`sklearn_dpu.linear_model._auto_bounds`.
"""

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.multiclass import check_classification_targets

from .._transaction import keep_attributes
from .._validation import cast_outputs
from . import _auto_bounds as auto_bounds
from . import _langevin as langevin
from . import _logistic_deletion as deletion
from ._input_rows import validated_xy

__all__ = ["delete_samples", "encode_labels", "publish"]


def delete_samples(estimator: Any, sample_ids: list, share: float, notes: Sequence[str]) -> Any:
    """Remove ``sample_ids`` from a fitted ``DPLogisticRegression``.

    Parameters
    ----------
    estimator : DPLogisticRegression
        Fitted, with its frozen parameters in effect.
    sample_ids : list
        Ids known at fit time (checked by the registry).
    share : float
        Share of ``epsilon`` a ``feature_norm='auto'`` bound was released at.
    notes : sequence of str
        Notes stated in every deletion report.

    Returns
    -------
    estimator : DPLogisticRegression
    """
    est = estimator
    state = est.unlearning_state_
    registry = state.registry
    slots = registry.slots_of(sample_ids)
    params, loss, target = est._params(), est._loss(), est._deletion_target()
    # What a kept 'auto' bound adds (the fit's epsilon: frozen while deleting);
    # the model gets what remains of the target (a tiny one: a retrain).
    deleted = est._n_deleted_since_fit(len(slots))
    kept = deleted * share * est.epsilon if hasattr(est, "feature_norm_") else 0.0
    target_model = max(target - kept, 1e-12)
    if langevin.handles(state):
        finish = None
        if kept:
            bound_eps = share * est.epsilon
            finish = lambda o: auto_bounds.kept_bound_outcome(o, bound_eps, deleted, target)  # noqa: E731
        langevin.delete_langevin(est, slots, target_model, finish)
        return est
    deleted_per_chunk = Counter(registry.chunks_of(slots).tolist())
    dense_rows = isinstance(registry.rows, np.ndarray)  # the input's format
    chunk_plan = deletion.plan_chunk_deletion(
        params, loss, state.chunks, deleted_per_chunk, target_model, dense_rows
    )
    plan = deletion.deletion_plan(params, loss, state.chunks, chunk_plan, target_model)

    def execute():
        # Re-releases read the remaining rows; the registry changes only after
        # (its removal and the state's new chunks are undone if the call fails).
        keep_attributes(state)
        chunks, fell_back, work = deletion.rerelease_chunks(
            params,
            loss,
            state.chunks,
            registry,
            slots,
            chunk_plan,
            est.random_state,
            len(est.privacy_ledger_),
        )
        registry.remove(slots)
        state.chunks = chunks
        est._publish()
        outcome = deletion.deletion_outcome(
            chunk_plan.decision, fell_back, est.delta, target_model, tuple(notes), work
        )
        if not kept:
            return outcome
        return auto_bounds.kept_bound_outcome(outcome, share * est.epsilon, deleted, target)

    est._run_deletion(len(slots), plan, execute)
    return est


def publish(estimator: Any) -> None:
    """Set ``coef_``, ``intercept_``, ``solver_``, ``C_`` and ``n_iter_`` of
    ``estimator`` from the released model (the last chunk of its state)."""
    est = estimator
    chunks = est.unlearning_state_.chunks
    last = chunks[-1]
    d = est.n_features_in_
    theta = last.theta.reshape(-1, est._n_coef(d))
    est.coef_ = theta[:, :d] / est._norm_bound()
    est.intercept_ = theta[:, d].copy() if est.fit_intercept else np.zeros(len(theta))
    batch = [c for c in chunks if c.kind == "fit"]
    config = (batch[-1] if batch else last).config
    est.solver_ = config.solver
    est.C_ = 1.0 / (config.Lambda * est._norm_bound() ** 2)
    est.n_iter_ = int(last.n_iter)
    cast_outputs(est)  # float32 in, float32 out (LogisticRegression's)


def validated_fit_data(estimator: Any, X: Any, y: Any, public_classes: Any, clip: bool) -> tuple:
    """``fit``'s validation of in-memory ``X, y``: ``(X, classes, y_index,
    rows)``, ``rows`` the registry rows when ``clip`` (a public bound: the
    clip is the pass that checks ``X`` is finite, see
    :func:`~sklearn_dpu._validation.nonfinite_x_reported_first`), else
    ``None`` (an 'auto' bound reads ``X`` first: scikit-learn checks it)."""
    with validated_xy(estimator, X, y, clip=clip) as (Xv, yv):
        check_classification_targets(yv)
        classes, y_index = label_set(estimator, *encode_labels(yv), public_classes)
        rows = estimator._rows(Xv, y_index, estimator.feature_norm) if clip else None
    return Xv, classes, y_index, rows


def validated_stream_data(estimator: Any, X: Any, y: Any, classes: Any, first: bool) -> tuple:
    """``partial_fit``'s validation: ``(X, labels, y_index, rows)``, the
    registry rows clipped in the pass that checks ``X`` is finite, unless the
    first call must draw an 'auto' bound from ``X`` first (then ``None``)."""
    clip = not (first and auto_bounds.is_auto(estimator.feature_norm))
    with validated_xy(estimator, X, y, clip=clip, reset=first) as (Xv, yv):
        check_classification_targets(yv)
        labels = np.unique(classes) if first else estimator.classes_
        if first and len(labels) < 2:
            raise ValueError("classes must contain at least 2 classes")
        unseen = np.setdiff1d(np.unique(yv), labels)
        if unseen.size:
            raise ValueError(
                f"y contains labels {unseen.tolist()!r} that are not in classes_ "
                f"{labels.tolist()!r}: the label set is fixed at the first call; pass "
                "every label of the stream in `classes`"
            )
        y_index = np.searchsorted(labels, yv)
        rows = None
        if clip:  # the first call's bound is public; a later one's is fixed
            bound = estimator.feature_norm if first else estimator._norm_bound()
            rows = estimator._rows(Xv, y_index, bound)
    return Xv, labels, y_index, rows


def label_set(estimator: Any, classes: np.ndarray, y_index: Any, public_classes: Any) -> tuple:
    """The fit's label set (``public_classes`` when given) and ``y``'s
    indices in it, checked against the parameters before anything is charged."""
    if public_classes is not None:
        classes, y_index = with_label_set(classes, y_index, public_classes)
    if len(classes) < 2:
        raise ValueError(
            "DPLogisticRegression needs samples of at least 2 classes in the data, "
            f"but the data contains only one class: {classes[0]!r}"
        )
    estimator._check_public_params(len(classes))
    return classes, y_index


def with_label_set(
    labels: np.ndarray, y_index: np.ndarray | None, classes: ArrayLike
) -> tuple[np.ndarray, np.ndarray | None]:
    """The public label set ``classes`` and ``y``'s indices in it.

    ``labels`` are the labels found in ``y`` (``y_index`` their indices, or
    ``None`` for Dask input, indexed later from ``classes_``); every one must
    be in ``classes``.
    """
    public = np.unique(np.asarray(classes))
    unseen = np.setdiff1d(labels, public)
    if unseen.size:
        raise ValueError(
            f"y contains labels {unseen.tolist()!r} that are not in classes={public.tolist()!r}"
        )
    if y_index is None:
        return public, None
    return public, np.searchsorted(public, labels)[y_index]


# Integer labels spanning at most this many values (or 4 per row) are counted
# (np.bincount) rather than sorted.
_COUNTED_SPAN = 1 << 16


def encode_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y, return_inverse=True)``: the sorted labels and each
    row's index among them, the same arrays (values, dtypes, shapes).

    Integer labels of a small span are counted in one pass instead of sorted
    (``np.unique`` sorts the ``n`` labels: ~3 ms at n = 1e5, a tenth of a
    fit at 10 features); other labels (strings, floats, bools, wide spans)
    go to ``np.unique``. ``tests/test_binary_pass.py`` checks the equality.
    """
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0 or y.dtype.kind not in "iu":
        return np.unique(y, return_inverse=True)
    low, high = y.min(), y.max()
    if int(high) - int(low) > max(_COUNTED_SPAN, 4 * y.size):
        return np.unique(y, return_inverse=True)
    # Offsets in 64 bits: ``y - low`` in a narrow type would wrap (int8: 100 - -100).
    wide = np.uint64 if y.dtype.kind == "u" else np.int64
    offsets = (y.astype(wide) - wide(low)).astype(np.intp)
    present = np.flatnonzero(np.bincount(offsets))
    index = np.zeros(present.size and int(present[-1]) + 1, dtype=np.intp)
    index[present] = np.arange(present.size)
    return low + present.astype(y.dtype), index[offsets]
