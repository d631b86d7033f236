"""Differentially private logistic regression with certified deletion."""

import functools
import math
import time
from collections import Counter
from numbers import Integral, Real

import numpy as np
from dp_accounting import dp_event
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import DELTA_CONSTRAINT, HasMethods, Interval, StrOptions, _fit_context
from ..base import PrivateEstimatorMixin
from ..privacy.accounting import epsilon_spent
from ..privacy.calibration import gaussian_noise_multiplier
from ..privacy.clipping import clip_rows_l2
from ..privacy.ledger import Release
from ..privacy.random import release_generator
from ..unlearning.ids import as_id_list, requested_ids
from ..unlearning.planner import (
    NOISE_FINETUNE,
    NOISE_ONLY,
    RETRAIN,
    DeletionOption,
    linear_rate_iterations,
    plan_deletion,
)
from ..unlearning.report import DeletionReport
from ..unlearning.state import SampleRegistry, VersionedState
from ._certified_minimize import certified_minimize
from ._losses import LinearModelLoss
from ._noisy_gd_glm import dp_sgd_pass, noisy_projected_gd_glm, released_preconditioner
from ._objective_perturbation import (
    jacobian_epsilon,
    objective_perturbation_mu,
    objective_perturbation_noise_mu,
)
from ._scores import labels_from_scores

__all__ = ["DPLogisticRegression", "LogisticUnlearningState"]

# Shares of the GDP precision mu^2 of one release. The count fixes public
# sizes (ridge, solver, step sizes, batches); the AMP share covers the
# solver's tolerance in objective perturbation.
_COUNT_SHARE = 0.05
_AMP_SHARE = 0.01
# Noisy GD: share of the released Gram matrix behind its preconditioner.
_GRAM_SHARE = 0.10
# Objective perturbation: the ridge is raised until the Jacobian term
# log(1 + beta/Lambda) is at most this fraction of the per-class mu.
_JACOBIAN_FRACTION = 0.05
# C='auto': Lambda = _RIDGE[solver] * (n * G^2 * r^2 / mu^2) ** (1/3), the
# balance of ridge bias (Lambda/2n) D^2 against the noise's second-order loss
# (beta/2) sigma^2 r^2 with sigma = G / (Lambda mu) (Ullah 2024, Ch. 2, the
# regularization that balances bias and noise), the unknown ||w*||^(2/3)
# folded into the constant.
# Constants chosen on synthetic data (benchmarks/tune_dp_logistic.py), never on
# the evaluation sets.
_RIDGE = {"output": 1.0, "objective": 0.1, "noisy_gd": 0.03, "sgd": 0.03}

_REFERENCES = {
    "count": ("Gaussian mechanism on the record count, sensitivity 1 (Balle & Wang 2018, Thm 8)"),
    "output": (
        "output perturbation of the regularized ERM (Ullah 2024, PhD thesis, Alg. 3 / "
        "Thm 12) with its noise corrected (erratum: the printed sigma is too small "
        "for its own sensitivity) and add/remove sensitivity "
        "(G + 2 tol) / Lambda"
    ),
    "objective": (
        "objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Thm 9; Kifer, "
        "Smith & Thakurta 2012, Thm 2) accounted as mu'-GDP, see "
        "sklearn_dpu.linear_model._objective_perturbation; approximate minima "
        "perturbation (Iyengar et al. 2019, Alg. 1) for the solver tolerance"
    ),
    "noisy_gd": (
        "projected noisy GD (Ullah 2024, PhD thesis, Alg. 1 / Thm 8; errata: gradient "
        "in the update, loop from w_0 = 0), T Gaussian gradient sums composed exactly "
        "(Dong, Roth & Su 2022, "
        "Cor. 3.3)"
    ),
    "sgd": (
        "one-pass DP-SGD with per-example clipping (Abadi et al. 2016, Alg. 1), "
        "one noisy batch sum per record"
    ),
}

# Stated in every deletion report, whatever the deleted labels (a note that
# depended on them would publish whether a label still has samples).
_LABEL_SET_NOTE = (
    "classes_ is the public label set fixed at the first fit and is kept, also "
    "for a label whose last sample was deleted; guarantees compare with a fit "
    "given this label set; refit to drop a label"
)

# Parameters a stream freezes at its first call.
_FROZEN = (
    "epsilon",
    "delta",
    "feature_norm",
    "C",
    "fit_intercept",
    "solver",
    "max_iter",
    "tol",
    "coef_bound",
    "batch_size",
)


@functools.lru_cache(maxsize=64)
def _gdp_mu(epsilon: float, delta: float) -> float:
    """The mu of the Gaussian-DP guarantee that is exactly (epsilon, delta)-DP.

    Cached: a root search of the analytic Gaussian mechanism, pure in its
    arguments, called several times per fit.
    """
    return 1.0 / gaussian_noise_multiplier(float(epsilon), float(delta))


