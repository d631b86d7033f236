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

Nothing is printed from inside a solver, where iterates and losses live, and
nothing depends on wall time.
"""

import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["print_progress", "print_releases"]


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
