"""The deletion planner's cost model of the certified solvers, from public
quantities.

A deletion planner (Van Waerebeke et al. 2025, Thm 1-3) picks the cheapest
path that meets the deletion target, so its predicted costs must rank the
paths as the machine runs them. The unit is a **gradient pass**: the summed
loss and its gradient over every live row once (``A @ theta`` and
``A.T @ r``, memory-bound). Everything else is counted in passes:

* a dense Hessian pass costs :func:`hessian_passes` gradient passes: its
  ``K (K + 1) / 2`` blocks of ``n_coef^2`` multiply-adds per row run
  compute-bound in BLAS, much faster per multiply-add than a gradient pass,
  so counting multiply-adds (``n_coef (K + 1) / 4`` passes, the model before
  this one) overstated a Hessian 4-8 times at 50-150 parameters;
* a certified solve (:func:`certified_solve_passes`) takes the branch
  :func:`~._certified_minimize.certified_minimize` takes
  (:func:`~._certified_minimize.newton_only`), then a planned count of
  Newton steps or L-BFGS evaluations. Damped Newton converges quadratically
  once near the minimizer, so its step count barely depends on the
  tolerance: 2-6 steps from zero, 2 (rarely 3) from a published model; the
  L-BFGS evaluations to the certificate measured 10-25 from zero and 25-41
  from a published model (its noise is spread over every direction,
  including the flat ones, where zero is not);
* the constrained solve (``coef_bound``: a bisection over a Lagrangian
  ridge, a data-dependent number of inner solves) keeps the accelerated
  linear-rate bound of :func:`~sklearn_dpu.unlearning.planner.linear_rate_iterations`.

The constants are planning values measured on standardized
``make_classification`` data (``n = 2e4`` and ``1e5``, ``d`` from 5 to 300,
2 to 5 classes, one BLAS thread), not worst cases: a deletion's privacy
never rests on them (every certified path checks its certificate and
retrains when it misses it). ``benchmarks/bench_d2d.py`` compares the
predicted and realized costs across shapes.

References
----------
.. [1] M. Van Waerebeke, M. Lorenzi, G. Neglia and K. Scaman, "When to Forget?
   Complexity trade-offs in machine unlearning", preprint, 2025: Thm 1-3.
.. [2] S. Boyd and L. Vandenberghe, "Convex Optimization", Cambridge
   University Press, 2004, Sec. 9.5.3 (damped Newton: a damped phase, then
   quadratic convergence).
"""

import math
from dataclasses import dataclass

from ..unlearning.planner import linear_rate_iterations
from ._certified_minimize import newton_only
from ._losses import LinearModelLoss, LogLoss

__all__ = [
    "BLOCKED_SOFTMAX_PASS",
    "ROW_COPY_PASSES",
    "SolveCost",
    "certified_solve_passes",
    "hessian_passes",
]

#: A dense Hessian pass, in gradient passes: ``_HESSIAN_BASE`` plus one pass
#: per ``_HESSIAN_PRODUCTS`` multiply-adds per row (``n_coef (K + 1) / 2``
#: of them, ``K`` outputs) in double precision (the solvers' Newton steps:
#: measured 0.9, 2.0-2.8, 3.1-3.4 and 9.0 passes at 11, 51, 101 and 301
#: binary parameters), or ``_SINGLE_PRODUCTS`` in single precision (the
#: scheduled fine-tune's preconditioner: 1.1-1.4, 1.5-2.0, 2.1-2.5 and
#: 5.7-6.0 at the same sizes, 1.0-7.6 for 3 and 5 classes).
_HESSIAN_BASE = 0.6
_HESSIAN_PRODUCTS = 32.0
_SINGLE_PRODUCTS = 50.0
#: Damped Newton steps to the certificate (each one Hessian, one Armijo
#: evaluation) from zero (measured 2-6) and from a published model (2, at
#: times 3).
_NEWTON_STEPS_COLD = 4
_NEWTON_STEPS_WARM = 2
#: L-BFGS-B evaluations to the certificate, from zero and from a published model.
_LBFGS_EVALUATIONS_COLD = 20
_LBFGS_EVALUATIONS_WARM = 35
#: A retrain or a re-solve first gathers the live rows out of the registry
#: (measured 1.5 passes at 51 parameters).
ROW_COPY_PASSES = 1.5
#: The blocked softmax gradient of the scheduled fine-tune (no loss value,
#: each block read once) against the generic multinomial evaluation the
#: solvers use: measured 0.3-0.75 (0.7-1.3 for the binary loss, counted 1).
BLOCKED_SOFTMAX_PASS = 0.5


def hessian_passes(loss: LinearModelLoss, *, single_precision: bool = False) -> float:
    """Predicted cost of one dense Hessian of ``loss``'s summed objective, in
    gradient passes: ``0.6 + n_coef (K + 1) / 64`` (``K`` outputs), or
    ``0.6 + n_coef (K + 1) / 100`` with single-precision products."""
    products = loss.n_coef * (loss.n_outputs + 1) / 2.0
    rate = _SINGLE_PRODUCTS if single_precision else _HESSIAN_PRODUCTS
    return _HESSIAN_BASE + products / rate


@dataclass(frozen=True)
class SolveCost:
    """Predicted work of one certified solve.

    Attributes
    ----------
    iterations : int
        Newton steps, or L-BFGS evaluations (the solver's ``max_iter`` unit).
    passes : float
        The whole solve in gradient passes (Hessians included).
    """

    iterations: int
    passes: float


def certified_solve_passes(
    loss: LinearModelLoss,
    n_public: float,
    Lambda: float,
    tol: float,
    *,
    warm: bool,
    constrained: bool = False,
    start_distance: float | None = None,
) -> SolveCost:
    """Predicted work of :func:`~._certified_minimize.certified_minimize` on
    ``n_public`` rows, from zero (``warm=False``) or from a published model.

    ``start_distance`` (the distance of the start to the minimizer, a public
    bound) is used only by the constrained solve's linear-rate model; it
    defaults to the bound from zero, ``sqrt(2 n loss(0) / Lambda)``.
    """
    n = max(1.0, n_public)
    if constrained:
        kappa = (n * loss.smoothness + Lambda) / Lambda
        start = start_distance
        if start is None:
            start = math.sqrt(2.0 * n * loss.loss_at_zero / Lambda)
        iterations = linear_rate_iterations(start, tol / Lambda, kappa)
        return SolveCost(iterations, float(iterations))
    fused = loss.binary and isinstance(loss.base_loss, LogLoss)  # the fused pass applies
    if newton_only(loss.n_params, fused, n):
        steps = _NEWTON_STEPS_WARM if warm else _NEWTON_STEPS_COLD
        return SolveCost(steps, steps + 1.0 + steps * hessian_passes(loss))
    evaluations = _LBFGS_EVALUATIONS_WARM if warm else _LBFGS_EVALUATIONS_COLD
    return SolveCost(evaluations, float(evaluations))
