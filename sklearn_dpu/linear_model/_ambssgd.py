"""DP-AMBSSGD with DP-STAT adaptive clipping (``DPLinearRegression(solver="ambssgd")``).

Varshney, Thakurta & Jain [VTJ22]_, Algorithm 2 (DP-AMBSSGD: one pass of
mini-batch SGD over disjoint blocks, each step's clip norm set privately from
the residuals of the current iterate on a separate part of its block) and
Algorithm 3 (DP-STAT: a doubling search for an approximate maximum of the
residuals), with tail averaging over the last ``T/2`` iterates.

The algorithm, in the normalized units of the library (a row ``u = (a, t)``
with ``a = x / feature_norm`` clipped to ``||a|| <= 1``, ``|t| <= 1``;
``a_1 = (a, 1)`` with an intercept, ``a`` without):

1. **Preconditioner and count.** Release the Gram matrix of ``(a, 1)``
   (Gaussian mechanism, contribution bound ``||(a, 1)||^2 <= 2``). Its
   ``(1, 1)`` entry is the noised count ``n~``; the model block lifted by
   twice the noise's spectral bound gives ``M ~ E[a_1 a_1^T]``, and every
   row is whitened, ``z = M^(-1/2) a_1``, and clipped to
   ``R_z = min(2 sqrt(q), ||M^(-1/2)|| sqrt(1 + fit_intercept))``. The paper
   assumes ``H`` known (its Sec. 2 points to private estimation); with
   ``H_z ~ I`` the step size of Thm 10, ``eta = b / (R_z^2 + (b - 1))``, is
   usable, where Corollary 11's ``eta = 1 / (4 d)`` is a misprint (erratum).
2. **Blocks.** ``T = max(2, min(max_iter, floor(2 ln n~)))`` blocks of nominal
   size ``m = n~ / T``; each row is put in a block uniformly at random and,
   with probability ``1/11``, in the block's statistics part (``s = m / 11``,
   the paper's ``s = b / 10``), else in its gradient part (``b = m - s``).
   Each row's draw is independent of the other rows.
3. **DP-STAT** on block ``t``'s statistics part: the histogram of the
   residuals ``|<z, w_t> - t|`` over the public grid ``gamma_i = 4 * 2^(i - K
   + 1)``, ``i < K = 24``, is released with Gaussian noise (one row is in one
   bin: sensitivity 1); the noised cumulative counts are the paper's tests
   counts of the paper's tests, here of the residuals *above* ``gamma_i``
   (bins ``i+1 .. K-1``), have noise ``alpha_s sqrt(K - 1 - i) <= alpha_s
   sqrt(K)``, so all ``K`` tests cost one release (the paper's ``K`` tests of
   noise ``sqrt(K) alpha`` cost the same, and its loop runs ``K + 1`` tests
   against noise calibrated for ``K``: erratum). ``gamma_t`` is the first
   grid value whose noised count above is at most three of its noise
   deviations: the paper's stopping rule ``c_i >= s`` overshoots (the count
   never exceeds ``s``, so half the time the search doubles past the
   maximum; erratum), and counting from the top needs no nominal ``s`` (the
   realized part's size varies). ``Delta_disc = B / N^200`` (``K ~ 4000``
   tests) is replaced by ``K = 24`` (erratum). If ``s < 6 sqrt(K) alpha_s``
   (a public condition on ``n~``; the paper needs ``s >> sqrt(K) alpha``) the
   search is skipped and ``gamma_t`` is the grid's top.
4. **Step.** ``zeta_t = R_z gamma_t`` (the paper's ``R_x gamma_t log^a N``;
   ``R_z`` is about twice the typical whitened norm); the per-row gradients
   ``z (<z, w_t> - t)`` of the gradient part are clipped to ``zeta_t`` (the
   clip scales by ``min(1, zeta / ||g||)``, not the appendix's ``max``:
   erratum), **summed**, noised with ``N(0, (alpha_g zeta_t)^2 I)`` and
   divided by the public nominal ``b``: ``w_(t+1) = w_t - eta (sum + noise) /
   b``, projected onto ``||w|| <= 1`` (not in the paper, post-processing:
   without it the iterates diverge when Lemma 13's noise-domination condition
   fails, e.g. at ``n = 10^4``; with it they stay bounded). The output is
   ``M^(-1/2)`` times the average of ``w_(T - T//2 + 1) .. w_T``.

Privacy (add/remove one record). Fix the data but one record ``r``. Its
block and part are drawn independently of the other records, and the other
records' draws have the same law with or without ``r``, so the output law is
a mixture, with the same weights on both data sets, over the other records'
draws and ``r``'s; by joint convexity of the hockey-stick divergence it is
enough to bound the privacy loss for each fixed draw. For a fixed draw:
the Gram release depends on ``r`` through ``(a, 1)(a, 1)^T`` (Frobenius norm
``<= 2``); given it, ``T``, ``m``, ``s``, ``b``, ``M``, ``R_z`` and ``eta``
are post-processing. Every other block's statistics part and gradient part
hold the same rows with or without ``r``, so given the past outputs their
releases have the same law: only ``r``'s block differs, by at most 1 in one
histogram bin (L2 sensitivity 1) and by one clipped gradient, norm ``<=
zeta_t``, in the sum (the nominal ``b`` does not depend on the data). By
adaptive composition the run is as private as the Gram release composed
with one block's histogram and one step: the event recorded is
``ComposedDpEvent(Gaussian(m_G), Gaussian(alpha_s), Gaussian(alpha_g))``
(:class:`~sklearn_dpu.privacy.mechanisms.DisjointBlocks`). This composes
both parts of the block although ``r`` is in only one of them (the paper
sums them too, [VTJ22]_ Thm 9); the multipliers split a single Gaussian
release's precision ``1 / m^2`` as ``0.1 / m_G^2 + 0.45 / alpha_s^2 + 0.45
/ alpha_g^2`` (exact Gaussian composition, [DRS22]_ Cor. 3.3), so the whole
fit is exactly one Gaussian release of multiplier ``m``, calibrated to
``(epsilon, delta)`` by the same accountant as ``'ssp'``. [VTJ22]_ Thm 9
works in zCDP under replace-one (sensitivity ``2 zeta``) with ``alpha = 1 /
(sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))``; the tests check the
multipliers here are no larger than that ``alpha`` and that the ledger's
epsilon is at most the target.

References
----------
.. [VTJ22] P. Varshney, A. Thakurta and P. Jain, "(Nearly) optimal private
   linear regression via adaptive clipping", COLT 2022,
   Algorithm 2 (DP-AMBSSGD), Algorithm 3 (DP-STAT), Theorem 9 (privacy),
   Theorem 10 and Lemma 13 (parameters); errata used: clip with ``min``,
   ``K`` tests calibrated for ``K``, finite ``K``, a stopping margin, the
   step size of Theorem 10 rather than Corollary 11's ``1/(4d)``.
.. [DRS22] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy",
   JRSS-B 2022, Corollary 3.3.
"""

