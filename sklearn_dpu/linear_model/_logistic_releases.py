"""Release recipes of :class:`~sklearn_dpu.linear_model.DPLogisticRegression`.

The estimator chooses a solver once per release and calls the functions of
this module on explicit values: the public parameters (:class:`ReleaseParams`),
the loss (number of classes, coefficients per class, row norm), the released
record count and the normalized rows. Each returns small frozen records whose
docstrings state what every field means:

* :func:`configure` / :func:`configure_sgd` turn public quantities into the
  noise levels, ridge and projection radius of one release
  (:class:`ReleaseConfig`);
* :func:`fit_chunk` (output perturbation, objective perturbation, noisy GD)
  and :func:`sgd_chunk` (one DP-SGD pass) run a release and return the
  :class:`ChunkRecord` the unlearning state keeps, with its Gaussian-DP
  components (:class:`GaussianPart`) for group privacy;
* :func:`planned_release` is the ledger's :class:`~sklearn_dpu.privacy.ledger.Release`
  of a chunk, computable from the parameters alone.

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
from dataclasses import dataclass

import numpy as np
from dp_accounting import dp_event

from ..privacy.calibration import gaussian_noise_multiplier
from ..privacy.ledger import Release
from ._certified_minimize import certified_minimize
from ._losses import LinearModelLoss
from ._noisy_gd_glm import dp_sgd_pass, noisy_projected_gd_glm, released_preconditioner
from ._objective_perturbation import (
    jacobian_epsilon,
    objective_perturbation_mu,
    objective_perturbation_noise_mu,
)

__all__ = [
    "ChunkRecord",
    "GaussianPart",
    "ReleaseConfig",
    "ReleaseParams",
    "check_public_params",
    "configure",
    "configure_sgd",
    "fit_chunk",
    "noisy_count",
    "planned_release",
    "sgd_chunk",
]

# Shares of the GDP precision mu^2 of one release. The count fixes public
# sizes (ridge, solver, step sizes, batches); the AMP share covers the
# solver's tolerance in objective perturbation.
_COUNT_SHARE = 0.05
_AMP_SHARE = 0.01
# Noisy GD: share of the released Gram matrix behind its preconditioner.
_GRAM_SHARE = 0.10
# Objective perturbation: the ridge is raised until the Jacobian term
# log(1 + beta/Lambda) is at most this fraction of the per-class mu.
_JACOBIAN_FRACTION = 0.05
# C='auto': Lambda = _RIDGE[solver] * (n * G^2 * r^2 / mu^2) ** (1/3), the
# balance of ridge bias (Lambda/2n) D^2 against the noise's second-order loss
# (beta/2) sigma^2 r^2 with sigma = G / (Lambda mu) (Ullah 2024, Ch. 2, the
# regularization that balances bias and noise), the unknown ||w*||^(2/3)
# folded into the constant.
# Constants chosen on synthetic data (benchmarks/tune_dp_logistic.py), never on
# the evaluation sets.
_RIDGE = {"output": 1.0, "objective": 0.1, "noisy_gd": 0.03, "sgd": 0.03}

_REFERENCES = {
    "count": ("Gaussian mechanism on the record count, sensitivity 1 (Balle & Wang 2018, Thm 8)"),
    "output": (
        "output perturbation of the regularized ERM (Ullah 2024, PhD thesis, Alg. 3 / "
        "Thm 12) with its noise corrected (erratum: the printed sigma is too small "
        "for its own sensitivity) and add/remove sensitivity "
        "(G + 2 tol) / Lambda"
    ),
    "objective": (
        "objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Thm 9; Kifer, "
        "Smith & Thakurta 2012, Thm 2) accounted as mu'-GDP, see "
        "sklearn_dpu.linear_model._objective_perturbation; approximate minima "
        "perturbation (Iyengar et al. 2019, Alg. 1) for the solver tolerance"
    ),
    "noisy_gd": (
        "projected noisy GD (Ullah 2024, PhD thesis, Alg. 1 / Thm 8; errata: gradient "
        "in the update, loop from w_0 = 0), T Gaussian gradient sums composed exactly "
        "(Dong, Roth & Su 2022, "
        "Cor. 3.3)"
    ),
    "sgd": (
        "one-pass DP-SGD with per-example clipping (Abadi et al. 2016, Alg. 1), "
        "one noisy batch sum per record"
    ),
}


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
class ChunkRecord:
    """One arrival chunk of the unlearning state and its latest release.

    ``fit`` is chunk 1, each ``partial_fit`` the next.

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
        mu = params.mu
        per_class = n_classes if n_classes > 2 else 1
        Lambda = 1.0 / (params.C * params.feature_norm**2)
        beta = row_norm**2 / 4.0
        mu_op = math.sqrt(1.0 - _COUNT_SHARE - _AMP_SHARE) * mu
        objective_perturbation_noise_mu(
            mu_op / math.sqrt(per_class), jacobian_epsilon(beta, Lambda)
        )


