import matplotlib
import pytest

matplotlib.use("Agg")


@pytest.fixture
def budget_path(tmp_path):
    """A fresh path for a PrivacyBudget ledger."""
    return tmp_path / "budget.sqlite"


@pytest.fixture(scope="module")
def client():
    """A Dask ``LocalCluster`` of two worker processes (one thread each) and
    its client, shared by a test module."""
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client:
        yield client


def memmap_stream(path, n: int, d: int):
    """A read-only memory-mapped ``(n, d + 1)`` float64 array at ``path``:
    ``d`` standard normal features (seed 0) and a target ``clip(0.3 x_0, -1, 1)``
    in the last column, written and flushed before it is reopened."""
    import numpy as np

    data = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d + 1))
    data[:, :d] = np.random.default_rng(0).normal(size=(n, d))
    data[:, d] = np.clip(0.3 * data[:, 0], -1, 1)
    data.flush()
    del data
    return np.load(path, mmap_mode="r")


@pytest.fixture
def prefer_fine_tune(monkeypatch):
    """DPLogisticRegression's deletion planner with the retrain priced out, so
    a certified fine-tune runs where one is available (tests of that path at
    shapes where the planner would retrain)."""
    import dataclasses
    import math

    from sklearn_dpu.linear_model import _logistic_deletion
    from sklearn_dpu.unlearning.planner import RETRAIN, plan_deletion

    def fine_tune_first(options, target, delta):
        options = [
            dataclasses.replace(o, predicted_gradient_evaluations=math.inf)
            if o.action == RETRAIN
            else o
            for o in options
        ]
        return plan_deletion(options, target, delta)

    monkeypatch.setattr(_logistic_deletion, "plan_deletion", fine_tune_first)
