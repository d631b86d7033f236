"""Does a deletion's bookkeeping grow with the deletions before it?

Every deletion appends its re-release to ``privacy_ledger_``, accounts the
ledger again (its report's ``remaining_epsilon``, the budget increment) and,
with a shared :class:`~sklearn_dpu.privacy.PrivacyBudget`, verifies the
budget's hash chain and composes its charges. At a small ``d`` the model's
own update costs well under a millisecond, so what a deletion costs after
``K`` earlier ones shows that bookkeeping. Prints, for each estimator with
and without a budget, the median time of the first and of the last
``--window`` deletions of ``K`` (one row each, back to back) and their ratio
(1 when nothing grows); ``--baseline MODULE`` times an older copy of the
package in the same run (importable as ``MODULE``, e.g. ``git archive`` of
main extracted as ``sklearn_dpu_main``). Ratios from one run, never timed
assertions; on a busy machine the medians are noisy.

Usage: ``python benchmarks/bench_deletion_bookkeeping.py [--deletions K]
[--window W] [--baseline MODULE] [--out FILE] [--quick]`` (``--quick``: 200
deletions).
"""

import argparse
import importlib
import os
import pathlib
import tempfile
import time
import warnings

import numpy as np

RESULTS = pathlib.Path(__file__).parent / "results"


def _estimators(package, d):
    linear_model = importlib.import_module(f"{package}.linear_model")
    bound = float(np.sqrt(d))
    return {
        "DPLinearRegression": lambda budget: linear_model.DPLinearRegression(
            feature_norm=bound, target_bound=4.0, random_state=0, budget=budget
        ),
        "DPLogisticRegression": lambda budget: linear_model.DPLogisticRegression(
            feature_norm=bound, random_state=0, budget=budget
        ),
        "UnlearnableSGDClassifier": lambda budget: linear_model.UnlearnableSGDClassifier(
            feature_norm=bound, random_state=0, budget=budget
        ),
    }


def _run(package, name, with_budget, deletions, window, d=5):
    privacy = importlib.import_module(f"{package}.privacy")
    rng = np.random.default_rng(0)
    n = max(5_000, 2 * deletions)
    X = rng.uniform(-1, 1, size=(n, d))
    y = X @ rng.normal(size=d) / np.sqrt(d)
    if name != "DPLinearRegression":
        y = (y > 0).astype(int)
    budget = None
    if with_budget:
        path = os.path.join(tempfile.mkdtemp(), "budget.sqlite")
        budget = privacy.PrivacyBudget(1e9, 1e-5, path)
    est = _estimators(package, d)[name](budget).fit(X, y)
    times = np.empty(deletions)
    for k in range(deletions):
        started = time.perf_counter()
        est.delete_samples([k])
        times[k] = time.perf_counter() - started
    first, last = np.median(times[:window]), np.median(times[-window:])
    return first, last, len(est.privacy_ledger_)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deletions", type=int, default=2000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--baseline", default=None, help="module name of an older copy")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    parser.add_argument("--quick", action="store_true", help="200 deletions")
    args = parser.parse_args()
    if args.quick:
        args.deletions = min(args.deletions, 200)
    warnings.simplefilter("ignore")
    packages = {"this": "sklearn_dpu"}
    if args.baseline:
        packages["baseline"] = args.baseline
    lines = [
        f"one-row deletions, back to back, d = 5: median of the first and the last "
        f"{args.window} of {args.deletions}",
        f"{'estimator':26s} {'budget':6s} {'version':8s} {'ledger':>6s} "
        f"{'first ms':>9s} {'last ms':>9s} {'last/first':>10s}",
    ]
    print("\n".join(lines), flush=True)
    for name in ("DPLinearRegression", "DPLogisticRegression", "UnlearnableSGDClassifier"):
        for with_budget in (False, True):
            for version, package in packages.items():
                first, last, ledger = _run(package, name, with_budget, args.deletions, args.window)
                line = (
                    f"{name:26s} {'yes' if with_budget else 'no':6s} {version:8s} {ledger:6d} "
                    f"{1e3 * first:9.2f} {1e3 * last:9.2f} {last / first:10.2f}"
                )
                lines.append(line)
                print(line, flush=True)
    if args.out:
        path = pathlib.Path(args.out)
        if not path.is_absolute():
            path = RESULTS / path
        path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
