"""Release recipes of :class:`~sklearn_dpu.linear_model.DPLogisticRegression`.

The estimator chooses a solver once per release and calls the functions of
this module on explicit values: the public parameters (:class:`ReleaseParams`),
the loss (number of classes, coefficients per class, row norm), the released
record count and the normalized rows. Each returns small frozen records whose
docstrings state what every field means:

* :func:`configure` / :func:`configure_sgd` turn public quantities into the
  noise levels, ridge and projection radius of one release
  (:class:`ReleaseConfig`), with the budget split by :data:`SHARES`;
* :func:`model_mechanisms` builds, from a configuration, the mechanism
  objects that draw the release's noise and give its ledger events;
* the solvers of :mod:`sklearn_dpu.linear_model._logistic_solvers` compute,
  with those mechanisms, the :class:`ChunkModel` the unlearning state keeps,
  with its Gaussian-DP components (:class:`GaussianPart`) for group privacy;
* :func:`chunk_release` is the ledger's :class:`~sklearn_dpu.privacy.ledger.Release`
  read from those mechanism objects; :func:`planned_release` the one a fit
  or a stream chunk will add, from the parameters alone.

The deletion plan and re-releases are in
:mod:`sklearn_dpu.linear_model._logistic_deletion`.

References
----------
.. [1] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024:
   Alg. 1 / Thm 8; Alg. 3 / Thm 12 with the erratum on its noise; Ch. 2.
.. [2] K. Chaudhuri, C. Monteleoni and A. D. Sarwate, "Differentially private
   empirical risk minimization", JMLR 2011, Thm 9.
.. [3] D. Kifer, A. Smith and A. Thakurta, "Private convex empirical risk
   minimization and high-dimensional regression", COLT 2012, Thm 2.
.. [4] R. Iyengar et al., "Towards practical differentially private convex
   optimization", IEEE S&P 2019, Alg. 1.
.. [5] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy", JRSS B
   2022, Thm 2.14, Cor. 3.3.
.. [6] M. Abadi et al., "Deep learning with differential privacy", CCS 2016,
   Alg. 1.
.. [7] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
   differential privacy: analytical calibration and optimal denoising", ICML
   2018, Thm 8.
"""

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from ..exceptions import StateVersionError
from ..privacy.calibration import gaussian_noise_multiplier
from ..privacy.ledger import Release
from ..privacy.mechanisms import GaussianCount, GaussianDP, GaussianMechanism, GaussianSteps
from ._losses import LinearModelLoss
from ._noisy_gd_glm import DisjointBatchSums, NoisyGDRun, n_batches
from ._objective_perturbation import (
    ApproximateMinimaNoise,
    ObjectivePerturbation,
    jacobian_epsilon,
    objective_perturbation_noise_mu,
)

__all__ = [
    "FROZEN_PARAMS",
    "SHARES",
    "BudgetShares",
    "ChunkModel",
    "GaussianPart",
    "OutputPerturbation",
    "ReleaseConfig",
    "ReleaseParams",
    "check_public_params",
    "chunk_release",
    "configure",
    "configure_sgd",
    "count_mechanism",
    "model_mechanisms",
    "planned_release",
    "release_parts",
]


