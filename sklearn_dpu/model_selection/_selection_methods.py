"""PrivateGridSearch's random-run methods: ``repeat_and_select`` and ``threshold``.

Both split the data once, as ``split_select`` does (each row to the training
or the validation part, independently of the others), and repeat a *run*:
draw one of the search's candidate points uniformly at random (the grid, or
the ``n_iter`` points sampled publicly from ``param_distributions``), fit the
candidate privately on the training part, and
release its score on the validation part with Laplace noise (the run's score
is itself a charged DP release). The run's event is the composition of the
candidate's planned fit and the score, taken to an RDP-accountable form
(:func:`~sklearn_dpu.privacy.selection.rdp_accountable`); it must be the same
for every candidate point, which is checked before any data is read.

* ``repeat_and_select`` ([PS22]_): K runs, K drawn from ``distribution`` with
  mean ``expected_runs``; publish the run of best noisy score.
* ``threshold`` ([LT19]_ Alg. 1): run until a noisy score passes
  ``threshold``; after each failing run, stop with probability
  ``stop_probability`` and publish nothing (the fit then raises
  :class:`SelectionFailedError`; the budget stays charged: the data were used).

Scores use the search's ``scoring`` (:mod:`._scoring`): each row's score
``s`` lies in a public ``[l, h]``, so its cost ``h - s`` lies in ``[0, B]``
with ``B = h - l`` (1 for the zero-one loss, the squared target range for the
default regressor loss). Costs are normalised by ``B``, so every score has
sensitivity 1 (``repeat_and_select``: minus the summed normalised cost) or
``max(tau, 1 - tau)`` (``threshold``: the sum of ``1 - tau - cost / B``, which
is non-negative exactly when the mean normalised score ``(s - l) / B`` --
accuracy for a classifier -- reaches ``tau``; no row count is released).

With ``refit=True`` the chosen point is fitted again on all the rows: every
point costs the same (checked), so the refit's planned fit is known before
any data is read, and it is planned, charged and recorded on both parts.

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
from sklearn.utils.parallel import Parallel, delayed

from .._compat import Interval, StrOptions
from ..base import PublicSizes, planned_fit
from ..exceptions import SelectionFailedError
from ..privacy.accounting import epsilon_spent
from ..privacy.events import event_key
from ..privacy.ledger import Release, ReleasePlan
from ..privacy.mechanisms import LaplaceMechanism
from ..privacy.random import release_generator
from ..privacy.selection import DISTRIBUTIONS, RepeatAndSelect, ThresholdSelection, rdp_accountable
from ._search_results import candidates, cv_results, fit_candidate, on_chunks

__all__ = [
    "METHOD_CONSTRAINTS",
    "Runs",
    "SelectionFailedError",
    "first_run",
    "group_bound",
    "plan",
    "search",
]

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

#: The ``release_generator`` stream of the runs' draws (K, the points, the
#: seeds): its own, so that they are independent of the points sampled from
#: ``param_distributions`` (stream 2), the split (0), the selection (1) and
#: the refit's seed (3).
_RUNS_STREAM = 4


def _draw(points: list[dict], rng: np.random.Generator, count: int) -> list[int]:
    """Indices of ``count`` candidate points drawn uniformly."""
    return [int(i) for i in rng.integers(len(points), size=count)]


def _candidate(params: dict, point: dict, seed) -> object:
    """A run's estimator: seeded, without a budget, and silent (its progress
    lines would publish every run: their number and their own values)."""
    candidate = candidates(params, [seed], [point])[0]
    if "verbose" in candidate.get_params(deep=False):
        candidate.set_params(verbose=0)
    return candidate


def _score_mechanism(params: dict) -> LaplaceMechanism:
    """Laplace on a normalised score; sensitivity 1, or max(tau, 1 - tau)."""
    if params["method"] == "threshold":
        tau = params["threshold"]
        return LaplaceMechanism(max(tau, 1.0 - tau), params["selection_epsilon"])
    return LaplaceMechanism(1.0, params["selection_epsilon"])


def _run_event(params: dict, sizes: PublicSizes, points: list[dict]):
    """The one RDP-accountable event of a run, the same for every point, and
    the first point's planned fit (the refit's plan).

    Raises before any data is read when a point's fit cannot be planned,
    is known only as an (epsilon, delta) bound, is not RDP-accountable, or
    costs differently from the others.
    """
    method = params["method"]
    events, fit_plans = {}, []
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
        fit_plans.append(fit_plan)
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
    return next(iter(events.values())), fit_plans[0]


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


def _check_space(params: dict) -> None:
    """Refuse, before the data are read, what the methods cannot run."""
    if params.get("param_distributions") is not None and params["method"] == "threshold":
        # kept to the grid: its number of runs, hence which points run,
        # depends on the scores
        raise ValueError(
            "method='threshold' draws from param_grid only; use param_grid, or "
            "method='repeat_and_select' with param_distributions"
        )


def _release(params: dict, selection) -> Release:
    what = (
        "threshold selection of a privately fitted candidate by its noisy validation score"
        if params["method"] == "threshold"
        else "repeat-and-select of privately fitted candidates by their noisy validation score"
    )
    reference = _LT_REFERENCE if params["method"] == "threshold" else _RS_REFERENCE
    return Release.of(selection, what, (_TRAIN, _VALIDATION), reference)


def plan(params: dict, sizes: PublicSizes, points: list[dict]) -> ReleasePlan:
    """The search's ledger entries, from parameters alone: the selection (the
    same event whatever the data and the runs drawn) and, with ``refit``, the
    planned fit of any point (they all cost the same) on both parts."""
    _check_space(params)
    run_event, fit_plan = _run_event(params, sizes, points)
    releases = [_release(params, _selection(params, run_event))]
    if not params["refit"]:
        return ReleasePlan(releases, exact=True, restart=True)
    refit = on_chunks(fit_plan.releases, _TRAIN, _VALIDATION)
    return ReleasePlan([*releases, *refit], exact=fit_plan.exact, restart=True)


def _fit_and_cost(candidate, split, scorer, tau) -> tuple[Any, float]:
    """Fit a run's candidate and compute its exact (normalised) score: the
    data are read, no noise is drawn."""
    fit_candidate(candidate, split.X_train, split.y_train, split.train_ids, split)
    cost = scorer.cost(candidate, split.X_val, split.y_val)  # sum of per-row h - s
    bound = scorer.sensitivity(candidate)  # h - l: public, or released by the fit
    normalised = cost / bound if bound > 0 else 0.0  # a point interval: no information
    exact = (1.0 - tau) * len(split.y_val) - normalised if tau is not None else -normalised
    return candidate, exact


def _noised(exact: float, score_mechanism, rng_seed) -> float:
    return float(score_mechanism.release(exact, np.random.default_rng(rng_seed)))


def _fit_and_score(candidate, split, scorer, score_mechanism, tau, rng_seed):
    """One run: the fitted candidate and its noisy score."""
    model, exact = _fit_and_cost(candidate, split, scorer, tau)
    return model, _noised(exact, score_mechanism, rng_seed)


def _seeds(rng: np.random.Generator, count: int) -> list:
    """Each run's (fit, score) seeds."""
    return rng.integers(np.iinfo(np.int32).max, size=(count, 2)).tolist()


