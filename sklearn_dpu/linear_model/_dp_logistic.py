"""Differentially private logistic regression with certified deletion.

The release recipes are module-level functions of explicit values:
configuration, mechanisms and ledger records in
:mod:`sklearn_dpu.linear_model._logistic_releases`, the solvers in
:mod:`sklearn_dpu.linear_model._logistic_solvers`, the deletion plan, its
re-releases and the unlearning state in
:mod:`sklearn_dpu.linear_model._logistic_deletion`, the worker functions that
carry out a deletion and set the fitted attributes in
:mod:`sklearn_dpu.linear_model._logistic_updates`. This module holds the
estimator's public API and the hooks of the release procedure of
:class:`~sklearn_dpu.base.PrivateEstimatorMixin`.
"""

import math
from numbers import Integral, Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import DELTA_CONSTRAINT, HasMethods, Interval, StrOptions, _fit_context
from .._validation import INPUT_DTYPES, output_dtype
from ..base import PrivateEstimatorMixin, PublicSizes
from ..privacy.clipping import MAX_NORM_BOUND, MIN_NORM_BOUND
from ..privacy.ledger import ReleasePlan
from ..privacy.random import release_generator
from ..unlearning.ids import deletion_request, requested_ids
from . import _auto_bounds as auto_bounds
from . import _dask_sums as dask_sums
from . import _langevin as langevin
from . import _logistic_releases as releases
from . import _logistic_updates as updates
from ._logistic_deletion import LogisticUnlearningState
from ._logistic_solvers import normalized_rows, private_fit, private_sgd_pass
from ._losses import LinearModelLoss
from ._scores import ScoresToLabelsMixin
from ._sparse_rows import in_storage_of, new_registry
from ._sufficient_statistics import is_dask_collection

__all__ = ["DPLogisticRegression", "LogisticUnlearningState"]

# Stated in every deletion report, whatever the deleted labels (a note that
# depended on them would publish whether a label still has samples).
_LABEL_SET_NOTE = (
    "classes_ is the public label set fixed at the first fit and is kept, also "
    "for a label whose last sample was deleted; guarantees compare with a fit "
    "given this label set; refit to drop a label"
)

# Share of epsilon that feature_norm='auto' gives the row-norm bound.
_SHARE = releases.SHARES.bounds


