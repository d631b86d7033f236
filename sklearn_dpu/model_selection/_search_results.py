"""What a private search publishes, and the helpers that read its data.

The candidates' hyper-parameters (from a grid or sampled from
distributions with the public ``random_state``), the ``cv_results_`` dict,
and the random split of the data into a training and a validation part.
"""

import dataclasses
import inspect
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn import config_context
from sklearn.base import clone, is_classifier
from sklearn.model_selection import ParameterGrid, ParameterSampler
from sklearn.utils import assert_all_finite
from sklearn.utils.validation import indexable

from ..base import PublicSizes
from ..privacy.ledger import Release
from ..privacy.random import release_generator
from ..unlearning.report import DeletionCost

__all__ = ["candidate_points", "candidates", "cv_results", "split_rows"]

#: The stream of ``release_generator`` that samples ``param_distributions``
#: (streams 0 and 1 are the split/candidates' seeds and the selection).
_SAMPLING_STREAM = 2


def candidate_points(params: dict) -> list[dict]:
    """The candidates' hyper-parameters, from public parameters only.

    ``param_grid`` gives every point of the grid, in
    :class:`~sklearn.model_selection.ParameterGrid`'s order;
    ``param_distributions`` gives ``n_iter`` points drawn by
    :class:`~sklearn.model_selection.ParameterSampler` from a generator
    seeded by ``random_state`` (a public parameter: which candidates run
    depends on no data). With ``random_state=None`` each call draws new
    points, so a fit plans the budget with the points it then runs.
    """
    if params.get("param_distributions") is None:
        if params["param_grid"] is None:
            raise ValueError("give param_grid or param_distributions")
        return list(ParameterGrid(params["param_grid"]))
    if params["param_grid"] is not None:
        raise ValueError("give param_grid or param_distributions, not both")
    seed = int(release_generator(params["random_state"], _SAMPLING_STREAM).integers(2**31 - 1))
    sampler = ParameterSampler(params["param_distributions"], params["n_iter"], random_state=seed)
    with warnings.catch_warnings():
        # n_iter above the grid's size: scikit-learn advises GridSearchCV (not
        # private); the grid's points are what run, and the docstring says so
        warnings.filterwarnings("ignore", message="The total space of parameters")
        return list(sampler)


def candidates(params: dict, seeds: list, points: list | None = None) -> list:
    """One clone of ``params["estimator"]`` per candidate point (default: the
    grid's, or one draw from the distributions), seeded, without a budget."""
    points = candidate_points(params) if points is None else points
    made = []
    for seed, point in zip(seeds, points, strict=False):
        candidate = clone(params["estimator"]).set_params(**point)
        own = candidate.get_params(deep=False)
        if "random_state" in own:
            candidate.set_params(random_state=seed)
        if "budget" in own:
            # The search charges the whole search once; candidates must not.
            candidate.set_params(budget=None)
        made.append(candidate)
    return made


def cv_results(points: list[dict], fitted: list, scores: ArrayLike | None = None) -> dict:
    """``cv_results_``: what a search may publish about its candidates.

    ``params`` and ``param_<name>`` (masked where a point lacks the name)
    are public: they come from the parameters and the public random state.
    ``epsilon_spent`` is each candidate's privacy cost on the training part,
    composed from its ledger (public: the ledger is). ``scores``, a masked
    array of the validation scores a method *released* (each charged), adds
    ``mean_test_score`` and ``rank_test_score`` (ranked among the released
    ones; unreleased entries are masked); without it, as for a selection
    that releases only its winner, no score, rank or timing is published
    (fit times grow with the number of rows, which is private).
    """
    results = {
        "params": points,
        **{
            f"param_{key}": np.ma.MaskedArray(
                [p.get(key) for p in points], mask=[key not in p for p in points], dtype=object
            )
            for key in sorted({k for p in points for k in p})
        },
        "epsilon_spent": np.array([c.privacy_spent_.epsilon for c in fitted]),
    }
    if scores is not None:
        scores = np.ma.masked_invalid(np.ma.asarray(scores, dtype=float))
        order = np.argsort(-scores.filled(-np.inf), kind="stable")
        rank = np.empty(len(points), dtype=np.int32)
        rank[order] = np.arange(1, len(points) + 1)
        results["mean_test_score"] = scores
        results["rank_test_score"] = np.ma.MaskedArray(rank, mask=np.ma.getmaskarray(scores))
    return results


