"""Re-releasing a Gaussian statistic with noise correlated to the previous release.

After a deletion, :class:`~sklearn_dpu.linear_model.DPLinearRegression`
re-releases its noised sufficient statistics. With fresh, independent noise
each re-release is a full Gaussian release to every remaining row, so ``k``
deletions (one call each) cost them ``k + 1`` releases. Re-noising instead with

    Z_j = rho Z_{j-1} + sqrt(1 - rho^2) W_j,    W_j ~ N(0, sigma^2) independent,

(``Z_0`` the noise of the fit) keeps every release marginally ``N(0, sigma^2)``
(the state after a deletion still has the law of a fresh fit) and bounds the
total.

Derivation (ours; it rests on Gaussian-DP composition and the Gaussian
mechanism with correlated noise [DRS22]_). Fix one coordinate of the
statistic; the noise of releases ``0 .. k`` is ``sigma Z`` with ``Z`` the
stationary AR(1) vector, covariance ``Sigma_ij = rho^|i - j|``. Its precision
matrix is tridiagonal,

    Sigma^{-1} = (1 - rho^2)^{-1} tridiag(-rho; 1, 1 + rho^2, ..., 1 + rho^2, 1; -rho).

Releases are ``s_j + sigma Z_j``. A row present in all ``k + 1`` releases
shifts every ``s_j`` by the same vector ``v`` (``||v|| <= Delta``), so the
pair of output laws is that of a Gaussian mechanism whose Mahalanobis shift
is ``(||v|| / sigma)^2 1^T Sigma^{-1} 1`` (coordinates are independent and
identically correlated across releases). Whitening by ``Sigma^{-1/2}`` is an
invertible map (post-processing both ways), after which the releases are a
Gaussian mechanism with identity covariance: ``mu^2 = mu_1^2 1^T Sigma^{-1} 1``
with ``mu_1 = Delta / sigma`` the GDP parameter of one release ([DRS22]_,
Thm 2.7). Summing the entries of the precision matrix,

    1^T Sigma^{-1} 1 = [2 + (k - 1)(1 + rho^2) - 2 k rho] / (1 - rho^2)
                     = [2 + (k - 1)(1 - rho)] / (1 + rho)        (k >= 1),

against ``k + 1`` for independent noise (``rho = 0``). Each re-release thus
adds precision ``mu^2 (1 - rho) / (1 + rho)``: the ledger records it as one
Gaussian event of noise multiplier ``m sqrt((1 + rho) / (1 - rho))``, and the
Gaussian events compose exactly ([DRS22]_, Cor. 3.3) to the joint mechanism.

The price is paid by the deleted rows. A row present in releases ``0 .. k-1``
and absent from release ``k`` on shifts the indicator ``a`` of the first ``k``
releases, and

    a^T Sigma^{-1} a = [1 + (k - 1)(1 - rho)^2] / (1 - rho^2),

whatever the later releases: for ``k = 1`` (deleted after the fit),
``mu^2 / (1 - rho^2)`` instead of ``mu^2``. Given the previous release the new
one shows the row's contribution under noise ``sigma sqrt(1 - rho^2)`` only.

What the estimator has released is private at the largest of these
exposures over every record ever in the data. A row deleted by the ``k``-th
call (in releases ``0 .. k-1``) exceeds a remaining row after ``k``
re-releases by a constant,

    a^T Sigma^{-1} a - 1^T Sigma^{-1} 1 = (2 rho - 1) / (1 - rho^2),

so for ``rho > 1/2`` the rows deleted so far, not the remaining ones, set
the estimator's epsilon (the latest deleted are the most exposed: ``a^T
Sigma^{-1} a`` grows with ``k``), and for ``rho <= 1/2`` the remaining rows
do. The ledger records both groups: the re-releases on chunk 1 with the fit
(the remaining rows), and the deleted rows' largest exposure on chunk 0, a
chunk no live row belongs to. Its events compose exactly to that largest
exposure: at the first deletion a copy of the fit's event and one of
precision ``mu^2 (1 / (1 - rho^2) - 1) = mu^2 rho^2 / (1 - rho^2)``, at each
later one ``mu^2 (1 - rho) / (1 + rho)``, the growth of ``a^T Sigma^{-1} a``
with ``k``. Parallel composition over chunks then takes the larger group,
and a shared budget is charged the growth of that maximum.

The state after the deletion (exact statistics of the remaining rows and the
current noise ``Z_k``) has the law of a fresh fit. ``Z_k`` is independent
of the data but correlated with the noise of the earlier releases, which
contained the deleted rows; the released model ``s_k + sigma Z_k`` already
shows the same correlation, so keeping ``Z_k`` reveals nothing of a deleted
row beyond the exposure accounted above (the deleted row survives only in
what was published before, which the correlation lets the new release
sharpen).

References
----------
.. [DRS22] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy",
   Journal of the Royal Statistical Society Series B 84(1), 2022: Thm 2.7
   (the Gaussian mechanism is mu-GDP), Cor. 3.3 (composition of Gaussian DP).
"""

import math
from dataclasses import dataclass

import numpy as np
from dp_accounting.dp_event import DpEvent, GaussianDpEvent

