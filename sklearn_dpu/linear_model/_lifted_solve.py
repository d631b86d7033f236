"""The linear solve behind the eigenvalue-floor rule of the SSP solver.

:func:`~sklearn_dpu.linear_model._sufficient_statistics.solve_noisy_gram`
solves ``(A + lam I) w = b`` with ``A`` a released (noised, so possibly
indefinite) Gram matrix and ``lam = max(0, floor - lambda_min(A))``, so that
the system's smallest eigenvalue is the noise's spectral bound ``floor``
[Wang18]_. Everything here is post-processing of released values: it changes
no noise, no sensitivity, no guarantee, only how fast and how exactly the
released model is computed from them.

``lambda_min`` is read as a lower bound (:func:`smallest_eigenvalue_lower_bound`):
Lanczos iterations stopped at a relative residual ``_LANCZOS_TOL`` give a
Ritz value ``theta``, never below ``lambda_min``, with an eigenvalue within
``_LANCZOS_TOL |theta|`` of it [Par98]_; with convergence to the smallest,
``theta - _LANCZOS_TOL |theta| <= lambda_min``. The lifted system's smallest
eigenvalue is then at least ``floor``, and above it by at most
``2 _LANCZOS_TOL |theta|``.

The system is solved by conjugate gradients [HS52]_ when they converge fast,
else by a Cholesky factorization. The lift makes the system well conditioned
exactly when the noise dominates the bottom of the spectrum (at n = 1e5,
d = 1000 in the benchmarks, a condition number of 2.8): then 21 products by
``A`` (2 ms) replace a ``d^3 / 3`` factorization (6-12 ms), the largest
single cost of a deletion's re-release. When the data dominate and the system
is ill conditioned, the first iterations show it (:func:`_conjugate_gradients`)
and the factorization runs after at most ``_CG_PROBE`` products.

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

# Relative residual tolerance of the Lanczos iterations. Measured at d = 1000 on
# a deletion's released matrix: 41-61 products against 81-91 at 1e-6 (7 ms
# against 12), theta off lambda_min by 9e-4 on -465 (the bound's margin,
# 0.47, is what the lift overshoots by at most, twice: 0.2% of |lambda_min|).
_LANCZOS_TOL = 1e-3
# Relative residual at which conjugate gradients stop: the solution then agrees
# with the Cholesky one to about the condition number times 1e-13 (measured at
# d = 1000, condition number 2.8: 3e-13 relative).
_CG_RTOL = 1e-13
# Products after which the convergence rate so far decides whether conjugate
# gradients can finish within their budget.
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
    fixed start vector, so the result is deterministic) to a relative
    residual ``_LANCZOS_TOL``, less that residual bound; a dense fallback.

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
    try:
        values = scipy.sparse.linalg.eigsh(
            operator, k=1, which="SA", v0=np.ones(q), tol=_LANCZOS_TOL, return_eigenvectors=False
        )
    except scipy.sparse.linalg.ArpackError:  # pragma: no cover - no convergence
        return float(scipy.linalg.eigh(A, subset_by_index=[0, 0], eigvals_only=True)[0])
    ritz = float(values[0])
    return ritz - _LANCZOS_TOL * abs(ritz)


def _symmetric_product(A: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> A x`` by BLAS ``symv`` on one triangle of the symmetric ``A``."""
    symv = scipy.linalg.blas.get_blas_funcs("symv", (A,))
    upper = A.T  # Fortran-ordered view of A (= A): symv reads its upper triangle

    def product(x: np.ndarray) -> np.ndarray:
        return symv(1.0, upper, np.ravel(x))

    return product


def _conjugate_gradients(A: np.ndarray, shift: float, b: np.ndarray) -> np.ndarray | None:
    """``(A + shift I)^{-1} b`` by conjugate gradients, or ``None`` when they
    would cost more than a factorization.

    Stops at a residual ``_CG_RTOL ||b||``. After ``_CG_PROBE`` products the
    residual's mean reduction per product so far predicts how many more are
    needed (an overestimate: conjugate gradients accelerate); beyond the
    budget of ``len(A) // _CG_ROWS_PER_PRODUCT`` products, or on a direction
    of non-positive curvature (an indefinite system), gives up.
    """
    budget = len(A) // _CG_ROWS_PER_PRODUCT
    b_norm = float(np.linalg.norm(b))
    if budget < _CG_PROBE or b_norm == 0.0:
        return None
    product = _symmetric_product(A)
    x = np.zeros_like(b)
    residual = np.array(b, dtype=np.float64)
    direction = residual.copy()
    squared = b_norm * b_norm
    target = (_CG_RTOL * b_norm) ** 2
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
        if squared <= target:
            return x
        if step == _CG_PROBE:
            rate = 0.5 * np.log(squared / (b_norm * b_norm)) / step  # log reduction per product
            if not rate < 0.0 or np.log(_CG_RTOL) / rate > budget:
                return None
        direction *= squared / previous
        direction += residual
    return None


def lifted_solve(
    A: np.ndarray, b: np.ndarray, floor: float, rebuild: Callable[[], np.ndarray]
) -> np.ndarray:
    """``(A + lam I)^{-1} b`` with ``lam = max(0, floor - lambda_min(A))``.

    ``lambda_min`` as a lower bound within 0.1%
    (:func:`smallest_eigenvalue_lower_bound`), then conjugate gradients, or
    one Cholesky solve when they would be slower (``d^3 / 3`` flops instead
    of a full eigendecomposition's ``~9 d^3``). The system is then positive
    definite with smallest eigenvalue at least ``floor`` (above it by at
    most 0.2% of ``|lambda_min(A)|``); when it is not (``floor = 0`` and a
    singular ``A``, public data only), the minimum-norm solution over the
    positive eigenvalues.

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
    lift = max(0.0, floor - smallest_eigenvalue_lower_bound(A))
    if floor > 0.0:
        solution = _conjugate_gradients(A, lift, b)
        if solution is not None:
            return solution
        A.flat[:: len(A) + 1] += lift
        try:
            factor = scipy.linalg.cho_factor(A.T, check_finite=False, overwrite_a=True)
            return scipy.linalg.cho_solve(factor, b, check_finite=False)
        except np.linalg.LinAlgError:  # pragma: no cover - lifted to floor > 0
            A = rebuild()
    eigenvalues, eigenvectors = np.linalg.eigh(A)
    shifted = eigenvalues + lift
    safe = np.where(shifted > 0, shifted, np.inf)  # only when sigma = 0 and A is singular
    return eigenvectors @ ((eigenvectors.T @ b) / safe)
