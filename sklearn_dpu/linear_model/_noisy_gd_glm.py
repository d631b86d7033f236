"""Projected noisy gradient descent for GLM losses, and one-pass DP-SGD over a chunk.

**Noisy GD** (Ullah, PhD thesis, Johns Hopkins University 2024, Alg. 1 and
Thm 8, with two errata: the update uses the gradient, not the loss, and the
loop runs ``t = 0..T-1`` from ``w_0 = 0``). Each step releases the *sum* of
per-record gradients plus Gaussian noise. A record's gradient has norm at most
``G`` for every parameter value (rows are clipped; ``G`` from
:mod:`._losses`), so under add/remove-one each step is a Gaussian mechanism of
sensitivity ``G``, and ``T`` steps with noise multiplier ``m`` compose exactly
to one with multiplier ``m / sqrt(T)`` (Dong, Roth & Su 2022, Cor. 3.3). The
dissertation's ``sigma^2 = 8 G^2 T log(1/delta) / (n^2 eps^2)`` (replace-one,
average gradient, public ``n``) is not used; the multiplier is calibrated by
:func:`sklearn_dpu.privacy.calibration.gaussian_noise_multiplier`.

The steps are *preconditioned* by a public matrix: Böhning's bound on the
logistic Hessian, ``hess <= beta_1 A^T A`` (``beta_1 = 1/4``; ``1/2`` per class
for the softmax), turns gradient descent into a majorize-minimize step
``theta <- theta - (beta_1 Gram + Lambda I)^{-1} (noisy gradient)`` that
converges in tens of steps instead of the thousands a step of ``1/beta`` needs
on badly scaled features. The Gram matrix ``A^T A`` is itself released by the
Gaussian mechanism (a record contributes ``a a^T``, Frobenius norm
``||a||^2 <= r^2``; isometric symmetric noise,
:meth:`~sklearn_dpu.privacy.mechanisms.GaussianMechanism.release_symmetric`)
and its eigenvalues are lifted by ``3 sigma sqrt(p)`` (above the noise's
spectral norm with high probability, as AdaSSP's ridge [Wang 2018]) so that the
majorization, and hence descent, survives the noise. The noise of each step is
added to the raw gradient sum *before* preconditioning: privacy is that of the
Gram release composed with ``T`` Gaussian gradient releases, whatever the
preconditioner. Iterates are projected onto a public ball, which privacy does
not need (the loss is Lipschitz everywhere). Output: the average of
the second half of the iterates (post-processing).

**DP-SGD** (Abadi et al. 2016, Alg. 1) for ``partial_fit``: one pass over a
chunk. Each row is put in one of ``B`` batches uniformly at random, independently
of the data (``B`` from the released chunk count), per-example gradients are
clipped to ``G`` (a no-op for clipped rows, kept so that the sensitivity holds
by construction), and each batch sum gets Gaussian noise. A row enters exactly
one noisy sum, so, conditionally on the batch assignment, the pass is a
Gaussian mechanism of sensitivity ``G``; mixing over the data-independent
assignment preserves the bound (hockey-stick divergences are jointly convex).
No amplification by sampling is claimed.

Each run's noise is drawn by mechanism objects that also give its ledger
event: :class:`NoisyGDRun` (the Gram release and the ``T`` gradient sums) and
:class:`DisjointBatchSums` (one DP-SGD pass).
"""

import math
from dataclasses import dataclass

import numpy as np

from .._progress import step_ticker
from .._row_threads import SerialBlas
from ..privacy.mechanisms import GaussianDP, GaussianMechanism, GaussianSteps
from ._losses import LinearModelLoss
from ._multinomial_pass import gradient_function
from ._sparse_rows import gram_matrix

__all__ = [
    "DisjointBatchSums",
    "NoisyGDRun",
    "dp_sgd_pass",
    "n_batches",
    "noisy_projected_gd_glm",
    "released_preconditioner",
]


