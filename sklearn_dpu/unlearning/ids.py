"""Sample ids: where the default ids come from, how a request is read, what is valid.

Every ``fit`` / ``partial_fit`` calls :func:`requested_ids` on the raw ``X``
(before validation turns a DataFrame into an array, losing its index), and
every ``delete_samples`` calls :func:`as_id_list` first, so that all the
estimators, :class:`~sklearn_dpu.model_selection.PrivateGridSearch` and
:func:`sklearn_dpu.unlearning.delete_samples` read ids the same way:

* ``sample_id`` given: those ids.
* no ``sample_id`` and ``X`` a pandas DataFrame: its index labels (they must be
  unique). After ``train_test_split`` the labels still name the original rows,
  where positions would not.
* otherwise: row positions, numbered across ``partial_fit`` calls (the ``k``-th
  row ever passed has id ``k``). The first deletion report says so.

A deletion request is a list of ids; a bare ``str``, ``bytes`` or any scalar is
ONE id, never the sequence of its characters. Ids must be hashable, present and
equal to themselves (no None, NaN, NaT or ``pd.NA``) and unique; error messages show at most
:data:`SHOWN_IDS` of them, each cut to :data:`SHOWN_CHARS` characters, since an
id can be personal data that should not be copied into logs.
"""

import sys
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..exceptions import UnlearningError

__all__ = [
    "ID_KIND_NOTES",
    "MIXED_NOTE",
    "POSITIONS_NOTE",
    "IdRequest",
    "as_id_list",
    "check_id_array",
    "check_request",
    "deletion_request",
    "describe_ids",
    "requested_ids",
    "restated_for",
    "sample_id_kind",
]

#: How many ids an error message shows, and how many characters of each.
SHOWN_IDS, SHOWN_CHARS = 3, 16

#: Note of the first deletion report of an estimator whose ids are row positions.
POSITIONS_NOTE = (
    "sample ids are row positions: no sample_id was given and this estimator did not "
    "receive a pandas DataFrame (inside a Pipeline, an earlier step may have turned one "
    "into an array), so id k is the k-th row passed to fit / partial_fit (counting across "
    "calls), not a row label; pass sample_id= at fit to delete by your own ids"
)

#: The same note for a stream that began with row positions and then got sample_id.
MIXED_NOTE = (
    "the sample ids of the rows added without sample_id are row positions: id k is the "
    "k-th row passed to fit / partial_fit (counting across calls), not a row label; the "
    "rows added with sample_id have those ids"
)

#: What the ids are, by how they were given (``SampleRegistry.id_kind``: a
#: fact about the calls, not the data). Positions and mixed streams' notes
#: open their first deletion report; every note ends an unknown-id error.
ID_KIND_NOTES = {
    "positions": POSITIONS_NOTE,
    "mixed": MIXED_NOTE,
    **dict.fromkeys(
        ("index", "given"),
        "this model's ids are the sample_id values or DataFrame index labels given at fit "
        "and partial_fit",
    ),
}


def restated_for(error: UnlearningError, kind: str | None) -> UnlearningError:
    """``error`` (an unknown-id error) with its closing note describing ids of
    ``kind`` (an :data:`ID_KIND_NOTES` key): for a model that was given
    another estimator's ids as ``sample_id`` (a search's selected model),
    whose own note would call them given. Unchanged when it has no such note
    or ``kind`` is unknown (a model saved before kinds were kept)."""
    message = str(error)
    note = next((n for n in ID_KIND_NOTES.values() if message.endswith(n)), None)
    if note is None or kind not in ID_KIND_NOTES:
        return error
    return UnlearningError(message[: -len(note)] + ID_KIND_NOTES[kind])


@dataclass(frozen=True)
class IdRequest:
    """The ids a ``fit`` / ``partial_fit`` call asks for, read before validation.

    Attributes
    ----------
    values : ndarray or None
        The ids (checked by :func:`check_id_array`, length not yet checked),
        or ``None`` for row positions, numbered by the registry.
    kind : {"given", "index", "positions"}
        ``sample_id`` was passed; the ids are a DataFrame's index labels; or
        they are row positions.
    """

    values: np.ndarray | None
    kind: str


def _is_pandas(obj, name: str) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(obj, getattr(pandas, name))


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def describe_ids(ids: list) -> str:
    """At most :data:`SHOWN_IDS` ids, each repr cut to :data:`SHOWN_CHARS` characters.

    Parameters
    ----------
    ids : list

    Returns
    -------
    str
        For example ``"'alice@exam..., 7 (and 40 more)"``.
    """
    shown = ", ".join(_short(i) for i in ids[:SHOWN_IDS])
    return shown + (f" (and {len(ids) - SHOWN_IDS} more)" if len(ids) > SHOWN_IDS else "")


