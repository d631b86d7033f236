"""DPLogisticRegression's certified fine-tune deletion (issue 13).

1. Time of one deletion certified at ``deletion_epsilon=0.1`` against a full
   retrain (a fit on the remaining rows), at n = 1e5, d = 50, epsilon = 1,
   ``solver='output'`` (the solver with a warm-startable noised minimizer;
   ``'auto'`` picks noisy GD at this shape, whose deletions retrain). Goal:
   at least 10x faster.
2. Test accuracy after 100 sequential single deletions against fresh fits on
   the remaining rows (several seeds: equal within the noise).

Every ratio is measured in this run; work counts come from the deletion
reports (predicted and realized row gradients, realized gradient passes).

Run: ``PYTHONPATH=. python benchmarks/bench_d2d.py [--quick]`` (``--quick``:
n = 2e4, d = 20, 20 deletions; a minute).
"""

import argparse
import json
import math
import os
import platform
import time

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklearn_dpu import DPLogisticRegression

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def problem(n, d, seed=0):
    X, y = make_classification(
        n_samples=n + n // 5, n_features=d, n_informative=d // 2 + 1, random_state=seed
    )
    X = StandardScaler().fit_transform(X)
    return train_test_split(X, y, test_size=n // 5, random_state=seed)


def make(d, seed, **kw):
    return DPLogisticRegression(
        solver="output",
        epsilon=1.0,
        feature_norm=1.2 * math.sqrt(d),
        deletion_epsilon=0.1,
        random_state=seed,
        **kw,
    )


def deletion_vs_retrain(X, y, d, repeats):
    est = make(d, 0).fit(X, y)
    times, reports = [], []
    for i in range(repeats):
        started = time.perf_counter()
        est.delete_samples([i])
        times.append(time.perf_counter() - started)
        reports.append(est.deletion_log_[-1])
    keep = np.arange(repeats, len(X))
    retrain = []
    for seed in range(repeats):
        started = time.perf_counter()
        make(d, seed).fit(X[keep], y[keep])
        retrain.append(time.perf_counter() - started)
    last = reports[-1]
    return {
        "deletion_s": min(times),
        "deletion_s_all": times,
        "retrain_s": min(retrain),
        "retrain_s_all": retrain,
        "speedup": min(retrain) / min(times),
        "path": last.cost["action"],
        "deletion_epsilon": last.deletion_epsilon,
        "remaining_epsilon": last.remaining_epsilon,
        "predicted_row_gradients": last.cost["predicted_gradient_evaluations"],
        "realized_row_gradients": last.cost["gradient_evaluations"],
        "realized_gradient_passes": last.cost.get("gradient_steps"),
        "retrain_predicted_row_gradients": last.retrain_cost["gradient_evaluations"],
        "paths": sorted({r.cost["action"] for r in reports}),
    }


def accuracy_after_deletions(X, y, Xt, yt, d, n_deletions, seeds):
    est = make(d, 0).fit(X, y)
    paths = []
    for i in range(n_deletions):
        est.delete_samples([i])
        paths.append(est.deletion_log_[-1].cost["action"])
    keep = np.arange(n_deletions, len(X))
    fresh = [make(d, s).fit(X[keep], y[keep]).score(Xt, yt) for s in seeds]
    deleted = [est.score(Xt, yt)]
    for s in seeds[1:]:
        other = make(d, s).fit(X, y)
        for i in range(n_deletions):
            other.delete_samples([i])
        deleted.append(other.score(Xt, yt))
    return {
        "n_deletions": n_deletions,
        "paths": sorted(set(paths)),
        "after_deletions_acc": deleted,
        "fresh_fit_acc": fresh,
        "after_mean": float(np.mean(deleted)),
        "fresh_mean": float(np.mean(fresh)),
        "fresh_std": float(np.std(fresh, ddof=1)),
        "after_std": float(np.std(deleted, ddof=1)),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--timing-only", action="store_true", help="skip the accuracy part")
    parser.add_argument("--tag", default="", help="suffix of the results file")
    args = parser.parse_args()
    n, d, n_del, seeds = (
        (20_000, 20, 20, [0, 1, 2]) if args.quick else (100_000, 50, 100, [0, 1, 2])
    )
    X, Xt, y, yt = problem(n, d)
    out = {
        "shape": {"n": n, "d": d, "epsilon": 1.0, "deletion_epsilon": 0.1},
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
    }
    print(f"== 1. one deletion at deletion_epsilon=0.1 vs a retrain, n={n}, d={d} ==")
    timing = deletion_vs_retrain(X, y, d, repeats=3)
    out["deletion_vs_retrain"] = timing
    print(
        f"deletion {timing['deletion_s']:.3f} s ({timing['path']}, certified eps_del "
        f"{timing['deletion_epsilon']:.4g}, remaining rows eps {timing['remaining_epsilon']:.4g}), "
        f"retrain {timing['retrain_s']:.3f} s -> {timing['speedup']:.1f}x faster; "
        f"row gradients predicted {timing['predicted_row_gradients']:.3g}, realized "
        f"{timing['realized_row_gradients']:.3g} in {timing['realized_gradient_passes']} passes "
        f"(retrain predicted {timing['retrain_predicted_row_gradients']:.3g})"
    )
    if not args.timing_only:
        print(f"\n== 2. test accuracy after {n_del} sequential deletions vs fresh fits ==")
        acc = accuracy_after_deletions(X, y, Xt, yt, d, n_del, seeds)
        out["accuracy"] = acc
        print(
            f"after deletions {acc['after_mean']:.4f} +- {acc['after_std']:.4f} (paths "
            f"{acc['paths']}), fresh fits {acc['fresh_mean']:.4f} +- {acc['fresh_std']:.4f}"
        )
    name = ("d2d_quick" if args.quick else "d2d") + args.tag
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
        json.dump(out, f, indent=2, default=float)
    print(f"saved benchmarks/results/{name}.json")


if __name__ == "__main__":
    main()
