"""Bounds :class:`~sklearn_dpu.linear_model.DPLinearRegression` estimates itself
when ``feature_norm="auto"`` or ``target_bound="auto"``: a charged release.

The data's units are unknown, so a share ``eps_b`` of epsilon (:data:`AUTO_BOUNDS`,
defined once) releases them privately, and the rest pays the Gaussian release
of the statistics.

The features (``feature_norm="auto"``). A noisy row count (the Laplace
mechanism, [DR14]_ Thm 3.6) first chooses one of two designs
(:func:`draw_bounds`):

* per-feature, when the rows are many enough for ``2 d + 1`` selections: for
  every feature ``j`` a center ``c_j`` (a private median over a fine signed
  geometric grid, only with an intercept: without one the model cannot absorb
  a shift) and a scale ``s_j`` (3 times a spread: a private median of
  ``|x_j - c_j|`` over the rows off the center, and at least the center's
  resolution; see below); rows are mapped to ``z = clip((x - c) / s, -1, 1)``
  and clipped to a private quantile of their norms (at most ``sqrt(d)``).
  Features whose scales differ by orders of magnitude then weigh alike;
* pooled, otherwise: one private median of the raw rows' norms
  (``feature_norm_``), which the rows are clipped to as an explicit bound
  would be. With few rows, ``2 d + 1`` selections would each come out close
  to uniform over the grid, and one reliable bound serves the model better.

The target (``target_bound="auto"``): a center (private median) and a
half-range (3 times a private median of ``|y - center|`` over the targets not
exactly at the center); targets are clipped to ``center +- half_range``.

A feature's spread leaves out the rows at its center, those in the grid cell
the released center stands for, ``[c - w, c]``
(:func:`~sklearn_dpu.privacy.quantiles.private_column_spreads`, which says
why), and is at least ``w``. Counting them gave R^2 of -600 with a 0/1 column
whose ones are 30% of the rows, and below -7 on ``load_diabetes`` (its ``sex``
column takes two values) from epsilon 100 on. The center's grid is fine (``w``
is 0.1% of the center) so that the cell holds a point mass but rarely a
feature's other rows: with 1% cells, years 2015-2020 or latitudes within 0.1
degree lost their rows to the cell (R^2 0.93 -> 0.25). Without an intercept
the center is 0, public, and only the rows exactly at 0 are left out (a 0/1
column again). A feature whose rows all lie in ``[c - w, c]`` has no row off
the center: its spread is then a draw uniform over the grid, floored at ``w``
(the feature is kept unclipped, possibly at a coarse scale); a value held by a
few rows only (a rare 0/1 column) leaves few rows off the center, and the
spread of so few is unreliable. The target's spread leaves out only the
targets exactly at the center (a mostly-zero target, centered at 0): its
center's grid is coarse (9% cells, which hold every target of many data
sets), and a target clipped too close costs accuracy, not the extrapolation a
feature's clip causes.

Each selection is the exponential mechanism over a public grid with a rank
utility ([DR14]_ Thm 3.10, after [Smi11]_ and [GJK21]_;
:mod:`sklearn_dpu.privacy.quantiles`); a spread is a median times a public
factor, not a high quantile, which the mechanism finds unreliably (the many
grid cells above the data cost only ``(1 - q) n`` ranks). The count and the
selections are pure DP and together ``(eps_b, 0)``-DP by basic composition
([DR14]_ Thm 3.16). The Gaussian release that follows is post-processing of
the bounds and a Gaussian mechanism on the statistics clipped to them; its
noise multiplier is the smallest for which the pooled design's events (which
dominate the per-feature ones, :func:`calibration_bounds`) and the Gaussian
event compose to at most ``(epsilon, delta)`` under the accountant of
``privacy_spent_`` (the count as the Laplace mechanism it is; each selection
as binary randomized response, which dominates every pure-DP mechanism
under composition, [KOV15]_ proof of Thm 3.3). Those pooled events are also
what the ledger records, whichever design ran, so a fit charges exactly
its plan.

References
----------
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of differential
   privacy", 2014, Theorem 3.6 (Laplace mechanism), Theorem 3.10 and 3.11
   (exponential mechanism) and Theorem 3.16 (basic composition).
.. [Smi11] A. Smith, "Privacy-preserving statistical estimation with optimal
   convergence rates", STOC 2011.
.. [GJK21] J. Gillenwater, M. Joseph and A. Kulesza, "Differentially private
   quantiles", ICML 2021.
.. [KOV15] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for
   differential privacy", ICML 2015, Theorem 3.3 (its proof builds the
   mechanism that dominates every (eps, delta)-DP one).
"""

