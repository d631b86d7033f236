"""DPLinearRegression: exact deletion, streaming, persistence of the deletion state."""

import io
import pickle
import zipfile

import joblib
import numpy as np
import pytest

from sklearn_dpu import io as dpu_io
from sklearn_dpu.exceptions import UnlearningError
from sklearn_dpu.linear_model import DPLinearRegression, _dp_linear
from sklearn_dpu.linear_model._sufficient_statistics import encode_with_gram
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.calibration import gaussian_noise_multiplier
from sklearn_dpu.privacy.mechanisms import GaussianMechanism

from ._stats import n_trials, same_distribution_pvalue

PARAMS = dict(epsilon=5.0, feature_norm=1.0, target_bound=1.0)


def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, 2))
    y = np.clip(X @ [1.0, -0.5] + 0.05 * rng.normal(size=n), -1, 1)
    return X, y


def _model(reg):
    return np.r_[reg.coef_, reg.intercept_]


@pytest.mark.parametrize("solver", ["ssp", "noisy_gd"])
def test_state_after_deletion_equals_a_fit_on_the_remaining_rows(solver):
    X, y = _data(200)
    ids = [f"user{i}" for i in range(200)]
    deleted = [3, 50, 199, 120]
    keep = np.setdiff1d(np.arange(200), deleted)
    reg = DPLinearRegression(solver=solver, max_iter=20, random_state=0, **PARAMS)
    reg.fit(X, y, sample_id=ids).delete_samples([ids[i] for i in deleted])
    fresh = DPLinearRegression(solver=solver, max_iter=20, random_state=0, **PARAMS)
    fresh.fit(X[keep], y[keep], sample_id=[ids[i] for i in keep])

    state, fresh_state = reg.unlearning_state_, fresh.unlearning_state_
    rows, stored_ids, _ = state.registry.live()
    fresh_rows, fresh_ids, _ = fresh_state.registry.live()
    np.testing.assert_array_equal(rows, fresh_rows)  # same rows, same order
    np.testing.assert_array_equal(stored_ids, fresh_ids)
    if solver == "ssp":
        exact = [node.exact for node in state.statistics.nodes]
        fresh_exact = [node.exact for node in fresh_state.statistics.nodes]
    else:
        exact, fresh_exact = [state.exact_gram], [fresh_state.exact_gram]
    for a, b in zip(exact, fresh_exact, strict=True):
        np.testing.assert_array_equal(a, b)  # bit for bit: integer statistics


def _fit_then_delete(X, y, deleted, seeds, **extra):
    out = []
    for seed in seeds:
        reg = DPLinearRegression(random_state=seed, **PARAMS, **extra).fit(X, y)
        out.append(_model(reg.delete_samples(deleted)))
    return np.array(out)


def _fit_on(X, y, seeds, **extra):
    return np.array(
        [_model(DPLinearRegression(random_state=s, **PARAMS, **extra).fit(X, y)) for s in seeds]
    )


@pytest.mark.statistical
@pytest.mark.parametrize("broken", [False, True])
def test_deletion_is_exact_in_distribution(monkeypatch, broken):
    # (fit on D, delete K) and (fit on D \ K) over many fixed seeds give the
    # same law of the released model. The negative control forgets to subtract
    # the deleted rows; the same test must reject it.
    if broken:
        monkeypatch.setattr(
            _dp_linear, "subtract_gram_of_codes", lambda gram, codes, fit_intercept: None
        )
    X, y = _data(30)
    X[:3], y[:3] = [[0.7, -0.7]] * 3, [-1.0] * 3  # influential rows, to give the test power
    trials = n_trials(ci=600, full=5000)
    after_delete = _fit_then_delete(X, y, [0, 1, 2], range(trials))
    retrained = _fit_on(X[3:], y[3:], range(trials, 2 * trials))
    pvalue = same_distribution_pvalue(after_delete, retrained)
    print(f"two-sample p-value (broken={broken}): {pvalue:.3g}")
    assert (pvalue > 1e-3) != broken, pvalue


def test_deletion_draws_fresh_noise():
    # A re-release may not reuse the noise of the release it replaces: two
    # releases with shared noise can be subtracted to cancel it.
    X, y = _data(50)
    reg = DPLinearRegression(random_state=0, **PARAMS).fit(X, y)
    node = reg.unlearning_state_.statistics.nodes[0]
    noise_before = node.noisy - node.exact * reg.unlearning_state_.statistics.scale
    reg.delete_samples([7])
    noise_after = node.noisy - node.exact * reg.unlearning_state_.statistics.scale
    assert np.corrcoef(noise_before.ravel(), noise_after.ravel())[0, 1] < 0.5
    assert not np.allclose(noise_before, noise_after)


