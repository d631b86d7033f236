"""The schedule of :class:`UnlearnableSGDClassifier`: size class, steps, batch, noise.

Everything here is a function of the estimator's parameters, the number of
features (public: the shape) and a **noised** record count ``n_noisy = n + Z``
(``Z`` Gaussian, charged to the ledger). The exact ``n`` never sets a
published quantity: at the edge of a size class (5 792 vs 5 793 rows) the
steps, batch size, sampling rate and noise would otherwise differ
deterministically between neighbouring data sets (delta = 1).

Privacy target. The run's noise multiplier is the larger of

* the smallest one for which the run (``T`` Poisson-subsampled Gaussian steps
  at rate ``q``) is ``(epsilon_run, delta_run)``-DP by the PLD accountant, and
* the one the ``recompute_rate`` needs (dissertation [U24]_ Lemma 30 with the
  exact Gaussian total variation, see
  :func:`~sklearn_dpu.unlearning.coupling.noise_for_recompute_rate`).

The count takes ``(COUNT_EPSILON_SHARE epsilon, COUNT_DELTA_SHARE delta)``
(analytic Gaussian mechanism, Balle & Wang 2018, Theorem 8) and the run the
rest, so basic composition (Dwork & Roth 2014, Theorem 3.16) bounds the fit
by ``(epsilon, delta)``; the PLD composition that ``privacy_spent_`` reports
is never above it.

Public schedule. With ``schedule_size`` (a hyper-parameter, never computed
from the data) that number replaces the noised count: no count is released,
the sampling rate is ``m / schedule_size`` and the run gets the whole
``(epsilon, delta)``. A Poisson-subsampled Gaussian step's privacy depends on
its sampling rate and multiplier only, not on how many rows there are, so
this is sound whatever the true ``n``.

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024,
   Ch. 4 and App. C.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from dp_accounting.pld import PLDAccountant

from ..base import _same
from ..privacy.accounting import NEIGHBORING_RELATION, epsilon_spent
from ..privacy.calibration import gaussian_noise_multiplier
from ..privacy.mechanisms import GaussianSteps
from ..unlearning.coupling import noise_for_recompute_rate, recompute_probability_bound
from ._auto_bounds import is_auto, model_params
from ._logistic_releases import SHARES

__all__ = [
    "BOUND_EPSILON_SHARE",
    "changed_run_params",
    "run_params",
    "COUNT_DELTA_SHARE",
    "COUNT_EPSILON_SHARE",
    "MIN_NOISY_COUNT",
    "SGDParams",
    "SGDSchedule",
    "calibrate_run",
    "check_sampling",
    "count_multiplier",
    "run_target",
    "schedule_run",
    "schedule_target",
    "size_bucket",
]

#: Shares of (epsilon, delta) spent on the noised record count.
COUNT_EPSILON_SHARE = 0.05
COUNT_DELTA_SHARE = 0.1
#: Share of epsilon spent on the released row-norm bound of
#: ``feature_norm='auto'`` (pure DP, before the count and the run): the same
#: constant as :class:`~sklearn_dpu.linear_model.DPLogisticRegression`'s.
BOUND_EPSILON_SHARE = SHARES.bounds
#: Public floor of the noised count (a tiny or negative draw is clamped to it).
MIN_NOISY_COUNT = 16.0
# Coarse PLD grid for the search, then one check on a finer one. A
# pessimistic PLD on a coarser grid rounds every privacy loss up further, so
# it dominates the finer one (and the 1e-4 grid that privacy_spent_ uses):
# a multiplier that passes here passes there.
_SEARCH_GRID = 1e-2
_CHECK_GRID = 1e-3


@dataclass(frozen=True)
class SGDParams:
    """The hyper-parameters a stored run depends on (``partial_fit`` refuses
    to change them), read once from the estimator's parameters.

    Attributes
    ----------
    loss, epsilon, recompute_rate, noise_multiplier, coupling_share, max_iter,
    batch_size, learning_rate, alpha, fit_intercept, feature_norm, solver,
    batch_sampling, delta, schedule_size
        As the parameters of
        :class:`~sklearn_dpu.linear_model.UnlearnableSGDClassifier`.
    """

    loss: str
    epsilon: float
    recompute_rate: float
    noise_multiplier: float | None
    coupling_share: float
    max_iter: Any
    batch_size: Any
    learning_rate: Any
    alpha: float
    fit_intercept: bool
    feature_norm: float
    solver: str
    batch_sampling: str
    delta: float
    schedule_size: int | None = None

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> "SGDParams":
        """The frozen fields of a ``get_params()`` mapping (others are ignored;
        a missing ``schedule_size`` is None, as before it existed)."""
        return cls(**{f.name: params[f.name] for f in fields(cls) if f.name in params})

    def as_dict(self) -> dict:
        """Name to value, for :meth:`PrivateEstimatorMixin._changed_params`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def run_params(params: Mapping[str, Any], bound: float | None) -> SGDParams:
    """The parameters the count and the run read: with ``feature_norm='auto'``
    the epsilon the bound leaves, ``(1 - BOUND_EPSILON_SHARE) epsilon``, and
    the released ``bound`` (1.0 before it is drawn: no planned event reads
    it); explicit parameters unchanged
    (:func:`~sklearn_dpu.linear_model._auto_bounds.model_params`). Raises
    ValueError for ``'auto'`` without a privacy target (``epsilon=inf``)."""
    if is_auto(params["feature_norm"]) and math.isinf(params["epsilon"]):
        raise ValueError(
            "feature_norm='auto' releases a private bound and needs a finite epsilon; "
            "with epsilon=np.inf give feature_norm explicitly"
        )
    return SGDParams.of(model_params(params, BOUND_EPSILON_SHARE, bound))


