"""The linear solve behind the eigenvalue-floor rule of the SSP solver.

:func:`~sklearn_dpu.linear_model._sufficient_statistics.solve_noisy_gram`
solves ``(A + lam I) w = b`` with ``A`` a released (noised, so possibly
indefinite) Gram matrix and ``lam = max(0, floor - lambda_min(A))``, so that
the system's smallest eigenvalue is the noise's spectral bound ``floor``
[Wang18]_. Everything here is post-processing of released values: it changes
no noise, no sensitivity, no guarantee, only how fast and how exactly the
released model is computed from them.

``lambda_min`` is read as a lower bound
(:func:`smallest_eigenvalue_lower_bound`): Lanczos iterations with full
reorthogonalization, from a fixed start vector, give a Ritz vector ``y``
whose Rayleigh quotient ``rho`` and residual ``r`` are computed in float64; a
symmetric matrix has an eigenvalue within ``r`` of ``rho`` [Par98]_. They
stop when ``r`` is below ``_LANCZOS_TOL max(|theta|, floor, eps^(2/3)
||A||)``, ``theta`` the Ritz value, and the bound is ``rho - r`` less an
allowance of ``q^1.5 eps ||A||`` for the rounding of the product. When that
eigenvalue is the smallest, the bound is below ``lambda_min``, and the lifted
system's smallest eigenvalue is at least ``floor`` and above it by at most
``2 r`` plus the allowance (which dominates only when ``floor`` is below
about ``1e-7 ||A||``: an extra ridge that small against ``||A||`` changes no
digit that matters). Lanczos iterations do not certify that they found the
smallest eigenvalue: when the smallest eigenvector is nearly absent from the
start vector, or the two smallest eigenvalues are within a few tolerances,
the Ritz value can belong to the next eigenvalue, and the lift then falls
short of the floor by up to their gap. A reviewer's sweep of 5,823
released-style matrices (Gram matrices plus noise, collinear, raw-scaled,
binary features; q = 65 to 600) found that once, on pure noise at q = 333
(a gap of 1.8 tolerances), and once in 1,500 pure-noise matrices at q = 100
(a start-vector component of 3e-4 along the smallest eigenvector: the lift
fell 1.2% short of the floor); a second sweep, of 9,500 pure-noise matrices
at q = 65 to 500, found none. Constructed spectra with exactly repeated
eigenvalues just above the smallest (repeats the noise of a release breaks)
are missed often: 18 of 60 at a gap of 2 tolerances, 1 of 60 at 200, the
lift up to 2% short of the floor. The floor is itself a bound that fails with
probability 1e-3
(:func:`~sklearn_dpu.linear_model._sufficient_statistics.noise_spectral_bound`),
and the system stays positive definite. The iterations run in float32 (half
the memory traffic), then in float64 from their Ritz vector when float32
rounding keeps the residual above the tolerance; after ``max(96, q / 6)``
steps in all the dense solver runs. The bound is the same bits for the same
matrix at the same BLAS thread count (a threaded product rounds differently;
:func:`solve_blas` runs it with BLAS on one thread up to ``_SERIAL_SLOPES``
slopes).

The system is solved by conjugate gradients [HS52]_ when they converge fast,
else by a Cholesky factorization. The lift makes the system well conditioned
exactly when the noise dominates the bottom of the spectrum (at n = 1e5,
d = 1000 in the benchmarks, a condition number of 2.8): then about 21
products by ``A`` replace a ``d^3 / 3`` factorization (6-12 ms), the
largest single cost of a deletion's re-release. Conjugate gradients stop when
the residual guarantees a relative error below ``_CG_RTOL`` given that the
system's smallest eigenvalue is at least ``floor`` (or the eigenvalue bound
when that is above it): as accurate as the factorization's whatever the
conditioning, as long as the Lanczos bound holds (when it does not, the error
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
ms on two. Condition numbers of 20 to 60 at d = 1000, which went to the
factorization, now fit the budget. The models move by about 3e-13 relative.

References
----------
.. [Wang18] Y.-X. Wang, "Revisiting differentially private linear regression:
   optimal and adaptive prediction & estimation in unbounded domain", UAI 2018,
   Algorithm 2 (AdaSSP).
.. [Par98] B. N. Parlett, "The symmetric eigenvalue problem", SIAM 1998,
   Section 4.5 (residual bounds: a symmetric matrix has an eigenvalue within
   ``||A y - theta y||`` of the Rayleigh quotient ``theta`` of a unit ``y``),
   Section 6.9 (Kahan's "twice is enough" reorthogonalization) and Chapter 13
   (the Lanczos algorithm, with full reorthogonalization).
.. [HS52] M. R. Hestenes and E. Stiefel, "Methods of conjugate gradients for
   solving linear systems", Journal of Research of the National Bureau of
   Standards 49(6), 1952.
.. [BDL07] A. Buttari, J. Dongarra, J. Langou, J. Langou, P. Luszczek and
   J. Kurzak, "Mixed precision iterative refinement techniques for the
   solution of dense linear systems", International Journal of High
   Performance Computing Applications 21(4), 2007 (corrections solved in
   float32, residuals computed in float64).
"""