def as_id_list(sample_ids: Any) -> list:
    """The ids of a deletion request, as a list of Python values.

    A ``str``, ``bytes``, number, NumPy scalar or any other non-iterable
    value is one id. Arrays, pandas ``Index`` / ``Series`` and other iterables
    are sequences of ids (NumPy integers become exact Python ints, so a
    ``uint64`` id above ``2**63`` stays itself). A tuple is a sequence too: to
    delete one tuple id (a ``MultiIndex`` label) pass ``[label]``.

    Parameters
    ----------
    sample_ids : hashable or iterable of hashable

    Returns
    -------
    list

    Examples
    --------
    >>> from sklearn_dpu.unlearning.ids import as_id_list
    >>> as_id_list("12"), as_id_list(12), as_id_list(["12", 3])
    (['12'], [12], ['12', 3])
    """
    if isinstance(sample_ids, str | bytes):
        return [sample_ids]
    if isinstance(sample_ids, bool | np.bool_) or (
        isinstance(sample_ids, np.ndarray) and sample_ids.dtype.kind == "b"
    ):
        raise TypeError(
            "sample ids are booleans (a mask?): pass the ids to delete, e.g. "
            "X.index[mask] or np.flatnonzero(mask) for row positions"
        )
    if isinstance(sample_ids, np.ndarray | np.generic):
        if np.ndim(sample_ids) == 0:
            return [sample_ids.item()]  # exact Python value (uint64 included)
        if sample_ids.ndim != 1:
            raise ValueError(f"sample ids must be one-dimensional, got shape {sample_ids.shape}")
        return sample_ids.tolist()
    if _is_pandas(sample_ids, "Index") or _is_pandas(sample_ids, "Series"):
        if sample_ids.dtype == bool:
            return as_id_list(np.asarray(sample_ids, dtype=bool))  # refused as a mask
        return sample_ids.tolist()
    if _is_pandas(sample_ids, "DataFrame"):
        # Iterating a DataFrame yields its column labels, not its rows' ids.
        raise TypeError(
            "sample ids are a DataFrame: pass the ids of the rows to delete, e.g. "
            "X_del.index (or their sample_id values), not the rows"
        )
    if not isinstance(sample_ids, Iterable):
        return [sample_ids]
    values = list(sample_ids)
    if any(isinstance(v, bool | np.bool_) for v in values):
        raise TypeError(
            "sample ids contain booleans: True == 1 and False == 0 in Python, so a boolean "
            "id would name another sample; pass the ids themselves"
        )
    return values


def deletion_request(estimator: Any, sample_ids: Any) -> list:
    """:func:`as_id_list` for ``estimator.delete_samples``, refusing a row of
    ``X`` passed as ids.

    A row of a DataFrame (``X.loc[label]``) is a Series indexed by the
    feature names: read as ids, its feature values would name other people
    (a row ``{"age": 54, "orders": 22}`` would delete ids 54 and 22).

    Raises
    ------
    TypeError
        ``sample_ids`` is a Series whose index holds every name of
        ``estimator.feature_names_in_``.
    """
    names = getattr(estimator, "feature_names_in_", None)
    if (
        names is not None
        and _is_pandas(sample_ids, "Series")
        and len(sample_ids) >= len(names)
        # a row, in any column order, maybe with y beside the features
        and bool(sys.modules["pandas"].Index(names).isin(sample_ids.index).all())
    ):
        raise TypeError(
            "sample ids are a Series indexed by the feature names, as a row of X is: "
            "pass the row's id (e.g. [row.name]), or, if these values are ids, pass them "
            "as a list or array (series.to_numpy())"
        )
    return as_id_list(sample_ids)


def check_request(sample_ids: Any) -> list:
    """The ids of a deletion request as a list, refused if it names none or
    repeats one (or an id is unhashable): the form every estimator checks
    before looking the ids up (a step that stores no ids checks only this).

    Raises
    ------
    UnlearningError
    """
    requested = as_id_list(sample_ids)
    if not requested:
        raise UnlearningError("no sample ids given")
    try:
        n_distinct = len(set(requested))
    except TypeError as err:
        raise UnlearningError(f"sample ids must be hashable: {err}") from err
    if n_distinct != len(requested):
        raise UnlearningError(
            f"{len(requested) - n_distinct} sample id(s) are requested more than once"
        )
    return requested


