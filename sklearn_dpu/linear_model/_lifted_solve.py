"""The linear solve behind the eigenvalue-floor rule of the SSP solver.

:func:`~sklearn_dpu.linear_model._sufficient_statistics.solve_noisy_gram`
solves ``(A + lam I) w = b`` with ``A`` a released (noised, so possibly
indefinite) Gram matrix and ``lam = max(0, floor - lambda_min(A))``, so that
the system's smallest eigenvalue is the noise's spectral bound ``floor``
[Wang18]_. Everything here is post-processing of released values: it changes
no noise, no sensitivity, no guarantee, only how fast and how exactly the
released model is computed from them.

``lambda_min`` is computed by LAPACK up to ``_DENSE_SLOPES`` slopes (below
128, where the system is always factored, only when a Cholesky
factorization of ``A`` less ``floor`` and margins fails to show the lift is
0: :func:`_factored_lift`), and above read as a lower bound
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
fell 1.2% short of the floor; that size now takes LAPACK's eigenvalue); a
second sweep, of 9,500 pure-noise matrices at q = 65 to 500, found none.
Constructed spectra with exactly repeated eigenvalues just above the
smallest (repeats the noise of a release breaks) are missed often: 18 of
60 at a gap of 2 tolerances, 1 of 60 at 200, the lift up to 2% short of the
floor. The floor is itself a bound that fails with probability 1e-3
(:func:`~sklearn_dpu.linear_model._sufficient_statistics.noise_spectral_bound`),
and the system stays positive definite. The iterations run in float32 (half
the memory traffic), then in float64 from their Ritz vector when float32
rounding keeps the residual above the tolerance; after ``max(96, q / 6)``
steps in all the dense solver runs. The bound is the same bits for the same
matrix at the same BLAS thread count (a threaded product rounds differently;
:func:`solve_blas` runs it with BLAS on one thread up to ``_SERIAL_SLOPES``
slopes).

The lifted system is then solved by conjugate gradients, refined with
float32 products when that pays
(:func:`~sklearn_dpu.linear_model._conjugate_gradients.conjugate_gradients`),
or, when they would be slow, by a Cholesky factorization.

References
----------
.. [Wang18] Y.-X. Wang, "Revisiting differentially private linear regression:
   optimal and adaptive prediction & estimation in unbounded domain", UAI 2018,
   Algorithm 2 (AdaSSP).
.. [Hig02] N. J. Higham, "Accuracy and stability of numerical algorithms",
   2nd edition, SIAM 2002, Theorem 10.3 (a Cholesky factorization that runs
   to completion is exact for ``A + E``, ``|E| <= gamma_{n+1} |R^T| |R|``).
.. [Par98] B. N. Parlett, "The symmetric eigenvalue problem", SIAM 1998,
   Section 4.5 (residual bounds: a symmetric matrix has an eigenvalue within
   ``||A y - theta y||`` of the Rayleigh quotient ``theta`` of a unit ``y``),
   Section 6.9 (Kahan's "twice is enough" reorthogonalization) and Chapter 13
   (the Lanczos algorithm, with full reorthogonalization).
"""

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .._row_threads import SerialBlas
from .._validation import is_scratch
from ._conjugate_gradients import (
    _NRM2,
    SinglePrecision,
    always_factored,
    conjugate_gradients,
    symmetric_product,
    unit_scale,
)

