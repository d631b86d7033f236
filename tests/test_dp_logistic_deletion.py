"""Deletion in DPLogisticRegression: guarantees, state, persistence, atomicity."""

import dataclasses
import io
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from sklearn_dpu import io as dpu_io
from sklearn_dpu.exceptions import (
    BudgetExceededError,
    PrivacyLeakWarning,
    UnlearningError,
)
from sklearn_dpu.linear_model import DPLogisticRegression, _logistic_deletion, _logistic_solvers
from sklearn_dpu.linear_model._certified_minimize import (
    certified_minimize,
    preconditioned_descent,
)
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.unlearning.planner import (
    DeletionOption,
    gdp_epsilon,
    linear_rate_iterations,
    plan_deletion,
)

from ._stats import audit_epsilon_lower_bound, n_trials, same_distribution_pvalue

DELTA = 1e-5


def _pair(seed=0, n=12, d=2):
    """D = D' + {z}, z on the clip boundary and labelled against the trend."""
    rng = np.random.default_rng(seed)
    X = 0.3 * rng.normal(size=(n, d))
    y = (X[:, 0] > 0).astype(int)
    z = np.zeros((1, d))
    z[0, 0] = 5.0
    return np.vstack([X, z]), np.append(y, 0), X, y


def _theta(est):
    return est.unlearning_state_.chunks[-1].theta


# ------------------------------------------------------------------ planner


def test_planner_chooses_by_certified_epsilon_and_cost():
    noise = DeletionOption("noise_only", True, 0.1, 0.0)
    tune = DeletionOption("noise_finetune", True, 0.01, 100.0)
    retrain = DeletionOption("retrain", True, 0.0, 1000.0)
    assert plan_deletion([noise, tune, retrain], 1.0, DELTA).action == "noise_only"
    plan = plan_deletion([noise, tune, retrain], 0.1, DELTA)
    assert plan.action == "noise_finetune" and plan.regime == "efficient"
    assert plan.epsilon == pytest.approx(gdp_epsilon(0.01, DELTA))
    costly = DeletionOption("noise_finetune", True, 0.01, 5000.0)
    plan = plan_deletion([noise, costly, retrain], 0.1, DELTA)
    assert plan.action == "retrain" and "predicted to cost" in plan.reason
    off = DeletionOption("noise_finetune", False, np.inf, np.inf, "not here")
    plan = plan_deletion([noise, off, retrain], 0.1, DELTA)
    assert plan.action == "retrain" and plan.epsilon == 0.0 and "not here" in plan.reason


def test_cost_model():
    assert linear_rate_iterations(1.0, 2.0, 100.0) == 0
    assert linear_rate_iterations(np.e**2, 1.0, 100.0) == 20


# ---------------------------------------------------------------- guarantees


def _release_samples(make, X, y, n, delete=None, offset=0):
    out, report = [], None
    for t in range(n):
        est = make(random_state=offset + t).fit(X, y)
        if delete is not None:
            est.delete_samples(delete)
            report = est.deletion_log_[-1]
        out.append(_theta(est))
    return np.array(out), report


def _audit(a, b, direction):
    direction = direction / np.linalg.norm(direction)
    return audit_epsilon_lower_bound(a @ direction, b @ direction, DELTA)


