"""Differentially private hyper-parameter search."""

import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import ParameterGrid
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted, indexable

from .._compat import HasMethods, Interval, _fit_context
from ..base import PrivateEstimatorMixin
from ..exceptions import UnlearningError
from ..privacy.accounting import epsilon_spent, group_events
from ..privacy.ledger import Release, event_from_dict
from ..privacy.mechanisms import GeneralizedExponentialMechanism, PermuteAndFlip
from ..privacy.random import release_generator
from ..unlearning.ids import as_id_list, requested_ids
from ..unlearning.report import DeletionReport

__all__ = ["PrivateGridSearch"]

_TRAIN, _VALIDATION = 1, 2  # the search's two "chunks": disjoint halves of the data
_GEM_REFERENCE = (
    "Ullah 2024 (seed 000) Alg. 4 / Thm 14 with the generalized exponential mechanism "
    "(Raskhodnikova & Smith 2016; Thm 34, line 2796); sensitivities per erratum "
    "'GenExpMech sensitivities' of digest diss_dp.md"
)
_PF_REFERENCE = "permute-and-flip, McKenna & Sheldon 2020, Thm 1 (monotone utilities)"


def _estimator_has(name):
    def check(self):
        if hasattr(self, "best_estimator_"):
            return hasattr(self.best_estimator_, name)
        return hasattr(self.estimator, name)

    return check


def _loss_bound(estimator) -> tuple[str, float, object]:
    """The bounded validation loss of a candidate: (name, bound, clip interval)."""
    if is_classifier(estimator):
        return "zero-one loss", 1.0, None
    params = estimator.get_params()
    if "target_bound" in params:
        bound = params["target_bound"]
        if isinstance(bound, tuple | list):
            low, high = (float(v) for v in bound)
        else:
            low, high = -float(bound), float(bound)
        return "squared error", (high - low) ** 2, (low, high)
    raise ValueError(
        f"PrivateGridSearch needs a bounded validation loss; {type(estimator).__name__} is "
        "neither a classifier nor a regressor with a target_bound parameter"
    )


def _fit_candidate(estimator, X, y, sample_id):
    return estimator.fit(X, y, sample_id=sample_id)


