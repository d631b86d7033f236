"""DPLinearRegression: solver="ambssgd" (DP-AMBSSGD) against solver="ssp".

Synthetic Gaussian design (the reference regime of Varshney, Thakurta & Jain
2022, Corollary 11): ``x ~ N(0, I_d)``, ``||w*|| = 5``, ``y = <x, w*> + N(0, 1)``,
delta = 1e-6. Methods:

* ``ssp``: ``solver="ssp"`` with explicit tight public bounds, known from the
  generator (not read from the data): ``feature_norm`` = the 0.999 quantile of
  ``||x||`` (chi distribution), ``target_bound = 4 sqrt(||w*||^2 + 1)``;
* ``ssp-auto``: ``solver="ssp"``, ``feature_norm="auto", target_bound="auto"``;
* ``ambssgd``: ``solver="ambssgd"`` with the same explicit bounds;
* ``ambssgd-auto``: ``solver="ambssgd"`` with ``"auto"`` bounds.

Reported: median over seeds of the excess risk ``(||coef - w*||^2 +
intercept^2) / 2`` (x is centered and isotropic), its ratio to the
non-private reference ``8 sigma^2 d / n`` of Theorem 10, the test R^2, and
the median fit time divided by scikit-learn's ``LinearRegression`` on the
same data (timings on a shared 2-core machine: noisy, ratios only).

Run: python benchmarks/bench_ambssgd.py [--quick]
Writes benchmarks/results/ambssgd.txt.
"""

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.stats import chi
from sklearn.linear_model import LinearRegression

from sklearn_dpu.linear_model import DPLinearRegression

DELTA = 1e-6
METHODS = {
    "ssp": dict(solver="ssp"),
    "ssp-auto": dict(solver="ssp", feature_norm="auto", target_bound="auto"),
    "ambssgd": dict(solver="ambssgd"),
    "ambssgd-auto": dict(solver="ambssgd", feature_norm="auto", target_bound="auto"),
}


def make_data(n, d, seed):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w *= 5.0 / np.linalg.norm(w)
    X = rng.normal(size=(n, d))
    y = X @ w + rng.normal(size=n)
    X_test = rng.normal(size=(20_000, d))
    y_test = X_test @ w + rng.normal(size=20_000)
    return X, y, X_test, y_test, w


def timed(model, X, y):
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    dims, epsilons = [10, 100], [0.3, 1.0, 4.0]
    lines = [
        f"{'n':>8} {'d':>4} {'eps':>4} {'method':>13} {'excess':>10} {'/8d/n':>8} "
        f"{'R2':>7} {'time/OLS':>9}"
    ]
    print(lines[0], flush=True)
    for n in sizes:
        for d in dims:
            n_seeds = 1 if n * d >= 10**8 else 3
            data = [make_data(n, d, seed) for seed in range(n_seeds)]
            ols_time = np.median([timed(LinearRegression(), X, y) for X, y, *_ in data])
            bounds = dict(feature_norm=float(chi.ppf(0.999, d)), target_bound=4.0 * np.sqrt(26.0))
            for eps in epsilons:
                for name, params in METHODS.items():
                    risks, r2s, times = [], [], []
                    for seed, (X, y, X_test, y_test, w) in enumerate(data):
                        model = DPLinearRegression(
                            epsilon=eps, delta=DELTA, random_state=seed, **{**bounds, **params}
                        )
                        times.append(timed(model, X, y))
                        risks.append(0.5 * (np.sum((model.coef_ - w) ** 2) + model.intercept_**2))
                        r2s.append(model.score(X_test, y_test))
                    risk = np.median(risks)
                    line = (
                        f"{n:>8} {d:>4} {eps:>4} {name:>13} {risk:>10.3g} "
                        f"{risk / (8 * d / n):>8.3g} {np.median(r2s):>7.4f} "
                        f"{np.median(times) / ols_time:>9.1f}"
                    )
                    print(line, flush=True)
                    lines.append(line)
    out = Path(__file__).parent / "results" / "ambssgd.txt"
    header = (
        "DPLinearRegression solver='ambssgd' vs 'ssp' (x ~ N(0, I_d), ||w*|| = 5, sigma = 1, "
        f"delta = {DELTA}); median over seeds (3, or 1 when n*d >= 1e8)\n"
        "excess = (||coef - w*||^2 + intercept^2)/2; /8d/n = excess / (8 sigma^2 d / n); "
        "time/OLS = fit time / sklearn LinearRegression's (shared 2-core machine, noisy)\n"
    )
    out.write_text(header + "\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
