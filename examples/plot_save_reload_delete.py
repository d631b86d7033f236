"""
Save, reload, then delete
=========================

A model is trained today and a deletion request arrives next month, in
another process. :func:`sklearn_dpu.io.save` writes the estimator with
everything deletion needs (the clipped training rows: store the file as you
store the data; only the released attributes are private) in the skops
format, and :func:`sklearn_dpu.io.load` reads it back without unpickling:
only scikit-learn's, numpy's and the library's own listed types are
instantiated. The reloaded model deletes exactly as the original would, and
its deletion log continues.
"""

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from sklearn_dpu import io
from sklearn_dpu.linear_model import DPLinearRegression

rng = np.random.default_rng(0)
X = rng.uniform(-1, 1, size=(5000, 4))
y = np.clip(X @ [0.4, -0.3, 0.2, 0.1] + 0.1 * rng.normal(size=5000), -1, 1)
ids = [f"user-{k}" for k in range(len(X))]

model = DPLinearRegression(epsilon=1.0, feature_norm=2.0, target_bound=1.0, random_state=0)
model.fit(X, y, sample_id=ids)
path = Path(tempfile.mkdtemp()) / "model.skops"
io.save(model, path)
print(f"saved {path.stat().st_size / 1024:.0f} kB")

# %%
# Later, elsewhere: load and serve the request.
reloaded = io.load(path)
np.testing.assert_array_equal(reloaded.coef_, model.coef_)
reloaded.delete_samples(["user-17", "user-4242"])
print(reloaded.deletion_log_[-1].summary())
io.save(reloaded, path)  # the file no longer holds the deleted rows

# %%
# The original in memory, given the same request, reaches the same state
# (the same seed draws the same fresh noise): the file lost nothing.
model.delete_samples(["user-17", "user-4242"])
np.testing.assert_array_equal(io.load(path).coef_, model.coef_)

fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(model.coef_, "o", label="deleted in memory")
ax.plot(io.load(path).coef_, "x", markersize=10, label="saved, reloaded, deleted")
ax.set_xlabel("feature")
ax.set_ylabel("coefficient")
ax.legend()
fig.tight_layout()
