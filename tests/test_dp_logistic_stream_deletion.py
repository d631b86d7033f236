"""Deletions in a DPLogisticRegression stream: reports must hold for every row deleted."""

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLogisticRegression


def _stream(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(90, 2))
    y = (X[:, 0] > 0).astype(int)
    est = DPLogisticRegression(epsilon=2.0, C=0.05, solver="output", batch_size=16, random_state=0)
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
    assert est.unlearning_state_.chunks[0]["pending"] == 1
    theta_1 = est.unlearning_state_.chunks[0]["theta"].copy()
    n_releases = len(est.privacy_ledger_)

    est.delete_samples([75])  # chunk 3
    report = est.deletion_log_[-1]
    chunks = est.unlearning_state_.chunks
    if report.method == "retrain":
        # Exact: no chunk may still hold a deleted row behind its noise only.
        assert [c["pending"] for c in chunks] == [0, 0, 0]
        assert not np.array_equal(chunks[0]["theta"], theta_1)
        # Chunks 1, 2 and 3 were re-released, and the ledger says so.
        assert len(est.privacy_ledger_) == n_releases + 3
        assert "exact" in report.guarantee
    else:  # a certified claim must cover both deleted rows
        assert report.deletion_epsilon is not None
        assert sum(c["pending"] for c in chunks) == 2
    assert report.method == "retrain"


@pytest.mark.parametrize("deleted", [[0, 40], [40, 75]])
def test_replay_starts_at_the_earliest_pending_chunk(deleted):
    est = _stream(1)
    est.delete_samples([deleted[0]])
    assert est.deletion_log_[-1].cost["action"] == "noise_only"
    before = [c["theta"].copy() for c in est.unlearning_state_.chunks]
    est.delete_samples([deleted[1]])
    assert est.deletion_log_[-1].method == "retrain"
    first = 1 if deleted[0] < 30 else 2
    after = [c["theta"] for c in est.unlearning_state_.chunks]
    for i in range(first - 1):
        np.testing.assert_array_equal(after[i], before[i])
    for i in range(first - 1, 3):
        assert not np.array_equal(after[i], before[i])
    assert all(c["pending"] == 0 for c in est.unlearning_state_.chunks)


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
            epsilon=2.0, solver="output", C=0.05, deletion_epsilon=deletion_epsilon, random_state=0
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