@dataclass(frozen=True)
class BudgetShares:
    """Shares of the Gaussian-DP precision ``mu^2`` of one release.

    The record count fixes the public sizes (ridge, solver, step sizes,
    batches) and takes ``count``; the model takes the rest. Within the model,
    objective perturbation gives ``amp`` to the output noise that covers the
    solver's tolerance (approximate minima perturbation) and noisy GD gives
    ``gram`` to the released Gram matrix behind its preconditioner. Shares
    of ``mu^2`` add up because Gaussian-DP releases compose exactly
    (Dong, Roth & Su 2022, Cor. 3.3).

    ``bounds`` is a share of ``epsilon`` itself, taken before the rest:
    with ``feature_norm='auto'`` the row-norm bound is a pure
    ``(bounds * epsilon, 0)``-DP release
    (:mod:`sklearn_dpu.linear_model._auto_bounds`) and the release above is
    calibrated to ``((1 - bounds) epsilon, delta)``; the two compose to
    ``(epsilon, delta)`` by basic composition (Dwork & Roth 2014, Thm 3.16).
    Unused with an explicit ``feature_norm``.
    """

    count: float = 0.05
    amp: float = 0.01
    gram: float = 0.10
    bounds: float = 0.1

    def count_mu(self, mu: float) -> float:
        return math.sqrt(self.count) * mu

    def model_mu(self, mu: float) -> float:
        return math.sqrt(1.0 - self.count) * mu

    def objective_mu(self, mu: float) -> float:
        """Objective perturbation's share (the model's without the AMP noise)."""
        return math.sqrt(1.0 - self.count - self.amp) * mu

    def amp_mu(self, mu: float) -> float:
        return math.sqrt(self.amp) * mu

    def gram_mu(self, mu: float) -> float:
        return math.sqrt(self.gram) * mu

    def steps_mu(self, mu: float) -> float:
        """Noisy GD's gradient sums (the model's without the Gram matrix)."""
        return math.sqrt(1.0 - self.count - self.gram) * mu


#: The one split of every release's budget.
SHARES = BudgetShares()


@dataclass(frozen=True)
class RidgeConstants:
    """``C='auto'``: ``Lambda = constant * (n G^2 r^2 / mu^2) ** (1/3)`` per solver.

    The balance of ridge bias ``(Lambda / 2n) D^2`` against the noise's
    second-order loss ``(beta / 2) sigma^2 r^2`` with ``sigma = G / (Lambda
    mu)`` (Ullah 2024, Ch. 2, the regularization that balances bias and
    noise), the unknown ``||w*||^(2/3)`` folded into the constant. Chosen on
    synthetic data (benchmarks/tune_dp_logistic.py), never on the evaluation
    sets.
    """

    output: float = 1.0
    objective: float = 0.1
    noisy_gd: float = 0.03
    sgd: float = 0.03


_RIDGE = RidgeConstants()
# Objective perturbation: the ridge is raised until the Jacobian term
# log(1 + beta/Lambda) is at most this fraction of the per-class mu.
_JACOBIAN_FRACTION = 0.05

_COUNT_REFERENCE = (
    "Gaussian mechanism on the record count, sensitivity 1 (Balle & Wang 2018, Thm 8)"
)
_OUTPUT_REFERENCE = (
    "output perturbation of the regularized ERM (Ullah 2024, PhD thesis, Alg. 3 / "
    "Thm 12) with its noise corrected (erratum: the printed sigma is too small "
    "for its own sensitivity) and add/remove sensitivity "
    "(G + 2 tol) / Lambda"
)
_OBJECTIVE_REFERENCE = (
    "objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Thm 9; Kifer, "
    "Smith & Thakurta 2012, Thm 2) accounted as mu'-GDP, see "
    "sklearn_dpu.linear_model._objective_perturbation; approximate minima "
    "perturbation (Iyengar et al. 2019, Alg. 1) for the solver tolerance"
)
_NOISY_GD_REFERENCE = (
    "projected noisy GD (Ullah 2024, PhD thesis, Alg. 1 / Thm 8; errata: gradient "
    "in the update, loop from w_0 = 0), T Gaussian gradient sums composed exactly "
    "(Dong, Roth & Su 2022, "
    "Cor. 3.3)"
)
_SGD_REFERENCE = (
    "one-pass DP-SGD with per-example clipping (Abadi et al. 2016, Alg. 1), "
    "one noisy batch sum per record"
)


#: Parameters of DPLogisticRegression a stream freezes at its first call.
FROZEN_PARAMS = (
    "epsilon",
    "delta",
    "feature_norm",
    "C",
    "fit_intercept",
    "solver",
    "max_iter",
    "tol",
    "coef_bound",
    "batch_size",
)


