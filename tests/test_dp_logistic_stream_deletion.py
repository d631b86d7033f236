"""Deletions in a DPLogisticRegression stream: reports must hold for every row deleted."""

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLogisticRegression

from ._stats import n_trials, same_distribution_pvalue


def _stream(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(90, 2))
    y = (X[:, 0] > 0).astype(int)
    est = DPLogisticRegression(
        feature_norm=1.0, epsilon=2.0, C=0.05, solver="output", batch_size=16, random_state=0
    )
    est.fit(X[:30], y[:30], sample_id=list(range(30)))
    est.partial_fit(X[30:60], y[30:60], sample_id=list(range(30, 60)))
    est.partial_fit(X[60:], y[60:], sample_id=list(range(60, 90)))
    return est


def test_exact_report_after_noise_only_deletion_in_an_earlier_chunk():
    """A noise-only deletion in chunk 1, then a deletion in chunk 3: the second
    report may only say "exact" if chunk 1 (which still held the first deleted
    row) and everything built on it was replayed."""
    est = _stream()
    est.delete_samples([0])  # chunk 1
    first = est.deletion_log_[-1]
    assert first.cost["action"] == "noise_only"
    assert est.unlearning_state_.chunks[0].pending == 1
    theta_1 = est.unlearning_state_.chunks[0].theta.copy()
    n_releases = len(est.privacy_ledger_)

    est.delete_samples([75])  # chunk 3
    report = est.deletion_log_[-1]
    chunks = est.unlearning_state_.chunks
    if report.method == "retrain":
        # Exact: no chunk may still hold a deleted row behind its noise only.
        assert [c.pending for c in chunks] == [0, 0, 0]
        assert not np.array_equal(chunks[0].theta, theta_1)
        # Chunks 1, 2 and 3 were re-released, and the ledger says so.
        assert len(est.privacy_ledger_) == n_releases + 3
        assert "exact" in report.guarantee
    else:  # a certified claim must cover both deleted rows
        assert report.deletion_epsilon is not None
        assert sum(c.pending for c in chunks) == 2
    assert report.method == "retrain"


@pytest.mark.parametrize("deleted", [[0, 40], [40, 75]])
def test_replay_starts_at_the_earliest_pending_chunk(deleted):
    est = _stream(1)
    est.delete_samples([deleted[0]])
    assert est.deletion_log_[-1].cost["action"] == "noise_only"
    before = [c.theta.copy() for c in est.unlearning_state_.chunks]
    est.delete_samples([deleted[1]])
    assert est.deletion_log_[-1].method == "retrain"
    first = 1 if deleted[0] < 30 else 2
    after = [c.theta for c in est.unlearning_state_.chunks]
    for i in range(first - 1):
        np.testing.assert_array_equal(after[i], before[i])
    for i in range(first - 1, 3):
        assert not np.array_equal(after[i], before[i])
    assert all(c.pending == 0 for c in est.unlearning_state_.chunks)


@pytest.mark.parametrize("deletion_epsilon", [None, 0.01])
def test_deleting_the_last_sample_of_a_label_keeps_the_public_label_set(deletion_epsilon):
    """classes_ is public and fixed at fit: deleting a label's only sample keeps
    it, and every report says so in the same words, whatever was deleted (a
    statement that depended on the remaining labels would publish them)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    y[5] = 2  # the only sample of label 2
    reports = []
    for deleted in (5, 6):
        est = DPLogisticRegression(
            feature_norm=1.0,
            epsilon=2.0,
            solver="output",
            C=0.05,
            deletion_epsilon=deletion_epsilon,
            random_state=0,
        ).fit(X, y)
        est.delete_samples([deleted])
        np.testing.assert_array_equal(est.classes_, [0, 1, 2])
        assert est.coef_.shape == (3, 2)
        reports.append(est.deletion_log_[-1])
    lone, other = reports
    assert lone.method == other.method
    assert lone.notes == other.notes
    assert any("classes_ is the public label set" in note for note in lone.notes)
    assert any("last sample was deleted" in note for note in lone.notes)
    assert "classes_" in DPLogisticRegression.__doc__ and "last sample of a" in (
        DPLogisticRegression.__doc__
    )


@pytest.mark.statistical
def test_replayed_stream_has_the_law_of_a_stream_on_the_remaining_rows():
    """After a noise-only deletion in chunk 1 and a deletion in chunk 3, the
    released checkpoints have the law of a stream that never saw either row;
    a state still holding the chunk-1 row (what replaying chunk 3 alone left,
    negative control) does not."""
    rng = np.random.default_rng(2)
    X = 0.3 * rng.normal(size=(24, 2))
    y = (X[:, 0] > 0).astype(int)
    z = np.array([[5.0, 0.0]])  # on the clip boundary, labelled against the trend
    parts = [(X[:8], y[:8]), (X[8:16], y[8:16]), (X[16:], y[16:])]

    def stream(seed, keep_z, keep_w, delete=()):
        est = DPLogisticRegression(
            feature_norm=1.0,
            epsilon=8.0,
            solver="noisy_gd",
            C=0.05,
            max_iter=5,
            batch_size=64,
            random_state=seed,
        )
        (X1, y1), (X2, y2), (X3, y3) = parts
        if keep_z:
            X1, y1 = np.vstack([X1, z]), np.append(y1, 0)
        if keep_w:
            X3, y3 = np.vstack([X3, -z]), np.append(y3, 1)
        est.fit(X1, y1, sample_id=[*range(len(X1) - keep_z), *[99] * keep_z])
        est.partial_fit(X2, y2, sample_id=list(range(100, 108)))
        est.partial_fit(X3, y3, sample_id=[*range(200, 208), *[98] * keep_w])
        for ids in delete:
            est.delete_samples(ids)
        return est

    def checkpoints(est):
        return np.concatenate([c.theta for c in est.unlearning_state_.chunks])

    first = stream(0, True, True, delete=[[99], [98]])
    assert [r.cost["action"] for r in first.deletion_log_] == ["noise_only", "retrain"]
    n = n_trials(ci=300, full=3000)
    deleted = np.array([checkpoints(stream(t, True, True, [[99], [98]])) for t in range(n)])
    fresh = np.array([checkpoints(stream(10**6 + t, False, False)) for t in range(n)])
    kept = np.array([checkpoints(stream(2 * 10**6 + t, True, False)) for t in range(n)])
    assert same_distribution_pvalue(deleted, fresh) > 1e-3
    assert same_distribution_pvalue(kept, fresh) < 1e-3


def test_a_stream_retrains_rerelease_is_composed_in_parallel_over_its_chunks():
    # A retrain replays one release per chunk; composed one after another they
    # were reported as costing more (2.09) than everything published (1.44).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 5))
    y = (X[:, 0] > 0).astype(int)
    est = DPLogisticRegression(solver="noisy_gd", random_state=0)
    for c in range(4):
        est.partial_fit(X[c * 5000 : (c + 1) * 5000], y[c * 5000 : (c + 1) * 5000], classes=[0, 1])
    est.delete_samples([1, 2, 3])
    report = est.deletion_log_[-1]
    assert report.method == "retrain"
    assert report.rerelease_epsilon <= report.remaining_epsilon