@dataclass(frozen=True)
class Runs:
    """A random-run search once the data are read, before any noise is drawn.

    :func:`first_run` makes it in the search's ``validate`` step: the split,
    the runs' generator (with the draws so far), ``K`` and its points and
    seeds for ``repeat_and_select`` (the first run's for ``threshold``), and
    the first run's fitted candidate and exact score. The search's plan is
    charged only after it is made, so data that the first run's candidate
    or the scoring refuses leave every budget as it was; every later step
    (the noise of a score, which decides what runs next, whether the rule
    stops and what is refitted) comes after the charge.
    """

    split: Any
    rng: np.random.Generator
    selection: Any
    drawn: list
    seeds: list
    first: tuple | None  # (fitted candidate, exact score); None when K = 0


def first_run(
    search_estimator: Any, split: Any, points: list[dict], scorer: Any, run_event: Any
) -> Runs:
    """The search's ``validate`` step for the random-run methods: the runs'
    first draws, the first run's fit and its exact score (see :class:`Runs`).
    ``run_event`` is the run's event of the plan."""
    params = search_estimator.get_params(deep=False)
    selection = _selection(params, run_event)
    rng = release_generator(params["random_state"], _RUNS_STREAM)
    if params["method"] == "threshold":
        n_runs, tau = 1, params["threshold"]
    else:
        # K = 0 is drawn before any row is read: a mechanism's outcome, the
        # same whatever the data, charged as the others (data that the
        # candidates would refuse included: none of them ran)
        n_runs, tau = selection.draw_runs(rng), None
        if n_runs == 0:
            return Runs(split, rng, selection, [], [], None)
    drawn, seeds = _draw(points, rng, n_runs), _seeds(rng, n_runs)
    first = _fit_and_cost(_run_candidate(params, points, drawn[0], seeds[0]), split, scorer, tau)
    return Runs(split, rng, selection, drawn, seeds, first)