import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .._row_threads import SerialBlas
from .._validation import is_scratch

__all__ = ["lifted_solve", "smallest_eigenvalue_lower_bound", "solve_blas"]

# Relative tolerance of the eigenvalue bound: the Lanczos iterations stop when
# the residual r of their smallest Ritz pair, recomputed in float64 from the
# Ritz vector, is below _LANCZOS_TOL max(|theta|, floor). The bound is the
# Rayleigh quotient less r (and the rounding allowance), so the lifted
# system's smallest eigenvalue exceeds the floor by at most about
# 2 _LANCZOS_TOL max(|lambda_min|, floor): a ridge larger by a relative 2e-4
# at most. At d = 1000 the float32 iterations take 49-81 products where
# ARPACK at 1e-6 took 72-88 float64 ones.
_LANCZOS_TOL = 1e-4
# The floor of that scale, relative to ||A||, when theta and the floor are
# both near 0 (ARPACK's eps^(2/3), made relative: the bound must not depend
# on the matrix's scale).
_EIGENVALUE_FLOOR = np.finfo(np.float64).eps ** (2.0 / 3.0)
# Lanczos steps between two looks at the smallest Ritz pair.
_LANCZOS_CHECK = 4
# Lanczos steps at most, float32 and float64 together: _LANCZOS_MIN_STEPS
# (or q, when less), or q / 6 when more. On Gram matrices plus noise the
# iterations converged within 32, 64, 72 and 84 steps at q = 65, 200, 600 and
# 1000 (the worst of 5 each);
# a capped run at d = 1000 costs about what the dense solver then does
# (30-70 ms), so a spectrum Lanczos cannot resolve costs at most about twice
# the dense solver (ARPACK's cap, at 0.55-0.75 q products, cost 5 times).
_LANCZOS_MIN_STEPS = 96
_LANCZOS_STEPS_PER_ROW = 1 / 6
# Rows the Lanczos basis starts with (it doubles when full).
_LANCZOS_FIRST_ROWS = 64
_EPS = float(np.finfo(np.float64).eps)
_STEBZ, _STEIN = scipy.linalg.lapack.dstebz, scipy.linalg.lapack.dstein
# Residual estimates below _ROUNDING_REACH sqrt(q) eps ||A|| are rounding: the
# iterations have refined their Ritz vector as far as their precision allows.
_ROUNDING_REACH = 4.0
# The start vector: a fixed pseudo-random direction, so that a structured
# matrix (a Gram matrix whose null space holds the ones vector) does not hide
# its smallest eigenvector from it, and the same matrix gives the same bound.
_START_SEED = 20_181_017
# Relative error (in the 2-norm) of the conjugate gradients' solution: they
# stop when the residual over the system's smallest eigenvalue bound proves it.
_CG_RTOL = 1e-12
# Products between two checks of the conjugate gradients' convergence rate.
_CG_PROBE = 8
# Refinement with float32 products (_conjugate_gradients): each round solves
# for the residual to _CG_ROUND_RTOL; a round must divide the float64
# residual by 1 / _CG_SINGLE_GAIN at least, else float64 products take over.
# Refinement only when ||A|| <= _CG_SINGLE_CONDITION times the system's
# smallest eigenvalue: a float32 product's rounding (measured 1e-7 to 2.5e-7
# ||A|| ||x|| at q = 400 to 2000) then leaves a round's gain near 2.5e-4 or
# better. A float32 product costs _CG_SINGLE_COST float64 ones of the budget
# (at d = 1000 on one thread, 48-58 us against 91-104 us).
_CG_ROUND_RTOL = 1e-6
_CG_SINGLE_GAIN = 1e-2
_CG_SINGLE_CONDITION = 1e3
_CG_SINGLE_COST = 0.5
_NRM2 = scipy.linalg.blas.dnrm2  # a 2-norm that neither over- nor underflows
# Products conjugate gradients may take, per row of A: a product reads the
# matrix once (about 0.06 ms at d = 1000 on 2 cores), a Cholesky
# factorization costs about as much as d / 16 of them (measured 6-12 ms at
# d = 1000). Below _CG_PROBE * 16 rows the factorization is always cheaper.
_CG_ROWS_PER_PRODUCT = 16
# Slopes up to which solve_blas runs a lifted solve with BLAS on one thread.
_SERIAL_SLOPES = 1024


