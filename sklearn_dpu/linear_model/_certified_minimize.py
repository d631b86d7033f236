"""Minimize a regularized GLM objective to a *certified* distance from its minimizer.

Output and objective perturbation release a noised minimizer; their
sensitivity bounds hold for the **exact** minimizer (Ullah, PhD thesis, Johns
Hopkins University 2024, Thm 12 assumes an exact solution). An iterative
solver stops near it, so we certify how near:

* unconstrained, ``f`` is ``Lambda``-strongly convex: for any ``theta``,
  ``||theta - theta*|| <= ||grad f(theta)|| / Lambda``;
* constrained to the ball ``B(R)``: with ``eta <= 1/beta_f`` and the projected
  step ``theta+ = P(theta - eta grad f(theta))``, gradient mapping
  ``g = (theta - theta+) / eta``, the prox-gradient inequality (A. Beck,
  *First-Order Methods in Optimization*, SIAM 2017, Thm 10.16) with
  ``y = theta*`` and strong convexity give
  ``Lambda X^2 <= X ||g|| + (eta/2) ||g||^2`` for ``X = ||theta+ - theta*||``,
  hence ``X <= ||g|| (1 + sqrt(1 + 2 eta Lambda)) / (2 Lambda)``.

The gradient that enters the certificate is computed in floating point: its
rounding (measured at most ``1e-6 tol`` relative, n = 2e4 rows, ``tol`` down to
1e-8) is covered by certifying against ``tol (1 - 1e-4)`` (``_ROUNDING``), so
the exact distance is below ``tol / Lambda`` too.

The solver runs until the certified distance is at most ``tol / Lambda``. How
many iterations that takes depends on the data; only the certificate enters a
privacy proof, so the released point's sensitivity holds whatever the path
(the iteration count is a timing side channel, as for every solver).
"""

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.sparse.linalg import LinearOperator, cg

from .._row_threads import SerialBlas
from ._binary_pass import ZeroHessianCache, fused_pass
from ._losses import LinearModelLoss
from ._multinomial_pass import multinomial_pass
from ._sparse_rows import squared_frobenius

__all__ = [
    "CertifiedSolution",
    "DescentWork",
    "WarmDescent",
    "certified_minimize",
    "hessian_stride",
    "newton_only",
    "preconditioned_descent",
]

# Dense Newton up to this many parameters; Hessian-vector products beyond.
_DENSE_NEWTON = 400
# Newton from the start when a Hessian costs at most this many flops.
_NEWTON_ONLY_WORK = 2_000_000
# ... or, with the fused binary log-loss pass, up to this many parameters: its
# Hessian reuses the margins of the evaluation at the same point (a rank-k
# update, ~p^2/2 multiply-adds per row), and damped Newton needs 4-5 steps
# where L-BFGS-B needs 14-21 evaluations to the certified tolerance (measured
# at n = 1e5: Newton faster at d = 10, 30, 50 and 100, one BLAS thread).
_NEWTON_ONLY_DIM = 128
# Rows per parameter of a subsampled Newton matrix (binary log loss, from
# zero): the matrix only chooses the step, so it is estimated from every k-th
# row, k giving about this many rows per parameter (Roosta-Khorasani and Mahoney,
# "Sub-sampled Newton methods", Math. Programming 2019): measured at n = 1e5,
# one thread, a certified solve at p = 101 in 129 ms instead of 188 (output
# perturbation) and 160 instead of 239 (objective), 1-3 more steps.
_HESSIAN_ROWS_PER_PARAMETER = 100
# ... from this many parameters, and in the unconstrained solve only: the
# constrained one's inner solves run to 1e-3 of the tolerance, where the
# subsample's linear convergence took 2.3x the steps of Newton's quadratic
# one (measured at p = 11, 41 and 101: slower at each), and at p = 11 the
# unconstrained solve gained nothing (6.0 ms against 5.6).
_SUBSAMPLED_FROM = 32
# A subsampled step that leaves more than this fraction of the gradient norm
# switches the solve to every row (exact Newton from there on): a subsample
# that misses rare directions of curvature converges at a linear rate that
# can sit near 0.45 (a review measured 22 steps against 8 with 0.5 here).
# Measured rates on standardized data: 0.10 to 0.18.
_SUBSAMPLED_PROGRESS = 0.25
# Relative allowance for the floating-point rounding of the certified gradient.
_ROUNDING = 1e-4
# Value changes below this fraction of the value are rounding (a sum of n
# losses accumulates ~n ulps), where the Newton search goes by the gradient.
_VALUE_ROUNDING = 1e-12


