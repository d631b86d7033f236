"""Input kinds and output dtypes of the estimators: Dask collections are
recognised here; float32 in, float32 out, as scikit-learn; and X's
finiteness checked by the fit's first pass over it
(:func:`nonfinite_x_reported_first`) instead of a pass of its own.

scikit-learn's linear models keep float32: :class:`~sklearn.linear_model.LogisticRegression`,
:class:`~sklearn.linear_model.LinearRegression` and
:class:`~sklearn.linear_model.Ridge` return float32 ``coef_`` (and
``intercept_``) for float32 ``X``; :class:`~sklearn.linear_model.SGDClassifier`
returns a float32 ``coef_`` and a float64 ``intercept_``. The estimators of
this package follow the analogous one.

Only the *published* model is cast. Every private computation (clipping,
the fixed-point code, Gram matrices, gradient sums, noise calibration and the
noise itself) runs in float64 whatever the input type: a float32 clip could
overshoot the norm bound and a float32 sum could round a sensitivity away.
Rounding the released model to float32 is post-processing of a DP release,
so the guarantee is unchanged.
"""

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = [
    "INPUT_DTYPES",
    "NonFiniteInputError",
    "cast_outputs",
    "is_dask_collection",
    "is_scratch",
    "nonfinite_x_reported_first",
    "output_dtype",
]

#: The input types the estimators keep (float32 stays float32); anything
#: else is converted to float64 by scikit-learn's validation.
INPUT_DTYPES = [np.float64, np.float32]


class NonFiniteInputError(ValueError):
    """``X`` holds a NaN or an infinity, found by a pass that reads every row
    anyway (a clip or an encoding computes each row's norm, and a row's norm
    is NaN or infinite exactly when the row is not finite, or its norm
    overflows): see :func:`nonfinite_x_reported_first`."""


@contextmanager
def nonfinite_x_reported_first(validate: Callable[[], Any]) -> Iterator[None]:
    """Validation that leaves X's finiteness to a later pass: when the block
    fails, scikit-learn's ``validate`` runs again, with the check, so that
    its error comes first.

    scikit-learn's ``validate_data`` checks that ``X`` is finite in a pass of
    its own over the data (an ``UnlearnableSGDClassifier`` fit at n = 1e5,
    d = 500 on one thread took 252 ms with it, 214 ms without:
    ``benchmarks/results/solver_speed_1thread.txt``). A fit whose first pass
    clips or encodes every row validates ``X`` with
    ``ensure_all_finite=False`` and runs that pass in this block, which
    meets every NaN or infinity on its way (:class:`NonFiniteInputError`; a
    sparse ``X`` is checked when its duplicates are summed). Whatever
    ``ValueError`` or ``TypeError`` the block raises (that one, or an error
    in ``y`` or the labels), ``validate`` (the same ``validate_data`` call
    with the finiteness check, its warnings silenced: the block emitted them
    already) runs then: the error it raises is the one scikit-learn's
    validation gives first (feature names before a NaN in ``X``, a NaN in
    ``X`` before one in ``y``), with its message; when it passes, the
    block's error is raised (a :class:`NonFiniteInputError` as a plain
    ``ValueError``: under ``sklearn.config_context(assume_finite=True)``
    scikit-learn does not check). Warnings the block emitted before failing
    stay: a column-vector ``y``'s ``DataConversionWarning`` comes before the
    error for a NaN in ``X``, where ``validate_data`` raises first. Nothing
    is read twice unless the validation fails. The block must come before
    anything is charged or changed, so that the estimator is left as it was.

    Examples
    --------
    >>> from sklearn.utils import check_array
    >>> X = [[1.0, np.nan]]
    >>> with nonfinite_x_reported_first(lambda: check_array(X, input_name="X")):
    ...     raise ValueError("Input y contains NaN.")
    Traceback (most recent call last):
    ...
    ValueError: Input X contains NaN.
    """
    try:
        yield
    except (ValueError, TypeError) as error:
        failure = error
    else:
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            validate()
    except (ValueError, TypeError) as first:
        raise first from None  # one traceback: scikit-learn's error replaces the block's
    if isinstance(failure, NonFiniteInputError):  # an internal signal, not an API
        raise ValueError(str(failure)) from None
    raise failure


def is_dask_collection(data: object) -> bool:
    """True for a Dask array or DataFrame (checked without importing Dask)."""
    return type(data).__module__.split(".")[0] == "dask"


def is_scratch(
    work: object, shape: tuple[int, ...], own: bool = False, dtype: type = np.float64
) -> bool:
    """Whether ``work`` can be overwritten as a C-ordered ``dtype`` array of
    ``shape`` (the scratch buffers that spare a deletion its allocations);
    ``own``: it must also own its memory (not a view of another array)."""
    return (
        isinstance(work, np.ndarray)
        and work.shape == shape
        and work.dtype == dtype
        and work.flags.c_contiguous
        and work.flags.writeable
        and (work.flags.owndata or not own)
    )


def output_dtype(X: Any) -> str:
    """``'float32'`` for float32 training data, else ``'float64'``.

    Read from the dtype of the validated ``X`` (a public property of the
    input, chosen by the caller), never from its values.
    """
    dtype = getattr(X, "dtype", None)
    return "float32" if dtype == np.float32 else "float64"


def cast_outputs(estimator: Any, names: tuple[str, ...] = ("coef_", "intercept_")) -> None:
    """Cast the published attributes ``names`` to the estimator's output dtype.

    The output dtype is ``estimator._output_dtype`` (set at fit from
    :func:`output_dtype`); float64, the computation type, is left as is.
    Scalars become NumPy scalars of that type (``LinearRegression``'s
    ``intercept_`` for float32 data is a ``numpy.float32``).
    """
    if getattr(estimator, "_output_dtype", "float64") != "float32":
        return
    for name in names:
        value = getattr(estimator, name, None)
        if value is None:
            continue
        if np.ndim(value) == 0:
            setattr(estimator, name, np.float32(value))
        else:
            setattr(estimator, name, np.asarray(value, dtype=np.float32))
