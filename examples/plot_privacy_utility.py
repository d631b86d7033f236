"""
Privacy against utility, per estimator
======================================

How much accuracy does privacy cost? :class:`~sklearn_dpu.inspection.PrivacyUtilityDisplay`
fits an estimator at several epsilons, a few times each (the noise differs
between fits), and plots the test score against epsilon with the score of a
non-private model for reference. Every one of those fits is a differentially
private release of the training data; the reference model is not private at
all, so it is for your own evaluation only.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import train_test_split

from sklearn_dpu.inspection import PrivacyUtilityDisplay
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)

epsilons = [0.1, 0.5, 2.0, 10.0]

# %%
# Regression. The features are in [-1, 1] and the target in [-4, 4] by
# construction: these are public bounds, so the model is given them (with
# the defaults, ``"auto"``, it would spend half of epsilon estimating them).
X, y = make_regression(3000, 5, noise=10.0, random_state=0)
X = np.clip(X / 3, -1, 1)
y = np.clip(y / 50, -4, 4)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
PrivacyUtilityDisplay.from_estimator(
    DPLinearRegression(feature_norm=np.sqrt(5), target_bound=4.0),
    X_train,
    y_train,
    X_test,
    y_test,
    epsilons=epsilons,
    n_repeats=3,
    non_private_estimator=LinearRegression(),
    random_state=0,
    ax=axes[0],
)
axes[0].set_title("DPLinearRegression (R$^2$)")

# %%
# Classification, with two estimators. Rows are divided by a fixed public
# scale so that their norm is at most about 1, the bound both are given.
X, y = make_classification(4000, 10, n_informative=5, random_state=0)
X = X / (2 * np.sqrt(10))
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
for ax, estimator in zip(
    axes[1:],
    [
        DPLogisticRegression(feature_norm=1.0),
        UnlearnableSGDClassifier(feature_norm=1.0, recompute_rate=1.0),
    ],
    strict=True,
):
    display = PrivacyUtilityDisplay.from_estimator(
        estimator,
        X_train,
        y_train,
        X_test,
        y_test,
        epsilons=epsilons,
        n_repeats=3,
        non_private_estimator=LogisticRegression(),
        random_state=0,
        ax=ax,
    )
    ax.set_title(f"{type(estimator).__name__} (accuracy)")
    print(type(estimator).__name__, "median accuracy:", np.round(np.median(display.scores, 1), 3))
fig.tight_layout()

# %%
# The displays keep the scores they drew (``display.scores``, one row per
# epsilon), so a figure can be redrawn, or built from scores computed
# elsewhere, with :meth:`~sklearn_dpu.inspection.PrivacyUtilityDisplay.from_scores`.
