"""Ledger releases and deletion reports of the unlearnable SGD classifier.

Every function here is a function of public quantities only: the frozen
parameters (:class:`~sklearn_dpu.linear_model._sgd_plan.SGDParams`), a
:class:`~sklearn_dpu.linear_model._sgd_plan.SGDSchedule` and counts of steps.
Every event is read from the mechanism object that draws the noise
(:class:`~sklearn_dpu.privacy.mechanisms.GaussianCount`,
:class:`~sklearn_dpu.privacy.mechanisms.GaussianSteps`). They build

* :func:`count_release`: the noised record count of a fit;
* :func:`run_release`: a complete run (a fit, or a refit during an edit);
* :func:`fit_ledger`: the ledger entries of a fit (count, unless the schedule
  is public, and run);
* :func:`edit_release`: a coupled edit that tested or recomputed steps;
* :func:`deletion_outcome`: what a ``delete_samples`` call did, for its
  :class:`~sklearn_dpu.unlearning.report.DeletionReport`.

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024,
   Ch. 4 and App. C (Alg. 9/10, 21/22; Lemma 29; Claims 5/6).
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
   differential privacy: analytical calibration and optimal denoising", ICML
   2018, Theorem 8.
.. [BBG18] B. Balle, G. Barthe and M. Gaboardi, "Privacy amplification by
   subsampling: tight analyses via couplings and divergences", NeurIPS 2018,
   Theorem 2.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from dp_accounting import dp_event

from ..privacy.ledger import ApproximateDPBound, Release, ReleasePlan
from ..privacy.mechanisms import GaussianCount, GaussianSteps
from ..unlearning.report import DeletionCost, DeletionOutcome
from . import _auto_bounds as auto_bounds
from ._dp_logistic import _LABEL_SET_NOTE
from ._sgd_plan import (
    BOUND_EPSILON_SHARE,
    COUNT_DELTA_SHARE,
    COUNT_EPSILON_SHARE,
    SGDParams,
    SGDSchedule,
    check_sampling,
    count_multiplier,
    run_params,
    run_steps,
    schedule_run,
    schedule_target,
    worst_case_run_epsilon,
)

__all__ = [
    "count_mechanism",
    "count_release",
    "deletion_outcome",
    "edit_release",
    "fit_ledger",
    "fit_release_plan",
    "planned_fit",
    "run_release",
]

THESIS = (
    'M. E. Ullah, "Statistical learning via stochastic optimization under data '
    'privacy considerations", PhD thesis, Johns Hopkins University, 2024'
)
REFERENCE_RUN = (
    f"{THESIS}, Alg. 21/22 and Alg. 9/10 (errata: new-over-old acceptance ratio, "
    "reflection g + g' - nu, stored noisy gradient); per step a Poisson-subsampled "
    "Gaussian mechanism, add/remove relation, PLD accountant"
)
REFERENCE_FIXED = (
    f"{THESIS}, Alg. 21 with uniform m-subsets, as printed; not accounted: a step "
    "would be dominated by a Poisson-subsampled Gaussian at rate m/n with half the "
    "multiplier (advanced joint convexity, Balle, Barthe & Gaboardi 2018, Thm 2, with "
    "the coupling of the thesis's Claims 5/6), but n is private"
)
REFERENCE_COUNT = (
    "Gaussian mechanism on the record count (sensitivity 1, add/remove); analytic "
    "calibration, Balle & Wang 2018, Theorem 8"
)
REFERENCE_EDIT = (
    "split-noise coupling: every version of a step reveals about a record it "
    "shares at most a Gaussian of multiplier z * sqrt(1 - coupling_share) "
    "(see the class docstring, Notes); fresh recomputed steps as in fit"
)


def count_mechanism(params: SGDParams) -> GaussianCount:
    """The noised record count of a fit ([BW18]_); exact when epsilon is inf."""
    return GaussianCount(count_multiplier(params.epsilon, params.delta))


def _steps_events(mechanism: GaussianSteps) -> list:
    """The events of ``mechanism.steps`` steps: none, one step's, or their
    self-composition (the form the ledger has always recorded)."""
    if mechanism.steps <= 0:
        return []
    return [mechanism.step_event if mechanism.steps == 1 else mechanism.dp_event]


def run_release(params: SGDParams, plan: SGDSchedule, chunks: tuple, what: str) -> Release:
    """The release of a complete run (``what``: fit, or a refit during an edit).

    Poisson batches: ``T`` self-composed Poisson-subsampled Gaussian steps
    ([U24]_ Alg. 21/22). Fixed batches: not accounted, since their inclusion
    rate ``m / n`` depends on the exact (private) ``n`` ([BBG18]_).
    """
    T, solver = plan.n_steps, params.solver
    schedule = params.schedule_size
    source = (
        "the noised count"
        if schedule is None
        else f"the public schedule_size={int(schedule)} (no count is released)"
    )
    if params.batch_sampling == "poisson":
        return Release.of(
            run_steps(T, plan.inclusion, plan.noise),
            f"{what}: noisy mini-batch SGD ({solver}), {T} steps, each a Poisson-"
            f"subsampled Gaussian (rate {plan.inclusion:.4g}, multiplier "
            f"{plan.noise:.4g}); the schedule comes from {source}",
            chunks,
            REFERENCE_RUN,
        )
    # Uniform batches of m rows have inclusion rate m / n, a function of the
    # exact (private) n, which neither the noised count nor schedule_size
    # bounds: the run is not accounted (fixed batches need epsilon=np.inf).
    return Release(
        f"{what}: noisy mini-batch SGD ({solver}), fixed batches of "
        f"{int(plan.batch_size)}, {T} steps: not accounted (the inclusion rate "
        "m / n depends on the exact number of rows)",
        dp_event.NonPrivateDpEvent(),
        chunks,
        REFERENCE_FIXED,
    )


def count_release(params: SGDParams) -> Release:
    """The release of the noised record count ([BW18]_), exact when epsilon is inf."""
    count = count_mechanism(params)
    if count.noise_multiplier == 0:
        what = "exact record count (epsilon=inf was asked for: not private)"
    else:
        what = (
            f"noised record count n + N(0, {count.noise_multiplier:.4g}^2) (share "
            f"{COUNT_EPSILON_SHARE} of epsilon, {COUNT_DELTA_SHARE} of delta); it sets "
            "the size class"
        )
    return Release.of(count, what, (1, 1), REFERENCE_COUNT)


def fit_ledger(params: SGDParams, plan: SGDSchedule) -> list[Release]:
    """The ledger entries of a fit: the noised count (unless the schedule is
    public) and the run."""
    count = [] if params.schedule_size is not None else [count_release(params)]
    return [*count, run_release(params, plan, (1, 1), "fit")]


def fit_release_plan(params: SGDParams, n_features: int | None) -> ReleasePlan:
    """What one fit adds to the ledger, from the parameters (and the public
    number of features, if known) alone; the ledger is replaced.

    With ``schedule_size`` and an integer ``max_iter`` (or a known number of
    features): the run's exact release (its steps, sampling rate and noise
    are functions of the parameters; no count is released). Otherwise the
    noised count's release (its event is known: the count's noise depends on
    ``epsilon`` and ``delta`` only) and an
    :class:`~sklearn_dpu.privacy.ledger.ApproximateDPBound` for the run, whose
    steps and sampling rate come from the noised count: it is calibrated to
    the run's share of the target (or, with an explicit ``noise_multiplier``,
    bounded over every count; ``inf`` when that is impossible). Either way
    the plan is inexact: the fit reports its releases once it has drawn them.
    Raises ValueError for fixed batches with a privacy target.
    """
    check_sampling(params)
    schedule = params.schedule_size
    if schedule is not None and (params.max_iter != "auto" or n_features is not None):
        run = schedule_run(params, float(schedule), n_features)
        return ReleasePlan(fit_ledger(params, run), exact=False, restart=True)
    eps_run, delta_run = schedule_target(params)
    if params.noise_multiplier is not None:
        eps_run = worst_case_run_epsilon(params, delta_run)
    count = [] if schedule is not None else [count_release(params)]
    bound = ApproximateDPBound(eps_run, delta_run, "noisy mini-batch SGD run")
    return ReleasePlan(count, bounds=[bound], exact=False, restart=True)


def planned_fit(params: Mapping[str, Any], n_features: int | None) -> ReleasePlan:
    """:func:`fit_release_plan` of the estimator's parameters, with
    ``feature_norm='auto'`` the bound's release first (its epsilon is
    ``BOUND_EPSILON_SHARE * epsilon``; the count and the run are planned for
    the rest, :func:`~sklearn_dpu.linear_model._sgd_plan.run_params`).

    With ``schedule_size`` and an integer ``max_iter``: the run's exact
    release. Otherwise the noised count's release and an
    :class:`~sklearn_dpu.privacy.ledger.ApproximateDPBound` for the run,
    whose steps and sampling rate come from the noised count. With
    ``schedule_size`` and ``max_iter="auto"`` the steps depend on the number
    of features, unknown to ``_fit_release_plan``: the run is then a bound at
    the whole ``(epsilon, delta)`` it is calibrated to. Two such bounds
    exceed any budget's delta: plan searches with ``schedule_size`` and an
    integer ``max_iter``.
    """
    plan = fit_release_plan(run_params(params, None), n_features)
    bounds = auto_bounds.planned_bounds(params, BOUND_EPSILON_SHARE)
    return dataclasses.replace(plan, releases=(*bounds, *plan.releases))


def edit_release(
    sampling: str, plan: SGDSchedule, tested: int, fresh: int, chunks: tuple
) -> Release:
    """The release of a coupled edit: ``tested`` steps tested for the first
    time (each reveals a Gaussian of the reserve multiplier) and ``fresh``
    steps recomputed afresh (as in fit). Fixed batches: not accounted."""
    if sampling == "fixed":
        return Release(
            "edit with fixed batches: a replacement row enters the acceptance test; not accounted",
            dp_event.NonPrivateDpEvent(),
            chunks,
            REFERENCE_FIXED,
        )
    events = [
        *_steps_events(run_steps(tested, plan.inclusion, plan.reserve)),
        *_steps_events(run_steps(fresh, plan.inclusion, plan.noise)),
    ]
    return Release(
        f"edit: {tested} step(s) tested for the first time (reserve multiplier "
        f"{plan.reserve:.4g}), {fresh} step(s) recomputed afresh",
        dp_event.ComposedDpEvent(events),
        chunks,
        REFERENCE_EDIT,
    )


def deletion_outcome(
    *,
    refit: bool,
    tested_steps: int,
    recomputed_steps: int,
    releases: tuple,
    n_steps: int,
    batch_size: float,
) -> DeletionOutcome:
    """What one ``delete_samples`` call did, from public counts only.

    ``refit``: the noised size left its size class; ``releases``: what the
    edit added to the ledger (its epsilon is the report's
    ``rerelease_epsilon``).
    """
    if refit:
        reason = (
            "the noised training-set size left its size class (factor 2**(1/8)), "
            "which sets the sampling rate: full refit"
        )
    elif recomputed_steps:
        reason = "verified the steps that used the rows; recomputed from the first rejected step"
    elif releases:
        reason = (
            "every step that used the rows passed its coupling test: the model is "
            "unchanged, but testing steps against their reserve is a release "
            "(charged to the ledger: rerelease_epsilon)"
        )
    else:
        reason = (
            "every step that used the rows passed its coupling test, and every "
            "tested step had been tested before: nothing new was released"
        )
    return DeletionOutcome(
        guarantee=(
            "the model, iterates, noisy gradients, mini-batch indices and noised "
            "count have the law of a fit on the remaining samples (coupling, "
            "Ullah 2024, Lemma 29); their rows and ids are gone. Testing a step "
            "against its reserve releases something even when the model is "
            "unchanged: rerelease_epsilon is what this call added to the ledger"
        ),
        cost=DeletionCost(tested_steps=tested_steps, recomputed_steps=recomputed_steps),
        retrain_cost=DeletionCost(
            recomputed_steps=n_steps, expected_gradient_evaluations=n_steps * batch_size
        ),
        releases=tuple(releases),
        reason=reason,
        notes=(_LABEL_SET_NOTE,),
    )
