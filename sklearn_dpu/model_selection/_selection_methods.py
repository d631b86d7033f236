"""PrivateGridSearch's random-run methods: ``repeat_and_select`` and ``threshold``.

Both split the data once, as ``split_select`` does (each row to the training
or the validation part, independently of the others), and repeat a *run*:
draw a grid point uniformly at random (or from ``param_distributions``, when
the search has one), fit the candidate privately on the training part, and
release its score on the validation part with Laplace noise (the run's score
is itself a charged DP release). The run's event is the composition of the
candidate's planned fit and the score, taken to an RDP-accountable form
(:func:`~sklearn_dpu.privacy.selection.rdp_accountable`); it must be the same
for every grid point, which is checked before any data is read.

* ``repeat_and_select`` ([PS22]_): K runs, K drawn from ``distribution`` with
  mean ``expected_runs``; publish the run of best noisy score.
* ``threshold`` ([LT19]_ Alg. 1): run until a noisy score passes
  ``threshold``; after each failing run, stop with probability
  ``stop_probability`` and publish nothing (the fit then raises
  :class:`SelectionFailedError`; the budget stays charged: the data were used).

Scores are normalised by each candidate's public loss bound ``B`` (1 for the
zero-one loss, the squared target range for a regressor), so every score has
sensitivity 1 (``repeat_and_select``: minus the summed normalised loss) or
``max(tau, 1 - tau)`` (``threshold``: the sum of ``1 - tau - loss / B``, which
is non-negative exactly when the mean normalised utility -- accuracy for a
classifier -- reaches ``tau``; no row count is needed, so none is released).

References
----------
.. [PS22] N. Papernot and T. Steinke, "Hyperparameter tuning with Renyi
   differential privacy", ICLR 2022, Theorems 2 and 6.
.. [LT19] J. Liu and K. Talwar, "Private selection from private candidates",
   STOC 2019, Algorithm 1, Theorem 3.1.
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of differential
   privacy", 2014, Theorem 2.2 and its (epsilon, delta) form (group privacy).
"""

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid, ParameterSampler
from sklearn.utils.parallel import Parallel, delayed

from .._compat import Interval, StrOptions
from ..base import PublicSizes, planned_fit
from ..privacy.accounting import epsilon_spent
from ..privacy.events import event_key
from ..privacy.ledger import Release, ReleasePlan
from ..privacy.mechanisms import LaplaceMechanism
from ..privacy.random import release_generator
from ..privacy.selection import DISTRIBUTIONS, RepeatAndSelect, ThresholdSelection, rdp_accountable

__all__ = ["METHOD_CONSTRAINTS", "SelectionFailedError", "group_bound", "plan", "search"]

_TRAIN, _VALIDATION = 1, 2
_RS_REFERENCE = (
    "Papernot & Steinke, 'Hyperparameter tuning with Renyi differential privacy' (ICLR "
    "2022), Thm 2 (truncated negative binomial, logarithmic) / Thm 6 (Poisson); each run "
    "a private fit and a Laplace score (Dwork & Roth 2014, Thm 3.6)"
)
_LT_REFERENCE = (
    "Liu & Talwar, 'Private selection from private candidates' (STOC 2019), Alg. 1 / "
    "Thm 3.1, accounted as repeat-and-select with a geometric number of runs (Papernot & "
    "Steinke, ICLR 2022, Thm 2 with eta = 1)"
)

METHOD_CONSTRAINTS: dict = {
    "method": [StrOptions({"split_select", "repeat_and_select", "threshold"})],
    "distribution": [StrOptions(set(DISTRIBUTIONS))],
    "expected_runs": [Interval(Real, 1, None, closed="neither")],
    "eta": [Interval(Real, 0, None, closed="neither")],
    "threshold": [Interval(Real, 0, 1, closed="neither")],
    "stop_probability": [Interval(Real, 0, 1, closed="neither")],
}


class SelectionFailedError(ValueError):
    """The threshold rule stopped before any score passed (or K was 0): no
    model is published. The budgets stay charged for the runs made."""


def _points(params: dict, rng: np.random.Generator, count: int) -> list[dict]:
    """``count`` grid points drawn uniformly (or from ``param_distributions``)."""
    distributions = params.get("param_distributions")
    if distributions is not None:
        seed = int(rng.integers(np.iinfo(np.int32).max))
        return list(ParameterSampler(distributions, count, random_state=seed))
    grid = ParameterGrid(params["param_grid"])
    return [grid[int(i)] for i in rng.integers(len(grid), size=count)]


def _candidate(params: dict, point: dict, seed) -> object:
    candidate = clone(params["estimator"]).set_params(**point)
    own = candidate.get_params(deep=False)
    if "random_state" in own:
        candidate.set_params(random_state=seed)
    if "budget" in own:
        candidate.set_params(budget=None)  # the search charges once
    return candidate