@pytest.mark.statistical
@pytest.mark.parametrize("solver", ["output", "objective"])
def test_reported_deletion_epsilon_is_honoured(solver):
    """(fit D, delete z) vs (fit D - z) on a worst-case pair: the audit stays below
    the reported deletion epsilon, for noise only and for noise + fine-tune.
    Negative control: the noise-only state audited against the fine-tune's
    (smaller) claim is caught."""
    X, y, Xr, yr = _pair(1)
    n = n_trials(ci=700, full=10000)

    def make(**kw):
        # A large epsilon makes the deleted row's effect visible to the audit,
        # while the fine-tune's certified epsilon stays small.
        return DPLogisticRegression(epsilon=16.0, solver=solver, C=0.2, **kw)

    def make_strict(**kw):
        return make(deletion_epsilon=2.0, **kw)

    kept, noise_report = _release_samples(make, X, y, n, delete=[len(X) - 1])
    tuned, tune_report = _release_samples(make_strict, X, y, n, [len(X) - 1], 10**6)
    fresh, _ = _release_samples(make, Xr, yr, n, offset=2 * 10**6)
    pilot_a, _ = _release_samples(make, X, y, 200, offset=3 * 10**6)
    pilot_b, _ = _release_samples(make, Xr, yr, 200, offset=4 * 10**6)
    direction = pilot_a.mean(0) - pilot_b.mean(0)

    assert noise_report.cost["action"] == "noise_only"
    assert tune_report.cost["action"] == "noise_finetune"
    assert noise_report.deletion_epsilon == pytest.approx(16.0)
    assert tune_report.deletion_epsilon < 2.0
    assert _audit(kept, fresh, direction) <= noise_report.deletion_epsilon
    assert _audit(tuned, fresh, direction) <= tune_report.deletion_epsilon
    # Negative control: had the fine-tune been skipped, its claim would fail.
    assert _audit(kept, fresh, direction) > tune_report.deletion_epsilon


@pytest.mark.statistical
def test_retrain_and_stream_replay_are_exact():
    """Retraining (and replaying a stream from the affected chunk) gives the
    distribution of a fit on the remaining samples; keeping the old model does
    not (negative control)."""
    X, y, Xr, yr = _pair(2, n=16)
    n = n_trials(ci=500, full=5000)

    def make(**kw):
        # deletion_epsilon below what noise only gives: noisy GD then retrains.
        return DPLogisticRegression(
            epsilon=4.0,
            solver="noisy_gd",
            C=0.05,
            max_iter=5,
            deletion_epsilon=0.5,
            **kw,
        )

    deleted, report = _release_samples(make, X, y, n, delete=[len(X) - 1])
    fresh, _ = _release_samples(make, Xr, yr, n, offset=10**6)
    kept, _ = _release_samples(make, X, y, n, offset=2 * 10**6)
    assert report.method == "retrain" and report.deletion_epsilon is None
    assert same_distribution_pvalue(deleted, fresh) > 1e-3
    assert same_distribution_pvalue(kept, fresh) < 1e-3

    # A stream of three chunks; the deleted row (id 99) is in the second.
    extra = Xr[:8] + 0.1
    n_r = len(Xr)  # X is Xr followed by the deleted row
    chunks = [(X[:6], y[:6], range(6)), (X[6:], y[6:], [*range(6, n_r), 99])]
    chunks_r = [chunks[0], (Xr[6:], yr[6:], range(6, n_r))]
    last = (extra, yr[:8], range(100, 108))

    def stream(parts, seed, delete=None):
        est = DPLogisticRegression(
            feature_norm=1.0,
            epsilon=4.0,
            C=0.05,
            batch_size=64,
            deletion_epsilon=0.5,
            random_state=seed,
        )
        for Xc, yc, ids in [*parts, last]:
            est.partial_fit(Xc, yc, classes=[0, 1], sample_id=list(ids))
        return est if delete is None else est.delete_samples(delete)

    assert stream(chunks, 0, [99]).deletion_log_[-1].method == "retrain"
    m = n_trials(ci=300, full=3000)
    replayed = np.array([_theta(stream(chunks, t, [99])) for t in range(m)])
    direct = np.array([_theta(stream(chunks_r, 10**6 + t)) for t in range(m)])
    assert same_distribution_pvalue(replayed, direct) > 1e-3


