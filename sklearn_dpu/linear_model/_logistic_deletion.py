"""Deletion in :class:`~sklearn_dpu.linear_model.DPLogisticRegression`: the
unlearning state, and the plan, re-releases and report, as functions of
explicit values.

The plan reads public quantities only (parameters, released counts, the
number of deleted samples per chunk); the re-releases run the recipes of
:mod:`sklearn_dpu.linear_model._logistic_releases` on the remaining rows.

References
----------
.. [1] M. Van Waerebeke, M. Lorenzi, G. Neglia and K. Scaman, "When to Forget?
   Complexity trade-offs in machine unlearning", preprint, 2025: Thm 1-3.
.. [2] S. Neel, A. Roth and S. Sharifi-Malvajerdi, "Descent-to-Delete:
   Gradient-Based Methods for Machine Unlearning", ALT 2021, Alg. 1-3, Thm 3.2
   (perfect unlearning: restart from the published model), Thm 2.13 (GD
   contraction), Lemma A.2 (Gaussian norm tail). Erratum: Thm 3.2's minimum
   iteration count ``I`` is slightly short for well-conditioned problems (a
   factor 2 inside its logarithm closes the proof); it is not used here: the
   fine-tune's distance to the new minimizer is certified from the gradient
   norm (strong convexity), and the re-release is the fit's output
   perturbation at that distance.
.. [3] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy", JRSS B
   2022, Thm 2.14.
.. [4] B. Laurent and P. Massart, "Adaptive estimation of a quadratic
   functional by model selection", Annals of Statistics 2000, Lemma 1.
"""

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..privacy.random import release_generator
from ..unlearning.planner import (
    NOISE_FINETUNE,
    NOISE_ONLY,
    RETRAIN,
    DeletionDecision,
    DeletionOption,
    plan_deletion,
)
from ..unlearning.report import DeletionCost, DeletionOutcome, DeletionPlan
from ..unlearning.state import SampleRegistry, VersionedState
from . import _logistic_releases as releases
from ._certified_minimize import _DENSE_NEWTON, _ROUNDING, DescentWork, preconditioned_descent
from ._logistic_releases import _binary as binary_loss
from ._logistic_solvers import batch_model, sgd_model
from ._losses import LinearModelLoss
from ._solver_cost import (
    BLOCKED_SOFTMAX_PASS,
    ROW_COPY_PASSES,
    SolveCost,
    certified_solve_passes,
    evaluation_passes,
    hessian_passes,
)

__all__ = [
    "ChunkDeletionPlan",
    "FineTuneSchedule",
    "LogisticUnlearningState",
    "RealizedFineTune",
    "deletion_outcome",
    "deletion_plan",
    "fine_tune_schedule",
    "plan_chunk_deletion",
    "rerelease_chunks",
    "resolve_start",
    "scheduled_fine_tune",
]


class LogisticUnlearningState(VersionedState):
    """Everything :class:`DPLogisticRegression` needs to delete and to stream.

    Attributes
    ----------
    registry : SampleRegistry
        Ids, arrival chunks and rows of the live training samples: the clipped,
        normalized features (and the intercept column) followed by the class
        index, ``n * (n_features + fit_intercept + 1)`` float64 values. These
        are training data: a file holding this state is as sensitive as the
        data.
    frozen_params : dict
        Parameters of the first call of the stream.
    chunks : list of ChunkModel
        One frozen :class:`~sklearn_dpu.linear_model._logistic_releases.ChunkModel`
        per arrival chunk (``fit`` is chunk 1, each ``partial_fit`` the next):
        its kind, released record count, samples deleted by noise only since
        its last release, the public configuration of the release, its
        Gaussian-DP components and the released model after the chunk.

    Notes
    -----
    Size: O(n d) for the rows and O(t K d) for the ``t`` released checkpoints
    (``K`` classes). The rows are ``8 (d + 1 + fit_intercept)`` bytes each:
    9.6 GB at ``n = 10**8``, ``d = 10``, in memory unless the stream started
    in :func:`~sklearn_dpu.unlearning.disk_backed_rows` (then a memory-mapped
    file, and 1 byte a row in memory after the first deletion). Nothing
    un-noised that depends on the data is kept: no
    exact minimizer, gradient, Hessian or count; only released values and the
    live rows.
    """

    # 2: chunks are dataclasses (version 1 held dicts); 3: renamed ChunkModel.
    FORMAT_VERSION = 3

    def __init__(self, registry, frozen_params):
        self.registry = registry
        self.frozen_params = frozen_params
        self.chunks = []

    def nbytes(self) -> int:
        """Bytes held by arrays of the state."""
        reg = self.registry
        total = reg.nbytes()
        return total + sum(chunk.theta.nbytes for chunk in self.chunks)


