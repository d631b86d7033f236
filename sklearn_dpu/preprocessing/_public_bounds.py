"""Feature scaling with public bounds: no state learned from the data."""

from typing import Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import validate_data

from .._compat import _fit_context
from .._validation import INPUT_DTYPES

__all__ = ["PublicBoundsScaler"]


class PublicBoundsScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Map each feature from a public interval onto ``[-1, 1]``, clipping outside it.

    The private replacement for :class:`~sklearn.preprocessing.MinMaxScaler`
    and :class:`~sklearn.preprocessing.StandardScaler`, which learn their
    scale from the data and so break differential privacy and cannot unlearn.
    The bounds must come from outside the training data (a data dictionary,
    the measurement range of a sensor, domain knowledge). Nothing is learned:
    the transformer is stateless and a :class:`~sklearn.pipeline.Pipeline` with
    it stays private and fully deletable.

    After scaling, a row of ``d`` features has L2 norm at most ``sqrt(d)``,
    which is the ``feature_norm`` to give the estimator that follows.

    Parameters
    ----------
    bounds : (float, float) or array-like of shape (n_features, 2), default=(-1.0, 1.0)
        Public ``(low, high)`` for every feature, or one pair per feature.
    clip : bool, default=True
        Clip scaled values to ``[-1, 1]``.

    Attributes
    ----------
    n_features_in_ : int
        Set by :meth:`fit` (which learns nothing else).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Defined only when ``X`` has string feature names.

    See Also
    --------
    sklearn.preprocessing.MinMaxScaler : the non-private, data-fitted version.

    References
    ----------
    .. [1] M. E. Ullah, "Statistical learning via stochastic optimization
       under data privacy considerations", PhD thesis, Johns Hopkins
       University, 2024, Ch. 2: every guarantee assumes a public bound on the
       feature norm; a scaler fitted on private data breaks differential
       privacy, so the bounds must be public.

    Examples
    --------
    >>> from sklearn_dpu.preprocessing import PublicBoundsScaler
    >>> PublicBoundsScaler(bounds=[(0, 10), (-5, 5)]).fit_transform([[5, 0], [20, -5]])
    array([[ 0.,  0.],
           [ 1., -1.]])
    """

    _parameter_constraints: dict = {
        "bounds": ["array-like"],
        "clip": ["boolean"],
    }

    def __init__(self, bounds=(-1.0, 1.0), clip=True):
        self.bounds = bounds
        self.clip = clip

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def _low_high(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        bounds = np.asarray(self.bounds, dtype=np.float64)
        if bounds.shape == (2,):
            bounds = np.tile(bounds, (n_features, 1))
        if bounds.shape != (n_features, 2):
            raise ValueError(
                f"bounds must be (low, high) or have shape ({n_features}, 2), got {bounds.shape}"
            )
        low, high = bounds[:, 0], bounds[:, 1]
        if not (np.all(np.isfinite(bounds)) and np.all(low < high)):
            raise ValueError("bounds must be finite with low < high for every feature")
        return low, high

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: None = None) -> Self:
        """Check the bounds against ``X``'s shape; learns nothing from its values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.

        Returns
        -------
        self : PublicBoundsScaler
        """
        X = validate_data(self, X, dtype=INPUT_DTYPES)
        self._low_high(X.shape[1])
        return self

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Scale ``X`` to ``[-1, 1]`` by the public bounds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        X = validate_data(self, X, dtype=INPUT_DTYPES, reset=False)
        low, high = self._low_high(X.shape[1])
        scaled = (X - ((low + high) / 2).astype(X.dtype)) / ((high - low) / 2).astype(X.dtype)
        return np.clip(scaled, -1, 1) if self.clip else scaled

    def inverse_transform(self, X: ArrayLike) -> np.ndarray:
        """Map scaled values back to the original units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        X = validate_data(self, X, dtype=INPUT_DTYPES, reset=False)
        low, high = self._low_high(X.shape[1])
        return X * ((high - low) / 2).astype(X.dtype) + ((low + high) / 2).astype(X.dtype)
