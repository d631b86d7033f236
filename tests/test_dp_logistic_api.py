"""DPLogisticRegression behaves like scikit-learn's LogisticRegression."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

from sklearn_dpu import DPLogisticRegression
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.unlearning import delete_samples


def _blobs(n=3000, n_classes=2, d=4, seed=0):
    rng = np.random.default_rng(seed)
    centers = 1.5 * rng.normal(size=(n_classes, d))
    y = rng.integers(n_classes, size=n)
    X = centers[y] + rng.normal(size=(n, d))
    return X, y


@pytest.mark.parametrize("solver", ["output", "objective", "noisy_gd"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_close_to_non_private_at_large_epsilon(solver, n_classes):
    """A correctness check of each solver: with little noise the model predicts
    like scikit-learn's."""
    X, y = _blobs(n_classes=n_classes)
    reference = LogisticRegression().fit(X, y).score(X, y)
    clf = DPLogisticRegression(epsilon=50.0, solver=solver, feature_norm=8.0, random_state=0).fit(
        X, y
    )
    assert clf.score(X, y) >= reference - 0.02


@pytest.mark.parametrize("solver", ["output", "objective", "noisy_gd"])
def test_outputs_and_shapes(solver):
    X, y = _blobs(n=400, n_classes=3)
    labels = np.array(["ant", "bee", "cat"])[y]
    clf = DPLogisticRegression(solver=solver, feature_norm=8.0, random_state=0).fit(X, labels)
    assert clf.coef_.shape == (3, 4) and clf.intercept_.shape == (3,)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(1)], clf.predict(X))
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), proba)
    np.testing.assert_allclose(clf.decision_function(X), X @ clf.coef_.T + clf.intercept_)
    assert set(clf.predict(X)) <= set(labels)
    binary = DPLogisticRegression(feature_norm=1.0, solver=solver, random_state=0).fit(X, y == 1)
    assert binary.coef_.shape == (1, 4) and binary.decision_function(X).shape == (400,)


def test_one_vs_rest_only_for_objective_multiclass():
    X, y = _blobs(n=300, n_classes=3)
    ovr = DPLogisticRegression(feature_norm=1.0, solver="objective", random_state=0).fit(X, y)
    softmax = DPLogisticRegression(feature_norm=1.0, solver="output", random_state=0).fit(X, y)
    assert ovr.unlearning_state_.chunks[0].config.one_vs_rest
    assert not softmax.unlearning_state_.chunks[0].config.one_vs_rest


def test_reproducible_with_a_seed_fresh_without():
    X, y = _blobs(n=200)
    a = DPLogisticRegression(feature_norm=1.0, random_state=3).fit(X, y)
    b = clone(a).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = DPLogisticRegression(feature_norm=1.0).fit(X, y)
    d = DPLogisticRegression(feature_norm=1.0).fit(X, y)
    assert not np.array_equal(c.coef_, d.coef_)
    assert not hasattr(c, "random_state_") and "rng" not in repr(vars(c)).lower()


def test_auto_solver_follows_table_2_i():
    """Noisy GD iff the number of parameters is at most n * epsilon (released n)."""
    X, y = _blobs(n=2000, d=10)
    assert (
        DPLogisticRegression(feature_norm=1.0, epsilon=1.0, random_state=0).fit(X, y).solver_
        == "noisy_gd"
    )
    assert (
        DPLogisticRegression(feature_norm=1.0, epsilon=0.003, random_state=0).fit(X, y).solver_
        == "output"
    )


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # dp_accounting at eps=1e8
def test_regularization_means_what_sklearn_c_means():
    """With C given and (almost) no noise, the released model is sklearn's
    solution of C sum logloss + 1/2 ||coef||^2 (+ the intercept penalty)."""
    X, y = _blobs(n=500)
    F = 20.0  # every row inside: nothing is clipped
    clf = DPLogisticRegression(
        C=0.3, epsilon=1e8, feature_norm=F, solver="output", tol=1e-6, random_state=0
    ).fit(X, y)
    A = np.column_stack([X, np.full(len(X), F)])  # intercept_scaling = F
    ref = LogisticRegression(C=0.3, fit_intercept=False, tol=1e-10, max_iter=10000)
    ref = ref.fit(A, y)
    # Compare in the normalized units of the solver, within the (tiny) noise.
    ours = np.append(clf.coef_.ravel() * F, clf.intercept_[0])
    sigma = clf.unlearning_state_.chunks[0].config.sigma
    np.testing.assert_allclose(ours, F * ref.coef_[0], atol=5 * sigma + 1e-4)
    assert sigma < 0.02
    assert clf.C_ == pytest.approx(0.3)


def test_meta_estimators_and_pipeline_deletion():
    X, y = _blobs(n=300)
    pipe = make_pipeline(PublicBoundsScaler(bounds=(-6, 6)), DPLogisticRegression(feature_norm=1.0))
    pipe.set_params(dplogisticregression__random_state=0)
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,)
    search = GridSearchCV(
        DPLogisticRegression(feature_norm=1.0, random_state=0), {"epsilon": [0.5, 2.0]}, cv=2
    )
    search.fit(X, y)
    pipe.fit(X, y)
    delete_samples(pipe, [0, 1], positions=True)
    assert pipe[-1].deletion_log_[-1].n_deleted == 2


def test_ledger_names_what_ran():
    X, y = _blobs(n=500)
    clf = DPLogisticRegression(feature_norm=1.0, random_state=0).fit(X, y)
    entry = clf.privacy_ledger_[0]
    assert entry["neighboring_relation"] == "ADD_OR_REMOVE_ONE"
    assert clf.solver_.replace("_", " ").split()[0] in entry["mechanism"].lower() or (
        "noisy gd" in entry["mechanism"].lower()
    )
    assert "Gram" in entry["mechanism"] and "Alg. 1" in entry["reference"]


def test_partial_fit_streams_chunks():
    X, y = _blobs(n=6000)
    clf = DPLogisticRegression(epsilon=1.0, feature_norm=8.0, random_state=0)
    for start in range(0, 6000, 2000):
        clf.partial_fit(X[start : start + 2000], y[start : start + 2000], classes=[0, 1])
    assert len(clf.privacy_ledger_) == 3
    assert [r["chunks"] for r in clf.privacy_ledger_] == [[1, 1], [2, 2], [3, 3]]
    assert clf.privacy_spent_.epsilon == pytest.approx(1.0)
    assert clf.score(X, y) > LogisticRegression().fit(X, y).score(X, y) - 0.05
    fitted = DPLogisticRegression(random_state=0, feature_norm=8.0).fit(X[:3000], y[:3000])
    fitted.partial_fit(X[3000:], y[3000:])
    assert fitted.unlearning_state_.chunks[1].kind == "sgd"


def test_fit_takes_the_public_label_set():
    """``classes=`` names labels ``y`` may lack (a search's training part);
    a label of ``y`` outside it is an error that changes nothing."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.where(X[:, 0] > 0, "a", "b")
    clf = DPLogisticRegression(feature_norm=3.0, random_state=0).fit(X, y, classes=["a", "b", "c"])
    assert list(clf.classes_) == ["a", "b", "c"]
    assert clf.predict_proba(X[:2]).shape == (2, 3)
    with pytest.raises(ValueError, match="not in classes"):
        clf.fit(X, y, classes=["a"])
    assert list(clf.classes_) == ["a", "b", "c"]