@functools.lru_cache(maxsize=64)
def _gdp_mu(epsilon: float, delta: float) -> float:
    """The mu of the Gaussian-DP guarantee that is exactly (epsilon, delta)-DP.

    Cached: a root search of the analytic Gaussian mechanism, pure in its
    arguments, called several times per fit.
    """
    return 1.0 / gaussian_noise_multiplier(float(epsilon), float(delta))


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class ReleaseParams:
    """The public parameters of the estimator that a release reads.

    Attributes mirror the estimator's parameters of the same names:
    ``epsilon`` and ``delta`` are the privacy of one release, ``feature_norm``
    the public row norm bound, ``C`` the inverse regularization (or
    ``'auto'``), ``solver`` the requested batch solver (``'auto'``,
    ``'output'``, ``'objective'`` or ``'noisy_gd'``), ``max_iter`` the noisy
    GD steps or the cap on a certified solve's iterations, ``tol`` the
    certified optimality (gradient norm ``tol * G``), ``coef_bound`` the
    radius of the normalized coefficients (or ``None``) and ``batch_size`` the
    expected rows of a DP-SGD step. No value here depends on the data.
    """

    epsilon: float
    delta: float
    feature_norm: float
    C: float | str
    solver: str
    max_iter: int
    tol: float
    coef_bound: float | None
    batch_size: int

    @classmethod
    def of(cls, params: Mapping) -> "ReleaseParams":
        """The fields read from an estimator's parameter values."""
        return cls(**{field.name: params[field.name] for field in fields(cls)})

    @property
    def mu(self) -> float:
        """Gaussian-DP mu of one release, exactly ``(epsilon, delta)``-DP."""
        return _gdp_mu(self.epsilon, self.delta)


@dataclass(frozen=True)
class ReleaseConfig:
    """The public configuration of one model release.

    Every field is a function of the parameters, the label set, the number of
    features and the released record count; none depends on the rows.

    Attributes
    ----------
    solver : str
        What ran: ``'output'``, ``'objective'``, ``'noisy_gd'`` or ``'sgd'``.
    n_public : float
        The released record count behind the public sizes, at least 1.
    mu_model : float
        Gaussian-DP mu of the model release (the count's share removed).
    Lambda : float
        Ridge of the summed loss, in normalized units
        (``1 / (C feature_norm^2)``).
    radius : float
        Radius of the ball projections (noisy GD, DP-SGD) keep the normalized
        parameters in.
    one_vs_rest : bool
        Whether the classes are fitted one-vs-rest (multiclass objective
        perturbation) rather than by one softmax model.
    tau : float or None
        Certified solver tolerance (gradient norm) of a batch release; ``None``
        for DP-SGD.
    sigma : float or None
        ``'output'``: standard deviation of the Gaussian output noise.
    per_class, mu_op, mu_amp, eps_jacobian, certified_mu_class, sigma_b, \
sigma_amp : float or None
        ``'objective'``: classes fitted (1 for a binary problem), the GDP mu of
        the objective perturbation and of the AMP output noise, the Jacobian
        term ``log(1 + beta / Lambda)``, the certified per-class mu, the
        standard deviation of the linear perturbation and of the AMP noise.
    n_steps, gram_multiplier, step_multiplier : int, float, float or None
        ``'noisy_gd'``: gradient steps, noise multiplier of the released Gram
        matrix and of each gradient sum.
    batch_multiplier : float or None
        ``'sgd'``: noise multiplier of each clipped batch sum.
    """

    solver: str
    n_public: float
    mu_model: float
    Lambda: float
    radius: float
    one_vs_rest: bool = False
    tau: float | None = None
    sigma: float | None = None
    per_class: int | None = None
    mu_op: float | None = None
    mu_amp: float | None = None
    eps_jacobian: float | None = None
    certified_mu_class: float | None = None
    sigma_b: float | None = None
    sigma_amp: float | None = None
    n_steps: int | None = None
    gram_multiplier: float | None = None
    step_multiplier: float | None = None
    batch_multiplier: float | None = None


