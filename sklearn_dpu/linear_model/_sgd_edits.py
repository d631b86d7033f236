"""Fit, insertion and deletion of :class:`UnlearnableSGDClassifier`, as worker
functions on the stored run, and the estimator's ledger of its edits.

The estimator (``_unlearnable_sgd.py``) is the public API and the release
procedure (:meth:`~sklearn_dpu.base.PrivateEstimatorMixin._run_update`,
:meth:`~sklearn_dpu.base.PrivateEstimatorMixin._run_deletion`); the stored
run (:class:`~sklearn_dpu.linear_model._coupled_sgd.CoupledSGDState`) is the
algorithm ([U24]_ Alg. 21/22 and Alg. 9/10). This module joins them: it
starts a run, executes an edit on it (shifting the noised count, refitting
when the count leaves its size class), and keeps the bookkeeping that only
the estimator needs (:class:`SGDEditLedger`): the random streams used, the
noised count, the arrival chunks, the steps whose reserve noise the ledger
has charged, and the edit counters.

References
----------
.. [U24] M. E. Ullah, "Statistical learning via stochastic optimization under
   data privacy considerations", PhD thesis, Johns Hopkins University, 2024,
   Ch. 4 and App. C (Alg. 9/10, 21/22; Lemma 29; Claims 5/6).
"""

import math
from dataclasses import dataclass, field

import numpy as np

from .._transaction import in_transaction, keep_array_values, keep_attributes, on_rollback
from ..privacy.ledger import Release
from ..privacy.random import release_generator
from ..unlearning.state import SampleRegistry, VersionedState
from ._coupled_sgd import CoupledSGDState, EditOutcome
from ._losses import get_loss
from ._sgd_plan import SGDParams, SGDSchedule, schedule_run, size_bucket
from ._sgd_releases import edit_release, run_release

__all__ = [
    "SGDEditLedger",
    "delete_from_run",
    "insert_into_run",
    "record_edit",
    "start_run",
    "worst_insertion",
]


def _counters() -> dict:
    return {"edits": 0, "recomputes": 0, "recomputed_steps": 0, "tested_steps": 0}


@dataclass(eq=False)
class SGDEditLedger(VersionedState):
    """The estimator's bookkeeping of a stored run and its edits.

    Public sizes and counts only, plus the released noised count; none of it
    is part of the run (:class:`~sklearn_dpu.linear_model._coupled_sgd.CoupledSGDState`).

    Attributes
    ----------
    params : SGDParams
        The hyper-parameters of the fit (``partial_fit`` refuses to change them).
    n_noisy : float
        The released noised count ``n + Z``, shifted by every edit (``k`` rows
        deleted: ``-k``; inserted: ``+k``), or the public ``schedule_size``.
    classes_given : bool
        Whether the label set was given (``classes`` at a first ``partial_fit``).
    n_streams : int
        Random streams used so far (fit and edits); the next edit uses stream
        ``n_streams``. No generator state is stored.
    n_chunks : int
        1 for fit, one more per insertion call.
    nonprivate_recorded : bool
        Fixed batches: whether an edit's non-private release is in the ledger.
    counters : dict
        Edits, recomputes, recomputed and tested steps so far.
    reserve_charged : ndarray of bool, shape (T,)
        Steps whose reserve noise the ledger has charged (tested since they
        were computed).
    """

    FORMAT_VERSION = 1

    params: SGDParams
    n_noisy: float
    classes_given: bool = False
    n_streams: int = 0
    n_chunks: int = 1
    nonprivate_recorded: bool = False
    counters: dict = field(default_factory=_counters)
    reserve_charged: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @classmethod
    def from_legacy(cls, fields_: dict) -> "SGDEditLedger":
        """The ledger of a state of format 2, which held this bookkeeping."""
        return cls(
            params=SGDParams.of(fields_["frozen_params"]),
            n_noisy=fields_["n_noisy"],
            classes_given=fields_["classes_given"],
            n_streams=fields_["n_streams"],
            n_chunks=fields_["n_chunks"],
            nonprivate_recorded=fields_["nonprivate_recorded"],
            counters=fields_["counters"],
            reserve_charged=fields_["reserve_charged"],
        )

    def shifted_count(self, k: int) -> float:
        """The stored count after inserting ``k`` rows (``k < 0``: deleting).

        ``n + Z`` becomes ``(n + k) + Z``: the count a fresh fit on the edited
        data would draw with the same ``Z``, so the size class tracks the
        data. A public ``schedule_size`` is a hyper-parameter and never moves.
        """
        if self.params.schedule_size is not None:
            return self.n_noisy
        return self.n_noisy + k

    def generator(self, random_state: int | np.random.RandomState | None) -> np.random.Generator:
        """The generator of the next edit (its own stream)."""
        rng = release_generator(random_state, self.n_streams)
        self.n_streams += 1
        return rng


