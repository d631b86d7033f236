"""Differentially private hyper-parameter search."""

import dataclasses
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import ParameterGrid
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted, indexable

from .._compat import HasMethods, Interval, InvalidParameterError, _fit_context
from ..base import PrivateEstimatorMixin, PublicSizes, planned_fit
from ..exceptions import BudgetExceededError
from ..privacy.ledger import Release, ReleasePlan, worst_case_events
from ..privacy.mechanisms import GeneralizedExponentialMechanism, PermuteAndFlip
from ..privacy.random import release_generator
from ..unlearning.ids import as_id_list, check_request, requested_ids
from ..unlearning.report import DeletionCost, DeletionOutcome, DeletionPlan
from . import _selection_methods as _methods
from ._group_privacy import group_epsilon

__all__ = ["PrivateGridSearch"]

_TRAIN, _VALIDATION = 1, 2  # the search's two "chunks": disjoint halves of the data
_GEM_REFERENCE = (
    "Ullah, 'Statistical Learning via Stochastic Optimization under Data Privacy "
    "Considerations' (PhD thesis, JHU 2024), Alg. 4 / Thm 14, with the generalized "
    "exponential mechanism of Raskhodnikova & Smith (FOCS 2016) as stated in its Thm 34; "
    "erratum used: each candidate's sensitivity is the bound of its summed loss, not the "
    "thesis' Delta(D_j) meant for an averaged one"
)
_PF_REFERENCE = "permute-and-flip, McKenna & Sheldon 2020, Thm 1 (monotone utilities)"


def _estimator_has(name):
    def check(self):
        if hasattr(self, "best_estimator_"):
            return hasattr(self.best_estimator_, name)
        return hasattr(self.estimator, name)

    return check