@dataclass(frozen=True)
class ChunkDeletionPlan:
    """What one deletion request does to the chunks, from public quantities.

    Attributes
    ----------
    decision : DeletionDecision
        The planner's choice among noise only, noise + fine-tune and retrain,
        with its certified Gaussian-DP mu and epsilon.
    first_affected : int
        The earliest chunk (1-based) holding a row deleted so far and not yet
        removed exactly: a retrain replays the chunks from there.
    redone : tuple of int
        The chunks (1-based) released again: none, chunk 1, or a replay.
    configs : tuple of ReleaseConfig
        The public configuration of each redone chunk's new release (from its
        released count less its deleted samples), so the re-releases can be
        charged before they run.
    dense_rows : bool
        Whether the registry holds dense rows (the input's format): the
        fine-tune's method was chosen for it, and runs as planned.
    """

    decision: DeletionDecision
    first_affected: int
    redone: tuple = ()
    configs: tuple = ()
    dense_rows: bool = True


def _solve_cost(
    params: releases.ReleaseParams,
    loss: LinearModelLoss,
    config: releases.ReleaseConfig,
    n_pub: float,
    dense_rows: bool,
    start_distance: float | None = None,
) -> SolveCost:
    """Predicted work of a batch release's solve at ``config`` on ``n_pub``
    rows, in gradient passes (:mod:`._solver_cost`): noisy GD's public
    steps and its released Gram (a Hessian pass), or the certified solves
    (one per class for one-vs-rest objective perturbation), from zero or
    from ``start_distance`` (a warm start's public bound)."""
    if config.solver == "noisy_gd":
        step = evaluation_passes(loss, dense_rows=dense_rows)  # a gradient of the same pass
        return SolveCost(config.n_steps, config.n_steps * step + hessian_passes(loss))
    solves, solve_loss = 1, loss
    if config.solver == "objective":
        solve_loss = binary_loss(loss)
        solves = loss.n_classes if config.one_vs_rest else 1
    cost = certified_solve_passes(
        solve_loss,
        n_pub,
        config.Lambda,
        config.tau,
        start_distance=start_distance,
        dense_rows=dense_rows,
        constrained=config.solver == "output" and params.coef_bound is not None,
        solves=solves,
    )
    return cost


#: Above this margin shift (nats) ``tanh`` of it rounds to 1 in float64 and
#: ``exp`` of it nears overflow: the fine-tune cannot be planned.
_MAX_LOG_Q = 18.0


@dataclass(frozen=True)
class FineTuneSchedule:
    """The public schedule of a warm-started fine-tune (output perturbation).

    Every field is a function of the released configurations, the released
    count and the number of deleted samples; none reads the rows.

    Attributes
    ----------
    steps : int
        Preconditioned descent steps (one full gradient each; one more
        gradient checks the certificate).
    step_size : float
        ``2 / (M_P + m_P)``.
    contraction : float
        ``gamma = (M_P - m_P) / (M_P + m_P)`` per step, in the geometry of the
        Hessian at the start.
    start_distance : float
        Planned bound on ``||theta_published - theta*_new||``.
    margin_shift : float
        Planned mean ``|a . (theta_published - theta*_new)|`` over the rows.
    rows_per_pass : float
        Released count the cost is predicted at.
    row_gradients : float
        Predicted work in row-gradient evaluations: the gradient passes plus
        the Hessian pass (:func:`~._solver_cost.hessian_passes`), times the
        released count.
    """

    steps: int
    step_size: float
    contraction: float
    start_distance: float
    margin_shift: float
    rows_per_pass: float
    row_gradients: float