__all__ = ["bound_by_lanczos", "lifted_solve", "smallest_eigenvalue_lower_bound", "solve_blas"]

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
# Lanczos steps at most, float32 and float64 together: _LANCZOS_MIN_STEPS,
# or q / 6 when more (they run from q > _DENSE_SLOPES, more rows than steps).
# On Gram matrices plus noise the iterations converged within 32, 64, 72 and
# 84 steps at q = 65, 200, 600 and 1000 (the worst of 5 each);
# a capped run at d = 1000 costs about what the dense solver then does
# (30-70 ms), so a spectrum Lanczos cannot resolve costs at most about twice
# the dense solver (ARPACK's cap, at 0.55-0.75 q products, cost 5 times).
_LANCZOS_MIN_STEPS = 96
_LANCZOS_STEPS_PER_ROW = 1 / 6
# Rows the Lanczos basis starts with (it doubles when full).
_LANCZOS_FIRST_ROWS = 64
_EPS = float(np.finfo(np.float64).eps)
_STEBZ, _STEIN = scipy.linalg.lapack.dstebz, scipy.linalg.lapack.dstein
_POTRF = scipy.linalg.lapack.dpotrf
# Residual estimates below _ROUNDING_REACH sqrt(q) eps ||A|| are rounding: the
# iterations have refined their Ritz vector as far as their precision allows.
_ROUNDING_REACH = 4.0
# The start vector: a fixed pseudo-random direction, so that a structured
# matrix (a Gram matrix whose null space holds the ones vector) does not hide
# its smallest eigenvector from it, and the same matrix gives the same bound.
_START_SEED = 20_181_017
# Slopes up to which solve_blas runs a lifted solve with BLAS on one thread.
_SERIAL_SLOPES = 1024
# Slopes up to which the smallest eigenvalue is computed exactly, by LAPACK
# (syevr, for the smallest one only), rather than bounded by Lanczos
# iterations: up to here the dense solver is the faster. Whole deletions,
# interleaved in one process either way (bench_linear_deletion_warm.py,
# results/linear_deletion_warm*_cutoff_sweep.txt, 2026-12-02, 1 and 2 BLAS
# threads): dense faster at d = 100 to 200 (1.6-3.1 ms a deletion against
# 2.1-3.7 ms), slower at 256 (4.5-5.0 ms against 3.3-3.7); at d = 200 another
# run, at n = 1e6 (not saved), found it slower: 160 is the largest size where
# it was faster every time. The conjugate gradients never refine in float32
# this low (their budget holds two probes from q = 256): no float32 copy.
_DENSE_SLOPES = 160


def bound_by_lanczos(q: int) -> bool:
    """Whether the eigenvalue bound of a ``q x q`` system runs Lanczos
    iterations on a float32 copy (``q > _DENSE_SLOPES``), rather than
    LAPACK on the float64 matrix; only then does it use ``low_precision``
    scratch.

    >>> bound_by_lanczos(100), bound_by_lanczos(1000)
    (False, True)
    """
    return q > _DENSE_SLOPES


