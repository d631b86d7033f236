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
"""

import numpy as np

from ..privacy.mechanisms import GaussianMechanism

__all__ = ["dp_sgd_pass", "noisy_projected_gd_glm", "released_preconditioner"]


def _project(theta, radius):
    if radius is None:
        return theta
    norm = np.linalg.norm(theta)
    return theta if norm <= radius else theta * (radius / norm)


def released_preconditioner(
    loss,
    A: np.ndarray,
    Lambda: float,
    noise_multiplier: float,
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
    noise_multiplier : float
        Multiplier of the Gram release (contribution bound ``row_norm^2``).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (p, p)
    """
    mechanism = GaussianMechanism(loss.row_norm**2, noise_multiplier)
    gram = mechanism.release_symmetric(A.T @ A, rng)
    p = gram.shape[0]
    eigenvalues, vectors = np.linalg.eigh(gram)
    lifted = np.maximum(eigenvalues, 0.0) + 3.0 * mechanism.sigma * np.sqrt(p)
    # Böhning: per-record Hessian <= z_smoothness a a^T (1/4 logistic, 1/2 softmax).
    curvature = loss.z_smoothness
    return (vectors / (curvature * lifted + Lambda)) @ vectors.T


def noisy_projected_gd_glm(
    loss,
    A: np.ndarray,
    y: np.ndarray,
    *,
    Lambda: float,
    n_steps: int,
    noise_multiplier: float,
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
    n_steps : int
        ``T``: each step is one Gaussian release of the gradient sum.
    noise_multiplier : float
        Per-step multiplier ``m``: noise ``N(0, (m G)^2 I)`` on the gradient sum.
    preconditioner : ndarray of shape (p, p)
        Public (released) ``P``; the step is ``-P g`` for each class block.
    radius : float or None
        Projection ball.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (loss.n_params,)
    """
    sigma = noise_multiplier * loss.lipschitz
    n_blocks = 1 if loss.binary else loss.n_classes
    theta = np.zeros(loss.n_params)
    total = np.zeros(loss.n_params)
    start = n_steps // 2
    for t in range(n_steps):
        grad = loss.gradient(theta, A, y)
        grad += rng.normal(0.0, sigma, size=grad.shape)
        grad += Lambda * theta
        step = (grad.reshape(n_blocks, -1) @ preconditioner).ravel()
        theta = _project(theta - step, radius)
        if t >= start:
            total += theta
    return total / (n_steps - start)


def dp_sgd_pass(
    loss,
    A: np.ndarray,
    y: np.ndarray,
    theta0: np.ndarray,
    *,
    n_public: float,
    batch_size: int,
    Lambda: float,
    noise_multiplier: float,
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
        Released count of the chunk; fixes the number of batches
        ``max(1, round(n_public / batch_size))``.
    batch_size : int
        Public normalizer of a batch sum.
    Lambda : float
        Public ridge of the chunk's summed objective.
    noise_multiplier : float
        Noise ``N(0, (m G)^2 I)`` on each batch sum.
    radius : float or None
    rng : numpy.random.Generator
    """
    n_batches = max(1, int(round(n_public / batch_size)))
    lam = Lambda / n_public
    step = 1.0 / (loss.smoothness + lam)
    clip = loss.lipschitz
    sigma = noise_multiplier * clip
    assignment = rng.integers(n_batches, size=len(A))
    order = np.argsort(assignment, kind="stable")
    bounds = np.searchsorted(assignment[order], np.arange(n_batches + 1))
    theta = np.array(theta0, dtype=float)
    total = np.zeros_like(theta)
    start = n_batches // 2
    for j in range(n_batches):
        rows = order[bounds[j] : bounds[j + 1]]
        grads = loss.per_example_grads(theta, A[rows], y[rows])
        norms = np.linalg.norm(grads, axis=1)
        grads *= np.minimum(1.0, clip / np.maximum(norms, np.finfo(float).tiny))[:, None]
        noisy = grads.sum(axis=0) + rng.normal(0.0, sigma, size=theta.shape)
        theta = _project(theta - step * (noisy / batch_size + lam * theta), radius)
        if j >= start:
            total += theta
    return total / (n_batches - start), n_batches
