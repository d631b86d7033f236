"""Conjugate gradients for the lifted system of the SSP solver, refined with
float32 products when that pays.

The lifted system of
:func:`~sklearn_dpu.linear_model._lifted_solve.lifted_solve` is solved by
conjugate gradients [HS52]_ when they converge fast, else (they return
``None``) by a Cholesky factorization. The lift makes the system well conditioned
exactly when the noise dominates the bottom of the spectrum (at n = 1e5,
d = 1000 in the benchmarks, a condition number of 2.8): then about 21
products by ``A`` replace a ``d^3 / 3`` factorization (6-12 ms), the
largest single cost of a deletion's re-release. Conjugate gradients stop when
the residual guarantees a relative error below ``_CG_RTOL`` given that the
system's smallest eigenvalue is at least ``floor`` (or the eigenvalue bound
when that is above it): as accurate as the factorization's whatever the
conditioning, as long as the eigenvalue bound holds (when it does not, the error
can exceed the claim by the ratio of the floor to the true smallest
eigenvalue). Every ``_CG_PROBE`` products the convergence rate so far predicts
the products still needed; beyond the budget (about the factorization's
cost) they stop and the factorization runs. An ill-conditioned system is
usually recognized at the first check; a right-hand side concentrated on a
few eigenvectors can look fast at first, and then costs up to the budget
before the factorization.

When float32 rounding is far below the system's smallest eigenvalue, most
products are the float32 copy's the Lanczos iterations made: mixed precision
iterative refinement [BDL07]_, the test made on residuals recomputed in
float64. At d = 1000, 21-22 float32 products in two rounds and 2 float64
ones replace 21 float64 products; in a deletion at n = 1e5 on 2 cores the
solve took from 0.35 ms less to 0.2 ms more, of 2-3 ms (twelve in-process
comparisons in random order, 2026-12-02: no gain this machine's noise lets
one see), the two float64 products, on a matrix the float32 iterations have
pushed out of cache, taking 190-380 us each. At d = 2000 (a noise-dominated
system, twice) 14-17 ms against 28-33 ms on one thread, 7-8 ms against 9-11
ms on two. Condition numbers of 20 to 40 at d = 1000, which went to the
factorization, now fit the budget. The models move by about 3e-13 relative.

Everything here is post-processing of released values: it changes no noise,
no sensitivity, no guarantee.

References
----------
.. [HS52] M. R. Hestenes and E. Stiefel, "Methods of conjugate gradients for
   solving linear systems", Journal of Research of the National Bureau of
   Standards 49(6), 1952.
.. [BDL07] A. Buttari, J. Dongarra, J. Langou, J. Langou, P. Luszczek and
   J. Kurzak, "Mixed precision iterative refinement techniques for the
   solution of dense linear systems", International Journal of High
   Performance Computing Applications 21(4), 2007 (corrections solved in
   float32, residuals computed in float64).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg

__all__ = [
    "SinglePrecision",
    "always_factored",
    "conjugate_gradients",
    "symmetric_product",
    "unit_scale",
]

# Relative error (in the 2-norm) of the conjugate gradients' solution: they
# stop when the residual over the system's smallest eigenvalue bound proves it.
_CG_RTOL = 1e-12
# Products between two checks of the conjugate gradients' convergence rate.
_CG_PROBE = 8
# Refinement with float32 products (conjugate_gradients): each round solves
# for the residual to _CG_ROUND_RTOL; a round must divide the float64
# residual by 1 / _CG_SINGLE_GAIN at least, else float64 products take over.
# Refinement only when ||A|| <= _CG_SINGLE_CONDITION times the system's
# smallest eigenvalue: a float32 product's rounding (measured 1e-7 to 3.5e-7
# ||A|| ||x|| at q = 400 to 2000) then leaves a round's gain near 3.5e-5 or
# better. Above 100, on released-style systems at q = 1000 (a reviewer's
# sweep of 501), a second round restarted on a residual spread over the
# spectrum gave up in 5 of 58 where float64 products from the start
# converged; below it, none of 308 did, and 54 converged that float64
# products could not within the budget. A float32 product costs
# _CG_SINGLE_COST float64 ones of the budget (at d = 1000 on one thread,
# 48-58 us against 91-104 us).
_CG_ROUND_RTOL = 1e-6
_CG_SINGLE_GAIN = 1e-2
_CG_SINGLE_CONDITION = 1e2
_CG_SINGLE_COST = 0.5
_NRM2 = scipy.linalg.blas.dnrm2  # a 2-norm that neither over- nor underflows
# Products conjugate gradients may take, per row of A: a product reads the
# matrix once (about 0.06 ms at d = 1000 on 2 cores), a Cholesky
# factorization costs about as much as d / 16 of them (measured 6-12 ms at
# d = 1000). Below _CG_PROBE * 16 rows the factorization is always cheaper.
_CG_ROWS_PER_PRODUCT = 16


@dataclass(frozen=True)
class SinglePrecision:
    """``A`` times ``units`` in float32 (``matrix``), the copy the Lanczos
    iterations of
    :func:`~sklearn_dpu.linear_model._lifted_solve.smallest_eigenvalue_lower_bound`
    and the refinement of :func:`conjugate_gradients` multiply by: ``units`` is
    the power of two that brings the largest entry of ``A v0`` (``v0`` the
    start vector) near 1, exact, so that no norm squares a number near
    float64's (1e-308, 1e308) or float32's (1e-38, 3.4e38) ends whatever
    ``A``'s scale."""

    matrix: np.ndarray
    units: float


