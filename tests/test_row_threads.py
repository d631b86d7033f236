"""Passes over row ranges on threads (``_row_threads``): the same sums as the
serial pass, every row once, BLAS's thread count restored, no nesting."""

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from sklearn_dpu.linear_model import _binary_pass, _logistic_solvers, _row_threads
from sklearn_dpu.linear_model._binary_pass import BinaryLogLossPass
from sklearn_dpu.linear_model._multinomial_pass import MultinomialLogLossPass


@pytest.fixture
def ranges(monkeypatch):
    """Row ranges however small the problem, on ``parts`` threads."""

    def use(parts):
        monkeypatch.setattr(_row_threads, "_MIN_ENTRIES", 1)
        monkeypatch.setattr(_row_threads, "blas_threads", lambda: parts)

    return use


def _blas_counts():
    return [lib.num_threads for lib in _row_threads._controllers()]


@pytest.mark.parametrize("n, parts", [(10, 3), (7, 7), (100, 1), (5, 2), (0, 3)])
def test_row_ranges_cover_every_row_once(n, parts):
    ranges = _row_threads.row_ranges(n, parts)
    assert len(ranges) == parts
    covered = np.concatenate([np.arange(start, stop) for start, stop in ranges])
    np.testing.assert_array_equal(covered, np.arange(n))
    sizes = [stop - start for start, stop in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_ranges_run_on_threads_with_one_blas_thread_and_restore_it(ranges):
    ranges(3)
    before = _blas_counts()
    seen = []

    def fn(start, stop):
        seen.append((start, stop, threading.get_ident(), _blas_counts()))
        return stop - start

    assert _row_threads.map_row_ranges(fn, 30, 4) == [10, 10, 10]
    assert sorted(s[:2] for s in seen) == [(0, 10), (10, 20), (20, 30)]
    assert len({s[2] for s in seen}) > 1  # not all on the caller's thread
    assert all(counts == [1] * len(before) for *_, counts in seen)
    assert _blas_counts() == before


def test_a_failing_range_raises_after_every_range_ends_and_restores_blas(ranges):
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


def test_multinomial_pass_on_ranges_equals_the_serial_pass(ranges):
    A, rng = _rows(p=6)
    y = rng.integers(0, 4, A.shape[0])
    theta = rng.standard_normal(4 * A.shape[1])
    weights = rng.random(A.shape[0])
    with threadpool_limits(1):
        serial = MultinomialLogLossPass(A, y, 4)
        value, grad = serial.value_and_grad(theta)
        weighted = serial.gradient(theta, weights)
    ranges(2)
    split = MultinomialLogLossPass(A, y, 4)
    split_value, split_grad = split.value_and_grad(theta)
    np.testing.assert_allclose(split_value, value, rtol=1e-13)
    np.testing.assert_allclose(split_grad, grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(split.gradient(theta), grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(split.gradient(theta, weights), weighted, rtol=1e-12, atol=1e-12)


def test_clip_on_ranges_writes_every_row_bit_for_bit(ranges):
    A, rng = _rows(n=2000, p=5)
    X = A * rng.choice([0.1, 10.0], size=(A.shape[0], 1))  # some rows clipped
    with threadpool_limits(1):
        serial = _logistic_solvers.normalized_rows(X, None, 2.0, True)
    ranges(3)
    np.testing.assert_array_equal(_logistic_solvers.normalized_rows(X, None, 2.0, True), serial)