def start_run(
    registry: SampleRegistry,
    n_classes: int,
    n_features: int,
    params: SGDParams,
    schedule: SGDSchedule,
) -> CoupledSGDState:
    """An untrained run on ``registry`` with the schedule ``schedule``.

    ``learning_rate="auto"`` is ``1 / (2 (H + alpha))``, with ``H`` the loss's
    smoothness on augmented rows ([U24]_ Prop. 7; ``||row||^2`` for hinge).
    """
    n_outputs = 1 if n_classes == 2 else n_classes
    loss = get_loss(params.loss)
    if params.learning_rate == "auto":
        row_sq = params.feature_norm**2 * (1.0 + params.fit_intercept)
        smooth = loss.z_smoothness(n_outputs)
        smooth = row_sq * (1.0 if math.isinf(smooth) else smooth)
        learning_rate = 1.0 / (2.0 * (smooth + params.alpha))
    else:
        learning_rate = float(params.learning_rate)
    state = CoupledSGDState(
        registry,
        loss_name=params.loss,
        n_outputs=n_outputs,
        n_features=n_features,
        feature_norm=params.feature_norm,
        fit_intercept=params.fit_intercept,
        n_steps=schedule.n_steps,
        sampling=params.batch_sampling,
        learning_rate=learning_rate,
        alpha=params.alpha,
        solver=params.solver,
    )
    state.configure(schedule)
    return state


def _new_schedule(ledger: SGDEditLedger, state: CoupledSGDState, n_noisy: float):
    """The schedule of a refit when ``n_noisy`` left the size class, else None."""
    if size_bucket(n_noisy) == state.schedule.bucket:
        return None
    return schedule_run(ledger.params, n_noisy, state.n_features)


def insert_into_run(
    ledger: SGDEditLedger,
    state: CoupledSGDState,
    ids: np.ndarray,
    rows: np.ndarray,
    random_state: int | np.random.RandomState | None,
) -> list[EditOutcome]:
    """Insert ``rows`` (validated and encoded) with their ``ids``.

    Poisson batches: one coupled edit; fixed batches: one row at a time
    ([U24]_ Claim 6); a refit if the shifted count leaves its size class.
    """
    registry = state.registry
    n_noisy = ledger.shifted_count(len(rows))
    schedule = _new_schedule(ledger, state, n_noisy)
    chunk = ledger.n_chunks + 1
    ledger.n_chunks = chunk
    ledger.n_noisy = n_noisy
    rng = ledger.generator(random_state)
    if schedule is not None:
        registry.add(ids, rows, chunk=chunk)
        state.configure(schedule)
        return [state.refit(rng)]
    if state.sampling == "poisson":
        start = registry.size
        registry.add(ids, rows, chunk=chunk)
        return [state.insert_poisson(np.arange(start, registry.size), rng)]
    outcomes = []
    for i in range(len(rows)):
        start = registry.size
        registry.add(ids[i : i + 1], rows[i : i + 1], chunk=chunk)
        outcomes.append(state.insert_fixed(start, rng))
    return outcomes


def delete_from_run(
    ledger: SGDEditLedger,
    state: CoupledSGDState,
    slots: np.ndarray,
    random_state: int | np.random.RandomState | None,
) -> list[EditOutcome]:
    """Delete registry ``slots`` (validated).

    Poisson batches: one coupled edit; fixed batches: one row at a time
    ([U24]_ Claim 5); a refit if the shifted count leaves its size class.
    """
    keep_run(ledger, state)
    n_noisy = ledger.shifted_count(-len(slots))
    schedule = _new_schedule(ledger, state, n_noisy)
    ledger.n_noisy = n_noisy
    rng = ledger.generator(random_state)
    if schedule is not None:
        state.forget_slots(slots)
        state.configure(schedule)
        return [state.refit(rng)]
    if state.sampling == "poisson":
        return [state.delete_poisson(slots, rng)]
    registry = state.registry
    ordered = registry.ids[slots].tolist()
    return [
        state.delete_fixed(int(registry.slots_of([sample_id])[0]), rng) for sample_id in ordered
    ]


