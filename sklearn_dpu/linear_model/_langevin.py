"""``DPLogisticRegression(solver='langevin')``: noisy GD and its certified deletion.

Training is Chourasia & Shah's Noisy-GD [1]_ (Alg. 2, Def. 5.1) on the summed,
ridge-regularized logistic (or softmax) loss of the normalized rows
``F(theta) = sum_i l(theta; a_i, y_i) + Lambda/2 ||theta||^2``, from a
data-independent Gaussian start, for ``K_A`` full-batch steps; the noise is
drawn by :class:`~sklearn_dpu.privacy.langevin.LangevinRun`. A deletion
removes the rows and continues the same dynamics on the remaining rows from
the published model for ``K_del`` steps, the fewest for which [1]_ Thm 5.1
(18), with the constants of the proof of Thm G.15 before its last loosening
(``R_q`` contracts by ``exp(-c eta K)``, ``c = Lambda (1 - eta Lambda / 2)``:
:mod:`sklearn_dpu.privacy.langevin`), certifies the deleted rows at
``deletion_epsilon``. Nothing but the released model and the live
rows is kept (no secret state, [1]_ Thm 3.2), so the certificate covers every
later model (post-processing, [1]_ Def. 4.1).

Public sizes, from one released count ``n~`` (a Gaussian count as
``'noisy_gd'`` releases, with a small share: the count is the only release a
deletion cannot decay, so its share is the floor of every deletion epsilon):

* ``n_upper = n~ + z s + 1`` with ``s`` the count's noise and ``z`` such that
  ``P(N(0,1) > z) = delta / 100``: with probability ``1 - delta / 100`` it
  bounds the size of the data and of any neighbour, hence the smoothness
  ``beta_F <= Lambda + n_upper beta``; that failure probability is added to
  the delta of the Langevin bounds (never to the ledger's, whose composed
  Gaussian needs no smoothness);
* ``C='auto'``: ``Lambda = max(n_upper beta / (KAPPA - 1), (n~ G^2 r^2 /
  mu^2)^(1/3))``: the condition number ``kappa`` the iteration counts scale
  with is at most :data:`KAPPA`, and small data sets get at least output
  perturbation's ridge (the noise of the model is ``~ G / (Lambda mu)``);
  else ``Lambda = 1 / (C feature_norm^2)``;
* ``eta = 1 / (2 (Lambda + n_upper beta))`` ([1]_ Thm 5.1);
* ``K_A = ceil(4 kappa log(rho n_upper^2 / (4 p)))`` ([1]_ Thm 5.1 (19), with
  ``epsilon_dp / q`` the model's zCDP ``rho`` and ``p`` parameters), at least
  ``4 kappa``;
* the temperature makes the ``K_A`` composed Gaussian steps exactly the
  model's share ``mu_model`` of the Gaussian-DP budget (the ledger's event).

References
----------
.. [1] R. Chourasia and N. Shah, "Forget unlearning: towards true
   data-deletion in machine learning", ICML 2023: Alg. 2, Def. 4.1, Def. 5.1,
   Thm 3.2, Thm 4.3, Thm 5.1, Thm G.9 (erratum: ``eta^2`` printed for
   ``n^2``) and the proof of Thm G.15.
.. [2] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
   differential privacy: analytical calibration and optimal denoising", ICML
   2018, Thm 8.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from .._progress import step_ticker
from .._transaction import keep_attributes
from .._validation import INPUT_DTYPES
from ..privacy.langevin import LangevinRun, unlearning_rho, unlearning_steps, zcdp_epsilon
from ..privacy.ledger import Release, ReleasePlan
from ..privacy.mechanisms import GaussianCount, GaussianDP
from ..privacy.random import release_generator
from ..unlearning.report import DeletionCost, DeletionOutcome, DeletionPlan
from ._logistic_releases import ChunkModel, GaussianPart, ReleaseParams
from ._losses import LinearModelLoss
from ._multinomial_pass import gradient_function
from ._sparse_rows import canonical_sparse, in_storage_of

__all__ = [
    "COUNT_SHARE",
    "KAPPA",
    "LangevinConfig",
    "configure_langevin",
    "delete_langevin",
    "handles",
    "langevin_fit",
    "langevin_release",
    "planned_langevin_release",
    "refit_with_rows",
]

#: Share of the Gaussian-DP precision ``mu^2`` the released count takes.
COUNT_SHARE = 0.002
#: Condition number ``(Lambda + n_upper beta) / Lambda`` that ``C='auto'`` sets.
KAPPA = 20.0
#: Constant of the ridge floor ``(n~ G^2 r^2 / mu^2)^(1/3)`` of ``C='auto'``.
NOISE_RIDGE = 2.0
# Probability, as a fraction of delta, that n_upper fails to bound the size.
_FAILURE_FRACTION = 0.01

_REFERENCE = (
    "Noisy-GD / Langevin dynamics (Chourasia & Shah 2023, Alg. 2, Thm 5.1), "
    "K Gaussian gradient-sum releases composed exactly (Dong, Roth & Su 2022, "
    "Cor. 3.3); the deletions are certified by the proof of Thm G.15 before its "
    "last loosening (c = Lambda (1 - eta Lambda / 2); Thm G.9, erratum eta^2 -> n^2, "
    "states it loosened)"
)
_COUNT_REFERENCE = (
    "Gaussian mechanism on the record count, sensitivity 1 (Balle & Wang 2018, Thm 8)"
)


@dataclass(frozen=True)
class LangevinConfig:
    """The public configuration of a Langevin fit (all from the released count).

    Attributes
    ----------
    solver : str
        ``'langevin'``.
    n_public : float
        The released record count (at least 1).
    n_upper : float
        ``n_public + z s + 1``: the size bound behind the step size.
    Lambda : float
        Ridge of the summed objective (normalized units).
    kappa : float
        ``(Lambda + n_upper beta) / Lambda``.
    mu_model : float
        Gaussian-DP mu of the fit's noisy steps (the count's share removed).
    count_multiplier : float
        Noise of the released count, in records.
    failure_probability : float
        Probability that ``n_upper`` does not bound the size (added to the
        delta of the Langevin bounds).
    run : LangevinRun
        The dynamics (``steps`` = ``K_A``).
    one_vs_rest : bool
        Always ``False`` (one softmax model).
    """

    solver: str
    n_public: float
    n_upper: float
    Lambda: float
    kappa: float
    mu_model: float
    count_multiplier: float
    failure_probability: float
    run: LangevinRun
    one_vs_rest: bool = False

    @property
    def count_rho(self) -> float:
        """zCDP of the released count for one record (it never decays)."""
        return 1.0 / (2.0 * self.count_multiplier**2)


def handles(state: Any) -> bool:
    """Whether a logistic unlearning state is a single Langevin fit."""
    chunks = getattr(state, "chunks", ())
    return len(chunks) == 1 and isinstance(chunks[0].config, LangevinConfig)


def _count_mechanism(params: ReleaseParams) -> GaussianCount:
    return GaussianCount(1.0 / (math.sqrt(COUNT_SHARE) * params.mu))


def _model_mu(params: ReleaseParams) -> float:
    return math.sqrt(1.0 - COUNT_SHARE) * params.mu


def configure_langevin(
    params: ReleaseParams, loss: LinearModelLoss, n_noisy: float
) -> LangevinConfig:
    """The public configuration from the parameters and the released count."""
    n_public = max(1.0, float(n_noisy))
    count = _count_mechanism(params)
    failure = _FAILURE_FRACTION * params.delta
    n_upper = n_public + float(norm.isf(failure)) * count.noise_multiplier + 1.0
    beta, G = loss.smoothness, loss.lipschitz
    mu_model = _model_mu(params)
    if params.C == "auto":
        # kappa <= KAPPA, and at least output perturbation's ridge (small data sets)
        G2r2 = G**2 * loss.row_norm**2
        noise_ridge = NOISE_RIDGE * (n_public * G2r2 / mu_model**2) ** (1.0 / 3.0)
        Lambda = max(n_upper * beta / (KAPPA - 1.0), noise_ridge)
    else:
        Lambda = 1.0 / (params.C * params.feature_norm**2)
    smooth = Lambda + n_upper * beta
    kappa = smooth / Lambda
    eta = 1.0 / (2.0 * smooth)
    rho = mu_model**2 / 2.0
    steps = math.ceil(4.0 * kappa * max(1.0, math.log(rho * n_upper**2 / (4.0 * loss.n_params))))
    # K_A Gaussian steps of multiplier m compose to m / sqrt(K_A) = 1 / mu_model.
    multiplier = math.sqrt(steps) / mu_model
    temperature = multiplier * G * math.sqrt(eta / 2.0)
    run = LangevinRun(G, Lambda, eta, temperature, steps)
    return LangevinConfig(
        "langevin", n_public, n_upper, Lambda, kappa, mu_model, count.noise_multiplier, failure, run
    )


def langevin_descent(
    loss: LinearModelLoss,
    A: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    run: LangevinRun,
    rng: np.random.Generator,
) -> np.ndarray:
    """``run.steps`` noisy full-batch gradient steps on the summed objective."""
    theta = np.array(theta, dtype=float)
    eta, lam = run.step_size, run.ridge
    tick = step_ticker(int(run.steps), "Langevin", run)
    # The log loss's gradient in one pass over the rows (binary or multinomial).
    gradient = gradient_function(loss, A, y)
    for t in range(int(run.steps)):
        grad = gradient(theta)
        grad += lam * theta
        theta -= eta * grad
        theta += run.step_noise(theta.shape, rng)
        if tick is not None:
            tick(t)
    return theta


def _parts(params: ReleaseParams, config: LangevinConfig) -> tuple:
    return (
        GaussianPart("count", math.sqrt(COUNT_SHARE) * params.mu),
        GaussianPart("gdp", config.mu_model),
    )


def langevin_fit(
    params: ReleaseParams,
    loss: LinearModelLoss,
    A: np.ndarray,
    y_index: np.ndarray,
    rng: np.random.Generator,
) -> tuple[ChunkModel, tuple]:
    """A fit: the noised count, then ``K_A`` Langevin steps from a random start.

    Returns the model and the mechanisms that ran, count first.
    """
    count = _count_mechanism(params)
    n_noisy = count.release(A.shape[0], rng)
    config = configure_langevin(params, loss, n_noisy)
    run = config.run
    theta0 = run.start(loss.n_params, rng)
    theta = langevin_descent(loss, A, loss.encode_labels(y_index), theta0, run, rng)
    model = ChunkModel("fit", float(n_noisy), 0, config, _parts(params, config), theta, run.steps)
    return model, (count, run)


def langevin_release(params: ReleaseParams, mechanisms: tuple, what: str = "fit") -> Release:
    """The ledger record of a Langevin fit (count and run) or deletion (run)."""
    run = mechanisms[-1]
    words = (
        f"Langevin noisy GD ({what}): {run.steps} full-batch Gaussian gradient sums, "
        f"multiplier {run.noise_multiplier:.4g} each (chunk 1)"
    )
    references = _REFERENCE
    if isinstance(mechanisms[0], GaussianCount):
        words = f"Gaussian noisy record count + {words}"
        references = f"{_COUNT_REFERENCE}; {_REFERENCE}"
    return Release.of(mechanisms if len(mechanisms) > 1 else run, words, (1, 1), references)


def planned_langevin_release(params: ReleaseParams) -> Release:
    """What a Langevin fit adds to the ledger, from the parameters alone: the
    count and a ``mu_model``-GDP run (the calibration makes the ``K_A`` steps
    exactly that)."""
    mechanisms = (_count_mechanism(params), GaussianDP(_model_mu(params)))
    words = "Gaussian noisy record count + Langevin noisy GD (fit, chunk 1)"
    return Release.of(mechanisms, words, (1, 1), f"{_COUNT_REFERENCE}; {_REFERENCE}")


# ------------------------------------------------------------------ deletion


@dataclass(frozen=True)
class LangevinDeletion:
    """A planned Langevin deletion, from public quantities.

    Attributes
    ----------
    steps : int or None
        ``K_del``; ``None``: retrain (the target is out of reach of the
        contraction, or ``K_del`` would not be cheaper than ``K_A``).
    epsilon : float or None
        Certified epsilon of each deleted row (non-adaptive requests).
    delta : float
        Its delta (the conversion's and the size bound's failure).
    adaptive_epsilon : float or None
        Certified epsilon for a requester who saw every model released since
        the fit ([1]_ Thm 4.3: the deletion's Renyi divergence plus that of
        each earlier release).
    needed_steps : int or None
        With ``steps=None``: the steps the target would need (at least
        ``K_A``), or ``None`` when no number of steps reaches it (the count's
        share alone is above it).
    """

    steps: int | None
    epsilon: float | None
    delta: float
    adaptive_epsilon: float | None
    needed_steps: int | None = None


def plan_langevin_deletion(
    config: LangevinConfig, target: float, delta: float, n_releases: int, group: int = 1
) -> LangevinDeletion:
    """``K_del`` for ``target`` at ``delta``, or a retrain.

    ``group`` is every row deleted since the fit (this request's and the
    earlier ones'): the state must be indistinguishable from a run that never
    saw any of them. A group of ``k`` has ``k`` times the count's and the
    gradient sum's sensitivity, so ``k^2`` times their zCDP; the earlier rows
    have been absent for at least the ``K_del`` steps of this request, which
    is all the bound uses. Each earlier model a requester saw adds the
    stationary bound of the group (any number of steps) and its count.
    """
    convert = delta - config.failure_probability
    floor = group**2 * config.count_rho
    steps = unlearning_steps(config.run, target, convert, floor, group)
    if steps is None or steps >= config.run.steps:
        return LangevinDeletion(None, None, delta, None, None if steps is None else int(steps))
    rho_del = unlearning_rho(config.run, steps, floor, group)
    eps = zcdp_epsilon(rho_del, convert)
    per_release = group**2 * (config.count_rho + config.run.stationary_rho)
    adaptive = zcdp_epsilon(rho_del + n_releases * per_release, convert)
    return LangevinDeletion(int(steps), eps, delta, adaptive)


def delete_langevin(
    estimator: Any,
    slots: np.ndarray,
    target: float,
    finish: Callable[[DeletionOutcome], DeletionOutcome] | None = None,
) -> None:
    """Run ``delete_samples`` on a Langevin fit: continue the noisy GD on the
    remaining rows for ``K_del`` steps, or retrain when that is not cheaper.

    The plan reads only the configuration (released count, parameters), the
    target and the number of releases since the fit; the run is charged
    before it executes (:meth:`~sklearn_dpu.base.PrivateEstimatorMixin._run_deletion`).
    ``finish`` maps the outcome before it is reported (a kept released bound).
    """
    state = estimator.unlearning_state_
    registry, chunk = state.registry, state.chunks[0]
    config, params, loss = chunk.config, estimator._params(), estimator._loss()
    # every model published so far (fit, refits, deletions: the ledger's
    # releases, an upper bound on those a deleted row was in)
    n_releases = len(estimator.privacy_ledger_)
    group = int(chunk.pending) + len(slots)  # every row deleted since the fit
    planned = plan_langevin_deletion(config, target, estimator.delta, n_releases, group)
    n_ledger = len(estimator.privacy_ledger_)
    retrain_evals = float(config.run.steps * config.n_public)
    retrain_cost = DeletionCost(gradient_steps=config.run.steps, gradient_evaluations=retrain_evals)
    if planned.steps is None:
        release = planned_langevin_release(params)
        why = (
            "the released count's share of it, which no number of steps lowers, is already above it"
            if planned.needed_steps is None
            else f"it needs {planned.needed_steps} steps, a fit runs {config.run.steps}"
        )
        reason = (
            f"deletion_epsilon={target:.4g} is not reachable by continuing the noisy GD "
            f"for fewer steps than a fit: the {group} rows deleted since the last fit or "
            f"retrain are certified as a group (k^2 times a row's zCDP), and {why}"
        )
        plan = DeletionPlan("retrain", (release,), reason)
    else:
        run = config.run.with_steps(planned.steps)
        release = langevin_release(params, (run,), "deletion")
        reason = (
            f"langevin: {planned.steps} noisy GD steps on the remaining rows certify "
            f"deletion_epsilon={target:.4g} (Chourasia & Shah 2023, Thm 5.1 (18), "
            "proof of Thm G.15); "
            f"a fit runs {config.run.steps}"
        )
        plan = DeletionPlan("certified", (release,), reason)

    def execute() -> DeletionOutcome:
        keep_attributes(state)  # the chunks it replaces; the registry undoes its removal
        keep = registry.alive[: registry.size].copy()
        keep[slots] = False
        rows = registry.rows[: registry.size][keep]
        A, y_index = rows[:, :-1], rows[:, -1].astype(np.intp)
        rng = release_generator(estimator.random_state, n_ledger)
        if planned.steps is None:
            model, _ = langevin_fit(params, loss, A, y_index, rng)
            if model.config.solver != "langevin":  # pragma: no cover - defensive
                raise RuntimeError("the retrain is not the planned release")
            registry.remove(slots)
            state.chunks = [model]
            estimator._publish()
            return DeletionOutcome(
                guarantee=(
                    "exact: a fresh Langevin fit (new count, new start) on the remaining "
                    "samples; nothing of the deleted rows is kept"
                ),
                cost=DeletionCost(
                    action="retrain",
                    gradient_steps=model.n_iter,
                    gradient_evaluations=retrain_evals,
                    predicted_gradient_evaluations=retrain_evals,
                ),
                retrain_cost=retrain_cost,
            )
        theta = langevin_descent(loss, A, loss.encode_labels(y_index), chunk.theta, run, rng)
        registry.remove(slots)
        pending = chunk.pending + len(slots)
        state.chunks = [replace(chunk, theta=theta, n_iter=run.steps, pending=pending)]
        estimator._publish()
        evals = float(run.steps * config.n_public)
        guarantee = (
            f"langevin: after {run.steps} noisy GD steps without them, the {group} rows "
            "deleted since the last fit or retrain are "
            f"({planned.epsilon:.4g}, {planned.delta:g})-deleted "
            "as a group: every later model is that indistinguishable from one of a run "
            "that never saw them (non-adaptive "
            "requests; Chourasia & Shah 2023, Def. 4.1, Thm 5.1); for a requester who "
            f"saw the {n_releases} models published so far: "
            f"({planned.adaptive_epsilon:.4g}, {planned.delta:g}) (Thm 4.3)"
        )
        return DeletionOutcome(
            guarantee=guarantee,
            cost=DeletionCost(
                action="langevin",
                gradient_steps=run.steps,
                gradient_evaluations=evals,
                predicted_gradient_evaluations=evals,
            ),
            retrain_cost=retrain_cost,
            deletion_epsilon=planned.epsilon,
            deletion_delta=planned.delta,
        )

    def finished() -> DeletionOutcome:
        outcome = execute()
        return outcome if finish is None else finish(outcome)

    estimator._run_deletion(len(slots), plan, finished)


def refit_with_rows(
    estimator: Any, X: ArrayLike, y: ArrayLike, classes: ArrayLike | None, sample_id: Any
) -> None:
    """``partial_fit`` after a Langevin fit: add the rows and refit on all of them.

    A Langevin fit's deletion certificate is for one noisy GD run on one data
    set, so new rows start a new run (a fresh count and start) on the union,
    charged as one more release of chunk 1 (sequential composition with the
    earlier ones).
    """
    state = estimator.unlearning_state_
    registry, labels = state.registry, estimator.classes_
    params, loss = estimator._params(), estimator._loss()
    plan = ReleasePlan((planned_langevin_release(params),), exact=False)

    def validate():
        Xv, yv = validate_data(
            estimator, X, y, accept_sparse="csr", dtype=INPUT_DTYPES, reset=False
        )
        Xv = canonical_sparse(Xv)
        check_classification_targets(yv)
        if classes is not None and not np.array_equal(np.unique(classes), labels):
            raise ValueError(
                f"classes={np.unique(classes).tolist()!r} is not the label set of "
                f"the stream, classes_={labels.tolist()!r}"
            )
        unseen = np.setdiff1d(np.unique(yv), labels)
        if unseen.size:
            raise ValueError(
                f"y contains labels {unseen.tolist()!r} that are not in classes_ "
                f"{labels.tolist()!r}: the label set is fixed at the first fit"
            )
        ids = registry.check_new_ids(
            registry.default_ids(Xv.shape[0]) if sample_id is None else sample_id, Xv.shape[0]
        )
        return Xv, yv, ids

    def compute(data):
        Xv, yv, ids = data
        rng = release_generator(estimator.random_state, len(estimator.privacy_ledger_))
        rows = in_storage_of(estimator._rows(Xv, np.searchsorted(labels, yv)), registry)
        registry.add(ids, rows, chunk=1)
        rows = registry.rows[: registry.size][registry.alive[: registry.size]]
        A, y_index = rows[:, :-1], rows[:, -1].astype(np.intp)
        model, mechanisms = langevin_fit(params, loss, A, y_index, rng)
        state.chunks = [model]
        estimator._publish()
        return [langevin_release(params, mechanisms, "refit on all rows after partial_fit")]

    estimator._run_update("partial_fit", plan, validate, compute)
