"""Passes over rows on the cores the caller lets BLAS use.

The fused passes (:mod:`._binary_pass`, :mod:`._multinomial_pass`) and the
clip of :func:`~._logistic_solvers.normalized_rows` walk the rows in blocks
of a few hundred, so that a block is read from memory once and reused from
cache. NumPy's BLAS threads each product, but a product on one block is too
small for its threads to pay, and the element-wise work between products
runs on one core. Splitting the *rows* instead does pay: each thread walks a
contiguous range of rows with one BLAS thread, and the partial results are
combined at the end. Measured at ``n = 1e5``, ``p = 501`` on 2 cores: a
gradient pass took 40 ms with 2 BLAS threads and 24-26 ms as two row ranges;
the clip took 122 ms and 72 ms.

:func:`map_row_ranges` runs a function on ``k`` contiguous ranges, ``k`` the
BLAS thread count the caller allows (``threadpoolctl.threadpool_limits``,
``OMP_NUM_THREADS``, a joblib worker's limit), never more ranges than rows
make worth a thread; ``k = 1`` is one call on all the rows, the serial pass
unchanged. While the ranges run, BLAS is held at one thread (restored after
the last concurrent pass ends). The partial results are returned in range
order, so a combined result depends only on the data and ``k``, as a threaded
BLAS product's rounding does. Sums over rows are mathematically unchanged by
the split: nothing here touches privacy.
"""

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from threadpoolctl import ThreadpoolController

__all__ = ["blas_threads", "map_row_ranges", "row_ranges"]

T = TypeVar("T")

# A range must hold this many matrix entries (1 MiB of float64) for a thread
# to pay for its dispatch (tens of microseconds): UnlearnableSGDClassifier's
# 1000-row batches at d = 500 split (measured 1.26-1.5x -> 1.14-1.26x
# SGDClassifier on 2 cores; 2^16 was no better, 2^18 left them whole).
_MIN_ENTRIES = 1 << 17


class _State:
    """Process-wide: the BLAS libraries, the thread counts to restore, the pool."""

    lock = threading.Lock()
    libraries = None  # threadpoolctl controllers, found once (after numpy loads)
    depth = 0  # passes running ranges now
    saved: list[int] | None = None  # the counts to restore when depth returns to 0
    pool: ThreadPoolExecutor | None = None
    pool_size = 0
    local = threading.local()  # .inside: this thread runs a range


def _reset_after_fork() -> None:
    # A forked child has none of the parent's threads: a new lock, no pool.
    _State.lock = threading.Lock()
    _State.depth, _State.saved, _State.pool, _State.pool_size = 0, None, None, 0
    _State.local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _controllers() -> list:
    if _State.libraries is None:
        _State.libraries = ThreadpoolController().select(user_api="blas").lib_controllers
    return _State.libraries


def blas_threads() -> int:
    """The BLAS thread count the caller allows: the largest over the BLAS
    libraries loaded (1 inside a range of :func:`map_row_ranges`).

    >>> blas_threads() >= 1
    True
    """
    if getattr(_State.local, "inside", False):
        return 1
    with _State.lock:
        if _State.saved is not None:  # another pass holds BLAS at one thread
            return max(_State.saved, default=1)
    return max((lib.num_threads for lib in _controllers()), default=1)


def row_ranges(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(start, stop)`` ranges covering ``0 .. n``,
    sizes differing by at most one.

    >>> row_ranges(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    """
    base, extra = divmod(n, parts)
    bounds = [0]
    for j in range(parts):
        bounds.append(bounds[-1] + base + (j < extra))
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _parts(n: int, row_entries: int) -> int:
    worth = (n * max(row_entries, 1)) // _MIN_ENTRIES
    if worth < 2:
        return 1
    return max(1, min(blas_threads(), worth, n))


def _enter_serial_blas() -> None:
    with _State.lock:
        if _State.depth == 0:
            libraries = _controllers()
            _State.saved = [lib.num_threads for lib in libraries]
            for lib in libraries:
                lib.set_num_threads(1)
        _State.depth += 1


def _exit_serial_blas() -> None:
    with _State.lock:
        _State.depth -= 1
        if _State.depth == 0:
            for lib, count in zip(_controllers(), _State.saved, strict=True):
                lib.set_num_threads(count)
            _State.saved = None


def _pool(size: int) -> ThreadPoolExecutor:
    with _State.lock:
        if _State.pool is None or _State.pool_size < size:
            if _State.pool is not None:
                _State.pool.shutdown(wait=False)
            _State.pool = ThreadPoolExecutor(size, thread_name_prefix="sklearn_dpu_rows")
            _State.pool_size = size
        return _State.pool


def _inside(fn: Callable[[int, int], T], start: int, stop: int) -> T:
    local = _State.local
    outer = getattr(local, "inside", False)
    local.inside = True
    try:
        return fn(start, stop)
    finally:
        local.inside = outer


def map_row_ranges(fn: Callable[[int, int], T], n: int, row_entries: int) -> list[T]:
    """``[fn(start, stop) for each range]``, the ranges run on threads.

    Parameters
    ----------
    fn : callable
        ``fn(start, stop)`` processes rows ``start .. stop - 1``; it may call
        BLAS (held at one thread) and must write only to its own rows or
        scratch.
    n : int
        Rows.
    row_entries : int
        Matrix entries per row (the work of a row, to decide whether a
        thread pays).

    Returns
    -------
    list
        The results in range order; one result, ``fn(0, n)``, when one range
        is used.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.arange(12.0).reshape(6, 2)
    >>> sum(map_row_ranges(lambda i, j: A[i:j].sum(axis=0), 6, 2))
    array([30., 36.])
    """
    parts = _parts(n, row_entries)
    if parts == 1:
        return [fn(0, n)]
    ranges = row_ranges(n, parts)
    pool = _pool(parts - 1)
    _enter_serial_blas()
    futures = []
    try:
        futures = [pool.submit(_inside, fn, start, stop) for start, stop in ranges[1:]]
        first = _inside(fn, *ranges[0])
        return [first] + [future.result() for future in futures]
    finally:
        wait(futures)  # no range outlives the call (or its BLAS setting)
        _exit_serial_blas()