def _score_mechanism(params: dict) -> LaplaceMechanism:
    """Laplace on a normalised score; sensitivity 1, or max(tau, 1 - tau)."""
    if params["method"] == "threshold":
        tau = params["threshold"]
        return LaplaceMechanism(max(tau, 1.0 - tau), params["selection_epsilon"])
    return LaplaceMechanism(1.0, params["selection_epsilon"])


def _run_event(params: dict, sizes: PublicSizes, points: list[dict]):
    """The one RDP-accountable event of a run, the same for every point.

    Raises before any data is read when a point's fit cannot be planned,
    is known only as an (epsilon, delta) bound, is not RDP-accountable, or
    costs differently from the others.
    """
    method = params["method"]
    events = {}
    for point in points:
        candidate = _candidate(params, point, None)
        try:
            fit_plan = planned_fit(candidate, sizes)
        except NotImplementedError as err:
            raise TypeError(f"method={method!r} cannot plan {candidate!r}: {err}") from err
        if fit_plan.bounds:
            raise ValueError(
                f"method={method!r} needs every candidate's fit as exact dp_accounting "
                f"events before the data are read; {type(candidate).__name__} plans an "
                "(epsilon, delta) bound only (give UnlearnableSGDClassifier a public "
                "schedule_size and an integer max_iter), or use method='split_select'"
            )
        fit_events = [r.event for r in fit_plan.releases]
        run = Release.of(
            [*_EventHolder.each(fit_events), _score_mechanism(params)], "", (1, 1), ""
        ).event
        try:
            converted = rdp_accountable(run)
            events[event_key(converted)] = converted
        except ValueError as err:
            raise ValueError(f"method={method!r}: {err}; use method='split_select'") from err
    if len(events) != 1:
        raise ValueError(
            f"method={method!r} draws candidates at random, so every candidate must cost "
            f"the same privacy (same epsilon, delta and solver); the grid has {len(events)} "
            "different costs: tune them outside the search, or use method='split_select'"
        )
    return next(iter(events.values()))


def _check_same_cost(params: dict, points: list[dict], run_event) -> None:
    if event_key(_run_event(params, PublicSizes(n_features=None), points)) != event_key(run_event):
        raise ValueError(
            f"method={params['method']!r}: a point drawn from param_distributions costs "
            "differently from the planned run; keep privacy parameters out of the "
            "distributions"
        )


@dataclass(frozen=True)
class _EventHolder:
    """A planned event held as a mechanism-like object (for :meth:`Release.of`)."""

    dp_event: object

    @classmethod
    def each(cls, events) -> list:
        return [cls(e) for e in events]


def _selection(params: dict, run_event):
    if params["method"] == "threshold":
        return ThresholdSelection(run_event, params["stop_probability"])
    return RepeatAndSelect(
        run_event, params["expected_runs"], params["distribution"], params["eta"]
    )


def _space(params: dict) -> list[dict]:
    """The points whose costs are checked before the data are read: the grid,
    or a public sample of ``param_distributions`` (each run's own point is
    checked again before any candidate is fitted, see :func:`search`)."""
    if params.get("param_distributions") is not None:
        if params["method"] == "threshold":
            # its number of runs depends on the scores: a point found to cost
            # differently mid-search would make the error itself a release
            raise ValueError(
                "method='threshold' draws from param_grid only (every point's cost "
                "must be checked before the data are read)"
            )
        return list(ParameterSampler(params["param_distributions"], 20, random_state=0))
    return list(ParameterGrid(params["param_grid"]))


def _release(params: dict, selection) -> Release:
    what = (
        "threshold selection of a privately fitted candidate by its noisy validation score"
        if params["method"] == "threshold"
        else "repeat-and-select of privately fitted candidates by their noisy validation score"
    )
    reference = _LT_REFERENCE if params["method"] == "threshold" else _RS_REFERENCE
    return Release.of(selection, what, (_TRAIN, _VALIDATION), reference)


def plan(params: dict, sizes: PublicSizes) -> ReleasePlan:
    """The search's one ledger entry, from parameters alone (exact: the same
    event whatever the data and the runs drawn)."""
    selection = _selection(params, _run_event(params, sizes, _space(params)))
    return ReleasePlan([_release(params, selection)], exact=True, restart=True)


