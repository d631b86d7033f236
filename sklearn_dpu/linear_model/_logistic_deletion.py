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
.. [2] S. Neel, A. Roth and S. Sharifi-Malvajerdi, "Descent-to-Delete", ALT
   2021, Alg. 1-3, Thm 3.2.
.. [3] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy", JRSS B
   2022, Thm 2.14.
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
    linear_rate_iterations,
    plan_deletion,
)
from ..unlearning.report import DeletionCost, DeletionOutcome, DeletionPlan
from ..unlearning.state import SampleRegistry, VersionedState
from . import _logistic_releases as releases
from ._logistic_solvers import batch_model, sgd_model
from ._losses import LinearModelLoss

__all__ = [
    "ChunkDeletionPlan",
    "LogisticUnlearningState",
    "deletion_outcome",
    "deletion_plan",
    "plan_chunk_deletion",
    "rerelease_chunks",
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
    (``K`` classes). Nothing un-noised that depends on the data is kept: no
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
        total = reg.rows.nbytes + reg.ids.nbytes + reg.chunks.nbytes + reg.alive.nbytes
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
    retrain_iterations : int
        Predicted iterations of the last batch release of a retrain; the cap
        of a fine-tune before it falls back to retraining.
    redone : tuple of int
        The chunks (1-based) released again: none, chunk 1, or a replay.
    configs : tuple of ReleaseConfig
        The public configuration of each redone chunk's new release (from its
        released count less its deleted samples), so the re-releases can be
        charged before they run.
    """

    decision: DeletionDecision
    first_affected: int
    retrain_iterations: int
    redone: tuple = ()
    configs: tuple = ()


def _retrain_iterations(config: releases.ReleaseConfig, loss, n_pub: float) -> int:
    """Predicted iterations of a batch retrain at the released count ``n_pub``."""
    if config.solver == "noisy_gd":
        return config.n_steps
    kappa = (n_pub * loss.smoothness + config.Lambda) / config.Lambda
    start = math.sqrt(2.0 * n_pub * loss.loss_at_zero / config.Lambda)
    return linear_rate_iterations(start, config.tau / config.Lambda, kappa)


def _fine_tune_option(params, loss, chunk: releases.ChunkModel, pending: int) -> DeletionOption:
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
    kappa = (n_pub * loss.smoothness + config.Lambda) / config.Lambda
    target = config.tau / config.Lambda
    old = chunk.config
    if old.solver == "output":
        start = (
            old.sigma * math.sqrt(loss.n_params)
            + (pending * loss.lipschitz + 2.0 * old.tau) / old.Lambda
        )
        # Certified start-point dependence: both solutions within tau/Lambda.
        tune_mu = config.mu_model * 2.0 * config.tau / (loss.lipschitz + 2.0 * config.tau)
    else:
        start = math.sqrt(
            2.0 * loss.n_params
        ) * old.sigma_b / old.Lambda + old.sigma_amp * math.sqrt(loss.n_params)
        tune_mu = config.mu_amp
    iterations = linear_rate_iterations(start, target, kappa)
    return DeletionOption(NOISE_FINETUNE, True, tune_mu, iterations * n_pub, "")


def plan_chunk_deletion(
    params: releases.ReleaseParams,
    loss: LinearModelLoss,
    chunks: list[releases.ChunkModel],
    deleted_per_chunk: Counter,
    target: float,
) -> ChunkDeletionPlan:
    """The deletion plan, from public quantities only (counts, parameters, k).

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

    # Predicted retrain (replay) cost, in row-gradient evaluations.
    retrain_rows, retrain_iterations = 0.0, 0
    for i in range(first_affected - 1, len(chunks)):
        chunk = chunks[i]
        n_pub = max(1.0, chunk.n_noisy - pending[i])
        if chunk.kind == "sgd":
            retrain_rows += n_pub
            continue
        retrain_iterations = _retrain_iterations(
            releases.configure(params, loss, n_pub), loss, n_pub
        )
        retrain_rows += retrain_iterations * n_pub
    options.append(DeletionOption(RETRAIN, True, 0.0, retrain_rows, "exact"))

    if len(chunks) > 1 or chunks[0].kind != "fit":
        note = "fine-tune needs a single batch fit (streams are replayed instead)"
        options.append(DeletionOption(NOISE_FINETUNE, False, math.inf, math.inf, note))
    else:
        options.append(_fine_tune_option(params, loss, chunks[0], pending[0]))
    decision = plan_deletion(options, target, params.delta)
    if decision.action == NOISE_ONLY:
        redone = ()
    elif decision.action == NOISE_FINETUNE:
        redone = (1,)
    else:
        redone = tuple(range(first_affected, len(chunks) + 1))
    configs = tuple(_rerelease_config(params, loss, chunks[c - 1], pending[c - 1]) for c in redone)
    return ChunkDeletionPlan(decision, first_affected, retrain_iterations, redone, configs)


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


