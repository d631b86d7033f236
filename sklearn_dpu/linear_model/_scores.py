"""From a linear classifier's decision scores to labels and log-probabilities,
as scikit-learn does."""

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["ScoresToLabelsMixin", "labels_from_scores"]


def labels_from_scores(classes: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Labels for decision scores: ``scores > 0`` picks ``classes[1]`` for binary
    problems (scores of shape ``(n,)``), the argmax otherwise (``(n, K)``)."""
    if scores.ndim == 1:
        return classes[(scores > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]


class ScoresToLabelsMixin:
    """``predict`` and ``predict_log_proba`` of a linear classifier, from its
    ``decision_function`` and ``predict_proba`` (post-processing of the
    released model: no privacy cost)."""

    def predict(self, X: ArrayLike) -> np.ndarray:
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

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
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
