"""The fused kernels of the fits (issue 11) give the values of the code they replace.

Speed is measured in ``benchmarks/bench_solver_speed.py``; these tests only
check that each faster path computes the same bits as the reference path it
stands for (nothing here is timed).
"""

import numpy as np
import pytest

from sklearn_dpu import UnlearnableSGDClassifier
from sklearn_dpu.linear_model import _coupled_sgd
from sklearn_dpu.privacy import clipping
from sklearn_dpu.privacy.clipping import clip_rows_l2


def _rows(seed=0, n=200, d=7):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.exponential(3.0, size=(n, 1))
    X[0] = 0.0  # a zero row
    X[1] = 1e200  # a row whose squared norm overflows
    return X


@pytest.mark.filterwarnings("error")  # silent: a warning would depend on the values
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("input_dtype", [np.float64, np.float32])
@pytest.mark.parametrize("block_rows", [None, 1, 3, 64])
def test_clip_rows_l2_out_equals_assigning_the_result(monkeypatch, dtype, input_dtype, block_rows):
    # Into ``out`` the rows go block by block (None: the default block, here
    # all 200 rows; 3: a partial last block): the values of the whole-array
    # clip, a float32 X cast to float64 block by block.
    X = _rows()
    if input_dtype is np.float32:
        X[1] = 1e30  # the overflowing row, as far as float32 goes
        X = X.astype(np.float32)
    if block_rows is not None:
        monkeypatch.setattr(clipping, "CLIP_BLOCK_BYTES", 8 * X.shape[1] * block_rows)
    expected = np.empty(X.shape, dtype=dtype)
    expected[:] = clip_rows_l2(X, 2.5)
    out = np.full(X.shape, np.nan, dtype=dtype)
    returned = clip_rows_l2(X, 2.5, out=out)
    assert returned is out
    assert np.array_equal(out, expected)
    # a strided destination (a column block of a wider array) works too
    wide = np.zeros((len(X), X.shape[1] + 2), dtype=dtype)
    clip_rows_l2(X, 2.5, out=wide[:, 1:-1])
    assert np.array_equal(wide[:, 1:-1], expected)
    assert not wide[:, [0, -1]].any()


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("block_rows", [1, 2, 5, 64])
def test_clip_rows_l2_out_with_few_clipped_rows_per_block(monkeypatch, dtype, order, block_rows):
    # About 10% of the rows over the bound: the blocks copy their rows and
    # rewrite the clipped ones (the branch a block of mostly clipped rows
    # skips), with the values of the whole-array clip, whatever the layout
    # of X and however many rows are left for the last block (1-row blocks
    # are never made: a lone row of a Fortran-ordered X sums in another order).
    rng = np.random.default_rng(7)
    X = rng.standard_normal((203, 9))
    X *= rng.uniform(0.5, 0.9, size=(203, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    X[::10] *= 4.0  # every tenth row over the bound of 1
    X = np.asarray(X.astype(dtype), order=order)
    norms = np.linalg.norm(X.astype(np.float64), axis=1)
    bound = 1.0
    monkeypatch.setattr(clipping, "CLIP_BLOCK_BYTES", 8 * X.shape[1] * block_rows)
    blocks = clipping.clip_blocks(*X.shape)
    assert all(rows.stop - rows.start >= 2 for rows in blocks)
    assert [rows.start for rows in blocks][1:] == [rows.stop for rows in blocks][:-1]
    clipped = [int((norms[rows] > bound * clipping._INSIDE).sum()) for rows in blocks]
    if block_rows == 64:  # each block takes the copy-and-rewrite branch
        assert all(
            0 < k and 4 * k <= rows.stop - rows.start
            for k, rows in zip(clipped, blocks, strict=True)
        )
    expected = clip_rows_l2(X, bound).astype(np.float32)
    out = np.full(X.shape, np.nan, dtype=np.float32)
    clip_rows_l2(X, bound, out=out)
    assert np.array_equal(out, expected)
    wide = np.full((len(X), X.shape[1]), np.nan)
    clip_rows_l2(X, bound, out=wide)
    assert np.array_equal(wide, clip_rows_l2(X, bound))


@pytest.mark.parametrize("clipped_rows", [0, 1, 3])
def test_a_block_refuses_an_integer_out_whatever_the_rows(clipped_rows):
    # Whether a block raised depended on how many of its rows were clipped
    # (a multiply into an integer out refused the cast, a copy truncated
    # silently): the refusal must not depend on the values, and nothing is
    # written.
    X = np.array([[0.3, 0.4], [0.06, 0.08], [0.6, 0.8]])
    X[:clipped_rows] *= 100.0
    out = np.full(X.shape, 7, dtype=np.int64)
    with pytest.raises(TypeError, match="floating-point"):
        clipping.clip_block_into(X, 2.0, out)
    assert (out == 7).all()


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("solver", ["sgd", "nesterov"])
def test_gathered_chunks_and_eval_point_match_the_reference(monkeypatch, fit_intercept, solver):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((600, 5))
    y = rng.integers(0, 3, size=600)
    # Small chunks: several chunks of a few steps each, and a spare buffer
    # tail that a later, smaller chunk must not read.
    monkeypatch.setattr(_coupled_sgd, "_CHUNK_VALUES", 300)
    est = UnlearnableSGDClassifier(
        solver=solver,
        max_iter=23,
        batch_size=40,
        fit_intercept=fit_intercept,
        feature_norm=3.0,
        random_state=0,
    ).fit(X, y)
    state = est.unlearning_state_
    covered, n_chunks = [], 0
    # The buffers are reused: read each chunk before asking for the next.
    for first, last, Xc, yc in state._gathered_chunks(0):
        n_chunks += 1
        covered.extend(range(first, last))
        slots = state.batch_slots[state.batch_ptr[first] : state.batch_ptr[last]]
        X_ref, y_ref = state._rows(slots)
        assert Xc.shape == X_ref.shape and Xc.flags.c_contiguous
        assert np.array_equal(Xc, X_ref)
        assert np.array_equal(yc, y_ref)
    assert covered == list(range(state.n_steps))
    assert n_chunks > 3
    # a later start gives the same rows for the steps it covers
    first, last, Xc, _ = next(state._gathered_chunks(11))
    assert first == 11
    slots = state.batch_slots[state.batch_ptr[11] : state.batch_ptr[last]]
    assert np.array_equal(Xc, state._rows(slots)[0])
    steps = np.arange(state.n_steps)
    reference = state.eval_points(steps)
    for s in steps.tolist():
        assert np.array_equal(state._eval_point(s), reference[s])


def test_training_in_small_chunks_gives_the_same_run(monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((500, 4))
    y = (X[:, 0] > 0).astype(int)
    params = dict(max_iter=17, batch_size=30, feature_norm=2.0, random_state=3)
    reference = UnlearnableSGDClassifier(**params).fit(X, y).unlearning_state_
    monkeypatch.setattr(_coupled_sgd, "_CHUNK_VALUES", 1)  # one step per chunk
    chunked = UnlearnableSGDClassifier(**params).fit(X, y).unlearning_state_
    for name in ("path", "grad", "coupled", "noisy", "batch_slots"):
        assert np.array_equal(getattr(chunked, name), getattr(reference, name)), name


def test_serial_blas_keeps_the_passes_threaded_and_restores():
    from threadpoolctl import ThreadpoolController

    from sklearn_dpu._row_threads import SerialBlas

    def threads():
        return [
            lib.num_threads
            for lib in ThreadpoolController().select(user_api="blas").lib_controllers
        ]

    before = threads()
    seen = {}

    def fun(theta):
        seen["inside"] = threads()
        if theta is None:
            raise KeyError("boom")
        return theta

    with SerialBlas() as serial:
        assert all(count == 1 for count in threads())
        assert serial.threaded(fun)(3.0) == 3.0
        assert seen["inside"] == before  # the objective runs as the caller set it
        assert all(count == 1 for count in threads())
        with pytest.raises(KeyError):
            serial.threaded(fun)(None)
        assert all(count == 1 for count in threads())
    assert threads() == before
    with pytest.raises(ValueError), SerialBlas():
        raise ValueError
    assert threads() == before


@pytest.mark.parametrize("name", ["log_loss", "hinge", "modified_huber"])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_value_and_dz_equals_value_and_dz_separately(name, n_outputs):
    from sklearn_dpu.linear_model._losses import get_loss

    rng = np.random.default_rng(4)
    Z = rng.standard_normal((300, n_outputs)) * 20.0  # saturated margins too
    y = rng.integers(0, max(2, n_outputs), size=300)
    loss = get_loss(name)
    labels = [y, 2 * y - 1] if n_outputs == 1 else [y]  # binary: codes or signs
    for y_ in labels:
        values, D = loss.value_and_dz(Z, y_)
        assert np.array_equal(values, loss.value(Z, y_))
        assert np.array_equal(D, loss.dz(Z, y_))


def test_registry_builds_its_id_index_on_the_first_lookup():
    import pickle

    from sklearn_dpu.exceptions import UnlearningError
    from sklearn_dpu.unlearning.state import SampleRegistry

    reg = SampleRegistry(2, dtype=np.float32)
    ids = reg.check_new_ids(np.array(["a", "b", "c", "d", "e"]), 5)
    reg.add(ids, np.arange(10, dtype=np.float32).reshape(5, 2), chunk=1)
    assert reg._index is None  # a fit builds no index
    assert reg.n_samples == 5
    assert reg.slots_of(["d", "b"]).tolist() == [3, 1]
    assert reg._index is not None and reg._find(list("abcde")).tolist() == [0, 1, 2, 3, 4]
    reg.remove(np.array([1]))
    assert reg._find(["b"]).tolist() == [-1] and reg.n_samples == 4
    with pytest.raises(UnlearningError, match="not in the training set"):
        reg.slots_of(["b"])
    with pytest.raises(ValueError, match="already in the training set"):
        reg.check_new_ids(np.array(["f", "c"]), 2)
    reg.add(reg.check_new_ids(np.array(["f"]), 1), np.ones((1, 2), dtype=np.float32), chunk=2)
    assert reg.slots_of(["f"]).tolist() == [5]
    # Compaction (more than half deleted) and unpickling renumber the slots:
    # the index is rebuilt from the live rows.
    reg.remove(reg.slots_of(["a", "c", "d"]))
    assert reg.size == 2 and reg._index is None
    assert [reg.slots_of([i]).item() for i in "ef"] == [0, 1]
    loaded = pickle.loads(pickle.dumps(reg))
    assert loaded._index is None and loaded.n_samples == 2
    assert [loaded.slots_of([i]).item() for i in "fe"] == [1, 0]
    assert np.array_equal(loaded.rows[1], np.ones(2))


def test_registry_adopts_the_rows_of_a_fit_without_a_copy():
    from sklearn_dpu.unlearning.state import SampleRegistry

    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    reg = SampleRegistry(3, dtype=np.float32)
    reg.add(reg.check_new_ids(None, 4), rows, chunk=1, adopt=True)
    assert reg.rows is rows and reg.n_samples == 4
    more = np.ones((2, 3), dtype=np.float32)
    reg.add(reg.check_new_ids(None, 2), more, chunk=2, adopt=True)  # not empty: copied
    assert reg.rows is not more and not np.shares_memory(reg.rows, more)
    assert np.array_equal(reg.live()[0], np.vstack([rows, more]))
    # another dtype or width is copied (converted), never adopted
    for wrong in (rows.astype(np.float64), np.zeros((4, 3), dtype=np.float32)[:, :2]):
        fresh = SampleRegistry(wrong.shape[1], dtype=np.float32)
        fresh.add(fresh.check_new_ids(None, 4), wrong, chunk=1, adopt=True)
        assert fresh.rows is not wrong and fresh.rows.dtype == np.float32
        assert np.array_equal(fresh.live()[0], wrong)


@pytest.mark.parametrize("radius", [None, 100.0])
def test_certified_minimize_reads_the_data_once_per_point(radius):
    from sklearn_dpu.linear_model._certified_minimize import certified_minimize
    from sklearn_dpu.linear_model._losses import LinearModelLoss

    points = []

    class Recording(LinearModelLoss):
        def value_and_grad(self, theta, A, y):
            points.append(np.asarray(theta, dtype=float).tobytes())
            return super().value_and_grad(theta, A, y)

    rng = np.random.default_rng(5)
    n, p = 3000, 30  # L-BFGS then Newton (a dense Hessian costs more than 2e6 flops)
    A = rng.standard_normal((n, p)) / np.sqrt(p)
    y = (A @ rng.standard_normal(p) + 0.3 * rng.standard_normal(n) > 0).astype(int)
    loss = Recording(2, p, 1.0)
    solution = certified_minimize(loss, A, y, 1.0, 1e-6, radius=radius)
    assert all(a != b for a, b in zip(points, points[1:], strict=False))
    assert solution.n_grad >= len(points)  # passes over the data (Hessians too)

    class Generic(LinearModelLoss):  # the same (generic, not fused) path, unrecorded
        def value_and_grad(self, theta, A, y):
            return super().value_and_grad(theta, A, y)

    reference = certified_minimize(Generic(2, p, 1.0), A, y, 1.0, 1e-6, radius=radius)
    assert np.array_equal(solution.theta, reference.theta)
    assert solution.distance_bound <= 1e-6


@pytest.mark.parametrize("radius", [None, 100.0])
@pytest.mark.parametrize("p", [30, 200])  # Newton only; L-BFGS-B then Newton
def test_certified_minimize_fused_pass_reads_the_data_once_per_point(radius, p, monkeypatch):
    from sklearn_dpu.linear_model import _binary_pass
    from sklearn_dpu.linear_model._certified_minimize import certified_minimize
    from sklearn_dpu.linear_model._losses import LinearModelLoss

    points = []
    evaluate = _binary_pass.BinaryLogLossPass.value_and_grad

    def recording(self, theta):
        points.append(np.asarray(theta, dtype=float).tobytes())
        return evaluate(self, theta)

    rng = np.random.default_rng(5)
    n = 3000
    A = rng.standard_normal((n, p)) / np.sqrt(p)
    y = (A @ rng.standard_normal(p) + 0.3 * rng.standard_normal(n) > 0).astype(int)
    reference = certified_minimize(LinearModelLoss(2, p, 1.0), A, y, 1.0, 1e-6, radius=radius)
    monkeypatch.setattr(_binary_pass.BinaryLogLossPass, "value_and_grad", recording)
    solution = certified_minimize(LinearModelLoss(2, p, 1.0), A, y, 1.0, 1e-6, radius=radius)
    assert len(points) > 1
    assert all(a != b for a, b in zip(points, points[1:], strict=False))
    assert solution.n_grad >= len(points)
    assert np.array_equal(solution.theta, reference.theta)
    assert solution.distance_bound <= 1e-6


@pytest.mark.parametrize("solver", ["objective", "noisy_gd"])
def test_solver_steps_run_blas_on_one_thread_and_the_passes_threaded(monkeypatch, solver):
    # The steps' own linear algebra (Newton's solve; noisy GD's projection
    # after its preconditioner product) sees one BLAS thread, so no BLAS
    # worker is left spinning; the passes over the rows see the caller's.
    from threadpoolctl import threadpool_limits

    from sklearn_dpu import DPLogisticRegression
    from sklearn_dpu._row_threads import blas_threads
    from sklearn_dpu.linear_model import _binary_pass, _noisy_gd_glm

    seen = {"step": set(), "pass": set()}
    solve, project, eigh = np.linalg.solve, _noisy_gd_glm._project, np.linalg.eigh
    value_and_grad = _binary_pass.BinaryLogLossPass.value_and_grad
    gradient = _binary_pass.BinaryLogLossPass.gradient
    hessian = _binary_pass.BinaryLogLossPass.hessian

    def record(kind, fn):
        def call(*args):
            seen[kind].add(blas_threads())
            return fn(*args)

        return call

    monkeypatch.setattr(np.linalg, "solve", record("step", solve))
    monkeypatch.setattr(np.linalg, "eigh", record("step", eigh))
    monkeypatch.setattr(_noisy_gd_glm, "_project", record("step", project))
    monkeypatch.setattr(_binary_pass.BinaryLogLossPass, "hessian", record("pass", hessian))
    monkeypatch.setattr(
        _binary_pass.BinaryLogLossPass, "value_and_grad", record("pass", value_and_grad)
    )
    monkeypatch.setattr(_binary_pass.BinaryLogLossPass, "gradient", record("pass", gradient))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    with threadpool_limits(2):
        DPLogisticRegression(solver=solver, feature_norm=3.0, random_state=0).fit(X, y)
    assert seen["step"] == {1}
    assert seen["pass"] == {2}


def test_the_gram_of_dense_rows_is_summed_over_row_ranges(monkeypatch):
    # Each range's product on one BLAS thread; the sum is A^T A to rounding.
    from sklearn_dpu import _row_threads
    from sklearn_dpu.linear_model import _sparse_rows

    monkeypatch.setattr(_row_threads, "_MIN_ENTRIES", 1)
    monkeypatch.setattr(_row_threads, "blas_threads", lambda: 2)
    ranges, summed = [], _sparse_rows.sum_over_row_ranges

    def recorded(fn, n, row_entries):
        return summed(
            lambda start, stop: ranges.append(stop - start) or fn(start, stop), n, row_entries
        )

    monkeypatch.setattr(_sparse_rows, "sum_over_row_ranges", recorded)
    A = np.random.default_rng(0).normal(size=(101, 7))
    np.testing.assert_allclose(_sparse_rows.gram_matrix(A), A.T @ A, rtol=1e-13, atol=1e-12)
    assert sorted(ranges) == [50, 51]