@dataclass(frozen=True)
class NoisyGDRun(GaussianDP):
    """The releases of one preconditioned noisy GD run, together ``mu``-GDP.

    The Gram matrix (``gram``, ``mu_gram = 1 / gram.noise_multiplier``) and
    ``T`` gradient sums (``steps``, each ``1 / steps.noise_multiplier``) are
    Gaussian mechanisms, so the run is exactly
    ``sqrt(mu_gram^2 + T / m^2)``-GDP (Dong, Roth & Su 2022, Cor. 3.3); the
    calibration makes that ``mu``, which is checked.

    Parameters
    ----------
    mu : float
    gram : GaussianMechanism
        Release of ``A^T A`` (contribution bound ``row_norm^2``).
    steps : GaussianSteps
        The ``T`` gradient sums (contribution bound ``G``).
    """

    gram: GaussianMechanism
    steps: GaussianSteps

    def __post_init__(self):
        composed = 1.0 / self.gram.noise_multiplier**2 + self.steps.steps / (
            self.steps.noise_multiplier**2
        )
        if not math.isclose(composed, self.mu**2, rel_tol=1e-9):
            raise ValueError(f"the run is {math.sqrt(composed):.6g}-GDP, not {self.mu:.6g}-GDP")


@dataclass(frozen=True)
class DisjointBatchSums(GaussianDP):
    """One DP-SGD pass: each record in exactly one noisy batch sum, ``mu``-GDP.

    Conditionally on the data-independent batch assignment a record enters
    one Gaussian sum of multiplier ``steps.noise_multiplier`` (parallel
    composition over the batches), so the pass is ``1 / multiplier``-GDP; the
    calibration makes that ``mu``, which is checked.

    Parameters
    ----------
    mu : float
    steps : GaussianSteps
        The batch sums (contribution bound ``G``, one step per batch).
    """

    steps: GaussianSteps

    def __post_init__(self):
        if not math.isclose(self.mu * self.steps.noise_multiplier, 1.0, rel_tol=1e-9):
            raise ValueError(f"a batch sum is not {self.mu:.6g}-GDP")


def n_batches(n_public: float, batch_size: int) -> int:
    """Batches of a DP-SGD pass over a chunk of released count ``n_public``."""
    return max(1, int(round(n_public / batch_size)))


def _project(theta, radius):
    if radius is None:
        return theta
    norm = np.linalg.norm(theta)
    return theta if norm <= radius else theta * (radius / norm)


def released_preconditioner(
    loss: LinearModelLoss,
    A: np.ndarray,
    Lambda: float,
    mechanism: GaussianMechanism,
    rng: np.random.Generator,
) -> np.ndarray:
    """Release the Gram matrix; return the preconditioner ``(beta_1 Gram + Lambda)^-1``.

    Parameters
    ----------
    loss : LinearModelLoss
    A : ndarray of shape (n, p)
        Normalized rows, norm at most ``loss.row_norm``.
    Lambda : float
        Public ridge.
    mechanism : GaussianMechanism
        The Gram release (contribution bound ``row_norm^2``).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (p, p)
    """
    gram = mechanism.release_symmetric(gram_matrix(A), rng)
    p = gram.shape[0]
    with SerialBlas():  # see noisy_projected_gd_glm: no BLAS worker left spinning
        eigenvalues, vectors = np.linalg.eigh(gram)
        lifted = np.maximum(eigenvalues, 0.0) + 3.0 * mechanism.sigma * np.sqrt(p)
        # Böhning: per-record Hessian <= z_smoothness a a^T (1/4 logistic, 1/2 softmax).
        curvature = loss.z_smoothness
        return (vectors / (curvature * lifted + Lambda)) @ vectors.T


