"""Progress output (``verbose=``) that publishes nothing new.

scikit-learn's estimators print iteration counters and losses when
``verbose > 0``. Here a printed loss, gradient norm, record count or timing
would be a release of the private data that no one charged, so the lines
printed are built from what is already public:

* the estimator's class and the call (``fit``, ``partial_fit``,
  ``delete_samples``, a search candidate's index);
* the records just appended to ``privacy_ledger_`` (mechanism in words,
  chunks; their iteration counts are public schedules computed from
  parameters and released counts);
* ``privacy_spent_``, the composed (epsilon, delta) of the published ledger;
* public parameters (a candidate's parameter values).

Inside a solver (``verbose >= 2``), :func:`step_ticker` prints the step
number of a run whose length is a public schedule, and the epsilon that the
steps released so far compose to, computed from the *plan* (the ledger
before the call and the call's planned releases with the run cut after the
steps done). When the call's releases are not planned exactly (their
parameters follow a count noised during the call), it is the ledger before
the call composed with the steps done, from the steps' mechanism; the
call's one-off releases (a count, a Gram) join in the ledger line printed
when the call ends. Never an iterate, a loss, a gradient norm or a convergence
flag; solvers that stop when a data-dependent criterion is met (the
non-private minimizers of output and objective perturbation) print no
iteration at all, since when they stop is a function of the data. Nothing
depends on wall time.

With ``verbose=2`` a run of ``T`` steps prints about ten lines (every
``ceil(T / 10)`` steps and the last), with ``verbose >= 3`` every step, as
scikit-learn's ``verbose`` levels grow more talkative. With ``verbose < 2``
no reporter is active: a solver's per-step cost is one ``is None`` test.
"""

import contextlib
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from dp_accounting import dp_event

__all__ = [
    "iteration_progress",
    "print_phase",
    "print_progress",
    "print_releases",
    "step_ticker",
]


def _level(estimator: Any) -> int:
    verbose = getattr(estimator, "verbose", 0)
    return int(verbose) if verbose else 0


def print_progress(estimator: Any, message: str, level: int = 1) -> None:
    """Print ``[ClassName] message`` when ``estimator.verbose >= level``.

    ``message`` must be built from public values only (see the module
    docstring); flushed at once, as scikit-learn's verbose output is.
    """
    if _level(estimator) >= level:
        print(f"[{type(estimator).__name__}] {message}", file=sys.stdout, flush=True)


def print_releases(estimator: Any, what: str, records: Iterable[dict]) -> None:
    """After ``what`` appended ``records`` to the ledger: one line per release
    (``verbose >= 2``), then the epsilon spent so far (``verbose >= 1``)."""
    if not _level(estimator):
        return
    records = list(records)
    for k, record in enumerate(records, 1):
        first, last = record.get("chunks", (1, 1))
        print_progress(
            estimator,
            f"{what}: release {k}/{len(records)} on chunks {first}-{last}: "
            f"{record.get('mechanism', '?')}",
            level=2,
        )
    spent = estimator.privacy_spent_
    n_iter = getattr(estimator, "n_iter_", None)
    steps = "" if n_iter is None else f", n_iter_={int(n_iter)}"
    print_progress(
        estimator,
        f"{what}: {len(records)} release(s){steps}; privacy spent so far: "
        f"epsilon={spent.epsilon:.6g}, delta={spent.delta:.3g}",
    )


@dataclass(frozen=True)
class _Call:
    """What a running call may print from: all public (plan and ledger)."""

    estimator: Any
    what: str
    before: tuple  # ledger records before the call (dicts)
    planned: tuple  # the call's planned Release objects (empty if not exact)


_ACTIVE: ContextVar[_Call | None] = ContextVar("sklearn_dpu_progress", default=None)


