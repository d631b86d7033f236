"""The solvers of :class:`~sklearn_dpu.linear_model.DPLinearRegression`.

The solver is chosen once, from the recipe (as in scikit-learn's
``linear_model/_ridge.py``); each is a function of explicit values. Both are
post-processing of released values, or draw their noise from the recipe's
mechanism objects, whose events are the ones in the ledger.
"""

import numpy as np

from ..privacy.tree_aggregation import TreeAggregator
from ._ambssgd import AMBSSGDRecipe, AMBSSGDRun, run_ambssgd
from ._linear_releases import NoisyGDRecipe
from ._noisy_gd import noisy_projected_gd
from ._sufficient_statistics import GRAM_SCALE, solve_noisy_gram

__all__ = ["solve_ambssgd", "solve_noisy_gd", "solve_ssp"]


def solve_ssp(
    statistics: TreeAggregator, n_coef: int, ridge: np.ndarray, fit_intercept: bool
) -> np.ndarray:
    """AdaSSP-style ridge solve of the released Gram matrix (post-processing).

    The ridge lifts the released ``X^T X`` of the features above the noise
    level ``statistics.mechanism.sigma``, so the solve is stable at any
    epsilon; the intercept is eliminated exactly and never penalized.
    """
    return solve_noisy_gram(
        statistics.released_sum(), n_coef, ridge, statistics.mechanism.sigma, fit_intercept
    )


def solve_noisy_gd(
    gram_codes: np.ndarray,
    n_samples: int,
    n_coef: int,
    ridge: np.ndarray,
    recipe: NoisyGDRecipe,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Projected noisy GD on the exact statistics, noise from ``recipe``'s mechanisms.

    Returns the averaged iterate and the released (charged) record count.
    """
    return noisy_projected_gd(
        gram_codes * GRAM_SCALE,
        n_samples,
        n_coef,
        row_norm=recipe.row_norm,
        radius=recipe.radius,
        steps=recipe.steps,
        count=recipe.count,
        ridge=ridge,
        rng=rng,
    )


def solve_ambssgd(
    codes: np.ndarray,
    n_features: int,
    fit_intercept: bool,
    ridge: np.ndarray,
    recipe: AMBSSGDRecipe,
    rng: np.random.Generator,
) -> AMBSSGDRun:
    """DP-AMBSSGD on the live coded rows, noise from ``recipe``'s mechanisms
    (:func:`~sklearn_dpu.linear_model._ambssgd.run_ambssgd`)."""
    return run_ambssgd(codes, n_features, fit_intercept, ridge, recipe, rng)