def _binary(loss: LinearModelLoss) -> LinearModelLoss:
    """The per-class loss of one-vs-rest."""
    return LinearModelLoss(2, loss.n_coef, loss.row_norm)


def _ridge(params: ReleaseParams, solver: str, n_public: float, loss, mu_model: float) -> float:
    if params.C == "auto":
        G, r = loss.lipschitz, loss.row_norm
        return _RIDGE[solver] * (n_public * G**2 * r**2 / mu_model**2) ** (1.0 / 3.0)
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
    perturbation.
    """
    n_public = max(1.0, float(n_public))
    mu = params.mu
    mu_model = math.sqrt(1.0 - _COUNT_SHARE) * mu
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
        mu_op = math.sqrt(1.0 - _COUNT_SHARE - _AMP_SHARE) * mu
        mu_amp = math.sqrt(_AMP_SHARE) * mu
        mu_class = mu_op / math.sqrt(per_class)
        if params.C == "auto":
            floor = binary.smoothness / math.expm1(_JACOBIAN_FRACTION * mu_class)
            Lambda = max(Lambda, floor)
        eps_j = jacobian_epsilon(binary.smoothness, Lambda)
        noise_mu = objective_perturbation_noise_mu(mu_class, eps_j)
        tau = params.tol * binary.lipschitz
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
            certified_mu_class=objective_perturbation_mu(noise_mu, eps_j),
            sigma_b=binary.lipschitz / noise_mu,
            sigma_amp=(2.0 * tau / Lambda) / (mu_amp / math.sqrt(per_class)),
        )
    radius = _radius(params, n_public, Lambda, loss)
    if solver == "output":
        sigma = (G + 2.0 * tau) / (Lambda * mu_model)
        return ReleaseConfig(**common, Lambda=Lambda, radius=radius, tau=tau, sigma=sigma)
    # noisy_gd: Gram (preconditioner) and T gradient sums share mu_model
    mu_gram = math.sqrt(_GRAM_SHARE) * mu
    mu_steps = math.sqrt(1.0 - _COUNT_SHARE - _GRAM_SHARE) * mu
    return ReleaseConfig(
        **common,
        Lambda=Lambda,
        radius=radius,
        tau=tau,
        n_steps=int(params.max_iter),
        gram_multiplier=1.0 / mu_gram,
        step_multiplier=math.sqrt(params.max_iter) / mu_steps,
    )


def configure_sgd(params: ReleaseParams, loss: LinearModelLoss, n_public: float) -> ReleaseConfig:
    """Public configuration of one DP-SGD pass from the chunk's released count."""
    n_public = max(1.0, float(n_public))
    mu_model = math.sqrt(1.0 - _COUNT_SHARE) * params.mu
    Lambda = _ridge(params, "sgd", n_public, loss, mu_model)
    return ReleaseConfig(
        solver="sgd",
        n_public=n_public,
        mu_model=mu_model,
        Lambda=Lambda,
        radius=_radius(params, n_public, Lambda, loss),
        batch_multiplier=1.0 / mu_model,
    )


