"""UnlearnableSGDClassifier meets its (epsilon, delta) target, and nothing it
publishes is a deterministic function of the exact number of rows."""

import pickle

import numpy as np
import pytest

from sklearn_dpu import UnlearnableSGDClassifier
from sklearn_dpu.exceptions import UnlearningError
from sklearn_dpu.linear_model._dp_logistic import _LABEL_SET_NOTE
from sklearn_dpu.linear_model._unlearnable_sgd import size_bucket


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = (X @ rng.normal(size=d) > 0).astype(int)
    return X, y


@pytest.mark.parametrize(("n", "d"), [(569, 30), (2000, 100)])
def test_epsilon_target_is_met_at_small_n(n, d):
    # Before: the noise was set by recompute_rate alone, 0 at these shapes
    # (epsilon = inf, no warning).
    X, y = _data(n, d)
    est = UnlearnableSGDClassifier(random_state=0).fit(X, y)
    assert est.noise_multiplier_ > 0
    assert 0 < est.privacy_spent_.epsilon <= 1.0
    assert est.privacy_spent_.delta == 1e-5


def test_tighter_epsilon_means_more_noise_and_is_met():
    X, y = _data(1500, 10)
    # recompute_rate=1: no noise is needed for the recompute rate, epsilon binds.
    loose = UnlearnableSGDClassifier(random_state=0, epsilon=8.0, recompute_rate=1.0).fit(X, y)
    tight = UnlearnableSGDClassifier(random_state=0, epsilon=0.3, recompute_rate=1.0).fit(X, y)
    assert loose.privacy_spent_.epsilon <= 8.0
    assert tight.privacy_spent_.epsilon <= 0.3
    assert tight.noise_multiplier_ > loose.noise_multiplier_


def test_explicit_infinite_epsilon_is_honoured_and_reported():
    X, y = _data(569, 30)
    est = UnlearnableSGDClassifier(random_state=0, epsilon=np.inf).fit(X, y)
    assert est.edit_ledger_.n_noisy == 569  # exact count, asked for
    assert est.privacy_spent_.epsilon == np.inf
    assert "not private" in est.privacy_ledger_[0]["mechanism"]
    assert "np.inf`` asks explicitly" in UnlearnableSGDClassifier.__doc__


def test_delta_must_be_below_one_half():
    X, y = _data(100, 3)
    with pytest.raises(ValueError, match="delta"):
        UnlearnableSGDClassifier(delta=0.5).fit(X, y)


def _published(est):
    state = est.unlearning_state_
    ledger_run = est.privacy_ledger_[1]["event"]["event"]
    return {
        "noise_multiplier_": est.noise_multiplier_,
        "batch_size_": est.batch_size_,
        "n_iter_": est.n_iter_,
        "recompute_bound_": est.recompute_bound_,
        "sampling_rate": ledger_run["sampling_probability"],
        "bucket": state.schedule.bucket,
    }


def _deterministic_differences(epsilon, seeds=range(4)):
    # 5 792 and 5 793 rows lie in different size classes of the exact count.
    assert size_bucket(5792) != size_bucket(5793)
    X, y = _data(5793, 5)
    per_set = []
    for rows in (5792, 5793):
        per_set.append(
            [
                _published(
                    UnlearnableSGDClassifier(random_state=seed, epsilon=epsilon).fit(
                        X[:rows], y[:rows]
                    )
                )
                for seed in seeds
            ]
        )
    flagged = []
    for key in per_set[0][0]:
        a = {v[key] for v in per_set[0]}
        b = {v[key] for v in per_set[1]}
        if len(a) == 1 and len(b) == 1 and a != b:
            flagged.append(key)
    return flagged


def test_no_published_value_is_a_function_of_the_exact_count_at_a_class_edge():
    assert _deterministic_differences(1.0) == []


def test_leak_check_detects_the_exact_count():
    # Negative control: with the exact count (epsilon=inf, asked for) the
    # schedule jumps deterministically between 5 792 and 5 793 rows.
    flagged = _deterministic_differences(np.inf, seeds=range(2))
    assert {"sampling_rate", "bucket", "noise_multiplier_"} <= set(flagged)


