"""The linear solve behind the eigenvalue-floor rule of the SSP solver.

:func:`~sklearn_dpu.linear_model._sufficient_statistics.solve_noisy_gram`
solves ``(A + lam I) w = b`` with ``A`` a released (noised, so possibly
indefinite) Gram matrix and ``lam = max(0, floor - lambda_min(A))``, so that
the system's smallest eigenvalue is the noise's spectral bound ``floor``
[Wang18]_. Everything here is post-processing of released values: it changes
no noise, no sensitivity, no guarantee, only how fast and how exactly the
released model is computed from them.

``lambda_min`` is read as a lower bound
(:func:`smallest_eigenvalue_lower_bound`): Lanczos iterations stopped when
ARPACK's estimate of the residual falls below ``_LANCZOS_TOL max(eps^(2/3),
|theta|)`` give a Ritz value ``theta``, never below ``lambda_min``, with an
eigenvalue within that residual of it [Par98]_. When that eigenvalue is the
smallest, ``theta`` less the residual bound is below ``lambda_min``, and the
lifted system's smallest eigenvalue is at least ``floor`` and above it by at
most twice the bound. Lanczos iterations do not certify that they found the
smallest eigenvalue: on a matrix whose two smallest eigenvalues are closer
than the tolerance, or whose smallest eigenvector is (nearly) absent from the
start vector, the Ritz value can belong to the next eigenvalue, and the lift
then falls short of the floor by up to their gap (on released matrices, a
Gram matrix plus its noise, collinear features included, none was found in
760 trials). The iterations stop after about ``0.55 q`` to ``0.75 q``
products (a dense eigenvalue solver's cost) for the dense solver.

The system is solved by conjugate gradients [HS52]_ when they converge fast,
else by a Cholesky factorization. The lift makes the system well conditioned
exactly when the noise dominates the bottom of the spectrum (at n = 1e5,
d = 1000 in the benchmarks, a condition number of 2.8): then about 25
products by ``A`` (2 ms) replace a ``d^3 / 3`` factorization (6-12 ms), the
largest single cost of a deletion's re-release. Conjugate gradients stop when
the residual guarantees a relative error below ``_CG_RTOL`` given that the
system's smallest eigenvalue is at least ``floor`` (or the eigenvalue bound
when that is above it): as accurate as the factorization's whatever the
conditioning, as long as the Lanczos bound holds (when it does not, the error
can exceed the claim by the ratio of the floor to the true smallest
eigenvalue). Every ``_CG_PROBE`` products the convergence rate so far predicts
the products still needed; beyond the budget (about the factorization's cost) they stop and the
factorization runs. An ill-conditioned system is usually recognized at the
first check; a right-hand side concentrated on a few eigenvectors can look
fast at first, and then costs up to the budget before the factorization.

References
----------
.. [Wang18] Y.-X. Wang, "Revisiting differentially private linear regression:
   optimal and adaptive prediction & estimation in unbounded domain", UAI 2018,
   Algorithm 2 (AdaSSP).
.. [Par98] B. N. Parlett, "The symmetric eigenvalue problem", SIAM 1998,
   Section 4.5 (residual bounds: a symmetric matrix has an eigenvalue within
   ``||A y - theta y||`` of the Rayleigh quotient ``theta`` of a unit ``y``).
.. [HS52] M. R. Hestenes and E. Stiefel, "Methods of conjugate gradients for
   solving linear systems", Journal of Research of the National Bureau of
   Standards 49(6), 1952.
"""

from collections.abc import Callable

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

__all__ = ["lifted_solve", "smallest_eigenvalue_lower_bound"]

# Relative residual tolerance of the Lanczos iterations. ARPACK keeps a
# process-wide random state (for the restart vectors it draws), so two calls on
# the same matrix can stop at different Ritz values: at 1e-6 they agree to about
# 1e-13, at 1e-3 only to 1e-5 (a released model that changed with the calls made
# before it), which is why the looser tolerance, 30% fewer products, is not used.
_LANCZOS_TOL = 1e-6
# ARPACK's convergence test is residual <= tol * max(_ARPACK_FLOOR, |theta|).
_ARPACK_FLOOR = np.finfo(np.float64).eps ** (2.0 / 3.0)
# Lanczos vectors kept between restarts (ARPACK's default for one eigenvalue).
_LANCZOS_VECTORS = 20
# Relative error (in the 2-norm) of the conjugate gradients' solution: they
# stop when the residual over the system's smallest eigenvalue bound proves it.
_CG_RTOL = 1e-12
# Products between two checks of the conjugate gradients' convergence rate.
_CG_PROBE = 8
# Products conjugate gradients may take, per row of A: a product reads the
# matrix once (about 0.1 ms at d = 1000), a Cholesky factorization costs
# about as much as d / 16 of them (measured 6-12 ms at d = 1000). Below
# _CG_PROBE * 16 rows the factorization is always cheaper.
_CG_ROWS_PER_PRODUCT = 16


