"""UnlearnableSGDClassifier against DPLogisticRegression at the same epsilon (issue 7).

Accuracy at epsilon in {0.1, 1, 10} (delta = 1e-5) on the same splits:
``load_breast_cancer`` (75/25 split, standardized, public row bound
``feature_norm = 6``, as in ``bench_dp_logistic.py``) and a synthetic
``make_classification`` problem (n_train = 3e4, d = 20, ``feature_norm =
1.2 sqrt(20)``). UnlearnableSGDClassifier is shown at its defaults
(``recompute_rate=0.05``: the noise is the larger of what epsilon and the 5%
recompute rate need), with ``recompute_rate=1`` (the noise is set by epsilon
alone), which separates the cost of privacy from the cost of cheap exact
unlearning, and with a hand-picked schedule. Goal: within 0.03 of
DPLogisticRegression at epsilon = 1.

Run: ``PYTHONPATH=. python benchmarks/bench_unlearnable_sgd_accuracy.py``
(about two minutes on 2 cores). Writes
``benchmarks/results/unlearnable_sgd_accuracy.json`` and prints a table.
"""

import json
import math
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklearn_dpu import DPLogisticRegression, UnlearnableSGDClassifier

EPSILONS = (0.1, 1.0, 10.0)
RESULTS = Path(__file__).parent / "results" / "unlearnable_sgd_accuracy.json"


def _breast_cancer(seed):
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), ytr, scaler.transform(Xte), yte, 6.0


def _synthetic(seed):
    X, y = make_classification(n_samples=40_000, n_features=20, random_state=seed)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=seed)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), ytr, scaler.transform(Xte), yte, 1.2 * math.sqrt(20)


MODELS = {
    "DPLogisticRegression": lambda eps, F, seed: DPLogisticRegression(
        epsilon=eps, feature_norm=F, random_state=seed
    ),
    "UnlearnableSGD (defaults)": lambda eps, F, seed: UnlearnableSGDClassifier(
        epsilon=eps, feature_norm=F, random_state=seed
    ),
    "UnlearnableSGD (recompute_rate=1)": lambda eps, F, seed: UnlearnableSGDClassifier(
        epsilon=eps, feature_norm=F, recompute_rate=1.0, random_state=seed
    ),
    # A schedule chosen by hand (not by the recipe): 20 steps of 200 rows and a
    # step size above the worst-case 1/(2H) of "auto". Picked once on
    # breast_cancer, so its number there is optimistic; shown to separate the
    # recipe's limits from the mechanism's.
    "UnlearnableSGD (T=20, m=200, lr=0.5, rho=1)": lambda eps, F, seed: UnlearnableSGDClassifier(
        epsilon=eps,
        feature_norm=F,
        recompute_rate=1.0,
        max_iter=20,
        batch_size=200,
        learning_rate=0.5,
        random_state=seed,
    ),
}


def run(name, make_split, n_seeds):
    splits = [make_split(seed) for seed in range(n_seeds)]
    rows = []
    print(f"\n== {name} ({n_seeds} seeds, test accuracy mean ± std) ==")
    print("epsilon | " + " | ".join(f"{m:>44s}" for m in MODELS))
    for eps in EPSILONS:
        cells = []
        for model, make in MODELS.items():
            scores, spent, seconds = [], [], []
            for seed, (Xtr, ytr, Xte, yte, F) in enumerate(splits):
                started = time.perf_counter()
                est = make(eps, F, seed).fit(Xtr, ytr)
                seconds.append(time.perf_counter() - started)
                scores.append(est.score(Xte, yte))
                spent.append(est.privacy_spent_.epsilon)
            rows.append(
                {
                    "data": name,
                    "epsilon": eps,
                    "model": model,
                    "accuracy_mean": float(np.mean(scores)),
                    "accuracy_std": float(np.std(scores)),
                    "max_privacy_spent": float(np.max(spent)),
                    "median_fit_seconds": float(np.median(seconds)),
                }
            )
            cells.append(f"{np.mean(scores):.3f} ± {np.std(scores):.3f} (eps<={np.max(spent):.3g})")
        print(f"{eps:7g} | " + " | ".join(f"{c:>44s}" for c in cells))
    return rows


def main():
    warnings.simplefilter("ignore")
    rows = run("breast_cancer", _breast_cancer, 10) + run("synthetic", _synthetic, 3)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "platform": platform.platform(),
                "python": platform.python_version(),
                "sklearn": sklearn.__version__,
                "rows": rows,
            },
            indent=1,
        )
    )
    print(f"\nwrote {RESULTS.relative_to(RESULTS.parents[2])}")


if __name__ == "__main__":
    main()
