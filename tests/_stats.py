"""Statistical helpers for deterministic distributional tests.

All tests that use these fix their seeds, so they pass or fail the same way on
every run; trial counts are chosen so that a broken implementation (too little
noise, a wrong coupling) fails with a wide margin, and each such test keeps a
negative control that shows it.
"""

import os

import numpy as np
from scipy import stats

__all__ = [
    "audit_epsilon_lower_bound",
    "n_trials",
    "poisson_binomial_pvalue",
    "same_distribution_pvalue",
    "same_indicator_frequencies_pvalue",
]


def n_trials(ci: int, full: int) -> int:
    """``ci`` trials by default; ``full`` when ``SKLEARN_DPU_FULL_STATS=1``."""
    return full if os.environ.get("SKLEARN_DPU_FULL_STATS") == "1" else ci


def same_distribution_pvalue(a, b, n_projections: int = 8, seed: int = 0) -> float:
    """Bonferroni-corrected p-value that two multivariate samples share a law.

    Two-sample Kolmogorov-Smirnov tests on every coordinate and on
    ``n_projections`` fixed random directions (Cramer-Wold), combined by
    Bonferroni. Small p-value: the laws differ.

    Parameters
    ----------
    a, b : array-like of shape (n_a, k) and (n_b, k)
    """
    a = np.atleast_2d(np.asarray(a, dtype=float).T).T
    b = np.atleast_2d(np.asarray(b, dtype=float).T).T
    directions = [np.eye(a.shape[1])[i] for i in range(a.shape[1])]
    rng = np.random.default_rng(seed)
    if a.shape[1] > 1:
        for _ in range(n_projections):
            v = rng.normal(size=a.shape[1])
            directions.append(v / np.linalg.norm(v))
    pvalues = [stats.ks_2samp(a @ v, b @ v).pvalue for v in directions]
    return min(1.0, min(pvalues) * len(pvalues))


def audit_epsilon_lower_bound(
    outputs_d, outputs_d_prime, delta: float, confidence: float = 0.99
) -> float:
    """A high-confidence lower bound on epsilon from samples of M(D) and M(D').

    For every threshold set ``{o > t}`` (and its complement), bound
    ``P[M(D) in S]`` from below and ``P[M(D') in S]`` from above by
    Clopper-Pearson intervals (union bound over tests folded into the
    confidence), and return ``max log((p - delta) / q)``. A correct
    (epsilon, delta)-DP mechanism gives a value below epsilon with probability
    at least ``confidence``.

    Parameters
    ----------
    outputs_d, outputs_d_prime : array-like of shape (n,)
        A scalar statistic of each release (e.g. a projection).
    """
    x = np.sort(np.asarray(outputs_d, dtype=float))
    y = np.sort(np.asarray(outputs_d_prime, dtype=float))
    thresholds = np.quantile(np.concatenate([x, y]), np.linspace(0.01, 0.99, 99))
    n_tests = 4 * len(thresholds)
    alpha = (1.0 - confidence) / n_tests
    best = 0.0
    for t in thresholds:
        for first, second in ((x, y), (y, x)):
            for upper in (True, False):
                k1 = int(np.sum(first > t)) if upper else int(np.sum(first <= t))
                k2 = int(np.sum(second > t)) if upper else int(np.sum(second <= t))
                p_low = stats.beta.ppf(alpha, k1, len(first) - k1 + 1) if k1 > 0 else 0.0
                q_high = (
                    stats.beta.ppf(1 - alpha, k2 + 1, len(second) - k2) if k2 < len(second) else 1.0
                )
                if p_low - delta > 0 and q_high > 0:
                    best = max(best, float(np.log((p_low - delta) / q_high)))
    return best


def same_indicator_frequencies_pvalue(a, b) -> float:
    """Bonferroni-corrected p-value that 0/1 columns have equal frequencies.

    A chi-square test of homogeneity (2x2 table) per column of ``a`` and
    ``b`` (shapes (n_a, k), (n_b, k)); columns constant in both samples are
    skipped. For indicators such as "sample i was in batch t".
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    pvalues = []
    for j in range(a.shape[1]):
        ones = np.array([a[:, j].sum(), b[:, j].sum()])
        table = np.array([ones, [len(a), len(b)] - ones])
        if (table.sum(axis=1) == 0).any():
            continue
        pvalues.append(stats.chi2_contingency(table)[1])
    if not pvalues:
        return 1.0
    return min(1.0, min(pvalues) * len(pvalues))


def poisson_binomial_pvalue(count: int, probabilities) -> float:
    """Two-sided p-value of ``count`` successes of independent Bernoulli(p_i).

    Exact distribution by convolution; the p-value sums the probabilities of
    outcomes no more likely than ``count``.
    """
    pmf = np.array([1.0])
    for p in np.asarray(probabilities, dtype=float):
        pmf = np.convolve(pmf, [1.0 - p, p])
    observed = pmf[count] if count < len(pmf) else 0.0
    return float(min(1.0, pmf[pmf <= observed * (1 + 1e-9)].sum()))
