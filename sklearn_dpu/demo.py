"""A tour of sklearn_dpu on scikit-learn's diabetes data (the README's first command).

Run ``python -m sklearn_dpu.demo [--output-dir DIR]``. It trains a private
model under a shared privacy budget, deletes patients, saves and reloads the
model, deletes again after the reload, prints a privacy and deletion report,
and saves a plot of accuracy against epsilon.
"""

import argparse
import pathlib
import time

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from . import io
from .linear_model import DPLinearRegression
from .preprocessing import PublicBoundsScaler
from .privacy import PrivacyBudget
from .unlearning import delete_samples

# Public knowledge, not read off the data: scikit-learn's diabetes features
# are centred and scaled so that every value lies within +-0.2, and the
# disease-progression target is a score between 25 and 346.
FEATURE_BOUNDS = (-0.2, 0.2)
TARGET_RANGE = (25.0, 346.0)
# After scaling to [-1, 1], most patients' rows have norm below 2; longer
# rows are clipped. A public choice: sqrt(10) would never clip but costs noise.
FEATURE_NORM = 2.0


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def _private_model(epsilon, budget=None, random_state=None):
    return make_pipeline(
        PublicBoundsScaler(bounds=FEATURE_BOUNDS),
        DPLinearRegression(
            epsilon=epsilon,
            delta=1e-5,
            feature_norm=FEATURE_NORM,
            target_bound=TARGET_RANGE,
            budget=budget,
            random_state=random_state,
        ),
    )


def _accuracy_curve(X_train, y_train, X_test, y_test, epsilons, repeats):
    """Median and quartiles of test R^2 over independent private fits."""
    curve = []
    for epsilon in epsilons:
        scores = [
            _private_model(epsilon, random_state=seed).fit(X_train, y_train).score(X_test, y_test)
            for seed in range(repeats)
        ]
        curve.append(np.percentile(scores, [25, 50, 75]))
    return np.array(curve)


def _plot(path, epsilons, curve, nonprivate_r2, midpoint_r2) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.fill_between(epsilons, curve[:, 0], curve[:, 2], alpha=0.25, label="interquartile range")
    ax.plot(epsilons, curve[:, 1], marker="o", label="DPLinearRegression (median)")
    ax.axhline(nonprivate_r2, color="black", linestyle="--", label="LinearRegression (non-private)")
    ax.axhline(midpoint_r2, color="grey", linestyle=":", label="predict the public midpoint")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon (delta = 1e-5)")
    ax.set_ylabel("test R$^2$")
    ax.set_title("load_diabetes: accuracy against privacy")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    """Run the tour; write the budget ledger, the model and the plot to ``--output-dir``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="demo_output", type=pathlib.Path)
    parser.add_argument("--repeats", default=20, type=int, help="fits per epsilon in the plot")
    args = parser.parse_args(argv)
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)

    X, y = load_diabetes(return_X_y=True)
    patient_ids = np.array([f"patient-{i:03d}" for i in range(len(y))])
    X_train, X_test, y_train, y_test, ids_train, _ = train_test_split(
        X, y, patient_ids, test_size=0.25, random_state=0
    )

    _section("1. A private fit under a shared budget")
    ledger_path = out / "budget.sqlite"
    ledger_path.unlink(missing_ok=True)
    budget = PrivacyBudget(epsilon=3.0, delta=1e-5, path=ledger_path)
    model = _private_model(epsilon=1.0, budget=budget)
    model.fit(X_train, y_train, dplinearregression__sample_id=ids_train)
    reg = model[-1]
    baseline = LinearRegression().fit(X_train, y_train).score(X_test, y_test)
    print(f"training rows: {len(y_train)}, features: {X.shape[1]}")
    print(f"test R^2  private (eps = 1): {model.score(X_test, y_test):.3f}   "
          f"non-private: {baseline:.3f}")
    print(f"privacy spent by the model: eps = {reg.privacy_spent_.epsilon:.3f}, "
          f"delta = {reg.privacy_spent_.delta:g}")
    print(f"budget {ledger_path}: spent eps = {budget.spent().epsilon:.3f} of "
          f"{budget.epsilon:g}")

    _section("2. Deleting patients (exact unlearning)")
    leaving = list(ids_train[:10])
    delete_samples(model, leaving)
    report = reg.deletion_log_[-1]
    print(report.summary())
    print(f"test R^2 after deletion: {model.score(X_test, y_test):.3f}")
    print(f"budget after the re-release: eps = {budget.spent().epsilon:.3f}")

    _section("3. Save, reload, and delete again")
    path = out / "diabetes_model.skops"
    io.save(model, path)
    reloaded = io.load(path)
    print(f"saved to {path} ({path.stat().st_size / 1024:.0f} KiB; it holds the clipped "
          "training rows that deletion needs, so store it like the data)")
    print(f"predictions match after reload: "
          f"{np.allclose(reloaded.predict(X_test), model.predict(X_test))}")
    delete_samples(reloaded, [ids_train[10]])
    print(f"deleted {ids_train[10]} from the reloaded model; "
          f"log now holds {len(reloaded[-1].deletion_log_)} reports")
    print(f"prediction for a new patient: {reloaded.predict(X_test[:1])[0]:.1f} "
          f"(true {y_test[0]:.0f})")

    _section("4. Privacy report")
    final = reloaded[-1]
    for i, entry in enumerate(final.privacy_ledger_, 1):
        print(f"release {i}: {entry['mechanism']}")
    spent = final.privacy_spent_
    print(f"model total: eps = {spent.epsilon:.3f} at delta = {spent.delta:g} "
          "(Gaussian releases composed exactly)")
    print(f"budget total: eps = {budget.spent().epsilon:.3f} of {budget.epsilon:g} "
          f"({len(budget.history())} charges)")
    state = final.unlearning_state_
    print(f"deletion metadata: {state.registry.n_samples} rows kept, "
          f"{state.nbytes() / 1024:.0f} KiB")

    _section("5. Accuracy against epsilon")
    started = time.perf_counter()
    epsilons = np.logspace(-2, 2, 9)
    curve = _accuracy_curve(X_train, y_train, X_test, y_test, epsilons, args.repeats)
    midpoint = 1 - np.mean((y_test - np.mean(TARGET_RANGE)) ** 2) / np.var(y_test)
    plot_path = out / "privacy_utility.png"
    _plot(plot_path, epsilons, curve, baseline, midpoint)
    for epsilon, (low, median, high) in zip(epsilons, curve, strict=True):
        print(f"eps = {epsilon:8.2f}: median test R^2 {median:6.3f}  [{low:.3f}, {high:.3f}]")
    print(f"saved {plot_path} ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
