"""The solvers of :class:`~sklearn_dpu.linear_model.DPLinearRegression`.

The solver is chosen once, from the recipe (as in scikit-learn's
``linear_model/_ridge.py``); each is a function of explicit values. Both are
post-processing of released values, or draw their noise from the recipe's
mechanism objects, whose events are the ones in the ledger.
:func:`released_model` runs the recipe's solver on the estimator's state and
returns the model in the units of the data.
"""

import numpy as np

from ..privacy.tree_aggregation import TreeAggregator
from ._ambssgd import AMBSSGDRecipe, run_ambssgd
from ._lifted_solve import bound_by_lanczos
from ._linear_releases import NoisyGDRecipe, SSPRecipe
from ._linear_state import LinearStatisticsState
from ._noisy_gd import noisy_projected_gd
from ._sufficient_statistics import GRAM_SCALE, solve_noisy_gram

__all__ = ["released_model", "solve_noisy_gd", "solve_ssp"]


def solve_ssp(
    statistics: TreeAggregator,
    n_coef: int,
    ridge: np.ndarray,
    fit_intercept: bool,
    work: np.ndarray | None = None,
    low_precision: np.ndarray | None = None,
) -> np.ndarray:
    """AdaSSP-style ridge solve of the released Gram matrix (post-processing).

    The ridge lifts the released ``X^T X`` of the features above the noise
    level ``statistics.mechanism.sigma``, so the solve is stable at any
    epsilon; the intercept is eliminated exactly and never penalized.
    ``work``, ``low_precision``: scratches for the slopes' system and its
    float32 copy (see :func:`solve_noisy_gram`).
    """
    nodes = statistics.nodes
    # One node (a fit and its deletions): its released matrix as is, read only
    # (solve_noisy_gram copies the block it changes), without an 8 MB copy at d = 1000.
    released = nodes[0].noisy if len(nodes) == 1 else statistics.released_sum()
    sigma = statistics.mechanism.sigma
    return solve_noisy_gram(
        released, n_coef, ridge, sigma, fit_intercept, work=work, low_precision=low_precision
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


def released_model(
    state: LinearStatisticsState,
    recipe: SSPRecipe | NoisyGDRecipe | AMBSSGDRecipe,
    n_features: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float, int]:
    """The released model of ``state``: ``(coef, intercept, n_iter)`` in data units.

    Post-processing of the released statistics (SSP), or a run drawing its
    noise from ``recipe`` (noisy GD, DP-AMBSSGD; these set
    ``state.released_count``). The ridge ``alpha ||coef||^2`` in data units is
    ``(alpha / feature_norm^2) ||w||^2`` in normalized units
    (``coef = half_range * w / feature_norm``).
    """
    params = state.frozen_params
    feature_norm = params["feature_norm"]
    n_coef = n_features + params["fit_intercept"]
    bounds = state.bounds
    rescaled = bounds is not None and bounds.feature_scale is not None
    if rescaled:
        # x = center + scale * z, and z / feature_norm is the normalized row.
        feature_norm = state.feature_norm * bounds.feature_scale
    elif state.feature_norm is not None:
        feature_norm = state.feature_norm
    ridge = np.zeros(n_coef)
    ridge[:n_features] = params["alpha"] / feature_norm**2
    if isinstance(recipe, NoisyGDRecipe):
        n_samples = state.registry.n_samples
        w, state.released_count = solve_noisy_gd(
            state.exact_gram, n_samples, n_coef, ridge, recipe, rng
        )
        n_iter = int(recipe.steps.steps)
    elif isinstance(recipe, AMBSSGDRecipe):
        codes = state.registry.live()[0]
        run = run_ambssgd(codes, n_features, params["fit_intercept"], ridge, recipe, rng)
        w, state.released_count, n_iter = run.coef, run.released_count, run.n_blocks
    else:
        n_slopes = n_coef - params["fit_intercept"]
        w = solve_ssp(
            state.statistics,
            n_coef,
            ridge,
            params["fit_intercept"],
            work=state.solve_buffer(n_slopes),
            # the float32 scratch only where the bound's Lanczos iterations use it
            low_precision=state.eigen_buffer(n_slopes) if bound_by_lanczos(n_slopes) else None,
        )
        n_iter = 1
    coef = state.half_range * w[:n_features] / feature_norm
    intercept = float(
        state.center + (state.half_range * w[n_features] if params["fit_intercept"] else 0.0)
    )
    if rescaled:
        intercept -= float(coef @ bounds.feature_center)
    return coef, intercept, n_iter
