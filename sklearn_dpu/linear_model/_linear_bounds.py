"""Bounds :class:`~sklearn_dpu.linear_model.DPLinearRegression` estimates itself
when ``feature_norm="auto"`` or ``target_bound="auto"``: a charged release.

The data's units are unknown, so a small share of epsilon (:data:`AUTO_BOUNDS`,
defined once) releases them privately, and the rest pays the Gaussian release
of the statistics:

* for every feature ``j`` (``feature_norm="auto"``): a center ``c_j`` (a
  private median over a signed geometric grid, only with an intercept: without
  one the model cannot absorb a shift) and a scale ``s_j`` (a private quantile
  of ``|x_j - c_j|`` over a positive grid). Rows are then mapped to
  ``z = clip((x - c) / s, -1, 1)``, whose L2 norm is at most ``sqrt(d)``: the
  public row bound of the statistics;
* for the target (``target_bound="auto"``): a center (private median) and a
  half-range (private quantile of ``|y - center|``); targets are clipped to
  ``center +- half_range``.

Each selection is the exponential mechanism over a public grid with a rank
utility ([DR14]_ Thm 3.10, after [Smi11]_ and [GJK21]_;
:mod:`sklearn_dpu.privacy.quantiles`), ``eps_b / k``-DP for ``k`` selections,
so the whole bounds release is ``(eps_b, 0)``-DP by basic composition
([DR14]_ Thm 3.16). The Gaussian release that follows is post-processing of
the bounds and a Gaussian mechanism on the statistics clipped to them; its
noise multiplier is the smallest for which the ``k`` pure-DP events and the
Gaussian event compose to at most ``(epsilon, delta)`` under the PLD
accountant of ``privacy_spent_`` (each pure-DP event is composed as binary
randomized response, which dominates every pure-DP mechanism under
composition, [KOV15]_ Thm 3.5; many small selections then cost the
Gaussian part much less than ``eps_b``).

References
----------
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of differential
   privacy", 2014, Theorem 3.10 (exponential mechanism) and Theorem 3.16
   (basic composition).
.. [Smi11] A. Smith, "Privacy-preserving statistical estimation with optimal
   convergence rates", STOC 2011.
.. [GJK21] J. Gillenwater, M. Joseph and A. Kulesza, "Differentially private
   quantiles", ICML 2021.
.. [KOV15] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for
   differential privacy", ICML 2015, Theorem 3.5.
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from dp_accounting import dp_event

from ..privacy.accounting import epsilon_spent
from ..privacy.calibration import gaussian_noise_multiplier
from ..privacy.ledger import Release
from ..privacy.mechanisms import pure_dp_event
from ..privacy.quantiles import (
    GeometricGrid,
    PrivateQuantile,
    private_column_quantiles,
    private_norm_bound,
)
from ._noisy_gd import gd_mechanisms

__all__ = [
    "AUTO",
    "AUTO_BOUNDS",
    "AutoBoundsShares",
    "BoundsRecipe",
    "ReleasedBounds",
    "auto_noise_multiplier",
    "bounds_recipe",
    "published_bounds",
    "rescale_features",
]

#: The parameter value that asks for privately estimated bounds.
AUTO = "auto"

BOUNDS_REFERENCE = (
    "exponential mechanism (Dwork & Roth 2014, Thm 3.10) with a rank utility on the cells "
    "of a public geometric grid, add/remove sensitivity max(q, 1 - q) (after Smith 2011; "
    "Gillenwater, Joseph & Kulesza 2021); k selections at eps_b / k, basic composition "
    "(Dwork & Roth 2014, Thm 3.16)"
)


@dataclass(frozen=True)
class AutoBoundsShares:
    """How ``"auto"`` bounds are estimated: the one place their shares are set.

    Attributes
    ----------
    bounds_share : float
        Share of ``epsilon`` given to the bounds release (``eps_b``); the
        Gaussian release of the statistics is calibrated for what remains
        under the accountant.
    target_share : float
        Share of ``eps_b`` given to the target's two selections when the
        features' bounds are estimated too (else the one that is estimated
        gets all of ``eps_b``).
    feature_quantile : float
        Quantile of ``|x_j - c_j|`` used as the feature scale.
    target_quantile : float
        Quantile of ``|y - center|`` used as the target's half-range.
    norm_quantile : float
        Quantile of the rescaled rows' L2 norms used as their bound.
    lower, upper : float
        Public limits of the grids (of scales and of ``|center|``).
    scale_ratio : float
        Ratio of the grid of scales (a scale is rounded up by at most it).
    center_ratio : float
        Ratio of the signed grid of centers (a center is off by at most this
        relative factor of its value, so it is finer than ``scale_ratio``).
    """

    bounds_share: float = 0.5
    target_share: float = 0.3
    feature_quantile: float = 0.95
    target_quantile: float = 0.95
    norm_quantile: float = 0.95
    lower: float = 1e-3
    upper: float = 1e6
    scale_ratio: float = 1.25
    center_ratio: float = 1.1

    def scale_grid(self) -> GeometricGrid:
        return GeometricGrid(self.lower, self.upper, self.scale_ratio)

    def center_grid(self) -> GeometricGrid:
        return GeometricGrid(self.lower, self.upper, self.center_ratio, signed=True)


#: The shares every ``"auto"`` fit uses.
AUTO_BOUNDS = AutoBoundsShares()


@dataclass(frozen=True)
class ReleasedBounds:
    """The bounds one fit released (``None`` where a public bound was given).

    Attributes
    ----------
    feature_center, feature_scale : ndarray of shape (n_features,) or None
    row_norm : float or None
        The bound rescaled rows are clipped to (at most ``sqrt(n_features)``).
    target_center, target_half_range : float or None
    epsilon : float
        ``eps_b``: the bounds are an ``(eps_b, 0)``-DP release.
    """

    feature_center: np.ndarray | None
    feature_scale: np.ndarray | None
    row_norm: float | None
    target_center: float | None
    target_half_range: float | None
    epsilon: float


@dataclass(frozen=True)
class BoundsRecipe:
    """The selections of one bounds release, ``epsilon / k``-DP each.

    Attributes
    ----------
    epsilon : float
        ``eps_b`` of the whole release.
    feature_centers, feature_scales : tuple of PrivateQuantile
        One per feature each (no centers without an intercept); empty for a
        public ``feature_norm``.
    target : tuple of PrivateQuantile
        The target's center and half-range (half-range only without an
        intercept); empty for a public ``target_bound``.
    """

    epsilon: float
    feature_centers: tuple[PrivateQuantile, ...]
    feature_scales: tuple[PrivateQuantile, ...]
    row_norm: tuple[PrivateQuantile, ...]
    target: tuple[PrivateQuantile, ...]

    @property
    def mechanisms(self) -> tuple[PrivateQuantile, ...]:
        return (*self.feature_centers, *self.feature_scales, *self.row_norm, *self.target)

    @property
    def events(self) -> list[dp_event.DpEvent]:
        return [m.dp_event for m in self.mechanisms]

    def release(self) -> Release:
        """The ledger record of the bounds (chunk 1: they are frozen for a stream)."""
        parts = []
        if self.feature_scales:
            centered = "median and " if self.feature_centers else ""
            parts.append(
                f"private {centered}scale of each of {len(self.feature_scales)} features, "
                "quantile of the rescaled row norms"
            )
        if self.target:
            parts.append(
                "private center and half-range of the target"
                if len(self.target) == 2
                else "private half-range of the target"
            )
        return Release.of(
            list(self.mechanisms),
            f"{' and '.join(parts)} (eps_b={self.epsilon:.4g})",
            (1, 1),
            BOUNDS_REFERENCE,
        )

    def draw(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> ReleasedBounds:
        """Release the bounds of ``(X, y)``, every selection from ``rng`` in a fixed order."""
        center = scale = norm = t_center = t_half = None
        if self.feature_scales:
            center = np.zeros(X.shape[1])
            if self.feature_centers:
                center = private_column_quantiles(X, self.feature_centers, rng)
            scale = private_column_quantiles(np.abs(X - center), self.feature_scales, rng)
            rescaled = rescale_features(X, center, scale)
            # A rescaled row is at most sqrt(d) long: a larger release clips nothing.
            norm = min(
                private_norm_bound(rescaled, self.row_norm[0], rng), float(np.sqrt(X.shape[1]))
            )
        if self.target:
            y2 = np.asarray(y, dtype=np.float64).reshape(-1, 1)
            t_center = 0.0
            if len(self.target) == 2:
                t_center = float(private_column_quantiles(y2, self.target[:1], rng)[0])
            t_half = float(
                private_column_quantiles(np.abs(y2 - t_center), self.target[-1:], rng)[0]
            )
        return ReleasedBounds(center, scale, norm, t_center, t_half, self.epsilon)


def bounds_recipe(
    n_features: int,
    epsilon: float,
    *,
    auto_features: bool,
    auto_target: bool,
    fit_intercept: bool,
    shares: AutoBoundsShares = AUTO_BOUNDS,
) -> BoundsRecipe:
    """The bounds release of a fit with total budget ``epsilon``.

    ``eps_b = shares.bounds_share * epsilon``; with both kinds estimated the
    target gets ``shares.target_share`` of it. Within a kind, the selections
    share equally (basic composition).
    """
    eps_b = shares.bounds_share * float(epsilon)
    eps_target = eps_b if not auto_features else shares.target_share * eps_b
    eps_features = eps_b - eps_target if auto_target else eps_b
    centers = scales = norm = target = ()
    if auto_features:
        k = n_features * (2 if fit_intercept else 1) + 1
        each = eps_features / k
        norm = (PrivateQuantile(each, shares.norm_quantile, shares.scale_grid()),)
        if fit_intercept:
            centers = tuple(
                PrivateQuantile(each, 0.5, shares.center_grid()) for _ in range(n_features)
            )
        scales = tuple(
            PrivateQuantile(each, shares.feature_quantile, shares.scale_grid())
            for _ in range(n_features)
        )
    if auto_target:
        scale = PrivateQuantile(
            eps_target / (1 + fit_intercept), shares.target_quantile, shares.scale_grid()
        )
        if fit_intercept:
            center = PrivateQuantile(eps_target / 2, 0.5, shares.center_grid())
            target = (center, scale)
        else:
            target = (scale,)
    return BoundsRecipe(eps_b, centers, scales, norm, target)


def auto_noise_multiplier(
    recipe: BoundsRecipe, epsilon: float, delta: float, gd_steps: int = 0
) -> float:
    """Gaussian noise multiplier of the statistics' release after ``recipe``.

    The smallest multiplier ``m`` (to a relative 1e-4, rounded up) such that
    the bounds' pure-DP events and the statistics' events at ``m`` compose to
    at most ``(epsilon, delta)`` under the accountant that states
    ``privacy_spent_`` (:func:`~sklearn_dpu.privacy.accounting.epsilon_spent`,
    PLD): one Gaussian event for ``'ssp'``, or the events noisy GD records
    (``gd_steps`` gradient sums and a count, which split ``m``) — calibrating
    those on the single Gaussian they equal in theory overshot epsilon by
    the PLD's discretization. ``calibrate_noise_multiplier`` solves the same
    problem with a fixed fine PLD grid, whose memory explodes at a large
    epsilon.
    """
    return _auto_noise_multiplier(
        tuple(float(m.epsilon) for m in recipe.mechanisms),
        float(epsilon),
        float(delta),
        int(gd_steps),
    )


def _statistics_events(multiplier: float, gd_steps: int) -> list:
    if not gd_steps:
        return [dp_event.GaussianDpEvent(multiplier)]
    steps, count = gd_mechanisms(multiplier, gd_steps, 1.0, 1.0)
    return [steps.dp_event, count.dp_event]


@lru_cache(maxsize=64)
def _auto_noise_multiplier(
    pure: tuple[float, ...], epsilon: float, delta: float, gd_steps: int
) -> float:
    pure_events = [pure_dp_event(e) for e in pure]

    def spent(multiplier):
        return epsilon_spent([*pure_events, *_statistics_events(multiplier, gd_steps)], delta)

    # Bisection on the accountant that states privacy_spent_ (its PLD step is
    # chosen for the composed events, so a large epsilon stays cheap), from a
    # bracket: the Gaussian alone at (epsilon, delta) is a lower bound, as the
    # bounds' events only add privacy loss.
    low = gaussian_noise_multiplier(epsilon, delta)
    high = 2.0 * low
    while spent(high) > epsilon:
        low, high = high, 2.0 * high
    for _ in range(40):
        if high - low <= 1e-4 * high:
            break
        middle = 0.5 * (low + high)
        if spent(middle) > epsilon:
            low = middle
        else:
            high = middle
    return float(high)


def rescale_features(X: np.ndarray, center: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``clip((X - center) / scale, -1, 1)``: rows of L2 norm at most ``sqrt(d)``.

    An overflow to infinity is clipped like any large value, without a
    warning (whose presence would depend on the data)."""
    with np.errstate(over="ignore"):
        return np.clip((np.asarray(X, dtype=np.float64) - center) / scale, -1.0, 1.0)


def published_bounds(bounds: "ReleasedBounds | None") -> dict:
    """The fitted attributes of released bounds (DP releases): ``feature_center_``
    and ``feature_scale_`` if the features' bounds were estimated,
    ``target_interval_`` if the target's was; nothing for public bounds."""
    if bounds is None:
        return {}
    attributes = {}
    if bounds.feature_scale is not None:
        attributes["feature_center_"] = bounds.feature_center.copy()
        attributes["feature_scale_"] = bounds.feature_scale.copy()
    if bounds.target_half_range is not None:
        attributes["target_interval_"] = (
            bounds.target_center - bounds.target_half_range,
            bounds.target_center + bounds.target_half_range,
        )
    return attributes
