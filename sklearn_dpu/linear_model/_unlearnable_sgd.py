"""A linear classifier trained by noisy mini-batch SGD, with exact insertions
and deletions by coupling (dissertation Ch. 4 and App. C)."""

from numbers import Integral, Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from .._compat import DELTA_CONSTRAINT, HasMethods, Interval, StrOptions, _fit_context, _num_samples
from .._validation import is_dask_collection
from ..base import PublicSizes
from ..exceptions import UnlearningError
from ..privacy.clipping import MAX_NORM_BOUND, MIN_FLOAT32_NORM_BOUND
from ..privacy.ledger import ReleasePlan
from ..unlearning.ids import deletion_request, requested_ids
from ..unlearning.report import DeletionPlan
from ._auto_bounds import is_auto
from ._coupled_sgd import InsertionRecord
from ._input_rows import validated_xy
from ._sgd_base import BaseUnlearnableSGD
from ._sgd_dask import validate_dask
from ._sgd_edits import (
    delete_from_run,
    insert_into_run,
    record_edit,
    worst_insertion,
)
from ._sgd_plan import changed_run_params, check_sampling, run_params, schedule_run, size_bucket
from ._sgd_releases import deletion_outcome, planned_fit
from ._sparse_rows import in_storage_of, new_registry

__all__ = ["UnlearnableSGDClassifier", "schedule_run", "size_bucket"]


