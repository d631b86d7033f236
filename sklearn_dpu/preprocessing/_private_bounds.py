"""Feature scaling with privately estimated bounds: a small, charged share of epsilon."""

from collections.abc import Mapping
from numbers import Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import DELTA_CONSTRAINT, HasMethods, Interval, _fit_context
from .._validation import INPUT_DTYPES
from ..base import PrivateEstimatorMixin, PublicSizes
from ..privacy.ledger import ApproximateDPBound, Release, ReleasePlan
from ..privacy.quantiles import (
    GeometricGrid,
    column_mechanisms,
    private_column_quantiles,
)
from ..privacy.random import release_generator
from ..unlearning.ids import check_request
from ..unlearning.report import DeletionCost, DeletionOutcome, DeletionPlan

__all__ = ["PrivateBoundsScaler"]

_REFERENCE = (
    "exponential mechanism (Dwork & Roth 2014, Thm 3.10) with a rank utility on the "
    "cells of the grid, -dist(q n, rank interval of the cell), of add/remove sensitivity "
    "max(q, 1 - q) (after Smith 2011; "
    "Gillenwater, Joseph & Kulesza 2021) over a public geometric grid; one selection per "
    "column at epsilon / n_columns, basic composition (Dwork & Roth 2014, Thm 3.16)"
)

_GUARANTEE = (
    "certified: the released scales (and centers) are an (epsilon, 0)-DP release, so by "
    "group privacy their distribution is within (k * epsilon, 0) of a fit without the "
    "k rows deleted so far (deletion_epsilon, this call's included); nothing else was "
    "learned from the data and no row is stored, so nothing changes and nothing is "
    "re-released"
)

_IDS_NOTE = (
    "the ids were not checked: this scaler stores no rows and no ids, so it cannot tell "
    "an unknown or already deleted id from a known one; the guarantee holds for whichever "
    "rows the ids name, and k counts every id requested so far (an id requested twice "
    "counts twice, which only overstates deletion_epsilon)"
)


