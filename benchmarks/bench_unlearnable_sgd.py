"""UnlearnableSGDClassifier: fit speed, deletion cost, accuracy and memory.

Questions (issue 4), each answered by ratios measured in this run:

1. Fit time against scikit-learn's ``SGDClassifier`` for the same number of
   gradient evaluations, at n = 10^5, d = 50 (goal: at most 1.5x, issue 11;
   across d: ``bench_solver_speed.py``).
2. Mean cost of one deletion against a full refit, at the default recompute
   rate (goal: at least 50x cheaper).
3. After 1000 sequential deletions, test accuracy equal (within the spread of
   fresh fits) to fresh fits on the remaining data, and the stored state does
   not grow.

Run: ``PYTHONPATH=. python benchmarks/bench_unlearnable_sgd.py [--quick]``.
"""

import argparse
import pickle
import platform
import time

import numpy as np
import sklearn
from _timing import timed_calls
from sklearn.datasets import make_classification
from sklearn.linear_model import SGDClassifier
from sklearn.preprocessing import StandardScaler

from sklearn_dpu import UnlearnableSGDClassifier
from sklearn_dpu.linear_model import _sgd_base


def _data(n_train, n_test, d, seed=0):
    X, y = make_classification(
        n_train + n_test, d, n_informative=d // 2, class_sep=1.0, random_state=seed
    )
    X = StandardScaler().fit_transform(X)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def _median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def fit_speed(X, y, feature_norm, repeats):
    n = len(X)
    print("\n1. Fit time for the same number of gradient evaluations")
    print(f"   n = {n}, d = {X.shape[1]}; one epoch = {n} per-sample gradients")
    sk = _median_time(
        lambda: SGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0).fit(X, y),
        repeats,
    )
    rows = []
    for solver, T in [("nesterov", 50), ("sgd", 100)]:
        m = n // T  # expected T * m = n evaluations: one epoch
        est = UnlearnableSGDClassifier(
            solver=solver,
            max_iter=T,
            batch_size=m,
            feature_norm=feature_norm,
            random_state=0,
        )
        ours = _median_time(lambda est=est: est.fit(X, y), repeats)
        evals = int(est.unlearning_state_.batch_ptr[-1])
        rows.append((f"{solver}, T={T}, m={m}", ours, evals))
    default = UnlearnableSGDClassifier(feature_norm=feature_norm, random_state=0)
    ours_default = _median_time(lambda: default.fit(X, y), repeats)
    print(f"   SGDClassifier(max_iter=1, tol=None): {sk * 1e3:8.1f} ms  ({n} evaluations)")
    for label, seconds, evals in rows:
        print(
            f"   UnlearnableSGD {label:22s}: {seconds * 1e3:8.1f} ms  "
            f"({evals} evaluations)"
            f"  ratio {seconds / sk:.2f}x"
        )
    evals = int(default.unlearning_state_.batch_ptr[-1])
    print(
        f"   UnlearnableSGD defaults (T={default.n_iter_}, m={default.batch_size_:.0f})"
        f": {ours_default * 1e3:8.1f} ms  ({evals} evaluations)"
    )
    return rows, sk