@dataclass(frozen=True)
class Split:
    """The two disjoint parts of the data: training and validation."""

    X_train: Any
    y_train: Any
    train_ids: np.ndarray
    X_val: Any
    y_val: np.ndarray
    validation_ids: np.ndarray
    full: tuple = ()  # (X, y, ids): every row, for a refit


def split_rows(
    X: ArrayLike,
    y: ArrayLike,
    sample_id: Any,
    rng: np.random.Generator,
    validation_fraction: float,
) -> "Split":
    """Read the data and assign each row to the training or the validation part."""
    X, y = indexable(X, y)
    n = len(y)
    if n < 2:
        raise ValueError(
            f"PrivateGridSearch needs at least 2 samples to split, got n_samples = {n}"
        )
    ids = np.arange(n) if sample_id.values is None else sample_id.values
    if len(ids) != n:
        raise ValueError(f"sample_id has {len(ids)} entries for {n} rows")
    to_validation = rng.random(n) < validation_fraction
    train = np.flatnonzero(~to_validation)
    validation = np.flatnonzero(to_validation)
    if len(train) == 0 or len(validation) == 0:
        raise ValueError(
            "the random split left one part empty; n_samples is too small for a search"
        )
    y_val = np.asarray(take(y, validation))
    if y_val.ndim == 2 and y_val.shape[1] == 1:
        # A column vector: compare row by row, not by broadcasting.
        y_val = y_val.reshape(-1)
    return Split(
        take(X, train),
        take(y, train),
        ids[train],
        take(X, validation),
        y_val,
        ids[validation],
        (X, y, ids),
    )


def fit_candidate(estimator: Any, X: Any, y: Any, sample_id: Any, split: "Split") -> Any:
    """Fit a candidate on a part of the data; a classifier is told the label
    set of all the rows (public, as any classifier's ``classes_``), so that a
    part that happens to lack a rare class still gives a model of every class."""
    fit = estimator.fit
    if is_classifier(estimator) and "classes" in inspect.signature(fit).parameters:
        y_all = np.asarray(split.full[1])
        labels = np.unique(y_all.reshape(-1) if y_all.ndim == 2 else y_all)
        if labels.dtype.kind == "f":
            # a NaN label in the validation part would otherwise become a class
            with config_context(assume_finite=False):
                assert_all_finite(labels, input_name="y")
        return fit(X, y, sample_id=sample_id, classes=labels)
    return fit(X, y, sample_id=sample_id)


def public_sizes(X: ArrayLike) -> PublicSizes:
    """The number of features, when ``X`` states its shape (never its values)."""
    shape = getattr(X, "shape", None)
    n_features = int(shape[1]) if isinstance(shape, tuple) and len(shape) == 2 else None
    return PublicSizes(n_features=n_features)


def retrain_cost(cost: Mapping[str, Any]) -> DeletionCost:
    """The inner model's retrain estimate as a :class:`DeletionCost`: its work
    counts, without wall-time estimates (no timing of a retrain is reported)."""
    names = {f.name for f in dataclasses.fields(DeletionCost)} - {"wall_time_s"}
    return DeletionCost(**{name: cost[name] for name in cost if name in names})


def take(data: Any, rows: np.ndarray) -> Any:
    """Rows ``rows`` of an array-like, a DataFrame or a list."""
    if hasattr(data, "iloc"):
        return data.iloc[rows]
    if isinstance(data, list):
        return [data[i] for i in rows]
    return np.asarray(data)[rows] if not hasattr(data, "shape") else data[rows]


def on_chunks(releases: list, first: int, last: int) -> list[Release]:
    """``releases`` recorded on the search's chunks ``first`` to ``last``
    (1: the training part, 2: the validation part)."""
    return [dataclasses.replace(r, chunks=(first, last)) for r in releases]