def rerelease_chunks(
    params: releases.ReleaseParams,
    loss: LinearModelLoss,
    chunks: list[releases.ChunkModel],
    registry: SampleRegistry,
    slots: np.ndarray,
    plan: ChunkDeletionPlan,
    random_state: int | np.random.RandomState | None,
    n_ledger: int,
) -> tuple[list[releases.ChunkModel], bool]:
    """The chunk records after deleting the registry's ``slots``, and whether
    the fine-tune fell back to retraining.

    Every chunk's ``pending`` grows by its deleted samples. Noise + fine-tune
    restarts the single batch fit from its published model (Descent-to-Delete,
    Neel et al. 2021), capped at the retrain prediction, and retrains when it
    does not certify within it; retrain replays every chunk from
    ``first_affected`` on the remaining rows, each with the configuration
    the plan charged. The registry is only read. Release ``i`` of this call
    draws from generator ``n_ledger + i`` of ``random_state``.
    """
    action = plan.decision.action
    if action != NOISE_ONLY:
        keep = registry.alive[: registry.size].copy()
        keep[slots] = False
        live_rows = registry.rows[: registry.size][keep]
        live_chunks = registry.chunks[: registry.size][keep]
    deleted_per_chunk = Counter(registry.chunks[slots].tolist())
    chunks = list(chunks)
    for c, k in deleted_per_chunk.items():
        chunks[c - 1] = dataclasses.replace(chunks[c - 1], pending=chunks[c - 1].pending + k)
    fell_back = False
    if action == NOISE_FINETUNE:
        A, y_index = live_rows[:, :-1], live_rows[:, -1].astype(np.intp)
        rng = release_generator(random_state, n_ledger)
        n_noisy = chunks[0].n_noisy - chunks[0].pending
        cap = max(1, int(plan.retrain_iterations))
        try:
            model, _ = batch_model(params, loss, A, y_index, n_noisy, rng, chunks[0].theta, cap)
        except RuntimeError:
            # The certified path ran past the retrain prediction: retrain.
            fell_back = True
            model, _ = batch_model(params, loss, A, y_index, n_noisy, rng)
        chunks[0] = model
    elif action == RETRAIN:
        for offset, c in enumerate(plan.redone):
            rows = live_rows[live_chunks == c]
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
    return chunks, fell_back


def deletion_outcome(
    decision: DeletionDecision, fell_back: bool, delta: float, target: float, notes: tuple
) -> DeletionOutcome:
    """What a deletion did, for the report: guarantee and public predicted costs.

    Every number comes from parameters, the request size and released counts
    (``gradient_evaluations`` is the planner's prediction; a retrain's cost is
    its predicted gradient evaluations, never a time).
    """
    option = decision.option(RETRAIN if fell_back else decision.action)
    if decision.action == RETRAIN or fell_back:
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
    reason = None
    if fell_back:
        reason = (
            f"{decision.reason}; the fine-tune did not certify within its budget and "
            f"fell back to retraining; target deletion epsilon {target:.4g}"
        )
    return DeletionOutcome(
        guarantee=guarantee,
        # Public: iterations predicted from released counts, times those
        # counts. The realized count (iterations x exact rows) is a function
        # of the private data and is not published.
        cost=DeletionCost(
            action=RETRAIN if fell_back else decision.action,
            gradient_evaluations=float(option.predicted_gradient_evaluations),
            predicted_gradient_evaluations=float(
                decision.option(decision.action).predicted_gradient_evaluations
            ),
            fell_back_to_retrain=fell_back,
        ),
        retrain_cost=DeletionCost(
            gradient_evaluations=float(retrain.predicted_gradient_evaluations)
        ),
        method="retrain" if fell_back else None,
        reason=reason,
        deletion_epsilon=eps_del,
        deletion_delta=delta if eps_del is not None else None,
        notes=notes,
    )