class PrivateGridSearch(PrivateEstimatorMixin, MetaEstimatorMixin, BaseEstimator):
    """Choose hyper-parameters of a private estimator, privately.

    An exhaustive search over ``param_grid`` in the form of Ullah's private
    grid search (dissertation Alg. 4 / Thm 14 [1]_): each row of the data is
    assigned at random to a training part or a validation part; every
    candidate is trained privately on the training part; each candidate's
    validation loss, clipped to a public bound, is summed over the validation
    part; and one candidate is chosen by a differentially private selection:
    permute-and-flip [2]_ when all candidates share a loss bound, the
    generalized exponential mechanism [3]_ when they do not (a candidate
    with a wider target range must not drown the others' scores).

    Because a record falls in only one part, the search is private with the
    larger, not the sum, of the training cost (all candidates composed) and
    the selection cost (``selection_epsilon``) under add/remove neighbours.
    No validation score is published: ``cv_results_`` lists the candidates and
    their privacy cost only.

    The selected candidate, fitted on the training part, is ``best_estimator_``
    (no refit on all the data, which would cost another release and break
    the disjointness). :meth:`delete_samples` deletes through it; the choice of
    hyper-parameters is not recomputed, and the deletion report states what
    it retains of the deleted samples: as much as differential privacy allows.

    Parameters
    ----------
    estimator : estimator
        A private sklearn_dpu estimator (classifier, or regressor with a
        ``target_bound``), with its own ``epsilon``.
    param_grid : dict or list of dict
        As in :class:`~sklearn.model_selection.GridSearchCV`.
    selection_epsilon : float, default=1.0
        Pure-DP epsilon of the selection.
    validation_fraction : float, default=0.5
        Probability that a row goes to the validation part.
    beta : float, default=0.05
        Failure probability of the utility guarantee of the generalized
        exponential mechanism (not of privacy).
    n_jobs : int, default=None
        Candidates fitted in parallel.
    random_state : int, RandomState instance or None, default=None
        Source of the split, the candidates' noise and the selection. An int
        is for tests only.
    budget : PrivacyBudget, default=None
        Charged for the selection; candidates charge their own ``budget``.

    Attributes
    ----------
    best_estimator_ : estimator
    best_params_ : dict
    best_index_ : int
    cv_results_ : dict
        ``params``, ``param_<name>`` and each candidate's ``epsilon_spent``.
    n_candidates_ : int
    privacy_ledger_ : list of dict
    privacy_spent_ : PrivacySpent
    deletion_log_ : list of DeletionReport
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined only when ``X`` has string feature names.
    classes_ : ndarray
        For classifiers.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : the non-private search, whose
        exact cross-validation scores are themselves a privacy leak.

    References
    ----------
    .. [1] M. E. Ullah, PhD thesis, JHU 2024 (seed 000), Algorithm 4,
       Theorem 14 (lines 1016-1061).
    .. [2] R. McKenna and D. Sheldon, "Permute-and-flip", NeurIPS 2020.
    .. [3] S. Raskhodnikova and A. Smith, FOCS 2016, as Thm 34 of [1]_.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dpu.linear_model import DPLinearRegression
    >>> from sklearn_dpu.model_selection import PrivateGridSearch
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(4000, 2))
    >>> y = X @ [0.5, -0.5]
    >>> search = PrivateGridSearch(
    ...     DPLinearRegression(feature_norm=1.5, target_bound=1.0),
    ...     {"alpha": [0.0, 1e5]}, random_state=0).fit(X, y)
    >>> search.best_params_
    {'alpha': 0.0}
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "delete_samples"])],
        "param_grid": [dict, list],
        "selection_epsilon": [Interval(Real, 0, None, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "beta": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "budget": [HasMethods(["charge", "check"]), None],
    }

    def __init__(
        self,
        estimator,
        param_grid,
        *,
        selection_epsilon=1.0,
        validation_fraction=0.5,
        beta=0.05,
        n_jobs=None,
        random_state=None,
        budget=None,
    ):
        self.estimator = estimator
        self.param_grid = param_grid
        self.selection_epsilon = selection_epsilon
        self.validation_fraction = validation_fraction
        self.beta = beta
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.budget = budget

    @property
    def delta(self):
        """The delta at which ``privacy_spent_`` is reported: the estimator's."""
        return self.estimator.get_params().get("delta", 1e-5)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags.required = inner.target_tags.required
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags

    def _candidates(self, seeds) -> list:
        candidates = []
        for seed, params in zip(seeds, ParameterGrid(self.param_grid), strict=False):
            candidate = clone(self.estimator).set_params(**params)
            if "random_state" in candidate.get_params():
                candidate.set_params(random_state=seed)
            candidates.append(candidate)
        return candidates

    def _selection_release(self) -> Release:
        mechanism = PermuteAndFlip(self.selection_epsilon, 1.0, monotonic=True)
        return Release(
            "private selection of a candidate by its clipped validation loss",
            mechanism.dp_event,
            (_VALIDATION, _VALIDATION),
            f"{_PF_REFERENCE}, or {_GEM_REFERENCE}",
        )

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, *, sample_id=None):
        """Search the grid and keep the privately selected candidate.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_id : array-like of shape (n_samples,), default=None
            Unique hashable ids for :meth:`delete_samples` (no NaN). Default:
            the index labels if ``X`` is a pandas DataFrame, else row positions
            ``0 .. n_samples - 1``.

        Returns
        -------
        self : PrivateGridSearch
        """
        with self._atomic():
            return self._fit(X, y, requested_ids(X, sample_id))

    def _fit(self, X, y, sample_id):
        if y is None:
            raise ValueError(
                f"This {type(self).__name__} estimator requires y to be passed, "
                "but the target y is None."
            )
        n_candidates = len(ParameterGrid(self.param_grid))
        if n_candidates == 0:
            raise ValueError("param_grid is empty")
        rng = release_generator(self.random_state, 0)
        seeds = (
            rng.integers(np.iinfo(np.int32).max, size=n_candidates).tolist()
            if self.random_state is not None
            else [None] * n_candidates
        )
        candidates = self._candidates(seeds)
        selection = self._selection_release()
        plans = [c._fit_release_plan() for c in candidates if hasattr(c, "_fit_release_plan")]
        if len(plans) == len(candidates) and self.budget is not None:
            # Refuse before touching the data if the whole search cannot be paid.
            planned = [r.event for plan in plans for r in plan] + [selection.event]
            self.budget.check(planned, f"{type(self).__name__}.fit")

        X, y = indexable(X, y)
        n = len(y)
        if n < 2:
            raise ValueError(
                f"PrivateGridSearch needs at least 2 samples to split, got n_samples = {n}"
            )
        ids = np.arange(n) if sample_id.values is None else sample_id.values
        if len(ids) != n:
            raise ValueError(f"sample_id has {len(ids)} entries for {n} rows")
        to_validation = rng.random(n) < self.validation_fraction
        train = np.flatnonzero(~to_validation)
        validation = np.flatnonzero(to_validation)
        if len(train) == 0 or len(validation) == 0:
            raise ValueError(
                "the random split left one part empty; n_samples is too small for a search"
            )
        X_train, y_train = _take(X, train), _take(y, train)
        train_ids = ids[train]
        self._charge_budget([selection.event], "fit (selection)")
        fitted = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_candidate)(c, X_train, y_train, train_ids) for c in candidates
        )

        X_val, y_val = _take(X, validation), np.asarray(_take(y, validation))
        costs, bounds = [], []
        for candidate in fitted:
            name, bound, interval = _loss_bound(candidate)
            prediction = candidate.predict(X_val)
            if interval is None:
                losses = (prediction != y_val).astype(float)
            else:
                low, high = interval
                target = np.clip(np.ravel(y_val).astype(float), low, high)
                losses = (np.clip(prediction, low, high) - target) ** 2
            costs.append(float(np.sum(losses)))
            bounds.append(bound)
        select_rng = release_generator(self.random_state, 1)
        if len(set(bounds)) == 1:
            # Adding or removing a validation row moves every summed loss the
            # same way by at most the bound: monotone utilities.
            best = PermuteAndFlip(self.selection_epsilon, bounds[0], monotonic=True).select(
                -np.asarray(costs), select_rng
            )
        else:
            best = GeneralizedExponentialMechanism(self.selection_epsilon, self.beta).select(
                costs, bounds, select_rng
            )

        ledger = []
        for candidate in fitted:
            for entry in candidate.privacy_ledger_:
                ledger.append({**entry, "chunks": [_TRAIN, _TRAIN]})
        ledger.append(selection.to_dict())
        grid = list(ParameterGrid(self.param_grid))
        self.cv_results_ = {
            "params": grid,
            **{
                f"param_{key}": np.ma.MaskedArray(
                    [p.get(key) for p in grid], mask=[key not in p for p in grid], dtype=object
                )
                for key in sorted({k for p in grid for k in p})
            },
            "epsilon_spent": np.array([c.privacy_spent_.epsilon for c in fitted]),
        }
        self.best_index_ = int(best)
        self.best_params_ = grid[best]
        self.best_estimator_ = fitted[best]
        self.n_candidates_ = len(fitted)
        self._validation_ids = set(ids[validation].tolist())
        self._sample_id_kind = sample_id.kind
        self._set_ledger(ledger)
        self.deletion_log_ = []
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_
        return self

    @property
    def n_features_in_(self):
        """Number of features seen during fit."""
        check_is_fitted(self)
        return self.best_estimator_.n_features_in_

    @property
    def classes_(self):
        """Class labels (classifiers only)."""
        check_is_fitted(self)
        return self.best_estimator_.classes_

    @available_if(_estimator_has("predict"))
    def predict(self, X):
        """Predict with the selected candidate."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the selected candidate."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the selected candidate."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    @available_if(_estimator_has("score"))
    def score(self, X, y):
        """Score of the selected candidate (its estimator's ``score``)."""
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)

    def delete_samples(self, sample_ids):
        """Delete samples from the selected model; state what the selection keeps.

        Rows of the training part are deleted from ``best_estimator_`` with its
        own guarantee; rows of the validation part were used only by the
        selection. The selection is not recomputed: it stays a
        differentially private function of the deleted rows, and the report
        gives the (epsilon, delta) by which the search differs from one run
        without them (group privacy for several rows).

        Parameters
        ----------
        sample_ids : hashable or iterable of hashable
            Ids known at fit time: ``sample_id``, else a DataFrame's index
            labels, else row positions. A bare string or scalar is one id.

        Returns
        -------
        self : PrivateGridSearch
        """
        check_is_fitted(self)
        with self._atomic():
            return self._delete(as_id_list(sample_ids))

    def _delete(self, sample_ids):
        if not sample_ids:
            raise UnlearningError("no sample ids given")
        if len(set(sample_ids)) != len(sample_ids):
            raise UnlearningError("the same sample id is requested more than once")
        in_validation = [i for i in sample_ids if i in self._validation_ids]
        in_train = [i for i in sample_ids if i not in self._validation_ids]
        started = time.perf_counter()
        if in_train:
            # Raises UnlearningError, unchanged, on unknown ids.
            self.best_estimator_.delete_samples(in_train)
            inner = self.best_estimator_.deletion_log_[-1]
        self._validation_ids = self._validation_ids - set(in_validation)
        group = len(sample_ids)
        events = [group_events(event_from_dict(e["event"]), group) for e in self.privacy_ledger_]
        retained = epsilon_spent(events, self.delta)
        guarantee = (
            f"model: {inner.guarantee}; "
            if in_train
            else "model: untouched (rows were in the validation part only); "
        ) + (
            f"hyper-parameter choice: not recomputed, ({retained:.3g}, {self.delta:g})-"
            "indistinguishable from a search without the deleted samples"
        )
        self._log_deletion(
            DeletionReport(
                n_deleted=len(sample_ids),
                method="certified" if not in_train else f"{inner.method}+certified",
                guarantee=guarantee,
                cost={"wall_time_s": time.perf_counter() - started},
                retrain_cost=dict(inner.retrain_cost) if in_train else {},
                deletion_epsilon=retained,
                deletion_delta=self.delta,
                rerelease_epsilon=inner.rerelease_epsilon if in_train else None,
                reason="the selected model deletes; the selection is covered by its privacy",
            )
        )
        return self


def _take(data, rows):
    if hasattr(data, "iloc"):
        return data.iloc[rows]
    if isinstance(data, list):
        return [data[i] for i in rows]
    return np.asarray(data)[rows] if not hasattr(data, "shape") else data[rows]
