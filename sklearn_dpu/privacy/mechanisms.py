"""Noise-adding and selection mechanisms.

A mechanism object holds its calibration and knows two things: how to produce
a release from a value and a generator (``release`` / ``select``), and what
happened in the vocabulary of Google's ``dp_accounting`` (``dp_event``). How the
events compose is the business of :mod:`sklearn_dpu.privacy.accounting`.

Neighbouring relation: add/remove one record. A record's *contribution bound*
is the largest norm its contribution to the released sum can have; under
add/remove that is the sensitivity.

References
----------
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
   differential privacy: analytical calibration and optimal denoising",
   ICML 2018, Theorem 8.
.. [DRS22] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy",
   JRSS B 2022, Definition 2.6 (mu-GDP), Corollary 3.3 (composition).
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of differential
   privacy", 2014, Theorem 3.6 (Laplace), Theorem 3.10 (exponential mechanism),
   Claim 3.9 (report noisy max), Theorem 3.16 (composition).
.. [MS20] R. McKenna and D. Sheldon, "Permute-and-flip: a new mechanism for
   differentially private selection", NeurIPS 2020, Algorithm 1, Theorem 1.
.. [RS16] S. Raskhodnikova and A. Smith, "Lipschitz extensions for node-private
   graph statistics and the generalized exponential mechanism", FOCS 2016;
   as used in [U24]_ Thm 34, which states only its interface and guarantee
   (the selection rule is reconstructed here from [RS16]_).
.. [KOV15] P. Kairouz, S. Oh and P. Viswanath, "The composition theorem for
   differential privacy", ICML 2015, proof of Theorem 3.3 (the two-point
   privacy loss of randomized response dominates every pure epsilon-DP
   mechanism).
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024.
"""

import threading
from dataclasses import dataclass

import numpy as np
from dp_accounting import dp_event
from numpy.typing import ArrayLike

from .._row_threads import for_each_item
from .._validation import is_scratch

__all__ = [
    "DisjointBlocks",
    "ExponentialMechanism",
    "GaussianCount",
    "GaussianDP",
    "GaussianMechanism",
    "GaussianSteps",
    "GeneralizedExponentialMechanism",
    "LaplaceMechanism",
    "PermuteAndFlip",
    "ReportNoisyMax",
    "pure_dp_event",
]


def pure_dp_event(epsilon: float) -> dp_event.DpEvent:
    """The ``dp_accounting`` event of an arbitrary pure ``epsilon``-DP mechanism.

    ``dp_accounting`` has no pure-DP event; we use the discrete Laplace
    mechanism with parameter ``epsilon`` on a sensitivity-1 query. Its privacy
    loss takes only the values ``+epsilon`` and ``-epsilon`` with probabilities
    ``e^eps/(1+e^eps)`` and ``1/(1+e^eps)``: exactly the loss of binary
    randomized response, which dominates every ``epsilon``-DP mechanism under
    composition [KOV15]_. So composing this event is valid (and tight) for any
    pure-DP mechanism, and the PLD accountant supports it under add/remove.
    """
    return dp_event.DiscreteLaplaceDpEvent(noise_parameter=float(epsilon), sensitivity=1)


# Rows per band of the mirrored noise in GaussianMechanism.release_symmetric:
# at most _MIRROR_ROWS, and at most _MIRROR_ENTRIES entries (256 KiB of
# float64) per band. At q = 1000 that is 32 rows, the fastest width measured
# (the transposed additions are slow in narrow bands, and wide ones leave the
# cache); bands of 128 rows (1 MB, and as much again of normals) freshly
# allocated faulted in new pages on a process's first releases, which a
# caller's ``work`` scratch (symmetric_scratch) avoids altogether.
_MIRROR_ROWS = 128
_MIRROR_ENTRIES = 1 << 15


