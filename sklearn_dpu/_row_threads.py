"""Passes over rows on as many threads as the caller lets BLAS use.

The fused gradient passes (:mod:`~sklearn_dpu.linear_model._binary_pass`),
the clips of :func:`~sklearn_dpu.linear_model._logistic_solvers.normalized_rows`
and of :class:`~sklearn_dpu.linear_model.UnlearnableSGDClassifier`, and the
latter's batch gathers and gradients, and
:class:`~sklearn_dpu.linear_model.DPLinearRegression`'s fused encoding
(:func:`~sklearn_dpu.linear_model._sufficient_statistics.encode_with_gram`)
walk their rows in blocks small enough to stay in cache. A threaded BLAS does
not pay on such blocks, and the element-wise work between the products runs
on one core. Splitting the *rows* does pay: each thread walks a contiguous
range of rows with one BLAS thread, and the partial
results are combined at the end. Measured at ``n = 1e5``, ``p = 501`` on 2
cores: a gradient pass took 40 ms with 2 BLAS threads and 24-26 ms as two row
ranges; the clip 122 ms and 72 ms.

:func:`map_row_ranges` runs a function on ``k`` contiguous ranges
(:func:`for_each_item`: on items handed out one at a time to the same
threads, for work a slowed thread must not hold back), ``k`` the
BLAS thread count the caller allows (``threadpoolctl.threadpool_limits``,
``OMP_NUM_THREADS``, a joblib worker's limit), never more ranges than rows
make worth a thread. While the ranges run, BLAS is held at one thread (as
scikit-learn's ``KMeans`` holds it around its own threads) and restored after.
That setting is process-wide, and a BLAS library may ignore it when it comes
from another thread than the main one (the OpenBLAS of NumPy's wheels does):
ranges are therefore used only on the main thread, and a pass called from any
other thread (a joblib ``threading`` worker, a user's thread pool) is one call
on all the rows, the serial pass unchanged. The partial results are returned in
range order, so on the main thread a combined result depends only on the data
and ``k``; it differs from the serial pass's by rounding only. (The hold
applies to the BLAS calls of every thread, so a computation another thread
runs meanwhile may round differently: some BLAS products' rounding depends on
their thread count.) The ranges run under the caller's ``numpy.errstate``,
its callback included. The hold is undone however the call ends, a
``KeyboardInterrupt`` included, and in a child forked during it. Sums over
rows are mathematically unchanged by the split: nothing here touches privacy.
"""

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = [
    "SerialBlas",
    "blas_controllers",
    "blas_threads",
    "for_each_item",
    "map_row_ranges",
    "row_ranges",
    "set_blas_threads",
    "sum_over_row_ranges",
]

T = TypeVar("T")

# A range must hold this many matrix entries (1 MiB of float64) for a thread
# to pay for its dispatch (tens of microseconds): UnlearnableSGDClassifier's
# 1000-row batches at d = 500 split (measured 1.26-1.5x -> 1.14-1.26x
# SGDClassifier on 2 cores; 2^16 was no better, 2^18 left them whole).
_MIN_ENTRIES = 1 << 17

_lock = threading.RLock()
_pools: dict[int, ThreadPoolExecutor] = {}  # by size; made once, never shut down
_local = threading.local()  # .inside: this thread runs a range
_libraries = None  # threadpoolctl's BLAS controllers
_held: list[int] | None = None  # the counts a hold will restore, while it lasts
_serial: list[int] | None = None  # the counts a SerialBlas block will restore


def _reset_after_fork() -> None:
    # A forked child has none of the parent's threads: a new lock, no pools,
    # and no hold (a fork made by another thread during one would otherwise
    # leave the child's BLAS at one thread for good). A row-range hold inside
    # a SerialBlas block's threaded call holds the block's counts, so either
    # record restores the caller's.
    global _lock, _local, _held, _serial
    _lock = threading.RLock()
    _pools.clear()
    _local = threading.local()
    held = _held if _held is not None else _serial
    _held = _serial = None
    if held is not None:
        _restore(held)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def blas_threads() -> int:
    """The BLAS thread count the caller allows.

    Returns
    -------
    int
        The largest ``num_threads`` over the BLAS libraries loaded (read
        through threadpoolctl; at least 1).

    Examples
    --------
    >>> blas_threads() >= 1
    True
    """
    return max([1, *(lib.num_threads for lib in blas_controllers())])


