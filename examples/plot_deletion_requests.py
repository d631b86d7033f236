"""
Handling deletion requests
==========================

Customers ask to be forgotten one by one; a deletion re-releases the model
and every re-release costs the customers who stay some privacy. This example
serves the same 40 requests twice, one call per request and in weekly
batches, and shows what each costs: in time, with
:class:`~sklearn_dpu.inspection.DeletionCostDisplay`, and in privacy, with
:class:`~sklearn_dpu.inspection.BudgetTimelineDisplay` on a shared
:class:`~sklearn_dpu.privacy.PrivacyBudget`.
"""

# %%
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sklearn_dpu.inspection import BudgetTimelineDisplay, DeletionCostDisplay
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.privacy import PrivacyBudget

rng = np.random.default_rng(0)
n = 20_000
X = rng.uniform(-1, 1, size=(n, 8))
y = np.clip(X @ rng.normal(size=8) / 3 + 0.1 * rng.normal(size=n), -1, 1)
customer_ids = np.array([f"C{k:06d}" for k in range(n)])
requests = rng.choice(customer_ids, size=40, replace=False)

workdir = Path(tempfile.mkdtemp())


def fitted(budget):
    model = DPLinearRegression(
        epsilon=1.0, feature_norm=np.sqrt(8), target_bound=1.0, budget=budget, random_state=0
    )
    return model.fit(X, y, sample_id=customer_ids)


# %%
# One call per request: 40 re-releases.
one_by_one = PrivacyBudget(epsilon=20.0, delta=1e-5, path=workdir / "one_by_one.sqlite")
model = fitted(one_by_one)
for customer in requests:
    model.delete_samples([customer])
print(model.deletion_log_[-1].summary())

# %%
# Weekly batches of 10: 4 re-releases. The batch call is atomic: an unknown
# id deletes nothing and the error says how many ids were at fault.
batched = PrivacyBudget(epsilon=20.0, delta=1e-5, path=workdir / "batched.sqlite")
batch_model = fitted(batched)
for week in range(4):
    batch_model.delete_samples(requests[10 * week : 10 * (week + 1)])
print(batch_model.deletion_log_[-1].summary())

# %%
# What it cost. The deletion times are the reports' ``cost.wall_time_s``,
# the only timing a report holds. A retrain's time is not published by the
# estimators (it depends on the number of private rows): we measure one here
# ourselves, for our own comparison. (It is a fit without a budget: a DP
# release of the data that we do not publish.)
start = time.perf_counter()
DPLinearRegression(epsilon=1.0, feature_norm=np.sqrt(8), target_bound=1.0, random_state=1).fit(
    X, y, sample_id=customer_ids
)
retrain_time = time.perf_counter() - start

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
DeletionCostDisplay.from_estimator(model, retrain_time=retrain_time, name="one per call", ax=left)
DeletionCostDisplay.from_estimator(
    batch_model, name="10 per call", ax=left, line_kwargs={"marker": "s"}
)
left.set_title("time of each deletion call")
BudgetTimelineDisplay.from_budget(one_by_one, ax=right, line_kwargs={"label": "one per call"})
BudgetTimelineDisplay.from_budget(
    batched, ax=right, line_kwargs={"label": "10 per call"}, cap_kwargs={"label": None}
)
right.set_title("epsilon spent by the remaining customers")
fig.tight_layout()
print(
    f"epsilon after 40 requests: {one_by_one.spent().epsilon:.2f} one per call, "
    f"{batched.spent().epsilon:.2f} in 4 batches"
)