class LogisticUnlearningState(VersionedState):
    """Everything :class:`DPLogisticRegression` needs to delete and to stream.

    Attributes
    ----------
    registry : SampleRegistry
        Ids, arrival chunks and rows of the live training samples: the clipped,
        normalized features (and the intercept column) followed by the class
        index, ``n * (n_features + fit_intercept + 1)`` float64 values. These
        are training data: a file holding this state is as sensitive as the
        data.
    frozen_params : dict
        Parameters of the first call of the stream.
    chunks : list of dict
        One per arrival chunk (``fit`` is chunk 1, each ``partial_fit`` the
        next): ``kind`` (``"fit"`` or ``"sgd"``), ``n_noisy`` (the chunk's
        released record count), ``pending`` (samples of the chunk deleted by
        noise only since its last release), ``config`` (the public quantities
        of the release: solver, ridge, noise levels), ``parts`` (its Gaussian-DP
        components, for group privacy) and ``theta`` (the released model after
        the chunk, normalized units, ``n_params`` floats).

    Notes
    -----
    Size: O(n d) for the rows and O(t K d) for the ``t`` released checkpoints
    (``K`` classes). Nothing un-noised that depends on the data is kept: no
    exact minimizer, gradient, Hessian or count; only released values and the
    live rows.
    """

    FORMAT_VERSION = 1

    def __init__(self, registry, frozen_params):
        self.registry = registry
        self.frozen_params = frozen_params
        self.chunks = []

    def nbytes(self) -> int:
        """Bytes held by arrays of the state."""
        reg = self.registry
        total = reg.rows.nbytes + reg.ids.nbytes + reg.chunks.nbytes + reg.alive.nbytes
        return total + sum(chunk["theta"].nbytes for chunk in self.chunks)


def _part_mu(part: dict, k: int) -> float:
    """Gaussian-DP parameter of one release component for a group of ``k`` records.

    GDP group privacy: a mu-GDP mechanism is (k mu)-GDP for groups of k
    (Dong, Roth & Su 2022, Thm 2.14). Output perturbation is tighter: its
    pre-noise shift is ``(k G + 2 tol) / Lambda`` for the tolerance is paid
    once. The AMP component does not grow with ``k`` (its shift bound holds
    for any two data sets).
    """
    if k <= 0:
        return 0.0
    if part["kind"] == "output":
        return part["mu"] * (k * part["G"] + 2.0 * part["tau"]) / (part["G"] + 2.0 * part["tau"])
    if part["kind"] == "fixed":
        return part["mu"]
    return k * part["mu"]


def _chunk_mu(chunk: dict, k: int) -> float:
    return math.sqrt(sum(_part_mu(part, k) ** 2 for part in chunk["parts"]))


