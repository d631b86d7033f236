"""Exact unlearning, statistically: edit-then-state equals fit-on-edited-data.

Over many seeds, the whole stored state after (fit, edits) — model, stored
noisy gradients and the mini-batch membership of every sample in every step
— must have the law of a fresh fit on the edited data (M. E. Ullah,
"Statistical learning via stochastic optimization under data privacy
considerations", PhD thesis, Johns Hopkins University, 2024, Lemma 29).
Each test keeps its negative controls, which the very same comparison must
reject: the acceptance ratio printed in the thesis's Alg. 13, step 12 and
Alg. 27, step 4 (old over new), and a run that stores the raw noise instead
of the noisy gradient (later edits are then not exact).

With ``epsilon=inf`` sizes stay inside one size class (``size_bucket``), so
the hyper-parameters of the edited run and of the fresh fit are the same;
one case uses a noised count, which the edits shift (and which may cross a
class and refit), and compares it too.
"""

import numpy as np
import pytest

from sklearn_dpu.linear_model._unlearnable_sgd import size_bucket

from ._sgd_coupling_controls import use_variant
from ._stats import n_trials, same_distribution_pvalue, same_indicator_frequencies_pvalue
from ._unlearnable_sgd_fast import UnaccountedSGDClassifier as UnlearnableSGDClassifier

pytestmark = pytest.mark.statistical

ALPHA = 1e-3  # exact variants must pass at this level, broken ones fail below it
N = 48  # sizes 46..49 share a size class
assert len({size_bucket(k) for k in range(46, 50)}) == 1

_rng = np.random.default_rng(1234)
X_ALL = _rng.normal(size=(N + 1, 2))
Y_ALL = np.arange(N + 1) % 2
# Rows with large gradients make the coupling tests bite.
X_ALL[:3] = [[2.0, 2.0], [-2.0, 1.5], [1.8, -1.9]]
Y_ALL[:3] = [0, 1, 1]
IDS = np.arange(N + 1)

BASE = dict(
    epsilon=np.inf,  # exact count: the size class stays fixed (cases below add the noised count)
    max_iter=4,
    batch_size=24,
    noise_multiplier=1.0,
    learning_rate=0.5,
    alpha=0.0,
    feature_norm=2.0,
)


def _state_features(est, ids):
    """Continuous part (model, stored noisy gradients, batch sizes) and the
    indicators "sample i in the batch of step t", keyed by sample id."""
    st = est.unlearning_state_
    members = st.registry.ids[st.batch_slots]
    T = st.n_steps
    ind = np.zeros((T, len(ids)))
    col = {i: k for k, i in enumerate(ids.tolist())}
    for t in range(T):
        for i in members[st.batch_ptr[t] : st.batch_ptr[t + 1]].tolist():
            ind[t, col[i]] = 1.0
    cont = np.concatenate(
        [st.model().ravel(), st.noisy.ravel(), np.diff(st.batch_ptr), [est.edit_ledger_.n_noisy]]
    )
    return cont, ind.ravel()


def _compare(edited, reference):
    ca, ia = map(np.array, zip(*edited, strict=True))
    cb, ib = map(np.array, zip(*reference, strict=True))
    return same_distribution_pvalue(ca, cb), same_indicator_frequencies_pvalue(ia, ib)


def _reference(final_rows, params, trials):
    final_ids = IDS[final_rows]
    return [
        _state_features(
            UnlearnableSGDClassifier(random_state=10**6 + seed, **params).fit(
                X_ALL[final_rows], Y_ALL[final_rows], sample_id=final_ids
            ),
            final_ids,
        )
        for seed in range(trials)
    ]


def _edited(edit, final_rows, params, trials, variant):
    out = []
    for seed in range(trials):
        est = UnlearnableSGDClassifier(random_state=seed, **params)
        edit(est, variant)
        out.append(_state_features(est, IDS[final_rows]))
    return out


def _fit(est, rows, variant):
    est.fit(X_ALL[rows], Y_ALL[rows], sample_id=IDS[rows])
    use_variant(est, variant)


ROWS = np.arange(N)  # ids 0..47; id 48 is the row to insert


def _delete_two(est, variant):
    _fit(est, ROWS, variant)
    est.delete_samples([0, 1])  # one coupled edit (Poisson batches)


def _sequence(est, variant):
    # delete, insert, then delete two rows in one call (48 -> 47 -> 48 -> 46)
    _fit(est, ROWS, variant)
    est.delete_samples([0])
    est.partial_fit(X_ALL[N:], Y_ALL[N:], sample_id=[N])
    est.delete_samples([1, 2])


CASES = {
    # case: (parameters, edits, rows of the fresh fit, negative controls)
    "poisson-nesterov-sequence": (
        dict(BASE),
        _sequence,
        np.arange(3, N + 1),
        ["inverted_ratio", "raw_noise"],
    ),
    "fixed-sgd-sequence": (
        dict(BASE, solver="sgd", batch_sampling="fixed"),
        _sequence,
        np.arange(3, N + 1),
        ["inverted_ratio", "raw_noise"],
    ),
    # A noised count (sigma ~ 1.1 rows at this epsilon) near the class edges
    # 45.25 and 49.35: some edits cross a class and refit, some do not; the
    # count shifts with every edit, so the state still has a fresh fit's law.
    # Negative control: a count that the edits do not shift.
    "poisson-nesterov-noised-count-sequence": (
        dict(BASE, epsilon=80.0),
        _sequence,
        np.arange(3, N + 1),
        ["stale_count"],  # the coupling controls run in the cases above
    ),
    "poisson-sgd-batch-delete": (
        dict(BASE, solver="sgd"),
        _delete_two,
        np.arange(2, N),
        ["inverted_ratio"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_edits_are_exact_and_broken_couplings_are_detected(case):
    params, edit, final_rows, controls = CASES[case]
    trials = n_trials(ci=600, full=5000)
    reference = _reference(final_rows, params, trials)

    p_continuous, p_batches = _compare(
        _edited(edit, final_rows, params, trials, "exact"), reference
    )
    print(f"{case} exact: p = {p_continuous:.3g} (state), {p_batches:.3g} (batches)")
    assert p_continuous > ALPHA, p_continuous
    assert p_batches > ALPHA, p_batches

    for variant in controls:
        p_continuous, p_batches = _compare(
            _edited(edit, final_rows, params, trials, variant), reference
        )
        print(f"{case} {variant}: p = {p_continuous:.3g} (state), {p_batches:.3g}")
        assert min(p_continuous, p_batches) < ALPHA, (variant, p_continuous, p_batches)
