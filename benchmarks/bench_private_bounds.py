"""Accuracy of PrivateBoundsScaler before DPLinearRegression on raw load_diabetes.

Median test R^2 over seeds (train/test split and noise both vary with the seed).
Nothing is timed. Run: python benchmarks/bench_private_bounds.py
"""

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.preprocessing import PrivateBoundsScaler

SEEDS = range(10)
# A public guess of the target's range (diabetes progression scores are a
# one-year disease measure; 0-400 is a guess, not read from the data).
TARGET_GUESS = (0.0, 400.0)


def median_r2(make, X, y) -> float:
    scores = []
    for seed in SEEDS:
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed)
        model = make(seed).fit(X_tr, y_tr)
        scores.append(r2_score(y_te, model.predict(X_te)))
    return float(np.median(scores))


def main() -> None:
    X, y = load_diabetes(return_X_y=True, scaled=False)
    d = X.shape[1]
    rows = {
        "DPLinearRegression(eps=1) defaults, raw X, raw y": lambda s: DPLinearRegression(
            epsilon=1.0, random_state=s
        ),
        "DPLinearRegression(eps=1), raw X, target_bound guess": lambda s: DPLinearRegression(
            epsilon=1.0, target_bound=TARGET_GUESS, random_state=s
        ),
    }
    for center in (False, True):
        for eps_s, eps_r in ((0.1, 0.9), (0.5, 0.5)):
            for target in (1.0, TARGET_GUESS):
                name = (
                    f"PrivateBoundsScaler(eps={eps_s}, center={center}) + "
                    f"DPLinearRegression(eps={eps_r}, feature_norm=sqrt(d), target_bound={target})"
                )
                rows[name] = lambda s, c=center, a=eps_s, b=eps_r, t=target: make_pipeline(
                    PrivateBoundsScaler(epsilon=a, center=c, random_state=s),
                    DPLinearRegression(
                        epsilon=b, feature_norm=np.sqrt(d), target_bound=t, random_state=s
                    ),
                )
    from sklearn.linear_model import LinearRegression
    from sklearn.preprocessing import StandardScaler

    rows["non-private StandardScaler + LinearRegression"] = lambda s: make_pipeline(
        StandardScaler(), LinearRegression()
    )
    from sklearn_dpu.preprocessing import PublicBoundsScaler

    # Reference only: bounds read from the data (not private), to separate the
    # scaler's error from the regression's noise at this n.
    oracle = np.column_stack([X.min(axis=0), X.max(axis=0)])
    rows["(non-private bounds) PublicBoundsScaler(min/max) + DPLinearRegression(eps=1, guess)"] = (
        lambda s: make_pipeline(
            PublicBoundsScaler(bounds=oracle),
            DPLinearRegression(
                epsilon=1.0, feature_norm=np.sqrt(d), target_bound=TARGET_GUESS, random_state=s
            ),
        )
    )
    print(f"load_diabetes raw (n={len(X)}, d={d}), median test R^2 over {len(SEEDS)} seeds")
    for name, make in rows.items():
        print(f"{median_r2(make, X, y):8.3f}  {name}")
    # A larger data set with raw, badly scaled features (public generator).
    rng = np.random.default_rng(0)
    n = 20_000
    scales = np.array([1e-2, 1.0, 50.0, 1e3, 1e4])
    Xs = rng.normal(size=(n, 5)) * scales + scales
    ys = (rng.normal(size=(n, 5)) * 0 + (Xs - scales) / scales) @ [1.0, -2.0, 0.5, 1.0, 0.0]
    ys = ys + 0.5 * rng.normal(size=n)
    synth = {
        "DPLinearRegression(eps=1) defaults": lambda s: DPLinearRegression(random_state=s),
        "DPLinearRegression(eps=1), target_bound=10": lambda s: DPLinearRegression(
            target_bound=10.0, random_state=s
        ),
        "PrivateBoundsScaler(eps=0.1, center=True) + DPLinearRegression(eps=0.9, sqrt(d), 10)": (
            lambda s: make_pipeline(
                PrivateBoundsScaler(epsilon=0.1, center=True, random_state=s),
                DPLinearRegression(
                    epsilon=0.9, feature_norm=np.sqrt(5), target_bound=10.0, random_state=s
                ),
            )
        ),
        "PrivateBoundsScaler(eps=0.1) + DPLinearRegression(eps=0.9, sqrt(d), 10)": (
            lambda s: make_pipeline(
                PrivateBoundsScaler(epsilon=0.1, random_state=s),
                DPLinearRegression(
                    epsilon=0.9, feature_norm=np.sqrt(5), target_bound=10.0, random_state=s
                ),
            )
        ),
    }
    print(f"synthetic raw scales 1e-2..1e4 (n={n}, d=5), median test R^2")
    for name, make in synth.items():
        print(f"{median_r2(make, Xs, ys):8.3f}  {name}")


if __name__ == "__main__":
    main()
