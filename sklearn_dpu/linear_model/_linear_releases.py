"""What :class:`~sklearn_dpu.linear_model.DPLinearRegression` releases, and what
its deletions cost: frozen recipes built from parameters alone.

A recipe holds the mechanism objects of one release. The solver draws its
noise from them and the ledger reads its event from the same objects
(:meth:`~sklearn_dpu.privacy.ledger.Release.of`), so what is charged is what
was drawn:

* :class:`SSPRecipe` -- one Gaussian mechanism on the clipped Gram matrix,
  Frobenius contribution bound ``||u||^2`` ([BW18]_ Thm 8; sufficient
  statistics perturbation [Sheffet17]_, AdaSSP ridge [Wang18]_ Alg. 2; tree
  aggregation of a stream [CSS11]_ Sec. 3.4);
* :class:`NoisyGDRecipe` -- ``max_iter`` Gaussian gradient sums and a
  Gaussian record count (projected noisy GD, [U24]_ Alg. 1 / Thm 8 with the
  errata of :mod:`sklearn_dpu.linear_model._noisy_gd`), calibrated to compose
  exactly to one release ([DRS22]_ Cor. 3.3);
* :class:`~sklearn_dpu.linear_model._ambssgd.AMBSSGDRecipe` -- DP-AMBSSGD
  with DP-STAT adaptive clipping ([VTJ22]_ Alg. 2 and 3, see
  :mod:`sklearn_dpu.linear_model._ambssgd`), also composing exactly to one
  release;
* a deletion's correlated re-release and the deleted rows' exposure
  (:class:`~sklearn_dpu.linear_model._correlated_rerelease.CorrelatedRerelease`,
  on [DRS22]_ Thm 2.7 and Cor. 3.3).

Deletion and retrain costs are work counts from public sizes and released
(charged) counts only; nothing here is timed.

References
----------
.. [BW18] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
   differential privacy: analytical calibration and optimal denoising",
   ICML 2018, Theorem 8.
.. [Sheffet17] O. Sheffet, "Differentially private ordinary least squares",
   ICML 2017.
.. [Wang18] Y.-X. Wang, "Revisiting differentially private linear regression:
   optimal and adaptive prediction and estimation in unbounded domain",
   UAI 2018, Algorithm 2 (AdaSSP).
.. [CSS11] T.-H. H. Chan, E. Shi and D. Song, "Private and continual release
   of statistics", ACM TISSEC 2011, Section 3.4.
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024,
   Algorithm 1 and Theorem 8.
.. [DRS22] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy",
   Journal of the Royal Statistical Society Series B 84(1), 2022, Thm 2.7 and
   Cor. 3.3.
.. [VTJ22] P. Varshney, A. Thakurta and P. Jain, "(Nearly) optimal private
   linear regression via adaptive clipping", COLT 2022,
   Algorithms 2 and 3, Theorem 9.
"""

from dataclasses import dataclass

import numpy as np

from ..privacy.accounting import epsilon_spent
from ..privacy.ledger import Release
from ..privacy.mechanisms import GaussianCount, GaussianMechanism, GaussianSteps
from ..privacy.tree_aggregation import TreeAggregator
from ..unlearning.planner import gdp_epsilon
from ..unlearning.report import DeletionCost, DeletionOutcome, with_kept_release
from ._ambssgd import AMBSSGDRecipe
from ._correlated_rerelease import (
    CorrelatedRerelease,
    deleted_row_precision,
    remaining_row_precision,
)
from ._linear_bounds import calibration_bounds, published_bounds
from ._linear_state import LinearStatisticsState
from ._noisy_gd import gd_mechanisms
from ._sufficient_statistics import GRAM_SCALE, contribution_bound

__all__ = [
    "AMBSSGDRecipe",
    "DELETED_ROWS_CHUNK",
    "CorrelatedStatement",
    "NoisyGDRecipe",
    "SSPRecipe",
    "correlated_release",
    "correlated_statement",
    "deleted_exposure_entries",
    "deletion_cost",
    "deletion_outcome",
    "release_recipe",
    "retrain_cost",
    "target_interval",
]