def test_noise_only_keeps_the_model_and_accumulates():
    X, y, _, _ = _pair(3, n=40)
    est = DPLogisticRegression(feature_norm=1.0, epsilon=2.0, solver="output", random_state=0).fit(
        X, y
    )
    before = est.coef_.copy()
    est.delete_samples([0])
    report = est.deletion_log_[-1]
    assert report.cost["action"] == "noise_only"
    assert report.cost["gradient_evaluations"] == 0
    assert report.rerelease_epsilon is None
    np.testing.assert_array_equal(est.coef_, before)
    assert "noise only: the published model is kept" in report.summary().splitlines()[0]
    assert est.privacy_spent_.epsilon == pytest.approx(2.0)
    # A second deletion would double the group: past the target, the planner
    # moves on (fine-tune: cheaper than retraining) and re-releases.
    est.delete_samples([1])
    report = est.deletion_log_[-1]
    assert report.cost["action"] in ("noise_finetune", "retrain")
    assert "the published model is kept" not in report.summary()
    assert "noise only would give" in report.reason
    assert report.rerelease_epsilon is not None
    assert est.privacy_spent_.epsilon > 2.0
    assert (
        report.cost["predicted_gradient_evaluations"] <= report.retrain_cost["gradient_evaluations"]
    )
    # The counter starts again after a re-release.
    est.delete_samples([2])
    assert est.deletion_log_[-1].cost["action"] == "noise_only"


def test_retrain_cost_is_predicted_work_not_time():
    """A deletion report's retrain estimate is the planner's predicted gradient
    evaluations (from released counts), never a time: no speed probe."""
    X, y, _, _ = _pair(4, n=40)
    est = DPLogisticRegression(feature_norm=1.0, solver="output", random_state=0).fit(X, y)
    est.delete_samples([0, 1, 2])
    report = est.deletion_log_[-1]
    assert dict(report.retrain_cost) == {
        "gradient_evaluations": report.retrain_cost["gradient_evaluations"]
    }
    assert report.retrain_cost["gradient_evaluations"] > 0
    assert "wall_time_s" in report.cost  # the execution alone is timed


def test_a_fallback_to_retraining_is_not_published(monkeypatch):
    """When the fine-tune misses its certificate (checked exactly on the
    remaining rows, so a function of the private data) a retrain runs, and
    the report is the planned one: same action, guarantee, epsilon and costs
    as a fine-tune that certified (before: ``method='retrain'``,
    ``fell_back_to_retrain=True`` and another cost were published)."""
    X, y, _, _ = _pair(4, n=40)
    params = dict(feature_norm=1.0, solver="output", deletion_epsilon=0.5, random_state=0)
    planned = DPLogisticRegression(**params).fit(X, y).delete_samples([0]).deletion_log_[-1]
    est = DPLogisticRegression(**params).fit(X, y)

    def refuse_warm_starts(*args, theta0=None, **kw):
        if theta0 is not None:
            raise RuntimeError("could not certify")
        return certified_minimize(*args, **kw)

    monkeypatch.setattr(_logistic_solvers, "certified_minimize", refuse_warm_starts)

    def uncertified(loss, A, y, weights, Lambda, theta0, steps, step_size):
        # The scheduled fine-tune runs its steps but stops short of its certificate.
        done = preconditioned_descent(loss, A, y, weights, Lambda, theta0, steps, step_size)
        return dataclasses.replace(done, distance_bound=np.inf)

    monkeypatch.setattr(_logistic_deletion, "preconditioned_descent", uncertified)
    retrained = []
    batch_model = _logistic_deletion.batch_model

    def counting(*args, **kw):
        retrained.append(True)
        return batch_model(*args, **kw)

    monkeypatch.setattr(_logistic_deletion, "batch_model", counting)
    est.delete_samples([0])
    report = est.deletion_log_[-1]
    assert retrained  # the state is a retrain's
    assert "fell_back_to_retrain" not in report.cost
    assert report.method == planned.method and report.reason == planned.reason
    assert report.guarantee == planned.guarantee
    assert report.deletion_epsilon == planned.deletion_epsilon
    strip = {"wall_time_s"}
    assert {k: v for k, v in report.cost.items() if k not in strip} == {
        k: v for k, v in planned.cost.items() if k not in strip
    }


# ------------------------------------------------------------------- state


