"""Solvers of :class:`~sklearn_dpu.linear_model.DPLogisticRegression`.

A release's solver is chosen once, by
:func:`~sklearn_dpu.linear_model._logistic_releases.configure`; then one
module-level ``_solve_*`` function computes the model on normalized rows, its
noise drawn by the mechanism objects of
:func:`~sklearn_dpu.linear_model._logistic_releases.model_mechanisms` (whose
events are the ledger's). :func:`private_fit` and :func:`private_sgd_pass`
are everything a fit and a stream chunk compute: the noised count, then the
model.

References
----------
.. [1] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024:
   Alg. 1 / Thm 8; Alg. 3 / Thm 12 with the erratum on its noise.
.. [2] K. Chaudhuri, C. Monteleoni and A. D. Sarwate, "Differentially private
   empirical risk minimization", JMLR 2011, Thm 9.
.. [3] D. Kifer, A. Smith and A. Thakurta, "Private convex empirical risk
   minimization and high-dimensional regression", COLT 2012, Thm 2.
.. [4] R. Iyengar et al., "Towards practical differentially private convex
   optimization", IEEE S&P 2019, Alg. 1.
.. [5] M. Abadi et al., "Deep learning with differential privacy", CCS 2016,
   Alg. 1.
.. [6] R. Chourasia and N. Shah, "Forget unlearning: towards true
   data-deletion in machine learning", ICML 2023, Thm 3.2.
"""

import numpy as np
from numpy.typing import ArrayLike

from .._progress import print_phase
from .._row_threads import map_row_ranges
from ..privacy.clipping import clip_block_into, clip_blocks
from ._binary_pass import ZeroHessianCache
from ._certified_minimize import certified_minimize
from ._logistic_releases import (
    ChunkModel,
    ReleaseParams,
    _binary,
    configure,
    configure_sgd,
    count_mechanism,
    model_mechanisms,
    release_parts,
)
from ._losses import LinearModelLoss
from ._noisy_gd_glm import dp_sgd_pass, noisy_projected_gd_glm, released_preconditioner
from ._sparse_rows import is_sparse, sparse_normalized_rows

__all__ = ["normalized_rows", "batch_model", "private_fit", "private_sgd_pass", "sgd_model"]

# verbose: a minimizer stops when a data-dependent criterion holds, so its
# iterations are not printed (when it stops would be a function of the data).
_MINIMIZING = (
    "{}: minimizing the regularized loss to the certified tolerance "
    "(iterations not printed: their number depends on the data)"
)


def _solve_output(mechanisms, config, loss, A, y_index, rng, coef_bound, theta0, max_iter):
    """Output perturbation of the certified regularized ERM (Ullah 2024, Alg. 3 /
    Thm 12, noise corrected)."""
    (noise,) = mechanisms
    print_phase(_MINIMIZING.format("output perturbation"))
    solution = certified_minimize(
        loss,
        A,
        loss.encode_labels(y_index),
        config.Lambda,
        config.tau,
        radius=coef_bound,
        theta0=theta0,
        max_iter=max_iter,
    )
    return noise.release(solution.theta, rng)


def _solve_objective(mechanisms, config, loss, A, y_index, rng, theta0, max_iter):
    """Objective perturbation (Chaudhuri et al. 2011, Thm 9; Kifer et al. 2012,
    Thm 2) with AMP output noise (Iyengar et al. 2019, Alg. 1), one-vs-rest
    for more than two classes."""
    linear, amp = mechanisms
    binary = _binary(loss)
    p = binary.n_params
    classes = range(loss.n_classes) if config.one_vs_rest else [1]
    # The one-vs-rest solves share the rows, hence the label-free Hessian at 0.
    zero_hessian = ZeroHessianCache()
    thetas = []
    print_phase(_MINIMIZING.format("objective perturbation"))
    for j, k in enumerate(classes):
        b = linear.linear_term(p, rng)
        start = None
        if theta0 is not None:
            start = theta0.reshape(-1, p)[j] if config.one_vs_rest else theta0
        solution = certified_minimize(
            binary,
            A,
            np.where(y_index == k, 1.0, -1.0),
            config.Lambda,
            config.tau,
            linear=b,
            theta0=start,
            max_iter=max_iter,
            zero_hessian=zero_hessian,
        )
        thetas.append(amp.release(solution.theta, rng))
    return np.concatenate(thetas)


def _solve_noisy_gd(mechanisms, config, loss, A, y_index, rng):
    """Preconditioned projected noisy GD (Ullah 2024, Alg. 1 / Thm 8)."""
    (run,) = mechanisms
    preconditioner = released_preconditioner(loss, A, config.Lambda, run.gram, rng)
    return noisy_projected_gd_glm(
        loss,
        A,
        loss.encode_labels(y_index),
        Lambda=config.Lambda,
        steps=run.steps,
        preconditioner=preconditioner,
        radius=config.radius,
        rng=rng,
    )