SSP_REFERENCE = (
    "Gaussian mechanism on the clipped Gram matrix, Frobenius sensitivity ||u||^2 "
    "(Balle & Wang 2018, Thm 8; Sheffet 2017; tree aggregation: Chan, Shi & Song 2011)"
)
GD_REFERENCE = (
    "Ullah 2024 (PhD thesis) Alg. 1 / Thm 8, noise recalibrated by exact Gaussian "
    "composition (Dong, Roth & Su 2022, Cor. 3.3); errata: gradient (not loss) in "
    "the update, averaged iterates w_1..w_T, corrected step size"
)
CORRELATED_REFERENCE = (
    "correlated re-release Z_k = rho Z_(k-1) + sqrt(1 - rho^2) W_k: with the fit and "
    "earlier re-releases a Gaussian mechanism of precision mu^2 [2 + (k-1)(1-rho)]/(1+rho) "
    "(sklearn_dpu derivation, see sklearn_dpu.linear_model._correlated_rerelease; Dong, "
    "Roth & Su 2022, Thm 2.7 and Cor. 3.3); this event is its increment"
)
DELETED_EXPOSURE_REFERENCE = (
    "correlated re-release: a row in the first j releases only is exposed by all of them "
    "at precision mu^2 [1 + (j-1)(1-rho)^2]/(1-rho^2) (sklearn_dpu derivation, see "
    "sklearn_dpu.linear_model._correlated_rerelease; Dong, Roth & Su 2022, Thm 2.7 and "
    "Cor. 3.3); chunk 0 holds the rows deleted so far, and its events compose to the "
    "largest such exposure"
)
#: Ledger chunk of the rows deleted so far (no live row belongs to it): with
#: ``rerelease_correlation > 0`` their exposure exceeds the remaining rows'.
DELETED_ROWS_CHUNK = 0
EXACT_GUARANTEE = (
    "the model and all stored state have the distribution of a fit "
    "on the remaining samples; nothing of the deleted rows is kept. "
    "The re-release is a new release to the remaining samples "
    "(remaining_epsilon); deleting many ids in one call costs one re-release"
)


def target_interval(
    target_bound: float | tuple[float, float] | list[float], fit_intercept: bool
) -> tuple[float, float]:
    """Center and half-range of the public target interval.

    Raises
    ------
    ValueError
        ``target_bound`` is a pair that is not ``(low, high)`` with ``low < high``.
    """
    if isinstance(target_bound, tuple | list):
        if len(target_bound) != 2:
            raise ValueError(f"target_bound must be a number or (low, high), got {target_bound!r}")
        low, high = (float(v) for v in target_bound)
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError(f"target_bound must satisfy low < high, got {target_bound!r}")
    else:
        low, high = -float(target_bound), float(target_bound)
    if not fit_intercept:
        # Without an intercept the model cannot absorb a shift of the target.
        return 0.0, max(abs(low), abs(high))
    return (low + high) / 2.0, (high - low) / 2.0


@dataclass(frozen=True)
class SSPRecipe:
    """One release of ``solver='ssp'``: the Gaussian mechanism on the Gram matrix.

    Attributes
    ----------
    mechanism : GaussianMechanism
        Contribution bound ``||u||^2`` of a normalized row ``u`` (Frobenius
        norm of ``u u^T``), noise multiplier of one release.
    """

    mechanism: GaussianMechanism

    @property
    def noise_multiplier(self) -> float:
        return self.mechanism.noise_multiplier

    def new_tree(self) -> TreeAggregator:
        """The tree of noised Gram matrices a stream releases through."""
        return TreeAggregator(self.mechanism, symmetric=True, scale=GRAM_SCALE)

    def release(self, first_chunk: int, last_chunk: int) -> Release:
        """The ledger record of a node over chunks ``first_chunk .. last_chunk``."""
        return Release.of(
            self.mechanism,
            f"Gaussian noise on the clipped Gram matrix (chunks {first_chunk}-{last_chunk})",
            (first_chunk, last_chunk),
            SSP_REFERENCE,
        )