def _find(blob: bytes, values) -> bool:
    return np.asarray(values, dtype=np.float64).tobytes() in blob


def _has_id(blob: bytes, sample_id: str) -> bool:
    """Ids may be pickled as Python strings or inside numpy unicode arrays."""
    return any(sample_id.encode(codec) in blob for codec in ("utf-8", "utf-32-le"))


@pytest.mark.parametrize(
    "params",
    [
        dict(solver="output"),
        dict(solver="output", deletion_epsilon=0.5),
        dict(solver="objective", deletion_epsilon=0.5),
        dict(solver="noisy_gd", deletion_epsilon=0.5),
    ],
    ids=["noise_only", "finetune", "objective", "retrain"],
)
def test_pickled_state_is_free_of_deleted_rows(params):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 3)) * 0.3
    X[7] = [0.123456789, -0.31415926, 0.27182818]
    y = (X[:, 0] > 0).astype(int)
    ids = [f"person-{i}" for i in range(30)]
    ids[7] = "secret-person-7"
    est = DPLogisticRegression(random_state=0, **params).fit(X, y, sample_id=ids)
    A = est._normalize(X)
    # The state never holds an un-noised minimizer, not even before a deletion.
    loss = est._loss()
    config = est.unlearning_state_.chunks[0].config
    exact = certified_minimize(loss, A, loss.encode_labels(y), config.Lambda, 1e-8).theta
    blob = pickle.dumps(est)
    assert not _find(blob, exact)
    assert _find(blob, A[7]) and _has_id(blob, "secret-person-7")  # positive control
    est.delete_samples(["secret-person-7"])
    for blob in (pickle.dumps(est), _skops_bytes(est)):
        assert not _has_id(blob, "secret-person-7")
        assert not _find(blob, A[7])
        assert not _find(blob, A[7, :3])
        assert not _find(blob, X[7])
        assert _find(blob, A[8]) and _has_id(blob, "person-8")  # live rows stay
    assert "secret" not in repr(est.deletion_log_[-1].as_dict())


def _skops_bytes(est) -> bytes:
    buffer = io.BytesIO()
    dpu_io.save(est, buffer)
    import zipfile

    buffer.seek(0)
    with zipfile.ZipFile(buffer) as archive:
        return b"".join(archive.read(name) for name in archive.namelist())


@pytest.mark.parametrize("via", ["pickle", "skops"])
def test_deletion_after_reload(via, tmp_path):
    X, y, _, _ = _pair(6, n=40)
    est = DPLogisticRegression(
        feature_norm=1.0, solver="output", deletion_epsilon=0.5, random_state=0
    )
    est.fit(X, y, sample_id=[f"id{i}" for i in range(len(X))])
    est.delete_samples(["id0"])
    if via == "pickle":
        loaded = pickle.loads(pickle.dumps(est))
    else:
        path = tmp_path / "model.skops"
        dpu_io.save(est, path)
        loaded = dpu_io.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
    loaded.delete_samples(["id1", "id2"])
    assert len(loaded.deletion_log_) == 2
    assert loaded.unlearning_state_.registry.n_samples == len(X) - 3
    with pytest.raises(UnlearningError):
        loaded.delete_samples(["id0"])


def test_bad_requests_leave_the_estimator_unchanged():
    X, y, _, _ = _pair(7, n=20)
    est = DPLogisticRegression(feature_norm=1.0, random_state=0).fit(X, y)
    before = pickle.dumps(est)
    for bad in (["nope"], [0, 0], list(range(len(X))), []):
        with pytest.raises(UnlearningError):
            est.delete_samples(bad)
        assert pickle.dumps(est) == before
    est.delete_samples([3])
    with pytest.raises(UnlearningError, match="already deleted"):
        est.delete_samples([3])