def release_parts(params: ReleaseParams, config: ReleaseConfig, loss) -> tuple:
    """The Gaussian-DP components of a release (count first), for group privacy."""
    count = GaussianPart("count", math.sqrt(_COUNT_SHARE) * params.mu)
    if config.solver == "output":
        return (count, GaussianPart("output", config.mu_model, loss.lipschitz, config.tau))
    if config.solver == "objective":
        return (count, GaussianPart("gdp", config.mu_op), GaussianPart("fixed", config.mu_amp))
    return (count, GaussianPart("gdp", config.mu_model))


def noisy_count(params: ReleaseParams, n: int, rng) -> float:
    """The released record count: Gaussian, sensitivity 1 (Balle & Wang 2018, Thm 8)."""
    return n + rng.normal(0.0, 1.0 / (math.sqrt(_COUNT_SHARE) * params.mu))


# --------------------------------------------------------------- releases


def _solve_output(config, loss, A, y_index, rng, coef_bound, theta0, max_iter):
    """Output perturbation of the certified regularized ERM (Ullah 2024, Alg. 3 /
    Thm 12, noise corrected)."""
    solution = certified_minimize(
        loss,
        A,
        loss.encode_labels(y_index),
        config.Lambda,
        config.tau,
        radius=coef_bound,
        theta0=theta0,
        max_iter=max_iter,
    )
    theta = solution.theta + rng.normal(0.0, config.sigma, size=loss.n_params)
    return theta, solution.n_grad


def _solve_objective(config, loss, A, y_index, rng, theta0, max_iter):
    """Objective perturbation (Chaudhuri et al. 2011, Thm 9; Kifer et al. 2012,
    Thm 2) with AMP output noise (Iyengar et al. 2019, Alg. 1), one-vs-rest
    for more than two classes."""
    binary = _binary(loss)
    K, p = loss.n_classes, binary.n_params
    classes = range(K) if config.one_vs_rest else [1]
    thetas, n_grad = [], 0
    for j, k in enumerate(classes):
        b = rng.normal(0.0, config.sigma_b, size=p)
        start = None
        if theta0 is not None:
            start = theta0.reshape(-1, p)[j] if config.one_vs_rest else theta0
        solution = certified_minimize(
            binary,
            A,
            np.where(y_index == k, 1.0, -1.0),
            config.Lambda,
            config.tau,
            linear=b,
            theta0=start,
            max_iter=max_iter,
        )
        thetas.append(solution.theta + rng.normal(0.0, config.sigma_amp, size=p))
        n_grad += solution.n_grad
    return np.concatenate(thetas), n_grad


def _solve_noisy_gd(config, loss, A, y_index, rng):
    """Preconditioned projected noisy GD (Ullah 2024, Alg. 1 / Thm 8)."""
    preconditioner = released_preconditioner(loss, A, config.Lambda, config.gram_multiplier, rng)
    theta = noisy_projected_gd_glm(
        loss,
        A,
        loss.encode_labels(y_index),
        Lambda=config.Lambda,
        n_steps=config.n_steps,
        noise_multiplier=config.step_multiplier,
        preconditioner=preconditioner,
        radius=config.radius,
        rng=rng,
    )
    # The Gram matrix costs about p row-gradients per row.
    return theta, config.n_steps + loss.n_coef


def fit_chunk(
    params: ReleaseParams,
    loss: LinearModelLoss,
    A: np.ndarray,
    y_index: np.ndarray,
    n_noisy: float,
    rng,
    theta0: np.ndarray | None = None,
    max_iter: int | None = None,
) -> tuple[ChunkRecord, int]:
    """Batch release of chunk 1 on normalized rows ``A`` given its released count.

    The solver is chosen once, by :func:`configure`. Returns the chunk record
    and the realized number of row-gradient evaluations (data-dependent: not
    kept, not published).
    """
    config = configure(params, loss, n_noisy)
    cap = params.max_iter if max_iter is None else max_iter
    if config.solver == "output":
        theta, n_grad = _solve_output(config, loss, A, y_index, rng, params.coef_bound, theta0, cap)
    elif config.solver == "objective":
        theta, n_grad = _solve_objective(config, loss, A, y_index, rng, theta0, cap)
    else:
        theta, n_grad = _solve_noisy_gd(config, loss, A, y_index, rng)
    # Only public iteration counts are kept: a certified solve's count depends
    # on the data (Chourasia & Shah: no un-noised data-dependent value in the
    # state), so it is reported as one release.
    n_iter = int(config.n_steps) if config.solver == "noisy_gd" else 1
    parts = release_parts(params, config, loss)
    return ChunkRecord("fit", float(n_noisy), 0, config, parts, theta, n_iter), n_grad