@dataclass(frozen=True)
class GaussianPart:
    """One Gaussian-DP component of a release, for group privacy.

    Attributes
    ----------
    kind : str
        ``'count'`` (the noisy record count), ``'gdp'`` (a mechanism that is
        ``mu``-GDP for one record), ``'output'`` (output perturbation, whose
        pre-noise shift is ``(k G + 2 tau) / Lambda`` for ``k`` records) or
        ``'fixed'`` (the AMP noise, whose shift bound holds for any two data
        sets).
    mu : float
        Gaussian-DP mu of the component for one record.
    G, tau : float or None
        ``'output'``: the bound on a record's gradient and the certified
        solver tolerance.
    """

    kind: str
    mu: float
    G: float | None = None
    tau: float | None = None

    def group_mu(self, k: int) -> float:
        """Gaussian-DP mu of the component for a group of ``k`` records.

        GDP group privacy: a mu-GDP mechanism is (k mu)-GDP for groups of k
        (Dong, Roth & Su 2022, Thm 2.14). Output perturbation is tighter: its
        pre-noise shift is ``(k G + 2 tol) / Lambda`` for the tolerance is paid
        once. The AMP component does not grow with ``k``.
        """
        if k <= 0:
            return 0.0
        if self.kind == "output":
            return self.mu * (k * self.G + 2.0 * self.tau) / (self.G + 2.0 * self.tau)
        if self.kind == "fixed":
            return self.mu
        return k * self.mu


@dataclass(frozen=True, eq=False)
class ChunkModel:
    """The model released for one arrival chunk, and what deletion needs of it.

    ``fit`` is chunk 1, each ``partial_fit`` the next. A re-release after a
    deletion replaces the chunk's model.

    Attributes
    ----------
    kind : str
        ``'fit'`` (a batch release) or ``'sgd'`` (one DP-SGD pass).
    n_noisy : float
        The chunk's released record count.
    pending : int
        Samples of the chunk deleted by noise only since its last release.
    config : ReleaseConfig
        The public quantities of the release.
    parts : tuple of GaussianPart
        Its Gaussian-DP components, for group privacy.
    theta : ndarray of shape (n_params,)
        The released model after the chunk, normalized units.
    n_iter : int
        Public iteration count of the release: noisy GD steps, DP-SGD batches,
        1 for output or objective perturbation (a certified solve's count
        depends on the data and is not kept).
    """

    kind: str
    n_noisy: float
    pending: int
    config: ReleaseConfig
    parts: tuple
    theta: np.ndarray
    n_iter: int

    def group_mu(self, k: int) -> float:
        """Gaussian-DP mu of the chunk's release for a group of ``k`` records."""
        return math.sqrt(sum(part.group_mu(k) ** 2 for part in self.parts))


# ------------------------------------------------------------ mechanisms