def test_stream_errors_are_clear_and_atomic():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(30, 2))
    y = np.arange(30) % 3
    est = DPLogisticRegression(feature_norm=1.0, random_state=0)
    with pytest.raises(ValueError, match="classes must be passed"):
        est.partial_fit(X, y)
    est.partial_fit(X, y, classes=[0, 1, 2])
    before = pickle.dumps(est)
    with pytest.raises(ValueError, match=r"labels \[7\].*not in classes_"):
        est.partial_fit(X[:3], np.array([0, 7, 1]))
    assert pickle.dumps(est) == before
    with pytest.raises(ValueError, match="not the label set"):
        est.partial_fit(X, y, classes=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="cannot change epsilon"):
        est.set_params(epsilon=2.0).partial_fit(X, y)
    est.set_params(epsilon=1.0)
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:, :1], y)
    assert pickle.dumps(est) == before
    est.partial_fit(X, y)
    assert len(est.privacy_ledger_) == 2
    assert est.privacy_spent_.epsilon == pytest.approx(1.0)  # parallel composition
    with pytest.raises(ValueError, match="only one class"):
        DPLogisticRegression(feature_norm=1.0).fit(X, np.zeros(30))


def test_budget_is_charged_before_data_and_deletions_are_never_refused(tmp_path):
    X, y, _, _ = _pair(9, n=40)
    budget = PrivacyBudget(epsilon=1.2, delta=DELTA, path=tmp_path / "b.sqlite")
    est = DPLogisticRegression(
        feature_norm=1.0, epsilon=1.0, solver="output", budget=budget, random_state=0
    )
    est.fit(X, y)
    with pytest.raises(BudgetExceededError):
        DPLogisticRegression(feature_norm=1.0, epsilon=1.0, budget=budget).fit("not even data", y)
    est.set_params(deletion_epsilon=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.delete_samples([0])
    assert any(issubclass(w.category, PrivacyLeakWarning) for w in caught)
    assert est.deletion_log_[-1].rerelease_epsilon is not None
    assert budget.spent().epsilon > 1.2


def test_infeasible_objective_perturbation_fails_before_charging(tmp_path):
    """A ridge too weak for objective perturbation's Jacobian term is refused
    before the budget is charged (binary: before reading data; one-vs-rest:
    once the label set is known)."""
    X, y, _, _ = _pair(10, n=40)
    budget = PrivacyBudget(epsilon=5.0, delta=DELTA, path=tmp_path / "b.sqlite")
    with pytest.raises(ValueError, match="Jacobian term"):
        DPLogisticRegression(feature_norm=1.0, solver="objective", C=1e6, budget=budget).fit(
            "no data", y
        )
    # Feasible for two classes, not for ten (mu split ten ways).
    clf = DPLogisticRegression(
        feature_norm=1.0, solver="objective", C=0.02, epsilon=0.1, budget=budget
    )
    clf.fit(X, y)
    spent = budget.spent().epsilon
    many = np.arange(len(X)) % 10
    with pytest.raises(ValueError, match="Jacobian term"):
        clone(clf).fit(X, many)
    assert budget.spent().epsilon == spent


def test_a_deletion_uses_the_fit_parameters_not_a_later_set_params():
    """The registry holds rows normalized by the fit's feature_norm: a deletion
    after set_params(feature_norm=...) must not rescale the model by the new
    one, nor re-release at a new epsilon (before: coef_ off by the ratio)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (3000, 3))
    y = (X[:, 0] - X[:, 1] > 0).astype(int)
    kept = DPLogisticRegression(epsilon=5.0, feature_norm=2.0, random_state=0).fit(X, y)
    moved = DPLogisticRegression(epsilon=5.0, feature_norm=2.0, random_state=0).fit(X, y)
    kept.delete_samples([0])
    moved.set_params(feature_norm=20.0, epsilon=0.01)
    moved.delete_samples([0])
    np.testing.assert_array_equal(moved.coef_, kept.coef_)
    assert moved.privacy_ledger_ == kept.privacy_ledger_
    assert moved.deletion_log_[-1].deletion_epsilon == kept.deletion_log_[-1].deletion_epsilon
    assert (moved.feature_norm, moved.epsilon) == (20.0, 0.01)  # the parameters stay as set