def noisy_projected_gd_glm(
    loss: LinearModelLoss,
    A: np.ndarray,
    y: np.ndarray,
    *,
    Lambda: float,
    steps: GaussianSteps,
    preconditioner: np.ndarray,
    radius: float | None,
    rng: np.random.Generator,
) -> np.ndarray:
    """Run preconditioned projected noisy GD and return the tail-averaged iterate.

    Parameters
    ----------
    loss : LinearModelLoss
    A, y : ndarrays
        Normalized rows and encoded labels.
    Lambda : float
        Public ridge of the summed objective.
    steps : GaussianSteps
        ``T`` Gaussian releases of the gradient sum, noise ``N(0, (m G)^2 I)``
        each (contribution bound ``G``).
    preconditioner : ndarray of shape (p, p)
        Public (released) ``P``; the step is ``-P g`` for each class block.
    radius : float or None
        Projection ball.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (loss.n_params,)
    """
    n_steps = int(steps.steps)
    n_blocks = 1 if loss.binary else loss.n_classes
    theta = np.zeros(loss.n_params)
    total = np.zeros(loss.n_params)
    # Every step's noise at once: the same draws, in the same order, as one
    # draw per step (nothing else reads the generator during the run).
    noise = steps.noise(theta.shape, rng)
    start = n_steps // 2
    tick = step_ticker(n_steps, "noisy GD", steps)
    # The steps' products by the preconditioner (p x p) run with BLAS on one
    # thread, the gradient passes with the caller's thread counts: a threaded
    # product of that size gains nothing, and it left a BLAS worker spinning
    # on a core the next pass's row ranges needed (measured at n = 1e5 on 2
    # cores, d = 100 and 500; SerialBlas). The same values either way.
    with SerialBlas() as serial:
        # Only gradients are needed: the log loss in one pass, no loss value.
        gradient = serial.threaded(gradient_function(loss, A, y))
        for t in range(n_steps):
            grad = gradient(theta)
            grad += noise[t]
            grad += Lambda * theta
            step = (grad.reshape(n_blocks, -1) @ preconditioner).ravel()
            theta = _project(theta - step, radius)
            if t >= start:
                total += theta
            if tick is not None:
                tick(t)
    return total / (n_steps - start)


def dp_sgd_pass(
    loss: LinearModelLoss,
    A: np.ndarray,
    y: np.ndarray,
    theta0: np.ndarray,
    *,
    n_public: float,
    batch_size: int,
    Lambda: float,
    steps: GaussianSteps,
    radius: float | None,
    rng: np.random.Generator,
) -> tuple[np.ndarray, int]:
    """One pass of DP-SGD over a chunk; returns the tail-averaged iterate and steps.

    Parameters
    ----------
    loss : LinearModelLoss
    A, y : ndarrays
        The chunk's normalized rows and encoded labels.
    theta0 : ndarray
        Start (the previously released model).
    n_public : float
        Released count of the chunk.
    batch_size : int
        Public normalizer of a batch sum.
    Lambda : float
        Public ridge of the chunk's summed objective.
    steps : GaussianSteps
        One step per batch (:func:`n_batches` of them): noise
        ``N(0, (m G)^2 I)`` on each batch sum, whose per-example gradients are
        clipped to the contribution bound ``G``.
    radius : float or None
    rng : numpy.random.Generator
    """
    n_batches = int(steps.steps)
    lam = Lambda / n_public
    step = 1.0 / (loss.smoothness + lam)
    clip = steps.contribution_bound
    assignment = rng.integers(n_batches, size=A.shape[0])
    order = np.argsort(assignment, kind="stable")
    bounds = np.searchsorted(assignment[order], np.arange(n_batches + 1))
    theta = np.array(theta0, dtype=float)
    total = np.zeros_like(theta)
    # Drawn after the assignment, all at once: the same stream as one draw per batch.
    noise = steps.noise(theta.shape, rng)
    start = n_batches // 2
    # The batches are disjoint (parallel composition: the pass costs one
    # step's event), so the ticker is not given the steps to compose.
    tick = step_ticker(n_batches, "DP-SGD batch")
    for j in range(n_batches):
        rows = order[bounds[j] : bounds[j + 1]]
        grads = loss.per_example_grads(theta, A[rows], y[rows])
        norms = np.linalg.norm(grads, axis=1)
        grads *= np.minimum(1.0, clip / np.maximum(norms, np.finfo(float).tiny))[:, None]
        noisy = grads.sum(axis=0) + noise[j]
        theta = _project(theta - step * (noisy / batch_size + lam * theta), radius)
        if j >= start:
            total += theta
        if tick is not None:
            tick(j)
    return total / (n_batches - start), n_batches
