"""The one place that touches scikit-learn helpers which are not fully public.

Everything else in sklearn_dpu imports these names from here, so a change in a
scikit-learn release is mended in a single file.
"""

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    RealNotInt,
    StrOptions,
)
from sklearn.utils.validation import _num_samples

__all__ = [
    "HasMethods",
    "Interval",
    "RealNotInt",
    "StrOptions",
    "_fit_context",
    "_num_samples",
]