def _missing(value) -> bool:
    """None, or a value not equal to itself (NaN, NaT), or one that cannot say (pd.NA)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return True


def check_id_array(ids: ArrayLike) -> np.ndarray:
    """Ids for new rows as a 1-d array: checked, exact and ready for the index.

    Integer ids become int64 (``uint64`` stays ``uint64``: no wrap-around),
    strings a ``str`` array, anything else an object array. Missing values
    (None, NaN, NaT, ``pd.NA``), values unequal to themselves, unhashable
    values, boolean arrays and duplicates are refused with ``ValueError`` /
    ``TypeError``. The checks are NumPy (and pandas) element-wise operations,
    not a Python loop per id, except for lists (read once) and on the error
    path.

    Parameters
    ----------
    ids : array-like of shape (n_samples,)

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    if _is_pandas(ids, "DataFrame"):  # iterating one gives its column labels
        raise TypeError("sample_id is a DataFrame: pass one id per row, e.g. df.index or df['id']")
    if _is_pandas(ids, "Index") or _is_pandas(ids, "Series"):
        numeric = isinstance(ids.dtype, np.dtype) and ids.dtype.kind in "iuf"
        ids = ids.to_numpy() if numeric else np.asarray(ids.astype(object))
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise ValueError(f"sample_id must be one-dimensional, got shape {ids.shape}")
        kind = ids.dtype.kind
        if kind == "b":
            raise TypeError("sample_id is boolean (a mask?): ids must be labels, not flags")
        if kind in "iu":
            out = ids if ids.dtype in (np.int64, np.uint64) else ids.astype(np.int64)
        elif kind == "f":
            if np.isnan(ids).any():
                raise ValueError(
                    f"sample_id contains {int(np.isnan(ids).sum())} NaN value(s): NaN is "
                    "not equal to itself and could never be deleted"
                )
            out = ids.astype(np.float64)
        elif kind in "US":
            out = ids
        elif kind in "mM":
            if np.isnat(ids).any():
                raise ValueError(f"sample_id contains {int(np.isnat(ids).sum())} NaT value(s)")
            out = np.empty(len(ids), dtype=object)
            out[:] = list(ids)
        else:
            out = _object_ids(ids.tolist())
    else:
        out = _list_ids(list(ids))
    _check_unique(out)
    return out


def _list_ids(values: list) -> np.ndarray:
    """Lists are not passed to ``np.asarray`` blindly, which would turn
    ``["a", 10]`` into ``["a", "10"]`` and make id ``10`` unfindable. Booleans
    are refused (by :func:`_object_ids`): ``True == 1`` would make them
    collide with integer ids."""
    if values and all(isinstance(v, str) for v in values):
        array = np.asarray(values, dtype=str)
        # NumPy drops trailing NULs ("a\x00" would be stored as "a"): such
        # ids stay Python strings, compared exactly.
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        if np.array_equal(np.char.str_len(array), lengths):
            return array
        return _object_ids(values)
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_) for v in values):
        array = np.asarray(values)
        if array.dtype.kind in "iu":
            return array if array.dtype == np.uint64 else array.astype(np.int64)
    return _object_ids(values)


def _object_ids(values: list) -> np.ndarray:
    if any(isinstance(v, bool | np.bool_) for v in values):  # also in object arrays
        raise TypeError(
            "sample_id contains booleans: True == 1 and False == 0 in Python, so they "
            "cannot be ids next to numbers; pass the ids themselves"
        )
    out = np.empty(len(values), dtype=object)
    out[:] = values
    if not _all_self_equal(out):
        bad = [v for v in values if _missing(v)]  # error path only
        raise ValueError(
            f"sample_id contains {len(bad)} missing or self-unequal value(s) (None, NaN, "
            f"NaT, pd.NA), which could never be deleted: {describe_ids(bad)}"
        )
    return out


def _all_self_equal(ids: np.ndarray) -> bool:
    """No missing value (None, NaN, NaT, pd.NA) and every id equal to itself.

    Element-wise comparisons run in NumPy's loop (pandas' ``isna`` first when
    pandas is loaded); only ids whose comparison raises take a Python pass.
    """
    pandas = sys.modules.get("pandas")
    if pandas is not None and pandas.isna(ids).any():
        return False
    try:
        unequal = np.not_equal(ids, ids).astype(bool)
    except (TypeError, ValueError):
        return not any(map(_missing, ids.tolist()))
    return not unequal.any() and None not in ids.tolist()


