"""The privacy core: mechanisms, calibration, accounting, ledgers and budgets.

Nothing here depends on the rest of sklearn_dpu.
"""

from .budget import PrivacyBudget
from .calibration import (
    calibrate_noise_multiplier,
    check_epsilon_delta,
    gaussian_noise_multiplier,
)
from .ledger import PrivacySpent, Release, privacy_spent
from .mechanisms import (
    ExponentialMechanism,
    GaussianCount,
    GaussianMechanism,
    GaussianSteps,
    GeneralizedExponentialMechanism,
    LaplaceMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    pure_dp_event,
)
from .quantiles import GeometricGrid, PrivateQuantile

__all__ = [
    "ExponentialMechanism",
    "GaussianCount",
    "GaussianMechanism",
    "GaussianSteps",
    "GeneralizedExponentialMechanism",
    "GeometricGrid",
    "LaplaceMechanism",
    "PermuteAndFlip",
    "PrivacyBudget",
    "PrivacySpent",
    "PrivateQuantile",
    "Release",
    "ReportNoisyMax",
    "calibrate_noise_multiplier",
    "check_epsilon_delta",
    "gaussian_noise_multiplier",
    "privacy_spent",
    "pure_dp_event",
]