def row_ranges(n: int, parts: int) -> list[tuple[int, int]]:
    """Contiguous ranges covering rows ``0 .. n - 1``.

    Parameters
    ----------
    n : int
        Rows.
    parts : int
        Ranges, at least 1.

    Returns
    -------
    list of (int, int)
        ``parts`` pairs ``(start, stop)``, in order, sizes differing by at
        most one.

    Examples
    --------
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
    if worth < 2 or getattr(_local, "inside", False):  # ranges do not nest
        return 1
    if threading.current_thread() is not threading.main_thread():
        return 1  # the BLAS hold may not take from here (see the module's docstring)
    return max(1, min(blas_threads(), worth, n))


def _pool(size: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(size)
        if pool is None:
            pool = _pools[size] = ThreadPoolExecutor(size, thread_name_prefix="sklearn_dpu_rows")
        return pool


def blas_controllers() -> list:
    """threadpoolctl's controllers of the BLAS libraries, found once (1.4 ms;
    NumPy's and SciPy's are loaded with the package).

    Returns
    -------
    list
        ``threadpoolctl`` library controllers (``num_threads``,
        ``set_num_threads``).
    """
    global _libraries
    if _libraries is None:
        _libraries = ThreadpoolController().select(user_api="blas").lib_controllers
    return _libraries


def set_blas_threads(counts: list[int]) -> None:
    """Set each BLAS library's thread count, every one even if a
    ``KeyboardInterrupt`` arrives in between (re-raised at the end): a count
    left at 1 would slow, and change the rounding of, every later pass.

    Parameters
    ----------
    counts : list of int
        One count per library of :func:`blas_controllers`, in its order.
    """
    interrupted = None
    for lib, count in zip(blas_controllers(), counts, strict=True):
        while True:
            try:
                lib.set_num_threads(count)
                break
            except KeyboardInterrupt as error:
                interrupted = error
    if interrupted is not None:
        raise interrupted


def _restore(counts: list[int]) -> None:
    global _held
    set_blas_threads(counts)
    _held = None


def _inside(fn: Callable[[int, int], T], errors: tuple, start: int, stop: int) -> T:
    outer = getattr(_local, "inside", False)
    _local.inside = True
    modes, call = errors
    try:
        with np.errstate(call=call, **modes):  # the caller's, in every range
            return fn(start, stop)
    finally:
        _local.inside = outer


def _submit(pool: ThreadPoolExecutor, *args) -> Future:
    """``pool.submit(_inside, *args)``, or the range run here when the pool
    takes no more work (at interpreter exit)."""
    try:
        return pool.submit(_inside, *args)
    except RuntimeError:
        done: Future = Future()
        done.set_result(_inside(*args))
        return done


def map_row_ranges(fn: Callable[[int, int], T], n: int, row_entries: int) -> list[T]:
    """``[fn(start, stop) for each range]``, the ranges run on threads.

    Parameters
    ----------
    fn : callable
        ``fn(start, stop)`` processes rows ``start .. stop - 1``. It must
        write only to its own rows or scratch: the ranges run concurrently
        (each with BLAS on one thread).
    n : int
        Rows.
    row_entries : int
        Matrix entries per row (the work of a row, to decide whether a
        thread pays).

    Returns
    -------
    list
        The results in range order; one result, ``fn(0, n)`` called on the
        caller's thread, when one range is used (always, off the main thread).

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
    errors = (np.geterr(), np.geterrcall())
    pool = _pool(parts - 1)
    futures: list[Future] = []
    global _held
    counts = _held = [lib.num_threads for lib in blas_controllers()]
    try:
        set_blas_threads([1] * len(counts))  # the hold
        try:
            for start, stop in ranges[1:]:
                futures.append(_submit(pool, fn, errors, start, stop))
            first = _inside(fn, errors, *ranges[0])
            return [first] + [future.result() for future in futures]
        finally:
            wait(futures)  # no range outlives the call (or its BLAS setting)
    finally:
        _restore(counts)  # even when the hold or the wait is interrupted