@dataclass(frozen=True)
class RealizedFineTune:
    """What a scheduled fine-tune did.

    Attributes
    ----------
    steps : int
        Full gradient passes run (the public schedule's ``T + 1``).
    row_gradients : float
        The same work in row gradients at the released count (public).
    work : DescentWork
        The exact realized work (rows read, multiply-adds): depends on the
        private data, for tests and benchmarks only, never published.
    """

    steps: int
    row_gradients: float
    work: DescentWork


def _row_gradient_equivalents(loss: LinearModelLoss, passes: int, dense_rows: bool) -> float:
    """Work per row of the scheduled fine-tune's ``passes`` gradients and one
    Hessian, in row gradients (:mod:`._solver_cost`): for more classes the
    gradients of the blocked multinomial pass on dense rows, else the
    generic blocked softmax gradient."""
    if loss.binary:
        per_pass = 1.0
    elif dense_rows:
        per_pass = evaluation_passes(loss)
    else:
        per_pass = BLOCKED_SOFTMAX_PASS
    return passes * per_pass + hessian_passes(loss, single_precision=True)


def fine_tune_schedule(
    loss: LinearModelLoss,
    old: releases.ReleaseConfig,
    new: releases.ReleaseConfig,
    pending: int,
    delta: float,
    dense_rows: bool = True,
) -> FineTuneSchedule | None:
    """Steps and step size of the warm-started fine-tune, from public quantities
    (``None`` when the published noise is so large that no contraction can be
    planned: the margins move by more than ``_MAX_LOG_Q`` nats).

    Descent-to-Delete (Neel, Roth & Sharifi-Malvajerdi, "Descent-to-Delete:
    Gradient-Based Methods for Machine Unlearning", ALT 2021, Thm 3.2, the
    perfect variant: restart from the *published* model) runs
    ``T = ceil(log(start / target) / log(1 / gamma))`` gradient steps with
    ``gamma = (M - m) / (M + m)`` and step ``2 / (M + m)``; the start distance
    is bounded with a Gaussian tail bound on the published noise (their
    proof of Thm 3.2, Lemma A.2). Plain gradient descent would need
    ``gamma`` of the condition number ``(beta n + Lambda) / Lambda``
    (hundreds of steps at ``n = 1e5``). Here the descent is preconditioned
    by the Hessian at the start ``P``, so ``m, M`` are the curvature
    *relative to* ``P``: a logistic row Hessian changes by at most a factor
    ``exp(c s)`` when its margin moves by ``s`` (``c = 1`` binary, ``2``
    softmax), so ``m_P = 1/q``, ``M_P = q``, ``gamma = tanh(c s)`` with
    ``q = exp(c s)``.

    * start: ``||Z|| <= sigma (sqrt(p) + sqrt(2 ln(1/delta)))`` w.p.
      ``1 - delta`` (Laurent & Massart 2000, Lemma 1), plus the fit's
      certified ``tau / Lambda``, ``k G / Lambda`` for the ``k`` pending rows,
      and the shift of the ridge when the released count changes it;
    * margins: ``s = r (sigma sqrt(2/pi) + deterministic part)``, the mean
      ``|a . Z|`` of a noise ``Z`` independent of the rows. The contraction
      is a ``P``-weighted average of the rows' Hessian ratios, which
      concentrates at the mean shift: a planning model, not a worst case
      (the worst row would give ``gamma = tanh(r sigma sqrt(2 ln(2n/delta)))``,
      about 3x more steps than are needed in practice);
    * target: ``||grad F|| <= tau`` (the fit's certificate), reached when
      ``q lambda_max gamma^T start <= tau`` with ``lambda_max = beta n + Lambda``.

    The privacy guarantee does **not** rest on this plan: the fine-tune
    checks ``||grad F(theta_T)|| <= tau`` and falls back to a retrain when it
    fails; the plan fixes ``T`` from public quantities (so the realized step
    count is public) and predicts the cost (``dense_rows``: the registry's
    format, which decides how a gradient is evaluated).
    """
    p = loss.n_params
    n = max(1.0, new.n_public)
    noise = old.sigma * (math.sqrt(p) + math.sqrt(2.0 * math.log(1.0 / delta)))
    ridge_shift = abs(old.Lambda - new.Lambda) * old.radius / new.Lambda
    exact_part = (old.tau + pending * loss.lipschitz) / old.Lambda + ridge_shift
    start = noise + exact_part
    shift = loss.row_norm * (old.sigma * math.sqrt(2.0 / math.pi) + exact_part)
    c = 1.0 if loss.binary else 2.0
    log_q = c * shift  # q = exp(c s) overflows for a large noise: kept in logs
    if log_q > _MAX_LOG_Q:
        return None  # gamma = tanh(c s) rounds to 1: no contraction to plan on
    gamma = math.tanh(log_q)
    step_size = 1.0 / math.cosh(log_q)  # 2 / (q + 1/q)
    lam_max = loss.smoothness * n + new.Lambda
    log_ratio = log_q + math.log(lam_max * start / new.tau)
    if log_ratio <= 0.0:
        steps = 0
    elif gamma <= 0.0:
        steps = 1
    else:
        # log(1 / tanh(x)) = log1p(e^-2x) - log1p(-e^-2x), exact for large x
        decay = math.exp(-2.0 * log_q)
        steps = max(1, math.ceil(log_ratio / (math.log1p(decay) - math.log1p(-decay))))
    work = _row_gradient_equivalents(loss, steps + 1, dense_rows) * n
    return FineTuneSchedule(steps, step_size, gamma, start, shift, n, work)


