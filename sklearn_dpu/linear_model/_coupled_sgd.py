"""Noisy mini-batch SGD whose stored run can be edited exactly.

The learning algorithm is noisy-m-SGD ([U24]_ Alg. 21) or its accelerated
form noisy-m-A-SGD (Alg. 9); with zero noise it is sub-sample GD (Alg. 19).
The unlearning algorithm is Alg. 22 / Alg. 10: couple the mini-batch
indices, rejection-sample every step whose batch changed, and on the first
rejection reflect that step and recompute the rest of the run on the current
data. After an edit the *whole* stored run (iterates, batches, gradients) has
exactly the law of a fresh run on the edited data set (Lemma 29;
Prop. 2).

Implementation choices (errata to [U24]_ as listed below):

* **The noisy gradient is stored, not the raw noise.** On acceptance the
  stored noisy value is kept and only the clean gradient and the batch are
  rewritten, so the implied noise becomes ``noisy - g'`` ([derived]: Alg.
  10 / 22 leave this implicit; a run that keeps the raw noise and rebuilds
  ``g' + theta`` is not exact, and ``tests/test_unlearnable_sgd_exactness.py``
  shows it).
* **The acceptance ratio is new over old** (Alg. 10, step 15; erratum for
  Alg. 13 / 27) and the reflection is ``g + g' - nu`` (Lemma 27; erratum for
  §1.2.4.1, which prints a translation).
* **The update after a reflection is** ``w_{t+1} = e_t - eta xi'_t`` at the
  evaluation point ``e_t`` (the momentum point for A-SGD; erratum for
  Alg. 10/22, step 17). There is no projection (``P`` is the identity);
  exactness does not depend on it ([derived]).
* **Split noise** [derived]. The step noise is ``theta = theta_c + theta_r``
  with independent ``theta_c ~ N(0, s_c^2 I)`` and ``theta_r ~ N(0, s_r^2 I)``.
  The coupling test runs on ``nu = g + theta_c`` alone and keeps ``theta_r``
  unchanged, which transports ``(nu, theta_r)`` exactly (the product of the
  reflection coupling with the identity). The learning algorithm is the same
  (``xi = nu + theta_r ~ N(g, s_c^2 + s_r^2)``), and the reserve ``theta_r``
  keeps a recomputed model differentially private *jointly* with the model it
  replaces: the reflected step reveals ``g + g' + 2 theta_r`` about the
  records it shares with the old step. ``s_r = 0`` is the dissertation's
  algorithm exactly.
* **Poisson batches** (default of the estimator) or fixed-size batches
  (Alg. 21 as printed). See :mod:`sklearn_dpu.unlearning.coupling`.
* Per-step output averaging uses ``1/(T+1)`` over ``w_1 .. w_{T+1}`` (erratum:
  Alg. 19 / 21 print ``(1/T) sum_{t=1}^{T+1}``); the accelerated variant
  outputs ``w_{T+1}``.

The stored run (:class:`CoupledSGDState`) holds, for ``T`` steps, ``K``
outputs and ``p`` coefficients per output: the batch indices (int32, about
``T m``), the clean gradients, the coupled noisy gradients, the noisy
gradients and the iterates (float64, ``4 T K p``); plus the data rows
(float32 features and a label code, ``n (d + 1)``). That is
``O(T (m + K p))`` numbers plus the data. Float64 is kept for everything that
enters a density ratio or a replay.

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024.
"""

from dataclasses import dataclass, fields
from functools import partial

import numpy as np

from .._progress import step_ticker
from .._row_threads import map_row_ranges, sum_over_row_ranges
from .._transaction import on_rollback
from ..privacy.mechanisms import GaussianSteps
from ..unlearning.coupling import (
    poisson_subsample,
    reflect,
    reflection_accepts,
    replacements_outside,
    uniform_subsets,
)
from ..unlearning.state import VersionedState
from ._losses import MarginLoss, get_loss
from ._sgd_plan import SGDSchedule
from ._sparse_rows import take_rows

__all__ = ["CoupledSGDState", "EditOutcome", "InsertionRecord"]

# Gathered batch rows are processed in pieces of about this many values (2 MB
# of float64): memory stays bounded whatever T * m is, and a piece stays in
# cache between its gather and the products of its steps.
_CHUNK_VALUES = 1 << 18


