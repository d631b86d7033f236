"""DPLinearRegression against scikit-learn, measured in one run.

Prints (and writes to results/dp_linear.json):
* fit time at n = 1e6, d = 100 as a ratio to LinearRegression (goal <= 0.5);
* one-row deletion at n = 1e6 as a speed-up over a full private refit (goal >= 300);
* R^2 at eps in {0.1, 1, 10} against the non-private model, on load_diabetes
  and on a synthetic n = 1e5, d = 20 problem (goal at eps = 1: within 0.01).

``--quick`` shrinks the sizes for a smoke run.
"""

import argparse
import json
import pathlib
import time

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split

from sklearn_dpu.linear_model import DPLinearRegression


def _timed(fn, repeats=1):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def speed(n, d, n_deletions):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, d))
    y = X @ rng.normal(size=d) + rng.normal(size=n)
    params = dict(feature_norm=np.sqrt(d), target_bound=float(np.ceil(np.abs(y).max())))
    sklearn_fit = _timed(lambda: LinearRegression().fit(X, y), repeats=2)
    private_fit = _timed(lambda: DPLinearRegression(**params).fit(X, y), repeats=2)
    reg = DPLinearRegression(**params).fit(X, y)
    deletions = [_timed(lambda i=i: reg.delete_samples([i])) for i in range(n_deletions)]
    keep = slice(n_deletions, None)
    refit = _timed(lambda: DPLinearRegression(**params).fit(X[keep], y[keep]), repeats=2)
    delete = float(np.median(deletions))
    return {
        "n": n,
        "d": d,
        "sklearn_fit_s": sklearn_fit,
        "private_fit_s": private_fit,
        "fit_ratio": private_fit / sklearn_fit,
        "delete_one_s": delete,
        "refit_s": refit,
        "delete_speedup": refit / delete,
    }


def _r2_table(X_train, y_train, X_test, y_test, params, seeds):
    baseline = LinearRegression().fit(X_train, y_train).score(X_test, y_test)
    rows = {"nonprivate": baseline}
    for epsilon in (0.1, 1.0, 10.0):
        scores = [
            DPLinearRegression(epsilon=epsilon, random_state=s, **params)
            .fit(X_train, y_train)
            .score(X_test, y_test)
            for s in range(seeds)
        ]
        rows[f"eps={epsilon:g}"] = {
            "median": float(np.median(scores)),
            "min": float(np.min(scores)),
            "gap_to_nonprivate": float(baseline - np.median(scores)),
        }
    return rows


def accuracy(n_synthetic, seeds):
    X, y = load_diabetes(return_X_y=True)
    diabetes = _r2_table(
        *_split(X, y),
        dict(feature_norm=2.0 * 0.2, target_bound=(25.0, 346.0)),
        seeds,
    )
    rng = np.random.default_rng(1)
    d = 20
    X = rng.uniform(-1, 1, size=(n_synthetic, d))
    y = X @ rng.normal(size=d) + rng.normal(size=n_synthetic)
    synthetic = _r2_table(*_split(X, y), dict(feature_norm=np.sqrt(d), target_bound=15.0), seeds)
    return {"load_diabetes": diabetes, f"synthetic_n{n_synthetic}_d{d}": synthetic}


def _split(X, y):
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    return X_train, y_train, X_test, y_test


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n_speed = 100_000 if args.quick else 1_000_000
    results = {
        "speed": speed(n_speed, 100, n_deletions=20 if args.quick else 50),
        "accuracy": accuracy(20_000 if args.quick else 100_000, seeds=5 if args.quick else 20),
    }
    s = results["speed"]
    print(
        f"fit, n={s['n']}, d={s['d']}: private {s['private_fit_s']:.2f} s, "
        f"LinearRegression {s['sklearn_fit_s']:.2f} s -> ratio {s['fit_ratio']:.3f} (goal <= 0.5)"
    )
    print(
        f"delete one row: {1e3 * s['delete_one_s']:.2f} ms, private refit {s['refit_s']:.2f} s "
        f"-> {s['delete_speedup']:.0f}x faster (goal >= 300)"
    )
    for name, table in results["accuracy"].items():
        print(f"{name}: non-private R^2 {table['nonprivate']:.4f}")
        for key, row in table.items():
            if key != "nonprivate":
                print(
                    f"  {key:7s} median R^2 {row['median']:.4f} (min {row['min']:.4f}, "
                    f"gap {row['gap_to_nonprivate']:.4f})"
                )
    out = (
        pathlib.Path(__file__).parent
        / "results"
        / ("dp_linear_quick.json" if args.quick else "dp_linear.json")
    )
    out.write_text(json.dumps(results, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
