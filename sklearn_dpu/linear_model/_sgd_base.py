"""Fitted values, privacy and outputs of :class:`UnlearnableSGDClassifier`.

The public class (``_unlearnable_sgd.py``) is the API and the release
procedure's hooks; this base holds what a fitted estimator reads from its
stored run: the size-dependent fitted values, the privacy it reports, the
published model and the predictions, and the training step of a fit
(``_train``: draw the bound and the count, train and store the run). See
the public class for the algorithm and its references (M. E. Ullah,
"Statistical learning via stochastic optimization under data privacy
considerations", PhD thesis, Johns Hopkins University, 2024, Ch. 4 and
App. C).
"""

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._row_threads import map_row_ranges
from .._validation import (
    INPUT_DTYPES,
    cast_outputs,
    is_dask_collection,
    output_dtype,
)
from ..base import PrivateEstimatorMixin
from ..privacy.clipping import clip_rows_l2
from ..privacy.ledger import PrivacySpent, Release, privacy_spent
from ..privacy.random import release_generator
from ._auto_bounds import draw_bound, is_auto, kept_bound_outcome, norm_bound_mechanism
from ._input_rows import validated_xy
from ._losses import get_loss
from ._scores import ScoresToLabelsMixin
from ._sgd_dask import WorkerRows
from ._sgd_edits import SGDEditLedger, start_run
from ._sgd_plan import BOUND_EPSILON_SHARE, SGDParams, schedule_run
from ._sgd_releases import count_mechanism, fit_ledger
from ._sparse_rows import clip_sparse, is_sparse, sparse_clipped_rows

__all__ = ["BaseUnlearnableSGD"]

# Rows are clipped a little inside feature_norm so that storing them in
# float32 (relative rounding <= 2**-24 per entry) cannot push a norm above it.
_STORAGE_MARGIN = 1.0 - 1e-6


def _has_proba(estimator) -> bool:
    return get_loss(estimator.loss).has_proba