@dataclass(frozen=True)
class EditOutcome:
    """What one coupled edit did (counts only; no data values)."""

    tested_steps: np.ndarray  # steps whose coupling test ran (through the rejection)
    rejected_step: int | None
    recomputed_steps: int
    gradient_evaluations: int
    refit: bool = False


@dataclass(frozen=True)
class InsertionRecord:
    """One :meth:`partial_fit` insertion, as published in ``insertion_log_``.

    Only counts that the ledger entry of the insertion already shows (steps
    tested for the first time and steps recomputed, or a refit) or that the
    request fixes (rows inserted); no timing and no gradient count (the
    latter sums batch sizes, which depend on the exact number of rows).
    """

    n_inserted: int
    refit: bool
    tested_steps: int
    recomputed_steps: int


def _tested(steps: np.ndarray, first: int | None) -> np.ndarray:
    return np.asarray(steps if first is None else steps[: first + 1], dtype=np.int64)


class CoupledSGDState(VersionedState):
    """The stored run of noisy mini-batch SGD, with the data it was run on.

    Attributes
    ----------
    registry : SampleRegistry
        Ids and rows of the live samples: float32 clipped features followed
        by the label code (``n * (n_features + 1)`` values). The rows are
        clipped training data: a file holding this state is as sensitive as
        the data.
    batch_ptr : ndarray of int64, shape (T + 1,)
    batch_slots : ndarray of int32, shape (batch_ptr[-1],)
        Mini-batch of step ``t``: registry slots
        ``batch_slots[batch_ptr[t]:batch_ptr[t + 1]]``. The index from a sample
        to the steps that used it is this array read backwards (a vectorized
        scan, O(T m), rebuilt on demand rather than stored).
    grad : ndarray of float64, shape (T, K, p)
        Clean mini-batch gradient ``g_t`` at the evaluation point of step ``t``
        (data part only; the L2 penalty is applied in the update).
    coupled : ndarray of float64, shape (T, K, p)
        ``nu_t = g_t + theta_c``, the noisy value the coupling tests.
    noisy : ndarray of float64, shape (T, K, p)
        ``xi_t = nu_t + theta_r``, the noisy gradient of the update.
    path : ndarray of float64, shape (T + 1, K, p)
        Iterates ``w_0 = 0, w_1, ..., w_T`` (0-based).
    schedule : SGDSchedule or None
        The schedule (steps, batch size, sampling rate, noise multipliers)
        derived from the parameters and the noised or public size; None
        until :meth:`configure`.
    frozen hyper-parameters
        ``loss_name, n_outputs, n_features, feature_norm, fit_intercept,
        n_steps, batch_size, sampling, inclusion_prob, sigma_coupled,
        sigma_reserve, learning_rate, alpha, solver``.

    Notes
    -----
    Size: ``T (m + 4 K p)`` numbers for the run plus ``n (d + 1)`` float32 for
    the data. After an edit, nothing computed from a deleted row is left in
    the state except through values whose law, after the edit, is that of a
    fresh run on the remaining rows (the stored noisy gradients): that is what
    exactness means. The estimator's bookkeeping of the edits (streams used,
    noised count, steps whose reserve is charged, counters) is not part of
    the run: see :class:`~sklearn_dpu.linear_model._sgd_edits.SGDEditLedger`.
    """

    #: 3: the run only, its schedule an
    #: :class:`~sklearn_dpu.linear_model._sgd_plan.SGDSchedule` in ``schedule``;
    #: the edit bookkeeping moved to the estimator's ``edit_ledger_``. Formats
    #: 1 (plan as a dict) and 2 (``RunPlan`` in ``plan``, bookkeeping here) are
    #: converted on load (see :meth:`__setstate__`).
    FORMAT_VERSION = 3

    def __init__(
        self,
        registry,
        *,
        loss_name,
        n_outputs,
        n_features,
        feature_norm,
        fit_intercept,
        n_steps,
        sampling,
        learning_rate,
        alpha,
        solver,
    ):
        self.registry = registry
        self.loss_name = loss_name
        self.n_outputs = int(n_outputs)
        self.n_features = int(n_features)
        self.feature_norm = float(feature_norm)
        self.fit_intercept = bool(fit_intercept)
        self.n_steps = int(n_steps)
        self.sampling = sampling
        self.learning_rate = float(learning_rate)
        self.alpha = float(alpha)
        self.solver = solver
        # Set by configure(): the size-dependent part of the run.
        self.batch_size = 1.0
        self.inclusion_prob = 1.0
        self.sigma_coupled = 0.0
        self.sigma_reserve = 0.0
        self._allocate(self.n_steps)
        self.schedule: SGDSchedule | None = None

    def configure(self, schedule: SGDSchedule) -> None:
        """Set the batch size, sampling rate and noise of ``schedule``.

        ``schedule`` gives the noise in units of ``G / m``, with ``G`` the loss's
        Lipschitz constant on augmented rows of norm at most
        :meth:`row_bound`; this converts it to gradient units.
        """
        self.schedule = schedule
        if schedule.n_steps != self.n_steps:
            self._allocate(int(schedule.n_steps))
        self.batch_size = float(schedule.batch_size)
        self.inclusion_prob = float(schedule.inclusion)
        unit = self.loss.z_lipschitz(self.n_outputs) * self.row_bound() / self.batch_size
        self.sigma_coupled = float(schedule.coupled) * unit
        self.sigma_reserve = float(schedule.reserve) * unit

    def refit(self, rng: np.random.Generator) -> EditOutcome:
        """Run everything afresh on the live samples (after :meth:`configure`)."""
        evaluations = self.train(0, rng)
        return EditOutcome(np.zeros(0, dtype=np.int64), None, self.n_steps, evaluations, refit=True)

    def _allocate(self, n_steps: int) -> None:
        """Empty run arrays for ``n_steps`` steps (a refit may change T)."""
        self.n_steps = n_steps
        shape = (n_steps, self.n_outputs, self.n_coef)
        self.batch_ptr = np.zeros(n_steps + 1, dtype=np.int64)
        self.batch_slots = np.zeros(0, dtype=np.int32)
        self.grad = np.zeros(shape)
        self.coupled = np.zeros(shape)
        self.noisy = np.zeros(shape)
        self.path = np.zeros((n_steps + 1, self.n_outputs, self.n_coef))

    # ---------------------------------------------------------------- basics

    @property
    def n_coef(self) -> int:
        return self.n_features + self.fit_intercept

    @property
    def loss(self) -> MarginLoss:
        return get_loss(self.loss_name)

    def live_slots(self) -> np.ndarray:
        reg = self.registry
        return np.flatnonzero(reg.alive[: reg.size])

    def nbytes(self) -> dict:
        """Bytes of the stored run and of the stored data."""
        reg = self.registry
        run = sum(
            a.nbytes
            for a in (
                self.batch_ptr,
                self.batch_slots,
                self.grad,
                self.coupled,
                self.noisy,
                self.path,
            )
        )
        data = (
            reg.rows[: reg.size].nbytes
            + reg.ids[: reg.size].nbytes
            + reg.chunks[: reg.size].nbytes
            + reg.alive[: reg.size].nbytes
        )
        return {"run": int(run), "data": int(data)}

    def _rows(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Augmented float64 rows and int label codes of registry slots."""
        raw = take_rows(self.registry.rows, slots)
        X = np.empty((len(slots), self.n_coef))
        X[:, : self.n_features] = raw[:, : self.n_features]
        if self.fit_intercept:
            # The intercept feature equals feature_norm, so an augmented row
            # has norm at most sqrt(2) * feature_norm (see _row_bound).
            X[:, self.n_features] = self.feature_norm
        return X, raw[:, self.n_features].astype(np.intp)

    def row_bound(self) -> float:
        """Public bound on the norm of an augmented row."""
        return self.feature_norm * np.sqrt(1.0 + self.fit_intercept)

    def steps_mechanism(self, steps: int) -> GaussianSteps:
        """The mechanism of ``steps`` steps of this run (noise in gradient units).

        Its standard normal draws, one pair per coordinate and step, are split
        into the coupled part (scaled by ``sigma_coupled``) and the reserve
        (``sigma_reserve``); their sum has the schedule's multiplier.
        """
        schedule = self.schedule
        unit = self.loss.z_lipschitz(self.n_outputs) * self.row_bound() / self.batch_size
        return GaussianSteps(
            unit,
            schedule.noise,
            int(steps),
            sampling_rate=schedule.inclusion,
            poisson_sampled=self.sampling == "poisson",
        )

    def _penalty_mask(self) -> np.ndarray:
        mask = np.ones(self.n_coef)
        if self.fit_intercept:
            mask[-1] = 0.0
        return mask

    def eval_points(self, steps: np.ndarray) -> np.ndarray:
        """Where step ``t`` evaluates its gradient: ``w_t``, or Nesterov's point."""
        w = self.path[steps]
        if self.solver == "sgd":
            return w
        # A-SGD (Alg. 9, step 5): e_t = w_t + ((t-1)/(t+2)) (w_t - w_{t-1}) for
        # 1-based t, i.e. beta = s / (s + 3) for the 0-based step s; beta_0 = 0.
        steps = np.asarray(steps)
        beta = (steps / (steps + 3.0))[:, None, None]
        previous = self.path[np.maximum(steps - 1, 0)]
        return w + beta * (w - previous)

    def _step(self, e: np.ndarray, xi: np.ndarray) -> np.ndarray:
        """``w_{t+1} = e_t - eta (xi_t + alpha e_t)``, intercept not penalized."""
        return e - self.learning_rate * (xi + self.alpha * self._penalty_mask() * e)

    def record_gradients(self, points: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Per-record gradients: record ``slots[i]`` at ``points[i]`` (k, K, p)."""
        X, y = self._rows(slots)
        Z = np.einsum("ikp,ip->ik", points, X)
        D = self.loss.dz(Z, y)
        return D[:, :, None] * X[:, None, :]

    def batch_of(self, step: int) -> np.ndarray:
        return self.batch_slots[self.batch_ptr[step] : self.batch_ptr[step + 1]]

    def steps_of_positions(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.batch_ptr, positions, side="right") - 1

    def model(self) -> np.ndarray:
        """Released coefficients (K, p): average iterate, or the last for A-SGD."""
        if self.solver == "sgd":
            return self.path.mean(axis=0)
        return self.path[-1].copy()

    # -------------------------------------------------------------- training

    def _draw_batches(self, n_sets: int, rng) -> tuple[np.ndarray, np.ndarray]:
        """Fresh batches over the live samples: (counts per set, flat slots)."""
        live = self.live_slots()
        if self.sampling == "poisson":
            sets, items = poisson_subsample(n_sets, len(live), self.inclusion_prob, rng)
            counts = np.bincount(sets, minlength=n_sets)
            return counts, live[items].astype(np.int32)
        m = int(self.batch_size)
        subsets = uniform_subsets(n_sets, len(live), m, rng)
        return np.full(n_sets, m), live[subsets].ravel().astype(np.int32)

    def train(self, start: int, rng: np.random.Generator) -> int:
        """Run steps ``start .. T-1`` afresh on the live samples (Alg. 21 / Alg. 9).

        Returns the number of per-record gradients evaluated.
        """
        T = self.n_steps
        if start >= T:
            return 0
        counts, fresh = self._draw_batches(T - start, rng)
        self.batch_slots = np.concatenate([self.batch_slots[: self.batch_ptr[start]], fresh])
        self.batch_ptr[start + 1 :] = self.batch_ptr[start] + np.cumsum(counts)
        noise = self.steps_mechanism(T - start).standard_noise(
            (2, self.n_outputs, self.n_coef), rng
        )
        noise[:, 0] *= self.sigma_coupled
        noise[:, 1] *= self.sigma_reserve
        loss, m, ptr = self.loss, self.batch_size, self.batch_ptr
        mask = self._penalty_mask()
        # T is the public schedule (parameters and released counts)
        tick = step_ticker(T, "SGD", self.steps_mechanism(T))
        for first, last, X, y in self._gathered_chunks(start):
            offset = ptr[first]
            for s in range(first, last):
                e = self._eval_point(s)
                a, b = ptr[s] - offset, ptr[s + 1] - offset
                g = _batch_gradient_sum(loss, X[a:b], y[a:b], e) / m
                nu = g + noise[s - start, 0]
                xi = nu + noise[s - start, 1]
                self.grad[s], self.coupled[s], self.noisy[s] = g, nu, xi
                self.path[s + 1] = e - self.learning_rate * (xi + self.alpha * mask * e)
                if tick is not None:
                    tick(s)
        return int(ptr[T] - ptr[start])

    def _eval_point(self, s: int) -> np.ndarray:
        """:meth:`eval_points` of the single step ``s`` (same arithmetic, no gather)."""
        w = self.path[s]
        if self.solver == "sgd":
            return w
        beta = s / (s + 3.0)
        return w + beta * (w - self.path[max(s - 1, 0)])

    def _gathered_chunks(self, start: int):
        """Steps ``start .. T-1`` in chunks ``(first, last, X, y)``: the augmented
        float64 rows and label codes of the batches of steps ``first .. last-1``.

        Chunks hold about ``_CHUNK_VALUES`` values and reuse one pair of
        buffers, so the gathered rows stay in cache between the gather and the
        two products of a step, and no memory is allocated per chunk: a chunk's
        arrays are overwritten by the next one. The rows are the values
        :meth:`_rows` gives.
        """
        T, ptr, d = self.n_steps, self.batch_ptr, self.n_features
        m = max(1.0, self.batch_size)
        values = getattr(self.registry.rows, "chunk_values", _CHUNK_VALUES)  # Dask: larger
        chunk_steps = max(1, values // max(1, int(self.n_coef * m)))
        firsts = np.arange(start, T, chunk_steps)
        lasts = np.minimum(firsts + chunk_steps, T)
        rows = self.registry.rows
        capacity = int(np.max(ptr[lasts] - ptr[firsts]))
        raw = np.empty((capacity, rows.shape[1]), dtype=rows.dtype)
        X = np.empty((capacity, self.n_coef))
        width = rows.shape[1] if self.fit_intercept else d

        def gather(slots, start, stop):
            take_rows(rows, slots[start:stop], out=raw[start:stop])  # unbuffered (dense)
            # The label column sits where the intercept feature goes (it is
            # read, then overwritten, below).
            X[start:stop] = raw[start:stop, :width]

        dense = isinstance(rows, np.ndarray)  # other storages gather in one call
        for first, last in zip(firsts.tolist(), lasts.tolist(), strict=True):
            slots = self.batch_slots[ptr[first] : ptr[last]]
            k = len(slots)
            if dense:
                map_row_ranges(partial(gather, slots), k, width)
            else:
                gather(slots, 0, k)
            y = raw[:k, d].astype(np.intp)
            if self.fit_intercept:
                X[:k, d] = self.feature_norm
            yield first, last, X[:k], y

    def _replay(self, start: int, stop: int) -> None:
        """Recompute ``w_{start+1} .. w_stop`` from the stored noisy gradients."""
        for s in range(start, stop):
            e = self.eval_points(np.array([s]))[0]
            self.path[s + 1] = self._step(e, self.noisy[s])

    # ----------------------------------------------------------- the coupling

    def _couple(
        self, steps: np.ndarray, new_grad: np.ndarray, rng: np.random.Generator
    ) -> int | None:
        """Rejection-sample the tested ``steps`` (sorted) in order.

        Steps before the first rejection are accepted: their clean gradient
        becomes ``new_grad`` and their noisy values are kept. Returns the
        position (in ``steps``) of the first rejection, or None.
        """
        k = len(steps)
        if k == 0:
            return None
        accepted = self._accepts(steps, new_grad, rng.random(k))
        first = int(np.argmin(accepted)) if not accepted.all() else None
        n_ok = k if first is None else first
        self.grad[steps[:n_ok]] = new_grad[:n_ok]
        return first

    def _accepts(self, steps: np.ndarray, new_grad: np.ndarray, uniforms: np.ndarray):
        """The rejection test of each tested step: keep ``nu ~ N(g, s_c^2)``
        when ``u <= phi_{g'}(nu) / phi_g(nu)`` (new over old, [U24]_ Lemma 26)."""
        return reflection_accepts(
            self.coupled[steps], self.grad[steps], new_grad, self.sigma_coupled, uniforms
        )

    def _reflect_and_recompute(
        self, step: int, new_grad: np.ndarray, rng: np.random.Generator
    ) -> int:
        """Reflect step ``step`` onto its new law and recompute the rest afresh."""
        nu_old = self.coupled[step]
        reserve = self.noisy[step] - nu_old
        nu_new = reflect(nu_old, self.grad[step], new_grad)
        self.grad[step] = new_grad
        self.coupled[step] = nu_new
        self.noisy[step] = nu_new + reserve
        self._replay(step, step + 1)
        return self.train(step + 1, rng)

    # ----------------------------------------------------------------- edits

    def _remove_from_batches(self, positions: np.ndarray) -> None:
        steps = self.steps_of_positions(positions)
        removed = np.bincount(steps, minlength=self.n_steps)
        self.batch_slots = np.delete(self.batch_slots, positions)
        self.batch_ptr[1:] -= np.cumsum(removed)

    def forget_slots(self, slots: np.ndarray) -> None:
        """Drop rows from the registry, renumbering batch slots if it compacts."""
        reg = self.registry
        if 2 * (reg.n_samples - len(slots)) < reg.size:
            alive = reg.alive[: reg.size].copy()
            alive[slots] = False
            mapping = (np.cumsum(alive) - 1).astype(np.int32)
            size = reg.size
            reg.remove(slots)
            if reg.size != size:  # compacted (a disk-backed registry may skip it)
                self.batch_slots = mapping[self.batch_slots]
        else:
            reg.remove(slots)

    def _resolve(self, steps, first, new_grad, rng, evaluated: int) -> "EditOutcome":
        """Finish an edit whose tested ``steps`` first failed at index ``first``
        (``None``: all passed): reflect that step, recompute the rest, report.

        ``evaluated`` counts the per-record gradients the tests already took.
        """
        recomputed = evaluations = 0
        if first is not None:
            step = int(steps[first])
            evaluations = self._reflect_and_recompute(step, new_grad[first], rng)
            recomputed = self.n_steps - step
        return EditOutcome(
            _tested(steps, first),
            None if first is None else int(steps[first]),
            recomputed,
            evaluated + evaluations,
        )

    def delete_poisson(self, slots: np.ndarray, rng: np.random.Generator) -> EditOutcome:
        """Delete ``slots`` as one edit (Poisson batches): drop them from their
        batches, test each step that used one, recompute from the first rejection.
        """
        positions = np.flatnonzero(np.isin(self.batch_slots, slots))
        member_steps = self.steps_of_positions(positions)
        steps, inverse = np.unique(member_steps, return_inverse=True)
        new_grad = self.grad[steps].copy()
        if len(steps):
            points = self.eval_points(member_steps)
            per_record = self.record_gradients(points, self.batch_slots[positions])
            np.subtract.at(new_grad, inverse, per_record / self.batch_size)
        first = self._couple(steps, new_grad, rng)
        self._remove_from_batches(positions)
        self.forget_slots(slots)
        return self._resolve(steps, first, new_grad, rng, len(positions))

    def insert_poisson(self, slots: np.ndarray, rng: np.random.Generator) -> EditOutcome:
        """Insert registry ``slots`` (already added) as one edit (Poisson batches):
        each joins each batch with probability q; test the steps they join."""
        member_steps, which = poisson_subsample(self.n_steps, len(slots), self.inclusion_prob, rng)
        member_slots = slots[which].astype(np.int32)
        steps, inverse = np.unique(member_steps, return_inverse=True)
        new_grad = self.grad[steps].copy()
        if len(steps):
            points = self.eval_points(member_steps)
            per_record = self.record_gradients(points, member_slots)
            np.add.at(new_grad, inverse, per_record / self.batch_size)
        first = self._couple(steps, new_grad, rng)
        # Batches up to the rejected step (included) gain their new members;
        # later ones are redrawn by the recompute.
        keep = slice(None) if first is None else member_steps <= steps[first]
        at = self.batch_ptr[member_steps[keep] + 1]
        self.batch_slots = np.insert(self.batch_slots, at, member_slots[keep])
        added = np.bincount(member_steps[keep], minlength=self.n_steps)
        self.batch_ptr[1:] += np.cumsum(added)
        return self._resolve(steps, first, new_grad, rng, len(member_slots))

    def delete_fixed(self, slot: int, rng: np.random.Generator) -> EditOutcome:
        """Delete one slot (fixed-size batches): Alg. 22 with Claim 5's coupling."""
        m = int(self.batch_size)
        positions = np.flatnonzero(self.batch_slots == slot)
        steps = positions // m  # fixed-size batches: batch_ptr = m * arange(T + 1)
        new_grad = self.grad[steps].copy()
        replacements = np.zeros(0, dtype=np.int32)
        if len(steps):
            batches = self.batch_slots.reshape(self.n_steps, m)[steps]
            replacements = replacements_outside(batches, self.live_slots(), rng).astype(np.int32)
            points = self.eval_points(steps)
            new_grad -= (
                self.record_gradients(points, np.full(len(steps), slot))
                - self.record_gradients(points, replacements)
            ) / m
        first = self._couple(steps, new_grad, rng)
        members, replaced = self.batch_slots, self.batch_slots[positions]
        on_rollback(lambda: members.__setitem__(positions, replaced))
        self.batch_slots[positions] = replacements
        self.forget_slots(np.array([slot]))
        return self._resolve(steps, first, new_grad, rng, 2 * len(steps))

    def insert_fixed(self, slot: int, rng: np.random.Generator) -> EditOutcome:
        """Insert one slot (already added; fixed-size batches): Alg. 22 with
        Claim 6's coupling: each batch swaps a uniform member for the new record
        with probability m / (n + 1)."""
        m, T = int(self.batch_size), self.n_steps
        n_before = self.registry.n_samples - 1
        steps = np.flatnonzero(rng.random(T) < m / (n_before + 1))
        positions = steps * m + rng.integers(0, m, size=len(steps))
        new_grad = self.grad[steps].copy()
        if len(steps):
            points = self.eval_points(steps)
            new_grad -= (
                self.record_gradients(points, self.batch_slots[positions])
                - self.record_gradients(points, np.full(len(steps), slot))
            ) / m
        first = self._couple(steps, new_grad, rng)
        self.batch_slots[positions] = slot
        return self._resolve(steps, first, new_grad, rng, 2 * len(steps))

    # ---------------------------------------------------------- persistence

    def __getstate__(self):
        state = super().__getstate__()
        # The registry pickles its live rows only, renumbered in slot order;
        # renumber the batches the same way so they stay consistent.
        reg = self.registry
        mapping = (np.cumsum(reg.alive[: reg.size]) - 1).astype(np.int32)
        state["batch_slots"] = mapping[self.batch_slots]
        return state

    def __setstate__(self, state):
        # Format 1 stored the schedule as a dict with the same keys, format 2
        # as a RunPlan, both under "plan", with the estimator's edit
        # bookkeeping: convert them, so older files keep loading (the
        # estimator moves the bookkeeping to its edit ledger). Anything else
        # is refused by VersionedState (StateVersionError).
        version = state.get("_format_version")
        plan = state.get("plan")
        names = {f.name for f in fields(SGDSchedule)}
        if version == 1 and isinstance(plan, dict) and set(plan) == names:
            state = {**state, "plan": SGDSchedule(**plan), "_format_version": 2}
            version = 2
        if version == 2 and isinstance(state.get("plan"), SGDSchedule):
            state = dict(state)
            state["schedule"] = state.pop("plan")
            state["_legacy_bookkeeping"] = {
                name: state.pop(name) for name in _LEGACY_BOOKKEEPING if name in state
            }
            state["_format_version"] = self.FORMAT_VERSION
        super().__setstate__(state)


#: What a format-2 state held for the estimator (now in its edit ledger).
_LEGACY_BOOKKEEPING = (
    "n_streams",
    "frozen_params",
    "n_chunks",
    "n_noisy",
    "classes_given",
    "nonprivate_recorded",
    "counters",
    "reserve_charged",
)


def _batch_gradient_sum(loss, X: np.ndarray, y: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``sum_i dl/dz_i x_i`` of a batch at ``e`` (``(K, p)``), its rows split
    across threads (:func:`~sklearn_dpu._row_threads.map_row_ranges`) when they pay."""

    def part(start, stop):
        Xb = X[start:stop]
        return loss.dz(Xb @ e.T, y[start:stop]).T @ Xb

    return sum_over_row_ranges(part, X.shape[0], X.shape[1])