from dataclasses import dataclass, replace

import numpy as np

from .._progress import step_ticker
from ..privacy.clipping import clip_rows_l2
from ..privacy.ledger import Release
from ..privacy.mechanisms import DisjointBlocks, GaussianMechanism
from ._sufficient_statistics import GRAM_SCALE, gram_of_codes, noise_spectral_bound

__all__ = [
    "AMBSSGDRecipe",
    "AMBSSGDRun",
    "ambssgd_mechanisms",
    "assign_blocks",
    "clipped_gradient_sum",
    "residual_grid",
    "residual_histogram",
    "run_ambssgd",
]

#: Number of grid values (the paper's ``K``) of the residual search.
N_GRID = 24
#: Largest grid value, in normalized target units (``|t| <= 1``).
GRID_TOP = 4.0
#: Share of a block's rows in its statistics part (``s = m / 11``, i.e. ``b / 10``).
STAT_FRACTION = 1.0 / 11.0
#: Blocks per unit of ``ln n~``: ``T = floor(2 ln n~)`` (capped by ``max_iter``).
#: Half the ``4 ln n`` of a direct simulation of the paper's algorithm: on
#: whitened rows the bias contracts in a few steps, and the privacy noise of
#: the tail average grows with ``T``.
BLOCKS_PER_LOG = 2.0
#: Noise deviations of the stopping margin of DP-STAT.
MARGIN = 3.0
#: ``zeta_t = CLIP_FACTOR * R_z * gamma_t`` (2 gave 1.5 to 4 times the excess risk of 1).
CLIP_FACTOR = 1.0
#: Whitened rows are clipped to ``ROW_FACTOR * sqrt(q)`` (at most their worst-case norm).
ROW_FACTOR = 2.0
#: Radius of the ball the whitened iterates are projected onto. With ``M >= H``
#: the best whitened coefficients have norm about the RMS prediction, at most
#: ``sqrt(E t^2) <= 1``; the projection (post-processing) stops the divergence
#: of the unprojected algorithm when Lemma 13's noise-domination condition fails.
COEF_RADIUS = 1.0
#: Shares of one release's Gaussian precision: Gram, histogram, gradient step.
PRECISION_SHARES = (0.1, 0.45, 0.45)
#: Bound on ``||(a, 1)||^2``, the Gram release's contribution bound.
GRAM_CONTRIBUTION = 2.0