def resolve_start(loss: LinearModelLoss, old: releases.ReleaseConfig, pending: int) -> float:
    """Public bound on the published model's distance to the new minimizer:
    the published noise (its expected norm), the pending rows' and the
    certificates' distances (output perturbation), or the objective's
    linear term and output noise."""
    p = loss.n_params
    if old.solver == "output":
        return old.sigma * math.sqrt(p) + (pending * loss.lipschitz + 2.0 * old.tau) / old.Lambda
    return math.sqrt(2.0 * p) * old.sigma_b / old.Lambda + old.sigma_amp * math.sqrt(p)


def _resolve_work(params, loss, old: releases.ReleaseConfig, config, pending, dense_rows) -> float:
    """Predicted row gradients of re-solving with the certified minimizer from
    the published model: the copy of the live rows, then the solve from
    :func:`resolve_start`."""
    n_pub = max(1.0, config.n_public)
    start = resolve_start(loss, old, pending)
    cost = _solve_cost(params, loss, config, n_pub, dense_rows, start_distance=start)
    return (ROW_COPY_PASSES + cost.passes) * n_pub


def scheduled_fine_tune(
    params: releases.ReleaseParams,
    loss: LinearModelLoss,
    chunk: releases.ChunkModel,
    config: releases.ReleaseConfig,
    pending: int,
    dense_rows: bool = True,
) -> FineTuneSchedule | None:
    """The fine-tune's schedule when the preconditioned descent runs, else ``None``.

    It runs for unconstrained output perturbation with a dense Hessian when
    its predicted work is below re-solving with the certified minimizer
    (:func:`_resolve_work`; ``dense_rows``, the input's format, decides the
    re-solve's branch). Public quantities only: the planner and the
    execution take the same branch.
    """
    if not (
        config.solver == "output" and params.coef_bound is None and loss.n_params <= _DENSE_NEWTON
    ):
        return None
    schedule = fine_tune_schedule(loss, chunk.config, config, pending, params.delta, dense_rows)
    if schedule is None:
        return None
    resolve = _resolve_work(params, loss, chunk.config, config, pending, dense_rows)
    return schedule if schedule.row_gradients < resolve else None


def _fine_tune_option(
    params, loss, chunk: releases.ChunkModel, pending: int, dense_rows: bool
) -> DeletionOption:
    """Noise + fine-tune of a single batch fit from its published model."""
    note = ""
    if chunk.config.solver == "noisy_gd":
        note = (
            "a noisy-GD model is not a noised minimizer, so no certified warm "
            "start applies: noise only or retrain"
        )
    else:
        n_pub = max(1.0, chunk.n_noisy - pending)
        config = releases.configure(params, loss, n_pub)
        if config.solver != chunk.config.solver:
            note = "the updated count selects another solver"
    if note:
        return DeletionOption(NOISE_FINETUNE, False, math.inf, math.inf, note)
    if config.solver == "output":
        # Certified start-point dependence: both solutions within tau/Lambda.
        tune_mu = config.mu_model * 2.0 * config.tau / (loss.lipschitz + 2.0 * config.tau)
    else:
        tune_mu = config.mu_amp
    schedule = scheduled_fine_tune(params, loss, chunk, config, pending, dense_rows)
    if schedule is None:
        work = _resolve_work(params, loss, chunk.config, config, pending, dense_rows)
        return DeletionOption(NOISE_FINETUNE, True, tune_mu, work, "")
    note = (
        f"{schedule.steps} Hessian-preconditioned descent steps from the "
        "published model (Descent-to-Delete Thm 3.2 schedule)"
    )
    return DeletionOption(NOISE_FINETUNE, True, tune_mu, schedule.row_gradients, note)


