"""Test-only tools for the coupled SGD of UnlearnableSGDClassifier.

* :func:`recompute_probability`: the exact probability that an edit
  recomputes, given a stored run (it reads the data; the recompute-rate tests
  compare it with the measured rate).
* Deliberately broken couplings, the negative controls of the exactness and
  recompute-rate tests: :func:`use_variant` switches a fitted estimator's
  stored run (or, for ``"stale_count"``, its edit ledger) to one of them. The
  package itself has no switch to break its coupling; each subclass below
  overrides one step of it.

  - ``"inverted_ratio"``: the old-over-new acceptance ratio printed in M. E.
    Ullah, "Statistical learning via stochastic optimization under data
    privacy considerations" (PhD thesis, Johns Hopkins University, 2024),
    Alg. 13 and Alg. 27; the thesis's Alg. 10 and Lemma 26 use new over old.
  - ``"raw_noise"``: keep the raw noise of accepted steps and rebuild their
    noisy gradients around the new gradient (then replay), instead of keeping
    the stored noisy gradient.
  - ``"stale_count"``: the noised count of the fit is not shifted by edits,
    so the size class no longer tracks the data.

* :func:`as_format_2`: make a fitted estimator save as state format 2 did
  (the schedule in ``plan``, the edit bookkeeping in the stored run), to test
  that such files still load.
"""

import numpy as np

from sklearn_dpu.linear_model._coupled_sgd import CoupledSGDState
from sklearn_dpu.linear_model._sgd_edits import SGDEditLedger
from sklearn_dpu.unlearning.coupling import gaussian_log_ratio, gaussian_tv

__all__ = ["VARIANTS", "as_format_2", "recompute_probability", "use_variant"]


def recompute_probability(state: CoupledSGDState, delete=None, insert=None) -> float:
    """Exact probability that an edit would recompute, given this stored run.

    For the deletion of registry slots ``delete`` or the insertion of one
    new row ``insert = (x, label_code)`` (a clipped feature vector). The
    probability is over the edit's own randomness only (replacement
    indices, Bernoulli memberships, uniforms): a product over steps of
    one minus the expected rejection probability of the step (Lemma 26:
    ``P(reject) = TV``). Used to check the measured rate; it reads data.
    """
    m, s_c = state.batch_size, state.sigma_coupled
    if delete is not None:
        delete = np.asarray(delete)
        if state.sampling == "poisson":
            positions = np.flatnonzero(np.isin(state.batch_slots, delete))
            member_steps = state.steps_of_positions(positions)
            steps, inverse = np.unique(member_steps, return_inverse=True)
            shift = np.zeros((len(steps), state.n_outputs, state.n_coef))
            per = state.record_gradients(
                state.eval_points(member_steps), state.batch_slots[positions]
            )
            np.add.at(shift, inverse, per / m)
            tv = gaussian_tv(
                np.linalg.norm(shift.reshape(len(steps), state.n_outputs * state.n_coef), axis=1),
                s_c,
            )
            return float(1.0 - np.prod(1.0 - tv))
        (slot,) = delete
        m = int(m)
        positions = np.flatnonzero(state.batch_slots == slot)
        live = state.live_slots()
        keep = 1.0
        for pos in positions:
            step = pos // m
            batch = state.batch_of(step)
            outside = np.setdiff1d(live, batch)
            point = state.eval_points(np.array([step]))
            g_j = state.record_gradients(point, np.array([slot]))[0]
            g_i = state.record_gradients(np.repeat(point, len(outside), axis=0), outside)
            dist = np.linalg.norm((g_j[None] - g_i).reshape(len(outside), -1), axis=1) / m
            keep *= 1.0 - float(np.mean(gaussian_tv(dist, s_c)))
        return 1.0 - keep
    x, code = insert
    X = np.append(np.asarray(x, dtype=np.float32), np.float32(code))
    steps = np.arange(state.n_steps)
    points = state.eval_points(steps)
    # Gradient of the new row at every step, from a temporary single-row view.
    Xa = np.empty(state.n_coef)
    Xa[: state.n_features] = X[: state.n_features]
    if state.fit_intercept:
        Xa[-1] = state.feature_norm
    Z = np.einsum("ikp,p->ik", points, Xa)
    D = state.loss.dz(Z, np.full(len(steps), int(code)))
    g_z = D[:, :, None] * Xa[None, None, :]
    if state.sampling == "poisson":
        dist = np.linalg.norm(g_z.reshape(len(steps), -1), axis=1) / m
        tv = gaussian_tv(dist, s_c)
        return float(1.0 - np.prod(1.0 - state.inclusion_prob * tv))
    n, m = state.registry.n_samples, int(m)
    keep = 1.0
    for step in steps:
        batch = state.batch_of(step)
        g_i = state.record_gradients(np.repeat(points[step : step + 1], len(batch), axis=0), batch)
        dist = np.linalg.norm((g_i - g_z[step][None]).reshape(len(batch), -1), axis=1) / m
        keep *= 1.0 - (m / (n + 1)) * float(np.mean(gaussian_tv(dist, s_c)))
    return 1.0 - keep