def changed_run_params(
    params: Mapping[str, Any], bound: float | None, frozen: SGDParams
) -> list[str]:
    """Names of the parameters ``params`` (with the kept ``bound``, if one was
    released) would run with differently from the stored run's ``frozen``."""
    current = run_params(params, bound).as_dict()
    changed = [name for name, value in frozen.as_dict().items() if not _same(current[name], value)]
    if is_auto(params["feature_norm"]) != (bound is not None) and "feature_norm" not in changed:
        changed.append("feature_norm")
    return changed


@dataclass(frozen=True)
class SGDSchedule:
    """The schedule of one run of noisy mini-batch SGD, from public quantities.

    Returned by :func:`schedule_run` and stored by the estimator's state; a
    function of the parameters, the number of features and a noised (or
    public) size only. Noise is in units of ``G / m`` (one record's largest
    contribution to a step's gradient).

    Attributes
    ----------
    bucket : int
        Size class :func:`size_bucket` of the reference size; an edit that
        moves the noised count out of it triggers a full refit.
    n_steps : int
        Number of SGD steps ``T``.
    batch_size : float
        Expected (Poisson) or exact (fixed) mini-batch size ``m``.
    inclusion : float
        Probability that a given row is in a step's batch (``m / n_ref``,
        at most 1).
    noise : float
        Total Gaussian noise multiplier of a step's gradient.
    noise_for_epsilon : float or None
        The multiplier the privacy target alone needs (0 with
        ``epsilon=inf``); None when ``noise_multiplier`` was given.
    coupled : float
        The part of ``noise`` the coupling test reads,
        ``noise * sqrt(coupling_share)``.
    reserve : float
        The rest, ``noise * sqrt(1 - coupling_share)``: what a tested step
        reveals about a record it shares.
    bound : float
        Upper bound on the probability that an edit recomputes
        (:func:`~sklearn_dpu.unlearning.coupling.recompute_probability_bound`).
    """

    bucket: int
    n_steps: int
    batch_size: float
    inclusion: float
    noise: float
    noise_for_epsilon: float | None
    coupled: float
    reserve: float
    bound: float


#: The name of :class:`SGDSchedule` in files of state format 2 (loaded and converted).
RunPlan = SGDSchedule


def check_sampling(params: SGDParams) -> None:
    """Fixed batches only without a privacy target (checked before any data are read)."""
    if params.batch_sampling == "fixed" and not math.isinf(params.epsilon):
        raise ValueError(
            "batch_sampling='fixed' is only offered without a privacy target "
            f"(epsilon=np.inf), got epsilon={params.epsilon!r}: uniform batches "
            "of m rows are drawn from the n real rows, so their sampling rate m/n "
            "depends on the exact, private n, which no public or noised size can "
            "bound; and its edits are not accounted. Use batch_sampling='poisson' "
            "for a private fit."
        )


