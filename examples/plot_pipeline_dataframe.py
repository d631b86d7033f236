"""
A pipeline with public bounds on a pandas DataFrame
===================================================

Sensitivity needs bounds, and they must not come from the training data.
Here they come from a data dictionary: ages 18 to 90, body-mass index 15 to
50, systolic blood pressure 80 to 200 mmHg, and a yearly cost of care between
0 and 20 (thousands). :class:`~sklearn_dpu.preprocessing.PublicBoundsScaler`
maps each column onto ``[-1, 1]`` with these intervals and learns nothing,
so the rows then have L2 norm at most ``sqrt(3)``: the ``feature_norm`` of the
regression. (``StandardScaler`` would remember the data's mean and scale,
which no deletion could take back.)

The DataFrame's index holds the patients' ids. With
``set_output(transform="pandas")`` the index survives the scaler, the
regression takes its labels as sample ids, and a deletion request names the
patient directly.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.unlearning import delete_samples

rng = np.random.default_rng(0)
n = 4000
X = pd.DataFrame(
    {
        "age": rng.uniform(18, 90, n),
        "bmi": rng.normal(27, 5, n).clip(15, 50),
        "systolic_bp": rng.normal(125, 15, n).clip(80, 200),
    },
    index=pd.Index([f"patient-{k:05d}" for k in range(n)], name="patient"),
)
cost = 0.08 * X["age"] + 0.2 * (X["bmi"] - 25) + 0.03 * (X["systolic_bp"] - 120)
y = (cost + rng.normal(0, 1, n)).clip(0, 20).rename("cost")
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

# Bounds from the data dictionary, one (low, high) per column, in column order.
dictionary = {"age": (18, 90), "bmi": (15, 50), "systolic_bp": (80, 200)}
pipe = make_pipeline(
    PublicBoundsScaler(bounds=[dictionary[c] for c in X.columns]),
    DPLinearRegression(epsilon=1.0, feature_norm=np.sqrt(3), target_bound=(0, 20), random_state=0),
).set_output(transform="pandas")
pipe.fit(X_train, y_train)
print("feature names:", list(pipe.feature_names_in_))
print("privacy spent:", pipe[-1].privacy_spent_)
print(f"test R^2: {pipe.score(X_test, y_test):.3f}")

# %%
# A patient asks to be deleted. The id is the DataFrame's label: the same
# patient after the split and inside the pipeline.
request = X_train.index[:3]
coef_before = pipe[-1].coef_.copy()
pipe = delete_samples(pipe, list(request))
report = pipe[-1].deletion_log_[-1]
print(report.summary())
print(f"test R^2 after the deletion: {pipe.score(X_test, y_test):.3f}")

# %%
# The coefficients are in the scaled units (each column mapped onto [-1, 1]).
# The deletion re-released them with fresh noise.
fig, ax = plt.subplots(figsize=(5, 3))
positions = np.arange(len(X.columns))
ax.bar(positions - 0.2, coef_before, width=0.4, label="fit")
ax.bar(positions + 0.2, pipe[-1].coef_, width=0.4, label="after the deletion")
ax.set_xticks(positions, X.columns)
ax.set_ylabel("coefficient (scaled units)")
ax.legend()
fig.tight_layout()
