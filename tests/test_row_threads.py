"""Passes over row ranges on threads (``_row_threads``): the same sums as the
serial pass, every row once, BLAS held at one thread and always restored
(errors, interrupts), serial off the main thread, no nesting, the caller's
errstate and error callback in every range."""

import json
import os
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from sklearn_dpu import _row_threads
from sklearn_dpu._validation import NonFiniteInputError
from sklearn_dpu.linear_model import _binary_pass, _logistic_solvers
from sklearn_dpu.linear_model._binary_pass import BinaryLogLossPass


@pytest.fixture
def ranges(monkeypatch):
    """Row ranges however small the problem, on ``parts`` threads."""

    def use(parts):
        monkeypatch.setattr(_row_threads, "_MIN_ENTRIES", 1)
        monkeypatch.setattr(_row_threads, "blas_threads", lambda: parts)

    return use


def _blas_counts():
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


@pytest.mark.parametrize("n, parts", [(10, 3), (7, 7), (100, 1), (5, 2), (0, 3)])
def test_row_ranges_cover_every_row_once(n, parts):
    ranges = _row_threads.row_ranges(n, parts)
    assert len(ranges) == parts
    covered = np.concatenate([np.arange(start, stop) for start, stop in ranges])
    np.testing.assert_array_equal(covered, np.arange(n))
    sizes = [stop - start for start, stop in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_ranges_run_on_threads(ranges):
    ranges(3)
    seen = []

    def fn(start, stop):
        seen.append((start, stop, threading.get_ident()))
        return stop - start

    assert _row_threads.map_row_ranges(fn, 30, 4) == [10, 10, 10]
    assert sorted(s[:2] for s in seen) == [(0, 10), (10, 20), (20, 30)]
    assert len({s[2] for s in seen}) > 1  # not all on the caller's thread


def test_items_are_handed_out_to_whichever_thread_is_free(ranges):
    # Item 0 blocks until every other item is done: with fixed halves its
    # thread would hold back the items after it; handed out one at a time,
    # the other thread takes them all.
    ranges(2)
    seen, rest_done = {}, threading.Event()

    def fn(i):
        seen[i] = threading.get_ident()
        if i == 0:
            assert rest_done.wait(timeout=10)
        elif len(seen) == 10:
            rest_done.set()

    _row_threads.for_each_item(fn, 10, 1)
    assert sorted(seen) == list(range(10))
    assert seen[0] not in {seen[i] for i in range(1, 10)}


def test_a_failing_item_stops_the_pass_and_blas_is_restored(ranges):
    # After item 1 fails no item is handed out: the other thread ends the one
    # it runs (released only once the failure is known) and takes no more.
    ranges(2)
    before = _blas_counts()
    ran, failing = [], threading.Event()

    def fn(i):
        ran.append(i)
        if i == 1:
            failing.set()
            raise ValueError("item 1")
        if i == 0:
            assert failing.wait(timeout=10)
            time.sleep(0.2)  # item 1's error reaches for_each_item meanwhile

    with pytest.raises(ValueError, match="item 1"):
        _row_threads.for_each_item(fn, 20, 1)
    assert sorted(ran) == [0, 1]
    assert _blas_counts() == before


def test_a_failing_range_raises_after_every_range_ends_and_blas_is_restored(ranges):
    ranges(4)
    before = _blas_counts()
    finished = []

    def fn(start, stop):
        if start == 0:
            raise ValueError("range 0")
        finished.append(start)
        return start

    with pytest.raises(ValueError, match="range 0"):
        _row_threads.map_row_ranges(fn, 8, 1)
    assert sorted(finished) == [2, 4, 6]
    assert _blas_counts() == before


def test_every_range_runs_under_the_callers_errstate(ranges):
    ranges(2)
    tiny = np.array([1e-300])

    def fn(start, stop):
        if start > 0:  # the range a worker thread runs
            return tiny * 1e-300  # underflows
        return tiny

    with np.errstate(under="raise"):
        with pytest.raises(FloatingPointError):
            _row_threads.map_row_ranges(fn, 4, 1)
    with np.errstate(under="ignore"):
        _row_threads.map_row_ranges(fn, 4, 1)  # no error


def test_blas_is_held_at_one_thread_in_the_ranges_and_restored(ranges):
    ranges(2)
    with threadpool_limits(2):
        before = _blas_counts()
        seen = _row_threads.map_row_ranges(lambda a, b: _blas_counts(), 4, 1)
        assert seen == [[1] * len(before)] * 2
        assert _blas_counts() == before


def test_off_the_main_thread_a_pass_is_one_call_and_blas_untouched(ranges):
    from concurrent.futures import ThreadPoolExecutor

    ranges(2)
    with threadpool_limits(2):
        before = _blas_counts()
        with ThreadPoolExecutor(1) as pool:
            calls = pool.submit(_row_threads.map_row_ranges, lambda a, b: (a, b), 10, 1).result()
        assert calls == [(0, 10)]
        assert _blas_counts() == before


def test_a_pass_inside_a_range_is_serial():
    # The real thread count (not the fixture): a nested call must not wait
    # on the pool its caller occupies.
    def inner(start, stop):
        return _row_threads.map_row_ranges(lambda a, b: (a, b), stop - start, 1 << 20)

    with threadpool_limits(2):
        if _row_threads.blas_threads() < 2:
            pytest.skip("BLAS runs on one thread here")
        outer = _row_threads.map_row_ranges(inner, 1000, 1 << 20)
    assert outer == [[(0, 500)], [(0, 500)]]


def test_one_thread_is_one_call_on_all_rows():
    with threadpool_limits(1):
        calls = _row_threads.map_row_ranges(lambda a, b: (a, b), 10**6, 1000)
    assert calls == [(0, 10**6)]


def _rows(n=3001, p=7, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, p + 1))[:, :p]  # a strided view, as the solvers read
    return A, rng