def _secret_bytes(X, y, row):
    """Byte patterns of one training row as it could appear in a file."""
    codes, _ = encode_with_gram(X[row : row + 1], y[row : row + 1], 1.0, 0.0, 1.0, True)
    return [codes.tobytes(), X[row].tobytes()]


def _id_bytes(sample_id):
    """An id as pickle (UTF-8) or a numpy str array (UTF-32) would store it."""
    return [sample_id.encode("utf-8"), sample_id.encode("utf-32-le")]


@pytest.mark.parametrize("dump", ["pickle", "joblib", "skops"])
def test_saved_state_holds_nothing_of_deleted_rows(tmp_path, dump):
    rng = np.random.default_rng(3)
    X = rng.uniform(-0.5, 0.5, size=(40, 3))
    y = rng.uniform(-0.9, 0.9, size=40)
    ids = [f"person-{i}@example.org" for i in range(40)]
    reg = DPLinearRegression(random_state=0, **PARAMS).fit(X, y, sample_id=ids)
    reg.partial_fit(X[:5] * 0.9, y[:5], sample_id=[f"late-{i}" for i in range(5)])
    reg.delete_samples([ids[11], ids[23], "late-2"])
    path = tmp_path / "model"
    if dump == "pickle":
        blob = pickle.dumps(reg)
    elif dump == "joblib":
        joblib.dump(reg, path)
        blob = path.read_bytes()
    else:
        dpu_io.save(reg, path)
        with zipfile.ZipFile(path) as archive:
            blob = b"".join(archive.read(name) for name in archive.namelist())
    for row in (11, 23):
        for pattern in _secret_bytes(X, y, row):
            assert pattern not in blob
        assert not any(p in blob for p in _id_bytes(ids[row]))
    assert not any(p in blob for p in _id_bytes("late-2"))
    # positive control: a row that was not deleted is found by the same search
    assert _secret_bytes(X, y, 12)[0] in blob
    assert any(p in blob for p in _id_bytes(ids[12]))


@pytest.mark.parametrize("reload", ["pickle", "skops"])
def test_deletion_after_reload(tmp_path, reload):
    X, y = _data(60)
    reg = DPLinearRegression(random_state=0, **PARAMS).fit(X, y)
    if reload == "pickle":
        loaded = pickle.loads(pickle.dumps(reg))
    else:
        dpu_io.save(reg, tmp_path / "m.skops")
        loaded = dpu_io.load(tmp_path / "m.skops")
    np.testing.assert_array_equal(loaded.predict(X), reg.predict(X))
    reg.delete_samples([4, 5])
    loaded.delete_samples([4, 5])
    # same random_state and release count: the same re-release
    np.testing.assert_allclose(loaded.coef_, reg.coef_)
    assert loaded.deletion_log_[-1].n_deleted == 2
    assert len(loaded.privacy_ledger_) == 2


def test_deletion_report_and_accounting():
    X, y = _data(64)
    reg = DPLinearRegression(random_state=0, **PARAMS).fit(X, y)
    reg.delete_samples([1, 2, 3])
    report = reg.deletion_log_[-1]
    assert report.method == "exact" and report.n_deleted == 3
    assert report.cost["wall_time_s"] > 0 and report.retrain_cost["flops"] > 0
    assert report.rerelease_epsilon == pytest.approx(5.0, rel=1e-6)
    assert "distribution of a fit on the remaining" in report.summary()
    # two releases of the same chunk compose
    multiplier = gaussian_noise_multiplier(5.0, 1e-5)
    event = GaussianMechanism(3.0, multiplier).dp_event
    assert reg.privacy_spent_.epsilon == pytest.approx(epsilon_spent([event, event], 1e-5))
    assert "user" not in repr(report.as_dict())