REFERENCE = (
    "Varshney, Thakurta & Jain 2022, (Nearly) optimal private linear regression via "
    "adaptive clipping, Alg. 2 (DP-AMBSSGD), Alg. 3 (DP-STAT), Thm 9; add/remove "
    "adjacency with rows assigned to blocks independently (adaptive parallel "
    "composition), clipped sums over the public nominal block size; errata: clip with "
    "min, K tests for K, K = 24, stopping margin, Thm 10's step size on privately "
    "whitened rows"
)


def ambssgd_mechanisms(noise_multiplier: float) -> tuple[GaussianMechanism, DisjointBlocks]:
    """The Gram release and the per-block mechanisms of one run.

    Their multipliers split ``noise_multiplier``'s precision by
    :data:`PRECISION_SHARES`, so the three compose exactly to one Gaussian
    release of ``noise_multiplier``. The histogram and the step are recorded
    with contribution bound 1: the step's noise is scaled by its clip norm.
    """
    m_gram, m_hist, m_step = (noise_multiplier / np.sqrt(share) for share in PRECISION_SHARES)
    gram = GaussianMechanism(GRAM_CONTRIBUTION, float(m_gram))
    blocks = DisjointBlocks(
        (GaussianMechanism(1.0, float(m_hist)), GaussianMechanism(1.0, float(m_step)))
    )
    return gram, blocks


@dataclass(frozen=True)
class AMBSSGDRecipe:
    """One release of ``solver='ambssgd'``.

    Attributes
    ----------
    noise_multiplier : float
        Multiplier of the single Gaussian release the run composes to.
    gram : GaussianMechanism
        The Gram matrix of ``(a, 1)`` (preconditioner and noised count).
    blocks : DisjointBlocks
        One block's residual histogram and gradient step.
    max_iter : int
        Cap on the number of blocks.
    """

    noise_multiplier: float
    gram: GaussianMechanism
    blocks: DisjointBlocks
    max_iter: int

    @classmethod
    def of(cls, noise_multiplier: float, max_iter: int) -> "AMBSSGDRecipe":
        gram, blocks = ambssgd_mechanisms(noise_multiplier)
        return cls(float(noise_multiplier), gram, blocks, int(max_iter))

    def release(self, first_chunk: int, last_chunk: int) -> Release:
        """The ledger record of a run on chunks ``first_chunk .. last_chunk``."""
        return Release.of(
            [self.gram, self.blocks],
            "DP-AMBSSGD: a noised Gram matrix of (x, 1) (preconditioner and count), then "
            "one pass over disjoint blocks, each a noised residual histogram (DP-STAT) and "
            "a noised clipped gradient sum",
            (first_chunk, last_chunk),
            REFERENCE,
        )