class InvertedRatioState(CoupledSGDState):
    """Accepts with the inverted (old over new) ratio: not exact."""

    def _accepts(self, steps, new_grad, uniforms):
        log_ratio = -gaussian_log_ratio(
            self.coupled[steps], new_grad, self.grad[steps], self.sigma_coupled
        )
        log_ratio[np.isnan(log_ratio)] = 0.0
        with np.errstate(divide="ignore"):
            return np.log(uniforms) <= log_ratio


class RawNoiseState(CoupledSGDState):
    """Keeps the raw noise of accepted steps, rebuilds their noisy values around
    the new gradient and replays: not exact for later edits."""

    def _couple(self, steps, new_grad, rng):
        old = self.grad[steps]
        first = super()._couple(steps, new_grad, rng)
        n_ok = len(steps) if first is None else first
        if n_ok:
            ok = steps[:n_ok]
            shift = new_grad[:n_ok] - old[:n_ok]
            self.coupled[ok] += shift
            self.noisy[ok] += shift
            self._replay(int(steps[0]), self.n_steps if first is None else int(steps[first]))
        return first


class StaleCountLedger(SGDEditLedger):
    """Keeps the fit's noised count through edits."""

    def shifted_count(self, k):
        return self.n_noisy


VARIANTS = {
    "exact": (CoupledSGDState, SGDEditLedger),
    "inverted_ratio": (InvertedRatioState, SGDEditLedger),
    "raw_noise": (RawNoiseState, SGDEditLedger),
    "stale_count": (CoupledSGDState, StaleCountLedger),
}


def use_variant(estimator, variant: str) -> None:
    """Make a fitted estimator's stored run and edit ledger edit as ``variant``."""
    run, ledger = VARIANTS[variant]
    estimator.unlearning_state_.__class__ = run
    estimator.edit_ledger_.__class__ = ledger


def as_format_2(estimator, monkeypatch, plan=None) -> None:
    """Make ``estimator`` pickle and save as state format 2 did: its run holds
    the schedule in ``plan`` (``plan``, if given, instead) and the edit
    bookkeeping, with ``frozen_params`` a dict. Undo with ``monkeypatch.undo()``
    before loading."""
    state, ledger = estimator.unlearning_state_, estimator.__dict__.pop("edit_ledger_")
    monkeypatch.setattr(CoupledSGDState, "FORMAT_VERSION", 2)
    old = {
        "plan": state.__dict__.pop("schedule") if plan is None else plan,
        "frozen_params": ledger.params.as_dict(),
        "n_noisy": ledger.n_noisy,
        "classes_given": ledger.classes_given,
        "n_streams": ledger.n_streams,
        "n_chunks": ledger.n_chunks,
        "nonprivate_recorded": ledger.nonprivate_recorded,
        "counters": ledger.counters,
        "reserve_charged": ledger.reserve_charged,
    }
    if plan is not None:
        del state.__dict__["schedule"]
    vars(state).update(old)
