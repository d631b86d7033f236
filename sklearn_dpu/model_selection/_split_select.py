"""``split_select``, the default method of PrivateGridSearch: its selection
mechanism (permute-and-flip or the generalized exponential mechanism, by the
candidates' public cost bounds), and its ledger entry.

References
----------
.. [1] M. E. Ullah, "Statistical Learning via Stochastic Optimization under
   Data Privacy Considerations", PhD thesis, Johns Hopkins University, 2024,
   Algorithm 4 and Theorem 14.
.. [2] R. McKenna and D. Sheldon, "Permute-and-flip: a new mechanism for
   differentially private selection", NeurIPS 2020, Theorem 1.
.. [3] S. Raskhodnikova and A. Smith, "Lipschitz extensions for node-private
   graph statistics and the generalized exponential mechanism", FOCS 2016.
"""

from ..privacy.ledger import Release
from ..privacy.mechanisms import GeneralizedExponentialMechanism, PermuteAndFlip
from ._scoring import check_scoring

__all__: list[str] = []

_TRAIN, _VALIDATION = 1, 2  # the search's two "chunks": disjoint halves of the data
_REFIT_STREAM = 3  # release_generator stream of the refit's seed (0: split, 1: selection)
_GEM_REFERENCE = (
    "Ullah, 'Statistical Learning via Stochastic Optimization under Data Privacy "
    "Considerations' (PhD thesis, JHU 2024), Alg. 4 / Thm 14, with the generalized "
    "exponential mechanism of Raskhodnikova & Smith (FOCS 2016) as stated in its Thm 34; "
    "erratum used: each candidate's sensitivity is the bound of its summed loss, not the "
    "thesis' Delta(D_j) meant for an averaged one"
)
_PF_REFERENCE = "permute-and-flip, McKenna & Sheldon 2020, Thm 1 (monotone utilities)"


def _selection(params: dict, candidates: list) -> PermuteAndFlip | GeneralizedExponentialMechanism:
    """The selection mechanism, from the candidates' public per-row cost bounds
    under the search's scoring (see :mod:`._scoring` for the derivation)."""
    scorer = check_scoring(params.get("scoring"), params.get("score_bounds"), params["estimator"])
    bounds = {scorer.sensitivity(candidate) for candidate in candidates}
    if len(bounds) == 1 and None not in bounds:
        # Adding or removing a validation row moves every summed loss the
        # same way by at most the bound: monotone utilities.
        return PermuteAndFlip(params["selection_epsilon"], bounds.pop(), monotonic=True)
    return GeneralizedExponentialMechanism(params["selection_epsilon"], params["beta"])


def _selection_release(selection) -> Release:
    return Release.of(
        selection,
        "private selection of a candidate by its clipped validation loss",
        (_VALIDATION, _VALIDATION),
        f"{_PF_REFERENCE}, or {_GEM_REFERENCE}",
    )