def _fit_and_score(candidate, split, score_mechanism, tau, rng_seed):
    from ._private_search import _loss_bound

    candidate.fit(split.X_train, split.y_train, sample_id=split.train_ids)
    _, bound, interval = _loss_bound(candidate)
    prediction = candidate.predict(split.X_val)
    if interval is None:
        losses = (prediction != split.y_val).astype(float)
    else:
        low, high = interval
        target = np.clip(split.y_val.astype(float), low, high)
        losses = (np.clip(prediction, low, high) - target) ** 2
    normalised = losses / bound if bound > 0 else np.zeros_like(losses)  # a point interval
    exact = float(np.sum(1.0 - tau - normalised)) if tau is not None else -float(normalised.sum())
    noisy = float(score_mechanism.release(exact, np.random.default_rng(rng_seed)))
    return candidate, noisy


def search(search_estimator: Any, split: Any, sample_id: Any) -> list[Release]:
    """Run the method on ``split``; set the search's fitted attributes.

    Returns the exact releases (the plan's one entry).
    """
    params = search_estimator.get_params(deep=False)
    sizes = PublicSizes(n_features=None)
    selection = _selection(params, _run_event(params, sizes, _space(params)))
    rng = release_generator(params["random_state"], 2)
    score = _score_mechanism(params)
    seeded = params["random_state"] is not None

    def seeds(count):
        return rng.integers(np.iinfo(np.int32).max, size=(count, 2)).tolist()

    if params["method"] == "threshold":
        tau, chosen = params["threshold"], None
        while chosen is None:
            (point,), ((fit_seed, score_seed),) = _points(params, rng, 1), seeds(1)
            model, noisy = _fit_and_score(
                _candidate(params, point, fit_seed if seeded else None),
                split,
                score,
                tau,
                score_seed if seeded else None,
            )
            if noisy >= 0.0:
                chosen = (point, model)
            elif selection.stops(rng):
                raise SelectionFailedError(
                    "threshold: the random stopping rule ended the search before a "
                    f"candidate's noisy score reached threshold={tau}; the budget was "
                    "charged for the runs (lower the threshold or the stop_probability)"
                )
        runs = None  # data-dependent: not published
    else:
        n_runs = selection.draw_runs(rng)
        if n_runs == 0:
            raise SelectionFailedError(
                "repeat_and_select: the Poisson number of runs was 0, no candidate ran; the "
                "budget was charged (raise expected_runs)"
            )
        points, run_seeds = _points(params, rng, n_runs), seeds(n_runs)
        if params.get("param_distributions") is not None:
            # drawn independently of the data, checked before any fit: refusing
            # here releases nothing
            _check_same_cost(params, points, selection.run_event)
        done = Parallel(n_jobs=params["n_jobs"])(
            delayed(_fit_and_score)(
                _candidate(params, p, s[0] if seeded else None),
                split,
                score,
                None,
                s[1] if seeded else None,
            )
            for p, s in zip(points, run_seeds, strict=True)
        )
        best = int(np.argmax([noisy for _, noisy in done]))
        chosen = (points[best], done[best][0])
        runs = points  # drawn before and independently of the data: public
    _publish(search_estimator, params, chosen, runs, split, sample_id)
    return [_release(params, selection)]


def _publish(est, params, chosen, runs, split, sample_id) -> None:
    point, model = chosen
    grid = (
        list(ParameterGrid(params["param_grid"]))
        if params.get("param_distributions") is None
        else [point]
    )
    index = grid.index(point) if point in grid else 0
    keys = sorted({k for p in grid for k in p})
    est.cv_results_ = {
        "params": grid,
        **{
            f"param_{key}": np.ma.MaskedArray(
                [p.get(key) for p in grid], mask=[key not in p for p in grid], dtype=object
            )
            for key in keys
        },
    }
    if runs is not None:
        est.cv_results_["n_runs"] = np.array([sum(r == p for r in runs) for p in grid])
    est.best_index_ = index
    est.best_params_ = point
    est.best_estimator_ = model
    if "budget" in model.get_params(deep=False):
        model.set_params(budget=est._inner_budget())
    est.n_candidates_ = len(grid)
    est.n_deleted_ = 0
    est._n_fit_releases = 1
    est._validation_ids = set(split.validation_ids.tolist())
    est._sample_id_kind = sample_id.kind
    est.deletion_log_ = []
    if hasattr(model, "feature_names_in_"):
        est.feature_names_in_ = model.feature_names_in_


def group_bound(events: list, group: int, delta: float) -> tuple[float, float]:
    """(epsilon, delta) of an (eps, delta)-DP selection seen by ``group`` records.

    Group privacy for approximate DP ([DR14]_ Thm 2.2 and its standard
    (epsilon, delta) form): an (eps, delta)-DP mechanism is ``(k eps, k
    exp((k - 1) eps) delta)``-DP for groups of ``k``; eps is the selection's
    at ``delta``. The bound may be vacuous for large groups (delta above 1).
    """
    epsilon = epsilon_spent(events, delta)
    k = int(group)
    group_delta = k * math.exp(min((k - 1) * epsilon, 700.0)) * delta
    return k * epsilon, group_delta
