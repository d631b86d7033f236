"""No published number after a deletion is a deterministic function of the private data.

Fit on neighbouring data sets (n and n + 1 rows) with several seeds, delete
one row, and collect every number in the fitted attributes and deletion
reports. A value constant across seeds on each data set but different between
them depends on the data (typically on the exact n) without being noised.
Timings are skipped (they vary anyway and are documented side channels).
"""

import numbers
import warnings

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLinearRegression, DPLogisticRegression


def _numbers(obj, prefix, out, depth=0):
    if depth > 5 or obj is None or isinstance(obj, bool | str):
        return
    if isinstance(obj, numbers.Number):
        out[prefix] = float(obj)
    elif isinstance(obj, np.ndarray) and obj.dtype.kind in "fiu":
        for i, v in enumerate(obj.ravel()[:64]):
            out[f"{prefix}[{i}]"] = float(v)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if "time" not in str(k):
                _numbers(v, f"{prefix}.{k}", out, depth + 1)
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj[:64]):
            _numbers(v, f"{prefix}[{i}]", out, depth + 1)
    elif hasattr(obj, "as_dict"):
        _numbers(obj.as_dict(), prefix, out, depth + 1)


def _published(est):
    out = {}
    for name in dir(est):
        if name.endswith("_") and not name.startswith("_") and name != "unlearning_state_":
            value = getattr(est, name)
            if not callable(value):
                _numbers(value, name, out)
    return out


def _leads(make, classifier, n=400, seeds=range(4)):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n + 1, 3)) / 2
    y = (X @ [1.0, -1.0, 0.5] > 0).astype(int) if classifier else X @ [1.0, -1.0, 0.5]
    per_set = []
    for rows in (n, n + 1):
        values = []
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = make(seed).fit(X[:rows], y[:rows]).delete_samples([0])
            values.append(_published(est))
        per_set.append(values)
    leads = []
    for key in per_set[0][0]:
        a = {v.get(key) for v in per_set[0]}
        b = {v.get(key) for v in per_set[1]}
        if len(a) == 1 and len(b) == 1 and a != b:
            leads.append(key)
    return leads


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"fit_intercept": False},
        {"solver": "noisy_gd", "max_iter": 20},
        {"rerelease_correlation": 0.9},
    ],
)
def test_dp_linear_regression_publishes_no_exact_count(params):
    assert _leads(lambda s: DPLinearRegression(random_state=s, **params), False) == []


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"deletion_epsilon": 0.01},  # retrain
        {"deletion_epsilon": 0.01, "solver": "output", "C": 1.0},
        {"deletion_epsilon": 0.5, "solver": "output", "C": 1.0},  # fine-tune
        {"feature_norm": "auto"},  # a released bound
        {"feature_norm": "auto", "deletion_epsilon": 0.01},
    ],
)
def test_dp_logistic_regression_publishes_no_exact_count(params):
    assert _leads(lambda s: DPLogisticRegression(random_state=s, **params), True) == []


def test_the_check_finds_an_exact_count():
    """Negative control: publishing the exact number of rows is caught."""

    class Leaky(DPLinearRegression):
        def delete_samples(self, sample_ids):
            super().delete_samples(sample_ids)
            self.n_rows_ = self.unlearning_state_.registry.n_samples
            return self

    assert _leads(lambda s: Leaky(random_state=s), False) == ["n_rows_"]