def _loss_bound(estimator) -> tuple[str, float | None, object]:
    """The bounded validation loss of a candidate: (name, bound, clip interval).

    A regressor whose ``target_bound`` is ``"auto"`` has its bound only once
    fitted: its released ``target_interval_`` (a DP release on the training
    part, so public for the selection on the validation part); before, the
    bound is ``None``, and the search selects with the generalized
    exponential mechanism, whose sensitivities may differ per candidate.
    """
    if is_classifier(estimator):
        return "zero-one loss", 1.0, None
    params = estimator.get_params()
    if "target_bound" in params:
        bound = params["target_bound"]
        if isinstance(bound, str) and bound == "auto":
            interval = getattr(estimator, "target_interval_", None)
            if interval is None:
                return "squared error", None, None
            low, high = (float(v) for v in interval)
        elif isinstance(bound, str):
            raise ValueError(
                f"PrivateGridSearch needs a public or released target range to bound the "
                f"validation loss; got target_bound={bound!r}"
            )
        elif isinstance(bound, tuple | list):
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

    **Accounting.** Because a record falls in only one part, the search is
    private with the larger, not the sum, of the training cost (all
    candidates composed) and the selection cost (``selection_epsilon``) under
    add/remove neighbours: ``privacy_ledger_`` records every candidate's
    releases on the training part and the selection on the validation part,
    and ``privacy_spent_`` composes them in parallel across the two parts. No
    validation score is published: ``cv_results_`` lists the candidates and
    their privacy cost only.

    **Budgets.** The budgets involved are ``budget`` and the ``budget`` of
    ``estimator``; a ledger file shared by both is one budget. Before any data
    is read, the whole search (every candidate's planned fit,
    :func:`~sklearn_dpu.base.planned_fit`, exact releases and
    :class:`~sklearn_dpu.privacy.ledger.ApproximateDPBound` alike, plus the
    selection) is checked against each budget, and the search
    is refused with :class:`~sklearn_dpu.exceptions.BudgetExceededError` if any
    cannot pay it. After the selection, each budget is charged once with the
    exact events of the search's worst-case part (what ``privacy_spent_``
    composes). Candidates are fitted without a budget, so they never charge
    separately; ``best_estimator_`` gets the estimator's budget back, so a
    deletion made on it directly charges that budget.

    **Deletion.** The selected candidate, fitted on the training part, is
    ``best_estimator_`` (no refit on all the data, which would cost another
    release and break the disjointness). :meth:`delete_samples` deletes
    through it with its own guarantee, adds its re-releases to
    ``privacy_ledger_`` (on the training part) and charges the resulting
    increment to every budget involved; a deletion is never refused, so the
    charge is recorded even past a budget's cap, with a
    :class:`~sklearn_dpu.exceptions.PrivacyLeakWarning`. The choice of
    hyper-parameters is not recomputed: each deletion report states, as
    ``deletion_epsilon``, how far the search may still be from one run without
    *all* samples deleted so far (``n_deleted_`` of them), by group privacy
    over the fit's releases, and ``remaining_epsilon`` is the search's
    ``privacy_spent_.epsilon`` after the call.

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
        Charged, with the estimator's own ``budget``, for the whole search
        and for every deletion's re-release (see Budgets above).
    method : {"split_select", "repeat_and_select", "threshold"}, default="split_select"
        The selection: the above, Papernot & Steinke's repeat-and-select or
        Liu & Talwar's threshold rule (random runs, each a private fit and a
        Laplace score of ``selection_epsilon``; see the user guide and
        :mod:`sklearn_dpu.model_selection._selection_methods`).
    distribution : {"truncated_negative_binomial", "logarithmic", "poisson"}, \
            default="logarithmic"
        Law of the number of runs of ``repeat_and_select``, of mean
        ``expected_runs`` (default 10.0); ``eta`` (default 1.0: geometric) is
        the truncated negative binomial's shape.
    threshold : float, default=0.5
        ``threshold``: the mean normalised utility (accuracy for a classifier)
        a run's noisy score must reach; after a failing run the search stops
        with probability ``stop_probability`` (default 0.1) and raises.

    Attributes
    ----------
    best_estimator_ : estimator
    best_params_ : dict
    best_index_ : int
    cv_results_ : dict
        ``params``, ``param_<name>`` and each candidate's ``epsilon_spent``.
    n_candidates_ : int
    n_deleted_ : int
        Number of samples deleted since ``fit`` (the deletion requests
        honoured: public).
    privacy_ledger_ : list of dict
        Every candidate's releases (training part), the selection (validation
        part) and the re-releases of deletions (training part).
    privacy_spent_ : PrivacySpent
    deletion_log_ : list of DeletionReport
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.
    classes_ : ndarray
        For classifiers.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : the non-private search, whose
        exact cross-validation scores are themselves a privacy leak.

    References
    ----------
    .. [1] M. E. Ullah, "Statistical Learning via Stochastic Optimization
       under Data Privacy Considerations", PhD thesis, Johns Hopkins
       University, 2024, Algorithm 4 and Theorem 14.
    .. [2] R. McKenna and D. Sheldon, "Permute-and-flip: a new mechanism for
       differentially private selection", NeurIPS 2020, Theorem 1.
    .. [3] S. Raskhodnikova and A. Smith, "Lipschitz extensions for
       node-private graph statistics and the generalized exponential
       mechanism", FOCS 2016, as stated in Theorem 34 of [1]_.
    .. [4] C. Dwork and A. Roth, "The algorithmic foundations of differential
       privacy", 2014, Theorem 2.2 (group privacy).

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
        **_methods.METHOD_CONSTRAINTS,
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
        method="split_select",
        distribution="logarithmic",
        expected_runs=10.0,
        eta=1.0,
        threshold=0.5,
        stop_probability=0.1,
    ):
        self.estimator = estimator
        self.param_grid = param_grid
        self.selection_epsilon = selection_epsilon
        self.validation_fraction = validation_fraction
        self.beta = beta
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.budget = budget
        self.method = method
        self.distribution = distribution
        self.expected_runs = expected_runs
        self.eta = eta
        self.threshold = threshold
        self.stop_probability = stop_probability

    @property
    def delta(self) -> float:
        """The delta at which ``privacy_spent_`` is reported: the estimator's."""
        return self.estimator.get_params().get("delta", 1e-5)

    def _validate_params(self):
        if not hasattr(self.estimator, "delete_samples") and hasattr(self.estimator, "steps"):
            raise InvalidParameterError(
                f"PrivateGridSearch searches over one sklearn_dpu estimator, got a "
                f"{type(self.estimator).__name__}: put the search inside the pipeline "
                "instead, e.g. make_pipeline(PrivateBoundsScaler(), "
                "PrivateGridSearch(DPLinearRegression(), {'alpha': [0.0, 1.0]})) (the "
                "other steps are then fitted once, not tuned)"
            )
        super()._validate_params()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags.required = inner.target_tags.required
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags

    def _inner_budget(self):
        return self.estimator.get_params(deep=False).get("budget")

    def _budgets(self) -> list:
        """The budgets the search charges: its own and its estimator's, each ledger once."""
        budgets, seen = [], set()
        for budget in (self.budget, self._inner_budget()):
            key = getattr(budget, "path", None) or id(budget)
            if budget is not None and key not in seen:
                seen.add(key)
                budgets.append(budget)
        return budgets

    def _selection_release(self) -> Release:
        """The selection's ledger entry (the same for every seed)."""
        params = self.get_params(deep=False)
        return _selection_release(_selection(params, _candidates(params, [None])))

    def _plan_releases(self, params, sizes: PublicSizes) -> ReleasePlan:
        """What one search adds to the ledger, before any data is read.

        Every candidate's plan (:func:`~sklearn_dpu.base.planned_fit`, exact
        releases and (epsilon, delta) bounds alike) on the training part,
        and the selection on the validation part. An upper bound: the fit
        charges the exact releases its candidates made.
        """
        if params["method"] != "split_select":
            return _methods.plan(params, sizes)
        grid = ParameterGrid(params["param_grid"])
        candidates = _candidates(params, [None] * len(grid))
        releases, bounds = [], []
        for candidate in candidates:
            try:
                plan = planned_fit(candidate, sizes)
            except NotImplementedError as err:
                raise TypeError(
                    f"{type(self).__name__} cannot plan the cost of fitting "
                    f"{type(candidate).__name__} before reading the data, so it cannot "
                    f"charge a budget for it: {err}"
                ) from err
            releases.extend(dataclasses.replace(r, chunks=(_TRAIN, _TRAIN)) for r in plan.releases)
            bounds.extend(plan.bounds)
        selection = _selection_release(_selection(params, candidates))
        return ReleasePlan([*releases, selection], bounds, exact=False, restart=True)

    def _check_plan(self, plan: ReleasePlan, what: str) -> None:
        """Refuse, before any data is read, a search some budget cannot pay.

        With (epsilon, delta) bounds, the charge will be one part's exact
        events: each part is checked (the bounds are on the training part).
        """
        train = [r.event for r in plan.releases if r.chunks == (_TRAIN, _TRAIN)]
        selection = [r.event for r in plan.releases if r.chunks == (_VALIDATION, _VALIDATION)]
        part_bounds = [(b.epsilon, b.delta) for b in plan.bounds]
        if part_bounds:
            parts = [(train, part_bounds), (selection, [])]
        else:
            parts = [(worst_case_events(plan.releases, self.delta), [])]
        n_candidates = len(ParameterGrid(self.param_grid))
        what = f"{type(self).__name__}.{what} ({n_candidates} candidates and the selection)"
        for budget in self._budgets():
            pending = [e for events, _, _ in self._pending_budget_entries(budget) for e in events]
            for events, bounds in parts:
                if not bounds:
                    budget.check([*pending, *events], what)
                    continue
                try:
                    budget.check([*pending, *events], what, bounds=bounds)
                except BudgetExceededError as err:
                    if sum(d for _, d in bounds) < budget.delta:
                        raise
                    raise BudgetExceededError(
                        f"{err}: the plan has {len(bounds)} fit(s) known only as "
                        "(epsilon, delta) bounds, whose deltas add up to the budget's "
                        "delta or more, so their composition is unbounded. Give "
                        "UnlearnableSGDClassifier a public schedule_size (and an "
                        "integer max_iter): its fits are then exact events that compose."
                    ) from err

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: ArrayLike, y: ArrayLike, *, sample_id: ArrayLike | None = None) -> Self:
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

        Raises
        ------
        BudgetExceededError
            Before any data is read, when a budget cannot pay the whole search.
        """
        with self._atomic():
            return self._fit(X, y, requested_ids(X, sample_id))

    def _fit(self, X, y, sample_id):
        if y is None:
            raise ValueError(
                f"This {type(self).__name__} estimator requires y to be passed, "
                "but the target y is None."
            )
        params = self.get_params(deep=False)
        n_candidates = len(ParameterGrid(self.param_grid))
        if n_candidates == 0:
            raise ValueError("param_grid is empty")
        rng = release_generator(self.random_state, 0)
        seeds = (
            rng.integers(np.iinfo(np.int32).max, size=n_candidates).tolist()
            if self.random_state is not None
            else [None] * n_candidates
        )
        candidates = _candidates(params, seeds)
        if self._budgets() or self.method != "split_select":  # refuse before reading data
            plan = self._plan_releases(params, _public_sizes(X))
        else:
            # Nothing to check: candidates that cannot plan their fit may run.
            plan = ReleasePlan((), exact=False, restart=True)

        def validate():
            return self._split(X, y, sample_id, rng)

        def compute(split):
            if self.method != "split_select":
                return _methods.search(self, split, sample_id)
            return self._search(candidates, _selection(params, candidates), split, sample_id)

        self._run_update("fit", plan, validate, compute)
        return self

    def _split(self, X, y, sample_id, rng) -> "_Split":
        """Read the data and assign each row to the training or the validation part."""
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
        y_val = np.asarray(_take(y, validation))
        if y_val.ndim == 2 and y_val.shape[1] == 1:
            # A column vector: compare row by row, not by broadcasting.
            y_val = y_val.reshape(-1)
        return _Split(
            _take(X, train),
            _take(y, train),
            ids[train],
            _take(X, validation),
            y_val,
            ids[validation],
        )

    def _search(self, candidates, selection, split: "_Split", sample_id) -> list[Release]:
        """Fit every candidate, select one privately; return the exact releases."""
        fitted = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_candidate)(c, split.X_train, split.y_train, split.train_ids)
            for c in candidates
        )
        costs = []
        for candidate in fitted:
            _, _, interval = _loss_bound(candidate)
            prediction = candidate.predict(split.X_val)
            if interval is None:
                losses = (prediction != split.y_val).astype(float)
            else:
                low, high = interval
                target = np.clip(split.y_val.astype(float), low, high)
                losses = (np.clip(prediction, low, high) - target) ** 2
            costs.append(float(np.sum(losses)))
        select_rng = release_generator(self.random_state, 1)
        if isinstance(selection, PermuteAndFlip):
            best = selection.select(-np.asarray(costs), select_rng)
        else:
            bounds = [_loss_bound(candidate)[1] for candidate in fitted]
            best = selection.select(costs, bounds, select_rng)

        made = [
            dataclasses.replace(Release.from_dict(entry), chunks=(_TRAIN, _TRAIN))
            for candidate in fitted
            for entry in candidate.privacy_ledger_
        ]
        made.append(_selection_release(selection))

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
        if "budget" in self.best_estimator_.get_params(deep=False):
            self.best_estimator_.set_params(budget=self._inner_budget())
        self.n_candidates_ = len(fitted)
        self.n_deleted_ = 0
        self._n_fit_releases = len(made)
        self._validation_ids = set(split.validation_ids.tolist())
        self._sample_id_kind = sample_id.kind
        self.deletion_log_ = []
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_
        return made

    @property
    def n_features_in_(self) -> int:
        """Number of features seen during fit."""
        check_is_fitted(self)
        return self.best_estimator_.n_features_in_

    @property
    def classes_(self) -> np.ndarray:
        """Class labels (classifiers only)."""
        check_is_fitted(self)
        return self.best_estimator_.classes_

    @available_if(_estimator_has("predict"))
    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predict with the selected candidate."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities of the selected candidate."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Decision function of the selected candidate."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    @available_if(_estimator_has("score"))
    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Score of the selected candidate (its estimator's ``score``).

        ``sample_weight`` is passed on when given; accepting it lets a
        ``Pipeline`` route its ``score`` call here with metadata routing on.
        """
        check_is_fitted(self)
        if sample_weight is None:
            return self.best_estimator_.score(X, y)
        return self.best_estimator_.score(X, y, sample_weight=sample_weight)

    def delete_samples(self, sample_ids: Any) -> Self:
        """Delete samples from the selected model; state what the selection keeps.

        Rows of the training part are deleted from ``best_estimator_`` with its
        own guarantee, and its re-releases are added to ``privacy_ledger_`` and
        charged to every budget involved (never refused: past a cap the charge
        is recorded anyway, with a warning). Rows of the validation part were
        used only by the selection. The selection is not recomputed: it stays
        a differentially private function of the deleted rows, and the report
        gives the (epsilon, delta) by which the search differs from one run
        without all ``n_deleted_`` samples deleted so far (group privacy).

        Parameters
        ----------
        sample_ids : hashable or iterable of hashable
            Ids known at fit time: ``sample_id``, else a DataFrame's index
            labels, else row positions. A bare string or scalar is one id.

        Returns
        -------
        self : PrivateGridSearch

        Raises
        ------
        UnlearningError
            For an unknown, duplicated or already deleted id; the search is
            left unchanged.
        """
        check_is_fitted(self)
        with self._atomic():
            return self._delete(as_id_list(sample_ids))

    def _check_deletable(self, sample_ids: list) -> None:
        """Refuse a request the search would refuse: no ids, repeated ids, or
        training ids the selected model does not know (or all of them)."""
        sample_ids = check_request(sample_ids)
        in_train = [i for i in sample_ids if i not in self._validation_ids]
        if in_train:
            self.best_estimator_._check_deletable(in_train)

    def _delete(self, sample_ids):
        self._check_deletable(sample_ids)
        in_validation = [i for i in sample_ids if i in self._validation_ids]
        in_train = [i for i in sample_ids if i not in self._validation_ids]
        plan = DeletionPlan(
            "certified",
            None,  # the selected model's re-releases, known once it has deleted
            "the selected model deletes; the selection is covered by its privacy",
        )
        self._run_deletion(
            len(sample_ids), plan, lambda: self._execute_deletion(in_train, in_validation)
        )
        return self

    def _execute_deletion(self, in_train: list, in_validation: list) -> DeletionOutcome:
        """Delete ``in_train`` from the selected model; state what the selection keeps."""
        best = self.best_estimator_
        n_before = len(best.privacy_ledger_)
        inner = None
        if in_train:
            # The search charges the re-release once, to every budget involved.
            inner_budget = best.get_params(deep=False).get("budget")
            if inner_budget is not None:
                best.set_params(budget=None)
            try:
                # Raises UnlearningError, unchanged, on unknown ids.
                best.delete_samples(in_train)
            finally:
                if inner_budget is not None:
                    best.set_params(budget=inner_budget)
            inner = best.deletion_log_[-1]
        rereleased = tuple(
            dataclasses.replace(Release.from_dict(entry), chunks=(_TRAIN, _TRAIN))
            for entry in best.privacy_ledger_[n_before:]
        )
        self._validation_ids = self._validation_ids - set(in_validation)
        self.n_deleted_ = self.n_deleted_ + len(in_train) + len(in_validation)

        # What the selection retains of every sample deleted so far: group
        # privacy over the fit's releases, composed.
        group = self.n_deleted_
        fit_events = [
            Release.from_dict(e).event for e in self.privacy_ledger_[: self._n_fit_releases]
        ]
        if self.method == "split_select":
            retained, retained_delta = group_epsilon(fit_events, group, self.delta), self.delta
        else:  # an (epsilon, delta) bound of the whole selection, for the group
            retained, retained_delta = _methods.group_bound(fit_events, group, self.delta)
        guarantee = (
            f"model: {inner.guarantee}; "
            if inner is not None
            else "model: untouched (rows were in the validation part only); "
        ) + (
            f"hyper-parameter choice: not recomputed, ({retained:.3g}, {retained_delta:.3g})-"
            f"indistinguishable from a search without the {group} samples deleted so far"
        )
        stated = best.deletion_log_[-1] if best.deletion_log_ else None
        return DeletionOutcome(
            guarantee=guarantee,
            retrain_cost=_retrain_cost(inner.retrain_cost) if inner is not None else DeletionCost(),
            releases=rereleased,
            method=None if inner is None else f"{inner.method}+certified",
            # basic composition with what the selected model states of the rows
            # deleted so far (its latest report, also when this call left it alone)
            deletion_epsilon=retained + ((stated.deletion_epsilon or 0.0) if stated else 0.0),
            deletion_delta=retained_delta + ((stated.deletion_delta or 0.0) if stated else 0.0),
            # the inner model's, whose new ledger entries may also hold accounting entries
            rerelease_epsilon=None if inner is None else inner.rerelease_epsilon,
        )