class CertifiedSolution:
    """Result of :func:`certified_minimize`.

    Attributes
    ----------
    theta : ndarray
        The point to release (before noise).
    distance_bound : float
        Certified ``||theta - theta*||``, at most ``tol / Lambda``.
    n_iter : int
        Solver iterations (quasi-Newton plus Newton).
    n_grad : int
        Full-gradient evaluations (each costs one pass over the rows; a
        Hessian-vector product is counted as one).
    """

    def __init__(self, theta, distance_bound, n_iter, n_grad):
        self.theta = theta
        self.distance_bound = float(distance_bound)
        self.n_iter = int(n_iter)
        self.n_grad = int(n_grad)


def certified_minimize(
    loss: LinearModelLoss,
    A: np.ndarray,
    y: np.ndarray,
    Lambda: float,
    tol: float,
    *,
    linear: ArrayLike | None = None,
    radius: float | None = None,
    theta0: ArrayLike | None = None,
    max_iter: int = 2000,
    zero_hessian: ZeroHessianCache | None = None,
) -> CertifiedSolution:
    """Minimize ``loss + Lambda/2 ||theta||^2 + <linear, theta>``, over ``B(radius)``.

    Parameters
    ----------
    loss : LinearModelLoss
    A : ndarray of shape (n, p)
        Normalized rows.
    y : ndarray of shape (n,)
        Labels as encoded by ``loss.encode_labels``.
    Lambda : float
        Ridge on all parameters, > 0 (the strong convexity the certificate uses).
    tol : float
        Target: ``Lambda * distance_bound <= tol``.
    linear : array-like of shape (n_params,), default=None
        Linear term (objective perturbation).
    radius : float, default=None
        Constraint ball ``B(radius)``; ``None``: unconstrained.
    theta0 : array-like of shape (n_params,), default=None
        Starting point (warm start); zeros by default.
    max_iter : int, default=2000
        Cap on solver iterations.
    zero_hessian : ZeroHessianCache, default=None
        The binary log loss's Hessian at ``theta = 0`` shared with other
        solves on the same rows (it does not depend on the labels); used
        where the fused pass is.

    Returns
    -------
    CertifiedSolution

    Raises
    ------
    RuntimeError
        The certificate was not reached (``tol`` below the floating-point
        floor of the gradient). Never happens for ``tol`` above about
        ``1e-10 * n``.
    """
    lin = np.zeros(loss.n_params) if linear is None else np.asarray(linear, float)
    counter = {"grad": 0, "iter": 0}
    # The solvers ask again for the point they stopped at (L-BFGS-B's last
    # point for the Newton polish, the polish's for the certificate, a solve's
    # for the next one of the bisection): the last evaluation is kept and
    # returned for a bit-identical point, so the data are not read again.
    last = {}
    fused = fused_pass(loss, A, y)  # binary log loss: its Hessian, and the Newton branch
    # One pass per evaluation: the binary or the multinomial log loss.
    evaluation = fused if fused is not None else multinomial_pass(loss, A, y)

    def fun(theta):
        key = np.asarray(theta, dtype=float).tobytes()  # the same bits, signed zeros too
        if last.get("key") == key:
            return last["value"], last["grad"].copy()
        counter["grad"] += 1
        if evaluation is None:
            value, grad = loss.value_and_grad(theta, A, y)
        else:
            value, grad = evaluation.value_and_grad(theta)
        value = value + 0.5 * Lambda * float(theta @ theta) + float(lin @ theta)
        grad = grad + Lambda * theta + lin
        last.update(key=key, value=value, grad=grad.copy())
        return value, grad

    theta = np.zeros(loss.n_params) if theta0 is None else np.array(theta0, dtype=float)
    if fused is not None:
        loss = _FusedHessian(loss, fused, zero_hessian)
        if np.any(theta):
            # A warm start (a deletion's re-solve) is near the minimizer,
            # where exact Newton certifies in about 2 steps and the
            # subsample's linear rate took 8 (a review: 58 ms against 50).
            loss.use_every_row()
    target = tol * (1.0 - _ROUNDING)  # what the computed certificate must meet
    theta = _unconstrained(fun, loss, A, y, Lambda, target, theta, max_iter, counter)
    if fused is not None:
        loss.use_every_row()  # the constrained solve's inner problems (see above)
    if radius is None:
        _, grad = fun(theta)
        bound = np.linalg.norm(grad) / Lambda
        if Lambda * bound > target:
            raise RuntimeError(_FLOOR.format(tol=tol, got=Lambda * bound))
        return CertifiedSolution(theta, bound, counter["iter"], counter["grad"])
    return _constrained(fun, loss, A, y, Lambda, target, theta, radius, max_iter, counter)