import dataclasses
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from dp_accounting import dp_event

from ..exceptions import UnreliableBoundsWarning
from ..privacy.accounting import _pure_epsilon, epsilon_spent
from ..privacy.calibration import gaussian_noise_multiplier
from ..privacy.ledger import Release
from ..privacy.mechanisms import LaplaceMechanism
from ..privacy.quantiles import (
    GeometricGrid,
    PrivateQuantile,
    private_column_quantiles,
    private_column_spreads,
    private_norm_bound,
)
from ._noisy_gd import gd_mechanisms
from ._sufficient_statistics import is_dask_collection

__all__ = [
    "AUTO",
    "AUTO_BOUNDS",
    "AutoBoundsShares",
    "BoundsRecipe",
    "ReleasedBounds",
    "auto_noise_multiplier",
    "bounds_recipe",
    "calibration_bounds",
    "draw_bounds",
    "per_feature_selection_epsilon",
    "published_bounds",
    "rescale_features",
]

#: The parameter value that asks for privately estimated bounds.
AUTO = "auto"

BOUNDS_REFERENCE = (
    "noisy count by the Laplace mechanism (Dwork & Roth 2014, Thm 3.6); selections by the "
    "exponential mechanism (Dwork & Roth 2014, Thm 3.10) with a rank utility on the cells "
    "of a public geometric grid, add/remove sensitivity max(q, 1 - q) (after Smith 2011; "
    "Gillenwater, Joseph & Kulesza 2021); the features' selections share their epsilon "
    "(basic composition, Dwork & Roth 2014, Thm 3.16), recorded as one selection at it "
    "(which dominates them: Kairouz, Oh & Viswanath 2015, proof of Thm 3.3)"
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
    spread_quantile : float
        Quantile of ``|x_j - c_j|`` and of ``|y - center|``, over the rows off
        the center, that measures a spread: a middle one, which the
        exponential mechanism finds reliably (a high quantile does not: see
        :func:`bounds_recipe`).
    spread_inflation : float
        Public factor a released spread is multiplied by to give a feature's
        scale or the target's half-range (3 medians of ``|x - median|`` is
        about 2 standard deviations of a normal variable).
    norm_quantile : float
        Quantile of the rescaled rows' L2 norms used as their bound.
    count_share : float
        Share of ``eps_b`` given to the noisy row count that chooses the
        features' design and says whether the bounds are reliable.
    per_feature_rows : float
        The features get one center and scale each only when the noisy count
        times the epsilon of one selection is at least this (else one pooled
        row-norm bound): the exponential mechanism's accuracy bound
        ([DR14]_ Thm 3.11).
    pooled_norm_quantile : float
        Quantile of the raw rows' L2 norms used as the pooled bound.
    reliable_rows : float
        Below this value of the noisy count (less 3 noise scales) times the
        smallest selection's epsilon, a fit warns that its bounds may be far
        off (on ``load_diabetes``, fits with R^2 below -1 occur up to about
        epsilon 0.5, where this value is about 12).
    lower, upper : float
        Public limits of the grids (of scales and of ``|center|``).
    scale_ratio : float
        Ratio of the grid of scales (a scale is rounded up by at most it).
    center_ratio : float
        Ratio of the signed grid of the features' centers (a center is off by
        at most this relative factor of its value: fine, for features whose
        offset is large next to their spread, and for the cell a spread
        leaves out to hold a point mass but few other rows: 1.01 lost years
        and latitudes to it).
    target_center_ratio : float
        Ratio of the target center's grid: coarser, because with few rows a
        finer grid's many cells outside the data draw the selection away
        (at epsilon 0.3 on ``load_diabetes``, 1.01 gave 12 fits in 20 with
        R^2 below -1, 1.1 gave 9; with ``target_share`` 0.5, 2).
    """

    bounds_share: float = 0.5
    target_share: float = 0.5
    spread_quantile: float = 0.5
    spread_inflation: float = 3.0
    norm_quantile: float = 0.95
    count_share: float = 0.05
    per_feature_rows: float = 100.0
    pooled_norm_quantile: float = 0.5
    reliable_rows: float = 15.0
    lower: float = 1e-3
    upper: float = 1e6
    scale_ratio: float = 1.25
    center_ratio: float = 1.001
    target_center_ratio: float = 1.1

    def scale_grid(self) -> GeometricGrid:
        return GeometricGrid(self.lower, self.upper, self.scale_ratio)

    def center_grid(self, ratio: float | None = None) -> GeometricGrid:
        ratio = self.center_ratio if ratio is None else ratio
        return GeometricGrid(self.lower, self.upper, ratio, signed=True)


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
    """The mechanisms of one bounds release, each pure DP.

    Attributes
    ----------
    epsilon : float
        ``eps_b`` of the whole release (the sum of its mechanisms' epsilons).
    count : LaplaceMechanism or None
        The noisy row count (drawn by :func:`draw_bounds` before the others)
        that chose the features' design and checks the bounds' reliability;
        ``None`` without estimated bounds.
    feature_centers, feature_scales : tuple of PrivateQuantile
        One per feature each in the per-feature design (no centers without an
        intercept); empty otherwise.
    row_norm : tuple of PrivateQuantile
        The row-norm bound: of the rescaled rows (per-feature design) or of
        the raw rows (pooled design); empty for a public ``feature_norm``.
    target : tuple of PrivateQuantile
        The target's center and half-range (half-range only without an
        intercept); empty for a public ``target_bound``.
    """

    epsilon: float
    count: LaplaceMechanism | None
    feature_centers: tuple[PrivateQuantile, ...]
    feature_scales: tuple[PrivateQuantile, ...]
    row_norm: tuple[PrivateQuantile, ...]
    target: tuple[PrivateQuantile, ...]
    spread_inflation: float = 1.0
    description: str = ""

    @property
    def mechanisms(self) -> tuple:
        count = () if self.count is None else (self.count,)
        return (*count, *self.feature_centers, *self.feature_scales, *self.row_norm, *self.target)

    @property
    def events(self) -> list[dp_event.DpEvent]:
        return [m.dp_event for m in self.mechanisms]

    def release(self) -> Release:
        """The ledger record of the bounds (chunk 1: they are frozen for a stream)."""
        if self.description:
            return Release.of(
                list(self.mechanisms),
                f"{self.description} (eps_b={self.epsilon:.4g})",
                (1, 1),
                BOUNDS_REFERENCE,
            )
        parts = []
        if self.feature_scales:
            centered = "median and " if self.feature_centers else ""
            parts.append(
                f"private {centered}scale of each of "
                f"{len(self.feature_scales)} features, quantile of the rescaled row norms"
            )
        elif self.row_norm:
            parts.append("private quantile of the row norms")
        if self.target:
            parts.append(
                "private center and half-range of the target"
                if len(self.target) == 2
                else "private half-range of the target"
            )
        counted = "noisy row count, " if self.count is not None else ""
        return Release.of(
            list(self.mechanisms),
            f"{counted}{' and '.join(parts)} (eps_b={self.epsilon:.4g})",
            (1, 1),
            BOUNDS_REFERENCE,
        )

    def draw(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> ReleasedBounds:
        """Release the bounds of ``(X, y)`` but the count, every selection from
        ``rng`` in a fixed order."""
        center = scale = norm = t_center = t_half = None
        if self.feature_scales:
            center = resolution = np.zeros(X.shape[1])
            if self.feature_centers:
                center = private_column_quantiles(X, self.feature_centers, rng)
                resolution = self.feature_centers[0].grid.cell_widths(center)
            spread = private_column_spreads(X, center, resolution, self.feature_scales, rng)
            # At least the center's resolution: the rows at the center are
            # not clipped when there are no others (or too few for a spread).
            scale = self.spread_inflation * np.maximum(spread, resolution)
            rescaled = rescale_features(X, center, scale)
            # A rescaled row is at most sqrt(d) long: a larger release clips nothing.
            norm = min(
                private_norm_bound(rescaled, self.row_norm[0], rng), float(np.sqrt(X.shape[1]))
            )
        elif self.row_norm:
            norm = private_norm_bound(X, self.row_norm[0], rng)
        if self.target:
            y2 = _as_float(y).reshape(-1, 1)
            t_center = 0.0
            if len(self.target) == 2:
                t_center = float(private_column_quantiles(y2, self.target[:1], rng)[0])
            # Off the center exactly: the target's center grid is coarse (a
            # cell is 9% of the center, and would hold every target of many
            # data sets), and a target clipped too close costs accuracy, not
            # the extrapolation a feature's clip does.
            spread = private_column_spreads(y2, [t_center], [0.0], self.target[-1:], rng)[0]
            t_half = float(self.spread_inflation * spread)
        return ReleasedBounds(center, scale, norm, t_center, t_half, self.epsilon)


def _shares(epsilon, auto_features, auto_target, shares):
    """``(eps_b, eps of the count, eps of the features' selections, eps of the
    target's)``: the one split of the bounds' budget."""
    eps_b = shares.bounds_share * float(epsilon)
    eps_count = shares.count_share * eps_b if (auto_features or auto_target) else 0.0
    eps_target = 0.0
    if auto_target:
        eps_target = shares.target_share * eps_b if auto_features else eps_b
    return eps_b, eps_count, eps_b - eps_count - eps_target, eps_target


def per_feature_selection_epsilon(
    n_features: int,
    epsilon: float,
    *,
    auto_target: bool,
    fit_intercept: bool,
    shares: AutoBoundsShares = AUTO_BOUNDS,
) -> float:
    """Epsilon of each selection of the per-feature design (public)."""
    eps_features = _shares(epsilon, True, auto_target, shares)[2]
    return eps_features / (n_features * (2 if fit_intercept else 1) + 1)


def bounds_recipe(
    n_features: int,
    epsilon: float,
    *,
    auto_features: bool,
    auto_target: bool,
    fit_intercept: bool,
    per_feature: bool = True,
    shares: AutoBoundsShares = AUTO_BOUNDS,
) -> BoundsRecipe:
    """The bounds release of a fit with total budget ``epsilon``.

    ``eps_b = shares.bounds_share * epsilon``. With the features' bounds
    estimated, ``shares.count_share`` of it pays a noisy row count (the
    Laplace mechanism, [DR14]_ Thm 3.6) and, with the target's too, the
    target gets ``shares.target_share``. Within a kind the selections share
    equally (basic composition). The features' design:

    * per-feature (``per_feature``): a center (with an intercept) and a scale
      (``spread_inflation`` times a spread) per feature, then the rescaled
      rows' norm quantile: ``2 d + 1`` selections;
    * pooled: one quantile of the raw rows' norms (``pooled_norm_quantile``)
      for the whole budget of the features.

    Scales and the target's half-range are ``spread_inflation`` times a
    middle quantile (``spread_quantile``) of the distances to the center, not
    a high quantile: the cells above the largest value all have the utility
    ``-(1 - q) n``, and the grid has many (it spans the units of any data), so
    at ``q = 0.95`` the exponential mechanism often lands far above the data
    (on ``load_diabetes``, half-ranges up to 4e5 for a target below 350; on
    20 000 rows, a feature of scale 2 given the scale 650). At the median the
    same cells are ``n / 2`` ranks away.
    """
    _, eps_count, eps_features, eps_target = _shares(epsilon, auto_features, auto_target, shares)
    count = centers = scales = norm = target = ()
    count = LaplaceMechanism(1.0, eps_count) if (auto_features or auto_target) else None
    if auto_features and per_feature:
        each = per_feature_selection_epsilon(
            n_features,
            epsilon,
            auto_target=auto_target,
            fit_intercept=fit_intercept,
            shares=shares,
        )
        norm = (PrivateQuantile(each, shares.norm_quantile, shares.scale_grid()),)
        if fit_intercept:
            centers = tuple(
                PrivateQuantile(each, 0.5, shares.center_grid()) for _ in range(n_features)
            )
        scales = tuple(
            PrivateQuantile(each, shares.spread_quantile, shares.scale_grid())
            for _ in range(n_features)
        )
    elif auto_features:
        norm = (PrivateQuantile(eps_features, shares.pooled_norm_quantile, shares.scale_grid()),)
    if auto_target:
        scale = PrivateQuantile(
            eps_target / (1 + fit_intercept), shares.spread_quantile, shares.scale_grid()
        )
        if fit_intercept:
            center = PrivateQuantile(
                eps_target / 2, 0.5, shares.center_grid(shares.target_center_ratio)
            )
            target = (center, scale)
        else:
            target = (scale,)
    eps_b = sum(
        float(m.epsilon)
        for m in (*(() if count is None else (count,)), *centers, *scales, *norm, *target)
    )
    return BoundsRecipe(eps_b, count, centers, scales, norm, target, shares.spread_inflation)


def draw_bounds(
    X: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    *,
    auto_features: bool,
    auto_target: bool,
    fit_intercept: bool,
    shares: AutoBoundsShares = AUTO_BOUNDS,
) -> ReleasedBounds:
    """Choose the design from a noisy count, then release the bounds.

    The count is drawn first; with ``feature_norm="auto"`` the per-feature
    design is used when ``noisy_count * eps_each >= per_feature_rows`` for the
    epsilon ``eps_each`` of its selections: by the exponential mechanism's
    accuracy bound ([DR14]_ Thm 3.11) a selection among ``m`` cells then
    misses its target rank by more than ``2 (ln m + t) / eps_each`` with
    probability at most ``e^-t``, a small fraction of the rows. Below it the
    ``2 d + 1`` selections would come out close to uniform over the grid, and
    one pooled row-norm bound (one selection, all the features' epsilon)
    serves the model better. The choice is post-processing of the count, and
    so is the :class:`~sklearn_dpu.exceptions.UnreliableBoundsWarning` when
    the count less 3 of its noise scales, times the smallest selection's
    epsilon, is below ``reliable_rows``: the selections may then be close to
    uniform over their grids, and the model far off.
    """
    count = LaplaceMechanism(1.0, _shares(epsilon, auto_features, auto_target, shares)[1])
    noisy_count = float(count.release(float(len(X)), rng))
    per_feature = True
    if auto_features:
        each = per_feature_selection_epsilon(
            X.shape[1],
            epsilon,
            auto_target=auto_target,
            fit_intercept=fit_intercept,
            shares=shares,
        )
        per_feature = noisy_count * each >= shares.per_feature_rows
    recipe = bounds_recipe(
        X.shape[1],
        epsilon,
        auto_features=auto_features,
        auto_target=auto_target,
        fit_intercept=fit_intercept,
        per_feature=per_feature,
        shares=shares,
    )
    weakest = min(float(m.epsilon) for m in recipe.mechanisms if m is not recipe.count)
    # Rows we are confident of: the noisy count less 3 of its noise scales.
    rows = max(noisy_count - 3.0 * count.scale, 1.0)
    if rows * weakest < shares.reliable_rows:
        warnings.warn(
            f"the privately estimated bounds may be far off: their selections need "
            f"about {shares.reliable_rows / weakest:.0f} rows at epsilon={float(epsilon):g} "
            f"(fewer in proportion to a larger epsilon), and a noisy count says "
            f"{max(noisy_count, 0.0):.0f} +- {3.0 * count.scale:.0f}; pass public "
            "feature_norm and target_bound if you know them",
            UnreliableBoundsWarning,
            stacklevel=4,
        )
    return recipe.draw(X, y, rng)


def calibration_bounds(
    n_features: int,
    epsilon: float,
    *,
    auto_features: bool,
    auto_target: bool,
    fit_intercept: bool,
    shares: AutoBoundsShares = AUTO_BOUNDS,
) -> BoundsRecipe:
    """The bounds release a fit records, and calibrates its Gaussian against.

    The pooled design's events, whichever design :func:`draw_bounds` chooses:
    they dominate the per-feature design's, whose ``2 d + 1`` selections of
    ``eps_f / (2 d + 1)`` each are ``eps_f``-DP together by basic composition
    ([DR14]_ Thm 3.16), hence dominated under any composition by one
    ``eps_f``-DP selection (binary randomized response at ``eps_f``
    dominates every ``eps_f``-DP mechanism, [KOV15]_ proof of Thm 3.3; the
    accountant composes the selections as such). Recording these events for
    either design makes the fit's charge its plan, known before the data are
    read: were the per-feature design recorded as it ran, a budget's
    accountant could find it a hair more expensive than the plan (its many
    small events each rounded up on the PLD's grid), and a fit could be
    refused after reading the data, for a reason that depends on the noisy
    count and charged nothing. The price: the per-feature design is
    accounted (and its Gaussian calibrated) as if it cost ``eps_f`` in full.
    """
    description = ""
    if auto_features:
        description = (
            "noisy row count, then private per-feature centers and scales or one "
            "private row-norm quantile (as the count chose; accounted as one selection "
            "at the features' epsilon, which dominates both)"
            + (", and private center and half-range of the target" if auto_target else "")
        )
    recipe = bounds_recipe(
        n_features,
        epsilon,
        auto_features=auto_features,
        auto_target=auto_target,
        fit_intercept=fit_intercept,
        per_feature=False,
        shares=shares,
    )
    return dataclasses.replace(recipe, description=description)


def auto_noise_multiplier(
    recipe: BoundsRecipe,
    epsilon: float,
    delta: float,
    gd_steps: int = 0,
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
        tuple(recipe.events),
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
    bounds_events: tuple, epsilon: float, delta: float, gd_steps: int
) -> float:
    pure_events = list(bounds_events)

    def spent(multiplier):
        return epsilon_spent([*pure_events, *_statistics_events(multiplier, gd_steps)], delta)

    # A root of spent(m) = epsilon on the accountant that states privacy_spent_
    # (its PLD step is chosen for the composed events, so a large epsilon stays
    # feasible), bracketed by two closed forms: the Gaussian alone at
    # (epsilon, delta) is a lower bound, as the bounds' events only add
    # privacy loss; for 'ssp', the Gaussian at (epsilon - pure epsilons,
    # delta) is an upper one, since the accountant never states more than
    # basic composition of the pure events with the rest. Each evaluation is a
    # PLD composition (0.5 s at epsilon 10), so the bracket is narrowed by the
    # Illinois variant of regula falsi on log(m), which needs a handful of
    # them where bisection needed fourteen; the answer is the bracket's upper
    # end, always checked.
    low = gaussian_noise_multiplier(epsilon, delta)
    pure = sum(_pure_epsilon(event) or 0.0 for event in pure_events)
    if not gd_steps and pure < epsilon:
        high = max(low, gaussian_noise_multiplier(epsilon - pure, delta))
    else:
        high = 2.0 * low
    gap_high = spent(high) - epsilon
    while gap_high > 0:
        low, high = high, 2.0 * high
        gap_high = spent(high) - epsilon
    if high == low:
        return float(high)
    gap_low = spent(low) - epsilon
    if gap_low <= 0:
        return float(low)
    t_low, t_high = math.log(low), math.log(high)
    side = 0
    for _ in range(60):
        if t_high - t_low <= 1e-4:
            break
        t = (t_low * gap_high - t_high * gap_low) / (gap_high - gap_low)
        # keep the trial strictly inside, away from a stalled end
        margin = 0.01 * (t_high - t_low)
        t = min(max(t, t_low + margin), t_high - margin)
        trial = math.exp(t)
        gap = spent(trial) - epsilon
        if gap > 0:
            t_low, gap_low = t, gap
            if side == -1:
                gap_high /= 2.0
            side = -1
        else:
            t_high, gap_high, high = t, gap, trial
            if side == 1:
                gap_low /= 2.0
            side = 1
    return float(high)


def rescale_features(X: np.ndarray, center: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``clip((X - center) / scale, -1, 1)``: rows of L2 norm at most ``sqrt(d)``.

    An overflow to infinity is clipped like any large value, without a
    warning (whose presence would depend on the data)."""
    with np.errstate(over="ignore"):
        return np.clip((_as_float(X) - center) / scale, -1.0, 1.0)


def _as_float(X):
    """float64 values; a Dask array stays one (lazy, computed block by block)."""
    if is_dask_collection(X):
        return X.astype(np.float64)
    return np.asarray(X, dtype=np.float64)


def published_bounds(bounds: "ReleasedBounds | None") -> dict:
    """The fitted attributes of released bounds (DP releases): ``feature_center_``
    and ``feature_scale_`` in the per-feature design, ``feature_norm_`` in the
    pooled one, ``target_interval_`` if the target's was estimated; nothing
    for public bounds."""
    if bounds is None:
        return {}
    attributes = {}
    if bounds.feature_scale is not None:
        attributes["feature_center_"] = bounds.feature_center.copy()
        attributes["feature_scale_"] = bounds.feature_scale.copy()
    elif bounds.row_norm is not None:
        attributes["feature_norm_"] = float(bounds.row_norm)
    if bounds.target_half_range is not None:
        attributes["target_interval_"] = (
            bounds.target_center - bounds.target_half_range,
            bounds.target_center + bounds.target_half_range,
        )
    return attributes