@dataclass(frozen=True)
class NoisyGDRecipe:
    """One release of ``solver='noisy_gd'``: the gradient steps and the count.

    Attributes
    ----------
    noise_multiplier : float
        Multiplier of one (single Gaussian) release the run composes to.
    steps : GaussianSteps
        The noisy gradient sums, contribution bound the gradient bound of the
        projected ball.
    count : GaussianCount
        The noised record count the steps are normalized by.
    row_norm : float
        Bound on a normalized feature row (intercept entry included).
    radius : float
        Radius of the ball the normalized coefficients are projected onto.
    """

    noise_multiplier: float
    steps: GaussianSteps
    count: GaussianCount
    row_norm: float
    radius: float

    def release(self, first_chunk: int, last_chunk: int) -> Release:
        """The ledger record of a run on chunks ``first_chunk .. last_chunk``."""
        return Release.of(
            [self.steps, self.count],
            f"projected noisy GD, {self.steps.steps} noisy gradient sums and a noisy count",
            (first_chunk, last_chunk),
            GD_REFERENCE,
        )


def release_recipe(
    solver: str,
    noise_multiplier: float,
    *,
    fit_intercept: bool,
    max_iter: int,
    coef_bound: float,
) -> SSPRecipe | NoisyGDRecipe | AMBSSGDRecipe:
    """The recipe of one release, from parameters and the calibrated multiplier.

    Parameters
    ----------
    solver : {"ssp", "noisy_gd", "ambssgd"}
    noise_multiplier : float
        Gaussian noise multiplier of one release at the target (epsilon, delta).
    fit_intercept : bool
    max_iter : int
        Gradient steps of noisy GD; cap on DP-AMBSSGD's blocks.
    coef_bound : float
        Radius of noisy GD's projection ball.

    Returns
    -------
    SSPRecipe, NoisyGDRecipe or AMBSSGDRecipe
    """
    if solver == "ssp":
        return SSPRecipe(GaussianMechanism(contribution_bound(fit_intercept), noise_multiplier))
    if solver == "ambssgd":
        return AMBSSGDRecipe.of(noise_multiplier, max_iter)
    row_norm = float(np.sqrt(1.0 + fit_intercept))
    steps, count = gd_mechanisms(noise_multiplier, max_iter, row_norm, coef_bound)
    return NoisyGDRecipe(noise_multiplier, steps, count, row_norm, coef_bound)


# ------------------------------------------------------------ deletion


def deleted_exposure_entries(
    rerelease: CorrelatedRerelease, n_releases_in: int
) -> tuple[Release, ...]:
    """Ledger entries raising the deleted rows' group (chunk 0) to the largest
    deleted-row exposure after the ``n_releases_in``-th release.

    The rows a call deletes were in the fit and every earlier re-release;
    their exposure (:func:`deleted_row_precision`) is the largest so far.
    Chunk 0's events compose exactly to it: at the first deletion a copy of
    the fit's event plus the excess, afterwards the growth per call. Parallel
    composition then makes ``privacy_spent_`` the larger of this group and the
    remaining rows' (chunk 1).
    """
    k, rho = n_releases_in, rerelease.rho
    chunks = (DELETED_ROWS_CHUNK, DELETED_ROWS_CHUNK)
    entries = []
    if k == 1:
        entries.append(
            Release.of(
                rerelease.mechanism,
                "the fit, as it exposes the rows deleted so far",
                chunks,
                SSP_REFERENCE,
            )
        )
    entries.append(
        Release(
            f"correlated re-release {k}: growth of the largest exposure of a deleted row "
            f"(rho={rho:g}; rows deleted after {k} release(s): "
            f"{deleted_row_precision(k, rho):.4g} times one release's GDP precision)",
            rerelease.exposure_event(k),
            chunks,
            DELETED_EXPOSURE_REFERENCE,
        )
    )
    return tuple(entries)