@dataclass(frozen=True)
class OutputPerturbation(GaussianDP):
    """Gaussian noise on a certified regularized minimizer, ``mu``-GDP.

    Ullah 2024, Alg. 3 / Thm 12, with the noise corrected (erratum: the
    printed sigma is too small for its own sensitivity). Removing a record
    moves the minimizer by at most ``G / Lambda`` and the solver is certified
    within ``tau / Lambda`` of it, so the released solution has add/remove
    sensitivity ``(G + 2 tau) / Lambda`` and ``sigma`` is that over ``mu``
    (Balle & Wang 2018, Thm 8, as Gaussian DP).

    Parameters
    ----------
    mu : float
    gradient_bound : float
        ``G``, the bound on a record's gradient.
    tolerance : float
        ``tau``, the certified gradient norm of the solver.
    ridge : float
        ``Lambda``, the ridge of the summed objective.
    """

    gradient_bound: float
    tolerance: float
    ridge: float

    @property
    def sigma(self) -> float:
        """Standard deviation of each coordinate of the noise."""
        return (self.gradient_bound + 2.0 * self.tolerance) / (self.ridge * self.mu)

    def release(self, theta: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return theta + rng.normal(0.0, self.sigma, size=theta.shape)


def count_mechanism(params: ReleaseParams) -> GaussianCount:
    """The released record count: Gaussian, sensitivity 1 (Balle & Wang 2018, Thm 8)."""
    return GaussianCount(1.0 / SHARES.count_mu(params.mu))


# ------------------------------------------------------------- configure


def check_public_params(params: ReleaseParams, row_norm: float, n_classes: int = 2) -> None:
    """Checks that need only the parameters and the label set.

    Raises ``ValueError`` when objective perturbation cannot run: with
    ``coef_bound``, or when the fixed ``C`` leaves too large a Jacobian term
    for the per-class mu (one-vs-rest splits mu over the classes).
    """
    if params.solver == "objective" and params.coef_bound is not None:
        raise ValueError("solver='objective' does not support coef_bound")
    if params.solver == "objective" and params.C != "auto":
        per_class = n_classes if n_classes > 2 else 1
        Lambda = 1.0 / (params.C * params.feature_norm**2)
        beta = row_norm**2 / 4.0
        mu_op = SHARES.objective_mu(params.mu)
        objective_perturbation_noise_mu(
            mu_op / math.sqrt(per_class), jacobian_epsilon(beta, Lambda)
        )


def _binary(loss: LinearModelLoss) -> LinearModelLoss:
    """The per-class loss of one-vs-rest."""
    return LinearModelLoss(2, loss.n_coef, loss.row_norm)


def _ridge(params: ReleaseParams, solver: str, n_public: float, loss, mu_model: float) -> float:
    if params.C == "auto":
        G, r = loss.lipschitz, loss.row_norm
        constant = getattr(_RIDGE, solver)
        return constant * (n_public * G**2 * r**2 / mu_model**2) ** (1.0 / 3.0)
    return 1.0 / (params.C * params.feature_norm**2)


def _radius(params: ReleaseParams, n_public: float, Lambda: float, loss) -> float:
    if params.coef_bound is not None:
        return float(params.coef_bound)
    # F(theta*) <= F(0) = n ln K gives Lambda/2 ||theta*||^2 <= n ln K.
    return math.sqrt(2.0 * n_public * loss.loss_at_zero / Lambda)


def configure(params: ReleaseParams, loss: LinearModelLoss, n_public: float) -> ReleaseConfig:
    """Public configuration of a batch release from the released count.

    ``solver='auto'`` follows Ullah 2024, Table 2-I (section 2.4): noisy GD
    when the number of parameters is at most ``n epsilon``, else output
    perturbation. The noise levels are those of :func:`model_mechanisms`.
    """
    n_public = max(1.0, float(n_public))
    mu = params.mu
    mu_model = SHARES.model_mu(mu)
    if params.solver == "auto":
        solver = "noisy_gd" if loss.n_params <= n_public * params.epsilon else "output"
    else:
        solver = params.solver
    G = loss.lipschitz
    Lambda = _ridge(params, solver, n_public, loss, mu_model)
    tau = params.tol * G
    common = dict(solver=solver, n_public=n_public, mu_model=mu_model)
    if solver == "objective":
        one_vs_rest = loss.n_classes > 2
        per_class = loss.n_classes if one_vs_rest else 1
        binary = _binary(loss)
        mu_op = SHARES.objective_mu(mu)
        mu_amp = SHARES.amp_mu(mu)
        mu_class = mu_op / math.sqrt(per_class)
        if params.C == "auto":
            floor = binary.smoothness / math.expm1(_JACOBIAN_FRACTION * mu_class)
            Lambda = max(Lambda, floor)
        eps_j = jacobian_epsilon(binary.smoothness, Lambda)
        tau = params.tol * binary.lipschitz
        linear = ObjectivePerturbation(mu_op, binary.lipschitz, eps_j, per_class)
        amp = ApproximateMinimaNoise(mu_amp, tau, Lambda, per_class)
        return ReleaseConfig(
            **common,
            Lambda=Lambda,
            radius=_radius(params, n_public, Lambda, loss),
            one_vs_rest=one_vs_rest,
            tau=tau,
            per_class=per_class,
            mu_op=mu_op,
            mu_amp=mu_amp,
            eps_jacobian=eps_j,
            certified_mu_class=linear.certified_mu_class,
            sigma_b=linear.sigma,
            sigma_amp=amp.sigma,
        )
    radius = _radius(params, n_public, Lambda, loss)
    if solver == "output":
        sigma = OutputPerturbation(mu_model, G, tau, Lambda).sigma
        return ReleaseConfig(**common, Lambda=Lambda, radius=radius, tau=tau, sigma=sigma)
    # noisy_gd: Gram (preconditioner) and T gradient sums share mu_model
    return ReleaseConfig(
        **common,
        Lambda=Lambda,
        radius=radius,
        tau=tau,
        n_steps=int(params.max_iter),
        gram_multiplier=1.0 / SHARES.gram_mu(mu),
        step_multiplier=math.sqrt(params.max_iter) / SHARES.steps_mu(mu),
    )


def configure_sgd(params: ReleaseParams, loss: LinearModelLoss, n_public: float) -> ReleaseConfig:
    """Public configuration of one DP-SGD pass from the chunk's released count."""
    n_public = max(1.0, float(n_public))
    mu_model = SHARES.model_mu(params.mu)
    Lambda = _ridge(params, "sgd", n_public, loss, mu_model)
    return ReleaseConfig(
        solver="sgd",
        n_public=n_public,
        mu_model=mu_model,
        Lambda=Lambda,
        radius=_radius(params, n_public, Lambda, loss),
        batch_multiplier=1.0 / mu_model,
    )


def model_mechanisms(params: ReleaseParams, config: ReleaseConfig, loss: LinearModelLoss) -> tuple:
    """The mechanism objects of a model release: they draw its noise and give
    its ledger events.

    Output perturbation: one :class:`OutputPerturbation`. Objective
    perturbation: the linear terms then the AMP noise. Noisy GD: a
    :class:`~sklearn_dpu.linear_model._noisy_gd_glm.NoisyGDRun`. DP-SGD: a
    :class:`~sklearn_dpu.linear_model._noisy_gd_glm.DisjointBatchSums`.
    """
    G = loss.lipschitz
    if config.solver == "output":
        return (OutputPerturbation(config.mu_model, G, config.tau, config.Lambda),)
    if config.solver == "objective":
        binary = _binary(loss)
        return (
            ObjectivePerturbation(
                config.mu_op, binary.lipschitz, config.eps_jacobian, config.per_class
            ),
            ApproximateMinimaNoise(config.mu_amp, config.tau, config.Lambda, config.per_class),
        )
    if config.solver == "noisy_gd":
        gram = GaussianMechanism(loss.row_norm**2, config.gram_multiplier)
        steps = GaussianSteps(G, config.step_multiplier, config.n_steps)
        return (NoisyGDRun(config.mu_model, gram, steps),)
    batches = n_batches(config.n_public, params.batch_size)
    steps = GaussianSteps(G, config.batch_multiplier, batches)
    return (DisjointBatchSums(config.mu_model, steps),)


def release_parts(params: ReleaseParams, config: ReleaseConfig, loss: LinearModelLoss) -> tuple:
    """The Gaussian-DP components of a release (count first), for group privacy."""
    count = GaussianPart("count", SHARES.count_mu(params.mu))
    if config.solver == "output":
        return (count, GaussianPart("output", config.mu_model, loss.lipschitz, config.tau))
    if config.solver == "objective":
        return (count, GaussianPart("gdp", config.mu_op), GaussianPart("fixed", config.mu_amp))
    return (count, GaussianPart("gdp", config.mu_model))


# ----------------------------------------------------------------- ledger


def _description(params: ReleaseParams, kind: str, solver: str) -> tuple[str, list[str]]:
    """Words and references of a model release (``solver`` may be ``'auto'``
    in a plan)."""
    if kind == "fit" and solver == "objective":
        words = "objective perturbation (Gaussian-DP certified) + AMP output noise"
        return words, [_OBJECTIVE_REFERENCE]
    if kind == "sgd":
        return f"one-pass DP-SGD (batch {params.batch_size}, clipped)", [_SGD_REFERENCE]
    if solver == "auto":
        words = "output perturbation or noisy GD (solver='auto', same GDP)"
        return words, [_OUTPUT_REFERENCE, _NOISY_GD_REFERENCE]
    if solver == "output":
        return "output perturbation of the certified regularized ERM", [_OUTPUT_REFERENCE]
    m_step = math.sqrt(params.max_iter) / SHARES.steps_mu(params.mu)
    m_gram = 1.0 / SHARES.gram_mu(params.mu)
    words = (
        f"Gaussian Gram matrix (multiplier {m_gram:.4g}) + preconditioned "
        f"projected noisy GD, {params.max_iter} Gaussian gradient sums with "
        f"multiplier {m_step:.4g} each"
    )
    return words, [_NOISY_GD_REFERENCE]


def chunk_release(
    params: ReleaseParams, kind: str, chunk: int, solver: str, mechanisms: tuple
) -> Release:
    """The ledger record of a chunk's release, its event read from ``mechanisms``
    (with the count's mechanism first when the count was released too).

    Events are exact Gaussian-DP equivalents (Dong, Roth & Su 2022, Cor. 3.3):
    a run of ``T`` steps with multiplier ``m`` each is one Gaussian with
    ``m / sqrt(T)``; the description gives the per-step noise.
    """
    words, references = _description(params, kind, solver)
    if isinstance(mechanisms[0], GaussianCount):
        words = f"Gaussian noisy record count + {words}"
        references = [_COUNT_REFERENCE, *references]
    return Release.of(
        mechanisms[0] if len(mechanisms) == 1 else mechanisms,
        f"{words} (chunk {chunk})",
        (chunk, chunk),
        "; ".join(references),
    )


def planned_release(params: ReleaseParams, kind: str, chunk: int) -> Release:
    """What a fit (``kind='fit'``) or a stream chunk (``'sgd'``) will add to the
    ledger, from the parameters alone: the noised count and the model, each
    known by its share of the budget (:data:`SHARES`).

    ``solver='auto'`` may become output perturbation or noisy GD, which are
    both ``mu_model``-GDP, so the events are known before the data are read;
    the ledger then names what ran (:func:`chunk_release`).
    """
    mu = params.mu
    if kind == "fit" and params.solver == "objective":
        model = (GaussianDP(SHARES.objective_mu(mu)), GaussianDP(SHARES.amp_mu(mu)))
    else:
        model = (GaussianDP(SHARES.model_mu(mu)),)
    return chunk_release(params, kind, chunk, params.solver, (count_mechanism(params), *model))


def __getattr__(name: str):
    # Format 2 of LogisticUnlearningState pickled its per-chunk models as
    # ChunkRecord; such a file is refused with the library's versioning error,
    # not an AttributeError from inside pickle.
    if name == "ChunkRecord":
        raise StateVersionError(
            "this DPLogisticRegression was saved with state format 2 (ChunkRecord); "
            "this sklearn_dpu reads format 3: refit it on the current data"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