def hessian_stride(n_rows: int, n_params: int) -> int:
    """The row stride of the binary log loss's Newton matrix in an
    unconstrained solve: every ``stride``-th row, about
    ``_HESSIAN_ROWS_PER_PARAMETER`` rows per parameter (all rows below twice
    that), from ``_SUBSAMPLED_FROM`` parameters (below, a matrix costs about
    a pass and the extra steps cost more than it saves)."""
    if n_params < _SUBSAMPLED_FROM:
        return 1
    return max(1, n_rows // (_HESSIAN_ROWS_PER_PARAMETER * n_params))


class _FusedHessian:
    """``loss`` whose dense Hessian comes from its fused pass (same matrix to
    rounding, without recomputing the margins at an evaluated point),
    estimated from every :func:`hessian_stride`-th row until
    :meth:`use_every_row` (the Newton steps call it when a step falls short
    of ``_SUBSAMPLED_PROGRESS``)."""

    def __init__(self, loss, fused, zero_hessian=None):
        self._loss, self._fused, self._zero = loss, fused, zero_hessian
        self.fused = True
        self._stride = hessian_stride(*fused.A.shape)

    def __getattr__(self, name):
        return getattr(self._loss, name)

    def use_every_row(self):
        self._stride = 1

    def hessian(self, theta, A, y):
        if self._zero is not None:
            return self._zero.hessian(self._fused, theta, self._stride)
        return self._fused.hessian(theta, self._stride)


class _Certified(Exception):
    """Raised by the objective once a point meets the certificate."""

    def __init__(self, theta):
        super().__init__()
        self.theta = theta


_FLOOR = "could not certify the minimizer to tol={tol:.3g} (reached {got:.3g}); increase tol"


def newton_only(dim: int, fused: bool, n_rows: float) -> bool:
    """Whether :func:`certified_minimize` runs damped Newton from the start
    (else L-BFGS-B, then a Newton polish): ``dim`` parameters, the fused
    binary log-loss pass available or not, ``n_rows`` rows. The deletion
    planner's cost model asks the same question with a released count."""
    small = dim <= _NEWTON_ONLY_DIM and fused
    return dim <= _DENSE_NEWTON and (small or n_rows * dim * dim <= _NEWTON_ONLY_WORK)


def _unconstrained(fun, loss, A, y, Lambda, tol, theta, max_iter, counter):
    """Quasi-Newton to near the target, then Newton steps to certify it.

    Small problems (a Hessian cheaper than a few quasi-Newton iterations, or
    the binary log loss's fused Hessian up to ``_NEWTON_ONLY_DIM`` parameters)
    go to damped Newton directly. Either way the solver stops at the first
    point whose gradient norm is at most ``tol``: the certificate, the same
    whatever path reached the point.
    """
    if newton_only(theta.size, getattr(loss, "fused", False), A.shape[0]):
        return _newton_polish(fun, loss, A, y, Lambda, tol, theta, counter, max_steps=100)
    options = {
        # max |g_i| <= tol / (2 sqrt(dim)) implies ||g|| <= tol / 2.
        "gtol": 0.5 * tol / np.sqrt(theta.size),
        "ftol": 0.0,
        "maxiter": max_iter,
        "maxcor": 20,
    }

    def watched(point):
        # Stop at the first point whose gradient meets the certificate, not
        # at L-BFGS-B's stricter per-coordinate test.
        counter["iter"] += 1  # evaluations, an upper bound on L-BFGS-B's iterations
        value, grad = fun(point)
        if np.linalg.norm(grad) <= tol:
            raise _Certified(np.array(point, dtype=float))
        return value, grad

    with SerialBlas() as serial:
        try:
            result = minimize(
                serial.threaded(watched), theta, jac=True, method="L-BFGS-B", options=options
            )
        except _Certified as stop:
            theta = stop.theta
        else:
            theta = result.x
    return _newton_polish(fun, loss, A, y, Lambda, tol, theta, counter)


def _newton_polish(fun, loss, A, y, Lambda, tol, theta, counter, max_steps=50):
    """Damped Newton steps from ``theta`` until the gradient certifies it.

    As for L-BFGS-B, the steps' own linear algebra (the ``p x p`` solve,
    conjugate gradients' vector updates) runs with BLAS on one thread, and
    the passes over the rows (values, gradients, Hessians and their
    products) with the caller's thread counts
    (:class:`~sklearn_dpu._row_threads.SerialBlas`).
    """
    with SerialBlas() as serial:
        threaded_loss = _ThreadedPasses(loss, serial)
        return _newton_steps(
            serial.threaded(fun), threaded_loss, A, y, Lambda, tol, theta, counter, max_steps
        )


class _ThreadedPasses:
    """``loss`` whose Hessian and Hessian-vector products (passes over the
    rows) run with the caller's thread counts inside a :class:`SerialBlas`."""

    def __init__(self, loss, serial):
        self._loss, self._serial = loss, serial

    def __getattr__(self, name):
        return getattr(self._loss, name)

    def hessian(self, theta, A, y):
        return self._serial.threaded(self._loss.hessian)(theta, A, y)

    def hessian_operator(self, theta, A, y):
        hvp = self._serial.threaded(self._loss.hessian_operator)(theta, A, y)
        return self._serial.threaded(hvp)


def _newton_steps(fun, loss, A, y, Lambda, tol, theta, counter, max_steps):
    value, grad = fun(theta)
    for _ in range(max_steps):
        if np.linalg.norm(grad) <= tol:  # the certificate: Lambda ||theta - theta*|| <= tol
            break
        counter["iter"] += 1
        if loss.n_params <= _DENSE_NEWTON:
            H = loss.hessian(theta, A, y)
            H[np.diag_indices_from(H)] += Lambda
            counter["grad"] += 1
            step = -np.linalg.solve(H, grad)
        else:
            hvp = loss.hessian_operator(theta, A, y)

            def matvec(v, hvp=hvp):
                counter["grad"] += 1
                return hvp(v) + Lambda * v

            op = LinearOperator((loss.n_params, loss.n_params), matvec=matvec)
            step, _ = cg(op, -grad, rtol=1e-3, maxiter=200)
        # Backtracking (Armijo) keeps the step safe far from the optimum. Near
        # it the value's decrease falls below its rounding (a sum of n losses)
        # before the gradient reaches a strict tolerance; a step that shrinks
        # the gradient norm is then taken as well (the objective is strongly
        # convex: its one stationary point is the minimizer, and the
        # certificate reads the gradient). Without this, a stalled search
        # halved the step 34 times at every Newton step (7x slower solves).
        t, slope = 1.0, float(grad @ step)
        grad_norm = np.linalg.norm(grad)
        while True:
            new_value, new_grad = fun(theta + t * step)
            if new_value <= value + 1e-4 * t * slope or t < 1e-10:
                break
            if abs(new_value - value) <= _VALUE_ROUNDING * abs(value) and (
                np.linalg.norm(new_grad) <= (1.0 - 1e-4 * t) * grad_norm
            ):
                break
            t *= 0.5
        if np.linalg.norm(new_grad) > _SUBSAMPLED_PROGRESS * grad_norm:
            getattr(loss, "use_every_row", _no_subsample)()
        theta, value, grad = theta + t * step, new_value, new_grad
    return theta


def _no_subsample():
    """A loss whose Newton matrix reads every row already."""


def _project(theta, radius):
    norm = np.linalg.norm(theta)
    return theta if norm <= radius else theta * (radius / norm)


def _constrained(fun, loss, A, y, Lambda, tol, theta, radius, max_iter, counter):
    """Minimizer over ``B(radius)``: the Lagrangian ridge ``nu`` by bisection, then
    one projected step whose gradient mapping certifies the distance."""
    beta_f = loss.smoothness * squared_frobenius(A) + Lambda
    eta = 1.0 / beta_f
    factor = (1.0 + np.sqrt(1.0 + 2.0 * eta * Lambda)) / 2.0

    def certificate(point):
        _, grad = fun(point)
        plus = _project(point - eta * grad, radius)
        return plus, factor * np.linalg.norm((point - plus) / eta) / Lambda

    if np.linalg.norm(theta) > radius:
        # ||theta(nu)|| decreases in nu; theta(nu) minimizes f + nu/2 ||.||^2.
        def solve(nu, start):
            shifted = _Shifted(loss, nu)
            inner = lambda t: _shift(fun, nu, t)  # noqa: E731
            return _unconstrained(
                inner, shifted, A, y, Lambda, 1e-3 * tol, start, max_iter, counter
            )

        low, high = 0.0, max(1.0, Lambda)
        point = solve(high, theta)
        while np.linalg.norm(point) > radius:
            low, high = high, 4.0 * high
            point = solve(high, point)
        for _ in range(200):
            mid = 0.5 * (low + high)
            point = solve(mid, point)
            norm = np.linalg.norm(point)
            if abs(norm - radius) <= 1e-12 * radius + 1e-3 * tol / Lambda:
                break
            low, high = (mid, high) if norm > radius else (low, mid)
        theta = _project(point, radius)
    plus, bound = certificate(theta)
    steps = 0
    while Lambda * bound > tol and steps < max_iter:
        theta = plus
        plus, bound = certificate(theta)
        steps += 1
        counter["iter"] += 1
    if Lambda * bound > tol:
        raise RuntimeError(_FLOOR.format(tol=tol, got=Lambda * bound))
    return CertifiedSolution(plus, bound, counter["iter"], counter["grad"])


def _shift(fun, nu, theta):
    value, grad = fun(theta)
    return value + 0.5 * nu * float(theta @ theta), grad + nu * theta


class _Shifted:
    """``loss`` whose Hessian carries an extra ridge ``nu`` (for Newton steps)."""

    def __init__(self, loss, nu):
        self._loss, self._nu = loss, nu
        self.n_params = loss.n_params
        self.fused = getattr(loss, "fused", False)

    def hessian(self, theta, A, y):
        H = self._loss.hessian(theta, A, y)
        H[np.diag_indices_from(H)] += self._nu
        return H

    def hessian_operator(self, theta, A, y):
        hvp = self._loss.hessian_operator(theta, A, y)
        return lambda v: hvp(v) + self._nu * v


# ------------------------------------------------- warm-started fine-tune
# Rows per block of the fused passes: a block's rows stay in cache between
# its margins and its back-projection, and the only temporaries are one
# block's (no copy of the whole design matrix).
_BLOCK = 4096


@dataclass(frozen=True)
class DescentWork:
    """Realized work of :func:`preconditioned_descent`, as counts (never a time).

    Attributes
    ----------
    gradient_passes : int
        Full gradients of the summed loss (each one ``A @ theta`` and one
        ``A.T @ r`` over all the rows passed).
    hessian_passes : int
        Dense Hessians formed (blockwise, one pass over the rows).
    rows : int
        Rows read per pass (zero-weight rows included: they are read).
    flops : float
        Multiply-adds of the matrix products with the rows.
    """

    gradient_passes: int
    hessian_passes: int
    rows: int
    flops: float


@dataclass(frozen=True)
class WarmDescent:
    """Result of :func:`preconditioned_descent`.

    Attributes
    ----------
    theta : ndarray
        The last iterate (before any noise).
    distance_bound : float
        Certified ``||theta - theta*|| <= ||grad F(theta)|| / Lambda``.
    work : DescentWork
    """

    theta: np.ndarray
    distance_bound: float
    work: DescentWork


def _scores(loss, theta, A):
    Z = loss.decision(theta, A)
    return Z[:, None] if loss.binary else Z


def _block_gradient(loss, Ab, scores, y, weights):
    """``sum_i w_i grad loss_i`` over one block, from its scores."""
    D = loss.base_loss.dz(scores, y)
    D *= weights[:, None]
    return Ab.T @ D[:, 0] if loss.binary else (D.T @ Ab).ravel()


def _weighted_gradient(loss, theta, A, y, weights, evaluation=None):
    """``sum_i w_i grad loss_i(theta)``: one fused pass, block by block (the
    blocked multinomial ``evaluation`` when given: dense rows, ``K >= 3``)."""
    if evaluation is not None:
        return evaluation.gradient(theta, weights)
    grad = np.zeros(loss.n_params)
    for start in range(0, A.shape[0], _BLOCK):
        block = slice(start, start + _BLOCK)
        Ab = A[block]
        grad += _block_gradient(loss, Ab, _scores(loss, theta, Ab), y[block], weights[block])
    return grad


def _weighted_hessian(loss, theta, A, y, weights, grad=None):
    """``sum_i w_i hess loss_i(theta)``, block by block.

    Products in single precision: the matrix is only a preconditioner (the
    certificate is computed in double precision), and single precision halves
    the dominant cost of the fine-tune. With ``grad`` (an array of zeros of
    shape ``(n_params,)``) the same pass also adds ``sum_i w_i grad
    loss_i(theta)`` into it, from the same scores: the rows are read once for
    both, and the gradient is :func:`_weighted_gradient`'s without an
    ``evaluation`` (bit for bit; with one, to rounding).
    """
    K, p = loss.n_outputs, loss.n_coef
    H = np.zeros((K, p, K, p))
    # Single-precision copies of a block go to two buffers allocated once (the
    # same values as ``astype`` and a product, without a fresh block-sized
    # allocation per block).
    rows32 = np.empty((min(_BLOCK, A.shape[0]), p), dtype=np.float32)
    scaled32 = np.empty_like(rows32)
    for start in range(0, A.shape[0], _BLOCK):
        block = slice(start, start + _BLOCK)
        Ab = A[block]
        scores = _scores(loss, theta, Ab)
        if grad is not None:
            grad += _block_gradient(loss, Ab, scores, y[block], weights[block])
        Hz = loss.base_loss.hessian_z(scores, y[block])
        Hz *= weights[block, None, None]
        Ab32, W = rows32[: Ab.shape[0]], scaled32[: Ab.shape[0]]
        # A block of sparse rows (a sparse registry) is densified: one block's.
        np.copyto(Ab32, Ab if isinstance(Ab, np.ndarray) else Ab.toarray(), casting="same_kind")
        for k in range(K):
            if loss.binary:
                np.multiply(Ab32, np.sqrt(Hz[:, 0, 0]).astype(np.float32)[:, None], out=W)
                H[0, :, 0, :] += W.T @ W
                break
            for j in range(k, K):
                np.multiply(Ab32, Hz[:, k, j].astype(np.float32)[:, None], out=W)
                part = Ab32.T @ W
                H[k, :, j, :] += part
                if j != k:
                    H[j, :, k, :] += part.T
    return H.reshape(K * p, K * p)


def preconditioned_descent(
    loss: LinearModelLoss,
    A: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    Lambda: float,
    theta0: ArrayLike,
    steps: int,
    step_size: float,
) -> WarmDescent:
    """``steps`` of gradient descent preconditioned by the Hessian at the start.

    Minimizes ``F(theta) = sum_i w_i loss(a_i, y_i; theta) + Lambda/2 ||theta||^2``
    by ``theta <- theta - step_size P^{-1} grad F(theta)`` with
    ``P = hess F(theta0)`` (factored once). In the geometry of ``P`` this is
    the plain gradient descent of Neel, Roth & Sharifi-Malvajerdi,
    "Descent-to-Delete: Gradient-Based Methods for Machine Unlearning", ALT
    2021, Thm 3.1 (their GD contraction, Thm 2.13): if ``F`` is
    ``m_P``-strongly convex and ``M_P``-smooth relative to ``P`` on the
    iterates' region, ``step_size = 2 / (M_P + m_P)`` contracts the
    ``P``-distance to the minimizer by ``(M_P - m_P) / (M_P + m_P)`` per step.
    The number of steps is fixed by the caller (public); the returned
    distance bound is *checked* (strong convexity, as
    :func:`certified_minimize`), whatever the path.

    Parameters
    ----------
    loss : LinearModelLoss
    A : ndarray of shape (n, n_coef)
        Rows (a strided view is read in place, never copied).
    y : ndarray of shape (n,)
        Labels as encoded by ``loss.encode_labels``.
    weights : ndarray of shape (n,)
        ``1`` for a row of the objective, ``0`` for a row to skip (deleted).
    Lambda : float
        Ridge, > 0.
    theta0 : array-like of shape (n_params,)
        Warm start.
    steps : int
        Descent steps (each one full gradient).
    step_size : float

    Returns
    -------
    WarmDescent
    """
    theta = np.array(theta0, dtype=float)
    n, p = A.shape
    K = loss.n_outputs
    # Block products are far below the size where BLAS threads pay, and
    # waking them costs more than the product on a busy machine.
    with SerialBlas():
        # The Hessian and the first gradient are both at the start: one pass.
        first = np.zeros(loss.n_params)
        H = _weighted_hessian(loss, theta, A, y, weights, grad=first)
        H[np.diag_indices_from(H)] += Lambda
        factor = cho_factor(H)
        grad = first + Lambda * theta
        # The later gradients of K >= 3 classes on dense rows: the blocked
        # multinomial pass (the first one is the Hessian pass's).
        evaluation = multinomial_pass(loss, A, y)
        for step in range(int(steps)):
            if step:
                grad = _weighted_gradient(loss, theta, A, y, weights, evaluation) + Lambda * theta
            theta = theta - step_size * cho_solve(factor, grad)
        if steps:
            grad = _weighted_gradient(loss, theta, A, y, weights, evaluation) + Lambda * theta
    passes = int(steps) + 1  # gradients evaluated (the first one in the Hessian's pass)
    # Each gradient: one product for the scores, one back (the first
    # gradient's scores are the Hessian's); the Hessian: K (K + 1) / 2 blocks.
    flops = (2.0 * passes - 1.0) * n * p * K + n * p * p * K * (K + 1) / 2.0
    work = DescentWork(passes, 1, int(n), float(flops))
    return WarmDescent(theta, float(np.linalg.norm(grad)) / Lambda, work)