def smallest_eigenvalue_lower_bound(
    A: np.ndarray, floor: float = 0.0, low_precision: np.ndarray | None = None
) -> float:
    """A lower bound on the smallest eigenvalue of the symmetric ``A``, tight to
    ``_LANCZOS_TOL max(|lambda_min|, floor)``.

    Exact (dense) for small ``d``. Else Lanczos iterations with full
    reorthogonalization from a fixed start vector (so the same matrix gives
    the same bound, at a given BLAS thread count): every ``_LANCZOS_CHECK``
    steps the smallest eigenpair ``(theta, s)`` of the tridiagonal matrix;
    when its residual estimate is within the tolerance, the Ritz vector ``y``
    is formed and its Rayleigh quotient ``rho`` and residual
    ``r = ||A y - rho y||`` are computed in float64. A symmetric matrix has
    an eigenvalue within ``r`` of ``rho`` [Par98]_; when that eigenvalue is
    the smallest (see the module's docstring), ``rho - r``, less an
    allowance for the rounding of the product, is below ``lambda_min``.

    The iterations run in float32 first: a product by ``A`` (BLAS ``symv``,
    one triangle read) then reads 4 bytes an entry instead of 8 (at d = 1000
    on 2 cores, with 2 BLAS threads, 0.056 ms a step against 0.158 ms).
    Their precision limits only the residual the Ritz vector can reach, and that residual is
    checked in float64: when it is above the tolerance (the floor far below
    ``||A||``), float64 iterations go on from that Ritz vector. When
    ``max(96, q / 6)`` steps in all have not converged (a capped run costs
    about a dense solver's time), the dense solver, with the tolerance and
    the rounding allowance as margin.
    Every run works on ``A`` times a power of two that brings the entries
    of ``A v0`` near 1, so no norm under- or overflows at any scale of
    ``A`` (checked from 2^-1000 to 2^1000: the same bits times the scale).

    Parameters
    ----------
    A : ndarray of shape (q, q)
        Exactly symmetric.
    floor : float, default=0.0
        The scale of the tolerance when it exceeds ``|lambda_min|`` (the
        lift's floor: what the bound's error is compared to).
    low_precision : ndarray of float32, default=None
        C-contiguous ``(q, q)`` scratch the float32 copy of ``A`` is made in
        (default: a fresh array; same result either way).

    Returns
    -------
    float
    """
    return _eigenvalue_bound(A, floor, low_precision).value