class BaseUnlearnableSGD(
    ScoresToLabelsMixin, PrivateEstimatorMixin, ClassifierMixin, BaseEstimator
):
    """Fitted values, privacy and outputs of an unlearnable SGD classifier.

    Reads ``unlearning_state_`` (the stored run) and ``edit_ledger_`` (the
    bookkeeping of its edits); never changes them.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # At the default recompute_rate on scikit-learn's 300-row check data,
        # the noise a 5% recompute rate needs (it grows like T / (n rho))
        # swamps the gradient, so accuracy stays below the check's 0.83. Utility
        # at realistic n is tested in tests/test_unlearnable_sgd.py.
        tags.classifier_tags.poor_score = True
        tags.input_tags.sparse = True  # CSR (sklearn_dpu.linear_model._sparse_rows)
        return tags

    def __setstate__(self, state):
        # Files of state format 2 written before ``schedule_size`` existed
        # were fitted without it; their run held the edit bookkeeping, which
        # moves to ``edit_ledger_`` (see CoupledSGDState.__setstate__).
        state.setdefault("schedule_size", None)
        run = state.get("unlearning_state_")
        legacy = vars(run).pop("_legacy_bookkeeping", None) if run is not None else None
        super().__setstate__(state)
        if legacy is not None:
            self.edit_ledger_ = SGDEditLedger.from_legacy(legacy)

    # Size-dependent fitted values live in the state (an edit may refit).
    @property
    def noise_multiplier_(self) -> float:
        """Noise of a step, in units of ``G / batch_size_``."""
        return self.unlearning_state_.schedule.noise

    @property
    def recompute_bound_(self) -> float:
        """Proven bound on the probability that one edit recomputes."""
        return self.unlearning_state_.schedule.bound

    @property
    def n_iter_(self) -> int:
        """Number of SGD steps of the stored run (``max_iter`` or its recipe)."""
        return self.unlearning_state_.n_steps

    @property
    def batch_size_(self) -> float:
        """Normalizer of the batch gradient (the expected batch size, about)."""
        return self.unlearning_state_.schedule.batch_size

    def _encode(self, X, y, classes_, feature_norm: float) -> np.ndarray:
        """Rows clipped to ``feature_norm`` in float32, the label code appended."""
        if is_dask_collection(X):  # computed and kept on the workers
            return WorkerRows.encode(X, y, classes_, feature_norm * _STORAGE_MARGIN)
        codes = np.searchsorted(classes_, y)
        if is_sparse(X):  # the same values, in sparse storage
            return sparse_clipped_rows(X, codes, feature_norm * _STORAGE_MARGIN, np.float32)
        X = np.asarray(X)
        rows = np.empty((X.shape[0], X.shape[1] + 1), dtype=np.float32)
        bound = feature_norm * _STORAGE_MARGIN

        def clip_range(start, stop):
            # Clipped in float64, rounded once into the float32 rows (no
            # float64 copy); a row's clip depends on that row only, so the
            # ranges write the whole-array values.
            clip_rows_l2(X[start:stop], bound, out=rows[start:stop, :-1])

        map_row_ranges(clip_range, X.shape[0], X.shape[1])
        rows[:, -1] = codes
        return rows

    def _validated_fit_data(self, X, y, classes, clip_bound: float | None) -> tuple:
        """``fit``'s validation of in-memory ``X, y``: ``(X, y, classes_,
        rows)``, ``rows`` the encoded rows when the bound is public
        (``clip_bound``: the clip is the pass that checks ``X`` is finite, see
        :func:`~sklearn_dpu._validation.nonfinite_x_reported_first`), else
        ``None`` (an 'auto' bound reads ``X`` first: scikit-learn checks it)."""
        clip = clip_bound is not None
        with validated_xy(self, X, y, clip=clip) as (Xv, yv):
            check_classification_targets(yv)
            if classes is None:
                classes_ = np.unique(yv)
            else:
                classes_ = np.unique(np.asarray(classes))
                if not np.isin(yv, classes_).all():
                    raise ValueError("`classes` must include every label of y")
            if len(classes_) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes in "
                    "the data, "
                    f"but the data contain only one class: {classes_[0]!r}"
                )
            rows = self._encode(Xv, yv, classes_, clip_bound) if clip else None
        return Xv, yv, classes_, rows

    # --------------------------------------------------------- accounting

    def _ledger_delta(self) -> float:
        """The delta of the fit (``partial_fit`` refuses to change it)."""
        return self.edit_ledger_.params.delta

    def _cached_privacy(self, name, compute, depends_on_ledger=True):
        ledger = self.privacy_ledger_
        delta = self.edit_ledger_.params.delta
        # A string key: the cache is persisted, and skops stores dicts as JSON.
        key = f"{name}|{len(ledger) if depends_on_ledger else '-'}|{delta!r}"
        cache = self.__dict__.setdefault("_privacy_cache", {})
        if key not in cache:
            cache[key] = compute(ledger, delta)
        return cache[key]

    @property
    def privacy_spent_(self) -> PrivacySpent:
        """(epsilon, delta) of everything published (composed over the ledger)."""
        return self._cached_privacy("spent", privacy_spent)

    @property
    def privacy_per_model_(self) -> PrivacySpent:
        """(epsilon, delta) of the published model on its own: it has the law of
        a fit on the current data, so this is a fit's releases (count and run)."""
        schedule = self.unlearning_state_.schedule
        releases = [*self._bound_releases(), *fit_ledger(self.edit_ledger_.params, schedule)]
        return self._cached_privacy(
            f"model{schedule.bucket}",
            lambda ledger, delta: privacy_spent(releases, delta),
            depends_on_ledger=False,
        )

    # ----------------------------------------------- feature_norm='auto'

    def _release_bound(self, params: SGDParams, X) -> tuple[SGDParams, list]:
        """``feature_norm='auto'``: draw the row-norm bound (release 0, for
        ``BOUND_EPSILON_SHARE * epsilon``), publish it as ``feature_norm_`` and
        return the run's parameters with it and the bound's record; else
        forget an earlier fit's bound and return ``params`` unchanged."""
        self.__dict__.pop("feature_norm_", None)
        if not is_auto(self.feature_norm):
            return params, []
        mechanism = norm_bound_mechanism(self.epsilon, BOUND_EPSILON_SHARE)
        self.feature_norm_, made = draw_bound(X, mechanism, self.random_state)
        return dataclasses.replace(params, feature_norm=self.feature_norm_), [made]

    def _train(self, params, classes_given: bool, registry, ids, data, classes_, rows):
        """Draw the bound ('auto') and the count, train the run; return the
        releases. ``rows``: the encoded ``data`` when the bound is public
        (encoded during validation), else ``None``."""
        params, made = self._release_bound(params, data[0])
        if rows is None:
            rows = self._encode(*data, classes_, params.feature_norm)
        n, n_features = len(rows), rows.shape[1] - 1
        rng = release_generator(self.random_state, len(made))
        if params.schedule_size is not None:
            n_noisy = float(params.schedule_size)  # public: no count is read or released
        else:
            n_noisy = count_mechanism(params).release(n, rng)
        schedule = schedule_run(params, n_noisy, n_features)
        if params.batch_sampling == "fixed" and schedule.batch_size >= n:
            raise ValueError(
                f"batch_sampling='fixed' drew batches of {int(schedule.batch_size)} rows, "
                "not fewer than the training set has; use a smaller batch_size or "
                "batch_sampling='poisson'"
            )
        self.classes_ = classes_
        self._output_dtype = output_dtype(data[0])
        registry.add(ids, rows, chunk=1, adopt=True)
        state = start_run(registry, len(classes_), n_features, params, schedule)
        state.train(0, rng)
        self.unlearning_state_ = state
        self.edit_ledger_ = SGDEditLedger(
            params,
            n_noisy,
            classes_given=classes_given,
            n_streams=1 + len(made),
            reserve_charged=np.zeros(state.n_steps, dtype=bool),
        )
        self.__dict__.pop("_privacy_cache", None)
        self._publish()
        self.deletion_log_ = []
        self.insertion_log_ = []
        self.learning_rate_ = state.learning_rate
        return [*made, *fit_ledger(params, schedule)]

    def _bound_releases(self) -> list:
        """The kept bound's record (the fit's first release), if one was drawn."""
        return self.privacy_ledger_[:1] if hasattr(self, "feature_norm_") else []

    def _with_kept_bound(self, outcome, n_new: int):
        """A deletion's outcome restated for a kept released bound: certified at
        ``k eps_b`` plus the exact run's 0, ``k`` the rows deleted since the fit
        (:func:`~sklearn_dpu.linear_model._auto_bounds.kept_bound_outcome`)."""
        if not hasattr(self, "feature_norm_"):
            return outcome
        # The bound's pure-DP event (mechanisms.pure_dp_event) has parameter eps_b.
        eps_b = float(Release.from_dict(self.privacy_ledger_[0]).event.noise_parameter)
        return kept_bound_outcome(outcome, eps_b, self._n_deleted_since_fit(n_new), math.inf)

    # ------------------------------------------------------------ output

    def _publish(self) -> None:
        state = self.unlearning_state_
        W = state.model()
        d = state.n_features
        self.coef_ = W[:, :d].copy()
        if self.fit_intercept:
            self.intercept_ = W[:, d] * state.feature_norm
        else:
            self.intercept_ = np.zeros(state.n_outputs)
        # SGDClassifier's convention: float32 X gives a float32 coef_ and a
        # float64 intercept_ (scores are computed in float64 on clipped rows).
        cast_outputs(self, ("coef_",))

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Scores of the (clipped) rows.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=INPUT_DTYPES, reset=False)
        if is_sparse(X):
            X = clip_sparse(X, self.unlearning_state_.feature_norm)
        else:
            X = clip_rows_l2(np.asarray(X, dtype=np.float64), self.unlearning_state_.feature_norm)
        scores = X @ self.coef_.T + self.intercept_
        return scores[:, 0] if scores.shape[1] == 1 else scores

    @available_if(_has_proba)
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities (log loss: logistic / softmax; modified Huber:
        as :class:`~sklearn.linear_model.SGDClassifier`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        Z = scores[:, None] if scores.ndim == 1 else scores
        return get_loss(self.unlearning_state_.loss_name).proba(Z)

    predict_log_proba = available_if(_has_proba)(ScoresToLabelsMixin.predict_log_proba)