def smallest_eigenvalue_lower_bound(
    A: np.ndarray, floor: float = 0.0, low_precision: np.ndarray | None = None
) -> float:
    """A lower bound on the smallest eigenvalue of the symmetric ``A``, tight to
    ``_LANCZOS_TOL max(|lambda_min|, floor)``.

    Up to ``_DENSE_SLOPES`` rows LAPACK's smallest eigenvalue, less the
    rounding allowance below (exact to rounding). Else Lanczos iterations
    with full
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
class _EigenvalueBound:
    """What :func:`smallest_eigenvalue_lower_bound` found: ``value``, the
    lower bound on ``lambda_min(A)``; ``norm``, an estimate of ``||A||`` (the
    largest of the iterations' Gershgorin bounds on their tridiagonal
    matrix, and of ``|lambda_min|`` when the dense solver ran after them;
    the Frobenius norm for ``q <= _DENSE_SLOPES``); ``single``, the float32
    copy of ``A`` the iterations used (``None`` for ``q <= _DENSE_SLOPES``)."""

    value: float
    norm: float
    single: SinglePrecision | None


def _eigenvalue_bound(
    A: np.ndarray, floor: float, low_precision: np.ndarray | None
) -> _EigenvalueBound:
    """:func:`smallest_eigenvalue_lower_bound`, with the norm estimate and
    the float32 copy it made."""
    q = len(A)
    if not bound_by_lanczos(q):
        # LAPACK's eigenvalue is within about q eps ||A|| of the exact one;
        # the allowance keeps the value a lower bound, as the iterations' is.
        # ||A|| by the Frobenius norm of A times the power of two that brings
        # its largest entry near 1: near 2^1018 the norm of A overflows, the
        # allowance does not (the norm, only a record here, may be inf);
        # near 2^-1000 the allowance flushes towards 0, as the entries do.
        value = _lapack_smallest(A)  # first: it raises on a non-finite or empty A
        return _dense_bound(value, len(A), *_frobenius_in_units(A))
    with np.errstate(under="ignore"):  # entries far below ||A|| flush to 0 in float32
        start = np.random.default_rng(_START_SEED).standard_normal(q)
        return _lanczos_bound(A, floor, start, _single_precision(A, start, low_precision))


def _single_precision(
    A: np.ndarray, start: np.ndarray, low_precision: np.ndarray | None
) -> SinglePrecision:
    """The float32 copy of ``A`` in the units of :class:`SinglePrecision`,
    made in ``low_precision`` when it is scratch of the right shape."""
    q = len(A)
    size = float(np.max(np.abs(symmetric_product(A)(start))))  # no squares: no under- or overflow
    if size == 0.0:  # A v0 = 0, or products lost below the smallest subnormal
        size = float(np.max(np.abs(A)))
    # (at most 2^1000 up: subnormal matrices come to about 2^-70, well inside
    # both types' ranges)
    units = unit_scale(size)
    if is_scratch(low_precision, (q, q), dtype=np.float32):
        matrix = low_precision
        np.multiply(A, units, out=matrix, casting="same_kind")
    else:
        matrix = (A * units).astype(np.float32)
    return SinglePrecision(matrix, units)


def _lanczos_bound(
    A: np.ndarray, floor: float, start: np.ndarray, single: SinglePrecision
) -> _EigenvalueBound:
    """:func:`smallest_eigenvalue_lower_bound` for ``q > _DENSE_SLOPES``,
    from the start vector ``start``; every run and check works on
    ``units * A`` (:class:`SinglePrecision`)."""
    q = len(A)
    full, units = symmetric_product(A), single.units

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
    for product, dtype in ((symmetric_product(single.matrix), np.float32), (exact, np.float64)):
        run = _lanczos(product, start.astype(dtype), units * floor, verified, budget)
        norm = max(norm, run.norm)
        if run.bound is not None:
            return _EigenvalueBound(run.bound / units, norm / units, single)
        budget -= run.steps
        if run.ritz_vector is None or budget < _LANCZOS_CHECK:
            break  # the cap
        start = run.ritz_vector  # one that float32 products could not refine
    # no convergence within the cap: the dense solver, with the same margin
    value = _lapack_smallest(A)
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


def _frobenius_in_units(A: np.ndarray) -> tuple[float, float]:
    """``(units, ||units A||_F)``, ``units`` the power of two that brings the
    largest entry of ``A`` near 1 (so the norm neither over- nor underflows;
    entries far below the largest may flush to 0); the norm is NaN when an
    entry is (whatever BLAS's ``nrm2`` makes of a NaN)."""
    with np.errstate(under="ignore", over="ignore"):
        largest = float(np.max(np.abs(A), initial=0.0))
        units = unit_scale(largest)
        norm = float(_NRM2(np.ravel(A * units)))
    return units, float("nan") if np.isnan(largest) else norm


def _dense_bound(value: float, q: int, units: float, scaled: float) -> _EigenvalueBound:
    """:func:`smallest_eigenvalue_lower_bound` of a ``q x q`` matrix up to
    ``_DENSE_SLOPES`` rows, from LAPACK's smallest eigenvalue ``value`` and
    ``(units, scaled)``, :func:`_frobenius_in_units` of the matrix."""
    with np.errstate(under="ignore", over="ignore"):
        allowance, norm = _rounding(q, scaled) / units, scaled / units
    return _EigenvalueBound(value - allowance, float(norm), None)


def _factored_lift(A: np.ndarray, floor: float) -> float:
    """The lift ``max(0, floor - bound)`` of a system
    :func:`_tests_by_factorization` admits, ``bound`` LAPACK's smallest
    eigenvalue less the rounding allowance
    (:func:`smallest_eigenvalue_lower_bound`), computed only when a Cholesky
    factorization of ``A - s I`` fails.

    A factorization of ``M = A - s I`` that runs to completion in floating
    point gives ``R^T R = M + E`` with ``|E| <= gamma_{q+1} |R^T| |R|``
    ([Hig02]_, stated for a positive definite ``M``; its proof holds for any
    symmetric ``M`` on which the factorization completes), so
    ``||E||_2 <= q (q + 1) eps / 2 ||M||_2`` to first order; ``M + E`` is
    positive semidefinite, so ``lambda_min(A) >= s - ||E||_2``. LAPACK's
    eigenvalue is within about ``q eps ||A||`` of the exact one (its
    documented bound is ``p(q) eps ||A||``, ``p`` a modest function: this
    reads it as ``q``). With ``s`` above ``floor`` by the allowance and at
    least twice those errors (``||A||_F`` for ``||A||``, the relative error
    on ``s`` doubled too; the slack also covers the rounding of ``s`` and of
    the diagonal's subtraction), the bound is above ``floor`` and its lift
    0: the same system, the same bits, without the eigenvalue. The test runs
    on ``A`` times the power of two that brings its largest entry near 1
    (exact), so it neither over- nor underflows; on a non-finite ``A`` it
    does not run (LAPACK's eigenvalue then raises, as before).

    It passes when the data's Gram matrix dominates the noise (at n = 1e6
    in the scaling benchmark's data, d = 20 and 100; not at n = 1e4 and
    1e5, d = 100): LAPACK's eigenvalue took four times a factorization at
    q = 100 (305 us against 70, one thread). When the noise dominates, a
    diagonal entry at most ``s`` fails it without a factorization, and
    otherwise the factorization stops at its first non-positive pivot.
    """
    q = len(A)
    units, scaled = _frobenius_in_units(A)
    relative = q * (q + 2) * _EPS
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        # in float64 whatever the floor's type (a float16 floor times a
        # small power of two rounds to 0); a non-finite shift skips the test
        target = float(floor) * units * (1.0 + relative)
        shift = target + _rounding(q, scaled) + 2.0 * relative * scaled
    if np.isfinite(shift) and _factors_above(A, units, shift):
        return 0.0
    return max(0.0, floor - _dense_bound(_lapack_smallest(A), q, units, scaled).value)


def _tests_by_factorization(A: np.ndarray) -> bool:
    """Whether :func:`lifted_solve` tries :func:`_factored_lift` on ``A``:
    a float64 ``(q, q)`` array, ``0 < q``, always factored and bounded by
    LAPACK (other systems, which no release makes, keep the eigenvalue)."""
    q = len(A)
    return (
        isinstance(A, np.ndarray)
        and A.dtype == np.float64
        and A.shape == (q, q)
        and 0 < q
        and always_factored(q)
        and not bound_by_lanczos(q)
    )


def _factors_above(A: np.ndarray, units: float, shift: float) -> bool:
    """Whether LAPACK's Cholesky factorization (``potrf``, the call
    ``scipy.linalg.cho_factor`` makes) of ``units A - shift I`` completes.
    A pivot is at most its diagonal entry (``x - shift > 0`` exactly when
    ``x > shift``, gradual underflow included), so a diagonal entry at most
    ``shift`` decides it without the factorization."""
    with np.errstate(under="ignore", over="ignore"):
        if not (np.diagonal(A) * units > shift).all():
            return False
        shifted = A * units
        shifted.flat[:: len(A) + 1] -= shift
    _, info = _POTRF(shifted.T, lower=False, overwrite_a=True, clean=False)
    return info == 0


def _lapack_smallest(A: np.ndarray) -> float:
    """The smallest eigenvalue of the symmetric ``A`` by LAPACK (``syevr``,
    that eigenvalue only); raises on non-finite entries."""
    return float(scipy.linalg.eigh(A, subset_by_index=[0, 0], eigvals_only=True)[0])


def _rounding(q: int, norm: float) -> float:
    """Allowance for the rounding of a product by ``A``: ``|fl(A y) - A y|
    <= q eps ||A||_F <= q^1.5 eps ||A||`` for a unit ``y``, with ``norm``
    standing for ``||A||`` (a few 1e-9 at d = 1000, far below the
    tolerance)."""
    return q * np.sqrt(q) * _EPS * norm


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

    ``lambda_min`` as a lower bound (:func:`smallest_eigenvalue_lower_bound`):
    LAPACK's, less a rounding allowance, up to ``_DENSE_SLOPES`` rows (not
    computed below 128 rows when a factorization shows the lift is 0,
    :func:`_factored_lift`); above,
    Lanczos iterations' within ``_LANCZOS_TOL max(|lambda_min|, floor)``.
    Then conjugate gradients, or one Cholesky solve when they would be slower
    (``d^3 / 3`` flops instead of a full eigendecomposition's ``~9 d^3``). The
    system is then positive definite with smallest eigenvalue at least
    ``floor`` (above it by the allowance up to ``_DENSE_SLOPES`` rows, by at
    most twice that tolerance above; below it when the Lanczos iterations
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
        if _tests_by_factorization(A):
            lift = _factored_lift(A, floor)
        else:
            bound = _eigenvalue_bound(A, floor, low_precision)
            lift = max(0.0, floor - bound.value)
            solution = conjugate_gradients(
                A, lift, b, max(floor, bound.value), bound.single, bound.norm
            )
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