def _mirror_rows(q: int) -> int:
    return max(1, min(_MIRROR_ROWS, _MIRROR_ENTRIES // q, q))


# From q = _TILED_FROM on, GaussianMechanism.release_symmetric draws its noise
# by square tiles of _NOISE_TILE rows, on independent streams that run on the
# threads the caller lets BLAS use (_add_tiled_noise). Drawing the normals is
# most of a re-release's noise: at q = 1002 one stream took 9-12 ms, two on 2
# cores about 5 ms. Below _TILED_FROM the normals are few (at most 1.3e5)
# and come from the caller's generator, in the banded order.
_NOISE_TILE = 128
_TILED_FROM = 4 * _NOISE_TILE


def symmetric_scratch(q: int, work: np.ndarray | None = None) -> np.ndarray:
    """A scratch array for :meth:`GaussianMechanism.release_symmetric` of a
    ``q x q`` matrix: ``work`` if it is one, else a new array (empty from
    ``q = _TILED_FROM`` on: the tiles draw into their own small buffers)."""
    size = 0 if q >= _TILED_FROM else 2 * _mirror_rows(q) * q
    return work if is_scratch(work, (size,)) else np.empty(size)


@dataclass(frozen=True)
class GaussianMechanism:
    """Add isotropic Gaussian noise to a sum of bounded contributions [BW18]_.

    Parameters
    ----------
    contribution_bound : float
        L2 bound on one record's contribution to the released value (its
        add/remove sensitivity).
    noise_multiplier : float
        Noise standard deviation divided by ``contribution_bound``; use
        :func:`sklearn_dpu.privacy.calibration.gaussian_noise_multiplier`.
    """

    contribution_bound: float
    noise_multiplier: float

    @property
    def sigma(self) -> float:
        """Standard deviation of the noise on each coordinate."""
        return self.noise_multiplier * self.contribution_bound

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return dp_event.GaussianDpEvent(noise_multiplier=float(self.noise_multiplier))

    def release(self, value: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Return ``value + N(0, sigma^2 I)`` as a new float64 array."""
        value = np.asarray(value, dtype=np.float64)
        return value + rng.normal(0.0, self.sigma, size=value.shape)

    def release_symmetric(
        self,
        M: np.ndarray,
        rng: np.random.Generator,
        overwrite: bool = False,
        work: np.ndarray | None = None,
    ) -> np.ndarray:
        """Release a symmetric matrix whose contributions are bounded in Frobenius norm.

        The map ``M -> (M_ii, sqrt(2) M_ij for i < j)`` is an isometry from
        symmetric matrices with the Frobenius norm onto Euclidean space, so
        isotropic noise there, mapped back, is a Gaussian mechanism with the
        same sensitivity: variance ``sigma^2`` on the diagonal and
        ``sigma^2 / 2`` off it (half the off-diagonal variance of noising the
        upper triangle entrywise). A record contributing ``u u^T`` has
        Frobenius norm ``||u||^2``, which is the contribution bound.

        With ``overwrite=True`` a C-contiguous float64 ``M`` is noised in place
        and returned (the caller's temporary; same draws, same result).
        ``work``: a float64 scratch from :func:`symmetric_scratch` that the
        bands of noise are drawn in (no allocation; same draws, same result).

        Up to ``q = _TILED_FROM`` the normals come from ``rng``, in the order
        described below; from there on by tiles, from independent streams
        seeded by ``rng`` (:func:`_add_tiled_noise`): the same distribution,
        other values. Either way the values depend on ``rng`` and ``q`` only.
        """
        M = np.asarray(M, dtype=np.float64)
        q = M.shape[0]
        if M.shape != (q, q):
            raise ValueError(f"expected a square matrix, got shape {M.shape}")
        if q >= _TILED_FROM:
            out = M if overwrite and M.flags.c_contiguous else M.copy()
            _add_tiled_noise(out, self.sigma, rng)
            return out
        # Exactly q (q + 1) / 2 independent normals, one per coordinate of the
        # isometry: the strict upper triangle row by row, then the diagonal
        # (no q x q draw). The triangle is drawn one band of rows at a time:
        # consecutive draws continue the generator's stream, so the values are
        # those of a single draw, without its q^2 / 2 temporary.
        off_diagonal = self.sigma / np.sqrt(2.0)
        out = M if overwrite and M.flags.c_contiguous else M.copy()
        # The strict upper triangle N of the noise, a band of a few rows at a
        # time in a small zeroed buffer (no q x q temporary: at q = 1000 a
        # fresh 8 MB array costs more in page faults than the additions):
        # out[band] += N[band] puts each normal above the diagonal, and the
        # band's transpose, added to the band's columns below it, puts it at
        # (j, i). Every entry of out receives its normal once (the other terms
        # are exact zeros): the same values as adding each normal at (i, j)
        # and (j, i) directly.
        n_rows = _mirror_rows(q)
        size = n_rows * q
        scratch = is_scratch(work, (2 * size,))
        band = work[:size].reshape(n_rows, q) if scratch else np.empty((n_rows, q))
        for first in range(0, q - 1, n_rows):
            stop = min(first + n_rows, q)
            last = min(stop, q - 1)  # the last row has no entry above the diagonal
            count = (last - first) * (2 * q - first - last - 1) // 2
            if scratch:
                # normal(0, s) draws the same standard normals z and returns
                # 0.0 + s * z: the same values (up to the sign of an exact
                # zero, which changes no sum below).
                upper = work[size : size + count]
                rng.standard_normal(out=upper)
                upper *= off_diagonal
            else:
                upper = rng.normal(0.0, off_diagonal, size=count)
            rows = band[: stop - first]
            rows.fill(0.0)
            start = 0
            for i in range(first, last):
                rows[i - first, i + 1 :] = upper[start : start + q - 1 - i]
                start += q - 1 - i
            out[first:stop] += rows
            out[first:, first:stop] += rows[:, first:].T
        out.flat[:: q + 1] += rng.normal(0.0, self.sigma, size=q)
        return out

    def release_scaled_symmetric(
        self,
        codes: np.ndarray,
        scale: float,
        rng: np.random.Generator,
        out: np.ndarray | None = None,
        work: np.ndarray | None = None,
    ) -> np.ndarray:
        """``release_symmetric(scale * codes)``, the cast done on the way.

        ``codes`` is an exactly symmetric matrix of integer codes (both
        triangles stored), ``scale`` the public factor to real units. The
        result has the bits of casting ``codes`` to float64, multiplying by
        ``scale`` and calling :meth:`release_symmetric` with the same ``rng``:
        the same mechanism, the same contribution bound in real units. From
        ``q = _TILED_FROM`` on each noise tile above the diagonal casts and
        scales its block of ``codes`` in a small buffer, adds its normals and
        writes the sum at its place and, transposed, at the mirror place (so
        the triangle below the diagonal tiles is not read: ``codes`` is
        symmetric), on the tiles' threads. That is one pass over the matrix
        where the cast and the noise took two (at q = 1002 the cast alone,
        single-threaded, was 1.5 ms of a deletion's 20).

        ``out``: a C-contiguous float64 ``q x q`` array the release is written
        to (any other value, or one that may share memory with ``codes``: a
        new array); ``work`` as in :meth:`release_symmetric`.

        Examples
        --------
        >>> codes = np.array([[4, 2], [2, 6]])
        >>> mechanism = GaussianMechanism(contribution_bound=1.0, noise_multiplier=0.0)
        >>> mechanism.release_scaled_symmetric(codes, 0.5, np.random.default_rng(0))
        array([[2., 1.],
               [1., 3.]])
        """
        codes = np.asarray(codes)
        q = codes.shape[0]
        if codes.shape != (q, q):
            raise ValueError(f"expected a square matrix, got shape {codes.shape}")
        if not is_scratch(out, (q, q)) or np.may_share_memory(out, codes):
            out = np.empty((q, q))
        if q < _TILED_FROM:
            np.multiply(codes, scale, out=out, dtype=np.float64)
            return self.release_symmetric(out, rng, overwrite=True, work=work)
        _add_tiled_noise(out, self.sigma, rng, source=(codes, scale))
        return out


def _add_tiled_noise(
    out: np.ndarray,
    sigma: float,
    rng: np.random.Generator,
    source: tuple[np.ndarray, float] | None = None,
) -> None:
    """``out += E``, ``E`` the symmetric noise of
    :meth:`GaussianMechanism.release_symmetric`, drawn by tiles; with
    ``source = (codes, scale)``, ``out = scale * codes + E`` instead (each
    tile of ``out`` first set to its block of ``codes`` cast to float64 and
    scaled, the values of ``np.multiply(codes, scale, dtype=np.float64)``).

    The tiles ``(I, J)``, ``I <= J``, are square blocks of ``_NOISE_TILE``
    rows and columns (the last ones narrower). Each gets its own block ``Z``
    of standard normals. An off-diagonal tile adds ``s Z`` at ``(I, J)`` and
    ``s Z^T`` at ``(J, I)``, ``s = sigma / sqrt(2)``: each entry above the
    diagonal its own normal, mirrored below. A diagonal tile adds
    ``sigma (Z + Z^T) / 2``: ``sigma Z_ii`` on the diagonal (variance
    ``sigma^2``) and ``sigma (Z_ij + Z_ji) / 2`` at ``(i, j)`` and ``(j, i)``
    (variance ``sigma^2 / 2``; the two normals serve that pair only). So the
    isometric coordinates of ``E`` are independent ``N(0, sigma^2)``, the
    distribution of the banded draw, at the price of ``_NOISE_TILE / 2``
    extra normals per row of a diagonal tile (at q = 1002, 564,964 normals for
    the isometry's 502,503: 12% more).

    Tile row ``I`` (tiles ``(I, J)``, ``J >= I``) draws from its own
    generator (``SFC64``, the fastest of NumPy's bit generators here: 4.7 ms
    for 5e5 normals against PCG64's 6.0 ms), seeded by the ``I``-th child of
    a ``SeedSequence`` whose entropy is drawn from ``rng``. The tile rows go,
    widest first, to :func:`~sklearn_dpu._row_threads.for_each_item`'s
    threads as they free up (at d = 1000 on 2 cores, right after a threaded
    BLAS call, when OpenBLAS's spinning worker slows one thread: 7 ms where
    two fixed halves took 9-12). Every entry of ``out`` is written by one
    tile of one tile row, so the result depends on ``rng`` and the shape
    only, not on the threads or the order they take the rows in.
    """
    q, tile = len(out), _NOISE_TILE
    n_tiles = -(-q // tile)
    entropy = rng.integers(0, 2**63, size=4)
    seeds = np.random.SeedSequence([int(e) for e in entropy]).spawn(n_tiles)
    off_diagonal, diagonal = sigma / np.sqrt(2.0), sigma / 2.0
    scratch = threading.local()  # two tiles of normals per thread

    def draw_row(r: int) -> None:
        if not hasattr(scratch, "normals"):
            scratch.normals, scratch.symmetric, scratch.released = np.empty((3, tile * tile))
        generator = np.random.Generator(np.random.SFC64(seeds[r]))
        rows = slice(r * tile, min(q, (r + 1) * tile))
        for c in range(r, n_tiles):
            cols = slice(c * tile, min(q, (c + 1) * tile))
            shape = (rows.stop - rows.start, cols.stop - cols.start)
            Z = scratch.normals[: shape[0] * shape[1]].reshape(shape)
            generator.standard_normal(out=Z)
            if r == c:
                S = scratch.symmetric[: Z.size].reshape(shape)
                np.add(Z, Z.T, out=S)
                S *= diagonal
                noise = S
            else:
                Z *= off_diagonal
                noise = Z
            if source is None:
                out[rows, cols] += noise
                if r != c:
                    out[cols, rows] += noise.T
            else:
                codes, scale = source
                T = scratch.released[: Z.size].reshape(shape)
                np.multiply(codes[rows, cols], scale, out=T, dtype=np.float64)
                T += noise
                out[rows, cols] = T
                if r != c:
                    out[cols, rows] = T.T

    for_each_item(draw_row, n_tiles, n_tiles * tile * tile)


@dataclass(frozen=True)
class GaussianDP:
    """A release known by its Gaussian-DP parameter ``mu`` [DRS22]_.

    A ``mu``-GDP release (Def. 2.6) tells neighbours apart no better than
    ``N(0, 1)`` from ``N(mu, 1)``: its ``dp_accounting`` event is exactly the
    Gaussian mechanism with noise multiplier ``1 / mu``, and ``mu``-GDP
    releases compose to ``sqrt(sum mu_i^2)``-GDP (Cor. 3.3).

    Used as is for a release planned before the data are read (its noise is
    calibrated later, from a released count), and as the base of mechanisms
    whose privacy analysis ends in a ``mu`` (objective perturbation, a run of
    several Gaussian releases): those subclasses hold their calibration and
    draw their noise, and the event stays the one of ``mu``.

    Parameters
    ----------
    mu : float
        Gaussian-DP parameter of the whole release, positive.

    Examples
    --------
    >>> GaussianDP(0.5).dp_event
    GaussianDpEvent(noise_multiplier=2.0)
    """

    mu: float

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return dp_event.GaussianDpEvent(noise_multiplier=1.0 / self.mu)


@dataclass(frozen=True)
class GaussianCount:
    """Release a record count plus ``N(0, noise_multiplier^2)`` [BW18]_.

    A count has add/remove sensitivity 1, so this is the Gaussian mechanism
    with contribution bound 1. With ``noise_multiplier=0`` the count is exact
    and the event says so (``NonPrivateDpEvent``); a standard normal is still
    drawn, so a generator's stream does not depend on the multiplier.

    Parameters
    ----------
    noise_multiplier : float
        Standard deviation of the noise (in records).

    Examples
    --------
    >>> import numpy as np
    >>> count = GaussianCount(noise_multiplier=2.0)
    >>> count.dp_event
    GaussianDpEvent(noise_multiplier=2.0)
    >>> round(count.release(1000, np.random.default_rng(0)), 3)
    1000.251
    """

    noise_multiplier: float

    @property
    def dp_event(self) -> dp_event.DpEvent:
        if self.noise_multiplier <= 0:
            return dp_event.NonPrivateDpEvent()
        return dp_event.GaussianDpEvent(noise_multiplier=float(self.noise_multiplier))

    def release(self, count: float, rng: np.random.Generator) -> float:
        """Return ``count + N(0, noise_multiplier^2)`` as a float."""
        return float(count + rng.normal(0.0, self.noise_multiplier))


@dataclass(frozen=True)
class GaussianSteps:
    """``steps`` Gaussian releases of a sum, each on a Poisson sample of the records.

    The mechanism of noisy (stochastic) gradient descent: at every step, the
    sum of the contributions of the records sampled (each independently with
    probability ``sampling_rate``; 1 for full-batch steps) plus isotropic
    Gaussian noise of standard deviation ``noise_multiplier *
    contribution_bound``. Its event is the ``steps``-fold composition of a
    Poisson-subsampled Gaussian ([BW18]_ for one step; amplification by
    Poisson subsampling is exact in the PLD accountant), and
    ``NonPrivateDpEvent`` when there is no noise.

    Parameters
    ----------
    contribution_bound : float
        L2 bound on one record's contribution to a step's sum.
    noise_multiplier : float
        Noise standard deviation divided by ``contribution_bound``.
    steps : int
        Number of releases.
    sampling_rate : float, default=1.0
        Probability that a record takes part in a step.
    poisson_sampled : bool or None, default=None
        Whether the steps' batches are Poisson samples, recorded as such in
        the event even at rate 1 (a schedule whose rate reaches 1 for some
        sizes keeps one form of event). Default: when ``sampling_rate < 1``.

    Examples
    --------
    >>> steps = GaussianSteps(1.0, noise_multiplier=4.0, steps=10)
    >>> steps.dp_event
    SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=4.0), count=10)
    >>> GaussianSteps(1.0, 4.0, 10, sampling_rate=0.01).step_event
    PoissonSampledDpEvent(sampling_probability=0.01, event=GaussianDpEvent(noise_multiplier=4.0))
    """

    contribution_bound: float
    noise_multiplier: float
    steps: int
    sampling_rate: float = 1.0
    poisson_sampled: bool | None = None

    @property
    def sigma(self) -> float:
        """Standard deviation of one step's noise on each coordinate."""
        return self.noise_multiplier * self.contribution_bound

    @property
    def step_event(self) -> dp_event.DpEvent:
        """The event of one step."""
        if self.noise_multiplier <= 0:
            return dp_event.NonPrivateDpEvent()
        gaussian = dp_event.GaussianDpEvent(noise_multiplier=float(self.noise_multiplier))
        sampled = self.sampling_rate < 1.0 if self.poisson_sampled is None else self.poisson_sampled
        if not sampled:
            return gaussian
        return dp_event.PoissonSampledDpEvent(float(self.sampling_rate), gaussian)

    @property
    def dp_event(self) -> dp_event.DpEvent:
        """The event of all ``steps`` steps."""
        return dp_event.SelfComposedDpEvent(self.step_event, int(self.steps))

    def noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        """Every step's noise at once: an array of shape ``(steps, *shape)``."""
        return rng.normal(0.0, self.sigma, size=(int(self.steps), *shape))

    def standard_noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        """Standard normal draws of shape ``(steps, *shape)``, for a caller that
        scales them itself (e.g. a coupling that splits each step's noise)."""
        return rng.standard_normal((int(self.steps), *shape))


@dataclass(frozen=True)
class DisjointBlocks:
    """A run over disjoint blocks of records, each block releasing ``per_block``.

    Every record lies in exactly one block, and the block it lies in is chosen
    independently of the other records (so adding or removing a record changes
    no other record's block). Each block's mechanisms may depend on what the
    earlier blocks released. Adding or removing one record then changes only
    the mechanisms of its own block, given the past: by adaptive parallel
    composition the whole run is exactly as private as one block, i.e. the
    composition of ``per_block`` ([DR14]_ Thm 3.16 for the composition within
    a block; parallel composition: a record outside a block leaves that
    block's output distribution unchanged given the past). The number of
    blocks does not enter the event.

    Parameters
    ----------
    per_block : tuple of mechanisms
        The mechanisms one block runs (objects with a ``dp_event``), each
        calibrated to the add/remove sensitivity of one record of the block.

    Examples
    --------
    >>> run = DisjointBlocks((GaussianMechanism(1.0, 3.0), GaussianMechanism(1.0, 4.0)))
    >>> run.dp_event  # doctest: +NORMALIZE_WHITESPACE
    ComposedDpEvent(events=[GaussianDpEvent(noise_multiplier=3.0),
                            GaussianDpEvent(noise_multiplier=4.0)])
    """

    per_block: tuple

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return dp_event.ComposedDpEvent([m.dp_event for m in self.per_block])


@dataclass(frozen=True)
class LaplaceMechanism:
    """Add i.i.d. Laplace noise of scale ``l1_bound / epsilon`` [DR14]_ (Thm 3.6).

    Parameters
    ----------
    l1_bound : float
        L1 bound on one record's contribution.
    epsilon : float
        Pure-DP parameter of the release.
    """

    l1_bound: float
    epsilon: float

    @property
    def scale(self) -> float:
        return self.l1_bound / self.epsilon

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return dp_event.LaplaceDpEvent(noise_multiplier=1.0 / float(self.epsilon))

    def release(self, value: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        value = np.asarray(value, dtype=np.float64)
        return value + rng.laplace(0.0, self.scale, size=value.shape)


def _as_scores(scores) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError("scores must be a non-empty 1-D array")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    return scores


@dataclass(frozen=True)
class _PureSelection:
    """Fields and accounting shared by the pure-DP selection mechanisms.

    ``sensitivity`` bounds how much any utility moves between neighbours;
    ``monotonic`` says all utilities move the same way, which halves the
    required noise (the factor 2 of the general case).
    """

    epsilon: float
    sensitivity: float
    monotonic: bool = False

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return pure_dp_event(self.epsilon)

    @property
    def _factor(self) -> float:
        return 1.0 if self.monotonic else 2.0


@dataclass(frozen=True)
class ExponentialMechanism(_PureSelection):
    """Select an index with probability proportional to ``exp(eps * u / (2 Delta))``.

    [DR14]_ Thm 3.10. The density printed in [U24]_ (Ch. 2, the exponential
    mechanism of the private grid search: ``exp(-2 eps s / Delta)``) has the
    wrong sign and factor (erratum); this is the standard form. With
    ``monotonic=True`` (utilities that all move in the same direction between
    neighbours) the factor 2 is dropped. Sampled exactly by the Gumbel-max trick.

    Parameters
    ----------
    epsilon : float
    sensitivity : float
        Largest change of any utility between neighbouring data sets.
    monotonic : bool, default=False
    """

    def log_weights(self, utilities: ArrayLike) -> np.ndarray:
        u = _as_scores(utilities)
        return self.epsilon * (u - u.max()) / (self._factor * self.sensitivity)

    def probabilities(self, utilities: ArrayLike) -> np.ndarray:
        w = np.exp(self.log_weights(utilities))
        return w / w.sum()

    def select(self, utilities: ArrayLike, rng: np.random.Generator) -> int:
        """Return the selected index (larger utility is better)."""
        logits = self.log_weights(utilities)
        return int(np.argmax(logits + rng.gumbel(size=logits.shape)))


@dataclass(frozen=True)
class PermuteAndFlip(_PureSelection):
    """Permute-and-flip selection [MS20]_ Alg. 1: never worse than the exponential
    mechanism in expected utility, same privacy.

    Visit candidates in a uniformly random order and stop at the first one whose
    coin ``Bernoulli(exp(eps (u_r - u_max) / (2 Delta)))`` comes up heads; the
    best candidate's coin always does.
    """

    def select(self, utilities: ArrayLike, rng: np.random.Generator) -> int:
        u = _as_scores(utilities)
        p = np.exp(self.epsilon * (u - u.max()) / (self._factor * self.sensitivity))
        order = rng.permutation(u.size)
        # rng.random() < 1 always, so the best candidate (p = 1) stops the walk.
        heads = rng.random(u.size) < p[order]
        return int(order[np.argmax(heads)])


@dataclass(frozen=True)
class ReportNoisyMax(_PureSelection):
    """Return the argmax of utilities plus i.i.d. Laplace noise.

    Laplace scale ``2 Delta / eps`` is eps-DP for arbitrary sensitivity-Delta
    utilities; ``Delta / eps`` suffices for monotonic ones ([DR14]_ Claim 3.9).
    """

    def select(self, utilities: ArrayLike, rng: np.random.Generator) -> int:
        u = _as_scores(utilities)
        noisy = u + rng.laplace(0.0, self._factor * self.sensitivity / self.epsilon, size=u.size)
        return int(np.argmax(noisy))


@dataclass(frozen=True)
class GeneralizedExponentialMechanism:
    """Select the candidate of smallest cost when each cost has its own sensitivity.

    The generalized exponential mechanism of [RS16]_ as used by the
    private grid search of [U24]_ (Alg. 4, Thm 14; GenExpMech, Thm 34, which
    gives only the interface). Reconstruction from [RS16]_::

        t   = 2 ln(N / beta) / eps
        r_i = q_i + t * gamma_i                        # penalised cost
        s_i = max_j (r_i - r_j) / (gamma_i + gamma_j)  # the j = i term is 0
        P(i) proportional to exp(-eps * s_i / 2)

    Each ``(r_i - r_j) / (gamma_i + gamma_j)`` moves by at most 1 between
    neighbours, hence so does their maximum ``s_i``; the last line is the
    exponential mechanism on a sensitivity-1 cost, so the selection is eps-DP.
    Pairs with ``gamma_i = gamma_j = 0`` compare data-independent costs; their
    term is ``+inf``, ``0`` or ``-inf`` by the sign of ``r_i - r_j``, which has no
    privacy cost. Guarantee (Thm 34): with probability ``1 - beta`` the chosen
    cost is at most ``min_j (q_j + 4 gamma_j ln(N / beta) / eps)``.

    Parameters
    ----------
    epsilon : float
    beta : float, default=0.05
        Failure probability of the utility guarantee (not of privacy).
    """

    epsilon: float
    beta: float = 0.05

    @property
    def dp_event(self) -> dp_event.DpEvent:
        return pure_dp_event(self.epsilon)

    def normalized_scores(self, costs: ArrayLike, sensitivities: ArrayLike) -> np.ndarray:
        q = _as_scores(costs)
        gamma = np.asarray(sensitivities, dtype=np.float64)
        if gamma.shape != q.shape or np.any(gamma < 0) or not np.all(np.isfinite(gamma)):
            raise ValueError("sensitivities must be finite, non-negative and match costs")
        t = 2.0 * np.log(q.size / self.beta) / self.epsilon
        r = q + t * gamma
        diff = r[:, None] - r[None, :]
        denom = gamma[:, None] + gamma[None, :]
        # Two zero-sensitivity candidates compare data-independent costs: the
        # term is +inf, -inf or 0 by the sign of the difference (0 for a tie;
        # sign(0) * inf would be NaN and silently drop both candidates).
        unbounded = np.where(diff > 0, np.inf, np.where(diff < 0, -np.inf, 0.0))
        ratio = np.where(denom > 0, diff / np.where(denom > 0, denom, 1.0), unbounded)
        ratio[np.diag_indices(q.size)] = 0.0
        return ratio.max(axis=1)

    def probabilities(self, costs: ArrayLike, sensitivities: ArrayLike) -> np.ndarray:
        s = self.normalized_scores(costs, sensitivities)
        logits = -self.epsilon * (s - s[np.isfinite(s)].min()) / 2.0
        w = np.where(np.isfinite(logits), np.exp(np.where(np.isfinite(logits), logits, 0.0)), 0.0)
        return w / w.sum()

    def select(self, costs: ArrayLike, sensitivities: ArrayLike, rng: np.random.Generator) -> int:
        """Return the index of the selected candidate (smaller cost is better)."""
        p = self.probabilities(costs, sensitivities)
        return int(rng.choice(p.size, p=p))