def correlated_release(rerelease: CorrelatedRerelease, k: int, n_chunks: int) -> Release:
    """Ledger record of the ``k``-th correlated re-release after a single fit.

    Its Gaussian precision is the increment of the joint mechanism (fit and
    all re-releases), so the ledger composes exactly to it.
    """
    total = remaining_row_precision(k, rerelease.rho)
    return Release.of(
        rerelease,
        f"correlated re-release {k} of the clipped Gram matrix (rho={rerelease.rho:g}; "
        f"with the fit and earlier re-releases: {total:.4g} times one release's GDP "
        "precision)",
        (1, n_chunks),
        CORRELATED_REFERENCE,
    )


@dataclass(frozen=True)
class CorrelatedStatement:
    """What a deletion report says after a correlated re-release.

    Attributes
    ----------
    guarantee : str
        Appended to the exact-deletion guarantee.
    deletion_epsilon : float
        Epsilon at which everything published shows each row this call deleted.
    notes : tuple of str
    """

    guarantee: str
    deletion_epsilon: float
    notes: tuple[str, ...]


def correlated_statement(
    noise_multiplier: float,
    delta: float,
    n_rereleases: int,
    rho: float,
    kept_events: tuple = (),
) -> CorrelatedStatement:
    """The report's statement after ``n_rereleases`` correlated re-releases.

    The deleted rows were in the fit and the earlier re-releases; the
    correlated new release sharpens what those showed of them. From public
    parameters only. ``kept_events``: the events of releases every row was
    in and that are not re-released (privately estimated bounds); the
    note's per-group epsilons compose them with the Gaussian exposures (the
    report's ``deletion_epsilon`` adds the kept bounds by group privacy
    instead, :func:`~sklearn_dpu.unlearning.report.with_kept_release`).
    """
    exposure = deleted_row_precision(n_rereleases, rho)
    remaining = remaining_row_precision(n_rereleases, rho)
    deletion_epsilon = gdp_epsilon(np.sqrt(exposure) / noise_multiplier, delta)
    remaining_eps = gdp_epsilon(np.sqrt(remaining) / noise_multiplier, delta)
    deleted_eps = deletion_epsilon
    if kept_events:
        kept = list(kept_events)
        remaining_eps = epsilon_spent(
            [*kept, GaussianMechanism(1.0, noise_multiplier / np.sqrt(remaining)).dp_event], delta
        )
        deleted_eps = epsilon_spent(
            [*kept, GaussianMechanism(1.0, noise_multiplier / np.sqrt(exposure)).dp_event], delta
        )
    guarantee = (
        f". Correlated re-release (rho={rho:g}): the remaining samples pay "
        f"less than a fresh release, but everything published (before and "
        f"after) shows each deleted row at (deletion_epsilon, delta), "
        f"precision {exposure:.3g} times one release's"
    )
    who = (
        "the samples deleted by this call (the most exposed so far)"
        if exposure > remaining
        else "the remaining samples"
    )
    notes = (
        f"remaining_epsilon is privacy_spent_, the largest exposure of any sample "
        f"ever in the data: here that of {who}. Remaining samples: eps = "
        f"{remaining_eps:.4g}; samples deleted by this call: eps = "
        f"{deleted_eps:.4g}",
    )
    return CorrelatedStatement(guarantee, deletion_epsilon, notes)


def deletion_cost(
    recipe: SSPRecipe | NoisyGDRecipe | AMBSSGDRecipe,
    n_coef_rows: int,
    n_deleted: int,
    n_renoised: int,
    released_count: float | None = None,
) -> DeletionCost:
    """Work of one deletion, counted from public sizes.

    Parameters
    ----------
    recipe : SSPRecipe or NoisyGDRecipe
    n_coef_rows : int
        Side ``q`` of the Gram matrix (features, intercept, target).
    n_deleted : int
        Rows removed (public: the caller named them).
    n_renoised : int
        Released sums given fresh noise (``'ssp'``).
    released_count : float, default=None
        ``'ambssgd'``: the retrain's released (charged) count, which sizes
        its pass over the rows.
    """
    q = n_coef_rows
    if isinstance(recipe, AMBSSGDRecipe):  # a retrain: one pass over the rows
        return retrain_cost(q, released_count)
    if isinstance(recipe, NoisyGDRecipe):
        n_steps = int(recipe.steps.steps)
        return DeletionCost(gradient_steps=n_steps, flops=n_deleted * q * q + n_steps * q * q)
    return DeletionCost(renoised_sums=n_renoised, flops=(n_deleted + n_renoised) * q * q + q**3)