def unit_scale(size: float) -> float:
    """The power of two that brings ``size`` into ``[0.5, 1)``, at most
    ``2**1000`` (beyond, it would overflow); 1 when ``size`` is 0 or not
    finite. Multiplying by it is exact (short of under- or overflow).

    Parameters
    ----------
    size : float
        A magnitude, such as a largest entry.

    Returns
    -------
    float

    Examples
    --------
    >>> unit_scale(3.0), unit_scale(0.0), unit_scale(1e-310)
    (0.25, 1.0, 1.0715086071862673e+301)
    """
    exponent = int(np.frexp(size)[1]) if 0.0 < size < np.inf else 0
    return float(np.ldexp(1.0, min(-exponent, 1000)))


def symmetric_product(A: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> A x`` by BLAS ``symv`` on one triangle of the symmetric ``A``.

    Parameters
    ----------
    A : ndarray of shape (q, q)
        Exactly symmetric, C-contiguous, float32 or float64.

    Returns
    -------
    callable
        ``x -> A x``, a new array of ``A``'s dtype.

    Examples
    --------
    >>> import numpy as np
    >>> symmetric_product(np.array([[2.0, 1.0], [1.0, 3.0]]))(np.array([1.0, 1.0]))
    array([3., 4.])
    """
    symv = scipy.linalg.blas.get_blas_funcs("symv", (A,))
    upper = A.T  # Fortran-ordered view of A (= A): symv reads its upper triangle

    def product(x: np.ndarray) -> np.ndarray:
        return symv(1.0, upper, np.ravel(x))

    return product


def always_factored(q: int) -> bool:
    """Whether a ``q x q`` system always goes to the factorization: the
    budget of :func:`conjugate_gradients` (``q // _CG_ROWS_PER_PRODUCT``
    products) is below one probe, and they return ``None`` at once.

    >>> always_factored(127), always_factored(128)
    (True, False)
    """
    return q // _CG_ROWS_PER_PRODUCT < _CG_PROBE


def conjugate_gradients(
    A: np.ndarray,
    shift: float,
    b: np.ndarray,
    smallest: float,
    single: SinglePrecision | None = None,
    norm: float = 0.0,
) -> np.ndarray | None:
    """``(A + shift I)^{-1} b`` by conjugate gradients, or ``None`` when they
    would cost more than a factorization.

    ``smallest`` is a lower bound on the system's smallest eigenvalue, so a
    residual ``r`` bounds the error by ``||r|| / smallest``: they stop when
    that is below ``_CG_RTOL ||x||``. Every ``_CG_PROBE`` products the mean
    reduction of the residual per product so far predicts how many more
    are needed; beyond the budget of ``len(A) // _CG_ROWS_PER_PRODUCT``
    float64 products, or on a direction of non-positive curvature (an
    indefinite system), they give up.

    With ``single``, a float32 copy of ``A``, and when float32 rounding
    leaves the system's own condition (``norm / smallest`` at most, ``norm``
    an estimate of ``||A||``,
    ``_CG_SINGLE_CONDITION``) and the budget holds two probes, they refine
    [BDL07]_: each round solves for the residual, scaled by a power of two
    to entries near 1, to ``_CG_ROUND_RTOL`` with float32 products (each
    ``_CG_SINGLE_COST`` of a float64 one in the budget), then the residual
    is recomputed in float64 and the test made on it. A first round whose
    rate predicts more than the budget to the test gives up as above (the
    spectrum is slow); a later one (restarted on a residual spread over the
    spectrum, it can look slower than the iterations are), a round that
    meets non-positive curvature, or one that gains less than
    ``_CG_SINGLE_GAIN`` (float32 rounding dominating the system's smallest
    eigenvalues) hands over to float64 products from there, with what is
    left of the budget (and their own residual, updated as they go, for the
    test). A first round that converges within ``_CG_PROBE`` products (a
    right-hand side on a few eigenvectors, which float32 rounding would
    spread over all of them) is redone in float64.

    Parameters
    ----------
    A : ndarray of shape (q, q)
        Exactly symmetric.
    shift : float
    b : ndarray of shape (q,)
    smallest : float
        A lower bound on the smallest eigenvalue of ``A + shift I``.
    single : SinglePrecision, default=None
        ``A`` in float32, for the refinement.
    norm : float, default=0.0
        An estimate of ``||A||`` (the refinement's condition test).

    Returns
    -------
    ndarray of shape (q,), or None
    """
    budget = float(len(A) // _CG_ROWS_PER_PRODUCT)
    if always_factored(len(A)) or not float(_NRM2(b)) > 0.0 or not smallest > 0.0:
        return None
    product = symmetric_product(A)
    solution = np.zeros_like(b)
    residual = np.array(b, dtype=np.float64)

    def goal(x: np.ndarray) -> float:  # ||x - x*|| <= ||r|| / smallest <= _CG_RTOL ||x||
        return _CG_RTOL * smallest * float(_NRM2(x))

    spent = 0.0
    with np.errstate(all="ignore"):  # an overflow shows as a failed test below
        if (
            single is not None
            and budget >= 2 * _CG_PROBE  # room for a probe in float32 and one in float64
            and norm <= _CG_SINGLE_CONDITION * smallest
        ):
            refined = _refine_in_single(single, product, shift, b, solution, residual, goal, budget)
            if refined.slow:
                return None  # float64 products would be as slow
            if refined.solved:
                return solution
            spent = refined.spent
        run = _cg_steps(product, shift, solution, residual, goal, budget - spent, 1.0)
    return solution if run.converged else None


@dataclass(frozen=True)
class _Refinement:
    """Where the float32 rounds of :func:`_refine_in_single` left a solve:
    the budget they ``spent`` (in float64 products); whether the float64
    residual passed the test (``solved``); whether the first round found
    the spectrum too ``slow`` for the budget (the solve gives up). Neither:
    float64 products carry on from the solution and residual they left."""

    spent: float
    solved: bool = False
    slow: bool = False


def _refine_in_single(
    single: SinglePrecision,
    product: Callable[[np.ndarray], np.ndarray],
    shift: float,
    b: np.ndarray,
    solution: np.ndarray,
    residual: np.ndarray,
    goal: Callable[[np.ndarray], float],
    budget: float,
) -> _Refinement:
    """The refinement rounds of :func:`conjugate_gradients` [BDL07]_, from
    ``solution`` and its float64 ``residual`` (``b - (A + shift I)
    solution``, ``A`` the matrix ``product`` multiplies by), both updated in
    place: each round solves for the residual, scaled by a power of two to
    entries near 1, with ``single``'s float32 products, then recomputes the
    residual in float64 and tests it (``goal``). One float64 product of the
    ``budget`` is kept back for that residual."""
    low, inverse = symmetric_product(single.matrix), 1.0 / single.units

    def approximate(v: np.ndarray) -> np.ndarray:
        image = low(v.astype(np.float32)).astype(np.float64)
        image *= inverse
        return image

    spent, first = 0.0, True
    while True:
        opening = float(_NRM2(residual))
        # a power of two that brings the residual's largest entry near 1
        # (exact): its float32 copies neither under- nor overflow
        level = unit_scale(float(np.max(np.abs(residual))))
        correction = np.zeros_like(b)

        def final(c: np.ndarray, level: float = level, x: np.ndarray = solution) -> float:
            return level * goal(x + c / level)

        inner = _cg_steps(
            approximate,
            shift,
            correction,
            residual * level,
            final,
            budget - spent - 1.0,
            _CG_SINGLE_COST,
            # to _CG_ROUND_RTOL, or to half the test's residual when that is more
            aim=level * max(_CG_ROUND_RTOL * opening, 0.5 * goal(solution)),
        )
        spent += inner.products * _CG_SINGLE_COST
        if not inner.converged and first and not inner.indefinite:
            return _Refinement(spent, slow=True)
        if not inner.converged:
            # curvature float32 rounding may have made, or a later round,
            # restarted on a residual spread over the spectrum, looking
            # slower than the iterations are: float64 from here
            return _Refinement(spent)
        if first and inner.products <= _CG_PROBE:
            return _Refinement(spent)  # redone in float64 (``solution`` is still 0)
        solution += correction / level
        np.subtract(b, product(solution) + shift * solution, out=residual)
        spent += 1.0
        reached = float(_NRM2(residual))
        if reached <= goal(solution):
            return _Refinement(spent, solved=True)
        if not reached <= _CG_SINGLE_GAIN * opening:
            return _Refinement(spent)  # float32 products no longer gain: float64 from here
        first = False


@dataclass(frozen=True)
class _CGRun:
    """What a run of :func:`_cg_steps` did: ``products`` taken; whether the
    residual ``converged``; when not, whether they stopped on non-positive
    curvature (``indefinite``) rather than on the budget (predicted or
    spent)."""

    products: int
    converged: bool
    indefinite: bool = False


def _cg_steps(
    product: Callable[[np.ndarray], np.ndarray],
    shift: float,
    x: np.ndarray,
    residual: np.ndarray,
    goal: Callable[[np.ndarray], float],
    budget: float,
    cost: float,
    aim: float | None = None,
) -> _CGRun:
    """Conjugate-gradient steps on ``(M + shift I) x = c``, ``M`` the matrix
    ``product`` multiplies by, from ``x`` with ``residual = c - (M + shift
    I) x`` (both updated in place), until the residual's norm is at most
    ``aim``, or ``goal(x)`` when ``aim`` is ``None``. Every ``_CG_PROBE``
    products the convergence rate so far predicts the products to
    ``goal(x)``; they give up when those would take more than ``budget`` in
    all (each product costing ``cost``), or on non-positive curvature."""
    squared = float(residual @ residual)
    initial = squared
    direction = residual.copy()
    steps = 0
    while (steps + 1) * cost <= budget:
        image = product(direction)
        image += shift * direction
        curvature = float(direction @ image)
        if not curvature > 0.0:
            return _CGRun(steps + 1, False, indefinite=True)
        alpha = squared / curvature
        x += alpha * direction
        residual -= alpha * image
        previous, squared = squared, float(residual @ residual)
        steps += 1
        if np.sqrt(squared) <= (goal(x) if aim is None else aim):
            return _CGRun(steps, True)
        if steps % _CG_PROBE == 0:
            # log reduction of the residual per product so far
            target = goal(x)
            rate = 0.5 * np.log(squared / initial) / steps
            needed = np.log(target / np.sqrt(squared)) / rate if rate < 0.0 else np.inf
            if not (steps + needed) * cost <= budget:
                return _CGRun(steps, False)
        direction *= squared / previous
        direction += residual
    return _CGRun(steps, False)