class UnlearnableSGDClassifier(BaseUnlearnableSGD):
    """Linear classifier by noisy mini-batch SGD, with exact deletion and insertion.

    Training is noisy mini-batch SGD (dissertation [1]_ Alg. 21; with
    ``solver='nesterov'`` the accelerated Alg. 9; with no noise it is
    sub-sample GD, Alg. 19). The estimator stores the whole run. An edit —
    :meth:`delete_samples`, or :meth:`partial_fit`, which **inserts** rows into
    the training set — couples the stored run with a run on the edited data:
    it rewrites the mini-batches that contained the edited rows (a maximal
    coupling of the indices), rejection-samples each of those noisy steps
    against its new Gaussian law, and only at the first rejection reflects
    that step and recomputes the rest of the run (Alg. 22 / Alg. 10).

    **Exact.** After any sequence of edits, the whole stored state — model,
    iterates, noisy gradients, mini-batch indices — has exactly the
    distribution of :meth:`fit` on the current training set with the same
    parameters ([1]_ Lemma 29). Everything that depends on the number of
    rows depends on it only through the size class (to within a factor
    ``2**(1/8)``) of a **noised count** ``n + Z`` released at fit. An edit of
    ``k`` rows shifts the stored count to ``n + Z -/+ k``, exactly the count
    a fresh fit on the edited data would draw with the same ``Z``; an edit
    that keeps it in its class is coupled, one that moves it to another
    class triggers a full refit, a fresh fit by construction. With a public
    ``schedule_size`` nothing depends on the number of rows and edits never
    change the schedule. **The label set is public**: ``classes_`` (the
    labels of ``y`` at :meth:`fit`, or ``classes`` at the first
    :meth:`partial_fit`) is fixed at the first fit and kept after deletions,
    also for a label whose last row was deleted (no refit; that label's
    outputs keep training on no rows, as a fit given the label set would).
    Pass the labels you would publish anyway: a label that only one person
    holds reveals them. Exactness and privacy compare with a fit **given
    this label set**. Deleted rows and their ids are gone from the
    state. Edits must be chosen independently of the estimator's randomness
    (oblivious requests, [1]_ Ch. 4); a request chosen after looking at the
    model is outside the guarantee.

    **Cheap.** An edit costs about ``max_iter * batch_size / n`` gradient
    pairs to verify, plus, with probability at most ``recompute_bound_``
    (the target ``recompute_rate`` by default), a recompute of the steps
    after the first rejection.

    **Private.** Every step adds Gaussian noise to a mini-batch gradient
    whose per-record contribution is bounded by clipping rows to
    ``feature_norm`` and the loss's Lipschitz constant, so each published
    fit is (``epsilon``, ``delta``)-DP under the **add/remove-one**
    relation: a noised record count (a Gaussian, share
    ``COUNT_EPSILON_SHARE = 0.05`` of epsilon and ``0.1`` of delta) fixes
    the size class, hence the steps, batch size and sampling rate; the run
    (each step a Poisson-subsampled Gaussian) gets the rest, and its noise is
    the larger of what that needs (PLD accountant) and what
    ``recompute_rate`` needs. ``privacy_spent_`` right after a fit is at most
    ``epsilon``; edits may add re-releases (Notes). The exact number of rows
    and the record values never set a published quantity. The number of
    rows an edit deletes or inserts (the request) is public.

    Read the Notes for what is published after an edit and how it is
    accounted.

    Parameters
    ----------
    loss : {"log_loss", "hinge", "modified_huber"}, default="log_loss"
        ``log_loss`` is logistic regression (multinomial for more than two
        classes); ``hinge`` and ``modified_huber`` are one-vs-rest for more
        than two classes, as in :class:`~sklearn.linear_model.SGDClassifier`.
    epsilon : float > 0 or inf, default=1.0
        Privacy target of a fit, with ``delta``. ``np.inf`` asks explicitly
        for no privacy: the count is exact, the noise is set by
        ``recompute_rate`` alone, and ``privacy_spent_.epsilon`` is inf.
    recompute_rate : float in (0, 1], default=0.05
        Target for the probability that one edit (one deleted or inserted
        row) triggers a recompute. The noise is set to the smallest level
        whose worst-case bound meets it
        (:func:`~sklearn_dpu.unlearning.coupling.noise_for_recompute_rate`):
        smaller values mean more noise. The noise is the larger of this and
        what ``epsilon`` needs. Typical data recompute less often than the
        bound, which assumes worst-case gradients. Ignored when
        ``noise_multiplier`` is set.
    noise_multiplier : float >= 0 or None, default=None
        Standard deviation of the noise added to each step's mini-batch
        gradient, in units of one record's largest contribution to it
        (``G / batch_size``, the DP-SGD noise multiplier). Overrides
        ``recompute_rate`` **and the epsilon target of the run** (epsilon
        still sets the count's noise): ``privacy_spent_`` reports what this
        noise gives, which may exceed ``epsilon`` (inf for ``0``, sub-sample
        GD: every edit that touches a used row recomputes).
        ``recompute_bound_`` reports the implied bound.
    coupling_share : float in (0, 1], default=0.5
        Share of the noise variance on which an edit's acceptance test runs.
        The rest is a reserve that no edit ever reveals, which keeps a
        recomputed model private jointly with the one it replaces (Notes).
        ``1.0`` is the dissertation's algorithm exactly: the fewest
        recomputes, but models published before and after a recompute
        together are not private (``privacy_spent_`` becomes infinite after
        the first edit that touches a used row).
    max_iter : int or "auto", default="auto"
        Number of SGD steps ``T``. ``"auto"``: the dissertation's tuning for
        the recompute rate, ``T = (rho n / sqrt(p))^(2/3)`` for ``"sgd"``
        (Theorem 44) and ``(rho n / sqrt(p))^(2/5)`` for
        ``"nesterov"`` (Theorem 22), with ``p`` coefficients per
        output and ``H D / G = 1``; fewer steps need less noise.
    batch_size : int or "auto", default="auto"
        Expected mini-batch size ``m`` (capped at ``n``). ``"auto"``: ``T``
        for ``"sgd"`` and ``T^3`` for ``"nesterov"`` (same theorems).
    learning_rate : float or "auto", default="auto"
        Constant step size. ``"auto"`` is ``1 / (2 (H + alpha))``, with ``H``
        the loss's smoothness on rows of norm ``feature_norm`` (Prop. 7 of
        [1]_); for ``hinge``, ``H = ||row||^2``.
    alpha : float, default=1e-4
        L2 penalty ``alpha / 2 * ||coef_||^2`` (not on the intercept), as in
        :class:`~sklearn.linear_model.SGDClassifier`.
    fit_intercept : bool, default=True
        The intercept is learned as the weight of a constant feature equal to
        ``feature_norm``.
    feature_norm : float or "auto", default=1.0
        Public bound on the L2 norm of a row; longer rows (at fit, insertion
        and prediction) are scaled down to it. A number is never computed from
        the data; it must be at least ``1e-30`` (the rows are stored in
        float32, whose rounding below its normal range would leave rows
        longer than a smaller bound) and at most ``1e150`` (its square must
        be a normal float64; ``1e30`` for float32 data). ``"auto"``: a private median of the
        rows' L2 norms, released first (pure DP) for
        ``BOUND_EPSILON_SHARE = 0.1`` of epsilon as
        ``feature_norm_`` (kept by edits); the count and run get the other
        ``0.9 epsilon``, so ``privacy_spent_`` stays at most ``epsilon``.
        Deletions are then certified at ``k * 0.1 epsilon``, ``k`` the rows
        deleted since the fit (the kept bound; the run stays exact).
    solver : {"nesterov", "sgd"}, default="nesterov"
        ``"nesterov"``: the last iterate of accelerated SGD (Alg. 9), which
        reaches a given accuracy in fewer steps, hence with less noise for the
        same ``recompute_rate`` (the dissertation's choice for
        ``d <= (rho n)^(3/4)``, App. C). ``"sgd"``: the average iterate of
        plain SGD (Alg. 21).
    batch_sampling : {"poisson", "fixed"}, default="poisson"
        ``"poisson"``: every row joins every batch independently with
        probability ``batch_size / n_ref`` (``n_ref`` the size class); edits
        drop or add rows, each edit of several rows is one coupled edit, and
        the privacy of the run is amplified by subsampling. ``"fixed"``:
        uniform batches of exactly ``batch_size`` rows, Alg. 21 as printed;
        edits are handled one row at a time (Claims 5 and 6), a step's shift
        is twice as large, and edits that touch a used row are not accounted
        (``privacy_spent_`` becomes infinite, Notes). **Offered only without
        a privacy target**: ``"fixed"`` requires ``epsilon=np.inf`` (else
        :meth:`fit` raises ``ValueError`` before reading any data). Uniform
        ``m``-subsets of the ``n`` real rows include a row at rate ``m / n``,
        which depends on the exact, private ``n``: accounting them at the
        rate of a noised or public size would understate the privacy loss
        whenever that size exceeds ``n``.
    delta : float in (0, 0.5), default=1e-5
        The delta of the privacy target and of ``privacy_spent_``.
    schedule_size : int > 0 or None, default=None
        A **public** number of samples that sets the schedule (steps, batch
        size, Poisson sampling rate ``batch_size_ / schedule_size``, noise)
        instead of the noised count: no count is released and the run gets
        the whole ``(epsilon, delta)``. The fit is then a list of exact
        events computable from the parameters (with an integer ``max_iter``;
        ``"auto"`` steps also need the number of features), so budgeted
        searches and :meth:`PrivacyBudget.can_afford` compose it exactly
        (without it they compose approximate bounds, and two of them exceed
        any budget's delta). The privacy of a Poisson-subsampled Gaussian
        step depends on its sampling rate and noise only, not on the true
        number of rows, so the guarantee holds whatever the true ``n``; a
        ``schedule_size`` far from it only costs accuracy (expected batches
        of ``batch_size_ * n / schedule_size`` rows, normalized by
        ``batch_size_``). It must **not be computed from the data** (or must
        come from a release charged to the same budget). It is a
        hyper-parameter: edits never change the schedule, which keeps them
        exact without refits.
    random_state : int, RandomState instance or None, default=None
        Source of the noise, the batches and the coupling. ``None`` draws
        fresh OS entropy for the fit and for every edit and stores no
        generator state. An int makes runs reproducible; it is for tests:
        anyone who knows it can remove the noise.
    budget : PrivacyBudget, default=None
        Shared budget charged with every release; see
        :class:`~sklearn_dpu.privacy.PrivacyBudget`. A fit or insertion that
        could exceed it is refused before the data are read; a deletion is
        never refused.
    verbose : int, default=0
        Progress on stdout: ``1`` prints, after each fit, chunk, deletion, the
        releases, ``n_iter_`` and the epsilon spent; ``2`` adds each release's record
        and the solver's steps (public schedule, epsilon composed so far; about ten
        lines a run, ``3``: every step). Never a loss, gradient, convergence test,
        record count or timing: public values only (:mod:`sklearn_dpu._progress`).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The label set, treated as public: the labels of ``y`` at :meth:`fit`
        (or ``classes`` at the first :meth:`partial_fit`), kept after
        deletions, also for a label with no row left. What depends on the
        number of classes is as public: the shapes of ``coef_`` and
        ``intercept_``, and ``learning_rate_``.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Weights of the clipped rows.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : int
        Steps of the stored run (``max_iter``, or its recipe).
    noise_multiplier_ : float
        Noise of a step, in units of ``G / batch_size_``.
    recompute_bound_ : float
        Proven upper bound on the probability that one edit (one row)
        triggers a recompute.
    batch_size_ : float
        Normalizer of a step's gradient sum: ``min(batch_size, n_ref)``, where
        ``n_ref = 2**(floor(8 log2 n_noisy) / 8)`` is the size class of the
        noised count (clamped to ``MIN_NOISY_COUNT = 16``).
    learning_rate_ : float
        The step size: ``learning_rate``, or for ``"auto"`` one from the
        parameters, the (public or released) ``feature_norm`` and the number
        of classes.
    feature_norm_ : float
        ``feature_norm="auto"`` only: the released bound (the first entry of
        ``privacy_ledger_``).
    privacy_ledger_ : list of dict
        The fit and every later release (see Notes).
    privacy_spent_ : PrivacySpent
        (epsilon, delta) of everything published, composed over the ledger
        (computed on first access; PLD takes about a second).
    privacy_per_model_ : PrivacySpent
        (epsilon, delta) of one published model on its own.
    deletion_log_ : list of DeletionReport
    insertion_log_ : list of InsertionRecord
        One entry per :meth:`partial_fit` insertion: rows inserted, whether
        it refit, steps tested and recomputed (the counts its ledger entry
        shows; no timings).
    unlearning_state_ : CoupledSGDState
        The stored run and the data it needs (size ``O(T (m + K p))``
        numbers plus ``n (d + 1)`` float32; ``unlearning_state_.nbytes()``).
    edit_ledger_ : SGDEditLedger
        The bookkeeping of the edits: parameters of the fit, the noised
        count as shifted by edits, streams and chunks used, steps whose
        reserve is charged, edit counters.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.

    Notes
    -----
    **What is published, and how it is accounted.** The published model
    (``coef_``, ``intercept_``) is always the model of the stored run. An edit
    whose steps are all accepted leaves it bit-identical: nothing new is
    published. An edit that recomputes publishes a new model, whose law is
    that of a fresh fit — but it is *not* independent of the model it
    replaces: the runs share their first steps, and the rejected step is a
    reflection of the old one, computed from the same noise. Composing the
    two models as if they were independent fits would be wrong (two releases
    ``f + N`` and ``f - N`` are each private and jointly reveal ``f``).

    This estimator therefore splits each step's noise into a part that the
    acceptance test uses (variance share ``coupling_share``) and a reserve that
    every version of the step keeps unchanged. With Poisson batches, the
    acceptance decisions depend on the noise and on the edited rows only; so
    everything ever published about one step, over all edits, reveals about
    a row present throughout at most a Poisson-subsampled Gaussian with
    multiplier ``noise_multiplier_ * sqrt(1 - coupling_share)`` (the reserve),
    and steps compose adaptively [derived]. The ledger charges each step once
    at ``noise_multiplier_`` when it is computed, once more at the reserve
    multiplier the first time an edit tests it, and every recomputed step
    afresh. ``privacy_spent_`` composes all of it with the PLD accountant.

    What that does **not** cover, stated plainly:

    * the edited rows themselves, when models from before and after the edit
      are compared. After a deletion the state holds nothing of the deleted
      row (exactness), so an observer who sees only later models learns
      nothing about it. One who also saw earlier models saw the row in them
      anyway; comparing (the "before/after" attack that Chourasia & Shah's
      threat model excludes, [3]_ §2) also
      shows whether the edit recomputed (probability at most
      ``recompute_bound_``) and, if it did, the difference of the two
      versions of the rejected step: the edited row's gradient plus noise of
      twice the coupled scale. The ledger does not bound this. A row inserted
      by :meth:`partial_fit` is protected in each published model on its own
      (``privacy_per_model_``); across models its contribution to accepted
      steps is folded into stored noise, which the ledger does not bound
      either.
    * ``batch_sampling="fixed"`` (only with ``epsilon=np.inf``): the
      replacement row drawn into a batch enters the acceptance test, so edits
      that touch a used row are recorded as non-private releases.

    A deletion whose steps all pass their test leaves the model unchanged,
    but testing a step against its reserve for the first time is itself a
    release: its report's ``rerelease_epsilon`` is the epsilon (at
    ``delta``) of what that call added to the ledger, and is None only when
    the ledger did not grow.

    **What reports publish.** Deletion reports and ``insertion_log_`` give
    the steps tested and recomputed (or a refit): exactly the counts that
    the edit's ledger entry already shows, and functions of the sampling
    randomness, the request and the coupling decisions that entry charges.
    A retrain's cost is estimated from published quantities only
    (``n_iter_ * batch_size_``). No count of gradient evaluations (a sum of
    batch sizes, which grows with the exact number of rows) is published or
    stored; the only timing is the deletion report's ``cost.wall_time_s``,
    the measured time of that call's execution, as for every estimator.

    **Known exceptions.** With ``batch_sampling="fixed"`` (not private:
    ``epsilon=np.inf``), a fit whose batch is not smaller than the training
    set raises, and a deletion that would leave at most ``batch_size`` rows
    is refused.

    **Exactness needs the stored noisy gradient, not the raw noise, and the
    new-over-old acceptance ratio** (errata to [1]_: Alg. 13, step 12 and
    Alg. 27, step 4 print the ratio inverted, and Alg. 10 / 22 leave the
    stored value on acceptance implicit); both are
    tested, with the broken variants as negative controls.

    References
    ----------
    .. [1] M. E. Ullah, "Statistical learning via stochastic optimization under
       data privacy considerations", PhD thesis, Johns Hopkins University,
       2024, Ch. 4 and App. C: Alg. 9/10, Alg. 19-22, Lemmas 26-30,
       Theorems 22 and 44.
    .. [2] E. Ullah, T. Mai, A. Rao, R. Rossi and R. Arora, "Machine unlearning
       via algorithmic stability", COLT 2021.
    .. [3] R. Chourasia and N. Shah, "Forget unlearning: towards true
       data-deletion in machine learning", ICML 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dpu.linear_model import UnlearnableSGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 5)) / np.sqrt(5)
    >>> y = (X @ [1.0, -1.0, 0.5, 0.0, 2.0] > 0).astype(int)
    >>> clf = UnlearnableSGDClassifier(random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    >>> clf = clf.delete_samples([0, 1, 2])
    >>> clf.deletion_log_[-1].method
    'exact'
    >>> clf = clf.partial_fit(X[:2], y[:2], sample_id=["a", "b"])
    """

    _parameter_constraints: dict = {
        "loss": [StrOptions({"log_loss", "hinge", "modified_huber"})],
        "epsilon": [Interval(Real, 0, None, closed="right")],
        "recompute_rate": [Interval(Real, 0, 1, closed="right")],
        "noise_multiplier": [Interval(Real, 0, None, closed="left"), None],
        "coupling_share": [Interval(Real, 0, 1, closed="right")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "batch_size": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "learning_rate": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean"],
        "feature_norm": [
            Interval(Real, MIN_FLOAT32_NORM_BOUND, MAX_NORM_BOUND, closed="both"),
            StrOptions({"auto"}),
        ],
        "solver": [StrOptions({"sgd", "nesterov"})],
        "batch_sampling": [StrOptions({"poisson", "fixed"})],
        "delta": [DELTA_CONSTRAINT],
        "schedule_size": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "budget": [HasMethods(["charge", "check"]), None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        loss="log_loss",
        epsilon=1.0,
        recompute_rate=0.05,
        noise_multiplier=None,
        coupling_share=0.5,
        max_iter="auto",
        batch_size="auto",
        learning_rate="auto",
        alpha=1e-4,
        fit_intercept=True,
        feature_norm=1.0,
        solver="nesterov",
        batch_sampling="poisson",
        delta=1e-5,
        schedule_size=None,
        random_state=None,
        budget=None,
        verbose=0,
    ):
        self.loss = loss
        self.epsilon = epsilon
        self.recompute_rate = recompute_rate
        self.noise_multiplier = noise_multiplier
        self.coupling_share = coupling_share
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.feature_norm = feature_norm
        self.solver = solver
        self.batch_sampling = batch_sampling
        self.delta = delta
        self.schedule_size = schedule_size
        self.random_state = random_state
        self.budget = budget
        self.verbose = verbose

    # ----------------------------------------------------------- planning

    def _plan_releases(self, params, sizes: PublicSizes) -> ReleasePlan:
        """What one :meth:`fit` adds to the ledger, from the parameters and the
        public number of features alone: ``feature_norm='auto'``'s bound, then
        the count and the run (exact with ``schedule_size`` and an integer
        ``max_iter``, else a bound;
        :func:`~sklearn_dpu.linear_model._sgd_releases.planned_fit`)."""
        return planned_fit(params, sizes.n_features)

    # ---------------------------------------------------------------- fit

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_id: ArrayLike | None = None,
        classes: ArrayLike | None = None,
    ) -> Self:
        """Train on ``(X, y)`` from scratch and store the run.

        Parameters
        ----------
        X : {array-like, sparse matrix, Dask array} of shape (n_samples, n_features)
            Dask: rows stored on the workers; each block of steps' batch rows come
            to the driver (``sklearn_dpu.linear_model._sgd_dask`` says what else).
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
        self : UnlearnableSGDClassifier
        """
        with self._atomic():
            return self._fit(X, y, requested_ids(X, sample_id), classes=classes)

    def _fit(self, X, y, sample_id, classes):
        params = run_params(self.get_params(deep=False), None)  # 'auto': drawn in _train
        check_sampling(params)
        # Only a budget reads the plan (with noise_multiplier: a PLD computation).
        if self.budget is not None:
            plan = self._plan_releases(self.get_params(deep=False), PublicSizes.of(X))
        else:
            plan = ReleasePlan((), exact=False, restart=True)

        public_bound = not is_auto(self.feature_norm)

        def validate():
            if is_dask_collection(X) and public_bound:  # rows stay on workers
                return (*validate_dask(self, X, y, sample_id, classes), None)
            clip_bound = params.feature_norm if public_bound else None
            Xv, yv, classes_, rows = self._validated_fit_data(X, y, classes, clip_bound)
            registry = new_registry(Xv, Xv.shape[1] + 1, dtype=np.float32)
            ids = registry.check_new_ids(
                registry.default_ids(Xv.shape[0]) if sample_id is None else sample_id, Xv.shape[0]
            )
            return registry, ids, (Xv, yv), classes_, rows

        given = classes is not None
        self._run_update("fit", plan, validate, lambda data: self._train(params, given, *data))
        return self

    # ---------------------------------------------------------- insertion

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        classes: ArrayLike | None = None,
        *,
        sample_id: ArrayLike | None = None,
    ) -> Self:
        """Insert rows into the training set, exactly.

        Unlike :meth:`sklearn.linear_model.SGDClassifier.partial_fit` ("one
        more pass over these rows"), this **adds the rows to the training
        set**: afterwards the stored run has exactly the law of :meth:`fit` on
        the old rows plus the new ones, with the hyper-parameters of the
        first fit (which must not change in between). Cost: about
        ``max_iter * batch_size_ / n`` gradient evaluations per row, plus a
        recompute with probability at most ``recompute_bound_`` per row.
        The first call (on an unfitted estimator) is :meth:`fit`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels among ``classes_``.
        classes : array-like, default=None
            All the labels, required on the first call only (as in
            scikit-learn); later it must equal ``classes_``.
        sample_id : array-like of shape (n_samples,), default=None
            Default: the index labels if ``X`` is a pandas DataFrame, else row
            positions continuing those of earlier calls (not mixed in a stream).

        Returns
        -------
        self : UnlearnableSGDClassifier
        """
        if not hasattr(self, "unlearning_state_"):
            with self._atomic():
                return self._fit(X, y, requested_ids(X, sample_id), classes=classes)
        with self._atomic():
            return self._insert(X, y, classes, requested_ids(X, sample_id))

    def _insert(self, X, y, classes, sample_id):
        state, ledger = self.unlearning_state_, self.edit_ledger_
        bound = getattr(self, "feature_norm_", None)
        changed = changed_run_params(self.get_params(deep=False), bound, ledger.params)
        if changed:
            raise ValueError(
                f"partial_fit cannot change {', '.join(changed)} of a fitted "
                f"{type(self).__name__}: the stored run depends on them. Call fit to "
                "start a new one."
            )
        if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(
                f"`classes={np.unique(classes)!r}` is not the same as on the "
                "first call: "
                f"classes_={self.classes_!r}"
            )
        # The most an insertion can release, from the public shape (only a
        # budget reads it): a refit if the shifted noised count leaves its
        # class, else every step tested and recomputed.
        worst = None
        if self.budget is not None:
            try:
                k = _num_samples(X)
            except TypeError:
                k = None
            worst = worst_insertion(ledger, state, k)
        plan = ReleasePlan(() if worst is None else (worst,), exact=False)

        def validate():
            # The clip is the pass that checks X is finite (nonfinite_x_reported_first),
            # before the ids are looked up in the fitted registry.
            with validated_xy(self, X, y, clip=True, reset=False) as (Xv, yv):
                if not np.isin(yv, self.classes_).all():
                    raise ValueError(
                        f"y contains labels not in classes_={self.classes_!r}; a fitted "
                        f"{type(self).__name__} cannot learn new classes (call fit)"
                    )
                rows = self._encode(Xv, yv, self.classes_, ledger.params.feature_norm)
            registry = state.registry
            ids = registry.check_new_ids(
                registry.default_ids(Xv.shape[0]) if sample_id is None else sample_id, Xv.shape[0]
            )
            return ids, in_storage_of(rows, registry)

        def compute(data):
            ids, rows = data
            # Read the state again: _run_update may hand compute copies of it.
            state, ledger = self.unlearning_state_, self.edit_ledger_
            # Nothing below can fail on user input: the state changes from here.
            outcomes = insert_into_run(ledger, state, ids, rows, self.random_state)
            release = record_edit(ledger, state, outcomes, "partial_fit")
            self._publish()
            self.insertion_log_ = [
                *self.insertion_log_,
                InsertionRecord(
                    n_inserted=len(rows),
                    refit=outcomes[0].refit,
                    tested_steps=sum(len(o.tested_steps) for o in outcomes),
                    recomputed_steps=sum(o.recomputed_steps for o in outcomes),
                ),
            ]
            return [] if release is None else [release]

        self._run_update("partial_fit", plan, validate, compute)
        return self

    # ----------------------------------------------------------- deletion

    def delete_samples(self, sample_ids: Any) -> Self:
        """Remove samples exactly.

        Afterwards the whole stored state has the law of :meth:`fit` on the
        remaining samples (same hyper-parameters), and holds neither their
        rows nor their ids. With Poisson batches all the ids are one coupled
        edit; with fixed batches they are deleted one after the other. The
        call is atomic: an unknown, repeated or already deleted id, or
        deleting every sample, raises before anything changes.

        Parameters
        ----------
        sample_ids : hashable or iterable of hashable
            Ids known at fit time: ``sample_id``, else a DataFrame's index
            labels, else row positions. A bare string or scalar is one id.

        Returns
        -------
        self : UnlearnableSGDClassifier

        Raises
        ------
        UnlearningError
            A bad request; nothing changes.
        """
        check_is_fitted(self)
        with self._atomic():
            return self._delete(deletion_request(self, sample_ids))

    def _check_deletable(self, sample_ids: list) -> None:
        """Every refusal of :meth:`delete_samples`, before anything changes
        (a pipeline asks every step first)."""
        state = self.unlearning_state_
        n_after = state.registry.n_samples - len(state.registry.slots_of(sample_ids))
        if state.sampling == "fixed" and n_after <= state.batch_size:
            raise UnlearningError(
                "batch_sampling='fixed' needs more than "
                f"batch_size={int(state.batch_size)} "
                "samples left; fit a new estimator with a smaller batch_size"
            )

    def _delete(self, sample_ids):
        state, ledger = self.unlearning_state_, self.edit_ledger_
        registry = state.registry
        if not isinstance(sample_ids, np.ndarray):
            sample_ids = list(sample_ids)
        self._check_deletable(sample_ids)
        slots = registry.slots_of(sample_ids)
        n_deleted = len(slots)
        # The label set is public and kept: a class may lose its last row.
        plan = DeletionPlan(
            method="exact",
            releases=None,  # what an edit releases depends on its coupling decisions
            reason="coupled deletion of the rows from the stored run",
        )

        def execute():
            # Nothing below can fail on user input: the state changes from here.
            outcomes = delete_from_run(ledger, state, slots, self.random_state)
            release = record_edit(ledger, state, outcomes, "delete_samples")
            self._publish()
            outcome = deletion_outcome(
                refit=outcomes[0].refit,
                tested_steps=sum(len(o.tested_steps) for o in outcomes),
                recomputed_steps=sum(o.recomputed_steps for o in outcomes),
                releases=() if release is None else (release,),
                n_steps=state.n_steps,
                batch_size=state.batch_size,
            )
            return self._with_kept_bound(outcome, n_deleted)

        self._run_deletion(n_deleted, plan, execute)
        return self
