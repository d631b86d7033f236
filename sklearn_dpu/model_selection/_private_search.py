"""Differentially private hyper-parameter search."""

import dataclasses
from numbers import Integral, Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, MetaEstimatorMixin
from sklearn.utils.validation import check_is_fitted

from .._compat import HasMethods, Interval, InvalidParameterError, _fit_context
from .._progress import print_progress
from ..base import PrivateEstimatorMixin, PublicSizes, planned_fit
from ..exceptions import BudgetExceededError, SelectionFailedError, UnlearningError
from ..privacy.accounting import epsilon_spent, epsilon_upper_bound
from ..privacy.ledger import DecodedLedger, Release, ReleasePlan, worst_case_events
from ..privacy.random import release_generator
from ..unlearning.ids import check_request, deletion_request, requested_ids, restated_for
from ..unlearning.report import DeletionCost, DeletionOutcome, DeletionPlan
from . import _selection_methods as _methods
from . import _split_select as _split
from ._group_privacy import retained_privacy, search_guarantee
from ._scoring import check_scoring
from ._search_delegation import _DelegatesToBestEstimator
from ._search_results import (
    candidate_points,
    public_sizes,
    retrain_cost,
    split_rows,
)
from ._search_results import candidates as _candidates
from ._search_results import on_chunks as _on
from ._split_select import (
    _TRAIN,
    _VALIDATION,
    _selection,
    _selection_release,
)

__all__ = ["PrivateGridSearch"]