class PrivateBoundsScaler(
    PrivateEstimatorMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator
):
    """Scale each feature onto ``[-1, 1]`` by privately estimated bounds.

    The private counterpart of
    :class:`~sklearn_dpu.preprocessing.PublicBoundsScaler`, for when no
    public bounds are known. :meth:`fit` releases, for each feature ``j``, a
    scale ``scale_[j]``: a private ``quantile`` of ``|x_j - center_[j]|``,
    chosen by the exponential mechanism over the public geometric grid
    ``lower * ratio**k`` up to ``upper`` (:mod:`sklearn_dpu.privacy.quantiles`).
    With ``center=True`` a private median of each feature (over the signed
    grid) is released first and subtracted. :meth:`transform` maps
    ``(x - center_) / scale_`` and clips it to ``[-1, 1]``, so a transformed
    row has L2 norm at most ``sqrt(n_features)``: ``feature_norm_``, the
    public ``feature_norm`` for the estimator that follows.

    **Privacy** (add/remove one record): the release is ``(epsilon, 0)``-DP.
    Each of the ``n_features`` selections (``2 * n_features`` with
    ``center=True``) reads every record, so they share ``epsilon`` equally and
    compose (basic composition); each is the exponential mechanism
    (Dwork & Roth, Thm 3.10) on a rank utility of sensitivity
    ``max(quantile, 1 - quantile)``. ``privacy_spent_`` states the composed
    events at ``delta``, which can be slightly below ``epsilon``.

    **Accuracy**: each selection is within a grid step (a factor ``ratio``)
    of the true quantile when the rank error ``~ 2 max(q, 1-q) ln(m) /
    (epsilon / n_selections)`` (``m`` candidates) is small next to the
    number of rows; on a few hundred rows with ``epsilon=0.1`` and ten
    features it is not, and the scales are close to random grid values.
    Raise ``epsilon``, narrow ``[lower, upper]`` or coarsen ``ratio``.

    **Deletion**: :meth:`delete_samples` is *certified*: the scales are an
    ``(epsilon, 0)``-DP release, so by group privacy (Dwork & Roth, Thm 2.2)
    they are within ``(k epsilon, 0)`` of a fit without the ``k`` rows deleted
    so far, which the report states as ``deletion_epsilon`` (``n_deleted_``
    counts ``k``). Nothing is re-released and nothing is charged. The scaler
    stores no rows and no ids, so it does not check the ids: it cannot tell
    an unknown id from a known one (the report says so); through
    :func:`sklearn_dpu.unlearning.delete_samples` the steps that keep ids
    check them before any step deletes. Once ``k epsilon`` is large, refit.

    Parameters
    ----------
    epsilon : float, default=0.1
        Privacy of the whole release (every feature's scale and center).
    delta : float, default=1e-5
        The delta at which ``privacy_spent_`` and a shared budget state the
        composed epsilon (the release itself is pure DP).
    quantile : float, default=0.95
        Quantile of ``|x_j - center_j|`` used as the scale: about a share
        ``1 - quantile`` of values is clipped.
    lower, upper : float, default=1e-3, 1e6
        Public limits of the grid of scales (and of ``|center|``). A true
        quantile outside them is released as the nearest limit. ``upper`` is
        at most ``1e150``.
    ratio : float, default=2.0
        Ratio between neighbouring grid values (the relative resolution). A
        coarser grid has fewer candidates and is more accurate at small
        epsilon.
    center : bool, default=True
        Release a private median of each feature (half of ``epsilon``) and
        subtract it before scaling. Keep it for features not centred at 0
        (all-positive measurements): without it, the scale is set by the
        offset and the spread is lost.
    random_state : int, RandomState instance or None, default=None
        Source of noise. An int is for tests only.
    budget : PrivacyBudget, default=None
        Shared budget charged before the release.

    Attributes
    ----------
    scale_ : ndarray of shape (n_features,)
        The released scales (DP releases).
    center_ : ndarray of shape (n_features,)
        The released medians (``center=True``), else zeros.
    feature_norm_ : float
        ``sqrt(n_features)``: a public bound on the L2 norm of a transformed
        row.
    privacy_ledger_ : list of dict
    privacy_spent_ : PrivacySpent
    deletion_log_ : list of DeletionReport
    n_deleted_ : int
        Ids requested for deletion since the fit (the ``k`` of group privacy).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.

    See Also
    --------
    sklearn_dpu.preprocessing.PublicBoundsScaler : scaling by public bounds, free.

    References
    ----------
    .. [1] C. Dwork and A. Roth, "The algorithmic foundations of differential
       privacy", 2014, Theorem 3.10 (exponential mechanism) and Theorem 3.16
       (basic composition).
    .. [2] A. Smith, "Privacy-preserving statistical estimation with optimal
       convergence rates", STOC 2011.
    .. [3] J. Gillenwater, M. Joseph and A. Kulesza, "Differentially private
       quantiles", ICML 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dpu.preprocessing import PrivateBoundsScaler
    >>> X = np.random.default_rng(0).normal(0, [1.0, 100.0], size=(5000, 2))
    >>> scaler = PrivateBoundsScaler(epsilon=1.0, random_state=0).fit(X)
    >>> scaler.scale_
    array([  2.048, 262.144])
    >>> float(np.abs(scaler.transform(X)).max())
    1.0
    >>> scaler.privacy_spent_.epsilon <= 1.0
    True
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [DELTA_CONSTRAINT],
        "quantile": [Interval(Real, 0, 1, closed="both")],
        "lower": [Interval(Real, 0, None, closed="neither")],
        # |x - center| must stay finite for every finite x: |center| <= upper
        "upper": [Interval(Real, 0, 1e150, closed="right")],
        "ratio": [Interval(Real, 1, None, closed="neither")],
        "center": ["boolean"],
        "random_state": ["random_state"],
        "budget": [HasMethods(["charge", "check"]), None],
    }

    def __init__(
        self,
        *,
        epsilon=0.1,
        delta=1e-5,
        quantile=0.95,
        lower=1e-3,
        upper=1e6,
        ratio=2.0,
        center=True,
        random_state=None,
        budget=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.quantile = quantile
        self.lower = lower
        self.upper = upper
        self.ratio = ratio
        self.center = center
        self.random_state = random_state
        self.budget = budget

    # ------------------------------------------------------------ planning

    @staticmethod
    def _grids(params: Mapping[str, Any]) -> tuple[GeometricGrid, GeometricGrid]:
        """The public grids of scales and of centers."""
        lower, upper, ratio = params["lower"], params["upper"], params["ratio"]
        return (
            GeometricGrid(lower, upper, ratio),
            GeometricGrid(lower, upper, ratio, signed=True),
        )

    @classmethod
    def _mechanisms(cls, params: Mapping[str, Any], n_features: int) -> tuple[tuple, tuple]:
        """The center and scale mechanisms of one fit (epsilon shared equally)."""
        scales_grid, centers_grid = cls._grids(params)
        epsilon = float(params["epsilon"])
        if not params["center"]:
            return (), column_mechanisms(n_features, epsilon, params["quantile"], scales_grid)
        half = epsilon / 2.0
        return (
            column_mechanisms(n_features, half, 0.5, centers_grid),
            column_mechanisms(n_features, half, params["quantile"], scales_grid),
        )

    @staticmethod
    def _release_of(centers: tuple, scales: tuple) -> Release:
        what = (
            f"private quantile {scales[0].quantile:g} of |x_j| for each of {len(scales)} features"
        )
        if centers:
            what = f"private median and {what} (after centering)"
        return Release.of([*centers, *scales], what, (1, 1), _REFERENCE)

    def _plan_releases(self, params: Mapping[str, Any], sizes: PublicSizes) -> ReleasePlan:
        """One release of ``epsilon``; its events (one per feature) need ``n_features``."""
        if sizes.n_features is not None:
            centers, scales = self._mechanisms(params, sizes.n_features)
            return ReleasePlan((self._release_of(centers, scales),), restart=True)
        bound = ApproximateDPBound(
            float(params["epsilon"]), 0.0, "private feature scales (pure epsilon-DP)"
        )
        return ReleasePlan((), bounds=(bound,), restart=True)

    # ----------------------------------------------------------------- fit

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: None = None) -> Self:
        """Release the private scales (and centers) of ``X``'s features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : PrivateBoundsScaler
        """
        params = self.get_params(deep=False)
        self._grids(params)  # bad limits fail before anything else
        plan = self._plan_releases(params, PublicSizes.of(X))

        def validate():
            return validate_data(self, X, dtype=np.float64)

        def compute(X):
            centers, scales = self._mechanisms(params, X.shape[1])
            rng = release_generator(self.random_state, 0)
            center = np.zeros(X.shape[1])
            if centers:
                center = private_column_quantiles(X, centers, rng)
            self.center_ = center
            self.scale_ = private_column_quantiles(np.abs(X - center), scales, rng)
            self.feature_norm_ = float(np.sqrt(X.shape[1]))
            self.deletion_log_ = []
            self.n_deleted_ = 0
            self._released_epsilon = float(params["epsilon"])
            self._fit_delta = float(params["delta"])  # what privacy_spent_ is stated at
            return [self._release_of(centers, scales)]

        with self._atomic():
            self._run_update("fit", plan, validate, compute, PublicSizes.of(X))
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Map ``(X - center_) / scale_`` and clip it to ``[-1, 1]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self, "scale_")
        X = validate_data(self, X, dtype=INPUT_DTYPES, reset=False)
        # computed in float64, returned in the input's dtype (as PublicBoundsScaler)
        scaled = (np.asarray(X, dtype=np.float64) - self.center_) / self.scale_
        return np.clip(scaled, -1.0, 1.0).astype(X.dtype, copy=False)

    # ------------------------------------------------------------ deletion

    def delete_samples(self, sample_ids: Any) -> Self:
        """Certified deletion: the scales stay, within ``k epsilon`` of a refit
        without the ``k`` rows deleted so far.

        Parameters
        ----------
        sample_ids : hashable or iterable of hashable
            Not checked against the training set (the scaler stores no ids);
            only their form is checked (non-empty, hashable, distinct).

        Returns
        -------
        self : PrivateBoundsScaler

        Raises
        ------
        UnlearningError
            No ids, unhashable or repeated ids. Nothing changes.
        """
        check_is_fitted(self, "scale_")
        ids = check_request(sample_ids)  # the form only: no id is stored
        plan = DeletionPlan(
            "certified",
            releases=(),
            reason="the scales are a pure epsilon-DP release and no row is stored",
        )
        # Group privacy (Dwork & Roth 2014, Thm 2.2): an epsilon-DP release is
        # (k epsilon, 0)-DP for groups of k records; k counts every deletion
        # since the fit, whose epsilon (not the current parameter) applies.
        n_deleted = self.n_deleted_ + len(ids)
        epsilon = n_deleted * self._released_epsilon

        def execute():
            self.n_deleted_ = n_deleted
            return DeletionOutcome(
                guarantee=_GUARANTEE,
                cost=DeletionCost(flops=0.0),
                retrain_cost=DeletionCost(flops_per_row=float(self.n_features_in_)),
                deletion_epsilon=epsilon,
                deletion_delta=0.0,
                notes=(_IDS_NOTE,),
            )

        with self._atomic():
            self._run_deletion(len(ids), plan, execute)
        return self
