"""What a private search delegates to its selected model: predictions and scores,
and the tags it takes from its estimator."""

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

__all__ = []


def _estimator_has(name):
    def check(self):
        if hasattr(self, "best_estimator_"):
            return hasattr(self.best_estimator_, name)
        return hasattr(self.estimator, name)

    return check


_NOT_PUBLISHED = {
    "best_score_": "the selection releases only its winner, not its score (a score "
    "of the private validation data would be one more release)",
    "refit_time_": "timings of fits depend on the number of rows, which is private",
    "n_splits_": "there is one random split into a training and a validation part",
    "scorer_": "the scoring is a bounded per-row score (see the scoring parameter)",
    "multimetric_": "one bounded scoring is selected on",
}


class _DelegatesToBestEstimator:
    """``predict``, ``predict_proba``, ``decision_function``, ``score``,
    ``n_features_in_`` and ``classes_`` of ``best_estimator_``; the
    estimator type, classifier/regressor, target and sparse-input tags of
    ``estimator``."""

    def __getattr__(self, name: str):
        # Called only for attributes not found: GridSearchCV's attributes
        # that a private search does not publish say why.
        if name in _NOT_PUBLISHED:
            raise AttributeError(f"{type(self).__name__} has no {name}: {_NOT_PUBLISHED[name]}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags.required = inner.target_tags.required
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags

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