@dataclass(frozen=True)
class _SinglePrecision:
    """``A`` times ``units`` in float32 (``matrix``), the copy the Lanczos
    iterations and the inner conjugate gradients multiply by: ``units`` is
    the power of two that brings the largest entry of ``A v0`` (``v0`` the
    start vector) near 1, exact, so that no norm squares a number near
    float64's (1e-308, 1e308) or float32's (1e-38, 3.4e38) ends whatever
    ``A``'s scale."""

    matrix: np.ndarray
    units: float


@dataclass(frozen=True)
class _EigenvalueBound:
    """What :func:`smallest_eigenvalue_lower_bound` found: ``value``, the
    lower bound on ``lambda_min(A)``; ``norm``, an estimate of ``||A||`` (the
    largest of the iterations' Gershgorin bounds on their tridiagonal
    matrix, and of ``|lambda_min|`` when the dense solver ran after them; 0
    for ``q <= 64``); ``single``, the float32 copy of ``A`` the iterations
    used (``None`` for ``q <= 64``)."""

    value: float
    norm: float
    single: _SinglePrecision | None


def _eigenvalue_bound(
    A: np.ndarray, floor: float, low_precision: np.ndarray | None
) -> _EigenvalueBound:
    """:func:`smallest_eigenvalue_lower_bound`, with the norm estimate and
    the float32 copy it made."""
    q = len(A)
    if q <= 64:
        return _EigenvalueBound(float(np.linalg.eigvalsh(A)[0]), 0.0, None)
    with np.errstate(under="ignore"):  # entries far below ||A|| flush to 0 in float32
        start = np.random.default_rng(_START_SEED).standard_normal(q)
        return _lanczos_bound(A, floor, start, _single_precision(A, start, low_precision))


def _single_precision(
    A: np.ndarray, start: np.ndarray, low_precision: np.ndarray | None
) -> _SinglePrecision:
    """The float32 copy of ``A`` in the units of :class:`_SinglePrecision`,
    made in ``low_precision`` when it is scratch of the right shape."""
    q = len(A)
    size = float(np.max(np.abs(_symmetric_product(A)(start))))  # no squares: no under- or overflow
    if size == 0.0:  # A v0 = 0, or products lost below the smallest subnormal
        size = float(np.max(np.abs(A)))
    # (at most 2^1000 up: subnormal matrices come to about 2^-70, well inside
    # both types' ranges)
    exponent = int(np.frexp(size)[1]) if 0.0 < size < np.inf else 0
    units = float(np.ldexp(1.0, min(-exponent, 1000)))
    if is_scratch(low_precision, (q, q), dtype=np.float32):
        matrix = low_precision
        np.multiply(A, units, out=matrix, casting="same_kind")
    else:
        matrix = (A * units).astype(np.float32)
    return _SinglePrecision(matrix, units)