def keep_run(ledger: SGDEditLedger, state: CoupledSGDState) -> None:
    """Register the undo of an edit of the run (inside
    :func:`~sklearn_dpu._transaction.atomic`): the per-step arrays' values
    (O(T d), copied; never the rows), the ledger's counters and every field
    an edit reassigns. The registry undoes its own removals, and a fixed
    batch's replaced members are restored where they are replaced
    (:meth:`CoupledSGDState.delete_fixed`)."""
    if not in_transaction():
        return
    for array in (state.grad, state.coupled, state.noisy, state.path, state.batch_ptr):
        keep_array_values(array)
    keep_array_values(ledger.reserve_charged)
    counters = dict(ledger.counters)
    on_rollback(lambda: ledger.counters.update(counters))
    keep_attributes(state)
    keep_attributes(ledger)


def _edit_entry(
    ledger: SGDEditLedger, state: CoupledSGDState, last_chunk: int, tested: int, fresh: int
) -> Release | None:
    """The ledger entry of a coupled edit that tested or recomputed steps."""
    if state.sampling == "fixed":
        if tested == 0 or ledger.nonprivate_recorded:
            return None
    elif tested == 0 and fresh == 0:
        return None
    return edit_release(
        state.sampling, state.schedule, int(tested), int(fresh), (1, int(last_chunk))
    )


def worst_insertion(ledger: SGDEditLedger, state: CoupledSGDState, k: int | None) -> Release | None:
    """The most an insertion of ``k`` rows (None: unknown) can release, from
    public quantities: a refit if the shifted count leaves its class, else
    every step tested and recomputed. None if it cannot release anything."""
    shifted = None if k is None else ledger.shifted_count(k)
    if shifted is not None and size_bucket(shifted) != state.schedule.bucket:
        schedule = schedule_run(ledger.params, shifted, state.n_features)
        return run_release(ledger.params, schedule, (1, ledger.n_chunks + 1), "refit")
    return _edit_entry(
        ledger, state, ledger.n_chunks + 1, tested=state.n_steps, fresh=state.n_steps
    )


def record_edit(
    ledger: SGDEditLedger, state: CoupledSGDState, outcomes: list, what: str
) -> Release | None:
    """Count the edits of one call and return what they released (None if
    nothing new): a refit's run, or the steps tested for the first time
    (their reserve) and the steps recomputed afresh."""
    counters = ledger.counters
    if outcomes and outcomes[0].refit:
        counters["edits"] += 1
        counters["recomputes"] += 1
        counters["recomputed_steps"] += state.n_steps
        ledger.reserve_charged = np.zeros(state.n_steps, dtype=bool)
        return run_release(
            ledger.params, state.schedule, (1, ledger.n_chunks), f"refit during {what}"
        )
    newly_tested = fresh = 0
    for o in outcomes:
        counters["edits"] += 1
        counters["tested_steps"] += len(o.tested_steps)
        if len(o.tested_steps):
            newly_tested += int((~ledger.reserve_charged[o.tested_steps]).sum())
            ledger.reserve_charged[o.tested_steps] = True
        if o.rejected_step is not None:
            counters["recomputes"] += 1
            counters["recomputed_steps"] += o.recomputed_steps
            # The reflected step keeps its noise (its lineage); the steps
            # after it are new.
            fresh += o.recomputed_steps - 1
            ledger.reserve_charged[o.rejected_step + 1 :] = False
    if state.sampling == "fixed":
        newly_tested = int(any(len(o.tested_steps) for o in outcomes))
    release = _edit_entry(ledger, state, ledger.n_chunks, newly_tested, fresh)
    if release is not None and state.sampling == "fixed":
        ledger.nonprivate_recorded = True
    return release
