"""
Exact unlearning by coupling with UnlearnableSGDClassifier
===========================================================

The classifier trains by noisy mini-batch SGD and stores its run. To delete a
row it checks, step by step, whether the stored run is still a valid sample
for the data without that row, and recomputes only from the first step where
the check fails. Most deletions touch nothing; the rate of recomputes is
bounded by ``recompute_rate``. After any sequence of edits the stored run has
exactly the law of a fresh fit on the current data.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_dpu.linear_model import UnlearnableSGDClassifier

# Exact unlearning at a 5% recompute rate needs enough rows for one row to
# matter little: on a 1,000-row data set the noise it takes drowns the
# signal. Twenty thousand synthetic rows, divided by a fixed public scale
# (never one computed from the data, which the model could not unlearn);
# the estimator clips rows to feature_norm = 1.
X, y = make_classification(30_000, 20, n_informative=10, random_state=0)
X = X / (2 * np.sqrt(20))
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
baseline = LogisticRegression().fit(X_train, y_train).score(X_test, y_test)
print(f"non-private logistic regression: {baseline:.3f}")

clf = UnlearnableSGDClassifier(recompute_rate=0.05, feature_norm=1.0, random_state=0)
clf.fit(X_train, y_train)
print(f"test accuracy after fit: {clf.score(X_test, y_test):.3f}")
print(f"recompute bound per deleted row: {clf.recompute_bound_:.3f}")

# %%
# Delete 300 training rows, one request at a time.
accuracy, recomputed = [], []
for sample_id in range(300):
    clf.delete_samples([sample_id])
    report = clf.deletion_log_[-1]
    recomputed.append(report.cost.get("recomputed_steps", 0) > 0)
    accuracy.append(clf.score(X_test, y_test))
print(f"measured recompute rate: {np.mean(recomputed):.3f}")

fresh = [
    UnlearnableSGDClassifier(recompute_rate=0.05, feature_norm=1.0, random_state=s)
    .fit(X_train[300:], y_train[300:])
    .score(X_test, y_test)
    for s in range(10)
]
print(
    f"after 300 deletions: {accuracy[-1]:.3f}; fresh fits on the rest: "
    f"{np.mean(fresh):.3f} +- {np.std(fresh):.3f}"
)

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(accuracy, label="model after each deletion")
ax.axhspan(
    np.mean(fresh) - 2 * np.std(fresh),
    np.mean(fresh) + 2 * np.std(fresh),
    alpha=0.2,
    color="grey",
    label="fresh fits on the remaining rows",
)
ax.set_xlabel("deletions")
ax.set_ylabel("test accuracy")
ax.legend(loc="lower left")
fig.tight_layout()