def size_bucket(n: float) -> int:
    """The size class ``floor(8 log2 n)`` of a (noised) count, clamped to
    :data:`MIN_NOISY_COUNT`.

    Every size-dependent hyper-parameter depends on the count only through
    this class (sizes within a factor ``2**(1/8) ~ 1.09``): an edit that keeps
    the noised count in its class leaves the schedule of a fresh fit
    unchanged and can be coupled; one that leaves it triggers a full refit
    (a fresh fit by construction).
    """
    return int(math.floor(8.0 * math.log2(max(float(n), MIN_NOISY_COUNT)) + 1e-12))


def count_multiplier(epsilon: float, delta: float) -> float:
    """Noise (standard deviation, in rows) of the released count; 0 when epsilon is inf."""
    if math.isinf(epsilon):
        return 0.0
    return gaussian_noise_multiplier(COUNT_EPSILON_SHARE * epsilon, COUNT_DELTA_SHARE * delta)


def run_target(epsilon: float, delta: float) -> tuple[float, float]:
    """The (epsilon, delta) left for the run after the count."""
    return (1.0 - COUNT_EPSILON_SHARE) * epsilon, (1.0 - COUNT_DELTA_SHARE) * delta


def schedule_target(params: SGDParams) -> tuple[float, float]:
    """The (epsilon, delta) the run is calibrated to: the whole target with a
    public ``schedule_size`` (no count is released), else :func:`run_target`."""
    if params.schedule_size is not None:
        return float(params.epsilon), float(params.delta)
    return run_target(params.epsilon, params.delta)


def run_steps(steps: int, rate: float, multiplier: float) -> GaussianSteps:
    """The mechanism of ``steps`` Poisson-subsampled Gaussian steps at ``rate``
    (noise in units of one record's largest contribution), recorded as
    Poisson-subsampled even at rate 1."""
    return GaussianSteps(1.0, multiplier, int(steps), sampling_rate=rate, poisson_sampled=True)


def _coarse_epsilon(
    steps: int, rate: float, multiplier: float, delta: float, grid: float = _SEARCH_GRID
) -> float:
    accountant = PLDAccountant(NEIGHBORING_RELATION, value_discretization_interval=grid)
    return accountant.compose(run_steps(steps, rate, multiplier).dp_event).get_epsilon(delta)


@lru_cache(maxsize=512)
def calibrate_run(steps: int, rate: float, epsilon: float, delta: float) -> float:
    """Smallest Gaussian multiplier (to 0.5 %) making ``steps`` Poisson-subsampled
    Gaussian steps at ``rate`` (epsilon, delta)-DP (add/remove, PLD accountant).

    A bisection in ``log`` multiplier on a coarse PLD grid (pessimistic: the
    result is on the private side), then a check on a finer grid that
    raises the multiplier by 0.5 % steps if needed (it never has in our
    runs). About 0.3 s; cached by ``(steps, rate, epsilon, delta)``:
    estimator checks and searches fit many times with the same schedule.
    """
    low, high = 0.25, 1.0
    while _coarse_epsilon(steps, rate, high, delta) > epsilon:
        low, high = high, 2.0 * high
    while low > 1e-3 and _coarse_epsilon(steps, rate, low, delta) <= epsilon:
        low, high = low / 2.0, low
    while high / low > 1.005:
        mid = math.sqrt(low * high)
        if _coarse_epsilon(steps, rate, mid, delta) <= epsilon:
            high = mid
        else:
            low = mid
    while _coarse_epsilon(steps, rate, high, delta, _CHECK_GRID) > epsilon:
        high *= 1.005
    return high


