"""Benchmark of ``DPLogisticRegression(solver="langevin")`` (issue 13).

Chourasia & Shah's noisy GD (Langevin dynamics) with deletion by continuing
the noisy GD on the remaining rows. Every number is measured in this run.

1. Time of one deletion certified at ``deletion_epsilon=0.1`` against a full
   retrain (a fresh Langevin fit on the remaining rows) at n = 1e5, d = 50,
   epsilon = 1, with the steps each runs (the public ``K_del`` and ``K_A``).
2. Test accuracy after ``--deletions`` sequential single-row deletions against
   fresh fits on the remaining rows (several seeds), and the privacy spent.

Run: ``PYTHONPATH=. python benchmarks/bench_langevin.py`` (a few minutes on 2
cores alone; ``--quick``: n = 1e4, 5 deletions; ``--deletions K`` and
``--seeds S`` override the defaults 100 and 3). Writes
``benchmarks/results/langevin[_quick].{txt,json}``.
"""

import json
import os
import pathlib
import sys
import time

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklearn_dpu import DPLogisticRegression

QUICK = "--quick" in sys.argv
N = 10_000 if QUICK else 100_000
D = 50


def _arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


DELETIONS = _arg("--deletions", 5 if QUICK else 100)
SEEDS = _arg("--seeds", 2 if QUICK else 3)
FEATURE_NORM = 10.0
OUT = pathlib.Path(__file__).parent / "results" / ("langevin_quick" if QUICK else "langevin")

lines: list[str] = []


def say(text: str) -> None:
    print(text, flush=True)
    lines.append(text)


def problem(seed=0):
    X, y = make_classification(
        n_samples=int(N / 0.8), n_features=D, n_informative=20, random_state=seed
    )
    X = StandardScaler().fit_transform(X)
    return train_test_split(X, y, train_size=N, random_state=seed)


def model(seed):
    return DPLogisticRegression(
        solver="langevin",
        epsilon=1.0,
        feature_norm=FEATURE_NORM,
        deletion_epsilon=0.1,
        random_state=seed,
    )


def main():
    X, X_test, y, y_test = problem()
    say(f"== DPLogisticRegression(solver='langevin'), n = {N}, d = {D}, epsilon = 1 ==")
    load = os.getloadavg()[0]
    say(f"(load average at start {load:.2f} on {os.cpu_count()} cores: timings are noisy above ~1)")
    started = time.perf_counter()
    clf = model(0).fit(X, y)
    t_fit = time.perf_counter() - started
    config = clf.unlearning_state_.chunks[0].config
    k_fit = config.run.steps
    say(
        f"fit: {t_fit:.2f} s, K_A = {k_fit} steps, kappa = {config.kappa:.1f}, "
        f"C_ = {clf.C_:.3g}, test acc {clf.score(X_test, y_test):.4f}"
    )
    started = time.perf_counter()
    clf.delete_samples([0])
    t_del = time.perf_counter() - started
    report = clf.deletion_log_[-1]
    say(
        f"one deletion at deletion_epsilon=0.1: {t_del:.2f} s, path {report.cost.action}, "
        f"K_del = {report.cost.gradient_steps} steps, certified eps_del = "
        f"{report.deletion_epsilon:.4g}, cost to the remaining rows (re-release eps) "
        f"{report.rerelease_epsilon:.4g}"
    )
    remaining = np.arange(1, N)
    started = time.perf_counter()
    model(1).fit(X[remaining], y[remaining])
    t_retrain = time.perf_counter() - started
    say(f"full retrain on the remaining rows: {t_retrain:.2f} s")
    say(
        f"deletion speed-up over the retrain: {t_retrain / t_del:.2f}x "
        f"(steps: {k_fit / report.cost.gradient_steps:.2f}x)"
    )

    say(f"\n== accuracy after {DELETIONS} sequential single-row deletions vs fresh fits ==")
    rng = np.random.default_rng(0)
    order = rng.permutation(N)[:DELETIONS]
    started = time.perf_counter()
    for i in order[1:]:
        clf.delete_samples([int(i)])
    t_seq = time.perf_counter() - started
    keep = np.setdiff1d(np.arange(N), order)
    acc_deleted = clf.score(X_test, y_test)
    fresh = [model(100 + s).fit(X[keep], y[keep]).score(X_test, y_test) for s in range(SEEDS)]
    actions = sorted({r.cost.action for r in clf.deletion_log_})
    say(
        f"after {DELETIONS} deletions ({t_seq:.1f} s, paths {actions}): test acc "
        f"{acc_deleted:.4f}; fresh fits on the remaining rows: "
        f"{np.mean(fresh):.4f} +- {np.std(fresh):.4f} over {SEEDS} seeds"
    )
    say(
        f"privacy spent after the deletions: epsilon {clf.privacy_spent_.epsilon:.3f} "
        f"(fit 1.0; every deletion's steps charged)"
    )
    results = dict(
        n=N,
        d=D,
        fit_s=t_fit,
        fit_steps=k_fit,
        kappa=config.kappa,
        deletion_s=t_del,
        deletion_steps=report.cost.gradient_steps,
        deletion_epsilon=report.deletion_epsilon,
        rerelease_epsilon=report.rerelease_epsilon,
        retrain_s=t_retrain,
        speedup=t_retrain / t_del,
        deletions=DELETIONS,
        sequential_s=t_seq,
        accuracy_after_deletions=acc_deleted,
        accuracy_fresh=fresh,
        privacy_spent=clf.privacy_spent_.epsilon,
        concurrent=True,
    )
    OUT.parent.mkdir(exist_ok=True)
    OUT.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    OUT.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