@dataclass(frozen=True)
class AMBSSGDRun:
    """What a run released besides the model.

    Attributes
    ----------
    coef : ndarray of shape (q,)
        Normalized coefficients (features, then the intercept if fitted).
    released_count : float
        The noised count ``n~`` (entry of the released Gram matrix).
    n_blocks : int
        ``T``, from ``n~`` and ``max_iter``.
    clip_norms : ndarray of shape (T,)
        The clip norms ``zeta_t`` (post-processing of released histograms).
    """

    coef: np.ndarray
    released_count: float
    n_blocks: int
    clip_norms: np.ndarray


def residual_grid() -> np.ndarray:
    """The public grid ``gamma_i = GRID_TOP * 2^(i - N_GRID + 1)``, ``i < N_GRID``."""
    return GRID_TOP * 2.0 ** (np.arange(N_GRID) - N_GRID + 1)


def assign_blocks(n_rows: int, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Each row's slot ``2 * block + (0 statistics part, 1 gradient part)``.

    Every row's slot is drawn independently of the others (uniform block,
    statistics part with probability :data:`STAT_FRACTION`), so adding or
    removing a row changes no other row's law.
    """
    block = rng.integers(0, n_blocks, size=n_rows)
    gradient_part = rng.random(n_rows) >= STAT_FRACTION
    return 2 * block + gradient_part


def residual_histogram(Z: np.ndarray, t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Counts of ``|<z, w> - t|`` in the grid's bins ``(gamma_(i-1), gamma_i]``.

    A row lands in one bin (or above the grid, which is not released): add
    or remove one row and one count moves by 1.
    """
    residuals = np.abs(Z @ w - t)
    bins = np.searchsorted(residual_grid(), residuals, side="left")
    return np.bincount(bins, minlength=N_GRID + 1)[:N_GRID].astype(np.float64)


def clipped_gradient_sum(Z: np.ndarray, t: np.ndarray, w: np.ndarray, zeta: float) -> np.ndarray:
    """``sum_i clip_zeta(z_i (<z_i, w> - t_i))`` with ``clip(g) = g min(1, zeta / ||g||)``."""
    residuals = Z @ w - t
    norms = np.abs(residuals) * np.sqrt(np.einsum("ij,ij->i", Z, Z))
    scale = zeta / np.maximum(norms, zeta)  # min(1, zeta / ||g||), also for g = 0
    return Z.T @ (residuals * scale)


def _whitening(noisy_gram: np.ndarray, n_coef: int, count: float, sigma: float):
    """``M^(-1/2)`` of the lifted, count-normalized model block, and ``||M^(-1/2)||``."""
    lift = noise_spectral_bound(sigma, noisy_gram.shape[0])
    block = noisy_gram[:n_coef, :n_coef]
    values, vectors = np.linalg.eigh((block + block.T) / 2.0 + 2.0 * lift * np.eye(n_coef))
    values = np.maximum(values, lift) / count
    inv_sqrt = 1.0 / np.sqrt(values)
    return (vectors * inv_sqrt) @ vectors.T, float(inv_sqrt.max())