def _lanczos_bound(
    A: np.ndarray, floor: float, start: np.ndarray, single: _SinglePrecision
) -> _EigenvalueBound:
    """:func:`smallest_eigenvalue_lower_bound` for ``q > 64``, from the start
    vector ``start``; every run and check works on ``units * A``
    (:class:`_SinglePrecision`)."""
    q = len(A)
    full, units = _symmetric_product(A), single.units

    def exact(x: np.ndarray) -> np.ndarray:
        image = full(x)
        image *= units
        return image

    norm = 0.0  # the largest estimate of ||units * A|| so far

    def verified(y: np.ndarray, tolerance: float, estimate: float) -> float | None:
        image = exact(y)
        rho = float(y @ image)
        image -= rho * y
        residual = float(np.linalg.norm(image))
        if residual <= tolerance:
            return rho - residual - _rounding(q, max(norm, estimate))
        return None

    budget = min(q, max(_LANCZOS_MIN_STEPS, int(_LANCZOS_STEPS_PER_ROW * q)))
    for product, dtype in ((_symmetric_product(single.matrix), np.float32), (exact, np.float64)):
        run = _lanczos(product, start.astype(dtype), units * floor, verified, budget)
        norm = max(norm, run.norm)
        if run.bound is not None:
            return _EigenvalueBound(run.bound / units, norm / units, single)
        budget -= run.steps
        if run.ritz_vector is None or budget < _LANCZOS_CHECK:
            break  # the cap
        start = run.ritz_vector  # one that float32 products could not refine
    # no convergence within the cap: the dense solver, with the same margin
    value = float(scipy.linalg.eigh(A, subset_by_index=[0, 0], eigvals_only=True)[0])
    norm = max(norm / units, abs(value))
    margin = _LANCZOS_TOL * max(abs(value), floor, _EIGENVALUE_FLOOR * norm)
    return _EigenvalueBound(value - margin - _rounding(q, norm), norm, single)


@dataclass(frozen=True)
class _LanczosRun:
    """What a run of :func:`_lanczos` ended with.

    ``bound``: the verified lower bound, or ``None``; ``ritz_vector``: the
    smallest Ritz pair's vector (float64, unit) when its verification failed,
    else ``None``; ``steps``: products taken; ``norm``: an estimate of
    ``||A||`` (Gershgorin's bound on the tridiagonal matrix), in the units of
    the run's matrix.
    """

    bound: float | None
    ritz_vector: np.ndarray | None
    steps: int
    norm: float


def _lanczos(
    product: Callable[[np.ndarray], np.ndarray],
    start: np.ndarray,
    floor: float,
    verified: Callable[[np.ndarray, float, float], float | None],
    budget: int,
) -> _LanczosRun:
    """Lanczos iterations with full reorthogonalization, in ``start``'s dtype,
    at most ``budget`` steps, on the matrix ``product`` multiplies by (the
    floor, the bound and the norms in its units).

    Every ``_LANCZOS_CHECK`` steps (and at a breakdown: an invariant Krylov
    space, the estimate 0) the smallest Ritz pair; once its residual estimate
    is within the tolerance, or at the iterations' rounding, ``verified``
    gives the bound, or rejects the Ritz vector.
    """
    q = len(start)
    # The basis grows by doubling (at d = 1000 about 50-80 vectors are used
    # of the 166 the cap allows).
    basis = np.empty((min(budget, _LANCZOS_FIRST_ROWS) + 1, q), dtype=start.dtype)
    diagonal, off_diagonal = np.empty(budget), np.empty(budget)
    norm_bound = 0.0  # >= ||T_k|| (Gershgorin), an estimate of ||A||
    unit = float(np.finfo(start.dtype).eps)
    basis[0] = start / np.linalg.norm(start)
    for k in range(budget):
        w = product(basis[k])
        # Classical Gram-Schmidt against the whole basis: it takes out the
        # three-term recurrence's two terms (coefficients k and k - 1) and
        # what rounding left along the others. A second pass when the first
        # cancelled more than half of the norm ("twice is enough", [Par98]_
        # Section 6.9): without it, float32 iterations near an eigenvector
        # lose orthogonality and their Ritz values wander below the spectrum.
        head = basis[: k + 1]
        before = _norm(w)
        coefficients = head @ w
        w -= head.T @ coefficients
        beta = _norm(w)
        if beta < 0.5 * before:
            again = head @ w
            w -= head.T @ again
            coefficients += again
            beta = _norm(w)
        diagonal[k] = coefficients[k]
        off_diagonal[k] = beta
        below = off_diagonal[k - 1] if k else 0.0
        norm_bound = max(norm_bound, abs(diagonal[k]) + below + beta)
        breakdown = not beta > q * unit * norm_bound
        if breakdown or (k + 1) % _LANCZOS_CHECK == 0:
            theta, s = _smallest_pair(diagonal[: k + 1], off_diagonal[:k])
            scale = max(abs(theta), floor, _EIGENVALUE_FLOOR * norm_bound)
            tolerance = _LANCZOS_TOL * scale
            # The estimate cannot go below the iterations' rounding: there,
            # check the Ritz vector (and go on in float64 if it falls short).
            reach = max(tolerance / 2, _ROUNDING_REACH * np.sqrt(q) * unit * norm_bound)
            if breakdown or beta * abs(s[-1]) <= reach:
                y = np.asarray(head.T @ s, dtype=np.float64)
                y /= np.linalg.norm(y)
                bound = verified(y, tolerance, norm_bound)
                if bound is None:
                    return _LanczosRun(None, y, k + 1, norm_bound)
                return _LanczosRun(bound, None, k + 1, norm_bound)
        if k + 1 == len(basis):
            grown = np.empty((min(2 * len(basis), budget + 1), q), dtype=basis.dtype)
            grown[: len(basis)] = basis
            basis = grown
        basis[k + 1] = w / beta
    return _LanczosRun(None, None, budget, norm_bound)