class SerialBlas:
    """Run the BLAS libraries on one thread, except in the calls it wraps.

    An iterative solver's own linear algebra (L-BFGS-B's ``dim x maxcor``
    matrices, Newton's ``p x p`` solve, a preconditioner's product) is far
    below the size where BLAS threads pay. Yet a threaded BLAS wakes its
    threads for it, and OpenBLAS then keeps a worker spinning on a core for
    about 0.1 s, the core the next pass's row ranges
    (:func:`map_row_ranges`) need: at n = 1e5, d = 100 on 2 cores an
    objective-perturbation fit took 250-360 ms that way, 175 ms with its
    solves on one thread. The passes over the data (:meth:`threaded`) keep the
    caller's thread counts, so their values, hence the iterates, are
    unchanged. The setting is interrupt-safe (:func:`set_blas_threads`),
    made on the main thread only (elsewhere the block changes nothing), and,
    as the row ranges' hold, undone in a child forked during the block.

    Examples
    --------
    >>> with SerialBlas() as serial:
    ...     outside = blas_threads()
    ...     inside = serial.threaded(blas_threads)()
    >>> outside, inside == blas_threads()
    (1, True)
    """

    def __enter__(self) -> "SerialBlas":
        # Only on the main thread, as the row ranges (the setting is
        # process-wide: a fit in another thread would record the hold as its
        # caller's count and could restore it last, leaving BLAS at one
        # thread for good). Elsewhere nothing changes.
        # The outermost block records its counts for a child forked during
        # it (_reset_after_fork).
        global _serial
        self._threads, self._outermost = None, False
        if threading.current_thread() is threading.main_thread():
            threads = [lib.num_threads for lib in blas_controllers()]
            if _serial is None:
                _serial, self._outermost = threads, True
            try:
                set_blas_threads([1] * len(threads))
            except BaseException:  # an interrupt during the hold: undo it
                self._release(threads)
                raise
            self._threads = threads
        return self

    def __exit__(self, *exc) -> None:
        if self._threads is not None:
            self._release(self._threads)

    def _release(self, threads: list[int]) -> None:
        global _serial
        try:
            set_blas_threads(threads)
        finally:
            if self._outermost:
                _serial = None

    def threaded(self, fun: Callable[..., T]) -> Callable[..., T]:
        """``fun`` run with the caller's thread counts."""

        def call(*args):
            if self._threads is None:
                return fun(*args)
            set_blas_threads(self._threads)
            try:
                return fun(*args)
            finally:
                set_blas_threads([1] * len(self._threads))

        return call


def for_each_item(fn: Callable[[int], None], n: int, item_entries: int) -> None:
    """``fn(i)`` for ``i = 0 .. n - 1``, on :func:`map_row_ranges`' threads,
    the items handed out one at a time, in order, to whichever thread is free.

    Contiguous ranges split the work evenly between the threads; when one of
    them gets less of a core (another process, a BLAS library's worker
    spinning after its last call), the others wait for its range. Handed
    out one at a time, items go to the threads that are free, so the pass
    ends when the work does. Items in decreasing order of cost balance best.
    When an item raises (a ``KeyboardInterrupt`` included), no item is handed
    out after it; the items already running end, and the error is raised as
    :func:`map_row_ranges` raises it.

    Parameters
    ----------
    fn : callable
        ``fn(i)`` processes item ``i``. It must write only to the item's own
        output or scratch: items run concurrently (each with BLAS on one
        thread), on any of the threads.
    n : int
        Items.
    item_entries : int
        Matrix entries per item (the work of an item, to decide whether a
        thread pays).

    Examples
    --------
    >>> done = []
    >>> for_each_item(done.append, 5, 1)
    >>> sorted(done)
    [0, 1, 2, 3, 4]
    """
    lock = threading.Lock()
    items = iter(range(n))
    failed = threading.Event()

    def take(start: int, stop: int) -> None:  # the ranges only size the pass
        while not failed.is_set():
            with lock:
                i = next(items, None)
            if i is None:
                return
            try:
                fn(i)
            except BaseException:
                failed.set()  # no more items for anyone: the error comes soon
                raise

    map_row_ranges(take, n, item_entries)


def sum_over_row_ranges(fn: Callable[[int, int], T], n: int, row_entries: int) -> T:
    """The sum of :func:`map_row_ranges`' results, in range order.

    Parameters
    ----------
    fn, n, row_entries
        As :func:`map_row_ranges`. ``fn`` returns an array, or a tuple of
        numbers and arrays (summed element by element).

    Returns
    -------
    The first range's result plus the others', left to right.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.arange(12.0).reshape(6, 2)
    >>> sum_over_row_ranges(lambda i, j: (float(j - i), A[i:j].sum(axis=0)), 6, 2)
    (6.0, array([30., 36.]))
    """
    parts = map_row_ranges(fn, n, row_entries)
    total = parts[0]
    for part in parts[1:]:
        if isinstance(total, tuple):
            total = tuple(a + b for a, b in zip(total, part, strict=True))
        else:
            total = total + part
    return total