def plan_chunk_deletion(
    params: releases.ReleaseParams,
    loss: LinearModelLoss,
    chunks: list[releases.ChunkModel],
    deleted_per_chunk: Counter,
    target: float,
    dense_rows: bool = True,
) -> ChunkDeletionPlan:
    """The deletion plan, from public quantities only (counts, parameters, k,
    and ``dense_rows``: whether the registry holds dense rows, the input's
    format).

    Options after Van Waerebeke et al. 2025 (Thm 1-3): noise only (group
    privacy of the releases), noise + fine-tune (a single batch fit), retrain
    (replay).
    """
    pending = [c.pending + deleted_per_chunk.get(i + 1, 0) for i, c in enumerate(chunks)]
    # An earlier noise-only deletion leaves its row in that chunk's release
    # (and in every later chunk started from it), so an exact replay must
    # start there, not at the chunks of this request.
    first_affected = next(i + 1 for i, k in enumerate(pending) if k > 0)

    noise_mu = math.sqrt(sum(c.group_mu(k) ** 2 for c, k in zip(chunks, pending, strict=True)))
    options = [DeletionOption(NOISE_ONLY, True, noise_mu, 0.0, "keep the released state")]

    # Predicted retrain (replay) cost, in row-gradient evaluations: the copy
    # of every live row, then each replayed chunk's release.
    live = [max(1.0, c.n_noisy - k) for c, k in zip(chunks, pending, strict=True)]
    retrain_rows = ROW_COPY_PASSES * sum(live)
    for i in range(first_affected - 1, len(chunks)):
        if chunks[i].kind == "sgd":
            retrain_rows += live[i]
            continue
        config = releases.configure(params, loss, live[i])
        retrain_rows += _solve_cost(params, loss, config, live[i], dense_rows).passes * live[i]
    options.append(DeletionOption(RETRAIN, True, 0.0, retrain_rows, "exact"))

    if len(chunks) > 1 or chunks[0].kind != "fit":
        note = "fine-tune needs a single batch fit (streams are replayed instead)"
        options.append(DeletionOption(NOISE_FINETUNE, False, math.inf, math.inf, note))
    else:
        options.append(_fine_tune_option(params, loss, chunks[0], pending[0], dense_rows))
    decision = plan_deletion(options, target, params.delta)
    if decision.action == NOISE_ONLY:
        redone = ()
    elif decision.action == NOISE_FINETUNE:
        redone = (1,)
    else:
        redone = tuple(range(first_affected, len(chunks) + 1))
    configs = tuple(_rerelease_config(params, loss, chunks[c - 1], pending[c - 1]) for c in redone)
    return ChunkDeletionPlan(decision, first_affected, redone, configs, dense_rows)


def _rerelease_config(params, loss, chunk: releases.ChunkModel, pending: int):
    """The configuration of a chunk's release from its count less ``pending``."""
    if chunk.kind == "fit":
        return releases.configure(params, loss, chunk.n_noisy - pending)
    return releases.configure_sgd(params, loss, chunk.n_noisy - pending)


def deletion_plan(
    params: releases.ReleaseParams,
    loss: LinearModelLoss,
    chunks: list[releases.ChunkModel],
    plan: ChunkDeletionPlan,
    target: float,
) -> DeletionPlan:
    """The deletion's plan for the base class: method, the re-releases (read
    from the mechanisms the redone chunks will run, charged before they run)
    and why."""
    rereleases = tuple(
        releases.chunk_release(
            params,
            chunks[c - 1].kind,
            c,
            config.solver,
            releases.model_mechanisms(params, config, loss),
        )
        for c, config in zip(plan.redone, plan.configs, strict=True)
    )
    method = "retrain" if plan.decision.action == RETRAIN else "certified"
    reason = f"{plan.decision.reason}; target deletion epsilon {target:.4g}"
    return DeletionPlan(method, rereleases, reason)