def _run_candidate(params: dict, points: list[dict], index: int, seeds: list):
    fit_seed = seeds[0] if params["random_state"] is not None else None
    return _candidate(params, points[index], fit_seed)


def _score_seed(params: dict, seeds: list):
    return seeds[1] if params["random_state"] is not None else None


def search(
    search_estimator: Any, runs: Runs, sample_id: Any, points: list[dict], scorer: Any
) -> list[Release]:
    """Finish the method from ``runs`` (:func:`first_run`); set the search's
    fitted attributes. Returns the exact releases (the plan's entries)."""
    params = search_estimator.get_params(deep=False)
    selection, rng, split = runs.selection, runs.rng, runs.split
    score = _score_mechanism(params)
    if params["method"] == "threshold":
        tau, chosen = params["threshold"], None
        (index,), (seeds,), (model, exact) = runs.drawn, runs.seeds, runs.first
        while True:
            if _noised(exact, score, _score_seed(params, seeds)) >= 0.0:
                chosen = (index, model)
                break
            if selection.stops(rng):
                raise SelectionFailedError(
                    "threshold: the random stopping rule ended the search before a "
                    f"candidate's noisy score reached threshold={tau}. Lower the threshold "
                    "to make a stop less likely (a lower stop_probability lets more runs "
                    "try, but costs more epsilon per search)"
                )
            (index,), (seeds,) = _draw(points, rng, 1), _seeds(rng, 1)
            candidate = _run_candidate(params, points, index, seeds)
            model, exact = _fit_and_cost(candidate, split, scorer, tau)
    else:
        if runs.first is None:
            # K = 0: an outcome of the mechanism, charged like the others
            raise SelectionFailedError(
                "repeat_and_select: the Poisson number of runs was 0, no candidate ran "
                "(raise expected_runs)"
            )
        model, exact = runs.first
        done = [(model, _noised(exact, score, _score_seed(params, runs.seeds[0])))]
        done += Parallel(n_jobs=params["n_jobs"])(
            delayed(_fit_and_score)(
                _run_candidate(params, points, i, s),
                split,
                scorer,
                score,
                None,
                _score_seed(params, s),
            )
            for i, s in zip(runs.drawn[1:], runs.seeds[1:], strict=True)
        )
        best = int(np.argmax([noisy for _, noisy in done]))
        chosen = (runs.drawn[best], done[best][0])
        # K and the points drawn are not published: the bound holds for the
        # best run with K hidden (Papernot & Steinke 2022, Thm 2/6)
    made = [_release(params, selection)]
    _publish(search_estimator, params, points, chosen, split, sample_id)
    if params["refit"]:
        made.extend(_refit(search_estimator, params, points[chosen[0]], split))
    return made


def _refit(est, params: dict, point: dict, split: Any) -> list[Release]:
    """Fit ``point`` again on all the rows, both parts; return its releases."""
    from ._split_select import _REFIT_STREAM

    seed = None
    if params["random_state"] is not None:
        seed = int(release_generator(params["random_state"], _REFIT_STREAM).integers(2**31 - 1))
    X, y, ids = split.full
    model = fit_candidate(_candidate(params, point, seed), X, y, ids, split)
    if "budget" in model.get_params(deep=False):
        model.set_params(budget=est._inner_budget())
    est.best_estimator_ = model
    est._validation_ids = set()  # every row is in the refit model
    est._model_chunks = (_TRAIN, _VALIDATION)
    return on_chunks([Release.from_dict(e) for e in model.privacy_ledger_], _TRAIN, _VALIDATION)


def _publish(est, params, points, chosen, split, sample_id) -> None:
    index, model = chosen
    # every point's fit costs what the chosen one's did (checked before the data)
    est.cv_results_ = cv_results(points, [model] * len(points))
    est.best_index_ = index
    est.best_params_ = points[index]
    est.best_estimator_ = model
    if "budget" in model.get_params(deep=False):
        model.set_params(budget=est._inner_budget())
    est.n_candidates_ = len(points)
    est.n_deleted_ = 0
    est._n_fit_releases = 1
    est._validation_ids = set(split.validation_ids.tolist())
    est._model_chunks = (_TRAIN, _TRAIN)
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