def deletions(X, y, X_test, y_test, feature_norm, n_deletions, n_fresh):
    print(f"\n2. {n_deletions} sequential deletions at the defaults")
    est = UnlearnableSGDClassifier(feature_norm=feature_norm, random_state=0)
    refit = _median_time(lambda: est.fit(X, y), 5)
    start = time.perf_counter()
    spent = est.privacy_spent_  # PLD accountant, computed once on first access
    accounting = time.perf_counter() - start
    per_model = est.privacy_per_model_
    sizes_before = est.unlearning_state_.nbytes()
    pickle_before = len(pickle.dumps(est))
    rng = np.random.default_rng(1)
    order = rng.permutation(len(X))[:n_deletions]
    times, accounted = np.empty(n_deletions), np.zeros(n_deletions)
    grew = np.zeros(n_deletions, dtype=bool)  # the deletion added a ledger entry
    # The time each deletion spends composing its ledger (privacy_spent_,
    # which its report states), by wrapping the composition (timing only).
    spent_in = []
    with timed_calls(_sgd_base, "privacy_spent", spent_in):
        for k, sample_id in enumerate(order.tolist()):
            entries, spent_in[:] = len(est.privacy_ledger_), []
            start = time.perf_counter()
            est.delete_samples([sample_id])
            times[k] = time.perf_counter() - start
            accounted[k], grew[k] = sum(spent_in), len(est.privacy_ledger_) > entries
    counters = est.edit_ledger_.counters
    recomputed = np.array([r.cost["recomputed_steps"] > 0 for r in est.deletion_log_])
    refits = sum("refit" in r.reason for r in est.deletion_log_)
    print(
        f"   recompute bound {est.recompute_bound_:.3f} (target 0.05); measured rate "
        f"{recomputed.mean():.4f} ({recomputed.sum()} of {n_deletions}); "
        f"size-class refits: {refits}"
    )
    print(
        f"   refit (a fit on {len(X)} rows, median of 5): {refit * 1e3:.1f} ms; "
        f"T = {est.n_iter_}, m = {est.batch_size_:.0f}, noise multiplier "
        f"{est.noise_multiplier_:.2f}"
    )
    print(
        f"   deletion: mean {times.mean() * 1e3:.3f} ms, median "
        f"{np.median(times) * 1e3:.3f} ms, max {times.max() * 1e3:.1f} ms; mean with "
        f"a recompute {times[recomputed].mean() * 1e3:.2f} ms, without "
        f"{times[~recomputed].mean() * 1e3:.3f} ms"
    )
    if grew.any() and not grew.all():
        print(
            f"   {grew.sum()} deletions added a ledger entry (a step tested for the first "
            f"time, or recomputed): mean {times[grew].mean() * 1e3:.1f} ms, of which composing"
            f" the ledger (privacy_spent_, stated by the report) "
            f"{accounted[grew].mean() * 1e3:.1f} ms; the other {(~grew).sum()}: mean "
            f"{times[~grew].mean() * 1e3:.3f} ms"
        )
    print(
        f"   => refit / mean deletion = {refit / times.mean():.0f}x "
        f"(median: {refit / np.median(times):.0f}x); tested steps "
        f"{counters['tested_steps']}, recomputed steps {counters['recomputed_steps']} "
        f"of {n_deletions * est.n_iter_} for refits"
    )
    print(
        f"   accounting on first access (not in the deletion times): "
        f"{accounting:.2f} s;"
        f" privacy_spent_ = {spent.epsilon:.4f} after fit, "
        f"{est.privacy_spent_.epsilon:.4f} after the deletions "
        f"(per model {per_model.epsilon:.4f}, delta = {spent.delta:g})"
    )

    print("\n3. Accuracy and memory after the deletions")
    keep = np.setdiff1d(np.arange(len(X)), order)
    edited = est.score(X_test, y_test)
    fresh = np.array(
        [
            UnlearnableSGDClassifier(feature_norm=feature_norm, random_state=100 + s)
            .fit(X[keep], y[keep])
            .score(X_test, y_test)
            for s in range(n_fresh)
        ]
    )
    z = (edited - fresh.mean()) / fresh.std(ddof=1)
    print(
        f"   test accuracy: edited model {edited:.4f}; {n_fresh} fresh fits on the "
        f"remaining rows {fresh.mean():.4f} +- {fresh.std(ddof=1):.4f} (z = {z:+.2f})"
    )
    sizes_after = est.unlearning_state_.nbytes()
    print(
        f"   stored run: {sizes_before['run'] / 1e3:.1f} kB -> "
        f"{sizes_after['run'] / 1e3:.1f} kB; stored data "
        f"{sizes_before['data'] / 1e6:.2f} MB -> {sizes_after['data'] / 1e6:.2f} MB; "
        f"pickle {pickle_before / 1e6:.2f} MB -> {len(pickle.dumps(est)) / 1e6:.2f} MB"
    )
    return refit / times.mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="n = 2e4, 200 deletions")
    args = parser.parse_args()
    n, deletions_count, repeats = (20_000, 200, 3) if args.quick else (100_000, 1000, 5)
    d = 50
    X, y, X_test, y_test = _data(n, 20_000, d)
    feature_norm = 1.5 * np.sqrt(d)  # public: standardized rows have norm ~ sqrt(d)
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, scikit-learn "
        f"{sklearn.__version__}, {platform.machine()}"
    )
    fit_speed(X, y, feature_norm, repeats)
    deletions(X, y, X_test, y_test, feature_norm, deletions_count, n_fresh=20)


if __name__ == "__main__":
    main()