def _norm(x: np.ndarray) -> float:
    """``float(np.linalg.norm(x))`` of a vector, the same bits (the square
    root of ``x @ x`` in ``x``'s dtype) without its dispatch (4 us a call)."""
    return float(np.sqrt(x.dot(x)))


def _smallest_pair(diagonal: np.ndarray, off_diagonal: np.ndarray) -> tuple[float, np.ndarray]:
    """The smallest eigenvalue of the symmetric tridiagonal matrix and a unit
    eigenvector: LAPACK's bisection (``stebz``, default tolerance) and inverse
    iteration (``stein``), the calls ``scipy.linalg.eigh_tridiagonal(...,
    select="i", select_range=(0, 0))`` makes, without its argument checks
    (half of its 45 us a call, made every few Lanczos steps). Non-finite
    entries are not rejected here: a finite matrix gives finite coefficients,
    and from a non-finite one the float64 check of the Ritz vector fails and
    the dense solver raises."""
    if len(diagonal) == 1:
        return float(diagonal[0]), np.ones(1)
    m, values, block, split, info = _STEBZ(diagonal, off_diagonal, 2, 0.0, 0.0, 1, 1, 0.0, "B")
    if info == 0 and m == 1:
        vectors, info = _STEIN(diagonal, off_diagonal, values[:1], block, split)
        if info == 0:
            return float(values[0]), vectors[:, 0]
    raise np.linalg.LinAlgError(f"LAPACK stebz/stein failed on a tridiagonal matrix (info={info})")


def _rounding(q: int, norm: float) -> float:
    """Allowance for the rounding of a product by ``A``: ``|fl(A y) - A y|
    <= q eps ||A||_F <= q^1.5 eps ||A||`` for a unit ``y``, with ``norm``
    standing for ``||A||`` (a few 1e-9 at d = 1000, far below the
    tolerance)."""
    return q * np.sqrt(q) * _EPS * norm


