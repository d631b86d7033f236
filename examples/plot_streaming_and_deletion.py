"""
Streaming with partial_fit, then deleting
=========================================

``DPLinearRegression.partial_fit`` releases a model after every chunk. With
tree aggregation a person's privacy loss grows with the logarithm of the
number of chunks, not linearly. Deleting a person then re-noises only the
tree node that held their chunk.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.privacy import gaussian_noise_multiplier
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.mechanisms import GaussianMechanism

rng = np.random.default_rng(0)
n_chunks, chunk = 64, 500
X = rng.uniform(-1, 1, size=(n_chunks * chunk, 5))
y = X @ rng.normal(size=5) + 0.3 * rng.normal(size=len(X))

reg = DPLinearRegression(epsilon=1.0, feature_norm=np.sqrt(5), target_bound=6.0)
spent, r2 = [], []
for t in range(n_chunks):
    rows = slice(t * chunk, (t + 1) * chunk)
    reg.partial_fit(X[rows], y[rows])
    spent.append(reg.privacy_spent_.epsilon)
    r2.append(reg.score(X, y))

# What re-releasing the running total with fresh noise after every chunk costs:
event = GaussianMechanism(3.0, gaussian_noise_multiplier(1.0, 1e-5)).dp_event
naive = [epsilon_spent([event] * (t + 1), 1e-5) for t in range(n_chunks)]

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
left.plot(range(1, n_chunks + 1), spent, label="tree aggregation")
left.plot(range(1, n_chunks + 1), naive, label="fresh release of the total")
left.set_xlabel("chunks")
left.set_ylabel("epsilon spent")
left.legend()
right.plot(range(1, n_chunks + 1), r2)
right.set_xlabel("chunks")
right.set_ylabel("R$^2$ of the released model")
fig.tight_layout()

# %%
# Deleting three people re-noises the node that held their chunk.
reg.delete_samples([5, 6, 7])
print(reg.deletion_log_[-1].summary())
