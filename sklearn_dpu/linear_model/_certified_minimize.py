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

The solver runs until the certified distance is at most ``tol / Lambda``. How
many iterations that takes depends on the data; only the certificate enters a
privacy proof, so the released point's sensitivity holds whatever the path
(the iteration count is a timing side channel, as for every solver).
"""

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize
from scipy.sparse.linalg import LinearOperator, cg
from threadpoolctl import ThreadpoolController

from ._losses import LinearModelLoss
from ._sparse_rows import squared_frobenius

__all__ = ["CertifiedSolution", "certified_minimize"]

# Dense Newton up to this many parameters; Hessian-vector products beyond.
_DENSE_NEWTON = 400
# Newton from the start when a Hessian costs at most this many flops.
_NEWTON_ONLY_WORK = 2_000_000


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

    def fun(theta):
        key = np.asarray(theta, dtype=float).tobytes()  # the same bits, signed zeros too
        if last.get("key") == key:
            return last["value"], last["grad"].copy()
        counter["grad"] += 1
        value, grad = loss.value_and_grad(theta, A, y)
        value = value + 0.5 * Lambda * float(theta @ theta) + float(lin @ theta)
        grad = grad + Lambda * theta + lin
        last.update(key=key, value=value, grad=grad.copy())
        return value, grad

    theta = np.zeros(loss.n_params) if theta0 is None else np.array(theta0, dtype=float)
    theta = _unconstrained(fun, loss, A, y, Lambda, tol, theta, max_iter, counter)
    if radius is None:
        _, grad = fun(theta)
        bound = np.linalg.norm(grad) / Lambda
        if Lambda * bound > tol:
            raise RuntimeError(_FLOOR.format(tol=tol, got=Lambda * bound))
        return CertifiedSolution(theta, bound, counter["iter"], counter["grad"])
    return _constrained(fun, loss, A, y, Lambda, tol, theta, radius, max_iter, counter)


_FLOOR = "could not certify the minimizer to tol={tol:.3g} (reached {got:.3g}); increase tol"


def _unconstrained(fun, loss, A, y, Lambda, tol, theta, max_iter, counter):
    """Quasi-Newton to near the target, then Newton steps to certify it.

    Small problems (a Hessian cheaper than a few quasi-Newton iterations) go to
    damped Newton directly.
    """
    dim = theta.size
    if dim <= _DENSE_NEWTON and A.shape[0] * dim * dim <= _NEWTON_ONLY_WORK:
        return _newton_polish(fun, loss, A, y, Lambda, tol, theta, counter, max_steps=100)
    options = {
        # max |g_i| <= tol / (2 sqrt(dim)) implies ||g|| <= tol / 2.
        "gtol": 0.5 * tol / np.sqrt(dim),
        "ftol": 0.0,
        "maxiter": max_iter,
        "maxcor": 20,
    }
    with _SerialOptimizer() as serial:
        result = minimize(serial.threaded(fun), theta, jac=True, method="L-BFGS-B", options=options)
    counter["iter"] += int(result.nit)
    theta = result.x
    return _newton_polish(fun, loss, A, y, Lambda, tol, theta, counter)


class _SerialOptimizer:
    """Run the BLAS libraries on one thread, except inside the objective.

    L-BFGS-B's own linear algebra is on ``dim x maxcor`` matrices, far below
    the size where threads pay; yet a threaded BLAS wakes its threads for
    them, which costs milliseconds per iteration when the cores are busy
    (more than an objective evaluation on 1e5 rows). The objective itself
    (products with the data) keeps the caller's thread counts, so its
    values, hence the iterates, are unchanged.
    """

    _libraries = None  # the BLAS libraries, found once (after numpy and scipy load)

    def __enter__(self):
        if _SerialOptimizer._libraries is None:
            _SerialOptimizer._libraries = ThreadpoolController().select(user_api="blas")
        self._controllers = _SerialOptimizer._libraries.lib_controllers
        self._threads = [lib.num_threads for lib in self._controllers]
        self._set([1] * len(self._controllers))
        return self

    def __exit__(self, *exc):
        self._set(self._threads)

    def _set(self, counts):
        for lib, count in zip(self._controllers, counts, strict=True):
            lib.set_num_threads(count)

    def threaded(self, fun):
        """``fun`` run with the caller's thread counts."""

        def call(theta):
            self._set(self._threads)
            try:
                return fun(theta)
            finally:
                self._set([1] * len(self._controllers))

        return call


def _newton_polish(fun, loss, A, y, Lambda, tol, theta, counter, max_steps=50):
    value, grad = fun(theta)
    for _ in range(max_steps):
        if np.linalg.norm(grad) <= 0.5 * tol:
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
        # Backtracking (Armijo) keeps the step safe far from the optimum.
        t, slope = 1.0, float(grad @ step)
        while True:
            new_value, new_grad = fun(theta + t * step)
            if new_value <= value + 1e-4 * t * slope or t < 1e-10:
                break
            t *= 0.5
        theta, value, grad = theta + t * step, new_value, new_grad
    return theta


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

    def hessian(self, theta, A, y):
        H = self._loss.hessian(theta, A, y)
        H[np.diag_indices_from(H)] += self._nu
        return H

    def hessian_operator(self, theta, A, y):
        hvp = self._loss.hessian_operator(theta, A, y)
        return lambda v: hvp(v) + self._nu * v