def _check_unique(ids: np.ndarray) -> None:
    if ids.dtype == object:
        values = ids.tolist()
        try:
            if len(set(values)) == len(values):
                return
        except TypeError as err:
            bad = [v for v in values if not isinstance(v, Hashable)]
            raise TypeError(
                f"sample_id contains {len(bad)} unhashable value(s): {describe_ids(bad)}"
            ) from err
        seen, twice = set(), {}
        for v in values:  # error path only
            if v in seen:
                twice[v] = None
            seen.add(v)
        repeated = list(twice)
    else:
        unique, counts = np.unique(ids, return_counts=True)
        if len(unique) == len(ids):
            return
        repeated = unique[counts > 1].tolist()
    raise ValueError(f"sample_id contains {len(repeated)} repeated id(s): {describe_ids(repeated)}")


def requested_ids(X: Any, sample_id: ArrayLike | None) -> IdRequest:
    """Read the ids of a ``fit`` / ``partial_fit`` call from the raw input.

    Call it before ``validate_data``: it reads a DataFrame's index.

    Parameters
    ----------
    X : array-like or pandas DataFrame
        The input as the user passed it.
    sample_id : array-like, IdRequest or None

    Returns
    -------
    IdRequest

    Raises
    ------
    ValueError
        The ids (or the DataFrame's index labels) repeat or hold NaN.
    """
    if isinstance(sample_id, IdRequest):
        return sample_id
    if isinstance(sample_id, str | bytes):
        raise TypeError(
            "sample_id must hold one id per row of X (an array, list or pandas Index), "
            f"got a bare {type(sample_id).__name__}"
        )
    if sample_id is not None:
        return IdRequest(check_id_array(sample_id), "given")
    if _is_pandas(X, "DataFrame"):
        if not X.index.is_unique:
            raise ValueError(
                "X is a DataFrame whose index labels repeat; they are the default sample "
                "ids, so each must name one row. Pass sample_id=... or reset the index "
                "(X.reset_index(drop=True) numbers the rows; keep your own id column)."
            )
        try:
            return IdRequest(check_id_array(X.index), "index")
        except (TypeError, ValueError) as err:
            raise ValueError(f"the index labels of X cannot be sample ids: {err}") from err
    return IdRequest(None, "positions")


def sample_id_kind(estimator: Any) -> str | None:
    """``"given"``, ``"index"``, ``"positions"`` or ``"mixed"`` (positions, then
    ``sample_id``): where a fitted estimator's ids came from."""
    registry = getattr(getattr(estimator, "unlearning_state_", None), "registry", None)
    if registry is not None:
        return getattr(registry, "id_kind", None)
    return getattr(estimator, "_sample_id_kind", None)


def encode_datetime_ids(ids: np.ndarray) -> tuple[np.ndarray, tuple[str, str | None] | None]:
    """Ids that are all ``pandas.Timestamp`` (a ``DatetimeIndex`` used as ids)
    as int64 ticks and ``(unit, time zone)``, for files; other ids unchanged
    and ``None``.

    A saved registry holds its ids as an array; skops can store int64 ticks
    but cannot rebuild ``Timestamp`` objects. The encoding is used only when
    every id is a ``Timestamp`` (a ``datetime64`` equal to one hashes
    differently: decoding would merge them) and :func:`decode_datetime_ids`
    gives back the same instants with the same wall times (a zone that its
    name rebuilds), so a load finds every person under the same id.
    """
    pandas = sys.modules.get("pandas")
    if pandas is None or ids.dtype != object or not len(ids):
        return ids, None
    if set(map(type, ids)) != {pandas.Timestamp}:
        return ids, None
    index = pandas.Index(ids)  # a DatetimeIndex iff the Timestamps share one zone
    if not isinstance(index, pandas.DatetimeIndex):
        return ids, None
    encoding = (str(index.unit), None if index.tz is None else str(index.tz))
    ticks = index.asi8.copy()
    try:
        decoded = pandas.DatetimeIndex(decode_datetime_ids(ticks, encoding))
        same = np.array_equal(decoded.asi8, ticks) and np.array_equal(
            decoded.tz_localize(None).asi8, index.tz_localize(None).asi8
        )
    except (ValueError, TypeError, KeyError):  # a zone that its name does not rebuild
        same = False
    return (ticks, encoding) if same else (ids, None)


def decode_datetime_ids(ticks: np.ndarray, encoding: tuple[str, str | None]) -> np.ndarray:
    """The ``Timestamp`` ids that :func:`encode_datetime_ids` encoded."""
    import pandas  # noqa: PLC0415  (the ids came from pandas)

    unit, zone = encoding
    index = pandas.DatetimeIndex(np.asarray(ticks, dtype=np.int64).view(f"M8[{unit}]"))
    if zone is not None:
        index = index.tz_localize("UTC").tz_convert(zone)
    out = np.empty(len(index), dtype=object)
    out[:] = list(index)
    return out
