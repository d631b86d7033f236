"""From a linear classifier's decision scores to labels, as scikit-learn does."""

import numpy as np

__all__ = ["labels_from_scores"]


def labels_from_scores(classes: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Labels for decision scores: ``scores > 0`` picks ``classes[1]`` for binary
    problems (scores of shape ``(n,)``), the argmax otherwise (``(n, K)``)."""
    if scores.ndim == 1:
        return classes[(scores > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]
