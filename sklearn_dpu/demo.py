"""A tour of sklearn_dpu on scikit-learn's diabetes data (the README's first command).

Run ``python -m sklearn_dpu.demo [--output-dir DIR]``. Under one shared privacy
budget it chooses the clipping bound by a private search, trains the private
model, deletes patients, saves and reloads the model, deletes again after the
reload, prints a privacy and deletion report, and saves a plot of accuracy
against epsilon.
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
from .model_selection import PrivateGridSearch
from .preprocessing import PublicBoundsScaler
from .privacy import PrivacyBudget
from .unlearning import delete_samples

# Public knowledge, not read off the data: scikit-learn's diabetes features
# are centred and scaled so that every value lies within +-0.2, and the
# disease-progression target is a score between 25 and 346.
FEATURE_BOUNDS = (-0.2, 0.2)
TARGET_RANGE = (25.0, 346.0)
# After scaling to [-1, 1] a row of 10 features has norm at most sqrt(10);
# a smaller bound clips long rows but needs less noise. The demo lets a
# private search choose among these.
FEATURE_NORMS = [1.0, 2.0, 3.2]


def _section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def _private_model(epsilon, feature_norm, budget=None, random_state=None):
    return make_pipeline(
        PublicBoundsScaler(bounds=FEATURE_BOUNDS),
        DPLinearRegression(
            epsilon=epsilon,
            delta=1e-5,
            feature_norm=feature_norm,
            target_bound=TARGET_RANGE,
            budget=budget,
            random_state=random_state,
        ),
    )


def _accuracy_curve(X_train, y_train, X_test, y_test, feature_norm, epsilons, repeats):
    """Median and quartiles of test R^2 over independent private fits."""
    curve = []
    for epsilon in epsilons:
        scores = [
            _private_model(epsilon, feature_norm, random_state=seed)
            .fit(X_train, y_train)
            .score(X_test, y_test)
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


def main(argv: list[str] | None = None) -> None:
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

    ledger_path = out / "budget.sqlite"
    ledger_path.unlink(missing_ok=True)
    budget = PrivacyBudget(epsilon=4.0, delta=1e-5, path=ledger_path)
    print(
        f"training rows: {len(y_train)}, features: {X.shape[1]}; "
        f"shared budget: eps <= {budget.epsilon:g} at delta = {budget.delta:g} ({ledger_path})"
    )

    _section("1. Choosing the clipping bound by a private search")
    search = make_pipeline(
        PublicBoundsScaler(bounds=FEATURE_BOUNDS),
        PrivateGridSearch(
            DPLinearRegression(epsilon=1.0, target_bound=TARGET_RANGE, budget=budget),
            {"feature_norm": FEATURE_NORMS},
            selection_epsilon=0.5,
            budget=budget,
        ),
    )
    search.fit(X_train, y_train)
    chosen = search[-1].best_params_["feature_norm"]
    print(
        f"candidates feature_norm in {FEATURE_NORMS}, each trained at eps = 1 on half "
        "the rows, one chosen at eps = 0.5 on the other half"
    )
    print(
        f"chosen feature_norm = {chosen}; the search cost eps = "
        f"{search[-1].privacy_spent_.epsilon:.3f} (the larger of its two halves)"
    )
    # The search's selected candidate stores training rows for deletion; keep
    # only the choice, so that a deletion request has one model to reach.
    del search

    _section("2. A private fit under the shared budget")
    model = _private_model(epsilon=1.0, feature_norm=chosen, budget=budget)
    model.fit(X_train, y_train, dplinearregression__sample_id=ids_train)
    reg = model[-1]
    baseline = LinearRegression().fit(X_train, y_train).score(X_test, y_test)
    print(
        f"test R^2  private (eps = 1): {model.score(X_test, y_test):.3f}   "
        f"non-private: {baseline:.3f}"
    )
    print(
        f"privacy spent by the model: eps = {reg.privacy_spent_.epsilon:.3f}, "
        f"delta = {reg.privacy_spent_.delta:g}"
    )
    print(f"budget spent so far (search + fit): eps = {budget.spent().epsilon:.3f}")

    _section("3. Deleting patients (exact unlearning)")
    leaving = list(ids_train[:10])
    delete_samples(model, leaving)
    report = reg.deletion_log_[-1]
    print(report.summary())
    print(f"test R^2 after deletion: {model.score(X_test, y_test):.3f}")
    print(f"budget after the re-release: eps = {budget.spent().epsilon:.3f}")

    _section("4. Save, reload, and delete again")
    path = out / "diabetes_model.skops"
    io.save(model, path)
    reloaded = io.load(path)
    print(
        f"saved to {path} ({path.stat().st_size / 1024:.0f} KiB; it holds the clipped "
        "training rows that deletion needs, so store it like the data)"
    )
    print(
        f"predictions match after reload: "
        f"{np.allclose(reloaded.predict(X_test), model.predict(X_test))}"
    )
    delete_samples(reloaded, [ids_train[10]])
    print(
        f"deleted {ids_train[10]} from the reloaded model; "
        f"log now holds {len(reloaded[-1].deletion_log_)} reports"
    )
    print(
        f"prediction for a new patient: {reloaded.predict(X_test[:1])[0]:.1f} "
        f"(true {y_test[0]:.0f})"
    )

    _section("5. Privacy report")
    final = reloaded[-1]
    for i, entry in enumerate(final.privacy_ledger_, 1):
        print(f"release {i}: {entry['mechanism']}")
    spent = final.privacy_spent_
    print(
        f"model total: eps = {spent.epsilon:.3f} at delta = {spent.delta:g} "
        "(Gaussian releases composed exactly)"
    )
    print(
        f"budget total: eps = {budget.spent().epsilon:.3f} of {budget.epsilon:g} "
        f"({len(budget.history())} charges: the whole search once, the fit, deletions)"
    )
    state = final.unlearning_state_
    print(
        f"deletion metadata: {state.registry.n_samples} rows kept, {state.nbytes() / 1024:.0f} KiB"
    )

    _section("6. Accuracy against epsilon")
    started = time.perf_counter()
    epsilons = np.logspace(-2, 2, 9)
    curve = _accuracy_curve(X_train, y_train, X_test, y_test, chosen, epsilons, args.repeats)
    midpoint = 1 - np.mean((y_test - np.mean(TARGET_RANGE)) ** 2) / np.var(y_test)
    plot_path = out / "privacy_utility.png"
    _plot(plot_path, epsilons, curve, baseline, midpoint)
    for epsilon, (low, median, high) in zip(epsilons, curve, strict=True):
        print(f"eps = {epsilon:8.2f}: median test R^2 {median:6.3f}  [{low:.3f}, {high:.3f}]")
    print(f"saved {plot_path} ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