class PrivateGridSearch(
    _DelegatesToBestEstimator, PrivateEstimatorMixin, MetaEstimatorMixin, BaseEstimator
):
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

    **Scoring.** The selection sums a per-row score clipped to a public
    interval ``[l, h]`` over the validation part (the zero-one loss, the
    squared error clipped to the target range, or ``scoring``): one row added
    or removed moves every candidate's sum the same way by at most ``h - l``,
    the sensitivity, whatever the number of validation rows (which is
    private: rows are assigned at random). Mean scores, such as scikit-learn
    scorer objects return, have no public sensitivity and are refused before
    any data is read.

    **Refit.** With ``refit=True`` the selected hyper-parameters are fitted
    again on all the rows, one more release on both parts, planned before any
    data is read (the most expensive candidate's fit, since the choice is not
    known then) and charged with the search; the search's deletions then go
    to that model. With ``refit=False`` (the default) ``best_estimator_`` is
    the selected candidate, fitted on the training part.

    **Parallelism.** Candidates are fitted with joblib (``n_jobs``, any
    backend, Dask's included): workers fit candidates that hold no budget,
    and the parent process checks and charges every budget, once, before and
    after the search, so no worker ever writes to a budget.

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

    **Deletion.** ``best_estimator_`` is the selected candidate fitted on
    the training part (``refit=False``) or on all the rows (``refit=True``).
    :meth:`delete_samples` deletes
    through it with its own guarantee, adds its re-releases to
    ``privacy_ledger_`` (on the part(s) it was fitted on) and charges the resulting
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
    param_grid : dict or list of dict, default=None
        As in :class:`~sklearn.model_selection.GridSearchCV`. Give it or
        ``param_distributions``.
    param_distributions : dict or list of dict, default=None
        As in :class:`~sklearn.model_selection.RandomizedSearchCV`: lists,
        or scipy distributions, of values. ``n_iter`` candidates are drawn
        with ``random_state`` (public: which candidates run depends on no
        data), before any data is read.
    n_iter : int, default=10
        Number of candidates drawn from ``param_distributions`` (from lists
        only, more than the grid has gives the whole grid).
    scoring : str, callable or None, default=None
        What the selection maximizes, summed over the validation rows:
        ``None`` (the zero-one loss of a classifier, the clipped squared error
        of a regressor), ``"accuracy"``, ``"neg_mean_squared_error"``,
        ``"r2"`` (which ranks candidates like the squared error on one
        validation part, and selects with it), ``"neg_mean_absolute_error"``
        (a regressor's errors clipped to its ``target_bound``, public or
        released), or ``score_func(y_true, y_pred)`` returning one score per
        row (higher is better, each row's score depending on that row only),
        with ``score_bounds``.
    score_bounds : tuple of (float, float), default=None
        The public ``(low, high)`` each row's score of a callable ``scoring``
        is clipped to; its width is the selection's sensitivity.
    refit : bool, default=False
        Refit the selected hyper-parameters on all the data (see Refit).
    selection_epsilon : float, default=1.0
        Pure-DP epsilon of the selection.
    validation_fraction : float, default=0.5
        Probability that a row goes to the validation part.
    beta : float, default=0.05
        Failure probability of the utility guarantee of the generalized
        exponential mechanism (not of privacy).
    n_jobs : int, default=None
        Candidates fitted in parallel (joblib; see Parallelism).
    random_state : int, RandomState instance or None, default=None
        Source of the split, the candidates' noise, the selection, the
        refit's noise and the candidates drawn from ``param_distributions``
        (a public choice). An int is for tests only.
    budget : PrivacyBudget, default=None
        Charged, with the estimator's own ``budget``, for the whole search
        and for every deletion's re-release (see Budgets above).
    method : {"split_select", "repeat_and_select", "threshold"}, default="split_select"
        The selection: the above, Papernot & Steinke's repeat-and-select or
        Liu & Talwar's threshold rule (random runs over the candidate points,
        each a private fit and a Laplace score of ``selection_epsilon``, the
        ``scoring``'s summed cost over its width ``h - l``; ``refit`` refits
        the chosen point on all rows, planned and charged; ``threshold``
        refuses ``param_distributions``; see the user guide and
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
    verbose : int, default=0
        Progress on stdout: ``1`` prints, after each fit, chunk, deletion or candidate, the
        number of releases, ``n_iter_`` and the epsilon spent so far; ``2`` adds
        each release's record and a line per candidate (its parameters, the epsilon
        of the candidates so far). Never a score, loss, record count or timing:
        public values only (:mod:`sklearn_dpu._progress`).

    Attributes
    ----------
    best_estimator_ : estimator
        The selected candidate, fitted on the training part (``refit=False``)
        or on all the rows (``refit=True``); it publishes what its own
        estimator publishes.
    best_params_ : dict
        The selected hyper-parameters: the private selection's output.
    best_index_ : int
        Index of ``best_params_`` in ``cv_results_["params"]``: the same
        release.
    cv_results_ : dict
        Only public values and released ones: ``params`` and
        ``param_<name>`` (masked arrays) from the parameters and the public
        ``random_state``, and each candidate's ``epsilon_spent`` on the
        training part (from the ledger). No validation score, rank or fit
        time: the selection releases only its winner, and fit times depend on
        the number of rows. No method publishes its runs: Papernot &
        Steinke's bound holds for the best run with the number of runs hidden.
    n_candidates_ : int
        Number of candidates run (public: from the parameters).
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

    A named scoring, candidates drawn from distributions, and a refit on all
    the rows (one more release, planned and charged with the search):

    >>> from scipy.stats import loguniform
    >>> search = PrivateGridSearch(
    ...     DPLinearRegression(feature_norm=1.5, target_bound=1.0),
    ...     param_distributions={"alpha": loguniform(1e-2, 1e6)}, n_iter=3,
    ...     scoring="neg_mean_absolute_error", refit=True, random_state=0).fit(X, y)
    >>> sorted(search.cv_results_)
    ['epsilon_spent', 'param_alpha', 'params']
    >>> search.privacy_ledger_[-1]["chunks"]  # the refit: both parts
    [1, 2]
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "delete_samples"])],
        "param_grid": [dict, list, None],
        "param_distributions": [dict, list, None],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "scoring": [str, callable, None],
        "score_bounds": [tuple, list, None],
        "refit": ["boolean"],
        "selection_epsilon": [Interval(Real, 0, None, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "beta": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "budget": [HasMethods(["charge", "check"]), None],
        "verbose": ["verbose"],
        **_methods.METHOD_CONSTRAINTS,
    }

    def __init__(
        self,
        estimator,
        param_grid=None,
        *,
        param_distributions=None,
        n_iter=10,
        scoring=None,
        score_bounds=None,
        refit=False,
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
        verbose=0,
    ):
        self.estimator = estimator
        self.param_grid = param_grid
        self.param_distributions = param_distributions
        self.n_iter = n_iter
        self.scoring = scoring
        self.score_bounds = score_bounds
        self.refit = refit
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
        self.verbose = verbose

    @property
    def delta(self) -> float:
        """The delta at which ``privacy_spent_`` and the deletion reports are
        stated: the estimator's when the search was fitted (a ``set_params``
        since restates nothing), else the estimator's."""
        fitted = self.__dict__.get("_fit_delta")
        return fitted if fitted is not None else self._template_delta()

    def _template_delta(self) -> float:
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
        the selection on the validation part and, with ``refit``, the refit
        of the most expensive candidate on both. An upper bound: the fit
        charges the exact releases its candidates made.
        """
        if params["method"] != "split_select":
            return _methods.plan(params, sizes, candidate_points(params))
        candidates = _candidates(params, [None] * len(candidate_points(params)))
        plans = self._search_plans(params, candidates, sizes)
        if len(plans) == 1:
            return plans[0]
        return max(
            plans,
            key=lambda p: epsilon_upper_bound(
                worst_case_events(p.releases, self.delta),
                [(b.epsilon, b.delta) for b in p.bounds],
                self.delta,
            ),
        )

    def _search_plans(self, params, candidates, sizes: PublicSizes) -> list[ReleasePlan]:
        """The search's plan for each distinct refit the selection may pick
        (one plan without ``refit``); a budget must afford every one."""
        plans = [_planned(c, sizes, type(self).__name__) for c in candidates]
        releases = [r for plan in plans for r in _on(plan.releases, _TRAIN, _TRAIN)]
        bounds = [b for plan in plans for b in plan.bounds]
        search = [*releases, _selection_release(_selection(params, candidates))]
        if not params.get("refit"):
            return [ReleasePlan(search, bounds, exact=False, restart=True)]
        refits = {}
        for plan in plans:
            refit = (_on(plan.releases, _TRAIN, _VALIDATION), tuple(plan.bounds))
            refits.setdefault(repr(refit), refit)
        return [
            ReleasePlan([*search, *refit], [*bounds, *refit_bounds], exact=False, restart=True)
            for refit, refit_bounds in refits.values()
        ]

    def _check_plan(self, plan: ReleasePlan, what: str) -> None:
        """Refuse, before any data is read, a search some budget cannot pay.

        With (epsilon, delta) bounds, the charge will be one part's exact
        events: each part is checked, with every bound (a refit's releases
        are on both parts).
        """
        train = [r.event for r in plan.releases if r.chunks[0] == _TRAIN]
        selection = [r.event for r in plan.releases if r.chunks[1] == _VALIDATION]
        part_bounds = [(b.epsilon, b.delta) for b in plan.bounds]
        if part_bounds:
            parts = [(train, part_bounds), (selection, part_bounds if self.refit else [])]
        else:
            parts = [(worst_case_events(plan.releases, self.delta), [])]
        n_candidates = len(candidate_points(self.get_params(deep=False)))
        parts_named = "the selection and the refit" if self.refit else "the selection"
        what = f"{type(self).__name__}.{what} ({n_candidates} candidates and {parts_named})"
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

    def _charged_compute(self, what: str, plan: ReleasePlan, data: Any, compute) -> list:
        """The random-run methods charge before any noise is drawn, always.

        Their ``validate`` step has read the data (:func:`first_run`); a
        plan whose refit is known only as an upper bound (a fit whose events
        depend on its noised count) is charged that upper bound then, and
        ``privacy_ledger_`` records the exact releases. Charging after the
        runs would let a later error or a refused charge show what the noisy
        scores decided without paying for it. A selection that ends without
        a winner raises :class:`~sklearn_dpu.exceptions.SelectionFailedError`
        stating what the search spent (its plan, from public parameters).
        """
        try:
            if self.method == "split_select" or plan.exact:
                return super()._charged_compute(what, plan, data, compute)
            self._charge_budgets(self._budget_increment(plan.releases, plan.restart), what)
            return list(compute(data))
        except SelectionFailedError as failure:
            events = DecodedLedger.of(()).increment(plan.releases, self.delta)
            spent = epsilon_spent(events, self.delta)
            raise SelectionFailedError(
                f"{failure}. The search spent epsilon = {spent:.4g} (delta = {self.delta:g}), "
                "charged to its budget(s), if any: retrying pays again",
                epsilon_spent=spent,
            ) from None

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
        self._fit_delta = self._template_delta()  # what this fit states its epsilons at
        self._fit_method = self.method
        params = self.get_params(deep=False)
        # Before any data is read: the scoring's public bound, the candidates.
        scorer = check_scoring(self.scoring, self.score_bounds, self.estimator)
        points = candidate_points(params)
        n_candidates = len(points)
        if n_candidates == 0:
            raise ValueError("param_grid is empty")
        rng = release_generator(self.random_state, 0)
        seeds = (
            rng.integers(np.iinfo(np.int32).max, size=n_candidates).tolist()
            if self.random_state is not None
            else [None] * n_candidates
        )
        # the random-run methods make their own runs' candidates
        candidates = _candidates(params, seeds, points) if self.method == "split_select" else []
        print_progress(self, f"fit: {n_candidates} candidate(s), then a private selection")
        if self.method != "split_select":  # always planned: refused before reading data
            plan = _methods.plan(params, public_sizes(X), points)
        elif self._budgets():
            plans = self._search_plans(params, candidates, public_sizes(X))
            for other in plans[1:]:  # every refit the selection may pick
                self._check_plan(other, "fit")
            plan = plans[0]
        else:
            # Nothing to check: candidates that cannot plan their fit may run.
            plan = ReleasePlan((), exact=False, restart=True)

        def validate():
            split = split_rows(X, y, sample_id, rng, self.validation_fraction)
            if self.method == "split_select":
                return split
            # The random runs read the data in their first run (fit and exact
            # score, no noise yet): refused data leave the budgets as they
            # were. The run's event was planned above from the parameters.
            run_event = plan.releases[0].event.event
            return _methods.first_run(self, split, points, scorer, run_event)

        def compute(data):
            if self.method != "split_select":
                return _methods.search(self, data, sample_id, points, scorer)
            selection = _selection(params, candidates)
            return _split.search(self, candidates, selection, data, sample_id, points, scorer)

        self._run_update("fit", plan, validate, compute)
        return self

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
        # the selection's method as fitted, not a later set_params
        frozen = {"method": self.__dict__.get("_fit_method", self.method)}
        with self._atomic(), self._frozen_params_in_effect(frozen):
            return self._delete(deletion_request(self, sample_ids))

    def _check_deletable(self, sample_ids: list) -> None:
        """Refuse a request the search would refuse: no ids, repeated ids, or
        training ids the selected model does not know (or all of them)."""
        sample_ids = check_request(sample_ids)
        in_train = [i for i in sample_ids if i not in self._validation_ids]
        try:  # the selected model was given the search's ids as sample_id
            if in_train:
                self.best_estimator_._check_deletable(in_train)
        except UnlearningError as error:
            raise restated_for(error, getattr(self, "_sample_id_kind", None)) from None

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
            dataclasses.replace(
                Release.from_dict(entry), chunks=getattr(self, "_model_chunks", (_TRAIN, _TRAIN))
            )
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
        retained, retained_delta = retained_privacy(fit_events, group, self.delta, self.method)
        inner_guarantee = None if inner is None else inner.guarantee
        guarantee = search_guarantee(inner_guarantee, retained, retained_delta, group)
        stated = best.deletion_log_[-1] if best.deletion_log_ else None
        return DeletionOutcome(
            guarantee=guarantee,
            retrain_cost=retrain_cost(inner.retrain_cost) if inner is not None else DeletionCost(),
            releases=rereleased,
            method=None if inner is None else f"{inner.method} model, certified selection",
            # basic composition with what the selected model states of the rows
            # deleted so far (its latest report, also when this call left it alone)
            deletion_epsilon=retained + ((stated.deletion_epsilon or 0.0) if stated else 0.0),
            deletion_delta=retained_delta + ((stated.deletion_delta or 0.0) if stated else 0.0),
            # the inner model's, whose new ledger entries may also hold accounting entries
            rerelease_epsilon=None if inner is None else inner.rerelease_epsilon,
        )


def _planned(candidate, sizes: PublicSizes, searcher: str) -> ReleasePlan:
    """A candidate's planned fit; a clear error if it cannot say."""
    try:
        return planned_fit(candidate, sizes)
    except NotImplementedError as err:
        raise TypeError(
            f"{searcher} cannot plan the cost of fitting {type(candidate).__name__} before "
            f"reading the data, so it cannot charge a budget for it: {err}"
        ) from err
