"""Per-candidate progress of :class:`~sklearn_dpu.model_selection.PrivateGridSearch`.

With ``verbose >= 2``, once the candidates are fitted (possibly in parallel),
one line per candidate: its index, its parameter values (public: the grid)
and the epsilon the search's releases so far compose to on the training
part, computed from the candidates' published ledgers (the records the
search's own ledger holds). Nothing else about a candidate (its score, its
iteration count) is printed: the scores are released only through the
private selection.
"""

from collections.abc import Sequence
from typing import Any

from .._progress import print_progress
from ..privacy.ledger import Release, privacy_spent

__all__ = ["print_candidates"]


def print_candidates(
    search: Any, points: Sequence[dict], made: Sequence[Release], sizes: Sequence[int]
) -> None:
    """One line per fitted candidate of ``search`` (``verbose >= 2``).

    ``made`` holds the candidates' releases in candidate order, ``sizes[k]``
    of them candidate ``k``'s.
    """
    n_candidates = len(sizes)
    end = 0
    for k in range(n_candidates):
        end += sizes[k]
        epsilon = privacy_spent(made[:end], search.delta).epsilon
        print_progress(
            search,
            f"fit: candidate {k + 1}/{n_candidates} {points[k]} fitted; epsilon of "
            f"the candidates so far: {epsilon:.6g}",
            level=2,
        )
