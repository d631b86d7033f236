"""Statistical audit of DPLogisticRegression's Descent-to-Delete deletion.

"Deleted" against "never present", from the published model after the
deletion: world A fits on ``D + {z}`` and deletes ``z`` by the fine-tune
(Neel, Roth & Sharifi-Malvajerdi, "Descent-to-Delete: Gradient-Based Methods
for Machine Unlearning", ALT 2021, Thm 3.2: restart from the published
model), world B fits on ``D``. Both fine-tune methods are audited: the
scheduled preconditioned descent and the certified re-solve. ``z`` is a worst-case row:
on the clipping bound, labelled against the trend. Each trial runs the
estimator's own release recipes (the fit's release, then
:func:`~sklearn_dpu.linear_model._logistic_deletion.rerelease_chunks` with the
planner's decision, certificate check and retrain fallback included), with
fresh noise; the released models are projected on the direction that moves
the exact minimizer when ``z`` is added, and an empirical epsilon lower bound
(Clopper-Pearson, ``tests/_stats.py``) must stay below the deletion epsilon
the report states. Negative control: the same path with the fine-tune broken
(no descent step or no solve, and the certificate bypassed, i.e. the
published fit merely re-noised) is caught by the same audit.

Both worlds are conditioned on the released count (the same configuration:
the count's own release is accounted separately and not audited here).
"""

import dataclasses
import math
from collections import Counter

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLogisticRegression
from sklearn_dpu.linear_model import _logistic_deletion as deletion
from sklearn_dpu.linear_model import _logistic_releases as releases
from sklearn_dpu.linear_model._certified_minimize import (
    DescentWork,
    WarmDescent,
    certified_minimize,
)
from sklearn_dpu.linear_model._logistic_solvers import batch_model
from sklearn_dpu.unlearning.planner import NOISE_FINETUNE

from ._stats import audit_epsilon_lower_bound, n_trials

DELTA = 1e-5
TARGET = 0.1


def _worlds(n=400, d=3, seed=0):
    """A fitted estimator on ``D + {z}`` (its registry and parameters), the
    normalized rows of both worlds, and the deletion plan of ``z``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] > 0).astype(int)
    z = np.zeros((1, d))
    z[0, 0] = 10.0  # clipped to feature_norm: a row on the bound
    X_with, y_with = np.vstack([X, z]), np.append(y, 0)  # against the trend
    est = DPLogisticRegression(
        solver="output", feature_norm=3.0, deletion_epsilon=TARGET, random_state=0
    ).fit(X_with, y_with)
    params, loss = est._params(), est._loss()
    n_fit = float(n + 1)  # condition on the released count
    chunk = dataclasses.replace(est.unlearning_state_.chunks[0], n_noisy=n_fit)
    plan = deletion.plan_chunk_deletion(params, loss, [chunk], Counter({1: 1}), TARGET)
    A = est._normalize(X_with)
    return est, params, loss, A, y_with, n_fit, plan


def _released(trials, seed=0):
    """Published models after deleting ``z`` (world A) and fits on ``D``
    (world B), projected on the direction ``z`` moves the minimizer."""
    est, params, loss, A, y_with, n_fit, plan = _worlds(seed=seed)
    assert plan.decision.action == NOISE_FINETUNE  # before any trial
    registry = est.unlearning_state_.registry
    slots = registry.slots_of([len(A) - 1])
    A_never, y_never = A[:-1], y_with[:-1]
    config = plan.configs[0]
    tol = 1e-6 * config.tau
    with_z = certified_minimize(loss, A, y_with, config.Lambda, tol).theta
    never = certified_minimize(loss, A_never, y_never, config.Lambda, tol).theta
    direction = (with_z - never) / np.linalg.norm(with_z - never)

    deleted, fresh, fell_back = [], [], 0
    for t in range(trials):
        fit, _ = batch_model(params, loss, A, y_with, n_fit, np.random.default_rng([seed, 1, t]))
        chunks, fell, _ = deletion.rerelease_chunks(
            params, loss, [fit], registry, slots, plan, 1000 * seed + t, 1
        )
        fell_back += fell
        deleted.append(chunks[0].theta @ direction)
        retrain, _ = batch_model(
            params, loss, A_never, y_never, n_fit - 1, np.random.default_rng([seed, 2, t])
        )
        fresh.append(retrain.theta @ direction)
    # The estimator's own deletion of z reports the audited path and epsilon.
    est.delete_samples([len(A) - 1])
    report = est.deletion_log_[-1]
    assert report.cost["action"] == plan.decision.action
    assert report.deletion_epsilon == pytest.approx(plan.decision.epsilon, rel=1e-9)
    return plan, np.array(deleted), np.array(fresh), fell_back


def _pin(monkeypatch, method):
    """Pin the fine-tune's method (with ``prefer_fine_tune``: at this tiny
    shape the planner predicts the re-solve, and at times the retrain,
    cheaper)."""
    if method == "schedule":
        monkeypatch.setattr(deletion, "_resolve_work", lambda *a, **k: math.inf)
    else:
        monkeypatch.setattr(deletion, "scheduled_fine_tune", lambda *a, **k: None)


def _no_descent(loss, A, y, weights, Lambda, theta0, steps, step_size):
    """A broken scheduled fine-tune: no step, the certificate bypassed."""
    work = DescentWork(0, 0, len(A), 0.0)
    return WarmDescent(np.array(theta0, dtype=float), 0.0, work)


def _no_resolve(params, loss, A, y_index, n_noisy, rng, theta0=None, max_iter=None):
    """A broken re-solve: the published model released again with the fit's
    noise, no solve and no certificate (a cold retrain is left as it is)."""
    if theta0 is None:
        return batch_model(params, loss, A, y_index, n_noisy, rng)
    config = releases.configure(params, loss, n_noisy)
    mechanisms = releases.model_mechanisms(params, config, loss)
    theta = mechanisms[0].release(np.array(theta0, dtype=float), rng)
    parts = releases.release_parts(params, config, loss)
    return releases.ChunkModel("fit", float(n_noisy), 0, config, parts, theta, 1), mechanisms


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["schedule", "re-solve"])
def test_deletion_audit_holds_at_the_reported_epsilon_and_detects_a_broken_fine_tune(
    monkeypatch, prefer_fine_tune, method
):
    _pin(monkeypatch, method)
    trials = n_trials(ci=1200, full=20000)
    plan, deleted, fresh, fell_back = _released(trials)
    assert plan.decision.action == NOISE_FINETUNE
    certified = plan.decision.epsilon
    assert certified <= TARGET
    assert fell_back == 0  # the audited path is the fine-tune, not its fallback
    assert audit_epsilon_lower_bound(deleted, fresh, DELTA) <= certified

    # Negative control: the fine-tune runs no step and its certificate is
    # bypassed (the published fit is released again with fresh noise).
    if method == "schedule":
        monkeypatch.setattr(deletion, "preconditioned_descent", _no_descent)
    else:
        monkeypatch.setattr(deletion, "batch_model", _no_resolve)
    _, broken, fresh_b, _ = _released(n_trials(ci=1000, full=5000), seed=1)
    assert audit_epsilon_lower_bound(broken, fresh_b, DELTA) > certified