@contextlib.contextmanager
def iteration_progress(
    estimator: Any, what: str, before: Sequence[dict], planned: Sequence[Any]
) -> Iterator[None]:
    """Make ``estimator``'s call ``what`` the one solvers report steps of.

    Active only when ``estimator.verbose >= 2``. ``before`` is the ledger the
    call starts from, ``planned`` its releases planned before the data were
    read (empty when the plan is not exact).
    """
    active = _level(estimator) >= 2
    # A quiet estimator fitted inside a verbose one's call (a search's
    # candidates) masks the outer call: its steps are not the outer call's.
    token = _ACTIVE.set(_Call(estimator, what, tuple(before), tuple(planned)) if active else None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _cut(event: dp_event.DpEvent, whole: dp_event.DpEvent, part: dp_event.DpEvent, found: list):
    """``event`` with its first sub-event equal to ``whole`` replaced by ``part``."""
    if not found and event == whole:
        found.append(True)
        return part
    if isinstance(event, dp_event.ComposedDpEvent) and not found:
        return dp_event.ComposedDpEvent([_cut(e, whole, part, found) for e in event.events])
    return event


class _StepTicker:
    """Prints ``step t/T`` and the epsilon the plan says ``t`` steps spent."""

    def __init__(self, call: _Call, total: int, label: str, steps: Any):
        self.call, self.total, self.label, self.steps = call, int(total), label, steps
        level = _level(call.estimator)
        self._checkpoints = max(1, math.ceil(self.total / 10))
        self.every = 1 if level >= 3 else self._checkpoints

    def spent(self, done: int) -> tuple[float, str]:
        from .privacy.ledger import Release, privacy_spent  # noqa: PLC0415 (cycle)

        call, releases = self.call, [*self.call.before]
        how = "planned"
        cut = False
        for release in call.planned:
            if self.steps is not None and not cut:
                found: list = []
                part = dp_event.SelfComposedDpEvent(self.steps.dp_event.event, int(done))
                event = _cut(release.event, self.steps.dp_event, part, found)
                if found:
                    cut, how = True, "composed so far"
                    release = Release(release.mechanism, event, release.chunks, release.reference)
            releases.append(release)
        if not cut and self.steps is not None:
            # Not planned as an exact event (its parameters follow a noised
            # count drawn by the call): the steps done so far, from their
            # mechanism, on top of the ledger before the call. The call's
            # one-off releases (counts, Gram) join in the ledger line after it.
            last = max([1, *(int(r["chunks"][1]) for r in call.before)])
            part = dp_event.SelfComposedDpEvent(self.steps.dp_event.event, int(done))
            releases.append(Release("steps so far", part, (1, last), "plan"))
            how = "of the steps so far"
        elif not call.planned:
            how = "before this call (the run is charged as a whole when it ends)"
        delta = call.estimator.delta
        return privacy_spent(releases, delta).epsilon, how

    def __call__(self, t: int) -> None:
        done = t + 1
        checkpoint = done % self._checkpoints == 0 or done == self.total
        if done % self.every and not checkpoint:
            return
        line = f"{self.call.what}: {self.label} step {done}/{self.total}"
        if checkpoint:
            # A composition of the whole ledger (PLD with 'auto' bounds: ~0.1 s)
            # at about ten steps per run, not at every step verbose=3 prints.
            epsilon, how = self.spent(done)
            line += f"; epsilon {how}: {epsilon:.6g}"
        print_progress(self.call.estimator, line, level=2)


def step_ticker(total: int, label: str, steps: Any = None) -> Callable[[int], None] | None:
    """A per-step reporter for a solver's loop, or None when nothing is printed.

    Call it with the 0-based index of each step just done. ``total`` must be
    the run's public length (a schedule from parameters and released counts),
    never a count that depends on the data. ``steps`` is the run's mechanism
    (a :class:`~sklearn_dpu.privacy.mechanisms.GaussianSteps` or any object
    whose ``dp_event`` is a ``SelfComposedDpEvent`` of one step), whose event in
    the planned releases is cut after the steps done to give the epsilon
    composed so far; without it (a run charged as a whole, e.g. disjoint
    blocks)
    the epsilon printed is the call's whole planned charge (or the ledger
    before the call when the charge is only known at its end).
    """
    call = _ACTIVE.get()
    if call is None or total <= 0:
        return None
    return _StepTicker(call, total, label, steps)


def print_phase(message: str) -> None:
    """A line from inside a running call at ``verbose >= 2`` (public ``message``)."""
    call = _ACTIVE.get()
    if call is not None:
        print_progress(call.estimator, f"{call.what}: {message}", level=2)