def run_ambssgd(
    codes: np.ndarray,
    n_features: int,
    fit_intercept: bool,
    ridge: np.ndarray,
    recipe: AMBSSGDRecipe,
    rng: np.random.Generator,
) -> AMBSSGDRun:
    """Run DP-AMBSSGD on the coded rows; the noise is drawn from ``recipe``'s mechanisms.

    Parameters
    ----------
    codes : ndarray of int16, shape (n_samples, n_features + 1)
        Fixed-point codes of ``(x / feature_norm, t)``.
    n_features : int
    fit_intercept : bool
    ridge : ndarray of shape (n_coef,)
        Data-independent penalty ``sum_j ridge_j w_j^2`` on the sum of squares.
    recipe : AMBSSGDRecipe
    rng : numpy.random.Generator

    Returns
    -------
    AMBSSGDRun
    """
    d = n_features
    q = d + int(fit_intercept)
    unit = np.sqrt(GRAM_SCALE)  # real value of one code unit
    gram = gram_of_codes(codes, True)[: d + 1, : d + 1] * GRAM_SCALE
    noisy = recipe.gram.release_symmetric(gram, rng)
    count = max(float(noisy[d, d]), 1.0)
    P, p_norm = _whitening(noisy if fit_intercept else noisy[:d, :d], q, count, recipe.gram.sigma)
    r_z = min(ROW_FACTOR * np.sqrt(q), p_norm * np.sqrt(1.0 + fit_intercept))
    n_blocks = int(max(2, min(recipe.max_iter, np.floor(BLOCKS_PER_LOG * np.log(max(count, 1.0))))))
    size = count / n_blocks
    s_nominal, b_nominal = STAT_FRACTION * size, max(1.0, (1.0 - STAT_FRACTION) * size)
    hist, step = recipe.blocks.per_block
    # Noise deviation of the count of bins i+1 .. K-1 (the residuals above gamma_i).
    allowances = MARGIN * hist.noise_multiplier * np.sqrt(np.arange(N_GRID - 1, -1, -1))
    search = s_nominal >= 2.0 * allowances[0]  # public: from n~ and the multiplier
    grid = residual_grid()
    eta = b_nominal / (r_z**2 + b_nominal - 1.0)
    penalty = P @ (ridge[:, None] / count * P)

    slots = assign_blocks(len(codes), n_blocks, rng)
    order = np.argsort(slots, kind="stable")
    edges = np.searchsorted(slots[order], np.arange(2 * n_blocks + 1))

    def rows(first, last):
        part = codes[order[first:last]].astype(np.float64) * unit
        a = part[:, :d]
        if fit_intercept:
            a = np.column_stack([a, np.ones(len(a))])
        return clip_rows_l2(a @ P, r_z), part[:, d]

    w = np.zeros(q)
    total = np.zeros(q)
    zetas = np.empty(n_blocks)
    tail_start = n_blocks - n_blocks // 2
    # n_blocks is public (from the noised count); the blocks are disjoint, so
    # the run is charged as one block's mechanisms: the whole charge is printed.
    tick = step_ticker(n_blocks, "AMBSSGD block")
    for b in range(n_blocks):
        gamma = grid[-1]
        if search:
            Z, t = rows(edges[2 * b], edges[2 * b + 1])
            noisy = hist.release(residual_histogram(Z, t, w), rng)
            above = np.cumsum(noisy[::-1])[::-1] - noisy  # bins i+1 .. K-1
            gamma = grid[np.flatnonzero(above <= allowances)[0]]  # i = K-1 always passes
        zeta = CLIP_FACTOR * r_z * gamma
        Z, t = rows(edges[2 * b + 1], edges[2 * b + 2])
        noisy_sum = replace(step, contribution_bound=zeta).release(
            clipped_gradient_sum(Z, t, w, zeta), rng
        )
        w = w - eta * (noisy_sum / b_nominal + penalty @ w)
        w *= COEF_RADIUS / max(float(np.linalg.norm(w)), COEF_RADIUS)
        zetas[b] = zeta
        if b >= tail_start:
            total += w
        if tick is not None:
            tick(b)
    coef = P @ (total / (n_blocks - tail_start))
    return AMBSSGDRun(coef, count, n_blocks, zetas)
