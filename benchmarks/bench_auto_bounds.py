"""Accuracy of DPLogisticRegression(feature_norm="auto") on raw (unscaled) data.

Median test accuracy over 10 seeds (the train/test split and the noise both
vary with the seed). Nothing is timed. Compared, at epsilon 0.1, 1 and 10:

* ``explicit-tight``: ``feature_norm`` = the largest training row norm (an
  oracle: read from the data, not private; the best a user who knew the
  bound could give without clipping);
* ``explicit-loose``: ten times that;
* ``default``: ``feature_norm=1.0``, the current default;
* ``auto``: the released median row norm, 10% of epsilon;
* ``scaler``: per-feature private scales (``PrivateBoundsScaler``, 10% of
  epsilon) then ``feature_norm=sqrt(d)`` with the other 90%;
* ``non-private``: scikit-learn's LogisticRegression on standardized
  features, the ceiling (not DP).

A third set has rows already inside the unit ball (the synthetic features
standardized with the generator's own, public, scales and offsets, divided
by ``sqrt(d)`` and clipped): the case the default ``feature_norm=1.0`` is
made for, to see what ``'auto'`` costs when a good bound is known.

The quantile of ``'auto'`` is chosen on a *tuning* synthetic set (its own
seed) before the evaluation sets are run: ``--tune`` prints that sweep.
Run: python benchmarks/bench_auto_bounds.py
Writes benchmarks/results/auto_bounds.txt and auto_bounds.png.
"""

import dataclasses
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_dpu.linear_model import DPLogisticRegression, _auto_bounds
from sklearn_dpu.preprocessing import PrivateBoundsScaler

SEEDS = range(10)
EPSILONS = (0.1, 1.0, 10.0)
RESULTS = Path(__file__).parent / "results"


def synthetic(seed: int, n: int = 2000, d: int = 8, unit: bool = False):
    """Raw-unit features: scales log-uniform in [0.1, 100], offsets of two
    scales, labels from a logistic model on the standardized features
    (``unit``: those standardized features over ``sqrt(d)``, rows clipped to
    norm 1)."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-1, 2, size=d)
    z = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-2.0 * z @ w / np.sqrt(d)))).astype(int)
    if unit:
        u = z / np.sqrt(d)
        return u / np.maximum(1.0, np.linalg.norm(u, axis=1, keepdims=True)), y
    return 2.0 * scale + scale * z, y


def methods(eps: float, d: int) -> dict:
    def scaler(seed, tight):
        return make_pipeline(
            PrivateBoundsScaler(epsilon=0.1 * eps, random_state=seed),
            DPLogisticRegression(epsilon=0.9 * eps, feature_norm=np.sqrt(d), random_state=seed),
        )

    return {
        "explicit-tight": lambda s, t: DPLogisticRegression(
            epsilon=eps, feature_norm=t, random_state=s
        ),
        "explicit-loose": lambda s, t: DPLogisticRegression(
            epsilon=eps, feature_norm=10 * t, random_state=s
        ),
        "default": lambda s, t: DPLogisticRegression(epsilon=eps, random_state=s),
        "auto": lambda s, t: DPLogisticRegression(epsilon=eps, feature_norm="auto", random_state=s),
        "scaler": scaler,
        "non-private": lambda s, t: make_pipeline(StandardScaler(), LogisticRegression()),
    }


def accuracies(make, X, y) -> list[float]:
    out = []
    for seed in SEEDS:
        X_tr, X_te, y_tr, y_te = train_test_split(
            X, y, test_size=0.25, random_state=seed, stratify=y
        )
        tight = float(np.linalg.norm(X_tr, axis=1).max())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(make(seed, tight).fit(X_tr, y_tr).score(X_te, y_te))
    return out


def tune() -> list[str]:
    """The quantile sweep on the tuning set (synthetic, seed 123)."""
    X, y = synthetic(seed=123)
    lines = []
    for q in (0.5, 0.75, 0.9):
        _auto_bounds.AUTO_NORM = dataclasses.replace(_auto_bounds.AutoNormBound(), quantile=q)
        row = []
        for eps in EPSILONS:
            acc = accuracies(methods(eps, X.shape[1])["auto"], X, y)
            row.append(f"eps={eps:g}: {np.median(acc):.3f}")
        lines.append(f"tuning set (synthetic seed 123), auto quantile {q}: " + ", ".join(row))
    _auto_bounds.AUTO_NORM = _auto_bounds.AutoNormBound()
    return lines


def main() -> None:
    sets = {
        "breast_cancer (raw)": load_breast_cancer(return_X_y=True),
        "synthetic (raw units, seed 0)": synthetic(seed=0),
        "synthetic (unit ball, seed 0)": synthetic(seed=0, unit=True),
    }
    lines, table = tune(), {}
    for name, (X, y) in sets.items():
        lines.append(f"{name}: n={len(X)}, d={X.shape[1]}, test 25%, median over 10 seeds")
        for eps in EPSILONS:
            for method, make in methods(eps, X.shape[1]).items():
                acc = accuracies(make, X, y)
                table[name, method, eps] = float(np.median(acc))
                lines.append(
                    f"  eps={eps:<4g} {method:15s} median {np.median(acc):.3f}  "
                    f"min {np.min(acc):.3f}  max {np.max(acc):.3f}"
                )
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "auto_bounds.txt").write_text(text + "\n")
    plot(table, list(sets), RESULTS / "auto_bounds.png")


def plot(table: dict, names: list, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4))
    for ax, name in zip(axes, names, strict=True):
        for method in (
            "explicit-tight",
            "explicit-loose",
            "default",
            "auto",
            "scaler",
            "non-private",
        ):
            ax.plot(EPSILONS, [table[name, method, e] for e in EPSILONS], "o-", label=method)
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_title(name)
    axes[0].set_ylabel("median test accuracy (10 seeds)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