def smallest_eigenvalue_lower_bound(A: np.ndarray) -> float:
    """A lower bound on the smallest eigenvalue of the symmetric ``A``, tight to
    ``_LANCZOS_TOL`` relative.

    Exact (dense) for small ``d``, else Lanczos iterations (ARPACK, from a
    fixed start vector; its restarts draw from a process-wide random state,
    so repeated calls agree to about 1e-13, see ``_LANCZOS_TOL``) to a
    relative residual ``_LANCZOS_TOL``, less that residual bound; when the
    iterations have not converged after 0.55 ``q`` to 0.75 ``q`` products
    (about what a dense solver costs), the dense solver with the same
    margin. A lower bound when the iterations converge to the smallest
    eigenvalue (see the module's docstring).

    Each Lanczos step multiplies by ``A`` with BLAS ``symv``, which reads one
    triangle of ``A`` only: at d = 1000 the matrix does not fit in cache, and
    half the memory traffic makes the iterations about 1.6 times faster than
    with ``A @ x``. (The products differ from ``A @ x`` by rounding only, so
    the eigenvalue does too.)

    Parameters
    ----------
    A : ndarray of shape (q, q)
        Exactly symmetric.

    Returns
    -------
    float
    """
    q = len(A)
    if q <= 64:
        return float(np.linalg.eigvalsh(A)[0])
    product = _symmetric_product(A)
    operator = scipy.sparse.linalg.LinearOperator((q, q), matvec=product, dtype=np.float64)
    # At most about _LANCZOS_VECTORS - 1 products per restart: stop before q of
    # them (measured: 0.55 q to 0.75 q).
    restarts = max(1, q // (_LANCZOS_VECTORS - 1))
    try:
        values = scipy.sparse.linalg.eigsh(
            operator,
            k=1,
            which="SA",
            v0=np.ones(q),
            ncv=_LANCZOS_VECTORS,
            maxiter=restarts,
            tol=_LANCZOS_TOL,
            return_eigenvectors=False,
        )
    except scipy.sparse.linalg.ArpackError:  # no convergence within the cap
        # the same margin: a matrix near the cap gives the same bound either way
        values = scipy.linalg.eigh(A, subset_by_index=[0, 0], eigvals_only=True)
    value = float(values[0])
    return value - _LANCZOS_TOL * max(_ARPACK_FLOOR, abs(value))


def _symmetric_product(A: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> A x`` by BLAS ``symv`` on one triangle of the symmetric ``A``."""
    symv = scipy.linalg.blas.get_blas_funcs("symv", (A,))
    upper = A.T  # Fortran-ordered view of A (= A): symv reads its upper triangle

    def product(x: np.ndarray) -> np.ndarray:
        return symv(1.0, upper, np.ravel(x))

    return product


def _conjugate_gradients(
    A: np.ndarray, shift: float, b: np.ndarray, smallest: float
) -> np.ndarray | None:
    """``(A + shift I)^{-1} b`` by conjugate gradients, or ``None`` when they
    would cost more than a factorization.

    ``smallest`` is a lower bound on the system's smallest eigenvalue, so a
    residual ``r`` bounds the error by ``||r|| / smallest``: they stop when
    that is below ``_CG_RTOL ||x||``. Every ``_CG_PROBE`` products the mean
    reduction of the residual per product so far predicts how many more
    are needed; beyond the budget of ``len(A) // _CG_ROWS_PER_PRODUCT``
    products, or on a direction of non-positive curvature (an indefinite
    system), they give up.
    """
    budget = len(A) // _CG_ROWS_PER_PRODUCT
    b_norm = float(np.linalg.norm(b))
    if budget < _CG_PROBE or not b_norm > 0.0 or not smallest > 0.0:
        return None
    product = _symmetric_product(A)
    x = np.zeros_like(b)
    residual = np.array(b, dtype=np.float64)
    direction = residual.copy()
    squared = b_norm * b_norm
    with np.errstate(all="ignore"):  # an overflow shows as a failed test below
        for step in range(1, budget + 1):
            image = product(direction)
            image += shift * direction
            curvature = float(direction @ image)
            if not curvature > 0.0:
                return None
            alpha = squared / curvature
            x += alpha * direction
            residual -= alpha * image
            previous, squared = squared, float(residual @ residual)
            # ||x - x*|| <= ||r|| / smallest <= _CG_RTOL ||x||
            target = _CG_RTOL * smallest * float(np.linalg.norm(x))
            if squared <= target * target:
                return x
            if step % _CG_PROBE == 0:
                # log reduction of the residual per product so far
                rate = 0.5 * np.log(squared / (b_norm * b_norm)) / step
                needed = np.log(target / np.sqrt(squared)) / rate if rate < 0.0 else np.inf
                if not needed <= budget - step:
                    return None
            direction *= squared / previous
            direction += residual
    return None


def lifted_solve(
    A: np.ndarray, b: np.ndarray, floor: float, rebuild: Callable[[], np.ndarray]
) -> np.ndarray:
    """``(A + lam I)^{-1} b`` with ``lam = max(0, floor - lambda_min(A))``.

    ``lambda_min`` as a lower bound within ``1e-6`` relative
    (:func:`smallest_eigenvalue_lower_bound`), then conjugate gradients, or
    one Cholesky solve when they would be slower (``d^3 / 3`` flops instead
    of a full eigendecomposition's ``~9 d^3``). The system is then positive
    definite with smallest eigenvalue at least ``floor`` (above it by at
    most ``2e-6 |lambda_min(A)|``; below it when the Lanczos iterations
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

    Returns
    -------
    ndarray of shape (q,)
    """
    if floor > 0.0:
        lowest = smallest_eigenvalue_lower_bound(A)
        lift = max(0.0, floor - lowest)
        solution = _conjugate_gradients(A, lift, b, smallest=max(floor, lowest))
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
    cutoff = len(A) * np.finfo(np.float64).eps * float(np.abs(shifted).max())
    safe = np.where(shifted > cutoff, shifted, np.inf)
    return eigenvectors @ ((eigenvectors.T @ b) / safe)