class DPLogisticRegression(
    ScoresToLabelsMixin, PrivateEstimatorMixin, ClassifierMixin, BaseEstimator
):
    """Differentially private logistic regression with certified deletion.

    Binary and multinomial (softmax) logistic regression. Rows are clipped to
    the public ``feature_norm`` and the estimator releases an
    ``(epsilon, delta)``-differentially private model under the **add/remove-one**
    relation: for any data set and any one record added to or removed from it,
    the distribution of everything released (``coef_``, ``intercept_``, and the
    noisy record count behind the public sizes) changes by at most
    ``(epsilon, delta)``. The number of samples is private, so sensitivities
    are those of summed losses.

    The objective, in the units of ``X``, is scikit-learn's::

        C * sum_i logloss(y_i, x_i . coef + intercept)
            + 1/2 ||coef||^2 + 1/2 (intercept / feature_norm)^2

    with the intercept penalized too (as ``liblinear`` with
    ``intercept_scaling=feature_norm``): privacy and deletion need strong
    convexity in every coordinate. ``C='auto'`` picks the regularization from
    the released count and the privacy level (the noise of a private model
    shrinks with the regularization).

    Solvers (``solver=``):

    * ``'output'``: certified regularized ERM (optionally constrained to
      ``coef_bound``) plus Gaussian noise (dissertation Alg. 3 / Thm 12 [1]_ with
      the noise corrected: the printed sigma is too small for its own
      sensitivity). Add/remove sensitivity ``(G + 2 tol G) / Lambda``: removing
      one record moves the minimizer by at most ``G / Lambda``
      (``G`` = bound on a record's gradient, ``Lambda = 1 / (C feature_norm^2)``)
      and the solver is certified within ``tol G / Lambda`` of it.
    * ``'objective'``: objective perturbation [2]_ [3]_, accounted as Gaussian DP
      with a closed-form Jacobian correction, and approximate-minima
      perturbation [4]_ as the safeguard for inexact minimization. Multiclass
      problems use one-vs-rest (documented in
      :mod:`sklearn_dpu.linear_model._objective_perturbation`).
    * ``'noisy_gd'``: projected noisy gradient descent (Alg. 1 / Thm 8 [1]_),
      ``max_iter`` Gaussian gradient releases composed exactly.
    * ``'langevin'``: Chourasia & Shah's noisy GD [7]_ (Alg. 2, Thm 5.1);
      :meth:`delete_samples` continues it on the remaining rows for the
      steps Thm 5.1 (18) needs (see :mod:`~sklearn_dpu.linear_model._langevin`).
    * ``'auto'``: the dissertation's Table 2-I (§2.4): noisy GD
      when the number of parameters is at most ``n * epsilon`` (its rate
      ``sqrt(d)/(n eps)`` wins), output perturbation otherwise (its rate
      ``1/sqrt(n eps)`` is dimension-free); ``n`` is the released count.

    Multinomial problems use the softmax loss with its own constants
    (``G = sqrt(2) r``, ``beta = r^2 / 2`` for rows of norm ``r``), not
    one-vs-rest: one-vs-rest would pay ``sqrt(K)`` in noise for ``K`` classes.

    :meth:`partial_fit` runs one pass of DP-SGD with per-example clipping on
    each new chunk, starting from the released model; each chunk is one
    release, composed in parallel across chunks.

    :meth:`delete_samples` gives a certified ``(deletion_epsilon, delta)``
    guarantee: afterwards the whole state (model, counts, stored rows) is
    ``(epsilon_del, delta)``-indistinguishable from a fit on the remaining
    samples, with ``epsilon_del`` reported. A planner after *When to Forget?*
    [5]_ picks per request, from public quantities only:

    * noise only: keep the released model; its noise already hides the deleted
      samples (group privacy of the release);
    * noise + fine-tune: Descent-to-Delete's perturbed gradient descent [6]_,
      restarted from the *published* model (no secret state), solved to the
      certified tolerance on the remaining rows, then fresh noise;
    * retrain (exact; for streams, replay from the earliest chunk that holds a
      row deleted so far and not yet removed exactly, earlier noise-only
      deletions included).

    Nothing un-noised that depends on deleted rows remains (no exact
    minimizer, no gradient cache, no old noise), as Chourasia & Shah [7]_
    require. The guarantee is for requests that do not depend on earlier
    releases; an adaptive requester who saw ``p`` releases adds ``p``
    times the DP cost ([7]_ Thm 4.3).

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy of one release (a fit, one ``partial_fit`` chunk, or a
        deletion's re-release). ``privacy_spent_`` composes them all.
    delta : float, default=1e-5
        Use ``delta`` well below ``1 / n_samples``.
    feature_norm : float or 'auto', default=1.0
        Public bound on the L2 norm of a feature row; longer rows are scaled
        down to it. A number, in ``[1e-150, 1e150]`` (its square must be a
        normal float64; ``[1e-30, 1e30]`` for float32 data, whose
        coefficients are float32), is never computed from the data (see
        :class:`~sklearn_dpu.preprocessing.PublicBoundsScaler`); ``'auto'``
        releases one, ``feature_norm_``, for 10% of ``epsilon``.
    C : float or 'auto', default='auto'
        Inverse regularization strength, as in
        :class:`~sklearn.linear_model.LogisticRegression` (see the objective
        above). ``'auto'``: chosen from the released count and ``epsilon``.
    fit_intercept : bool, default=True
    solver : {'auto', 'output', 'objective', 'noisy_gd', 'langevin'}, default='auto'
    max_iter : int, default=20
        ``'noisy_gd'``: gradient steps (each a release, all composed; the
        preconditioned steps converge in tens). ``'output'``/``'objective'``:
        cap on quasi-Newton iterations (Newton steps then finish the
        certification).
    tol : float, default=1e-2
        Certified optimality of ``'output'``/``'objective'``: the solver stops
        at gradient norm ``tol * G``, and the sensitivity grows by the factor
        ``1 + 2 tol``.
    coef_bound : float, default=None
        Radius of the ball the normalized coefficients (``feature_norm * coef``
        and the intercept, all classes) are constrained to: the constrained ERM
        of ``'output'``, the projection of ``'noisy_gd'`` and of
        :meth:`partial_fit`. ``None``: unconstrained, or for projections
        ``sqrt(2 n ln K / Lambda)``, which contains the regularized minimizer.
        Not supported by ``'objective'``.
    batch_size : int, default=256
        :meth:`partial_fit`: expected rows per DP-SGD step.
    deletion_epsilon : float, default=None
        Epsilon each deletion must be certified at (with ``delta``);
        ``None`` means ``epsilon``. With the default a single deletion goes by
        noise only (the release already hides one sample at ``epsilon``); the
        next one doubles the group and triggers a fine-tune or a retrain, each
        a re-release charged to the budget. Smaller values force re-releases
        sooner and certify deletions more strongly.
    random_state : int, RandomState instance or None, default=None
        Source of noise. ``None`` draws fresh OS entropy for every release. An
        int makes fits reproducible and is for tests only: anyone who knows it
        can remove the noise.
    budget : PrivacyBudget, default=None
        Shared budget charged before each release.
    verbose : int, default=0
        Progress on stdout: ``1`` prints, after each fit, chunk, deletion, the
        releases, ``n_iter_`` and the epsilon spent; ``2`` adds each release's record
        and the solver's steps (public schedule, epsilon composed so far; about ten
        lines a run, ``3``: every step). Never a loss, gradient, convergence test,
        record count or timing: public values only (:mod:`sklearn_dpu._progress`).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The label set, treated as public: it is read from ``y`` at fit (or
        ``classes`` at the first :meth:`partial_fit`) and kept after
        deletions, also when no remaining sample has a label (see Notes).
        What depends on the number of classes is as public: the shapes of
        ``coef_`` and ``intercept_``, ``C_`` (``solver='objective'``) and the
        refusal of a single label. A label that one person alone holds reveals
        them: pass ``classes`` to :meth:`partial_fit` when that matters.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        In the units of ``X``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    solver_ : str
        The solver used for the last batch release.
    C_ : float
        The regularization used (``C`` or the one ``'auto'`` chose).
    feature_norm_ : float
        ``feature_norm='auto'`` only: the released bound, a private median of
        the row norms (:mod:`~sklearn_dpu.linear_model._auto_bounds`), kept
        by later chunks and deletions.
    n_iter_ : int
        Noisy iterations of the last release: ``'noisy_gd'`` steps, DP-SGD
        batches (both public), and 1 for output/objective perturbation (one
        release; the certified solver's own iteration count depends on the data
        and is not kept).
    privacy_spent_ : PrivacySpent
        ``(epsilon, delta)`` of everything released, with parallel composition
        over chunks.
    privacy_ledger_ : list of dict
        Every release: mechanism, ``dp_accounting`` event, chunks, reference.
        Events are the exact Gaussian-DP equivalents of what ran (a run of
        ``T`` steps with multiplier ``m`` is one Gaussian with ``m/sqrt(T)``).
    deletion_log_ : list of DeletionReport
    unlearning_state_ : LogisticUnlearningState
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.

    Notes
    -----
    ``sample_weight`` is not accepted: a weight scales a record's
    contribution, and unbounded weights break every sensitivity bound above.

    Side channels outside the guarantee: the wall time of every call
    (``wall_time_s`` in deletion reports) is not privatized. Every other
    number a :class:`~sklearn_dpu.unlearning.DeletionReport` holds comes from
    parameters, request sizes and the released (charged) record counts:
    ``gradient_evaluations`` is the planner's prediction (public iteration
    counts times released counts), not the realized count, which depends on
    the private rows. The fitted state keeps no data-dependent iteration
    count.

    The label set ``classes_`` is public and fixed by the first fit. A
    deletion never changes it, even when it removes the last sample of a
    label: checking would publish whether any remaining sample carries that
    label. "A fit on the remaining samples" in deletion guarantees is a fit
    with this label set (as ``partial_fit(..., classes=classes_)`` would make);
    a label without samples keeps a coefficient row driven by the
    regularization and by the other classes. Call :meth:`fit` on the
    remaining data to drop the label (a new release).

    See Also
    --------
    sklearn.linear_model.LogisticRegression : the non-private estimator.
    sklearn_dpu.unlearning.planner : the deletion planner.

    References
    ----------
    .. [1] M. E. Ullah, "Statistical learning via stochastic optimization under
       data privacy considerations", PhD thesis, Johns Hopkins University,
       2024: Alg. 1 /
       Thm 8; Alg. 3 / Thm 12 with the erratum on its noise; Table 2-I.
    .. [2] K. Chaudhuri, C. Monteleoni and A. D. Sarwate, "Differentially
       private empirical risk minimization", JMLR 2011.
    .. [3] D. Kifer, A. Smith and A. Thakurta, "Private convex empirical risk
       minimization and high-dimensional regression", COLT 2012.
    .. [4] R. Iyengar et al., "Towards practical differentially private convex
       optimization", IEEE S&P 2019.
    .. [5] M. Van Waerebeke, M. Lorenzi, G. Neglia and K. Scaman, "When to
       Forget? Complexity trade-offs in machine unlearning", preprint, 2025:
       Thm 1-3.
    .. [6] S. Neel, A. Roth and S. Sharifi-Malvajerdi, "Descent-to-Delete",
       ALT 2021, Alg. 1-3, Thm 3.2 (perfect unlearning).
    .. [7] R. Chourasia and N. Shah, "Forget unlearning: towards true
       data-deletion in machine learning", ICML 2023, Alg. 2, Thm 3.2, Thm 4.3,
       Thm 5.1.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dpu.linear_model import DPLogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 3))
    >>> y = (X @ [1.0, -2.0, 0.5] > 0).astype(int)
    >>> clf = DPLogisticRegression(epsilon=1.0, feature_norm=4.0, random_state=0)
    >>> clf = clf.fit(X, y)
    >>> bool(clf.score(X, y) > 0.95)
    True
    >>> clf = clf.delete_samples([0, 1, 2])
    >>> clf.deletion_log_[-1].method  # 'auto' chose noisy GD here: nothing to warm-start
    'retrain'
    >>> clf = DPLogisticRegression(epsilon=1.0, feature_norm=4.0, solver="output", random_state=0)
    >>> clf = clf.fit(X, y).delete_samples([0, 1, 2])
    >>> report = clf.deletion_log_[-1]
    >>> report.method, bool(report.deletion_epsilon < 0.1)
    ('certified', True)
    """

    _parameter_constraints: dict = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [DELTA_CONSTRAINT],
        "feature_norm": [
            Interval(Real, MIN_NORM_BOUND, MAX_NORM_BOUND, closed="both"),
            StrOptions({"auto"}),
        ],
        "C": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "solver": [StrOptions({"auto", "output", "objective", "noisy_gd", "langevin"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "coef_bound": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "deletion_epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "random_state": ["random_state"],
        "budget": [HasMethods(["charge", "check"]), None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        feature_norm=1.0,
        C="auto",
        fit_intercept=True,
        solver="auto",
        max_iter=20,
        tol=1e-2,
        coef_bound=None,
        batch_size=256,
        deletion_epsilon=None,
        random_state=None,
        budget=None,
        verbose=0,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.feature_norm = feature_norm
        self.C = C
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.coef_bound = coef_bound
        self.batch_size = batch_size
        self.deletion_epsilon = deletion_epsilon
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_id: ArrayLike | None = None,
        classes: ArrayLike | None = None,
    ) -> Self:
        """Fit on ``(X, y)``: one private release.

        Parameters
        ----------
        X : {array-like, sparse matrix} or Dask array of shape (n_samples, n_features)
            Dask arrays and DataFrames: the solvers' sums run block by block on the workers
            (:mod:`~sklearn_dpu.linear_model._dask_sums`; not ``'objective'``).
        y : array-like of shape (n_samples,)
        sample_id : array-like of shape (n_samples,), default=None
            Unique hashable ids for :meth:`delete_samples` (no NaN). Default:
            the index labels if ``X`` is a pandas DataFrame, else row positions
            ``0 .. n_samples - 1``.
        classes : array-like, default=None
            The public label set, if ``y`` may lack some labels (a search's
            training part does); default: the labels of ``y``.

        Returns
        -------
        self : DPLogisticRegression
        """
        with self._atomic():
            return self._fit(X, y, requested_ids(X, sample_id), classes)

    def _fit(self, X, y, sample_id, public_classes=None):
        self._check_public_params()
        public_bound = not auto_bounds.is_auto(self.feature_norm)

        def validate():
            rows = None
            if is_dask_collection(X):  # rows normalized and kept on the workers
                Xv, classes, y_index = dask_sums.validate_fit(self, X, y)
                classes, y_index = updates.label_set(self, classes, y_index, public_classes)
            else:
                Xv, classes, y_index, rows = updates.validated_fit_data(
                    self, X, y, public_classes, clip=public_bound
                )
            registry = new_registry(Xv, self._n_coef(self.n_features_in_) + 1)
            ids = registry.check_new_ids(
                registry.default_ids(Xv.shape[0]) if sample_id is None else sample_id, Xv.shape[0]
            )
            return Xv, classes, y_index, registry, ids, rows

        def compute(data):
            Xv, classes, y_index, registry, ids, rows = data
            self.classes_ = classes
            self._output_dtype = output_dtype(Xv)
            made = self._release_bound(Xv)
            rows, A, loss = dask_sums.design(self, Xv, y_index, rows)
            registry.add(ids, rows, chunk=1, adopt=True)
            state = LogisticUnlearningState(registry, self._frozen_params())
            params, rng = self._params(), release_generator(self.random_state, len(made))
            solve = langevin.langevin_fit if params.solver == "langevin" else private_fit
            model, mechanisms = solve(params, loss, A, y_index, rng)
            state.chunks = [model]
            self.unlearning_state_ = state
            self._publish()
            self.deletion_log_ = []
            solver = model.config.solver
            if solver == "langevin":
                return [*made, langevin.langevin_release(params, mechanisms)]
            return [*made, releases.chunk_release(params, "fit", 1, solver, mechanisms)]

        plan = self._plan_releases(self.get_params(deep=False), PublicSizes.of(X))
        self._run_update("fit", plan, validate, compute, PublicSizes.of(X))
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        classes: ArrayLike | None = None,
        *,
        sample_id: ArrayLike | None = None,
    ) -> Self:
        """Add a chunk of rows: one pass of DP-SGD from the released model.

        Each call is one release, accounted on its own chunk (parallel
        composition). Later calls keep the parameters of the first (changing
        one raises ``ValueError``; call :meth:`fit` to restart).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,), default=None
            Every label of the stream; required at the first call (unless the
            estimator was fitted), optional and checked afterwards.
        sample_id : array-like of shape (n_samples,), default=None
            Default: the index labels if ``X`` is a pandas DataFrame, else row
            positions continuing those of earlier calls (not mixed in a stream).

        Returns
        -------
        self : DPLogisticRegression
        """
        with self._atomic():
            return self._partial_fit(X, y, classes, requested_ids(X, sample_id))

    def _partial_fit(self, X, y, classes, sample_id):
        first = not hasattr(self, "unlearning_state_")
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            self._check_public_params()
            chunk_no = 1
        else:
            state = self.unlearning_state_
            changed = self._changed_params(state.frozen_params)
            if langevin.handles(state) and not changed:
                langevin.refit_with_rows(self, X, y, classes, sample_id)
                return self
            if changed:
                raise ValueError(
                    f"partial_fit cannot change {', '.join(changed)} within a stream; "
                    "call fit to start a new one"
                )
            if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
                raise ValueError(
                    f"classes={np.unique(classes).tolist()!r} is not the label set of "
                    f"the stream, classes_={self.classes_.tolist()!r}"
                )
            chunk_no = len(state.chunks) + 1
        params = self._params()
        planned = releases.planned_release(params, "sgd", chunk_no)
        bounds = auto_bounds.planned_bounds(self.get_params(deep=False), _SHARE) if first else ()
        plan = ReleasePlan((*bounds, planned), exact=False, restart=first)

        def validate():
            Xv, labels, y_index, rows = updates.validated_stream_data(self, X, y, classes, first)
            if first:
                registry = new_registry(Xv, self._n_coef(Xv.shape[1]) + 1)
            else:
                registry = state.registry
            ids = registry.check_new_ids(
                registry.default_ids(Xv.shape[0]) if sample_id is None else sample_id, Xv.shape[0]
            )
            return Xv, y_index, labels, registry, ids, rows

        def compute(data):
            Xv, y_index, labels, registry, ids, rows = data
            made = []
            if first:
                self.classes_ = labels
                self._output_dtype = output_dtype(Xv)
                made = self._release_bound(Xv)
                self.unlearning_state_ = LogisticUnlearningState(registry, self._frozen_params())
                self.deletion_log_ = []
                n_ledger, theta0 = len(made), np.zeros(self._loss().n_params)
            else:  # read the state again: _run_update may hand compute copies of it
                n_ledger = len(self.privacy_ledger_)
                theta0 = self.unlearning_state_.chunks[-1].theta
            registry = self.unlearning_state_.registry
            rows = in_storage_of(self._rows(Xv, y_index) if rows is None else rows, registry)
            rng = release_generator(self.random_state, n_ledger)
            model, mechanisms = private_sgd_pass(
                self._params(), self._loss(), rows[:, :-1], y_index, theta0, rng
            )
            registry.add(ids, rows, chunk=chunk_no)
            self.unlearning_state_.chunks = [*self.unlearning_state_.chunks, model]
            self._publish()
            return [*made, releases.chunk_release(params, "sgd", chunk_no, "sgd", mechanisms)]

        self._run_update("partial_fit", plan, validate, compute)
        return self

    # ------------------------------------------------------------- deletion

    def delete_samples(self, sample_ids: Any) -> Self:
        """Remove samples with a certified guarantee (or an exact retrain).

        The planner picks noise only, noise + fine-tune or retraining (see the
        class docstring); a :class:`~sklearn_dpu.unlearning.DeletionReport` in
        ``deletion_log_`` says which, why, the certified deletion epsilon and
        the predicted and realized cost. Deletions are never refused for lack
        of budget: a re-release is charged even past the cap.

        Parameters
        ----------
        sample_ids : hashable or iterable of hashable
            Ids known at fit time: ``sample_id``, else a DataFrame's index
            labels, else row positions. A bare string or scalar is one id.

        Returns
        -------
        self : DPLogisticRegression

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
        return updates.delete_samples(self, sample_ids, _SHARE, (_LABEL_SET_NOTE,))

    def _plan_releases(self, params, sizes: PublicSizes) -> ReleasePlan:
        """One :meth:`fit`: the noised count and the model, from the parameters
        alone. Not exact: the ledger names the solver ``'auto'`` chose and
        reads the events from the mechanisms that ran (the same events)."""
        model = releases.ReleaseParams.of(auto_bounds.model_params(params, _SHARE, None))
        if model.solver == "langevin":
            planned = langevin.planned_langevin_release(model)
        else:
            planned = releases.planned_release(model, "fit", 1)
        bounds = auto_bounds.planned_bounds(params, _SHARE)
        return ReleasePlan((*bounds, planned), exact=False, restart=True)

    def _deletion_target(self) -> float:
        return self.epsilon if self.deletion_epsilon is None else self.deletion_epsilon

    # ----------------------------------------------------------- prediction

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Signed margins of the released model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, positive values predict ``classes_[1]``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=INPUT_DTYPES, reset=False)
        scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities (softmax; one-vs-rest normalized for ``'objective'``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = expit(scores)
            return np.column_stack([1.0 - p, p])
        if self._one_vs_rest():
            p = expit(scores)
            return p / p.sum(axis=1, keepdims=True)
        return softmax(scores, axis=1)

    # ------------------------------------------------------------- internals

    def _n_coef(self, n_features: int) -> int:
        return n_features + int(bool(self.fit_intercept))

    def _row_norm(self) -> float:
        return math.sqrt(1.0 + bool(self.fit_intercept))

    def _frozen_params(self) -> dict:
        """Values of the parameters a stream freezes (compared with get_params)."""
        return {name: getattr(self, name) for name in releases.FROZEN_PARAMS}

    def _one_vs_rest(self) -> bool:
        chunks = self.unlearning_state_.chunks
        return bool(chunks[-1].config.one_vs_rest)

    def _loss(self, binary: bool = False) -> LinearModelLoss:
        """The loss of the model (``binary``: the per-class loss of one-vs-rest)."""
        n_classes = 2 if binary else len(self.classes_)
        return LinearModelLoss(n_classes, self._n_coef(self.n_features_in_), self._row_norm())

    def _normalize(self, X) -> np.ndarray:
        """Clip rows to ``feature_norm``, divide by it, add the intercept column."""
        return np.ascontiguousarray(self._rows(X, None)[:, :-1])

    def _rows(self, X, y_index, norm_bound: float | None = None) -> np.ndarray:
        """Registry rows ``[a, class index]`` with ``a`` the row normalized by
        ``norm_bound`` (default: the bound in use)."""
        if norm_bound is None:
            norm_bound = self._norm_bound()
        return normalized_rows(X, y_index, norm_bound, bool(self.fit_intercept))

    def _params(self) -> releases.ReleaseParams:
        """The public parameters a release reads (``'auto'``: the model's share)."""
        bound = getattr(self, "feature_norm_", None)
        params = auto_bounds.model_params(self.get_params(deep=False), _SHARE, bound)
        return releases.ReleaseParams.of(params)

    def _norm_bound(self) -> float:
        """The row norm bound in use: the released one (an 'auto' fit), or the parameter."""
        return getattr(self, "feature_norm_", self.feature_norm)

    def _release_bound(self, X) -> list:
        """``'auto'``: draw the bound (release 0), return its record; else forget one."""
        self.__dict__.pop("feature_norm_", None)
        if not auto_bounds.is_auto(self.feature_norm):
            return []
        mechanism = auto_bounds.norm_bound_mechanism(self.epsilon, _SHARE)
        self.feature_norm_, made = auto_bounds.draw_bound(X, mechanism, self.random_state)
        return [made]

    def _check_public_params(self, n_classes: int = 2) -> None:
        """Checks that need only the parameters and the label set.

        Run before any data is read (with the binary case), and again before
        the budget is charged once the number of classes is known: one-vs-rest
        objective perturbation splits mu over the classes.
        """
        auto_bounds.check_auto_params(self.get_params(deep=False))
        releases.check_public_params(self._params(), self._row_norm(), n_classes)

    def _publish(self) -> None:
        """Set ``coef_``, ``intercept_`` and friends from the released model."""
        updates.publish(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        tags.input_tags.sparse = True  # CSR (sklearn_dpu.linear_model._sparse_rows)
        return tags
