"""``feature_norm='auto'``: a privately released row-norm bound.

The linear models clip every row to a public L2 norm ``feature_norm`` and
compute in units of it. With ``feature_norm='auto'`` the bound is released
first, for a share of ``epsilon`` (the estimator's budget-shares record): a
private ``quantile`` of the rows' L2 norms, chosen by the exponential
mechanism over a public geometric grid (:class:`AutoNormBound`,
:class:`~sklearn_dpu.privacy.quantiles.PrivateQuantile`). Once released the
bound is public, so the rows are clipped to it and divided by it exactly as
with an explicit ``feature_norm``, and the model's release is calibrated for
the epsilon that remains. The two releases compose: an ``(eps_b, 0)``-DP
bound and an ``(epsilon - eps_b, delta)``-DP model are ``(epsilon,
delta)``-DP together by basic composition ([DR14]_ Thm 3.16); the ledger
holds both exact events and the accountant may state less.

Why one bound and not one scale per feature: a record has a value in every
column, so ``d`` per-column quantiles share the bounds' epsilon and each
selection's rank error grows like ``2 d ln(m) / eps_b`` (``m`` candidates);
with ``eps_b = 0.1``, ``d = 30`` and ``m ~ 100`` that is about 2,800 ranks,
more than the rows of most data sets this is for, and the scales come out
close to uniform over the grid. The row-norm quantile reads every record
once: its rank error is about ``2 max(q, 1 - q) ln(m) / eps_b`` whatever
``d`` (for :class:`~sklearn_dpu.preprocessing.PrivateBoundsScaler` and
larger data, per-feature scales remain available).

These are functions of explicit values, so any estimator with a
``feature_norm`` can use them.

References
----------
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of differential
   privacy", 2014, Theorem 2.2 (group privacy), Theorem 3.10 (exponential
   mechanism) and Theorem 3.16 (basic composition).
.. [Smi11] A. Smith, "Privacy-preserving statistical estimation with optimal
   convergence rates", STOC 2011 (the exponential mechanism with rank utility
   for quantiles).
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..privacy.ledger import Release
from ..privacy.quantiles import GeometricGrid, PrivateQuantile, private_norm_bound
from ..privacy.random import release_generator
from ..unlearning.report import DeletionOutcome, with_kept_release
from ._dask_sums import DaskInput
from ._dask_sums import release_norm_bound as release_dask_norm_bound

__all__ = [
    "AUTO_NORM",
    "AutoNormBound",
    "bound_release",
    "check_auto_params",
    "draw_bound",
    "is_auto",
    "kept_bound_outcome",
    "model_params",
    "norm_bound_mechanism",
    "planned_bounds",
    "release_norm_bound",
]

_REFERENCE = (
    "exponential mechanism (Dwork & Roth 2014, Thm 3.10) with a rank utility on the "
    "cells of a public geometric grid, of add/remove sensitivity max(q, 1 - q) "
    "(after Smith 2011), on the rows' L2 norms; composed with the model's release "
    "by basic composition (Dwork & Roth 2014, Thm 3.16)"
)


@dataclass(frozen=True)
class AutoNormBound:
    """The public settings of the released row-norm bound.

    Attributes
    ----------
    quantile : float
        Quantile of the rows' L2 norms released as the bound: about a share
        ``1 - quantile`` of the rows are clipped to it (shortened, direction
        kept). Chosen on a tuning synthetic set, not on the evaluation sets
        (``benchmarks/bench_auto_bounds.py``): median test accuracy at
        epsilon 0.1 / 1 / 10 was 0.566 / 0.604 / 0.604 for the median,
        0.504 / 0.608 / 0.609 for 0.75 and 0.500 / 0.607 / 0.612 for 0.9;
        the median is as good at large epsilon and clearly better at small.
    lower, upper : float
        Limits of the grid of candidate bounds: norms from ``1e-4`` to
        ``1e8`` in any unit; a norm quantile outside is released as the
        nearest limit.
    ratio : float
        Ratio of neighbouring candidates (the relative resolution):
        ``1.25`` gives 125 candidates over the range.
    """

    quantile: float = 0.5
    lower: float = 1e-4
    upper: float = 1e8
    ratio: float = 1.25

    @property
    def grid(self) -> GeometricGrid:
        return GeometricGrid(self.lower, self.upper, self.ratio)


#: The one setting of ``feature_norm='auto'``.
AUTO_NORM = AutoNormBound()


def is_auto(feature_norm: Any) -> bool:
    """Whether ``feature_norm`` asks for a released bound."""
    return isinstance(feature_norm, str) and feature_norm == "auto"


def norm_bound_mechanism(
    epsilon: float, share: float, setting: AutoNormBound | None = None
) -> PrivateQuantile:
    """The ``(share * epsilon, 0)``-DP quantile of the row norms
    (``setting``: :data:`AUTO_NORM` by default)."""
    setting = AUTO_NORM if setting is None else setting
    return PrivateQuantile(float(share) * float(epsilon), setting.quantile, setting.grid)


def release_norm_bound(X: ArrayLike, mechanism: PrivateQuantile, rng: np.random.Generator) -> float:
    """Draw the bound: the mechanism's quantile of the L2 norms of ``X``'s rows
    (of a Dask data set: from counts made on the workers)."""
    if isinstance(X, DaskInput):
        return release_dask_norm_bound(X, mechanism, rng)
    return float(private_norm_bound(np.asarray(X, dtype=np.float64), mechanism, rng))


def draw_bound(
    X: ArrayLike,
    mechanism: PrivateQuantile,
    random_state: int | np.random.RandomState | None,
    chunk: int = 1,
) -> tuple[float, Release]:
    """Draw the bound as an estimator's first release (generator 0) and give
    its ledger record."""
    bound = release_norm_bound(X, mechanism, release_generator(random_state, 0))
    return bound, bound_release(mechanism, chunk)


def bound_release(mechanism: PrivateQuantile, chunk: int) -> Release:
    """The ledger record of the bound, its event read from ``mechanism``."""
    grid = mechanism.grid
    what = (
        f"private {mechanism.quantile:g} quantile of the rows' L2 norms "
        f"(feature_norm='auto'; grid {grid.lower:g} to {grid.upper:g}, ratio "
        f"{grid.ratio:g}), epsilon {mechanism.epsilon:.4g}"
    )
    return Release.of(mechanism, what, (chunk, chunk), _REFERENCE)


def planned_bounds(params: Mapping[str, Any], share: float) -> tuple[Release, ...]:
    """The bound's planned record (one selection whatever ``n_features``), or
    nothing with an explicit ``feature_norm``."""
    if not is_auto(params["feature_norm"]):
        return ()
    return (bound_release(norm_bound_mechanism(params["epsilon"], share), 1),)


def model_params(params: Mapping[str, Any], share: float, bound: float | None) -> dict:
    """The parameters the model's release reads under ``feature_norm='auto'``.

    ``epsilon`` is what the bound leaves, ``(1 - share) epsilon``, and
    ``feature_norm`` the released ``bound``. Before the bound is released
    (planning, checks of the parameters alone) ``feature_norm`` is 1.0: no
    planned event reads it, and the one check that would (objective
    perturbation with a fixed ``C``) is refused by :func:`check_auto_params`.
    Explicit parameters are returned unchanged.
    """
    if not is_auto(params["feature_norm"]):
        return dict(params)
    return {
        **params,
        "epsilon": (1.0 - float(share)) * float(params["epsilon"]),
        "feature_norm": 1.0 if bound is None else float(bound),
    }


def check_auto_params(params: Mapping[str, Any]) -> None:
    """Refuse what ``'auto'`` cannot check before the data is read.

    Objective perturbation with a fixed ``C`` needs the ridge in normalized
    units, ``1 / (C feature_norm^2)``, to pass its Jacobian check before the
    budget is charged; with a released bound it would be known only after.
    """
    if (
        is_auto(params["feature_norm"])
        and params["solver"] == "objective"
        and params["C"] != "auto"
    ):
        raise ValueError(
            "solver='objective' with a fixed C needs an explicit feature_norm (its ridge "
            "in normalized units, 1 / (C feature_norm^2), is checked before the data is "
            "read); use C='auto' or give feature_norm"
        )


def kept_bound_outcome(
    outcome: DeletionOutcome, bound_epsilon: float, n_deleted_total: int, target: float
) -> DeletionOutcome:
    """A deletion's outcome, its guarantee stated with the kept bound
    (:func:`~sklearn_dpu.unlearning.report.with_kept_release`); a note says
    when the requested ``target`` deletion epsilon is out of reach while the
    bound is kept (the planner gave the model ``target - k eps_b``)."""
    what = "the released row-norm bound feature_norm_"
    outcome = with_kept_release(outcome, what, bound_epsilon, n_deleted_total)
    if outcome.deletion_epsilon <= target * (1 + 1e-9):
        return outcome
    note = (
        f"the requested deletion_epsilon={target:.4g} is out of reach while the bound is "
        f"kept ({n_deleted_total} deleted rows x {bound_epsilon:.4g}); refit to redraw it"
    )
    return dataclasses.replace(outcome, notes=(*outcome.notes, note))
