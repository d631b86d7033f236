"""Numerical edges of accounting and calibration: tiny noise, huge and tiny
epsilon, delta at or above 1/2, numpy scalars."""

import math
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints

from sklearn_dpu._compat import DELTA_CONSTRAINT
from sklearn_dpu.exceptions import UnreliableBoundsWarning
from sklearn_dpu.linear_model import DPLinearRegression, DPLogisticRegression
from sklearn_dpu.privacy import (
    PrivacyBudget,
    calibrate_noise_multiplier,
    check_epsilon_delta,
    gaussian_noise_multiplier,
)
from sklearn_dpu.privacy.accounting import _gaussian_epsilon, epsilon_spent

DELTA = 1e-5

# A child process whose address space is capped at 3 GiB: the old accounting
# asked for tens of GiB here and died with MemoryError.
_LIMITED = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    import numpy as np
    from dp_accounting import dp_event
    from sklearn_dpu.privacy.accounting import epsilon_spent
    from sklearn_dpu.linear_model import UnlearnableSGDClassifier

    sampled = dp_event.PoissonSampledDpEvent(1.0, dp_event.GaussianDpEvent(0.01))
    print(epsilon_spent([dp_event.SelfComposedDpEvent(sampled, 5)], 1e-5))
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 3))
    model = UnlearnableSGDClassifier(noise_multiplier=0.01, random_state=0)
    print(model.fit(X, (X[:, 0] > 0).astype(int)).privacy_spent_.epsilon)
    """
)


def test_tiny_noise_multiplier_is_accounted_without_huge_allocations():
    result = subprocess.run(
        [sys.executable, "-c", _LIMITED], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    sampled, estimator = (float(line) for line in result.stdout.split())
    # sampling probability 1 is the plain Gaussian, whose exact epsilon is known:
    # the PLD answer must be a valid upper bound, and tight
    exact = _gaussian_epsilon(5 / 0.01**2, 1e-5)
    assert exact <= sampled <= exact * 1.01
    assert math.isfinite(estimator) and estimator > 1000


@pytest.mark.parametrize("multiplier", [1e-4, 1e-8, 1e-150])
def test_extreme_noise_multipliers_give_finite_upper_bounds(multiplier):
    event = dp_event.PoissonSampledDpEvent(1.0, dp_event.GaussianDpEvent(multiplier))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnreliableBoundsWarning)  # says so, from a noisy count
        epsilon = epsilon_spent([event, dp_event.LaplaceDpEvent(1.0)], DELTA)
    assert math.isfinite(epsilon)
    assert epsilon >= _gaussian_epsilon(multiplier**-2, DELTA)


def test_coarse_pld_grid_stays_an_upper_bound_of_the_fine_one():
    # noise multiplier 0.1: just above the width where the grid is coarsened
    sampled = dp_event.PoissonSampledDpEvent(1.0, dp_event.GaussianDpEvent(0.1))
    epsilon = epsilon_spent([dp_event.SelfComposedDpEvent(sampled, 3)], DELTA)
    exact = _gaussian_epsilon(3 / 0.1**2, DELTA)
    assert exact <= epsilon <= exact * 1.001


@pytest.mark.parametrize("epsilon", [1e-12, 1e-3, 1.0, 10.0, 1e8, 1e300])
def test_gaussian_calibration_for_any_finite_epsilon(epsilon):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnreliableBoundsWarning)  # says so, from a noisy count
        multiplier = gaussian_noise_multiplier(epsilon, DELTA)
    with np.errstate(all="ignore"):
        achieved = get_epsilon_gaussian(multiplier, DELTA)
        # the smallest such multiplier, up to 1e-9
        assert get_epsilon_gaussian(multiplier * (1 - 1e-8), DELTA) > epsilon or epsilon < 1e-6
    assert achieved <= epsilon


@pytest.mark.parametrize("epsilon", [1e-12, 1e300])
def test_extreme_epsilon_fits_silently(epsilon):
    X = np.random.default_rng(0).uniform(-1, 1, (50, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnreliableBoundsWarning)  # says so, from a noisy count
        reg = DPLinearRegression(epsilon=epsilon, random_state=0).fit(X, X[:, 0])
        spent = reg.privacy_spent_.epsilon
    assert spent <= epsilon * (1 + 1e-9)


@pytest.mark.parametrize("delta", [0.5, 0.7, 1.0, 0.0, -1e-3, math.nan, True])
def test_delta_of_one_half_or_more_is_refused_everywhere(budget_path, delta):
    with pytest.raises(ValueError, match="delta"):
        PrivacyBudget(1.0, delta, budget_path)
    assert not budget_path.exists()
    with pytest.raises(ValueError, match="delta"):
        gaussian_noise_multiplier(1.0, delta)
    with pytest.raises(ValueError, match="delta"):
        calibrate_noise_multiplier(lambda m: [dp_event.LaplaceDpEvent(m)], 1.0, delta)
    with pytest.raises(InvalidParameterError):
        validate_parameter_constraints({"delta": [DELTA_CONSTRAINT]}, {"delta": delta}, "Est")


@pytest.mark.parametrize(
    "epsilon", [np.float32(1.0), np.float64(2.5), np.int64(3), 4, 0.25], ids=repr
)
def test_numpy_real_scalars_are_accepted(budget_path, epsilon):
    budget = PrivacyBudget(epsilon, np.float32(1e-5), budget_path)
    assert type(budget.epsilon) is float and budget.epsilon == float(epsilon)
    assert check_epsilon_delta(epsilon, 1e-5) == (float(epsilon), 1e-5)


@pytest.mark.parametrize(
    "epsilon", [True, np.bool_(True), math.nan, math.inf, -1.0, 0.0, "1", None], ids=repr
)
def test_bad_epsilons_are_refused(budget_path, epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        PrivacyBudget(epsilon, DELTA, budget_path)
    with pytest.raises(ValueError, match="epsilon"):
        check_epsilon_delta(epsilon, DELTA)


@pytest.mark.parametrize(
    "name", ["DPLinearRegression", "DPLogisticRegression", "UnlearnableSGDClassifier"]
)
@pytest.mark.parametrize("delta", [0.5, 0.9, 0.0])
def test_every_estimator_refuses_a_delta_that_states_no_privacy(name, delta):
    import sklearn_dpu

    X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(InvalidParameterError, match="delta"):
        getattr(sklearn_dpu, name)(delta=delta).fit(X, y)


@pytest.mark.parametrize("epsilon", [1e-12, 1e-6, 1e3, 1e6, 1e300])
@pytest.mark.parametrize(
    "make",
    [
        lambda e: DPLinearRegression(epsilon=e, random_state=0),  # "auto" bounds
        lambda e: DPLinearRegression(epsilon=e, solver="noisy_gd", max_iter=20, random_state=0),
        lambda e: DPLogisticRegression(epsilon=e, feature_norm="auto", random_state=0),
    ],
    ids=["linear-auto", "linear-auto-noisy-gd", "logistic-auto"],
)
def test_privately_estimated_bounds_keep_privacy_spent_within_epsilon(make, epsilon):
    """A pure-DP bound composed with the model stays within epsilon at every
    scale (before: the logistic's stated 92 epsilon at 1e-6, the PLD's 1e-4
    grid being coarser than epsilon; 1.08 epsilon at 1e6; the linear model
    crashed at 1e6, RDP having no discrete Laplace)."""
    X = np.random.default_rng(0).uniform(-1, 1, (50, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnreliableBoundsWarning)  # says so, from a noisy count
        model = make(epsilon)
        model.fit(X, X[:, 0] > 0 if isinstance(model, DPLogisticRegression) else X[:, 0])
        assert model.privacy_spent_.epsilon <= epsilon * (1 + 1e-9)


def test_pure_events_compose_by_basic_composition_when_it_is_tighter():
    from sklearn_dpu.privacy.mechanisms import pure_dp_event

    gaussian = dp_event.GaussianDpEvent(1.0)
    alone = epsilon_spent([gaussian], 1e-5)
    # large: the exact sum, where the PLD's coarse grid overshoots it
    assert epsilon_spent([pure_dp_event(500.0), gaussian], 1e-5) <= 500.0 + alone + 1e-12
    # tiny: the Gaussian part in closed form, where the PLD's grid is too coarse
    huge = dp_event.GaussianDpEvent(1e6)
    tiny = epsilon_spent([pure_dp_event(1e-7), huge], 1e-5)
    assert tiny <= 1e-7 + epsilon_spent([huge], 1e-5) + 1e-15
    assert tiny < 1e-5


def test_float32_stored_rows_stay_within_the_smallest_accepted_bound():
    # UnlearnableSGDClassifier keeps its clipped rows in float32: below
    # float32's normal range they would round to rows longer than the bound
    # (at 1e-44 by up to 9%), so such bounds are refused; at the smallest
    # accepted one every stored row is within it, its norm computed exactly
    # enough (long double, rescaled out of the subnormal range).
    from sklearn_dpu import UnlearnableSGDClassifier
    from sklearn_dpu.privacy.clipping import MIN_FLOAT32_NORM_BOUND

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((400, 300)), np.arange(400) % 2
    X[:, 10:] *= 1e-10  # entries that clip to float32 subnormals
    with pytest.raises(InvalidParameterError, match="feature_norm"):
        UnlearnableSGDClassifier(feature_norm=MIN_FLOAT32_NORM_BOUND / 2).fit(X, y)
    bound = MIN_FLOAT32_NORM_BOUND
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the model learns nothing at this scale
        est = UnlearnableSGDClassifier(feature_norm=bound, random_state=0, max_iter=5).fit(X, y)
    registry = est.unlearning_state_.registry
    rows = np.asarray(registry.rows[: registry.size])[:, :-1].astype(np.longdouble)
    assert (np.abs(rows) < np.finfo(np.float32).tiny).any()  # subnormal entries occur
    scaled = rows * np.longdouble(2.0**140)
    norms = np.sqrt(np.sum(scaled * scaled, axis=1)) / np.longdouble(2.0**140)
    assert norms.max() <= bound