def test_reports_publish_no_other_timing_and_no_exact_gradient_count():
    X, y = _data(3000, 5)
    est = UnlearnableSGDClassifier(random_state=0).fit(X, y)
    est.delete_samples([0, 1])
    est.partial_fit(X[:1], y[:1], sample_id=["new"])
    report = est.deletion_log_[-1]
    # The measured time of the execution is the one timing of every
    # estimator's reports (the release procedure's rule); nothing else.
    assert set(report.cost) == {"tested_steps", "recomputed_steps", "wall_time_s"}
    assert report.retrain_cost["expected_gradient_evaluations"] == pytest.approx(
        est.n_iter_ * est.batch_size_
    )
    assert not any("time" in k for k in report.retrain_cost)
    record = est.insertion_log_[-1]
    assert not hasattr(record, "wall_time_s") and not hasattr(record, "gradient_evaluations")
    assert not hasattr(est, "_fit_seconds") and not hasattr(est, "_fit_evaluations")


def _three_classes(n=600):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 4)) / 2.0
    y = np.where(X[:, 0] > 0, 1, 0)
    y[:3] = 2  # class 2 has three rows only
    return X, y


@pytest.mark.parametrize("loss", ["log_loss", "hinge"])  # softmax, one-vs-rest
def test_the_label_set_is_public_and_kept_when_a_class_loses_its_last_row(loss):
    # Before: deleting the last row of class 2 refit without it (classes_ and
    # coef_'s shape followed the data). The label set is public and kept.
    X, y = _three_classes()
    est = UnlearnableSGDClassifier(random_state=0, loss=loss).fit(X, y)
    coef_shape = est.coef_.shape
    assert est.classes_.tolist() == [0, 1, 2] and coef_shape == (3, 4)
    est.delete_samples([0, 1, 2])  # every row of class 2
    report = est.deletion_log_[-1]
    assert est.classes_.tolist() == [0, 1, 2] and est.coef_.shape == coef_shape
    assert "class" not in report.reason and est.insertion_log_ == []
    assert _LABEL_SET_NOTE in report.notes
    assert all(_LABEL_SET_NOTE in r.notes for r in est.deletion_log_)
    # The model keeps training with a class that has no row.
    est.delete_samples([10])
    est.partial_fit(X[3:6], y[3:6], sample_id=["a", "b", "c"])
    assert np.isfinite(est.coef_).all() and set(est.predict(X)) <= {0, 1, 2}
    assert est.score(X[3:], y[3:]) > 0.7  # epsilon=1 at 600 rows
    assert (est.predict(X) == 2).mean() < 0.05
    # A fit given this label set: same shapes, same schedule.
    fresh = UnlearnableSGDClassifier(random_state=1, loss=loss)
    fresh.partial_fit(X[3:], y[3:], classes=[0, 1, 2])
    assert fresh.coef_.shape == est.coef_.shape


def test_a_deletion_may_leave_a_single_class():
    # Before: refused (a data-dependent error). A fit given the label set {0, 1}
    # on rows of one class exists, so the deletion is exact.
    X, y = _three_classes()
    two = UnlearnableSGDClassifier(random_state=0).fit(X[:6], np.array([0, 0, 0, 0, 1, 1]))
    two.delete_samples([4, 5])
    assert two.classes_.tolist() == [0, 1] and two.coef_.shape == (1, 4)
    assert _LABEL_SET_NOTE in two.deletion_log_[-1].notes
    before = pickle.dumps(two)
    with pytest.raises(UnlearningError, match="every sample"):
        two.delete_samples([0, 1, 2, 3])
    assert pickle.dumps(two) == before


def test_the_label_set_note_is_dp_logistic_regressions():
    from sklearn_dpu.linear_model import _dp_logistic

    assert _LABEL_SET_NOTE is _dp_logistic._LABEL_SET_NOTE