class DPLogisticRegression(PrivateEstimatorMixin, ClassifierMixin, BaseEstimator):
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
    feature_norm : float, default=1.0
        Public bound on the L2 norm of a feature row; longer rows are scaled
        down to it. Never computed from the data; see
        :class:`~sklearn_dpu.preprocessing.PublicBoundsScaler`.
    C : float or 'auto', default='auto'
        Inverse regularization strength, as in
        :class:`~sklearn.linear_model.LogisticRegression` (see the objective
        above). ``'auto'``: chosen from the released count and ``epsilon``.
    fit_intercept : bool, default=True
    solver : {'auto', 'output', 'objective', 'noisy_gd'}, default='auto'
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

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The label set, treated as public: it is read from ``y`` at fit (or
        ``classes`` at the first :meth:`partial_fit`) and kept after
        deletions, also when no remaining sample has a label (see Notes).
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    solver_ : str
        The solver used for the last batch release.
    C_ : float
        The regularization used (``C`` or the one ``'auto'`` chose).
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
       data-deletion in machine learning", ICML 2023, Thm 3.2, Thm 4.3.

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
        "feature_norm": [Interval(Real, 0, None, closed="neither")],
        "C": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "solver": [StrOptions({"auto", "output", "objective", "noisy_gd"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "coef_bound": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "deletion_epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "random_state": ["random_state"],
        "budget": [HasMethods(["charge", "check"]), None],
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

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, *, sample_id=None):
        """Fit on ``(X, y)``: one private release.

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
        self : DPLogisticRegression
        """
        with self._atomic():
            return self._fit(X, y, requested_ids(X, sample_id))

    def _fit(self, X, y, sample_id):
        self._check_public_params()
        mu = _gdp_mu(self.epsilon, self.delta)
        increment = self._increment(self._fit_release_plan(), restart=True)
        self._check_budget(increment, "fit")

        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        classes, y_index = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                "DPLogisticRegression needs samples of at least 2 classes in the data, "
                f"but the data contains only one class: {classes[0]!r}"
            )
        self._check_public_params(len(classes))
        registry = SampleRegistry(self._n_coef(X.shape[1]) + 1, dtype=np.float64)
        ids = registry.check_new_ids(
            registry.default_ids(len(X)) if sample_id is None else sample_id, len(X)
        )
        self._charge_budget(increment, "fit")

        self.classes_ = classes
        rows = self._rows(X, y_index)
        A = rows[:, :-1]
        registry.add(ids, rows, chunk=1)
        state = LogisticUnlearningState(registry, self._frozen())
        chunk, _ = self._release_batch(A, y_index, release_generator(self.random_state, 0))
        state.chunks = [chunk]
        self.unlearning_state_ = state
        self._publish()
        ran = self._planned_release("fit", mu, 1, True, chunk["config"]["solver"])
        self._set_ledger([ran.to_dict()])
        self.deletion_log_ = []
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, *, sample_id=None):
        """Add a chunk of rows: one pass of DP-SGD from the released model.

        Each call is one release, accounted on its own chunk (parallel
        composition). Later calls keep the parameters of the first (changing
        one raises ``ValueError``; call :meth:`fit` to restart).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
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
        mu = _gdp_mu(self.epsilon, self.delta)
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            self._check_public_params()
            chunk_no = 1
        else:
            state = self.unlearning_state_
            changed = [k for k, v in state.frozen_params.items() if getattr(self, k) != v]
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
        planned = [self._planned_release("sgd", mu, chunk_no, with_count=True)]
        increment = self._increment(planned, restart=first)
        self._check_budget(increment, "partial_fit")

        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], reset=first)
        check_classification_targets(y)
        if first:
            labels = np.unique(classes)
            if len(labels) < 2:
                raise ValueError("classes must contain at least 2 classes")
            registry = SampleRegistry(self._n_coef(X.shape[1]) + 1, dtype=np.float64)
        else:
            labels = self.classes_
            registry = state.registry
        unseen = np.setdiff1d(np.unique(y), labels)
        if unseen.size:
            raise ValueError(
                f"y contains labels {unseen.tolist()!r} that are not in classes_ "
                f"{labels.tolist()!r}: the label set is fixed at the first call; pass "
                "every label of the stream in `classes`"
            )
        ids = registry.check_new_ids(
            registry.default_ids(len(X)) if sample_id is None else sample_id, len(X)
        )
        self._charge_budget(increment, "partial_fit")

        if first:
            self.classes_ = labels
            state = LogisticUnlearningState(registry, self._frozen())
            self.unlearning_state_ = state
            self.deletion_log_ = []
            ledger = []
            theta0 = np.zeros(self._loss().n_params)
        else:
            ledger = list(self.privacy_ledger_)
            theta0 = state.chunks[-1]["theta"]
        y_index = np.searchsorted(labels, y)
        rows = self._rows(X, y_index)
        A = rows[:, :-1]
        rng = release_generator(self.random_state, len(ledger))
        chunk = self._release_stream(A, y_index, theta0, rng)
        registry.add(ids, rows, chunk=chunk_no)
        state.chunks = [*state.chunks, chunk]
        self._publish()
        self._set_ledger([*ledger, *(r.to_dict() for r in planned)])
        return self

    # ------------------------------------------------------------- deletion

    def delete_samples(self, sample_ids):
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
        with self._atomic():
            return self._delete_samples(as_id_list(sample_ids))

    def _delete_samples(self, sample_ids):
        started = time.perf_counter()
        state = self.unlearning_state_
        registry = state.registry
        slots = registry.slots_of(sample_ids)
        deleted_per_chunk = Counter(registry.chunks[slots].tolist())
        plan, context = self._plan(deleted_per_chunk)
        target = self._deletion_target()

        mu = _gdp_mu(self.epsilon, self.delta)
        if plan.action == NOISE_ONLY:
            redone = []
        elif plan.action == NOISE_FINETUNE:
            redone = [1]
        else:
            redone = list(range(context["first_affected"], len(state.chunks) + 1))
        planned = [self._rerelease(state.chunks[c - 1], mu, c) for c in redone]
        increment = self._increment(planned, restart=False)
        self._charge_budget(increment, "delete_samples", mandatory=True)

        if redone:
            # Work on the remaining rows; the registry changes only at the end.
            keep = registry.alive[: registry.size].copy()
            keep[slots] = False
            live_rows = registry.rows[: registry.size][keep]
            live_chunks = registry.chunks[: registry.size][keep]

        chunks = [dict(c) for c in state.chunks]
        for c, k in deleted_per_chunk.items():
            chunks[c - 1]["pending"] = chunks[c - 1]["pending"] + k
        fell_back = False
        if plan.action == NOISE_FINETUNE:
            A, y_index = live_rows[:, :-1], live_rows[:, -1].astype(np.intp)
            rng = release_generator(self.random_state, len(self.privacy_ledger_))
            n_noisy = chunks[0]["n_noisy"] - chunks[0]["pending"]
            cap = max(1, int(context["retrain_iterations"]))
            try:
                chunk, _ = self._fit_chunk(
                    A, y_index, n_noisy, rng, theta0=chunks[0]["theta"], max_iter=cap
                )
            except RuntimeError:
                # The certified path ran past the retrain prediction: retrain.
                fell_back = True
                chunk, _ = self._fit_chunk(A, y_index, n_noisy, rng)
            chunks[0] = chunk
        elif plan.action == RETRAIN:
            first = context["first_affected"]
            for offset, c in enumerate(range(first, len(chunks) + 1)):
                rows = live_rows[live_chunks == c]
                A, y_index = rows[:, :-1], rows[:, -1].astype(np.intp)
                rng = release_generator(self.random_state, len(self.privacy_ledger_) + offset)
                n_noisy = chunks[c - 1]["n_noisy"] - chunks[c - 1]["pending"]
                if chunks[c - 1]["kind"] == "fit":
                    chunk, _ = self._fit_chunk(A, y_index, n_noisy, rng)
                else:
                    theta0 = chunks[c - 2]["theta"] if c > 1 else np.zeros(self._loss().n_params)
                    chunk, _ = self._sgd_chunk(A, y_index, n_noisy, theta0, rng)
                chunks[c - 1] = chunk

        registry.remove(slots)
        state.chunks = chunks
        self._publish()
        ran = [self._rerelease(chunks[c - 1], mu, c) for c in redone]
        self._set_ledger([*self.privacy_ledger_, *(r.to_dict() for r in ran)])
        elapsed = time.perf_counter() - started

        option = plan.option(RETRAIN if fell_back else plan.action)
        if plan.action == RETRAIN or fell_back:
            method, eps_del = "retrain", None
            guarantee = (
                "exact: the model, the counts and the stored rows have the "
                "distribution of a fit on the remaining samples (streams: "
                "replayed from the earliest chunk holding any row deleted so "
                "far); nothing of the "
                "deleted rows is kept"
            )
        else:
            method, eps_del = "certified", plan.epsilon
            guarantee = (
                f"the whole state is ({plan.epsilon:.4g}, {self.delta:g})-"
                "indistinguishable from a fit on the remaining samples "
                f"(non-adaptive requests; Gaussian DP, mu={plan.mu:.4g}); no "
                "un-noised value depending on the deleted rows is kept"
            )
        retrain_option = plan.option(RETRAIN)
        self._log_deletion(
            DeletionReport(
                n_deleted=len(slots),
                method=method,
                guarantee=guarantee,
                cost={
                    "action": RETRAIN if fell_back else plan.action,
                    "wall_time_s": elapsed,
                    # Public: iterations predicted from released counts, times
                    # those counts. The realized count (iterations x exact rows)
                    # is a function of the private data and is not published.
                    "gradient_evaluations": float(option.predicted_gradient_evaluations),
                    "predicted_gradient_evaluations": float(
                        plan.option(plan.action).predicted_gradient_evaluations
                    ),
                    "fell_back_to_retrain": fell_back,
                },
                retrain_cost={
                    "gradient_evaluations": float(retrain_option.predicted_gradient_evaluations),
                    "wall_time_s": float(
                        retrain_option.predicted_gradient_evaluations
                        * self._seconds_per_row_gradient()
                    ),
                },
                deletion_epsilon=eps_del,
                deletion_delta=self.delta if eps_del is not None else None,
                rerelease_epsilon=(
                    epsilon_spent([r.event for r in planned], self.delta) if planned else None
                ),
                reason=plan.reason
                + (
                    "; the fine-tune did not certify within its budget and fell back to retraining"
                    if fell_back
                    else ""
                )
                + f"; target deletion epsilon {target:.4g}",
                notes=(_LABEL_SET_NOTE,),
            )
        )
        return self

    def _seconds_per_row_gradient(self) -> float:
        """Machine speed for the retrain estimate, timed on public random rows.

        Timing the fit itself would keep, in the state, a number that depends
        on the deleted rows (their count); this depends on nothing private.
        """
        loss = self._loss()
        rows = np.random.default_rng(0).normal(size=(500, loss.n_coef))
        labels = loss.encode_labels(np.arange(500) % loss.n_classes)
        theta = np.zeros(loss.n_params)
        started = time.perf_counter()
        loss.value_and_grad(theta, rows, labels)
        return (time.perf_counter() - started) / 500

    def _increment(self, planned: list, restart: bool) -> list:
        """Budget increment of ``planned``; nothing to compute without a budget
        (the ledger's own accounting is done once, by ``_set_ledger``)."""
        if self.budget is None:
            return []
        return self._budget_increment(planned, restart=restart)

    def _fit_release_plan(self) -> list[Release]:
        """The releases one :meth:`fit` makes, from the parameters alone."""
        return [self._planned_release("fit", _gdp_mu(self.epsilon, self.delta), 1, with_count=True)]

    def _rerelease(self, chunk: dict, mu: float, number: int) -> Release:
        """A chunk's model released again (its count is reused, not re-released)."""
        return self._planned_release(
            chunk["kind"],
            mu,
            number,
            with_count=False,
            solver=chunk["config"]["solver"],
        )

    def _deletion_target(self) -> float:
        return self.epsilon if self.deletion_epsilon is None else self.deletion_epsilon

    def _plan(self, deleted_per_chunk: Counter):
        """The deletion plan, from public quantities only (counts, parameters, k)."""
        chunks = self.unlearning_state_.chunks
        loss = self._loss()
        pending = [c["pending"] + deleted_per_chunk.get(i + 1, 0) for i, c in enumerate(chunks)]
        # The earliest chunk holding a row deleted so far and not yet removed
        # exactly: an earlier noise-only deletion leaves its row in that chunk's
        # release (and in every later chunk started from it), so an exact
        # replay must start there, not at the chunks of this request.
        first_affected = next(i + 1 for i, k in enumerate(pending) if k > 0)

        noise_mu = math.sqrt(
            sum(_chunk_mu(c, k) ** 2 for c, k in zip(chunks, pending, strict=True))
        )
        options = [DeletionOption(NOISE_ONLY, True, noise_mu, 0.0, "keep the released state")]

        # Predicted retrain (replay) cost, in row-gradient evaluations.
        retrain_rows, retrain_iterations = 0.0, 0
        for i in range(first_affected - 1, len(chunks)):
            chunk = chunks[i]
            n_pub = max(1.0, chunk["n_noisy"] - pending[i])
            if chunk["kind"] == "sgd":
                retrain_rows += n_pub
                continue
            config = self._configure(n_pub)
            if config["solver"] == "noisy_gd":
                retrain_iterations = config["n_steps"]
            else:
                kappa = (n_pub * loss.smoothness + config["Lambda"]) / config["Lambda"]
                start = math.sqrt(2.0 * n_pub * loss.loss_at_zero / config["Lambda"])
                retrain_iterations = linear_rate_iterations(
                    start, config["tau"] / config["Lambda"], kappa
                )
            retrain_rows += retrain_iterations * n_pub
        options.append(DeletionOption(RETRAIN, True, 0.0, retrain_rows, "exact"))

        chunk = chunks[0]
        tune_note = ""
        if len(chunks) > 1 or chunk["kind"] != "fit":
            tune_note = "fine-tune needs a single batch fit (streams are replayed instead)"
        elif chunk["config"]["solver"] == "noisy_gd":
            tune_note = (
                "a noisy-GD model is not a noised minimizer, so no certified warm "
                "start applies: noise only or retrain"
            )
        else:
            n_pub = max(1.0, chunk["n_noisy"] - pending[0])
            config = self._configure(n_pub)
            if config["solver"] != chunk["config"]["solver"]:
                tune_note = "the updated count selects another solver"
        if tune_note:
            options.append(DeletionOption(NOISE_FINETUNE, False, math.inf, math.inf, tune_note))
        else:
            kappa = (n_pub * loss.smoothness + config["Lambda"]) / config["Lambda"]
            target = config["tau"] / config["Lambda"]
            old = chunk["config"]
            if old["solver"] == "output":
                start = (
                    old["sigma"] * math.sqrt(loss.n_params)
                    + (pending[0] * loss.lipschitz + 2.0 * old["tau"]) / old["Lambda"]
                )
                # Certified start-point dependence: both solutions within tau/Lambda.
                tune_mu = (
                    config["mu_model"]
                    * 2.0
                    * config["tau"]
                    / (loss.lipschitz + 2.0 * config["tau"])
                )
            else:
                start = math.sqrt(2.0 * loss.n_params) * old["sigma_b"] / old["Lambda"] + old[
                    "sigma_amp"
                ] * math.sqrt(loss.n_params)
                tune_mu = config["mu_amp"]
            iterations = linear_rate_iterations(start, target, kappa)
            options.append(DeletionOption(NOISE_FINETUNE, True, tune_mu, iterations * n_pub, ""))
        plan = plan_deletion(options, self._deletion_target(), self.delta)
        return plan, {
            "first_affected": first_affected,
            "retrain_iterations": retrain_iterations,
        }

    # ----------------------------------------------------------- prediction

    def decision_function(self, X):
        """Signed margins of the released model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes, positive values predict ``classes_[1]``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predict class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        scores = self.decision_function(X)  # checks fitted before classes_ is read
        return labels_from_scores(self.classes_, scores)

    def predict_proba(self, X):
        """Class probabilities (softmax; one-vs-rest normalized for ``'objective'``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

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

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    # ------------------------------------------------------------- internals

    def _n_coef(self, n_features: int) -> int:
        return n_features + int(bool(self.fit_intercept))

    def _row_norm(self) -> float:
        return math.sqrt(1.0 + bool(self.fit_intercept))

    def _frozen(self) -> dict:
        return {name: getattr(self, name) for name in _FROZEN}

    def _one_vs_rest(self) -> bool:
        chunks = self.unlearning_state_.chunks
        return bool(chunks[-1]["config"].get("one_vs_rest", False))

    def _loss(self, binary: bool = False) -> LinearModelLoss:
        """The loss of the model (``binary``: the per-class loss of one-vs-rest)."""
        n_classes = 2 if binary else len(self.classes_)
        return LinearModelLoss(n_classes, self._n_coef(self.n_features_in_), self._row_norm())

    def _normalize(self, X) -> np.ndarray:
        """Clip rows to ``feature_norm``, divide by it, add the intercept column."""
        return np.ascontiguousarray(self._rows(X, None)[:, :-1])

    def _rows(self, X, y_index) -> np.ndarray:
        """Registry rows ``[a, class index]`` with ``a`` the normalized row.

        One allocation: at n = 1e5 each copy of the data costs as much as a
        gradient step. ``rows[:, :-1]`` is the design matrix (a strided view
        BLAS reads directly).
        """
        n, d = X.shape
        rows = np.empty((n, self._n_coef(d) + 1))
        clipped = clip_rows_l2(np.asarray(X, dtype=np.float64), self.feature_norm)
        np.divide(clipped, self.feature_norm, out=rows[:, :d])
        if self.fit_intercept:
            rows[:, d] = 1.0
        rows[:, -1] = 0.0 if y_index is None else y_index
        return rows

    def _check_public_params(self, n_classes: int = 2) -> None:
        """Checks that need only the parameters and the label set.

        Run before any data is read (with the binary case), and again before
        the budget is charged once the number of classes is known: one-vs-rest
        objective perturbation splits mu over the classes.
        """
        if self.solver == "objective" and self.coef_bound is not None:
            raise ValueError("solver='objective' does not support coef_bound")
        if self.solver == "objective" and self.C != "auto":
            mu = _gdp_mu(self.epsilon, self.delta)
            per_class = n_classes if n_classes > 2 else 1
            Lambda = 1.0 / (self.C * self.feature_norm**2)
            beta = self._row_norm() ** 2 / 4.0
            mu_op = math.sqrt(1.0 - _COUNT_SHARE - _AMP_SHARE) * mu
            objective_perturbation_noise_mu(
                mu_op / math.sqrt(per_class), jacobian_epsilon(beta, Lambda)
            )

    def _configure(self, n_public: float) -> dict:
        """Public configuration of a batch release from the released count.

        Everything here is a function of the parameters, the label set, the
        number of features and ``n_public`` (a released value).
        """
        n_public = max(1.0, float(n_public))
        loss = self._loss()
        mu = _gdp_mu(self.epsilon, self.delta)
        mu_model = math.sqrt(1.0 - _COUNT_SHARE) * mu
        if self.solver == "auto":
            solver = "noisy_gd" if loss.n_params <= n_public * self.epsilon else "output"
        else:
            solver = self.solver
        G, r = loss.lipschitz, loss.row_norm
        if self.C == "auto":
            Lambda = _RIDGE[solver] * (n_public * G**2 * r**2 / mu_model**2) ** (1.0 / 3.0)
        else:
            Lambda = 1.0 / (self.C * self.feature_norm**2)
        tau = self.tol * G
        config = {
            "solver": solver,
            "n_public": n_public,
            "mu_model": mu_model,
            "tau": tau,
            "one_vs_rest": False,
        }
        if solver == "objective":
            one_vs_rest = len(self.classes_) > 2
            per_class = len(self.classes_) if one_vs_rest else 1
            binary = self._loss(binary=True)
            mu_op = math.sqrt(1.0 - _COUNT_SHARE - _AMP_SHARE) * mu
            mu_amp = math.sqrt(_AMP_SHARE) * mu
            mu_class = mu_op / math.sqrt(per_class)
            if self.C == "auto":
                floor = binary.smoothness / math.expm1(_JACOBIAN_FRACTION * mu_class)
                Lambda = max(Lambda, floor)
            eps_j = jacobian_epsilon(binary.smoothness, Lambda)
            noise_mu = objective_perturbation_noise_mu(mu_class, eps_j)
            tau = self.tol * binary.lipschitz
            config.update(
                one_vs_rest=one_vs_rest,
                per_class=per_class,
                mu_op=mu_op,
                mu_amp=mu_amp,
                eps_jacobian=eps_j,
                certified_mu_class=objective_perturbation_mu(noise_mu, eps_j),
                sigma_b=binary.lipschitz / noise_mu,
                sigma_amp=(2.0 * tau / Lambda) / (mu_amp / math.sqrt(per_class)),
                tau=tau,
            )
        elif solver == "output":
            config["sigma"] = (G + 2.0 * tau) / (Lambda * mu_model)
        else:  # noisy_gd: Gram (preconditioner) and T gradient sums share mu_model
            mu_gram = math.sqrt(_GRAM_SHARE) * mu
            mu_steps = math.sqrt(1.0 - _COUNT_SHARE - _GRAM_SHARE) * mu
            config["n_steps"] = int(self.max_iter)
            config["gram_multiplier"] = 1.0 / mu_gram
            config["step_multiplier"] = math.sqrt(self.max_iter) / mu_steps
        config["Lambda"] = Lambda
        config["radius"] = self._radius(n_public, Lambda, loss)
        return config

    def _radius(self, n_public: float, Lambda: float, loss: LinearModelLoss) -> float:
        if self.coef_bound is not None:
            return float(self.coef_bound)
        # F(theta*) <= F(0) = n ln K gives Lambda/2 ||theta*||^2 <= n ln K.
        return math.sqrt(2.0 * n_public * loss.loss_at_zero / Lambda)

    def _parts(self, config: dict) -> list:
        mu_count = math.sqrt(_COUNT_SHARE) * _gdp_mu(self.epsilon, self.delta)
        parts = [{"kind": "count", "mu": mu_count}]
        if config["solver"] == "output":
            G = self._loss().lipschitz
            parts.append(
                {
                    "kind": "output",
                    "mu": config["mu_model"],
                    "G": G,
                    "tau": config["tau"],
                }
            )
        elif config["solver"] == "objective":
            parts.append({"kind": "gdp", "mu": config["mu_op"]})
            parts.append({"kind": "fixed", "mu": config["mu_amp"]})
        else:
            parts.append({"kind": "gdp", "mu": config["mu_model"]})
        return parts

    def _noisy_count(self, n: int, rng) -> float:
        """The released record count: Gaussian, sensitivity 1."""
        mu = _gdp_mu(self.epsilon, self.delta)
        return n + rng.normal(0.0, 1.0 / (math.sqrt(_COUNT_SHARE) * mu))

    def _release_batch(self, A, y_index, rng):
        """Everything :meth:`fit` releases from normalized rows: count, then model."""
        return self._fit_chunk(A, y_index, self._noisy_count(len(A), rng), rng)

    def _release_stream(self, A, y_index, theta0, rng):
        """Everything a :meth:`partial_fit` chunk releases: count, then DP-SGD."""
        return self._sgd_chunk(A, y_index, self._noisy_count(len(A), rng), theta0, rng)[0]

    def _fit_chunk(self, A, y_index, n_noisy, rng, theta0=None, max_iter=None):
        """Batch release on chunk 1; returns the chunk record and gradient count."""
        config = self._configure(n_noisy)
        loss = self._loss()
        Lambda, solver = config["Lambda"], config["solver"]
        cap = self.max_iter if max_iter is None else max_iter
        if solver == "output":
            solution = certified_minimize(
                loss,
                A,
                loss.encode_labels(y_index),
                Lambda,
                config["tau"],
                radius=self.coef_bound,
                theta0=theta0,
                max_iter=cap,
            )
            theta = solution.theta + rng.normal(0.0, config["sigma"], size=loss.n_params)
            n_grad = solution.n_grad
        elif solver == "objective":
            binary = self._loss(binary=True)
            K, p = len(self.classes_), binary.n_params
            classes = range(K) if config["one_vs_rest"] else [1]
            thetas, n_grad = [], 0
            for j, k in enumerate(classes):
                b = rng.normal(0.0, config["sigma_b"], size=p)
                start = None
                if theta0 is not None:
                    start = theta0.reshape(-1, p)[j] if config["one_vs_rest"] else theta0
                solution = certified_minimize(
                    binary,
                    A,
                    np.where(y_index == k, 1.0, -1.0),
                    Lambda,
                    config["tau"],
                    linear=b,
                    theta0=start,
                    max_iter=cap,
                )
                thetas.append(solution.theta + rng.normal(0.0, config["sigma_amp"], size=p))
                n_grad += solution.n_grad
            theta = np.concatenate(thetas)
        else:
            preconditioner = released_preconditioner(
                loss, A, Lambda, config["gram_multiplier"], rng
            )
            theta = noisy_projected_gd_glm(
                loss,
                A,
                loss.encode_labels(y_index),
                Lambda=Lambda,
                n_steps=config["n_steps"],
                noise_multiplier=config["step_multiplier"],
                preconditioner=preconditioner,
                radius=config["radius"],
                rng=rng,
            )
            # The Gram matrix costs about p row-gradients per row.
            n_grad = config["n_steps"] + loss.n_coef
        # Only public iteration counts are kept: a certified solve's count depends
        # on the data (Chourasia & Shah: no un-noised data-dependent value in the
        # state), so it is reported as one release.
        config["n_iter"] = int(config["n_steps"]) if solver == "noisy_gd" else 1
        chunk = {
            "kind": "fit",
            "n_noisy": float(n_noisy),
            "pending": 0,
            "config": config,
            "parts": self._parts(config),
            "theta": theta,
        }
        return chunk, n_grad

    def _sgd_chunk(self, A, y_index, n_noisy, theta0, rng):
        """One DP-SGD pass on a streamed chunk."""
        loss = self._loss()
        n_public = max(1.0, float(n_noisy))
        mu = _gdp_mu(self.epsilon, self.delta)
        mu_model = math.sqrt(1.0 - _COUNT_SHARE) * mu
        G, r = loss.lipschitz, loss.row_norm
        if self.C == "auto":
            Lambda = _RIDGE["sgd"] * (n_public * G**2 * r**2 / mu_model**2) ** (1.0 / 3.0)
        else:
            Lambda = 1.0 / (self.C * self.feature_norm**2)
        config = {
            "solver": "sgd",
            "n_public": n_public,
            "mu_model": mu_model,
            "Lambda": Lambda,
            "batch_multiplier": 1.0 / mu_model,
            "radius": self._radius(n_public, Lambda, loss),
            "one_vs_rest": False,
        }
        theta, n_batches = dp_sgd_pass(
            loss,
            A,
            loss.encode_labels(y_index),
            theta0,
            n_public=n_public,
            batch_size=self.batch_size,
            Lambda=Lambda,
            noise_multiplier=config["batch_multiplier"],
            radius=config["radius"],
            rng=rng,
        )
        config["n_iter"] = int(n_batches)
        chunk = {
            "kind": "sgd",
            "n_noisy": float(n_noisy),
            "pending": 0,
            "config": config,
            "parts": [
                {"kind": "count", "mu": math.sqrt(_COUNT_SHARE) * mu},
                {"kind": "gdp", "mu": mu_model},
            ],
            "theta": theta,
        }
        return chunk, 1

    def _planned_release(
        self, kind: str, mu: float, chunk: int, with_count: bool, solver=None
    ) -> Release:
        """The release of a chunk, computable from parameters only.

        Before any data is read ``solver`` is the parameter (``'auto'`` may
        become output perturbation or noisy GD, which are both
        ``mu_model``-GDP, so the events are known); afterwards the record names
        what ran. Events are exact Gaussian-DP equivalents [DRS22 Cor. 3.3]: a
        run of ``T`` steps with multiplier ``m`` each is one Gaussian with
        ``m / sqrt(T)``; the description gives the per-step noise.
        """
        solver = self.solver if solver is None else solver
        mu_model = math.sqrt(1.0 - _COUNT_SHARE) * mu
        events, words, references = [], [], []
        if with_count:
            events.append(dp_event.GaussianDpEvent(1.0 / (math.sqrt(_COUNT_SHARE) * mu)))
            words.append("Gaussian noisy record count")
            references.append(_REFERENCES["count"])
        if kind == "fit" and solver == "objective":
            mu_op = math.sqrt(1.0 - _COUNT_SHARE - _AMP_SHARE) * mu
            events.append(dp_event.GaussianDpEvent(1.0 / mu_op))
            events.append(dp_event.GaussianDpEvent(1.0 / (math.sqrt(_AMP_SHARE) * mu)))
            words.append("objective perturbation (Gaussian-DP certified) + AMP output noise")
            references.append(_REFERENCES["objective"])
        else:
            events.append(dp_event.GaussianDpEvent(1.0 / mu_model))
            if kind == "sgd":
                words.append(f"one-pass DP-SGD (batch {self.batch_size}, clipped)")
                references.append(_REFERENCES["sgd"])
            elif solver == "auto":
                words.append("output perturbation or noisy GD (solver='auto', same GDP)")
                references += [_REFERENCES["output"], _REFERENCES["noisy_gd"]]
            elif solver == "output":
                words.append("output perturbation of the certified regularized ERM")
                references.append(_REFERENCES["output"])
            else:
                mu_steps = math.sqrt(1.0 - _COUNT_SHARE - _GRAM_SHARE) * mu
                m_step = math.sqrt(self.max_iter) / mu_steps
                m_gram = 1.0 / (math.sqrt(_GRAM_SHARE) * mu)
                words.append(
                    f"Gaussian Gram matrix (multiplier {m_gram:.4g}) + preconditioned "
                    f"projected noisy GD, {self.max_iter} Gaussian gradient sums with "
                    f"multiplier {m_step:.4g} each"
                )
                references.append(_REFERENCES["noisy_gd"])
        return Release(
            " + ".join(words) + f" (chunk {chunk})",
            dp_event.ComposedDpEvent(events) if len(events) > 1 else events[0],
            (chunk, chunk),
            "; ".join(references),
        )

    def _publish(self) -> None:
        """Set ``coef_``, ``intercept_`` and friends from the released model."""
        chunks = self.unlearning_state_.chunks
        last = chunks[-1]
        d = self.n_features_in_
        theta = last["theta"].reshape(-1, self._n_coef(d))
        self.coef_ = theta[:, :d] / self.feature_norm
        self.intercept_ = theta[:, d].copy() if self.fit_intercept else np.zeros(len(theta))
        batch = [c for c in chunks if c["kind"] == "fit"]
        config = (batch[-1] if batch else last)["config"]
        self.solver_ = config["solver"]
        self.C_ = 1.0 / (config["Lambda"] * self.feature_norm**2)
        self.n_iter_ = int(last["config"]["n_iter"])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags
