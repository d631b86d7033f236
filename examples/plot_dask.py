"""
Fitting on a Dask array
=======================

``DPLinearRegression`` releases noisy sums over rows. On a Dask array the
sums are reduced block by block where the blocks live, and the noise is
added once to the total: the same mechanism, the same ledger and, with a
seed, the same coefficients as in memory. Public bounds are used here (they
keep deletions exact); the default ``"auto"`` bounds work on Dask too, their
private quantiles counted block by block on the workers.

This example uses Dask's default local scheduler; the same code runs on a
``dask.distributed`` cluster.
"""

# %%
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np

from sklearn_dpu.linear_model import DPLinearRegression

rng = np.random.default_rng(0)
n, d = 200_000, 10
X = da.from_array(rng.uniform(-1, 1, size=(n, d)), chunks=(25_000, d))
true_coef = np.linspace(-0.3, 0.3, d)
y = da.clip(X @ true_coef + 0.1 * da.from_array(rng.normal(size=n), chunks=25_000), -2, 2)
print(X)

params = dict(epsilon=0.5, feature_norm=np.sqrt(d), target_bound=2.0, random_state=0)
on_dask = DPLinearRegression(**params).fit(X, y)
in_memory = DPLinearRegression(**params).fit(X.compute(), y.compute())
print("same coefficients as in memory:", np.array_equal(on_dask.coef_, in_memory.coef_))
print("privacy spent:", on_dask.privacy_spent_)

# %%
# Deleting rows works on the Dask-fitted model as on any other.
on_dask.delete_samples([0, 1, 2])
print(on_dask.deletion_log_[-1].summary())

fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(true_coef, "k--", label="true")
ax.plot(on_dask.coef_, "o", label="DP fit on Dask, after a deletion")
ax.set_xlabel("feature")
ax.set_ylabel("coefficient")
ax.legend()
fig.tight_layout()