def test_binary_pass_on_ranges_equals_the_serial_pass(ranges, monkeypatch):
    monkeypatch.setattr(_binary_pass, "_MIN_ROWS", 64)
    A, rng = _rows()
    y = rng.integers(0, 2, A.shape[0])
    theta = rng.standard_normal(A.shape[1])
    with threadpool_limits(1):
        serial = BinaryLogLossPass(A, y)
        value, grad = serial.value_and_grad(theta)
        hessian, gradient = serial.hessian(theta), serial.gradient(theta)
        curvature = serial._curvature.copy()
    ranges(3)
    split = BinaryLogLossPass(A, y)
    split_value, split_grad = split.value_and_grad(theta)
    np.testing.assert_allclose(split_value, value, rtol=1e-13)
    np.testing.assert_allclose(split_grad, grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(split._curvature, curvature)  # row by row
    np.testing.assert_allclose(split.hessian(theta), hessian, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(split.gradient(theta), gradient, rtol=1e-12, atol=1e-12)
    # A negative control: a pass that dropped a range is detected.
    monkeypatch.setattr(
        _row_threads, "row_ranges", lambda n, parts: [(0, n // 2), (n // 2, n // 2)]
    )
    assert not np.allclose(split.gradient(theta), gradient)


def test_clip_on_ranges_writes_every_row_bit_for_bit(ranges):
    A, rng = _rows(n=2000, p=5)
    X = A * rng.choice([0.1, 10.0], size=(A.shape[0], 1))  # some rows clipped
    with threadpool_limits(1):
        serial = _logistic_solvers.normalized_rows(X, None, 2.0, True)
    ranges(3)
    np.testing.assert_array_equal(_logistic_solvers.normalized_rows(X, None, 2.0, True), serial)


def test_fits_from_threads_give_the_serial_bits_and_leave_blas_alone():
    from concurrent.futures import ThreadPoolExecutor

    from sklearn_dpu.linear_model import DPLogisticRegression, UnlearnableSGDClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((6000, 60))  # 366k entries: two ranges on 2 threads
    y = (X[:, 0] + 0.5 * rng.standard_normal(6000) > 0).astype(int)

    def fits():
        return [
            DPLogisticRegression(solver=s, feature_norm=8.0, random_state=0).fit(X, y).coef_
            for s in ("output", "noisy_gd")
        ] + [
            UnlearnableSGDClassifier(max_iter=5, batch_size=1200, feature_norm=8.0, random_state=0)
            .fit(X, y)
            .coef_
        ]

    with threadpool_limits(2):
        before = _blas_counts()
        main = fits()
        np.testing.assert_array_equal(
            np.concatenate(main, axis=None), np.concatenate(fits(), axis=None)
        )
        with ThreadPoolExecutor(3) as pool:
            together = [f.result() for f in [pool.submit(fits) for _ in range(3)]]
        assert _blas_counts() == before
    with threadpool_limits(1):
        serial = fits()
    for run in together:  # off the main thread: the serial pass
        for got, expected in zip(run, serial, strict=True):
            np.testing.assert_array_equal(got, expected)
    for got, expected in zip(main, serial, strict=True):  # ranges: rounding only
        # (the Newton matrix is single precision from 32 columns: its
        # rounding moves the steps, measured 7.6e-12 at most here)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10)


def test_the_callers_error_callback_reaches_every_range(ranges):
    ranges(2)
    calls = []

    def fn(start, stop):
        return np.array([1e308]) * 10.0  # overflows in every range

    with np.errstate(over="call", call=lambda kind, flag: calls.append(kind)):
        _row_threads.map_row_ranges(fn, 4, 1)
    assert calls == ["overflow", "overflow"]


class _Interrupting:
    """A BLAS controller whose first setting to 1 is interrupted (a Ctrl-C
    arriving while the hold is being set)."""

    def __init__(self, lib):
        self.lib, self.interrupted = lib, False

    @property
    def num_threads(self):
        return self.lib.num_threads

    def set_num_threads(self, count):
        if count == 1 and not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        self.lib.set_num_threads(count)


def test_an_interrupted_hold_still_restores_every_library(ranges, monkeypatch):
    ranges(2)
    with threadpool_limits(2):
        before = _blas_counts()
        libraries = _row_threads.blas_controllers()
        monkeypatch.setattr(_row_threads, "_libraries", [_Interrupting(lib) for lib in libraries])
        with pytest.raises(KeyboardInterrupt):
            _row_threads.map_row_ranges(lambda a, b: _blas_counts(), 4, 1)
        assert _blas_counts() == before
        assert _row_threads._held is None


def test_ranges_run_on_the_callers_thread_when_the_pool_takes_no_work(ranges, monkeypatch):
    class Closed:
        def submit(self, *args):
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    ranges(3)
    monkeypatch.setattr(_row_threads, "_pool", lambda size: Closed())
    threads = _row_threads.map_row_ranges(lambda a, b: (a, b, threading.get_ident()), 9, 1)
    assert [t[:2] for t in threads] == [(0, 3), (3, 6), (6, 9)]
    assert {t[2] for t in threads} == {threading.get_ident()}


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("parts", [2, 3])
def test_the_encoding_on_ranges_gives_the_same_codes_and_gram_bit_for_bit(
    ranges, parts, fit_intercept
):
    from sklearn_dpu.linear_model import _sufficient_statistics as ss

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1001, 7)) * np.linspace(0.1, 3, 7)
    y = rng.normal(size=1001) * 3
    args = (X, y, 2.0, 0.1, 2.5, fit_intercept)
    assert ss._ENCODE_MIN_ROWS < 1001 // parts  # several blocks per range
    codes, gram = ss.encode_with_gram(*args)
    ranges(parts)
    split_codes, split_gram = ss.encode_with_gram(*args)
    np.testing.assert_array_equal(split_codes, codes)
    np.testing.assert_array_equal(split_gram, gram)
    # and both are the reference encoding's
    np.testing.assert_array_equal(codes, ss.encode_rows(X, y, 2.0, 0.1, 2.5))
    np.testing.assert_array_equal(gram, ss.gram_of_codes(codes, fit_intercept))


def test_a_non_finite_row_in_a_later_range_raises(ranges):
    from sklearn_dpu.linear_model import _sufficient_statistics as ss

    X = np.ones((1000, 3)) * 0.1
    X[-1, 0] = np.nan
    ranges(2)
    with pytest.raises(NonFiniteInputError):
        ss.encode_with_gram(X, np.zeros(1000), 1.0, 0.0, 1.0, True)


def test_an_interrupted_serial_blas_hold_still_restores_every_library(monkeypatch):
    with threadpool_limits(2):
        before = _blas_counts()
        libraries = _row_threads.blas_controllers()
        monkeypatch.setattr(_row_threads, "_libraries", [_Interrupting(lib) for lib in libraries])
        with pytest.raises(KeyboardInterrupt), _row_threads.SerialBlas():
            pass  # pragma: no cover - the hold is interrupted before
        assert _blas_counts() == before
        assert _row_threads._serial is None


def test_serial_blas_off_the_main_thread_changes_nothing():
    # The setting is process-wide: a fit in another thread must neither hold
    # BLAS for the main thread's work nor record a hold as its caller's count.
    with threadpool_limits(2):
        before = _blas_counts()

        def in_worker():
            with _row_threads.SerialBlas() as serial:
                return _blas_counts(), serial.threaded(_blas_counts)()

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            inside, threaded = pool.submit(in_worker).result()
        assert inside == threaded == before
        assert _blas_counts() == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("where", ["block", "range inside threaded"])
def test_a_child_forked_during_a_hold_gets_the_callers_blas_threads(ranges, where):
    # The setting is process-wide and the child has none of the parent's
    # threads: a child forked while BLAS is held at one thread (by a
    # SerialBlas block, or by row ranges inside its threaded call) starts
    # with the caller's counts, not with one thread for good.
    ranges(2)

    def child_counts():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            try:
                os.close(read)
                os.write(write, json.dumps(_blas_counts()).encode())
            finally:
                os._exit(0)  # never back into the test runner
        os.close(write)
        with os.fdopen(read) as pipe:
            counts = json.loads(pipe.read())
        os.waitpid(pid, 0)
        return counts

    with threadpool_limits(2), _row_threads.SerialBlas() as serial:
        before = serial._threads
        assert _blas_counts() == [1] * len(before)  # held
        if where == "block":
            seen = child_counts()
        else:
            seen = serial.threaded(
                lambda: _row_threads.map_row_ranges(lambda i, j: child_counts(), 2, 1)[0]
            )()
        assert seen == before
    assert _row_threads._serial is None  # the block's record ends with it