def batch_model(
    params: ReleaseParams,
    loss: LinearModelLoss,
    A: np.ndarray,
    y_index: np.ndarray,
    n_noisy: float,
    rng: np.random.Generator,
    theta0: np.ndarray | None = None,
    max_iter: int | None = None,
) -> tuple[ChunkModel, tuple]:
    """Batch model of chunk 1 on normalized rows ``A`` given its released count.

    The solver is chosen once, by :func:`configure`; the noise is drawn by
    :func:`model_mechanisms`, which are returned with the model (their events
    are the ledger's).
    """
    config = configure(params, loss, n_noisy)
    mechanisms = model_mechanisms(params, config, loss)
    cap = params.max_iter if max_iter is None else max_iter
    if config.solver == "output":
        theta = _solve_output(
            mechanisms, config, loss, A, y_index, rng, params.coef_bound, theta0, cap
        )
    elif config.solver == "objective":
        theta = _solve_objective(mechanisms, config, loss, A, y_index, rng, theta0, cap)
    else:
        theta = _solve_noisy_gd(mechanisms, config, loss, A, y_index, rng)
    # Only public iteration counts are kept: a certified solve's count depends
    # on the data (Chourasia & Shah: no un-noised data-dependent value in the
    # state), so it is reported as one release.
    n_iter = int(config.n_steps) if config.solver == "noisy_gd" else 1
    parts = release_parts(params, config, loss)
    return ChunkModel("fit", float(n_noisy), 0, config, parts, theta, n_iter), mechanisms


def sgd_model(
    params: ReleaseParams,
    loss: LinearModelLoss,
    A: np.ndarray,
    y_index: np.ndarray,
    n_noisy: float,
    theta0: np.ndarray,
    rng: np.random.Generator,
) -> tuple[ChunkModel, tuple]:
    """One DP-SGD pass with per-example clipping (Abadi et al. 2016, Alg. 1) on
    a streamed chunk, from ``theta0``; returns the model and its mechanisms."""
    config = configure_sgd(params, loss, n_noisy)
    mechanisms = model_mechanisms(params, config, loss)
    (batches,) = mechanisms
    theta, n_steps = dp_sgd_pass(
        loss,
        A,
        loss.encode_labels(y_index),
        theta0,
        n_public=config.n_public,
        batch_size=params.batch_size,
        Lambda=config.Lambda,
        steps=batches.steps,
        radius=config.radius,
        rng=rng,
    )
    parts = release_parts(params, config, loss)
    model = ChunkModel("sgd", float(n_noisy), 0, config, parts, theta, int(n_steps))
    return model, mechanisms


def private_fit(
    params: ReleaseParams,
    loss: LinearModelLoss,
    A: np.ndarray,
    y_index: np.ndarray,
    rng: np.random.Generator,
) -> tuple[ChunkModel, tuple]:
    """Everything a fit releases from normalized rows: the noised count, then
    the batch model. Returns the model and the mechanisms that ran, count first."""
    count = count_mechanism(params)
    n_noisy = count.release(A.shape[0], rng)
    model, mechanisms = batch_model(params, loss, A, y_index, n_noisy, rng)
    return model, (count, *mechanisms)


def private_sgd_pass(
    params: ReleaseParams,
    loss: LinearModelLoss,
    A: np.ndarray,
    y_index: np.ndarray,
    theta0: np.ndarray,
    rng: np.random.Generator,
) -> tuple[ChunkModel, tuple]:
    """Everything a stream chunk releases: the noised count, then one DP-SGD
    pass from ``theta0``. Returns the model and the mechanisms, count first."""
    count = count_mechanism(params)
    n_noisy = count.release(A.shape[0], rng)
    model, mechanisms = sgd_model(params, loss, A, y_index, n_noisy, theta0, rng)
    return model, (count, *mechanisms)


def normalized_rows(
    X: ArrayLike, y_index: np.ndarray | None, norm_bound: float, fit_intercept: bool
) -> np.ndarray:
    """Rows ``[a, class index]``, ``a`` the row clipped to ``norm_bound``,
    divided by it, with the intercept column.

    One allocation: at n = 1e5 each copy of the data costs as much as a
    gradient step. ``rows[:, :-1]`` is the design matrix (a strided view BLAS
    reads directly). Sparse ``X``: :class:`~._sparse_rows.SparseRows`, whose
    design is CSR (:func:`~._sparse_rows.sparse_normalized_rows`).

    The rows are written block by block (:func:`_clip_divide_into`): each
    block of ``X`` is read once, its norms, clipped rows and quotients
    computed while it is in cache; the values are those of
    :func:`~sklearn_dpu.privacy.clipping.clip_rows_l2` divided by
    ``norm_bound``, bit for bit (``tests/test_binary_pass.py`` checks it).
    """
    if is_sparse(X):
        return sparse_normalized_rows(X, y_index, norm_bound, fit_intercept)
    n, d = np.shape(X)
    rows = np.empty((n, d + int(fit_intercept) + 1))
    _clip_divide_into(X, norm_bound, rows[:, :d])
    if fit_intercept:
        rows[:, d] = 1.0
    rows[:, -1] = 0.0 if y_index is None else y_index
    return rows


def _clip_divide_into(X: ArrayLike, norm_bound: float, out: np.ndarray) -> None:
    """``out[...] = clip_rows_l2(X, norm_bound) / norm_bound``, block by block.

    A row's clipping scale depends on that row only, and ``x * 1.0 == x``
    exactly (:func:`~sklearn_dpu.privacy.clipping.clip_block_into`), so the
    blocks give the values of the whole-array computation, bit for bit,
    with one read of ``X`` (the block stays in cache from its norms to
    its division) and one write of ``out``, instead of a norm pass, a copy
    and a division pass over ``out``. Row ranges run on threads
    (:func:`~sklearn_dpu._row_threads.map_row_ranges`; each row is written by one).
    """
    X = np.asarray(X)
    n, d = out.shape
    map_row_ranges(lambda start, stop: _clip_divide_range(X, norm_bound, out, start, stop), n, d)


def _clip_divide_range(X, norm_bound, out, start, stop):
    for block in clip_blocks(stop - start, X.shape[1], start):
        clip_block_into(X[block], norm_bound, out[block], divisor=norm_bound)
