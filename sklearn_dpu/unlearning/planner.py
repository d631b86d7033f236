"""Choose how to honour a deletion request: noise only, noise + fine-tune, or retrain.

After Van Waerebeke, Lorenzi, Neglia & Scaman, *When to Forget? Complexity
Trade-offs in Machine Unlearning* (preprint, 2025). Their analysis has three
regimes for a strongly convex model:

* **trivial** (Thm 1): Gaussian noise on the model, with no
  gradient access at all, already hides the deleted points;
* **efficient** (Thm 3 / Cor. 2): noise followed by a short
  fine-tune on the retained data beats retraining;
* **inefficient** (Thm 2): the certified path costs a constant
  fraction of a retrain, so retrain.

Their bounds are worst-case constants for non-smooth losses (their proofs
drop constant factors, 8 in Thm 1 and 64 in Thm 3, restored here); a DP estimator knows
more. Its released model is *already* noised, and it can compute, from
public quantities only, the Gaussian-DP parameter ``mu`` of each option's
indistinguishability from a fit on the remaining data, and predict each
option's cost in gradient evaluations. This module turns those numbers into a
decision:

1. noise only if its certified epsilon meets the target (trivial regime);
2. otherwise noise + fine-tune if it meets the target and is predicted to cost
   less than retraining (efficient regime);
3. otherwise retrain (inefficient regime / retraining cheaper). The caller
   also falls back to retraining if the fine-tune misses its certificate
   (a re-solve runs within the fit's own iteration cap); that fallback reads
   the data, so it is not published (the report states the planned action,
   whose guarantee a retrain meets too).

Nothing here reads data: the inputs are public, so the decision and the
report leak nothing beyond what was released.
"""

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..privacy.accounting import analytic_gaussian_epsilon

__all__ = [
    "DeletionDecision",
    "DeletionOption",
    "gdp_epsilon",
    "linear_rate_iterations",
    "plan_deletion",
]

NOISE_ONLY = "noise_only"
NOISE_FINETUNE = "noise_finetune"
RETRAIN = "retrain"


@functools.lru_cache(maxsize=1024)
def gdp_epsilon(mu: float, delta: float) -> float:
    """Epsilon at ``delta`` of a ``mu``-GDP guarantee (0 for ``mu = 0``); cached."""
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    return analytic_gaussian_epsilon(1.0 / mu, delta)


def linear_rate_iterations(distance: float, target: float, condition_number: float) -> int:
    """Iterations of an accelerated first-order method from ``distance`` to ``target``.

    The cost model of the planner: a method with the accelerated linear rate
    ``1 - 1/sqrt(kappa)`` (what L-BFGS attains on these objectives) needs
    ``sqrt(kappa) ln(distance / target)`` iterations. Plain gradient descent
    (Neel, Roth & Sharifi-Malvajerdi, Descent-to-Delete, ALT 2021, Thm 3.1) would need
    ``ln(distance/target) / ln(1/gamma)`` with ``gamma = (kappa-1)/(kappa+1)``,
    about ``kappa/2`` times more; the ratio between options, which is what
    the decision uses, is the same.
    """
    if distance <= target:
        return 0
    return int(math.ceil(math.sqrt(max(condition_number, 1.0)) * math.log(distance / target)))


@dataclass(frozen=True)
class DeletionOption:
    """One way to honour a deletion request, as predicted from public quantities.

    Attributes
    ----------
    action : {"noise_only", "noise_finetune", "retrain"}
    available : bool
        Whether the estimator can take this path at all.
    mu : float
        Gaussian-DP parameter of the post-deletion state against a fit on the
        remaining data (0 for an exact retrain).
    predicted_gradient_evaluations : float
        Predicted cost, in per-row gradient evaluations.
    note : str
        Why the option is (un)available, or what it does.
    """

    action: str
    available: bool
    mu: float
    predicted_gradient_evaluations: float
    note: str = ""


@dataclass(frozen=True)
class DeletionDecision:
    """The decision and the options it was chosen from.

    Made before any row changes; a deletion's
    :class:`~sklearn_dpu.unlearning.report.DeletionPlan` states it.

    Attributes
    ----------
    action : str
    epsilon : float
        Certified deletion epsilon of the chosen option (at ``delta``).
    delta : float
    mu : float
    regime : {"trivial", "efficient", "inefficient"}
        The *When to Forget?* regime the decision corresponds to.
    reason : str
    options : tuple of DeletionOption
    """

    action: str
    epsilon: float
    delta: float
    mu: float
    regime: str
    reason: str
    options: tuple

    def option(self, action: str) -> DeletionOption:
        return next(o for o in self.options if o.action == action)


def plan_deletion(
    options: Sequence[DeletionOption], target_epsilon: float, delta: float
) -> DeletionDecision:
    """Pick the cheapest option whose certified epsilon meets ``target_epsilon``.

    Parameters
    ----------
    options : sequence of DeletionOption
        Must contain a ``"retrain"`` option (always available, ``mu = 0``).
    target_epsilon : float
        The deletion epsilon every request must be certified at.
    delta : float

    Returns
    -------
    DeletionDecision
    """
    by_action = {o.action: o for o in options}
    retrain = by_action[RETRAIN]
    eps = {o.action: gdp_epsilon(o.mu, delta) for o in options}

    noise = by_action.get(NOISE_ONLY)
    if noise is not None and noise.available and eps[NOISE_ONLY] <= target_epsilon:
        return DeletionDecision(
            NOISE_ONLY,
            eps[NOISE_ONLY],
            delta,
            noise.mu,
            "trivial",
            f"noise only: the noise already in the released state hides the deleted "
            f"samples at eps={eps[NOISE_ONLY]:.3g} <= target {target_epsilon:.3g} "
            "(When to Forget? Thm 1, trivial regime); no gradient is computed",
            tuple(options),
        )
    why_not_noise = (
        f"noise only would give eps={eps[NOISE_ONLY]:.3g} > target {target_epsilon:.3g}"
        if noise is not None and noise.available
        else (noise.note if noise is not None else "noise only is not available")
    )
    tune = by_action.get(NOISE_FINETUNE)
    if tune is not None and tune.available and eps[NOISE_FINETUNE] <= target_epsilon:
        predicted, full = (
            tune.predicted_gradient_evaluations,
            retrain.predicted_gradient_evaluations,
        )
        if predicted < full:
            return DeletionDecision(
                NOISE_FINETUNE,
                eps[NOISE_FINETUNE],
                delta,
                tune.mu,
                "efficient",
                f"{why_not_noise}; noise + fine-tune certifies "
                f"eps={eps[NOISE_FINETUNE]:.3g} "
                f"at a predicted {predicted:.3g} gradient evaluations < {full:.3g} for "
                "retraining (When to Forget? Thm 3, efficient regime)",
                tuple(options),
            )
        why_not_tune = (
            f"noise + fine-tune is predicted to cost {predicted:.3g} >= {full:.3g} "
            "gradient evaluations for retraining"
        )
    elif tune is not None and tune.available:
        why_not_tune = (
            f"noise + fine-tune would give eps={eps[NOISE_FINETUNE]:.3g} > target "
            f"{target_epsilon:.3g}"
        )
    else:
        why_not_tune = tune.note if tune is not None else "no fine-tune path"
    return DeletionDecision(
        RETRAIN,
        0.0,
        delta,
        0.0,
        "inefficient",
        f"{why_not_noise}; {why_not_tune}: retrain on the remaining samples "
        "(When to Forget? Thm 2, inefficient regime / retraining cheaper)",
        tuple(options),
    )