def test_partial_fit_uses_tree_aggregation():
    X, y = _data(160)
    reg = DPLinearRegression(random_state=0, **PARAMS)
    event = GaussianMechanism(3.0, gaussian_noise_multiplier(5.0, 1e-5)).dp_event
    for t in range(1, 17):
        reg.partial_fit(X[10 * (t - 1) : 10 * t], y[10 * (t - 1) : 10 * t])
        depth = int(np.floor(np.log2(t))) + 1
        expected = epsilon_spent([event] * depth, 1e-5)
        assert reg.privacy_spent_.epsilon == pytest.approx(expected, rel=1e-9), t
    assert [(n.first, n.last) for n in reg.unlearning_state_.statistics.nodes] == [(1, 16)]
    # default ids continue across calls
    assert reg.unlearning_state_.registry.live()[1][-1] == 159
    # the streamed model is as good as a single fit on all rows: the gap is
    # random (about 5% of seed pairs exceed 0.2), so its median over five
    # seed pairs is held to the bound rather than one pair's draw
    gaps = []
    for seed in range(5):
        streamed = DPLinearRegression(random_state=2 * seed, **PARAMS)
        for t in range(1, 17):
            streamed.partial_fit(X[10 * (t - 1) : 10 * t], y[10 * (t - 1) : 10 * t])
        single = DPLinearRegression(random_state=2 * seed + 1, **PARAMS).fit(X, y)
        gaps.append(abs(streamed.score(X, y) - single.score(X, y)))
    assert np.median(gaps) < 0.2, gaps


def test_partial_fit_refuses_to_change_frozen_parameters():
    X, y = _data(40)
    reg = DPLinearRegression(random_state=0, **PARAMS).partial_fit(X[:20], y[:20])
    before = joblib.hash(reg)
    reg.set_params(feature_norm=2.0)
    with pytest.raises(ValueError, match="feature_norm"):
        reg.partial_fit(X[20:], y[20:])
    reg.set_params(feature_norm=1.0)
    assert joblib.hash(reg) == before


def _bad_calls(X, y):
    nan_X = X.copy()
    nan_X[0, 0] = np.nan
    inf_y = y.copy()
    inf_y[1] = np.inf
    return {
        "fit NaN": lambda r: r.fit(nan_X, y),
        "fit inf target": lambda r: r.fit(X, inf_y),
        "fit empty": lambda r: r.fit(X[:0], y[:0]),
        "fit length mismatch": lambda r: r.fit(X, y[:-1]),
        "fit duplicate ids": lambda r: r.fit(X, y, sample_id=[1] * len(y)),
        "fit wrong id count": lambda r: r.fit(X, y, sample_id=[1, 2]),
        "partial_fit wrong width": lambda r: r.partial_fit(X[:, :1], y),
        "partial_fit NaN": lambda r: r.partial_fit(nan_X, y, sample_id=range(100, 100 + len(y))),
        "partial_fit id clash": lambda r: r.partial_fit(X[:2], y[:2], sample_id=[0, 999]),
        "predict wrong width": lambda r: r.predict(X[:, :1]),
        "delete unknown id": lambda r: r.delete_samples([0, 12345]),
        "delete duplicate id": lambda r: r.delete_samples([3, 3]),
        "delete already deleted": lambda r: r.delete_samples([5]),
        "delete everything": lambda r: r.delete_samples(range(len(y))),
        "delete nothing": lambda r: r.delete_samples([]),
    }


@pytest.mark.parametrize("case", list(_bad_calls(*_data(20))))
def test_bad_input_raises_and_changes_nothing(case):
    X, y = _data(20)
    reg = DPLinearRegression(random_state=0, **PARAMS).fit(X, y).delete_samples([5])
    before = pickle.dumps(reg)
    with pytest.raises((ValueError, UnlearningError)):
        _bad_calls(X, y)[case](reg)
    assert pickle.dumps(reg) == before
    reg.delete_samples([6])  # still usable


def test_deleting_every_sample_but_one_is_allowed():
    X, y = _data(5)
    reg = DPLinearRegression(random_state=0, **PARAMS).fit(X, y)
    reg.delete_samples([0, 1, 2, 3])
    assert reg.unlearning_state_.registry.n_samples == 1
    with pytest.raises(UnlearningError, match="every sample"):
        reg.delete_samples([4])


def test_mixed_id_types_and_compaction():
    X, y = _data(300)
    ids = [("tuple", i) if i % 3 == 0 else (f"s{i}" if i % 3 == 1 else i) for i in range(300)]
    reg = DPLinearRegression(random_state=0, **PARAMS).fit(X, y, sample_id=ids)
    reg.delete_samples(ids[:200])  # past half: storage is compacted
    registry = reg.unlearning_state_.registry
    assert registry.n_samples == 100 and registry.size == 100
    reg.delete_samples([ids[250], ids[251]])
    blob = io.BytesIO()
    pickle.dump(reg, blob)
    assert pickle.loads(blob.getvalue()).unlearning_state_.registry.n_samples == 98