@dataclass(frozen=True)
class _Split:
    """The two disjoint parts of the data: training and validation."""

    X_train: Any
    y_train: Any
    train_ids: np.ndarray
    X_val: Any
    y_val: np.ndarray
    validation_ids: np.ndarray


def _candidates(params: dict, seeds: list) -> list:
    """One clone of ``params["estimator"]`` per grid point, seeded, without a budget."""
    candidates = []
    for seed, point in zip(seeds, ParameterGrid(params["param_grid"]), strict=False):
        candidate = clone(params["estimator"]).set_params(**point)
        own = candidate.get_params(deep=False)
        if "random_state" in own:
            candidate.set_params(random_state=seed)
        if "budget" in own:
            # The search charges the whole search once; candidates must not.
            candidate.set_params(budget=None)
        candidates.append(candidate)
    return candidates


def _selection(params: dict, candidates: list) -> PermuteAndFlip | GeneralizedExponentialMechanism:
    """The selection mechanism, from the candidates' public loss bounds."""
    bounds = {_loss_bound(candidate)[1] for candidate in candidates}
    if len(bounds) == 1 and None not in bounds:
        # Adding or removing a validation row moves every summed loss the
        # same way by at most the bound: monotone utilities.
        return PermuteAndFlip(params["selection_epsilon"], bounds.pop(), monotonic=True)
    return GeneralizedExponentialMechanism(params["selection_epsilon"], params["beta"])


def _selection_release(selection) -> Release:
    return Release.of(
        selection,
        "private selection of a candidate by its clipped validation loss",
        (_VALIDATION, _VALIDATION),
        f"{_PF_REFERENCE}, or {_GEM_REFERENCE}",
    )


def _public_sizes(X) -> PublicSizes:
    """The number of features, when ``X`` states its shape (never its values)."""
    shape = getattr(X, "shape", None)
    n_features = int(shape[1]) if isinstance(shape, tuple) and len(shape) == 2 else None
    return PublicSizes(n_features=n_features)


def _retrain_cost(cost) -> DeletionCost:
    """The inner model's retrain estimate as a :class:`DeletionCost`: its work
    counts, without wall-time estimates (no timing of a retrain is reported)."""
    names = {f.name for f in dataclasses.fields(DeletionCost)} - {"wall_time_s"}
    return DeletionCost(**{name: cost[name] for name in cost if name in names})


def _take(data, rows):
    if hasattr(data, "iloc"):
        return data.iloc[rows]
    if isinstance(data, list):
        return [data[i] for i in rows]
    return np.asarray(data)[rows] if not hasattr(data, "shape") else data[rows]