def schedule_run(params: SGDParams, n_noisy: float, n_features: int | None) -> SGDSchedule:
    """Steps, batch, sampling rate and noise of a run, from public quantities.

    ``n_noisy`` is the released noised count (or, with ``epsilon=inf``, the
    exact one); only its size class is used. With a public
    ``params.schedule_size`` that number itself is the reference size
    (``n_noisy`` is ignored) and the run gets the whole privacy target.
    ``n_features`` is only read by ``max_iter="auto"`` (None is allowed
    otherwise). ``"auto"`` steps and batch size
    follow the dissertation's tunings with ``H D / G = 1``: noisy-m-SGD,
    Theorem 44, ``T = (rho n / sqrt(p))^(2/3)`` and ``m = T``;
    noisy-m-A-SGD, Theorem 22, ``T = (rho n / sqrt(p))^(2/5)`` and
    ``m = T^3``; ``p`` is the number of coefficients per output and ``rho``
    the ``recompute_rate``. Noise is in units of ``G / m`` (one record's
    largest contribution to a step's gradient); the coupling shift is 1 such
    unit for Poisson batches (a row comes or goes) and 2 for fixed ones (a
    row is replaced).
    """
    share = params.coupling_share
    schedule = params.schedule_size
    if schedule is not None:
        bucket, n_ref = size_bucket(schedule), float(schedule)
    else:
        bucket = size_bucket(n_noisy)
        n_ref = 2.0 ** (bucket / 8.0)
    accelerated = params.solver == "nesterov"
    if params.max_iter == "auto":
        if n_features is None:
            raise ValueError("max_iter='auto' needs the number of features")
        scale = max(
            1.0,
            params.recompute_rate * n_ref / math.sqrt(n_features + params.fit_intercept),
        )
        T = int(math.ceil(scale ** (0.4 if accelerated else 2.0 / 3.0)))
    else:
        T = int(params.max_iter)
    if params.batch_size == "auto":
        requested = float(T**3 if accelerated else T)
    else:
        requested = float(params.batch_size)
    if params.batch_sampling == "poisson":
        m = min(requested, n_ref)
        inclusion, shift, accounted = m / n_ref, 1.0, 1.0
    else:
        # Auto batches stay below half the size class, so that a noised count
        # above the true size rarely asks for more rows than there are.
        m = float(
            max(1, min(int(requested), int(n_ref // 2)))
            if params.batch_size == "auto"
            else requested
        )
        # Each fixed-batch step is dominated by a Poisson-subsampled Gaussian
        # at rate m / n_ref with half the multiplier (replace-one shift 2).
        inclusion, shift, accounted = min(1.0, m / n_ref), 2.0, 0.5
    epsilon = params.epsilon
    if params.noise_multiplier is not None:
        total = float(params.noise_multiplier)
        for_epsilon = None
    else:
        for_recompute = noise_for_recompute_rate(
            params.recompute_rate, T, inclusion, shift
        ) / math.sqrt(share)
        for_epsilon = 0.0
        if not math.isinf(epsilon):
            eps_run, delta_run = schedule_target(params)
            for_epsilon = calibrate_run(T, float(inclusion), eps_run, delta_run) / accounted
        total = max(for_recompute, for_epsilon)
    coupled = total * math.sqrt(share)
    return SGDSchedule(
        bucket=bucket,
        n_steps=T,
        batch_size=m,
        inclusion=inclusion,
        noise=total,
        noise_for_epsilon=for_epsilon,
        coupled=coupled,
        reserve=total * math.sqrt(max(0.0, 1.0 - share)),
        bound=recompute_probability_bound(coupled, T, inclusion, shift),
    )


def worst_case_run_epsilon(params: SGDParams, delta: float) -> float:
    """Epsilon at ``delta`` that bounds a run with an explicit ``noise_multiplier``
    over every noised count: ``T = max_iter`` and the largest sampling rate
    (at the public floor of the size class). ``inf`` when ``max_iter="auto"``
    (``T`` grows with the count) or without noise."""
    total = float(params.noise_multiplier)
    if params.max_iter == "auto" or total <= 0 or params.batch_sampling == "fixed":
        return math.inf  # fixed batches: the rate m / n depends on the exact n
    T = int(params.max_iter)
    accelerated = params.solver == "nesterov"
    requested = (
        float(T**3 if accelerated else T)
        if params.batch_size == "auto"
        else float(params.batch_size)
    )
    schedule = params.schedule_size
    n_floor = (
        float(schedule) if schedule is not None else 2.0 ** (size_bucket(MIN_NOISY_COUNT) / 8.0)
    )
    rate = min(1.0, requested / n_floor)
    multiplier = total if params.batch_sampling == "poisson" else total / 2.0
    return epsilon_spent([run_steps(T, rate, multiplier).dp_event], delta)
