"""Differentially private least squares with exact deletion.

The estimator: its public API and the hooks of the release flow. The solver
is chosen once from the release recipe, then
:func:`~sklearn_dpu.linear_model._linear_solvers.solve_ssp` or
:func:`~sklearn_dpu.linear_model._linear_solvers.solve_noisy_gd` runs. What
each release is (its mechanisms, ledger record and reference) and what a
deletion costs are in :mod:`sklearn_dpu.linear_model._linear_releases`;
privately estimated bounds in :mod:`sklearn_dpu.linear_model._linear_bounds`.
"""

from dataclasses import replace
from functools import partial
from numbers import Integral, Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import DELTA_CONSTRAINT, HasMethods, Interval, StrOptions, _fit_context
from .._transaction import keep_attributes
from .._validation import INPUT_DTYPES, cast_outputs, nonfinite_x_reported_first, output_dtype
from ..base import PrivateEstimatorMixin, PublicSizes
from ..privacy.calibration import gaussian_noise_multiplier
from ..privacy.clipping import MAX_NORM_BOUND, MIN_NORM_BOUND, check_float32_bound
from ..privacy.ledger import Release, ReleasePlan
from ..privacy.random import release_generator
from ..unlearning.ids import deletion_request, requested_ids
from ..unlearning.report import DeletionOutcome, DeletionPlan
from ..unlearning.state import SampleRegistry
from ._correlated_rerelease import CorrelatedRerelease
from ._linear_bounds import (
    AUTO,
    auto_noise_multiplier,
    calibration_bounds,
    draw_bounds,
    published_bounds,
    rescale_features,
)
from ._linear_releases import (
    NoisyGDRecipe,
    SSPRecipe,
    correlated_release,
    deleted_exposure_entries,
    deletion_outcome,
    release_recipe,
    target_interval,
)
from ._linear_solvers import released_model
from ._linear_state import LinearStatisticsState
from ._sufficient_statistics import (
    encode_training_data,
    subtract_gram_of_codes,
    validate_training_data,
)

__all__ = ["DPLinearRegression", "LinearStatisticsState"]

# Parameters a partial_fit stream freezes at its first call.
_FROZEN = (
    "solver",
    "epsilon",
    "delta",
    "feature_norm",
    "target_bound",
    "fit_intercept",
    "alpha",
    "max_iter",
    "coef_bound",
    "rerelease_correlation",
)
_EXACT_REASON = "the sufficient statistics are exact integer sums: subtract, re-noise"
_BOUNDS_REASON = (
    _EXACT_REASON + "; the privately estimated bounds are an (eps_b, 0)-DP release, "
    "kept as they are"
)


def _gd_steps(params) -> int:
    """Gradient steps whose events the statistics' release records (0: SSP)."""
    return int(params["max_iter"]) if params["solver"] == "noisy_gd" else 0


def _auto(bound) -> bool:
    """Whether a ``feature_norm`` / ``target_bound`` value asks for private bounds."""
    return isinstance(bound, str) and bound == AUTO