def _fine_tuned_model(params, loss, old, config, schedule, registry, slots, n_noisy, rng):
    """The warm-started fine-tune of chunk 1 on the remaining rows, noised.

    Reads the registry's rows in place (deleted rows get weight 0; no copy of
    the data). Returns ``(model, work)``; ``model`` is ``None`` when the
    certificate ``||grad F|| <= tau`` was not reached in the planned steps.
    """
    size = registry.size
    rows = registry.rows[:size]
    weights = registry.alive[:size].astype(float)
    weights[slots] = 0.0
    y = loss.encode_labels(rows[:, -1].astype(np.intp))
    result = preconditioned_descent(
        loss,
        rows[:, :-1],
        y,
        weights,
        config.Lambda,
        old.theta,
        schedule.steps,
        schedule.step_size,
    )
    if config.Lambda * result.distance_bound > config.tau * (1.0 - _ROUNDING):
        return None, result.work
    # The point is certified within tau/Lambda of the new minimizer, as a
    # fit's: the release is the fit's output perturbation, charged as such.
    (noise,) = releases.model_mechanisms(params, config, loss)
    theta = noise.release(result.theta, rng)
    parts = releases.release_parts(params, config, loss)
    return releases.ChunkModel("fit", float(n_noisy), 0, config, parts, theta, 1), result.work


def rerelease_chunks(
    params: releases.ReleaseParams,
    loss: LinearModelLoss,
    chunks: list[releases.ChunkModel],
    registry: SampleRegistry,
    slots: np.ndarray,
    plan: ChunkDeletionPlan,
    random_state: int | np.random.RandomState | None,
    n_ledger: int,
) -> tuple[list[releases.ChunkModel], bool, RealizedFineTune | None]:
    """The chunk records after deleting the registry's ``slots``, whether
    the fine-tune fell back to retraining, and the fine-tune's realized work.

    Every chunk's ``pending`` grows by its deleted samples. Noise + fine-tune
    restarts the single batch fit from its published model (Descent-to-Delete,
    Neel et al. 2021, Thm 3.2): output perturbation runs the planned
    :func:`fine_tune_schedule` of Hessian-preconditioned descent steps on the
    registry's rows in place, unless re-solving with the certified minimizer
    from the published model is predicted cheaper (the other solvers always
    re-solve, with the fit's own iteration cap). Either retrains when the
    certificate is not reached. Retrain replays every chunk from
    ``first_affected`` on the remaining rows, each with the configuration
    the plan charged. The registry is only read. Release ``i`` of this call
    draws from generator ``n_ledger + i`` of ``random_state``. The realized
    work (exact row counts) is for tests and benchmarks: it depends on the
    private data and is not published.
    """
    action = plan.decision.action

    def live_rows():
        keep = registry.alive[: registry.size].copy()
        keep[slots] = False
        return registry.rows[: registry.size][keep], registry.chunks[: registry.size][keep]

    deleted_per_chunk = Counter(registry.chunks_of(slots).tolist())
    chunks = list(chunks)
    for c, k in deleted_per_chunk.items():
        chunks[c - 1] = dataclasses.replace(chunks[c - 1], pending=chunks[c - 1].pending + k)
    fell_back, work = False, None
    if action == NOISE_FINETUNE:
        rng = release_generator(random_state, n_ledger)
        old = chunks[0]
        n_noisy = old.n_noisy - old.pending
        model = None
        schedule = scheduled_fine_tune(
            params, loss, old, plan.configs[0], old.pending, plan.dense_rows
        )
        if schedule is not None:
            model, descent = _fine_tuned_model(
                params, loss, old, plan.configs[0], schedule, registry, slots, n_noisy, rng
            )
            passes = descent.gradient_passes
            public = _row_gradient_equivalents(loss, passes, plan.dense_rows) * max(1.0, n_noisy)
            work = RealizedFineTune(passes, public, descent)
            fell_back = model is None
        rows = None if model is not None else live_rows()[0]
        if model is None and not fell_back:
            A, y_index = rows[:, :-1], rows[:, -1].astype(np.intp)
            try:
                model, _ = batch_model(params, loss, A, y_index, n_noisy, rng, chunks[0].theta)
            except RuntimeError:
                # The certificate was not reached from the published model: retrain.
                fell_back = True
        if model is None:
            A, y_index = rows[:, :-1], rows[:, -1].astype(np.intp)
            model, _ = batch_model(params, loss, A, y_index, n_noisy, rng)
        chunks[0] = model
    elif action == RETRAIN:
        remaining, remaining_chunks = live_rows()
        for offset, c in enumerate(plan.redone):
            # One chunk (a batch fit) is every live row: no second copy.
            single = plan.redone == (1,) and len(chunks) == 1
            rows = remaining if single else remaining[remaining_chunks == c]
            A, y_index = rows[:, :-1], rows[:, -1].astype(np.intp)
            rng = release_generator(random_state, n_ledger + offset)
            n_noisy = chunks[c - 1].n_noisy - chunks[c - 1].pending
            if chunks[c - 1].kind == "fit":
                model, _ = batch_model(params, loss, A, y_index, n_noisy, rng)
            else:
                theta0 = chunks[c - 2].theta if c > 1 else np.zeros(loss.n_params)
                model, _ = sgd_model(params, loss, A, y_index, n_noisy, theta0, rng)
            chunks[c - 1] = model
    for c, config in zip(plan.redone, plan.configs, strict=True):
        if chunks[c - 1].config != config:  # the release that ran is the one charged
            raise RuntimeError(f"chunk {c} was released with another configuration than planned")
    return chunks, fell_back, work