from ..privacy.mechanisms import GaussianMechanism

__all__ = [
    "CorrelatedRerelease",
    "ar1_covariance",
    "correlated_noise",
    "deleted_row_increment_multiplier",
    "deleted_row_precision",
    "remaining_row_precision",
    "rerelease_increment_multiplier",
]


def ar1_covariance(n_releases: int, rho: float) -> np.ndarray:
    """Correlation matrix ``rho^|i - j|`` of the noise of ``n_releases`` releases."""
    index = np.arange(n_releases)
    return rho ** np.abs(index[:, None] - index[None, :])


def correlated_noise(previous: np.ndarray, fresh: np.ndarray, rho: float) -> np.ndarray:
    """The next release's noise ``rho * previous + sqrt(1 - rho^2) * fresh``.

    With ``previous`` and ``fresh`` independent draws of the same centred
    Gaussian law, the result has that law too (variance
    ``rho^2 + 1 - rho^2 = 1`` times it) and correlation ``rho`` with ``previous``.
    """
    return rho * previous + math.sqrt(1.0 - rho * rho) * fresh


def remaining_row_precision(n_rereleases: int, rho: float) -> float:
    """``1^T Sigma^{-1} 1``: the joint precision, in units of one release's ``mu^2``,
    of the fit and ``n_rereleases`` correlated re-releases for a row in all of them."""
    if n_rereleases <= 0:
        return 1.0
    return (2.0 + (n_rereleases - 1) * (1.0 - rho)) / (1.0 + rho)


def deleted_row_precision(n_releases_in: int, rho: float) -> float:
    """``a^T Sigma^{-1} a`` for a row in the first ``n_releases_in`` releases only,
    in units of one release's ``mu^2`` (its whole exposure, later releases included)."""
    if n_releases_in <= 0:
        return 0.0
    return (1.0 + (n_releases_in - 1) * (1.0 - rho) ** 2) / (1.0 - rho * rho)


def rerelease_increment_multiplier(noise_multiplier: float, rho: float) -> float:
    """Noise multiplier of the Gaussian event one correlated re-release adds to the ledger.

    Its precision ``(1 - rho) / (1 + rho)`` times that of one release is the
    increment of :func:`remaining_row_precision` per re-release.
    """
    return noise_multiplier * math.sqrt((1.0 + rho) / (1.0 - rho))


def deleted_row_increment_multiplier(
    noise_multiplier: float, n_releases_in: int, rho: float
) -> float:
    """Noise multiplier of the Gaussian event by which a deletion call raises
    the largest deleted-row exposure.

    The row deleted by call ``n_releases_in`` (in releases ``0 ..
    n_releases_in - 1``) is the most exposed so far. Its precision
    :func:`deleted_row_precision` exceeds the previous maximum (for the first
    call, the fit's own precision 1, recorded as a copy of the fit's event) by
    ``rho^2 / (1 - rho^2)`` for the first call and ``(1 - rho) / (1 + rho)``
    for each later one (the same event as a re-release's).
    """
    if n_releases_in <= 0 or rho <= 0.0:
        raise ValueError(f"needs n_releases_in >= 1 and rho > 0, got {n_releases_in}, {rho}")
    if n_releases_in > 1:
        return rerelease_increment_multiplier(noise_multiplier, rho)
    return noise_multiplier * math.sqrt(1.0 - rho * rho) / rho


@dataclass(frozen=True)
class CorrelatedRerelease:
    """A re-release of a symmetric Gaussian statistic with noise correlated to the last.

    Draws the next release's noise from the previous one and gives the
    ``dp_accounting`` events the derivation above charges for it, so the
    noise and the ledger come from one object.

    Parameters
    ----------
    mechanism : GaussianMechanism
        The mechanism of one release (the fit's): each re-release's noise has
        its law, ``release_symmetric`` noise of standard deviation ``sigma``.
    rho : float in (0, 1)
        Correlation with the previous release's noise.
    """

    mechanism: GaussianMechanism
    rho: float

    def noise(self, previous: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The next release's noise: ``rho * previous + sqrt(1 - rho^2) * fresh``,
        ``fresh`` a new draw of the mechanism's noise (no data involved)."""
        fresh = self.mechanism.release_symmetric(np.zeros(previous.shape), rng)
        return correlated_noise(previous, fresh, self.rho)

    @property
    def dp_event(self) -> DpEvent:
        """What one re-release adds for the remaining rows: a Gaussian event whose
        precision is the increment of :func:`remaining_row_precision`."""
        multiplier = rerelease_increment_multiplier(self.mechanism.noise_multiplier, self.rho)
        return GaussianDpEvent(noise_multiplier=float(multiplier))

    def exposure_event(self, n_releases_in: int) -> DpEvent:
        """The growth of the largest deleted-row exposure when the rows deleted
        by call ``n_releases_in`` leave (see :func:`deleted_row_increment_multiplier`)."""
        multiplier = deleted_row_increment_multiplier(
            self.mechanism.noise_multiplier, n_releases_in, self.rho
        )
        return GaussianDpEvent(noise_multiplier=float(multiplier))