def sgd_chunk(
    params: ReleaseParams,
    loss: LinearModelLoss,
    A: np.ndarray,
    y_index: np.ndarray,
    n_noisy: float,
    theta0: np.ndarray,
    rng,
) -> tuple[ChunkRecord, int]:
    """One DP-SGD pass with per-example clipping (Abadi et al. 2016, Alg. 1) on
    a streamed chunk, from ``theta0``."""
    config = configure_sgd(params, loss, n_noisy)
    theta, n_batches = dp_sgd_pass(
        loss,
        A,
        loss.encode_labels(y_index),
        theta0,
        n_public=config.n_public,
        batch_size=params.batch_size,
        Lambda=config.Lambda,
        noise_multiplier=config.batch_multiplier,
        radius=config.radius,
        rng=rng,
    )
    parts = release_parts(params, config, loss)
    return ChunkRecord("sgd", float(n_noisy), 0, config, parts, theta, int(n_batches)), 1


def planned_release(
    params: ReleaseParams, kind: str, chunk: int, with_count: bool, solver: str | None = None
) -> Release:
    """The release of a chunk, computable from parameters only.

    Before any data is read ``solver`` is the parameter (``'auto'`` may
    become output perturbation or noisy GD, which are both
    ``mu_model``-GDP, so the events are known); afterwards the record names
    what ran. Events are exact Gaussian-DP equivalents (Dong, Roth & Su 2022,
    Cor. 3.3): a run of ``T`` steps with multiplier ``m`` each is one Gaussian
    with ``m / sqrt(T)``; the description gives the per-step noise.
    """
    solver = params.solver if solver is None else solver
    mu = params.mu
    mu_model = math.sqrt(1.0 - _COUNT_SHARE) * mu
    events, words, references = [], [], []
    if with_count:
        events.append(dp_event.GaussianDpEvent(1.0 / (math.sqrt(_COUNT_SHARE) * mu)))
        words.append("Gaussian noisy record count")
        references.append(_REFERENCES["count"])
    if kind == "fit" and solver == "objective":
        mu_op = math.sqrt(1.0 - _COUNT_SHARE - _AMP_SHARE) * mu
        events.append(dp_event.GaussianDpEvent(1.0 / mu_op))
        events.append(dp_event.GaussianDpEvent(1.0 / (math.sqrt(_AMP_SHARE) * mu)))
        words.append("objective perturbation (Gaussian-DP certified) + AMP output noise")
        references.append(_REFERENCES["objective"])
    else:
        events.append(dp_event.GaussianDpEvent(1.0 / mu_model))
        if kind == "sgd":
            words.append(f"one-pass DP-SGD (batch {params.batch_size}, clipped)")
            references.append(_REFERENCES["sgd"])
        elif solver == "auto":
            words.append("output perturbation or noisy GD (solver='auto', same GDP)")
            references += [_REFERENCES["output"], _REFERENCES["noisy_gd"]]
        elif solver == "output":
            words.append("output perturbation of the certified regularized ERM")
            references.append(_REFERENCES["output"])
        else:
            mu_steps = math.sqrt(1.0 - _COUNT_SHARE - _GRAM_SHARE) * mu
            m_step = math.sqrt(params.max_iter) / mu_steps
            m_gram = 1.0 / (math.sqrt(_GRAM_SHARE) * mu)
            words.append(
                f"Gaussian Gram matrix (multiplier {m_gram:.4g}) + preconditioned "
                f"projected noisy GD, {params.max_iter} Gaussian gradient sums with "
                f"multiplier {m_step:.4g} each"
            )
            references.append(_REFERENCES["noisy_gd"])
    return Release(
        " + ".join(words) + f" (chunk {chunk})",
        dp_event.ComposedDpEvent(events) if len(events) > 1 else events[0],
        (chunk, chunk),
        "; ".join(references),
    )
