"""UnlearnableSGDClassifier: API, deletion, persistence, accounting, utility."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

from sklearn_dpu import (
    BudgetExceededError,
    PrivacyBudget,
    PrivacyLeakWarning,
    StateVersionError,
    UnlearnableSGDClassifier,
    UnlearningError,
)
from sklearn_dpu import io as dpu_io
from sklearn_dpu.linear_model._unlearnable_sgd import size_bucket
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.privacy.accounting import epsilon_upper_bound
from sklearn_dpu.privacy.ledger import ApproximateDPBound, Release
from sklearn_dpu.unlearning import delete_samples

from ._doubles import Unreadable


def _data(n=1000, d=4, classes=2, seed=0):
    X, y = make_classification(
        n, d, n_informative=d, n_redundant=0, n_classes=classes, random_state=seed
    )
    return X / np.sqrt(d) / 2.0, y


X, Y = _data()


@pytest.mark.parametrize("loss", ["log_loss", "hinge", "modified_huber"])
@pytest.mark.parametrize("classes", [2, 3])
def test_shapes_and_probabilities(loss, classes):
    X3, y3 = _data(600, 4, classes)
    est = UnlearnableSGDClassifier(loss=loss, random_state=0).fit(X3, y3)
    k = 1 if classes == 2 else classes
    assert est.coef_.shape == (k, 4) and est.intercept_.shape == (k,)
    scores = est.decision_function(X3)
    assert scores.shape == ((600,) if classes == 2 else (600, classes))
    assert set(est.predict(X3)) <= set(est.classes_)
    if loss == "hinge":
        assert not hasattr(est, "predict_proba")
    else:
        proba = est.predict_proba(X3)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_array_equal(est.classes_[proba.argmax(axis=1)], est.predict(X3))


def test_utility_close_to_logistic_regression():
    X2, y2 = _data(40_000, 5, seed=3)
    reference = LogisticRegression().fit(X2, y2).score(X2, y2)
    accuracy = UnlearnableSGDClassifier(random_state=0).fit(X2, y2).score(X2, y2)
    assert accuracy > reference - 0.03, (accuracy, reference)


def test_reproducible_with_int_seed_fresh_without():
    a = UnlearnableSGDClassifier(random_state=3).fit(X, Y).delete_samples([5])
    b = UnlearnableSGDClassifier(random_state=3).fit(X, Y).delete_samples([5])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = UnlearnableSGDClassifier().fit(X, Y)
    d = UnlearnableSGDClassifier().fit(X, Y)
    assert not np.array_equal(c.coef_, d.coef_)
    # No generator (or its state) is ever stored.
    blob = pickle.dumps(c)
    assert b"Generator" not in blob and b"bit_generator" not in blob


def test_deleted_rows_and_ids_leave_the_state():
    X2 = X.copy()
    X2[7] = [0.123456789, -0.31415926, 0.27182818, 0.16180339]
    ids = [f"user-{i:04d}" for i in range(len(X2))]
    est = UnlearnableSGDClassifier(random_state=0).fit(X2, Y, sample_id=ids)
    stored = est.unlearning_state_.registry.rows[
        est.unlearning_state_.registry.slots_of(["user-0007"])[0], :-1
    ].tobytes()
    assert stored in pickle.dumps(est)
    est.delete_samples(["user-0007", "user-0100"])
    blob = pickle.dumps(est)
    assert stored not in blob
    assert b"user-0007" not in blob and b"user-0100" not in blob
    state = est.unlearning_state_
    members = state.registry.ids[state.batch_slots]
    assert "user-0007" not in set(members.tolist())
    assert state.registry.n_samples == len(X2) - 2


def test_delete_is_atomic_when_an_id_in_the_middle_is_unknown():
    est = UnlearnableSGDClassifier(random_state=0).fit(X, Y)
    before = pickle.dumps(est)
    with pytest.raises(UnlearningError, match="not in the training set"):
        est.delete_samples([1, 2, "unknown", 3])
    assert pickle.dumps(est) == before
    with pytest.raises(UnlearningError, match="more than once"):
        est.delete_samples([4, 4])
    with pytest.raises(UnlearningError, match="every sample"):
        est.delete_samples(range(len(X)))
    assert pickle.dumps(est) == before
    est.delete_samples([1])
    with pytest.raises(UnlearningError, match="already deleted"):
        est.delete_samples([1])


def test_fixed_batches_refuse_to_shrink_below_the_batch():
    # Not private (epsilon=inf): a data-dependent error is allowed here.
    fixed = dict(batch_sampling="fixed", batch_size=40, epsilon=np.inf)
    est = UnlearnableSGDClassifier(random_state=0, **fixed).fit(X[:45], Y[:45])
    before = pickle.dumps(est)
    with pytest.raises(UnlearningError, match="batch_size"):
        est.delete_samples(range(5))
    assert pickle.dumps(est) == before
    with pytest.raises(ValueError, match="not fewer than the training set"):
        UnlearnableSGDClassifier(**fixed).fit(X[:30], Y[:30])


def test_bad_input():
    est = UnlearnableSGDClassifier(random_state=0)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad, Y)
    with pytest.raises(ValueError, match="class"):
        est.fit(X, np.zeros(len(X)))
    est.fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :3])
    with pytest.raises(ValueError, match="not in classes_"):
        est.partial_fit(X[:2], [0, 7])
    with pytest.raises(ValueError, match="already in the training set"):
        est.partial_fit(X[:1], Y[:1], sample_id=[3])
    est.set_params(alpha=0.1)
    with pytest.raises(ValueError, match="cannot change alpha"):
        est.partial_fit(X[:1], Y[:1])


def test_partial_fit_inserts_rows():
    first = UnlearnableSGDClassifier(random_state=0)
    first.partial_fit(X[:500], Y[:500], classes=[0, 1])
    assert first.unlearning_state_.registry.n_samples == 500
    first.partial_fit(X[500:503], Y[500:503], sample_id=["a", "b", "c"])
    state = first.unlearning_state_
    assert state.registry.n_samples == 503
    assert first.insertion_log_[-1].n_inserted == 3
    first.delete_samples(["b"])
    assert state.registry.n_samples == 502
    with pytest.raises(ValueError, match="not the same"):
        first.partial_fit(X[:1], Y[:1], classes=[0, 1, 2])


@pytest.mark.parametrize("epsilon", [np.inf, 1.0])
def test_leaving_the_size_class_refits(epsilon):
    est = UnlearnableSGDClassifier(epsilon=epsilon, random_state=0).fit(X, Y)
    n_noisy = est.edit_ledger_.n_noisy
    if np.isinf(epsilon):
        assert n_noisy == len(X)  # asked for: the exact count, and it says so
    n_left = 2 ** (size_bucket(n_noisy) / 8.0)
    k = int(np.floor(n_noisy - n_left)) + 1
    est.delete_samples(range(k))
    report = est.deletion_log_[-1]
    assert "refit" in report.reason
    assert report.cost["recomputed_steps"] == est.n_iter_
    assert est.edit_ledger_.n_noisy == pytest.approx(n_noisy - k)
    assert est.unlearning_state_.schedule.bucket == size_bucket(n_noisy - k)
    assert len(est.privacy_ledger_) == 3  # count, run, re-released run


@pytest.mark.parametrize("solver", ["nesterov", "sgd"])
@pytest.mark.parametrize("sampling", ["poisson", "fixed"])
def test_pickle_and_skops_roundtrip_then_delete(tmp_path, solver, sampling):
    params = dict(random_state=0, solver=solver, batch_sampling=sampling)
    if sampling == "fixed":
        params["epsilon"] = np.inf  # fixed batches carry no privacy target
    est = UnlearnableSGDClassifier(**params).fit(X, Y)
    est.delete_samples(range(0, 40, 2))  # dead slots: a reload renumbers them
    est.partial_fit(X[:1], Y[:1], sample_id=["inserted"])  # an InsertionRecord is saved
    reference = pickle.loads(pickle.dumps(est))
    in_memory = est.delete_samples([3, 11])

    path = tmp_path / "model.skops"
    dpu_io.save(reference, path)
    loaded = dpu_io.load(path)
    np.testing.assert_array_equal(loaded.predict(X), reference.predict(X))
    for other in (loaded, reference):
        other.delete_samples([3, 11])
        np.testing.assert_array_equal(other.coef_, in_memory.coef_)
        a, b = other.unlearning_state_, in_memory.unlearning_state_
        np.testing.assert_array_equal(a.registry.ids[a.batch_slots], b.registry.ids[b.batch_slots])
        np.testing.assert_array_equal(a.batch_ptr, b.batch_ptr)
    loaded.partial_fit(X[:2], Y[:2], sample_id=["x", "y"])


def test_state_version_is_checked():
    est = UnlearnableSGDClassifier(random_state=0).fit(X, Y)
    state = est.unlearning_state_.__getstate__()
    state["_format_version"] = 999
    blank = object.__new__(type(est.unlearning_state_))
    with pytest.raises(StateVersionError):
        blank.__setstate__(state)


def test_state_size_is_documented_and_flat_under_deletions():
    est = UnlearnableSGDClassifier(random_state=0).fit(X, Y)
    run_before = est.unlearning_state_.nbytes()["run"]
    for i in range(0, 60, 3):
        est.delete_samples([i, i + 1])
    sizes = est.unlearning_state_.nbytes()
    assert sizes["run"] <= run_before * 1.2  # O(T (m + K p)): no growth per edit
    state = est.unlearning_state_
    expected = (
        state.batch_ptr.nbytes
        + state.batch_slots.nbytes
        + 4 * state.path[1:].nbytes
        + state.path[0].nbytes
    )
    assert sizes["run"] == pytest.approx(expected, rel=0.01)


def test_pipeline_and_cross_validation():
    pipe = make_pipeline(
        PublicBoundsScaler(bounds=(-1.0, 1.0)), UnlearnableSGDClassifier(random_state=0)
    )
    pipe.fit(X, Y)
    delete_samples(pipe, [0, 1], positions=True)
    assert pipe[-1].deletion_log_[-1].n_deleted == 2
    scores = cross_val_score(UnlearnableSGDClassifier(random_state=0), X, Y, cv=3, n_jobs=2)
    assert np.all(scores > 0.5)  # smoke test: n = 667 per fit at the default 5% rate


def test_pandas_feature_names():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est = UnlearnableSGDClassifier(random_state=0).fit(frame, Y)
    np.testing.assert_array_equal(est.feature_names_in_, ["a", "b", "c", "d"])
    est.partial_fit(frame.iloc[:2], Y[:2], sample_id=["p", "q"])


# ------------------------------------------------------------------ privacy


def test_fit_is_accounted_as_count_then_poisson_subsampled_gaussian_steps():
    est = UnlearnableSGDClassifier(random_state=0).fit(X, Y)
    count, entry = est.privacy_ledger_
    assert count["event"]["class_name"] == "GaussianDpEvent"
    event = entry["event"]
    assert event["class_name"] == "SelfComposedDpEvent" and event["count"] == est.n_iter_
    sampled = event["event"]
    assert sampled["class_name"] == "PoissonSampledDpEvent"
    assert sampled["sampling_probability"] == pytest.approx(est.unlearning_state_.inclusion_prob)
    assert sampled["event"]["noise_multiplier"] == pytest.approx(est.noise_multiplier_)
    assert entry["neighboring_relation"] == "ADD_OR_REMOVE_ONE"
    assert 0 < est.privacy_spent_.epsilon <= 1.0
    assert est.privacy_spent_ == est.privacy_per_model_


def test_edits_charge_reserve_and_fresh_steps():
    # (A large noise keeps the PLD accountant fast in this test.)
    est = UnlearnableSGDClassifier(
        random_state=0, noise_multiplier=2.0, max_iter=10, batch_size=200
    ).fit(X, Y)
    first = est.privacy_spent_.epsilon
    grew = []
    for i in range(30):
        size = len(est.privacy_ledger_)
        est.delete_samples([i])
        grew.append(len(est.privacy_ledger_) > size)
    edits = est.edit_ledger_
    assert edits.counters["tested_steps"] > 0
    # Every tested step's reserve is charged once.
    assert edits.reserve_charged.sum() > 0
    assert est.privacy_spent_.epsilon > first
    assert est.privacy_per_model_.epsilon == pytest.approx(first)
    # A report has a cost exactly when its call added to the ledger.
    assert any(grew) and not all(grew)
    for report, added in zip(est.deletion_log_, grew, strict=True):
        assert (report.rerelease_epsilon is not None) == added


@pytest.mark.parametrize(
    "params",
    [
        dict(coupling_share=1.0),  # the dissertation's algorithm: no reserve
        dict(batch_sampling="fixed", epsilon=np.inf),  # replacements enter the tests
    ],
)
def test_unaccountable_edits_are_reported_as_non_private(params):
    est = UnlearnableSGDClassifier(
        random_state=0, noise_multiplier=2.0, max_iter=10, batch_size=200, **params
    ).fit(X, Y)
    run = est.privacy_ledger_[-1]["event"]
    if params.get("batch_sampling") == "fixed":
        # fixed batches' rate m / n depends on the exact n: the run is not accounted
        assert run["class_name"] == "NonPrivateDpEvent"
    else:
        assert run["class_name"] == "SelfComposedDpEvent"  # the run itself is accounted
    for i in range(10):
        est.delete_samples([i])
    assert est.edit_ledger_.counters["tested_steps"] > 0
    assert est.privacy_spent_.epsilon == np.inf
    assert any(r.rerelease_epsilon == np.inf for r in est.deletion_log_)


def test_no_noise_is_not_private():
    est = UnlearnableSGDClassifier(noise_multiplier=0.0, random_state=0).fit(X, Y)
    assert est.privacy_spent_.epsilon == np.inf


def test_budget_refuses_before_reading_data_and_never_refuses_deletions(budget_path):
    budget = PrivacyBudget(1.0, 1e-5, path=budget_path)
    est = UnlearnableSGDClassifier(
        budget=budget, random_state=0, epsilon=1.0, recompute_rate=1.0, max_iter=10, batch_size=200
    ).fit(X, Y)  # recompute_rate=1: the noise is set by epsilon alone
    assert 0.9 < budget.spent().epsilon <= 1.0 + 1e-9
    assert budget.spent().epsilon >= est.privacy_spent_.epsilon - 1e-9
    # The plan (count + an (eps, delta) bound for the run) refuses first.
    with pytest.raises(BudgetExceededError):
        UnlearnableSGDClassifier(random_state=1, budget=budget, epsilon=0.1).fit(
            Unreadable(X.shape), Y
        )
    bad = X.copy()
    bad[0, 0] = np.nan  # never read: the worst case of the insertion is refused first
    with pytest.raises(BudgetExceededError):
        est.partial_fit(bad[:2], Y[:2])
    with pytest.warns(PrivacyLeakWarning):
        for i in range(200):
            est.delete_samples([i])  # the first one that tests a step re-releases
            if len(est.privacy_ledger_) > 2:
                break
    assert len(est.privacy_ledger_) == 3
    assert budget.spent().epsilon >= est.privacy_spent_.epsilon - 1e-9


def test_fit_release_plan_bounds_the_fit():
    est = UnlearnableSGDClassifier(epsilon=0.5, delta=1e-6)
    count, bound = est._fit_release_plan()
    assert isinstance(count, Release) and isinstance(bound, ApproximateDPBound)
    total = epsilon_upper_bound([count.event], [(bound.epsilon, bound.delta)], 1e-6)
    assert total == pytest.approx(0.5, rel=1e-6)
    est.fit(X, Y)
    assert est.privacy_spent_.epsilon <= 0.5
