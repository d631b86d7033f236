"""Vectorized lookup from sample id to registry slot.

:class:`~sklearn_dpu.unlearning.state.SampleRegistry` stores the ids of its
slots as one NumPy array; this module finds the slots of many ids at once,
with no Python loop per id on the paths that matter:

* NumPy ids of one type (``int64``, ``uint64``, ``float64``, ``str``): a sorted
  copy of the live ids and the slots in that order, built on the first lookup
  (``O(n log n)``, or ``O(n)`` when the ids are already increasing, as row
  positions are) and kept up to date by deletions (``O(n)`` memory moves per
  deletion call, no re-sort). A request is matched with ``np.searchsorted``.
* ``object`` ids (mixed types, tuples, timestamps...), and requests whose
  values are not all of the stored type (``1.0`` for the integer id ``1``):
  a ``dict``, as Python's ``==`` and ``hash`` decide, built only then. The
  sorted path gives the same answers as the dict wherever it is used: a value
  of the stored type equals a stored id exactly when the comparison of the
  two in that type says so.
"""

import numpy as np

__all__ = ["IdIndex"]

_NUMERIC_TYPES = {
    "i": (int, np.integer),
    "u": (int, np.integer),
    "f": (float, np.floating),
}


def _request_array(requested: list, dtype: np.dtype) -> np.ndarray | None:
    """``requested`` as an array of ``dtype`` if every value is of that kind
    and exactly representable in it, else ``None`` (use the dict).

    Booleans never reach here (refused by
    :func:`~sklearn_dpu.unlearning.ids.as_id_list`).
    """
    types = set(map(type, requested))
    if dtype.kind in "US":
        if not all(issubclass(t, str) for t in types):
            return None
        values = np.asarray(requested, dtype=str)
        # NumPy drops trailing NULs ("a\x00" would become "a"): such a request
        # goes to the dict, which compares the Python strings.
        lengths = np.fromiter(map(len, requested), dtype=np.int64, count=len(requested))
        return values if np.array_equal(np.char.str_len(values), lengths) else None
    allowed = _NUMERIC_TYPES.get(dtype.kind)
    if allowed is None or not all(issubclass(t, allowed) for t in types):
        return None
    try:
        values = np.asarray(requested)
    except OverflowError:  # an int beyond 64 bits: equal to no stored id
        return None
    if values.dtype == dtype:
        return values
    if values.dtype.kind in "iuf" and np.can_cast(values.dtype, dtype, "safe"):
        return values.astype(dtype)  # exact: int32 -> int64, float32 -> float64
    return None  # e.g. int64 request for uint64 ids: the dict decides exactly


class IdIndex:
    """Slots of ids among the live slots of a registry (an in-memory cache).

    Parameters
    ----------
    ids : ndarray
        The id of every live slot, in slot order (a view is fine: it is copied
        into the index).
    slots : ndarray of int64
        The slots those ids are in.
    """

    def __init__(self, ids: np.ndarray, slots: np.ndarray):
        self._dict: dict | None = None
        if ids.dtype.kind in "iufUS":
            if len(ids) < 2 or bool(np.all(ids[1:] > ids[:-1])):
                order = np.arange(len(ids))
            else:
                order = np.argsort(ids, kind="stable")
            self.sorted_ids = ids[order]
            self.sorted_slots = slots[order]
        else:
            self.sorted_ids = None
            self.sorted_slots = None
            self._dict = dict(zip(ids.tolist(), slots.tolist(), strict=True))

    def _as_dict(self) -> dict:
        if self._dict is None:
            self._dict = dict(
                zip(self.sorted_ids.tolist(), self.sorted_slots.tolist(), strict=True)
            )
        return self._dict

    def find(self, requested: list) -> np.ndarray:
        """Slots of the ids in ``requested`` (a list of Python values), -1 where unknown."""
        if self.sorted_ids is not None:
            values = _request_array(requested, self.sorted_ids.dtype)
            if values is not None:
                return self.find_array(values)
        lookup = self._as_dict().get
        try:
            found = [lookup(v, -1) for v in requested]  # object ids or mixed requests only
        except TypeError:  # unhashable: refused earlier, but be safe
            found = [-1] * len(requested)
        return np.asarray(found, dtype=np.int64).reshape(-1)

    def find_array(self, values: np.ndarray) -> np.ndarray:
        """Slots of an array of ids of the stored dtype, -1 where unknown."""
        stored = self.sorted_ids
        if len(stored) == 0:
            return np.full(len(values), -1, dtype=np.int64)
        position = np.minimum(np.searchsorted(stored, values), len(stored) - 1)
        hit = stored[position] == values
        return np.where(hit, self.sorted_slots[position], -1).astype(np.int64)

    def any_of(self, values: np.ndarray) -> np.ndarray:
        """Which of the new ids ``values`` (a checked id array) are present."""
        if self.sorted_ids is not None and values.dtype == self.sorted_ids.dtype:
            return self.find_array(values) >= 0
        return self.find(values.tolist()) >= 0

    def drop(self, ids: np.ndarray) -> None:
        """Forget the ids ``ids`` (present, of the stored dtype)."""
        if self._dict is not None:
            for sample_id in ids.tolist():  # ids of the deleted rows only
                del self._dict[sample_id]
        if self.sorted_ids is not None:
            position = np.searchsorted(self.sorted_ids, ids)
            self.sorted_ids = np.delete(self.sorted_ids, position)
            self.sorted_slots = np.delete(self.sorted_slots, position)
