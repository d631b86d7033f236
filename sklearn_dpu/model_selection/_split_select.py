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

import dataclasses
from typing import Any

import numpy as np
from sklearn.utils.parallel import Parallel, delayed

from ..privacy.ledger import Release
from ..privacy.mechanisms import GeneralizedExponentialMechanism, PermuteAndFlip
from ..privacy.random import release_generator
from ._scoring import check_scoring
from ._search_progress import print_candidates
from ._search_results import Split, cv_results, fit_candidate, on_chunks
from ._search_results import candidates as candidates_of

__all__ = ["search"]

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


def search(
    est: Any,
    candidates: list,
    selection: PermuteAndFlip | GeneralizedExponentialMechanism,
    split: Split,
    sample_id: Any,
    points: list[dict],
    scorer: Any,
) -> list[Release]:
    """Fit every candidate, select one privately, refit it if asked; set the
    search ``est``'s fitted attributes and return the exact releases."""
    fitted = Parallel(n_jobs=est.n_jobs)(
        delayed(fit_candidate)(c, split.X_train, split.y_train, split.train_ids, split)
        for c in candidates
    )
    costs = [scorer.cost(candidate, split.X_val, split.y_val) for candidate in fitted]
    select_rng = release_generator(est.random_state, 1)
    if isinstance(selection, PermuteAndFlip):
        best = selection.select(-np.asarray(costs), select_rng)
    else:
        bounds = [scorer.sensitivity(candidate) for candidate in fitted]
        best = selection.select(costs, bounds, select_rng)

    made = [
        dataclasses.replace(Release.from_dict(entry), chunks=(_TRAIN, _TRAIN))
        for candidate in fitted
        for entry in candidate.privacy_ledger_
    ]
    if est.verbose and int(est.verbose) >= 2:
        print_candidates(est, points, made, [len(c.privacy_ledger_) for c in fitted])
    made.append(_selection_release(selection))
    est._n_fit_releases = len(made)  # what the selection's group privacy covers

    est.cv_results_ = cv_results(points, fitted)
    est.best_index_ = int(best)
    est.best_params_ = points[best]
    est.best_estimator_ = fitted[best]
    est._validation_ids = set(split.validation_ids.tolist())
    est._model_chunks = (_TRAIN, _TRAIN)  # the parts best_estimator_ was fitted on
    if est.refit:
        # All the rows, both parts: one more release, planned and charged.
        seed = None
        if est.random_state is not None:
            seed = int(release_generator(est.random_state, _REFIT_STREAM).integers(2**31 - 1))
        X, y, ids = split.full
        chosen = candidates_of(est.get_params(deep=False), [seed], [points[best]])[0]
        try:
            refit = fit_candidate(chosen, X, y, ids, split)
        except Exception as error:
            # which point is refitted follows the noisy selection: an error
            # here tells it, so the releases so far are charged
            error.releases_made = list(made)
            raise
        made.extend(on_chunks([Release.from_dict(e) for e in refit.privacy_ledger_], 1, 2))
        est.best_estimator_ = refit
        est._validation_ids = set()  # every row is in the refit model
        est._model_chunks = (_TRAIN, _VALIDATION)
    if "budget" in est.best_estimator_.get_params(deep=False):
        est.best_estimator_.set_params(budget=est._inner_budget())
    est.n_candidates_ = len(fitted)
    est.n_deleted_ = 0
    est._sample_id_kind = sample_id.kind
    est.deletion_log_ = []
    if hasattr(est.best_estimator_, "feature_names_in_"):
        est.feature_names_in_ = est.best_estimator_.feature_names_in_
    return made
