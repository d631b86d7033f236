"""Validation scores with a public bound, for the private selection of a search.

A private selection (permute-and-flip, the generalized exponential
mechanism) needs the *sensitivity* of each candidate's utility: how far it
can move when one validation row is added or removed. The search's utility
of candidate ``c`` is minus its summed validation *cost*,

.. math::

    u_c(D) = -\\sum_{(x, y) \\in D} \\big(h - s_c(x, y)\\big),
    \\qquad s_c(x, y) \\in [l, h],

where ``s_c`` is a per-row score clipped to the public interval ``[l, h]``.
Every term lies in ``[0, h - l]``: adding a row lowers *every* candidate's
utility by at most ``h - l`` and removing one raises it by at most as much,
so the utilities are monotone with sensitivity ``h - l`` (McKenna & Sheldon
2020, Thm 1, monotone case). That bound does not involve the number of
validation rows, which is private: the search assigns each row to the
validation part at random, so its size is a function of the data. A *mean*
score, as scikit-learn's scorers return, moves by ``(h - l) / n_val`` and
has no public sensitivity; only scores that are sums of bounded per-row terms
(or rank the candidates like one, as ``r2`` ranks them like the squared
error) are accepted. Subtracting ``h`` per row changes every utility by the
same ``h * n_val`` and leaves the selection's distribution unchanged (both
mechanisms depend on differences of utilities only).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import is_classifier
from sklearn.metrics import get_scorer_names
from sklearn.utils import assert_all_finite

__all__ = ["SCORINGS", "ValidationScore", "check_scoring", "target_interval"]

#: The named scorings the search accepts, with the per-row score each sums.
SCORINGS = {
    "accuracy": "1 if the prediction is right, else 0 (classifiers)",
    "neg_mean_squared_error": "minus the squared error, predictions and targets clipped "
    "to the target range (regressors with a target_bound)",
    "r2": "ranks candidates like neg_mean_squared_error on one validation part "
    "(r2 = 1 - SSE / SST with SST common to every candidate); selects with it",
    "neg_mean_absolute_error": "minus the absolute error, predictions and targets clipped "
    "to the target range (regressors with a target_bound)",
}
_SQUARED = ("neg_mean_squared_error", "r2")


@dataclass(frozen=True)
class ValidationScore:
    """A per-row validation score with a public bound.

    Attributes
    ----------
    kind : {"zero_one", "squared", "absolute", "callable"}
        Which per-row score is summed.
    score_func : callable or None
        For ``kind="callable"``: ``score_func(y_true, y_pred)`` returning one
        score per row (higher is better).
    score_bounds : tuple of float or None
        For ``kind="callable"``: the public ``(low, high)`` each row's score
        is clipped to.
    """

    kind: str
    score_func: Callable | None = None
    score_bounds: tuple[float, float] | None = None

    def sensitivity(self, estimator: Any) -> float | None:
        """The per-row cost bound ``h - l`` for ``estimator``'s candidate.

        ``None`` when it is known only once the candidate is fitted (a
        regressor's released ``target_interval_``).
        """
        if self.kind == "zero_one":
            return 1.0
        if self.kind == "callable":
            low, high = self.score_bounds
            return high - low
        interval = target_interval(estimator)
        if interval is None:
            return None
        low, high = interval
        return (high - low) ** 2 if self.kind == "squared" else high - low

    def cost(self, estimator: Any, X: ArrayLike, y: np.ndarray) -> float:
        """The summed validation cost ``sum(h - s(x, y))`` of a fitted candidate."""
        prediction = estimator.predict(X)
        if self.kind == "zero_one":
            return float(np.sum((prediction != y).astype(float)))
        if self.kind == "callable":
            low, high = self.score_bounds
            scores = np.asarray(self.score_func(y, prediction), dtype=float)
            if scores.shape != (len(y),):
                raise ValueError(
                    "score_func(y_true, y_pred) must return one score per validation row "
                    "(a mean has no public sensitivity)"
                )
            # NaN counts as the worst score; clipping enforces the public bound.
            scores = np.clip(np.nan_to_num(scores, nan=low), low, high)
            return float(np.sum(high - scores))
        low, high = target_interval(estimator)
        target = y.astype(float)
        assert_all_finite(target, input_name="y")  # as a fit checks y (unless assume_finite)
        error = np.clip(prediction, low, high) - np.clip(target, low, high)
        costs = error**2 if self.kind == "squared" else np.abs(error)
        # A NaN (a NaN target or prediction under assume_finite) counts as the
        # worst cost, so every row's cost stays in [0, h - l], the sensitivity.
        worst = (high - low) ** 2 if self.kind == "squared" else high - low
        return float(np.sum(np.nan_to_num(costs, nan=worst)))


def check_scoring(
    scoring: str | Callable | None, score_bounds: Sequence[float] | None, estimator: Any
) -> ValidationScore:
    """The search's per-row score for ``scoring``, checked before any data is read.

    Parameters
    ----------
    scoring : None, str or callable
        ``None``: the zero-one loss of a classifier, the clipped squared
        error of a regressor. A name of :data:`SCORINGS`, or
        ``score_func(y_true, y_pred)`` returning per-row scores.
    score_bounds : tuple of float or None
        The public ``(low, high)`` of a callable's per-row scores.
    estimator : estimator
        The searched estimator (its type and ``target_bound``).

    Returns
    -------
    ValidationScore

    Raises
    ------
    ValueError
        For a scoring without a public bound on its value (an unknown name, a
        scikit-learn scorer object, a callable without ``score_bounds``), or
        one the estimator cannot be scored with.
    """
    if score_bounds is not None and not callable(scoring):
        raise ValueError(
            "score_bounds bounds a callable scoring; the named scorings have their own bounds"
        )
    if callable(scoring):
        if hasattr(scoring, "_score_func"):
            raise ValueError(
                "PrivateGridSearch cannot use a scikit-learn scorer object: it returns a mean "
                "over the validation rows, whose number is private, so its sensitivity is not "
                "public. Pass score_func(y_true, y_pred) returning one score per row, with "
                "score_bounds=(low, high)"
            )
        if score_bounds is None:
            raise ValueError(
                "a callable scoring needs score_bounds=(low, high), the public range of its "
                "per-row scores: without it the selection's sensitivity is unbounded"
            )
        low, high = (float(v) for v in score_bounds)
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError(f"score_bounds must be finite with low < high, got {score_bounds!r}")
        return ValidationScore("callable", scoring, (low, high))
    if scoring is None:
        kind = "zero_one" if is_classifier(estimator) else "squared"
    elif isinstance(scoring, str) and scoring in SCORINGS:
        if (scoring == "accuracy") != is_classifier(estimator):
            raise ValueError(
                f"scoring={scoring!r} does not apply to {type(estimator).__name__}: use "
                "'accuracy' for a classifier, 'neg_mean_squared_error', 'r2' or "
                "'neg_mean_absolute_error' for a regressor"
            )
        kind = {"accuracy": "zero_one", "neg_mean_absolute_error": "absolute"}.get(
            scoring, "squared"
        )
    elif isinstance(scoring, str) and scoring not in get_scorer_names():
        raise ValueError(
            f"scoring={scoring!r} is not a known scoring. Use one of {sorted(SCORINGS)}, or "
            "a callable score_func(y_true, y_pred) returning per-row scores with "
            "score_bounds=(low, high)"
        )
    else:
        raise ValueError(
            f"scoring={scoring!r} has no public bound on its value, so a private selection "
            f"cannot use it. Use one of {sorted(SCORINGS)}, or a callable "
            "score_func(y_true, y_pred) returning per-row scores with score_bounds=(low, high)"
        )
    if kind != "zero_one":
        check_target_bound(estimator)
    return ValidationScore(kind)


def check_target_bound(estimator: Any) -> None:
    """Refuse a regressor whose target range is neither public nor released."""
    params = estimator.get_params()
    if "target_bound" not in params:
        raise ValueError(
            f"PrivateGridSearch needs a bounded validation loss; {type(estimator).__name__} "
            "is neither a classifier nor a regressor with a target_bound parameter"
        )
    bound = params["target_bound"]
    if isinstance(bound, str) and bound != "auto":
        raise ValueError(
            f"PrivateGridSearch needs a public or released target range to bound the "
            f"validation loss; got target_bound={bound!r}"
        )


def target_interval(estimator: Any) -> tuple[float, float] | None:
    """A regressor's public target range, or its released one once fitted.

    A ``target_bound="auto"`` is the released ``target_interval_`` (a DP
    release on the training part, so public for the selection on the
    validation part); before the fit it is ``None``.
    """
    check_target_bound(estimator)
    bound = estimator.get_params()["target_bound"]
    if isinstance(bound, str):
        interval = getattr(estimator, "target_interval_", None)
        if interval is None:
            return None
        low, high = (float(v) for v in interval)
    elif isinstance(bound, tuple | list):
        low, high = (float(v) for v in bound)
    else:
        low, high = -float(bound), float(bound)
    return low, high


def default_loss(estimator: Any) -> tuple[str, float | None, object]:
    """The default validation loss of a candidate: (name, bound, clip interval).

    The zero-one loss of a classifier (bound 1); the squared error of a
    regressor clipped to its target range, public or released
    (:func:`~sklearn_dpu.model_selection._scoring.target_interval`; ``None``
    before a ``target_bound="auto"`` candidate is fitted).
    """
    if is_classifier(estimator):
        return "zero-one loss", 1.0, None
    interval = target_interval(estimator)
    if interval is None:
        return "squared error", None, None
    low, high = interval
    return "squared error", (high - low) ** 2, (low, high)