class DPLinearRegression(PrivateEstimatorMixin, RegressorMixin, BaseEstimator):
    """Differentially private linear regression with certified or exact deletion.

    Rows are clipped to bounds, estimated privately by default (``"auto"``,
    see Notes) or public; the estimator then releases a
    differentially private model under the **add/remove-one** relation: for
    any data set and any one record added to or removed from it, the
    distribution of the released ``coef_`` and ``intercept_`` changes by at most
    ``(epsilon, delta)``.

    ``solver='ssp'`` (default) perturbs the sufficient statistics: Gaussian
    noise on the Gram matrix of the clipped, normalized rows
    ``u = (x / feature_norm, 1, (y - center) / half_range)``, whose per-record
    contribution has Frobenius norm ``||u||^2 <= 3``, then a ridge solve whose
    ridge lifts the released ``X^T X`` above the noise level (AdaSSP [2]_), so
    it cannot blow up at any epsilon. ``solver='noisy_gd'`` runs projected noisy
    gradient descent (dissertation Alg. 1 / Thm 8 [1]_, with the errata of its
    errata listed in the algorithms page) on the same statistics.
    ``solver='ambssgd'`` runs DP-AMBSSGD [6]_ (one pass of mini-batch SGD on
    privately whitened rows, each step's clip norm set by DP-STAT from the
    current residuals; see the algorithms page for the errata used).

    :meth:`partial_fit` streams chunks and releases after each one. With
    ``'ssp'`` the releases use the binary tree mechanism [3]_: after ``t``
    chunks each record has been in at most ``floor(log2 t) + 1`` noised sums,
    so ``privacy_spent_`` grows with ``log t``. With ``'noisy_gd'`` each call
    is a full release.

    :meth:`delete_samples` subtracts the rows' contribution from the secret
    integer statistics and re-releases the affected sums with fresh noise.
    With public bounds it is **exact**: afterwards the whole state
    (statistics, noise, stored rows) has the distribution of a fit on the
    remaining rows, and holds nothing of the deleted ones. With the default
    estimated bounds it is **certified**: the bounds are kept, an
    ``(eps_b, 0)``-DP release that saw the deleted rows, so the state is
    within ``k eps_b`` of such a fit for the ``k`` rows deleted since the fit
    (``deletion_epsilon``; at ``epsilon=1``, ``eps_b = 0.5``: refit when
    that is too large). Each re-release is accounted; a deletion is never
    refused for lack of budget.

    **What deleting costs the remaining rows.** Every :meth:`delete_samples`
    call is a new release to the rows that stay: with the default
    independent noise, ``k`` calls compose ``k + 1`` releases (at
    ``epsilon=1, delta=1e-5``: 1.0 after the fit, 1.25 after one call, 2.52
    after 10, 8.30 after 100 with the default estimated bounds, which are not
    re-released; 1.47, 3.8 and 14.5 with public bounds; see
    ``privacy_spent_``). Deleting many ids in
    one call costs one re-release. ``rerelease_correlation=rho`` slows the
    growth with re-release noise correlated to the previous release, at the
    price of a larger exposure of each deleted row (see the parameter and
    :mod:`sklearn_dpu.linear_model._correlated_rerelease`, on Gaussian DP
    [5]_).

    ``X`` may be a Dask array: rows are clipped, coded and summed block by
    block on the workers, and only the compact int16 codes (kept for
    deletion) and the Gram matrices come back.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy of one release (of ``fit``, of one ``partial_fit`` node, or of
        one deletion's re-release). ``privacy_spent_`` composes them all.
    delta : float, default=1e-5
        Use ``delta`` well below ``1 / n_samples``.
    feature_norm : float or "auto", default="auto"
        Public bound on the L2 norm of a feature row; longer rows are scaled
        down to it. A number, in ``[1e-150, 1e150]`` (its square must be a
        normal float64; ``[1e-30, 1e30]`` for float32 data, whose
        coefficients are float32), is never computed from the data (see
        :class:`~sklearn_dpu.preprocessing.PublicBoundsScaler`): the best
        choice when known. ``"auto"``: estimated privately from a share of
        ``epsilon`` (see Notes): per-feature centers and scales
        (``feature_center_``, ``feature_scale_``) when there are rows enough,
        else one row-norm bound (``feature_norm_``).
    target_bound : float, (float, float) or "auto", default="auto"
        Public range of the target: ``b`` means ``[-b, b]``; a pair is
        ``(low, high)``. Targets are clipped to it. With an intercept the model
        falls back to the range's midpoint when the noise drowns the data.
        ``"auto"``: estimate the range privately (``target_interval_``).
    fit_intercept : bool, default=True
    alpha : float, default=0.0
        Ridge penalty ``alpha * ||coef_||^2`` added to the squared error, in
        the units of ``X`` and ``y`` (as :class:`~sklearn.linear_model.Ridge`).
    solver : {"ssp", "noisy_gd", "ambssgd"}, default="ssp"
    max_iter : int, default=1000
        Gradient steps of ``solver='noisy_gd'``; cap on the blocks (steps)
        of ``solver='ambssgd'``, which takes ``floor(4 ln n~)`` of them
        (``n~`` its released count).
    coef_bound : float, default=5.0
        ``solver='noisy_gd'``: radius of the ball the normalized coefficients
        (those of the model from ``x / feature_norm`` to the normalized target,
        intercept included) are projected onto. Affects accuracy, not privacy.
    rerelease_correlation : float in [0, 1), default=0.0
        Correlation ``rho`` of a deletion's re-release noise with the previous
        release's (see above). 0: independent noise, each deletion call costs
        the remaining rows a full release. A larger ``rho`` slows the
        remaining rows' growth (at ``rho = 0.9``, 100 single deletions cost
        them about as much as 6 releases) but exposes each deleted row more
        (deleted after the fit: ``1 / (1 - rho^2) = 5.3`` times a release's
        precision at ``rho = 0.9``). ``privacy_spent_``, and the budget's
        charge, is the larger of the two: above ``rho = 1/2`` the deleted
        rows'. Measured with public bounds at ``epsilon=1, delta=1e-5`` after
        1, 10 and 100 single deletions: 1.47, 3.82, 14.52 at ``rho = 0``; 1.17, 2.25, 7.45
        at ``rho = 0.5`` (the best for one deletion); 2.51, 2.64, 3.72 at
        ``rho = 0.9`` (the best for 100 among 0.5 to 0.95). Needs
        ``solver='ssp'`` and no :meth:`partial_fit` after the fit. Frozen at
        fit.
    random_state : int, RandomState instance or None, default=None
        Source of noise. ``None`` draws fresh OS entropy for every release. An
        int makes fits reproducible and is for tests only: anyone who knows it
        can remove the noise.
    budget : PrivacyBudget, default=None
        Shared budget charged before each release; see
        :class:`~sklearn_dpu.privacy.PrivacyBudget`.
    verbose : int, default=0
        Progress on stdout: ``1`` prints, after each fit, chunk, deletion, the
        releases, ``n_iter_`` and the epsilon spent; ``2`` adds each release's record
        and the solver's steps (public schedule, epsilon composed so far; about ten
        lines a run, ``3``: every step). Never a loss, gradient, convergence test,
        record count or timing: public values only (:mod:`sklearn_dpu._progress`).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
        Gradient steps of the last release (1 for ``'ssp'``, a direct solve;
        for ``'ambssgd'`` its number of blocks, from its released count).
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of everything released, parallel composition over
        chunks included.
    privacy_ledger_ : list of dict
        Every release: mechanism, ``dp_accounting`` event, chunks, reference.
    deletion_log_ : list of DeletionReport
    unlearning_state_ : LinearStatisticsState
        The metadata that makes deletion and streaming possible.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.
    feature_center_, feature_scale_ : ndarray of shape (`n_features_in_`,)
        ``feature_norm="auto"``, per-feature design: the released centers
        (zeros without an intercept) and scales (DP releases).
    feature_norm_ : float
        ``feature_norm="auto"``, pooled design: the released row-norm bound.
    target_interval_ : (float, float)
        ``target_bound="auto"`` only: the released target range.

    Notes
    -----
    **Bounds you don't have to know** (the default). With
    ``feature_norm="auto"`` or ``target_bound="auto"``, a share ``eps_b =
    0.5 epsilon`` releases the bounds by private quantiles (the exponential
    mechanism over public geometric grids, Dwork & Roth Thm 3.10) and, for the
    features, a noisy count that chooses between one center and scale per
    feature (many rows) and one row-norm bound (few rows); together an
    ``(eps_b, 0)``-DP release. The Gaussian release of the statistics is
    calibrated so that both compose to at most ``(epsilon, delta)`` under
    the accountant; both are in ``privacy_ledger_`` and planned before the
    data are read. A deletion keeps the bounds and is *certified* at
    ``deletion_epsilon = k eps_b`` for the ``k`` rows deleted since the fit
    (group privacy); a stream keeps the bounds of its first fit. On a Dask
    array the selections' counts are made block by block on the workers.

    See Also
    --------
    sklearn.linear_model.LinearRegression : the non-private estimator.
    sklearn_dpu.preprocessing.PublicBoundsScaler : scaling with public bounds.

    References
    ----------
    .. [1] M. E. Ullah, "Statistical learning via stochastic optimization under
       data privacy considerations", PhD thesis, Johns Hopkins University,
       2024, Algorithm 1 and Theorem 8.
    .. [2] Y.-X. Wang, "Revisiting differentially private linear regression",
       UAI 2018, Algorithm 2 (AdaSSP).
    .. [3] T.-H. H. Chan, E. Shi and D. Song, "Private and continual release of
       statistics", ACM TISSEC 2011.
    .. [4] B. Balle and Y.-X. Wang, "Improving the Gaussian mechanism for
       differential privacy", ICML 2018.
    .. [5] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy",
       JRSS-B 2022, Thm 2.7 and Cor. 3.3 (the correlated re-release bound is
       our derivation from them).
    .. [6] P. Varshney, A. Thakurta and P. Jain, "(Nearly) optimal private
       linear regression via adaptive clipping", COLT
       2022, Algorithms 2 and 3.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dpu.linear_model import DPLinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(20000, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=20000)
    >>> reg = DPLinearRegression(epsilon=1.0, feature_norm=np.sqrt(3),
    ...                          target_bound=4.0, random_state=0).fit(X, y)
    >>> np.round(reg.coef_, 1)
    array([ 1. , -2. ,  0.5])
    >>> reg = reg.delete_samples([0, 1, 2])
    >>> reg.deletion_log_[-1].method
    'exact'
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [DELTA_CONSTRAINT],
        "feature_norm": [
            Interval(Real, MIN_NORM_BOUND, MAX_NORM_BOUND, closed="both"),
            StrOptions({AUTO}),
        ],
        "target_bound": [
            Interval(Real, 0, None, closed="neither"),
            tuple,
            list,
            StrOptions({AUTO}),
        ],
        "fit_intercept": ["boolean"],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"ssp", "noisy_gd", "ambssgd"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "coef_bound": [Interval(Real, 0, None, closed="neither")],
        "rerelease_correlation": [Interval(Real, 0, 1, closed="left")],
        "random_state": ["random_state"],
        "budget": [HasMethods(["charge", "check"]), None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        feature_norm="auto",
        target_bound="auto",
        fit_intercept=True,
        alpha=0.0,
        solver="ssp",
        max_iter=1000,
        coef_bound=5.0,
        rerelease_correlation=0.0,
        random_state=None,
        budget=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.feature_norm = feature_norm
        self.target_bound = target_bound
        self.fit_intercept = fit_intercept
        self.alpha = alpha
        self.solver = solver
        self.max_iter = max_iter
        self.coef_bound = coef_bound
        self.rerelease_correlation = rerelease_correlation
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # At the default epsilon = 1 the noise on 200 rows (the size of
        # scikit-learn's check data) keeps R^2 below the 0.5 the check asks.
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, *, sample_id: ArrayLike | None = None) -> Self:
        """Fit on ``(X, y)``: one private release.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Dense (or a Dask array): the stored rows and the exact Gram matrix
            are a dense fixed-point code, so ``scipy.sparse`` input raises
            ``TypeError`` (convert with ``.toarray()`` if it fits in memory).
        y : array-like of shape (n_samples,)
        sample_id : array-like of shape (n_samples,), default=None
            Unique hashable ids for :meth:`delete_samples` (no NaN). Default:
            the index labels if ``X`` is a pandas DataFrame, else row positions
            ``0 .. n_samples - 1``.

        Returns
        -------
        self : DPLinearRegression
        """
        with self._atomic():
            return self._fit(X, y, requested_ids(X, sample_id))

    def _fit(self, X, y, sample_id):
        if self.rerelease_correlation > 0 and self.solver != "ssp":
            raise ValueError(
                "rerelease_correlation > 0 needs solver='ssp' (the noisy-GD release is "
                f"not one Gaussian statistic); got solver={self.solver!r}"
            )
        auto_features, auto_target = _auto(self.feature_norm), _auto(self.target_bound)
        auto = auto_features or auto_target
        target = (
            (None, None) if auto_target else target_interval(self.target_bound, self.fit_intercept)
        )
        frozen = {name: getattr(self, name) for name in _FROZEN}
        recipe = None if auto else self._recipe(frozen)

        def validate():
            # Public bounds: the encoding is the pass that checks X is finite.
            validated = partial(validate_training_data, self, X, y, reset=True)
            with nonfinite_x_reported_first(validated):
                X_, y_, n_rows = validated(finite=auto)
                check_float32_bound(X_, self.feature_norm)
                encoded = None if auto else self._encode(X_, y_, self.feature_norm, *target)
            registry = SampleRegistry(self.n_features_in_ + 1)
            ids = registry.default_ids(n_rows) if sample_id is None else sample_id
            return X_, y_, registry, registry.check_new_ids(ids, n_rows), encoded

        def compute(data):
            X_, y_, registry, ids, encoded = data
            self._output_dtype = output_dtype(X_)
            fit_recipe, bounds, releases = recipe, None, []
            center, half_range = target
            feature_norm = self.feature_norm
            if auto:
                # The bounds are the fit's first release, drawn from its own generator;
                # the ledger holds the design that dominates the one drawn.
                kinds = dict(auto_features=auto_features, auto_target=auto_target)
                kinds["fit_intercept"] = self.fit_intercept
                rng = release_generator(self.random_state, 0)
                bounds = draw_bounds(X_, y_, self.epsilon, rng, **kinds)
                upper = calibration_bounds(X_.shape[1], self.epsilon, **kinds)
                releases.append(upper.release())
                steps = _gd_steps(frozen)
                multiplier = auto_noise_multiplier(upper, self.epsilon, self.delta, steps)
                fit_recipe = self._recipe(frozen, multiplier)
                if auto_target:
                    center, half_range = bounds.target_center, bounds.target_half_range
                if bounds.feature_scale is not None:
                    X_ = rescale_features(X_, bounds.feature_center, bounds.feature_scale)
                if auto_features:
                    feature_norm = bounds.row_norm
            codes, gram = encoded or self._encode(X_, y_, feature_norm, center, half_range)
            registry.add(ids, codes, chunk=1, adopt=True)
            state = LinearStatisticsState(
                registry, None, None, frozen, center, half_range, fit_recipe.noise_multiplier
            )
            if auto:
                state.bounds, state.feature_norm = bounds, feature_norm
            rng = release_generator(self.random_state, len(releases))
            if isinstance(fit_recipe, SSPRecipe):
                state.statistics = fit_recipe.new_tree()
                node = state.statistics.append(gram, rng)
                if self.rerelease_correlation > 0:
                    # Keep the noise draw itself: the next re-release's noise is
                    # built from it (a fresh fit has its own draw, so the state's
                    # law is unchanged).
                    state.release_noise = state.statistics.draw_noise(gram.shape, rng)
                    state.statistics.set_noise(node, state.release_noise)
            else:
                state.exact_gram = gram
            self.unlearning_state_ = state
            self._publish_bounds(bounds)
            self._release(state, fit_recipe, rng)
            self.deletion_log_ = []
            releases.append(fit_recipe.release(1, 1))
            return releases

        plan = self._plan_releases(self.get_params(deep=False), PublicSizes.of(X))
        self._run_update("fit", plan, validate, compute, PublicSizes.of(X))
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(
        self, X: ArrayLike, y: ArrayLike, *, sample_id: ArrayLike | None = None
    ) -> Self:
        """Add a chunk of rows and release the updated model.

        The first call fits; later calls keep the parameters of the first
        (changing one raises ``ValueError``; call :meth:`fit` to restart).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_id : array-like of shape (n_samples,), default=None
            Default: the index labels if ``X`` is a pandas DataFrame, else row
            positions continuing those of earlier calls (not mixed in a stream).

        Returns
        -------
        self : DPLinearRegression
        """
        if not hasattr(self, "unlearning_state_"):
            return self.fit(X, y, sample_id=sample_id)
        with self._atomic():
            return self._partial_fit(X, y, requested_ids(X, sample_id))

    def _partial_fit(self, X, y, sample_id):
        state = self.unlearning_state_
        changed = self._changed_params(state.frozen_params)
        if changed:
            raise ValueError(
                f"partial_fit cannot change {', '.join(changed)} within a stream; "
                "call fit to start a new one"
            )
        if state.frozen_params.get("rerelease_correlation", 0.0) > 0:
            raise ValueError(
                "partial_fit cannot stream with rerelease_correlation > 0: the correlated "
                "re-release bound covers a single fit; call fit with "
                "rerelease_correlation=0 to stream"
            )
        recipe = self._recipe(state.frozen_params, state.noise_multiplier)
        chunk = state.n_chunks + 1
        # The tree node this chunk completes (a noisy-GD run uses every chunk).
        first = chunk - (chunk & -chunk) + 1 if isinstance(recipe, SSPRecipe) else 1
        registry = state.registry

        def validate():
            X_, y_, n_rows = validate_training_data(self, X, y, reset=False)
            check_float32_bound(X_, self.feature_norm)
            ids = registry.default_ids(n_rows) if sample_id is None else sample_id
            return X_, y_, registry.check_new_ids(ids, n_rows)

        def compute(data):
            X_, y_, ids = data
            bounds, feature_norm = state.bounds, state.frozen_params["feature_norm"]
            if bounds is not None and bounds.feature_scale is not None:
                X_ = rescale_features(X_, bounds.feature_center, bounds.feature_scale)
            if state.feature_norm is not None:
                feature_norm = state.feature_norm
            codes, gram = self._encode(X_, y_, feature_norm, state.center, state.half_range)
            rng = release_generator(self.random_state, len(self.privacy_ledger_))
            registry.add(ids, codes, chunk=chunk)
            if isinstance(recipe, SSPRecipe):
                state.statistics.append(gram, rng)
            else:
                state.exact_gram = state.exact_gram + gram
            state.n_chunks = chunk
            self._release(state, recipe, rng)

        plan = ReleasePlan((recipe.release(first, chunk),))
        self._run_update("partial_fit", plan, validate, compute)
        return self

    # ------------------------------------------------------------- deletion

    def delete_samples(self, sample_ids: Any) -> Self:
        """Remove samples from the statistics and re-release the model with fresh noise.

        Exact with public bounds; certified with estimated ones (the kept
        bounds are within ``k eps_b`` for the ``k`` rows deleted since the
        fit): the report's ``method`` and ``deletion_epsilon`` say which.

        Parameters
        ----------
        sample_ids : hashable or iterable of hashable
            Ids known at fit time: ``sample_id``, else a DataFrame's index
            labels, else row positions. A bare string or scalar is one id.

        Returns
        -------
        self : DPLinearRegression

        Raises
        ------
        UnlearningError
            An id is unknown, already deleted or repeated, or every sample
            would be deleted. Nothing changes.
        """
        check_is_fitted(self)
        frozen = self.unlearning_state_.frozen_params  # not a later set_params
        with self._atomic(), self._frozen_params_in_effect(frozen):
            return self._delete_samples(deletion_request(self, sample_ids))

    def _delete_samples(self, sample_ids):
        state = self.unlearning_state_
        registry = state.registry
        slots = registry.slots_of(sample_ids)  # raises on a bad id: nothing changed
        chunks = registry.chunks_of(slots)
        rho = float(state.frozen_params.get("rerelease_correlation", 0.0))
        fit_intercept = state.frozen_params["fit_intercept"]
        recipe = self._recipe(state.frozen_params, state.noise_multiplier)
        # Plan from public quantities: the chunks the ids arrived in, the
        # number of re-releases so far.
        nodes = []
        if isinstance(recipe, SSPRecipe):
            for chunk in np.unique(chunks).tolist():
                node = state.statistics.node_of(chunk)
                if all(node is not other for other in nodes):
                    nodes.append(node)
            ranges = [(node.first, node.last) for node in nodes]
        else:
            ranges = [(1, state.n_chunks)]
        k = state.n_rereleases + 1
        accounting = ()
        if rho > 0:  # a single fit: one node
            rerelease = CorrelatedRerelease(state.statistics.mechanism, rho)
            releases = (correlated_release(rerelease, k, state.n_chunks),)
            accounting = deleted_exposure_entries(rerelease, k)
            if k == 1 and state.bounds is not None:  # the deleted rows were in them too
                bounds_release = Release.from_dict(self.privacy_ledger_[0])
                accounting = (replace(bounds_release, chunks=(0, 0)), *accounting)
        else:
            releases = tuple(recipe.release(first, last) for first, last in ranges)
        if state.bounds is None:
            plan = DeletionPlan("exact", releases, _EXACT_REASON, accounting)
        else:
            plan = DeletionPlan("certified", releases, _BOUNDS_REASON, accounting)

        def execute() -> DeletionOutcome:
            rng = release_generator(self.random_state, len(self.privacy_ledger_))
            removed = registry.rows[slots]
            # Every in-place edit below is undone if the call fails (_atomic):
            # the registry's removal, the Gram's subtraction (added back), the
            # state's and nodes' fields.
            keep_attributes(state)
            registry.remove(slots)
            for node in nodes:
                # renoise puts the new release in another buffer: the old one
                # comes back with the node's attributes
                keep_attributes(node)
                inside = (chunks >= node.first) & (chunks <= node.last)
                subtract_gram_of_codes(node.exact, removed[inside], fit_intercept)
                if rho > 0:
                    state.release_noise = rerelease.noise(state.release_noise, rng)
                    state.statistics.set_noise(node, state.release_noise)
                else:
                    state.statistics.renoise(node, rng)
            if not isinstance(recipe, SSPRecipe):
                subtract_gram_of_codes(state.exact_gram, removed, fit_intercept)
            del removed
            state.n_rereleases += 1
            self._release(state, recipe, rng)
            total = self._n_deleted_since_fit(len(slots))
            return deletion_outcome(
                state, recipe, self.n_features_in_, self.delta, len(slots), releases, total
            )

        self._run_deletion(len(slots), plan, execute)
        return self

    # ----------------------------------------------------------- prediction

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predict with the released model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=INPUT_DTYPES, reset=False)
        return X @ self.coef_ + self.intercept_

    # ------------------------------------------------------------- internals

    def _plan_releases(self, params, sizes: PublicSizes) -> ReleasePlan:
        """The releases of one fit with ``params``, on chunk 1.

        With public bounds: one release of the recipe ``params`` make
        (``sizes`` unused). With ``"auto"`` bounds: the bounds release, then
        the statistics' release calibrated so that both compose to at most
        ``(epsilon, delta)``; the bounds are recorded as the design that
        dominates whichever one the noisy count chooses
        (:func:`calibration_bounds`), so the plan is exactly what a fit
        charges.
        """
        auto_features, auto_target = _auto(params["feature_norm"]), _auto(params["target_bound"])
        if not (auto_features or auto_target):
            return ReleasePlan((self._recipe(params).release(1, 1),), restart=True)
        epsilon, delta = float(params["epsilon"]), float(params["delta"])
        upper = calibration_bounds(
            sizes.n_features or 1,
            epsilon,
            auto_features=auto_features,
            auto_target=auto_target,
            fit_intercept=params["fit_intercept"],
        )
        multiplier = auto_noise_multiplier(upper, epsilon, delta, _gd_steps(params))
        recipe = self._recipe(params, multiplier)
        return ReleasePlan((upper.release(), recipe.release(1, 1)), restart=True)

    def _recipe(self, params, noise_multiplier: float | None = None) -> SSPRecipe | NoisyGDRecipe:
        """The mechanisms of one release with ``params`` (calibrated from their
        epsilon and delta unless a stream's ``noise_multiplier`` is given)."""
        if noise_multiplier is None:
            noise_multiplier = gaussian_noise_multiplier(params["epsilon"], params["delta"])
        return release_recipe(
            params["solver"],
            noise_multiplier,
            fit_intercept=params["fit_intercept"],
            max_iter=params["max_iter"],
            coef_bound=params["coef_bound"],
        )

    def _encode(self, X, y, feature_norm, center, half_range):
        return encode_training_data(X, y, feature_norm, center, half_range, self.fit_intercept)

    def _publish_bounds(self, bounds) -> None:
        """Publish the released bounds (DP releases); a public bound publishes nothing."""
        for name in ("feature_center_", "feature_scale_", "feature_norm_", "target_interval_"):
            self.__dict__.pop(name, None)
        self.__dict__.update(published_bounds(bounds))

    def _release(self, state: LinearStatisticsState, recipe, rng) -> None:
        """Set ``coef_`` and ``intercept_`` from the state (post-processing of
        the released statistics, or a noisy-GD run drawing from ``recipe``;
        :func:`~sklearn_dpu.linear_model._linear_solvers.released_model`)."""
        model = released_model(state, recipe, self.n_features_in_, rng)
        self.coef_, self.intercept_, self.n_iter_ = model
        cast_outputs(self)  # float32 in, float32 out (LinearRegression's)
