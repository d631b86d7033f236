"""The one place that touches scikit-learn helpers which are not fully public.

Everything else in sklearn_dpu imports these names from here, so a change in a
scikit-learn release is mended in a single file.
"""

from numbers import Real

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    RealNotInt,
    StrOptions,
)
from sklearn.utils.validation import _num_samples

__all__ = [
    "DELTA_CONSTRAINT",
    "HasMethods",
    "Interval",
    "InvalidParameterError",
    "RealNotInt",
    "StrOptions",
    "_fit_context",
    "_num_samples",
]

#: The constraint of every estimator's ``delta`` parameter: a real in (0, 0.5).
#: A delta of 1/2 or more allows a mechanism that publishes a random half of
#: the records in the clear, so it states no privacy; a delta above 1/n is
#: hardly better (see ``doc/budget.rst``). The same rule as
#: :func:`sklearn_dpu.privacy.check_epsilon_delta`.
DELTA_CONSTRAINT = Interval(Real, 0, 0.5, closed="neither")
