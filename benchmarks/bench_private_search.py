"""PrivateGridSearch per method on one grid: epsilon spent, accuracy of the chosen
model against the best candidate in hindsight, and wall time against
GridSearchCV per fit.

For each method and seed: the search's ``privacy_spent_.epsilon``; the test
accuracy of ``best_estimator_``; the best test accuracy among the grid's
candidates, each fitted privately (same estimator, same seed) on the same
number of rows as a search candidate (the best in hindsight); the search's
wall time and its number of candidate fits (counted); and the wall time per
fit of ``GridSearchCV(LogisticRegression(), cv=2, refit=False)`` on the same
grid. ``time ratio`` = the search's wall time / (GridSearchCV's time per fit x
the search's number of fits).

Usage: ``python benchmarks/bench_private_search.py [--quick]``; writes
``benchmarks/results/private_search.{txt,json}``.
"""

import argparse
import json
import pathlib
import time
import warnings
from unittest import mock

import numpy as np
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split

from sklearn_dpu.linear_model import DPLogisticRegression
from sklearn_dpu.model_selection import PrivateGridSearch

GRID = {"C": [0.001, 0.01, 0.1, 1.0, 10.0]}
METHODS = {
    "split_select": {},
    "repeat_and_select (logarithmic, E[K]=10)": {
        "method": "repeat_and_select",
        "distribution": "logarithmic",
        "expected_runs": 10.0,
    },
    "repeat_and_select (poisson, E[K]=10)": {
        "method": "repeat_and_select",
        "distribution": "poisson",
        "expected_runs": 10.0,
    },
    "threshold (tau=0.8, gamma=0.1)": {
        "method": "threshold",
        "threshold": 0.8,
        "stop_probability": 0.1,
    },
}


def _counting_fit():
    calls = {"n": 0}
    real = DPLogisticRegression.fit

    def fit(self, *args, **kwargs):
        calls["n"] += 1
        return real(self, *args, **kwargs)

    return calls, mock.patch.object(DPLogisticRegression, "fit", fit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, seeds = (4000, 2) if args.quick else (40000, 5)
    X, y = make_classification(n_samples=n, n_features=10, n_informative=6, random_state=0)
    X = X / np.max(np.linalg.norm(X, axis=1))
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    base = DPLogisticRegression(feature_norm=1.0)

    per_fit = np.inf
    for _ in range(3):  # the least of three runs (the first warms up)
        start = time.perf_counter()
        GridSearchCV(LogisticRegression(), GRID, cv=2, refit=False).fit(X_train, y_train)
        per_fit = min(per_fit, (time.perf_counter() - start) / (2 * len(GRID["C"])))

    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, params in METHODS.items():
            eps, acc, best, wall, fits, failed = [], [], [], [], [], 0
            for seed in range(seeds):
                search = PrivateGridSearch(base, GRID, random_state=seed, **params)
                calls, patch = _counting_fit()
                start = time.perf_counter()
                try:
                    with patch:
                        search.fit(X_train, y_train)
                except ValueError:  # the threshold rule stopped without a model
                    failed += 1
                    continue
                wall.append(time.perf_counter() - start)
                fits.append(calls["n"])
                eps.append(search.privacy_spent_.epsilon)
                acc.append(search.score(X_test, y_test))
                half = len(y_train) // 2  # a candidate's rows (validation_fraction=0.5)
                best.append(
                    max(
                        base.set_params(C=c, random_state=seed)
                        .fit(X_train[:half], y_train[:half])
                        .score(X_test, y_test)
                        for c in GRID["C"]
                    )
                )
            runs = len(wall)
            rows.append(
                {
                    "method": name,
                    "epsilon": float(np.mean(eps)) if runs else float("nan"),
                    "accuracy": float(np.mean(acc)) if runs else float("nan"),
                    "best_in_hindsight": float(np.mean(best)) if runs else float("nan"),
                    "fits": float(np.mean(fits)) if runs else float("nan"),
                    "wall_s": float(np.mean(wall)) if runs else float("nan"),
                    "time_ratio": float(np.sum(wall) / (per_fit * np.sum(fits))) if runs else 0.0,
                    "no_model": failed,
                    "seeds": seeds,
                }
            )
    header = (
        f"{'method':44s} {'epsilon':>8s} {'acc':>6s} {'best':>6s} {'fits':>6s} "
        f"{'wall s':>8s} {'x GSCV/fit':>10s} {'no model':>8s}"
    )
    lines = [
        f"PrivateGridSearch(DPLogisticRegression(feature_norm=1.0), C in {GRID['C']}), "
        f"n={n} (75% train), {seeds} seeds; GridSearchCV(LogisticRegression, cv=2) "
        f"{per_fit * 1e3:.2f} ms per fit",
        header,
    ]
    for r in rows:
        lines.append(
            f"{r['method']:44s} {r['epsilon']:8.3f} {r['accuracy']:6.3f} "
            f"{r['best_in_hindsight']:6.3f} {r['fits']:6.1f} {r['wall_s']:8.3f} "
            f"{r['time_ratio']:10.2f} {r['no_model']:8d}"
        )
    text = "\n".join(lines)
    print(text)
    out = pathlib.Path(__file__).parent / "results"
    suffix = "_quick" if args.quick else ""
    (out / f"private_search{suffix}.txt").write_text(text + "\n", encoding="utf-8")
    (out / f"private_search{suffix}.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
