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
  L-BFGS evaluations to the certificate measured 10-25 from zero on
  standardized data, and from a published model are credited by the ratio
  of the logarithms of the distances to cover (measured: from 0.4x to 2.5x
  of the cold count, depending on the data);
* for more than two classes the unit stays the generic multinomial
  evaluation (:meth:`~._losses.LinearModelLoss.value_and_grad`), and an
  evaluation of the solvers' own blocked pass on dense rows
  (:class:`~._multinomial_pass.MultinomialLogLossPass`) costs
  :func:`evaluation_passes` of it: the pass removes per-row overheads, so
  it saves most where the rows are short;
* the constrained solve (``coef_bound``: a bisection over a Lagrangian
  ridge, a data-dependent number of inner solves) keeps the accelerated
  linear-rate bound of :func:`~sklearn_dpu.unlearning.planner.linear_rate_iterations`
  from zero, and gives a warm start no credit (measured no faster from a
  published model than from zero).

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
from ._binary_pass import fuses
from ._certified_minimize import hessian_stride, newton_only
from ._losses import LinearModelLoss

__all__ = [
    "BLOCKED_SOFTMAX_PASS",
    "ROW_COPY_PASSES",
    "SolveCost",
    "evaluation_passes",
    "certified_solve_passes",
    "hessian_passes",
]

#: A dense Hessian pass, in gradient passes: ``_HESSIAN_BASE`` plus one pass
#: per ``_HESSIAN_PRODUCTS`` of the ``n_coef (K + 1) / 2`` multiply-adds per
#: row and output (``K`` outputs) in double precision (the solvers' Newton steps:
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
#: ... plus these where the Newton matrix is subsampled (from zero, from 32
#: binary parameters: linear, not quadratic, convergence near the end;
#: measured 2-3 more at 51 and 101 parameters, n = 1e5, standardized data;
#: a review measured up to 8 more on adversarial data).
_SUBSAMPLED_EXTRA_STEPS = 2
#: L-BFGS-B evaluations to the certificate from zero (measured 10-25 on
#: standardized data; ill-conditioned data can take hundreds, which no public
#: quantity shows). From a published model the count is scaled by
#: ``log(start / target) / log(start_0 / target)`` (linear convergence).
_LBFGS_EVALUATIONS_COLD = 20
#: A retrain or a re-solve first gathers the live rows out of the registry
#: (measured 1.5 passes at 51 parameters).
ROW_COPY_PASSES = 1.5
#: The blocked softmax gradient of the scheduled fine-tune (no loss value,
#: each block read once) against the generic multinomial evaluation, the
#: model's unit for more than two classes: measured 0.3-0.75 (0.7-1.3 for
#: the binary loss against its fused pass, counted 1).
BLOCKED_SOFTMAX_PASS = 0.5


#: The blocked multinomial pass against the generic evaluation, per row and
#: class: ``(_PASS_OVERHEAD + n_coef) / (_GENERIC_OVERHEAD + n_coef)``, the
#: fixed costs in units of one coefficient's multiply-adds (fitted to 0.20-0.28
#: at 11 coefficients, 0.32 at 31, 0.53-0.57 at 101 and 0.65-0.71 at 301, for
#: 3 and 5 classes at n = 2e4 and 1e5).
_PASS_OVERHEAD = 25.0
_GENERIC_OVERHEAD = 132.0


def evaluation_passes(loss: LinearModelLoss, *, dense_rows: bool = True) -> float:
    """Predicted cost of one evaluation of the certified solvers' summed loss
    and gradient, in gradient passes: 1 for two classes (the unit is their
    own pass) and for sparse rows; for more classes on dense rows the
    blocked multinomial pass, ``(25 + n_coef) / (132 + n_coef)`` of the
    generic evaluation that is the unit."""
    if loss.binary or not dense_rows:
        return 1.0
    return (_PASS_OVERHEAD + loss.n_coef) / (_GENERIC_OVERHEAD + loss.n_coef)


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
        Newton steps, or L-BFGS-B objective evaluations.
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
    start_distance: float | None = None,
    dense_rows: bool = True,
    constrained: bool = False,
    solves: int = 1,
) -> SolveCost:
    """Predicted work of :func:`~._certified_minimize.certified_minimize` on
    ``n_public`` rows.

    Parameters
    ----------
    loss : LinearModelLoss
    n_public : float
        Released count of the rows.
    Lambda, tol : float
        Ridge and certificate (``||grad|| <= tol``).
    start_distance : float, default=None
        Public bound on the start's distance to the minimizer: a warm start
        from a published model; ``None``: from zero, whose distance is at
        most ``sqrt(2 n loss(0) / Lambda)``. Not credited to the constrained
        solve.
    dense_rows : bool, default=True
        Whether the rows are dense (the input's format): the fused binary
        pass, hence the Newton branch, needs them, and the blocked
        multinomial pass (:func:`evaluation_passes`) too.
    constrained : bool, default=False
        The solve over ``B(coef_bound)`` (the linear-rate bound).
    solves : int, default=1
        Solves on the same rows, other labels (one-vs-rest objective
        perturbation): ``passes`` is their total; from zero on the Newton
        branch they share their first Hessian
        (:class:`~._binary_pass.ZeroHessianCache`).

    Returns
    -------
    SolveCost
    """
    n = max(1.0, n_public)
    target = tol / Lambda
    cold_start = math.sqrt(2.0 * n * loss.loss_at_zero / Lambda)
    start = cold_start if start_distance is None else start_distance
    if constrained:
        # The bisection over the Lagrangian ridge re-solves to 1e-3 of the
        # tolerance at every ridge: from a published model it measured no
        # faster than from zero (3 classes, coef_bound = 0.5, n = 2e4: 2.2-2.8
        # s against 2.4 s), so a warm start earns no credit (at equal cost the
        # planner retrains: exact).
        kappa = (n * loss.smoothness + Lambda) / Lambda
        iterations = linear_rate_iterations(cold_start, target, kappa)
        passes = iterations * evaluation_passes(loss, dense_rows=dense_rows)
        return SolveCost(iterations, solves * passes)
    fused = dense_rows and fuses(loss)  # the solver's fused pass, hence its Newton branch
    evaluation = evaluation_passes(loss, dense_rows=dense_rows)
    if newton_only(loss.n_params, fused, n):
        steps = _NEWTON_STEPS_COLD if start_distance is None else _NEWTON_STEPS_WARM
        # the binary Newton matrix: single precision and read from every
        # stride-th row from 32 parameters (a few more, cheaper, steps)
        cold = start_distance is None  # a warm start's Newton matrix reads every row
        stride = hessian_stride(int(n), loss.n_params) if fused and cold else 1
        if stride > 1:
            steps += _SUBSAMPLED_EXTRA_STEPS
        hessian = hessian_passes(loss, single_precision=stride > 1) / stride
        hessians = solves * steps - (solves - 1 if start_distance is None else 0)
        passes = solves * (steps + 1.0) * evaluation + hessians * hessian
        return SolveCost(steps, passes)
    # L-BFGS-B: linear convergence, so the count scales with the logarithm of
    # the distance to cover; a warm start is credited by that ratio only.
    evaluations = _LBFGS_EVALUATIONS_COLD
    if start_distance is not None and cold_start > target:
        share = math.log(max(start, target) / target) / math.log(cold_start / target)
        evaluations = max(1, math.ceil(evaluations * min(1.0, share)))
    return SolveCost(evaluations, solves * evaluations * evaluation)
