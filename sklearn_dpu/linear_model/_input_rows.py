"""The classifiers' validation of in-memory ``X, y``, written once.

``UnlearnableSGDClassifier`` and ``DPLogisticRegression`` (``fit`` and
``partial_fit``) validate the same way: scikit-learn's ``validate_data``
(CSR or dense, float32 kept), without its finiteness pass when the rows are
clipped next (the clip reads every row's norm and refuses a NaN or an
infinity, see :func:`~sklearn_dpu._validation.nonfinite_x_reported_first`),
the float32 range of a public bound, and sparse rows in canonical form.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from sklearn.utils.validation import validate_data

from .._validation import INPUT_DTYPES, nonfinite_x_reported_first
from ..privacy.clipping import check_float32_bound
from ._sparse_rows import canonical_sparse

__all__ = ["validated_xy"]


@contextmanager
def validated_xy(estimator: Any, X: Any, y: Any, *, clip: bool, reset: bool = True) -> Iterator:
    """Validated ``(X, y)`` for the block, whose errors (labels, the clip's)
    come after scikit-learn's first one.

    ``clip``: the block clips the rows (public bound), so scikit-learn's
    finiteness pass is skipped; its error is still the one raised when the
    block fails on a non-finite ``X``. ``reset``: as ``validate_data``'s.
    """
    validated = partial(
        validate_data, estimator, X, y, accept_sparse="csr", dtype=INPUT_DTYPES, reset=reset
    )
    with nonfinite_x_reported_first(validated):
        Xv, yv = validated(ensure_all_finite=not clip)
        check_float32_bound(Xv, estimator.feature_norm)
        yield canonical_sparse(Xv), yv