def retrain_cost(n_coef_rows: int, released_count: float | None) -> DeletionCost:
    """A retrain's work, from public sizes and a released (charged) record count.

    The exact number of remaining rows is private: the estimate uses the
    released count (the intercept entry of the released Gram matrix for
    ``'ssp'``, the noised count of noisy GD). Without one (``'ssp'`` without
    intercept) only the per-row work is given. Nothing is timed.
    """
    q = n_coef_rows
    if released_count is None:
        return DeletionCost(flops_per_row=q * q)
    n_released = max(0.0, released_count)
    return DeletionCost(
        flops_per_row=q * q, released_count=n_released, flops=n_released * q * q + q**3
    )


def deletion_outcome(
    state: LinearStatisticsState,
    recipe: SSPRecipe | NoisyGDRecipe,
    n_features: int,
    delta: float,
    n_deleted: int,
    releases: tuple,
    n_deleted_total: int | None = None,
) -> DeletionOutcome:
    """What a deletion did, for its report, once ``state`` holds the re-release.

    From public sizes, the frozen parameters and released (charged) counts:
    the re-released Gram matrix's intercept entry (``'ssp'``) or noisy GD's
    noised count; ``'ssp'`` without intercept releases no count.

    Parameters
    ----------
    state : LinearStatisticsState
        After the deletion (``n_rereleases`` counts it).
    recipe : SSPRecipe or NoisyGDRecipe
    n_features : int
    delta : float
        The delta epsilons are stated at.
    n_deleted : int
        Rows the call removed (public: the caller named them).
    releases : tuple of Release
        The call's re-releases.
    n_deleted_total : int, default=None
        Rows deleted since the fit, this call's included (default
        ``n_deleted``): the group the kept private bounds are stated for.
    """
    params = state.frozen_params
    rho = float(params.get("rerelease_correlation", 0.0))
    q = n_features + 1 + params["fit_intercept"]
    if isinstance(recipe, NoisyGDRecipe | AMBSSGDRecipe):
        released_count = state.released_count
    elif params["fit_intercept"]:
        # The entry of released_sum(), summed over the nodes without copying them.
        nodes = state.statistics.nodes
        released_count = float(np.sum([node.noisy[n_features, n_features] for node in nodes]))
    else:
        released_count = None
    guarantee, deletion_epsilon, notes = EXACT_GUARANTEE, None, ()
    if rho > 0:
        kept = ()
        if getattr(state, "bounds", None) is not None:  # the estimated bounds' events
            kept = tuple(
                calibration_bounds(
                    n_features,
                    params["epsilon"],
                    auto_features=isinstance(params["feature_norm"], str),
                    auto_target=isinstance(params["target_bound"], str),
                    fit_intercept=params["fit_intercept"],
                ).events
            )
        said = correlated_statement(
            state.noise_multiplier, delta, state.n_rereleases, rho, kept_events=kept
        )
        guarantee += said.guarantee
        deletion_epsilon, notes = said.deletion_epsilon, said.notes
    if deletion_epsilon is None:
        deletion_delta = None
    else:
        deletion_delta = delta if rho > 0 else 0.0
    outcome = DeletionOutcome(
        guarantee=guarantee,
        cost=deletion_cost(recipe, q, n_deleted, len(releases), released_count),
        retrain_cost=retrain_cost(q, released_count),
        deletion_epsilon=deletion_epsilon,
        deletion_delta=deletion_delta,
        notes=notes,
    )
    bounds = getattr(state, "bounds", None)
    if bounds is None:
        return outcome
    total = n_deleted if n_deleted_total is None else n_deleted_total
    what = f"the release of the privately estimated bounds ({', '.join(published_bounds(bounds))})"
    return with_kept_release(outcome, what, bounds.epsilon, total)
