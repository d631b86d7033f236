"""How the ``C='auto'`` constants of DPLogisticRegression were chosen.

Synthetic logistic-model data only (never the evaluation sets of
``bench_dp_logistic.py``): features standardized, ``feature_norm = 1.2 sqrt(d)``
(a public choice from ``d``), ``||w*||`` and the feature correlation varied.
For each solver, the ridge constant ``c`` in
``Lambda = c (n G^2 r^2 / mu^2)^(1/3)`` is scanned and the mean test accuracy
gap to scikit-learn's non-private LogisticRegression is printed.

Run: ``PYTHONPATH=. python benchmarks/tune_dp_logistic.py`` (a few minutes).
"""

import dataclasses
import itertools
import math
import os
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from sklearn_dpu.linear_model import DPLogisticRegression, _logistic_releases

GRID = tuple(float(c) for c in os.environ.get("GRID", "0.03,0.1,0.3,1,3").split(","))


def make_problem(seed, n, d, n_classes):
    rng = np.random.default_rng(seed)
    scales = np.exp(rng.uniform(-1.5, 1.0, size=d))
    mixing = rng.normal(size=(d, d)) / math.sqrt(d)
    X = rng.normal(size=(2 * n, d)) @ (np.eye(d) + 0.7 * mixing) * scales
    W = rng.normal(size=(n_classes, d)) * rng.uniform(0.5, 3.0) / math.sqrt(d)
    logits = StandardScaler().fit_transform(X) @ W.T
    if n_classes == 2:
        y = (logits[:, 0] + rng.logistic(size=2 * n) > 0).astype(int)
    else:
        y = np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)
    scaler = StandardScaler().fit(X[:n])
    return scaler.transform(X[:n]), y[:n], scaler.transform(X[n:]), y[n:]


def main(solvers=("output", "objective", "noisy_gd")):
    problems = []
    for seed, (n, d, k) in enumerate(itertools.product((500, 5000, 50000), (5, 20, 50), (2, 3))):
        Xtr, ytr, Xte, yte = make_problem(100 + seed, n, d, k)
        base = LogisticRegression(max_iter=2000).fit(Xtr, ytr).score(Xte, yte)
        problems.append((n, d, k, Xtr, ytr, Xte, yte, base))
    if "JACOBIAN_FRACTION" in os.environ:
        _logistic_releases._JACOBIAN_FRACTION = float(os.environ["JACOBIAN_FRACTION"])
    for solver in solvers:
        for c in GRID:
            _logistic_releases._RIDGE = dataclasses.replace(
                _logistic_releases._RIDGE, **{solver: c}
            )
            gaps = {}
            for eps in (0.1, 1.0, 10.0):
                gap = []
                for _n, _d, _k, Xtr, ytr, Xte, yte, base in problems:
                    for s in range(2):
                        clf = DPLogisticRegression(
                            epsilon=eps,
                            solver=solver,
                            feature_norm=1.2 * math.sqrt(Xtr.shape[1]),
                            random_state=s,
                        ).fit(Xtr, ytr)
                        gap.append(base - clf.score(Xte, yte))
                gaps[eps] = float(np.mean(gap))
            print(
                f"{solver:9s} c={c:<5} gap eps=0.1: {gaps[0.1]:.4f}  "
                f"eps=1: {gaps[1.0]:.4f}"
                f"  eps=10: {gaps[10.0]:.4f}  mean: {np.mean(list(gaps.values())):.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or ("output", "objective", "noisy_gd"))
