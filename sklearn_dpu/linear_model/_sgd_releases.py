"""Ledger releases and deletion reports of the unlearnable SGD classifier.

Every function here is a function of public quantities only: the frozen
parameters, a :class:`~sklearn_dpu.linear_model._sgd_plan.RunPlan` and
counts of steps. They build

* :func:`count_release`: the noised record count of a fit;
* :func:`run_release`: a complete run (a fit, or a refit during an edit);
* :func:`fit_ledger`: the ledger entries of a fit (count, unless the schedule
  is public, and run);
* :func:`edit_release`: a coupled edit that tested or recomputed steps;
* :func:`deletion_report`: the :class:`~sklearn_dpu.unlearning.report.DeletionReport`
  of a ``delete_samples`` call.

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

from dp_accounting import dp_event

from ..privacy.ledger import Release
from ..unlearning.report import DeletionReport
from ._dp_logistic import _LABEL_SET_NOTE
from ._sgd_plan import COUNT_DELTA_SHARE, COUNT_EPSILON_SHARE, RunPlan, count_multiplier

__all__ = [
    "count_release",
    "deletion_report",
    "edit_release",
    "fit_ledger",
    "run_release",
    "step_event",
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


def step_event(rate: float, multiplier: float) -> dp_event.DpEvent:
    """One step: a Poisson-subsampled Gaussian at ``rate`` (no noise: not private)."""
    if multiplier <= 0:
        return dp_event.NonPrivateDpEvent()
    return dp_event.PoissonSampledDpEvent(rate, dp_event.GaussianDpEvent(float(multiplier)))


def _repeat(event: dp_event.DpEvent, count: int) -> list:
    if count <= 0:
        return []
    return [event if count == 1 else dp_event.SelfComposedDpEvent(event, int(count))]


def run_release(params: dict, plan: RunPlan, chunks: tuple, what: str) -> Release:
    """The release of a complete run (``what``: fit, or a refit during an edit).

    Poisson batches: ``T`` self-composed Poisson-subsampled Gaussian steps
    ([U24]_ Alg. 21/22). Fixed batches: not accounted, since their inclusion
    rate ``m / n`` depends on the exact (private) ``n`` ([BBG18]_).
    """
    T, solver = plan.n_steps, params["solver"]
    schedule = params.get("schedule_size")
    source = (
        "the noised count"
        if schedule is None
        else f"the public schedule_size={int(schedule)} (no count is released)"
    )
    if params["batch_sampling"] == "poisson":
        return Release(
            f"{what}: noisy mini-batch SGD ({solver}), {T} steps, each a Poisson-"
            f"subsampled Gaussian (rate {plan.inclusion:.4g}, multiplier "
            f"{plan.noise:.4g}); the schedule comes from {source}",
            dp_event.SelfComposedDpEvent(step_event(plan.inclusion, plan.noise), T),
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


def count_release(params: dict) -> Release:
    """The release of the noised record count ([BW18]_), exact when epsilon is inf."""
    sigma = count_multiplier(params["epsilon"], params["delta"])
    if sigma == 0:
        return Release(
            "exact record count (epsilon=inf was asked for: not private)",
            dp_event.NonPrivateDpEvent(),
            (1, 1),
            REFERENCE_COUNT,
        )
    return Release(
        f"noised record count n + N(0, {sigma:.4g}^2) (share {COUNT_EPSILON_SHARE} of "
        f"epsilon, {COUNT_DELTA_SHARE} of delta); it sets the size class",
        dp_event.GaussianDpEvent(float(sigma)),
        (1, 1),
        REFERENCE_COUNT,
    )


def fit_ledger(params: dict, plan: RunPlan) -> list[dict]:
    """The ledger entries of a fit: the noised count (unless the schedule is
    public) and the run."""
    public = params.get("schedule_size") is not None
    count = [] if public else [count_release(params).to_dict()]
    return [*count, run_release(params, plan, (1, 1), "fit").to_dict()]


def edit_release(sampling: str, plan: RunPlan, tested: int, fresh: int, chunks: tuple) -> Release:
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
        *_repeat(step_event(plan.inclusion, plan.reserve), tested),
        *_repeat(step_event(plan.inclusion, plan.noise), fresh),
    ]
    return Release(
        f"edit: {tested} step(s) tested for the first time (reserve multiplier "
        f"{plan.reserve:.4g}), {fresh} step(s) recomputed afresh",
        dp_event.ComposedDpEvent(events),
        chunks,
        REFERENCE_EDIT,
    )


def deletion_report(
    *,
    n_deleted: int,
    refit: bool,
    tested_steps: int,
    recomputed_steps: int,
    released: bool,
    rerelease_epsilon: float | None,
    n_steps: int,
    batch_size: float,
) -> DeletionReport:
    """The report of one ``delete_samples`` call, from public counts only.

    ``refit``: the noised size left its size class; ``released``: the edit
    added an entry to the ledger (whose epsilon is ``rerelease_epsilon``).
    """
    if refit:
        reason = (
            "the noised training-set size left its size class (factor 2**(1/8)), "
            "which sets the sampling rate: full refit"
        )
    elif recomputed_steps:
        reason = "verified the steps that used the rows; recomputed from the first rejected step"
    elif released:
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
    return DeletionReport(
        n_deleted=n_deleted,
        method="exact",
        guarantee=(
            "the model, iterates, noisy gradients, mini-batch indices and noised "
            "count have the law of a fit on the remaining samples (coupling, "
            "Ullah 2024, Lemma 29); their rows and ids are gone. Testing a step "
            "against its reserve releases something even when the model is "
            "unchanged: rerelease_epsilon is what this call added to the ledger"
        ),
        cost={"tested_steps": tested_steps, "recomputed_steps": recomputed_steps},
        retrain_cost={
            "recomputed_steps": n_steps,
            "expected_gradient_evaluations": n_steps * batch_size,
        },
        rerelease_epsilon=rerelease_epsilon,
        reason=reason,
        notes=(_LABEL_SET_NOTE,),
    )