def _symmetric_product(A: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> A x`` by BLAS ``symv`` on one triangle of the symmetric ``A``."""
    symv = scipy.linalg.blas.get_blas_funcs("symv", (A,))
    upper = A.T  # Fortran-ordered view of A (= A): symv reads its upper triangle

    def product(x: np.ndarray) -> np.ndarray:
        return symv(1.0, upper, np.ravel(x))

    return product


def _conjugate_gradients(
    A: np.ndarray,
    shift: float,
    b: np.ndarray,
    smallest: float,
    bound: _EigenvalueBound | None = None,
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

    With ``bound``'s float32 copy of ``A``, and when float32 rounding
    leaves the system's own condition (``||A|| / smallest`` at most
    ``_CG_SINGLE_CONDITION``), they refine [BDL07]_: each round solves for
    the residual, scaled by a power of two to entries near 1, to
    ``_CG_ROUND_RTOL`` with float32 products (each ``_CG_SINGLE_COST`` of a
    float64 one in the budget), then the residual is recomputed in float64
    and the test made on it. A round whose rate predicts more than the
    budget to the test gives up as above; one that meets non-positive
    curvature, or gains less than ``_CG_SINGLE_GAIN`` (float32 rounding
    dominating the system's smallest eigenvalues), hands over to float64
    products from there, with what is left of the budget (and their own
    residual, updated as they go, for the test). A first round that converges
    within ``_CG_PROBE`` products (a right-hand side on a few eigenvectors,
    which float32 rounding would spread over all of them) is redone in
    float64.
    """
    budget = float(len(A) // _CG_ROWS_PER_PRODUCT)
    b_norm = float(np.linalg.norm(b))
    if budget < _CG_PROBE or not b_norm > 0.0 or not smallest > 0.0:
        return None
    product = _symmetric_product(A)
    solution = np.zeros_like(b)
    residual = np.array(b, dtype=np.float64)

    def goal(x: np.ndarray) -> float:  # ||x - x*|| <= ||r|| / smallest <= _CG_RTOL ||x||
        return _CG_RTOL * smallest * float(_NRM2(x))

    spent = 0.0
    with np.errstate(all="ignore"):  # an overflow shows as a failed test below
        single = bound.single if bound is not None else None
        if single is not None and bound.norm <= _CG_SINGLE_CONDITION * smallest:
            low, inverse = _symmetric_product(single.matrix), 1.0 / single.units

            def approximate(v: np.ndarray) -> np.ndarray:
                image = low(v.astype(np.float32)).astype(np.float64)
                image *= inverse
                return image

            for round_ in itertools.count():
                opening = float(_NRM2(residual))
                # a power of two that brings the residual's largest entry near 1
                # (exact): its float32 copies neither under- nor overflow
                largest = float(np.max(np.abs(residual)))
                level = float(np.ldexp(1.0, -int(np.frexp(largest)[1]))) if largest > 0.0 else 1.0
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
                if not inner.converged and not inner.indefinite:
                    return None  # slow: float64 products would be as slow
                if not inner.converged:
                    break  # float32 rounding may look indefinite: float64 decides
                if round_ == 0 and inner.products < _CG_PROBE:
                    break  # redone in float64 (``solution`` is still 0)
                solution += correction / level
                residual = product(solution)
                residual += shift * solution
                np.subtract(b, residual, out=residual)
                spent += 1.0
                reached = float(_NRM2(residual))
                if reached <= goal(solution):
                    return solution
                if not reached <= _CG_SINGLE_GAIN * opening:
                    break  # float32 products no longer gain: float64 from here
        run = _cg_steps(product, shift, solution, residual, goal, budget - spent, 1.0)
    return solution if run.converged else None


@dataclass(frozen=True)
class _CGRun:
    """What a run of :func:`_cg_steps` did: ``products`` taken; whether the
    residual ``converged``; when not, whether they stopped on non-positive
    curvature (``indefinite``) rather than on the predicted cost."""

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


def solve_blas(q: int) -> AbstractContextManager:
    """The BLAS threads a lifted solve of ``q`` slopes runs with.

    Up to ``_SERIAL_SLOPES`` slopes a
    :class:`~sklearn_dpu._row_threads.SerialBlas` block: the solve (its
    iterations, and the rare Cholesky or eigendecomposition fallback) runs
    with BLAS on one thread; above, with the caller's threads.

    The solve alone is slower on one thread (at q = 1000 on 2 cores, measured
    once, run alone: 10.4-11.7 ms against 8.3 ms), but a threaded call leaves
    an OpenBLAS worker spinning on a core for about 0.1 s: the core the next
    release's noise tiles need. A DPLinearRegression deletion at n = 1e5,
    d = 1000 on 2 cores took 20.0 ms with the solve on one thread against
    22.6 ms, and 25 ms of CPU against 44 ms (medians of 6 interleaved pairs of
    runs, 30 deletions each, ``benchmarks/results/
    linear_deletion_serial_solve_ab_2threads.txt``). At q = 2000 the
    threaded iterations took about half the time (35-38 ms against 61-80 ms,
    measured once, run alone), so larger solves keep their threads; the
    cut-off between was not measured. On the main thread, and unless another
    thread controls BLAS's thread count, the solve on one thread is the same
    bits at any BLAS thread count.

    Parameters
    ----------
    q : int
        Slopes of the system (the intercept, eliminated first, not counted).

    Returns
    -------
    contextlib.AbstractContextManager
        A ``SerialBlas`` block, or a ``contextlib.nullcontext``.

    Examples
    --------
    >>> from sklearn_dpu._row_threads import SerialBlas
    >>> isinstance(solve_blas(1000), SerialBlas), isinstance(solve_blas(2000), SerialBlas)
    (True, False)
    """
    return SerialBlas() if q <= _SERIAL_SLOPES else nullcontext()


def lifted_solve(
    A: np.ndarray,
    b: np.ndarray,
    floor: float,
    rebuild: Callable[[], np.ndarray],
    low_precision: np.ndarray | None = None,
) -> np.ndarray:
    """``(A + lam I)^{-1} b`` with ``lam = max(0, floor - lambda_min(A))``.

    ``lambda_min`` as a lower bound within ``_LANCZOS_TOL max(|lambda_min|,
    floor)`` (:func:`smallest_eigenvalue_lower_bound`), then conjugate
    gradients, or one Cholesky solve when they would be slower (``d^3 / 3``
    flops instead of a full eigendecomposition's ``~9 d^3``). The system is
    then positive definite with smallest eigenvalue at least ``floor`` (above
    it by at most twice that tolerance; below it when the Lanczos iterations
    missed the smallest eigenvalue, see the module's docstring). With
    ``floor = 0`` (no noise, public data only) there is no lift: the
    minimum-norm solution over the eigenvalues above rounding.

    Parameters
    ----------
    A : ndarray of shape (q, q)
        Exactly symmetric, owned: lifted and factored in place when the
        factorization runs (its Fortran-ordered view ``A.T`` is ``A``
        itself, so LAPACK works on the buffer without the copy it makes of a
        C-ordered array).
    b : ndarray of shape (q,)
    floor : float
        The smallest eigenvalue the system must have; 0 for no lift.
    rebuild : callable
        Gives ``A`` again for the eigendecomposition fallback.
    low_precision : ndarray of float32, default=None
        Scratch for :func:`smallest_eigenvalue_lower_bound`.

    Returns
    -------
    ndarray of shape (q,)
    """
    if floor > 0.0:
        bound = _eigenvalue_bound(A, floor, low_precision)
        lift = max(0.0, floor - bound.value)
        solution = _conjugate_gradients(A, lift, b, max(floor, bound.value), bound)
        if solution is not None:
            return solution
        A.flat[:: len(A) + 1] += lift
        try:
            factor = scipy.linalg.cho_factor(A.T, check_finite=False, overwrite_a=True)
            return scipy.linalg.cho_solve(factor, b, check_finite=False)
        except np.linalg.LinAlgError:  # pragma: no cover - lifted to floor > 0
            A = rebuild()
    eigenvalues, eigenvectors = np.linalg.eigh(A)
    if floor > 0.0:  # pragma: no cover - the factorization of a lifted system failed
        shifted = eigenvalues + lift
    else:  # no noise (public data): the pseudo-inverse, lstsq's default cutoff
        shifted = eigenvalues
    # Eigenvalues below q eps times the largest are taken as rounding of zero
    # and dropped (on the Gram matrix, a coarser cutoff than lstsq's on X).
    cutoff = len(A) * _EPS * float(np.abs(shifted).max())
    safe = np.where(shifted > cutoff, shifted, np.inf)
    return eigenvectors @ ((eigenvectors.T @ b) / safe)