def deletion_outcome(
    decision: DeletionDecision,
    fell_back: bool,
    delta: float,
    target: float,
    notes: tuple,
    realized: RealizedFineTune | None = None,
) -> DeletionOutcome:
    """What a deletion did, for the report: guarantee, predicted and realized costs.

    Every number comes from parameters, the request size and released counts.
    ``predicted_gradient_evaluations`` is the planner's prediction.
    ``gradient_evaluations`` is the realized work in row gradients: for the
    scheduled fine-tune (``realized`` given) its realized passes
    (``gradient_steps``, a public schedule) at the released count; otherwise the
    prediction of the path taken (a retrain's, never a time). The exact
    realized row count depends on the private data and is not published.

    ``fell_back`` (the fine-tune missed its certificate, checked exactly on
    the remaining rows, and a retrain ran) is a function of the private data,
    so it is **not** published: the report states the planned action and its
    guarantee, which the retrained model meets too (an exact retrain is a
    fortiori within the certified statement, count included). Only the
    measured ``wall_time_s`` can show it, as it shows any work.
    """
    del fell_back, target  # private / not needed: the report is the plan's
    if decision.action == RETRAIN:
        eps_del = None
        guarantee = (
            "exact: the model, the counts and the stored rows have the "
            "distribution of a fit on the remaining samples (streams: "
            "replayed from the earliest chunk holding any row deleted so "
            "far); nothing of the "
            "deleted rows is kept"
        )
    else:
        eps_del = decision.epsilon
        guarantee = (
            f"the whole state is ({decision.epsilon:.4g}, {delta:g})-"
            "indistinguishable from a fit on the remaining samples "
            f"(non-adaptive requests; Gaussian DP, mu={decision.mu:.4g}); no "
            "un-noised value depending on the deleted rows is kept"
        )
    retrain = decision.option(RETRAIN)
    return DeletionOutcome(
        guarantee=guarantee,
        # Public: iterations predicted from released counts, times those
        # counts. The realized count (iterations x exact rows) is a function
        # of the private data and is not published.
        cost=_realized_cost(decision, realized),
        retrain_cost=DeletionCost(
            gradient_evaluations=float(retrain.predicted_gradient_evaluations)
        ),
        deletion_epsilon=eps_del,
        deletion_delta=delta if eps_del is not None else None,
        notes=notes,
    )


def _realized_cost(decision, realized) -> DeletionCost:
    """The report's cost in public units: predicted, and realized as planned
    (the scheduled fine-tune's passes are a public schedule)."""
    predicted = float(decision.option(decision.action).predicted_gradient_evaluations)
    done = predicted if realized is None else realized.row_gradients
    return DeletionCost(
        action=decision.action,
        gradient_evaluations=done,
        predicted_gradient_evaluations=predicted,
        gradient_steps=None if realized is None else realized.steps,
    )
