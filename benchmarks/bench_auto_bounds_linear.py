"""Accuracy of DPLinearRegression with its default "auto" bounds.

Median test R^2 over 10 seeds (train/test split, synthetic data and noise vary
with the seed). Nothing is timed.

(a) heterogeneous scales: 10 features with scales 1 .. 100, n = 20 000, a
    target around 3000; auto bounds against non-private least squares and a
    single oracle row-norm bound (the largest row norm, target (min, max)).
(b) load_diabetes as loaded (features scaled by scikit-learn, the target in
    its raw units 25..346) at epsilon = 1: the defaults ("auto") and the old
    defaults (feature_norm=1, target_bound=1).
(c) R^2 against epsilon (0.1 .. 10) with explicit-tight bounds (oracle:
    largest row norm, target (min, max)), explicit-loose bounds (10 times
    wider) and auto bounds, on load_diabetes as loaded, load_diabetes with
    raw features (``scaled=False``) and the heterogeneous data; saved as a
    plot.

Run: python benchmarks/bench_auto_bounds_linear.py
(writes benchmarks/results/auto_bounds_linear.txt and .png)
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

from sklearn_dpu.linear_model import DPLinearRegression

SEEDS = range(10)
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
RESULTS = Path(__file__).parent / "results"


def heterogeneous(seed: int, n: int = 20_000, d: int = 10):
    """Features of scales 1 .. 100 (log-spaced), a target in the thousands."""
    rng = np.random.default_rng(seed)
    scales = np.logspace(0, 2, d)
    X = rng.normal(size=(n, d)) * scales
    coef = rng.uniform(1, 3, d) * rng.choice([-1, 1], d) * 100 / scales
    y = 3000 + X @ coef + 50 * rng.normal(size=n)
    return X, y


def diabetes(seed: int):
    return load_diabetes(return_X_y=True)


def diabetes_raw_features(seed: int):
    return load_diabetes(return_X_y=True, scaled=False)


def tight(X, y):
    """Oracle bounds read from the training data (not private: a reference)."""
    return dict(
        feature_norm=float(np.linalg.norm(X, axis=1).max()), target_bound=(y.min(), y.max())
    )


def loose(X, y):
    bounds = tight(X, y)
    center, half = (y.max() + y.min()) / 2, (y.max() - y.min()) / 2
    return dict(
        feature_norm=10 * bounds["feature_norm"],
        target_bound=(center - 10 * half, center + 10 * half),
    )


def auto(X, y):
    return dict(feature_norm="auto", target_bound="auto")


def defaults(X, y):
    return {}


def old_defaults(X, y):
    return dict(feature_norm=1.0, target_bound=1.0)


DATA = (
    ("diabetes", diabetes),
    ("diabetes-raw-X", diabetes_raw_features),
    ("heterogeneous", heterogeneous),
)


def median_r2(data, bounds, epsilon=1.0, nonprivate=False) -> float:
    scores = []
    for seed in SEEDS:
        X, y = data(seed)
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed)
        if nonprivate:
            model = LinearRegression()
        else:
            model = DPLinearRegression(epsilon=epsilon, random_state=seed, **bounds(X_tr, y_tr))
        scores.append(r2_score(y_te, model.fit(X_tr, y_tr).predict(X_te)))
    return float(np.median(scores))


def main() -> None:
    lines = [__doc__.split("\n\n")[0], "median test R^2 over 10 seeds", ""]

    def say(label, value):
        lines.append(f"{label:<62} {value:9.3f}")
        print(lines[-1], flush=True)

    say(
        "(a) heterogeneous, non-private LinearRegression",
        median_r2(heterogeneous, None, nonprivate=True),
    )
    say(
        "(a) heterogeneous, eps=1, oracle norm bound + target (min,max)",
        median_r2(heterogeneous, tight),
    )
    say("(a) heterogeneous, eps=1, auto bounds", median_r2(heterogeneous, auto))
    say("(b) diabetes, non-private LinearRegression", median_r2(diabetes, None, nonprivate=True))
    say("(b) diabetes, eps=1, defaults (auto)", median_r2(diabetes, defaults))
    say(
        "(b) diabetes, eps=1, old defaults (feature_norm=1, target_bound=1)",
        median_r2(diabetes, old_defaults),
    )
    lines.append("")
    lines.append("(c) R^2 against epsilon")
    curves = {}
    for name, data in DATA:
        for kind, bounds in (("explicit-tight", tight), ("explicit-loose", loose), ("auto", auto)):
            curves[name, kind] = [median_r2(data, bounds, eps) for eps in EPSILONS]
            values = "  ".join(
                f"eps={e:g}: {r:9.3f}" for e, r in zip(EPSILONS, curves[name, kind], strict=True)
            )
            lines.append(f"{name:<15} {kind:<15} {values}")
            print(lines[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "auto_bounds_linear.txt").write_text("\n".join(lines) + "\n")
    plot(curves)


def plot(curves) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (name, _) in zip(axes, DATA, strict=True):
        for (data, kind), r2 in curves.items():
            if data == name:
                ax.plot(EPSILONS, np.maximum(r2, -1.0), marker="o", label=kind)
        ax.set_xscale("log")
        ax.set_ylim(-1.05, 1.0)
        ax.set_xlabel("epsilon")
        ax.set_ylabel("median test R^2 (clipped at -1)")
        ax.set_title(name)
        ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "auto_bounds_linear.png", dpi=100)


if __name__ == "__main__":
    main()
