"""Independent reference computations for the privacy-core tests.

Nothing here imports sklearn_dpu: these are textbook formulas written out a
second time (exact selection probabilities, binomial confidence bounds), so the
tests compare the library against something it did not compute itself.
"""

import itertools
import math

import numpy as np
from scipy import integrate, special, stats

__all__ = [
    "chisquare_pvalue",
    "clopper_pearson",
    "em_probabilities",
    "gem_scores_loop",
    "log_softmax",
    "max_abs_log_ratio",
    "max_abs_log_ratio_from_logs",
    "pf_probabilities",
    "rnm_probabilities",
    "selection_log_ratio_lower_bound",
    "variance_pvalue",
]


def em_probabilities(utilities, epsilon, sensitivity, monotonic=False):
    """P(i) proportional to exp(eps u_i / (c Delta)), c = 1 if monotonic else 2."""
    u = np.asarray(utilities, dtype=float)
    c = 1.0 if monotonic else 2.0
    logits = epsilon * u / (c * sensitivity)
    logits -= logits.max()
    w = np.exp(logits)
    return w / w.sum()


def pf_probabilities(utilities, epsilon, sensitivity, monotonic=False):
    """Exact output law of permute-and-flip [MS20, Alg. 1].

    Candidate r is returned when every candidate visited before it came up tails
    and its own coin comes up heads. Over the uniform order, the set S visited
    before r has size k with probability 1/N and is uniform among the k-subsets
    of the others, so ``P(r) = p_r sum_k k! (N-1-k)! / N! e_k(1 - p_others)``
    with ``e_k`` the elementary symmetric polynomials (computed by the usual
    product recursion).
    """
    u = np.asarray(utilities, dtype=float)
    n = u.size
    c = 1.0 if monotonic else 2.0
    p = np.exp(epsilon * (u - u.max()) / (c * sensitivity))
    weights = np.array(
        [math.factorial(k) * math.factorial(n - 1 - k) / math.factorial(n) for k in range(n)]
    )
    out = np.zeros(n)
    for r in range(n):
        e = np.zeros(n)
        e[0] = 1.0
        for s in range(n):
            if s != r:
                e[1:] = e[1:] + (1.0 - p[s]) * e[:-1]
        out[r] = p[r] * float(weights @ e)
    return out


def pf_probabilities_by_enumeration(utilities, epsilon, sensitivity, monotonic=False):
    """The same law by brute force over all N! orders (to check the recursion)."""
    u = np.asarray(utilities, dtype=float)
    c = 1.0 if monotonic else 2.0
    p = np.exp(epsilon * (u - u.max()) / (c * sensitivity))
    out = np.zeros(u.size)
    orders = list(itertools.permutations(range(u.size)))
    for order in orders:
        tails = 1.0
        for r in order:
            out[r] += tails * p[r] / len(orders)
            tails *= 1.0 - p[r]
    return out


def rnm_probabilities(utilities, scale):
    """Exact P(argmax_i u_i + Lap(scale)_i = i) by quadrature (no ties a.s.)."""
    u = np.asarray(utilities, dtype=float).tolist()
    b = float(scale)

    def pdf(x):
        return math.exp(-abs(x) / b) / (2 * b)

    def cdf(x):
        return 0.5 * math.exp(x / b) if x < 0 else 1.0 - 0.5 * math.exp(-x / b)

    out = np.zeros(len(u))
    # split at the kinks of the integrand so quad sees smooth pieces
    points = sorted(set(u))
    edges = [points[0] - 50 * b, *points, points[-1] + 50 * b]
    for i in range(len(u)):

        def integrand(x, i=i):
            value = pdf(x - u[i])
            for j in range(len(u)):
                if j != i:
                    value *= cdf(x - u[j])
            return value

        out[i] = sum(
            integrate.quad(integrand, a, c, epsabs=1e-14, epsrel=1e-11, limit=100)[0]
            for a, c in itertools.pairwise(edges)
        )
    return out


def gem_scores_loop(costs, sensitivities, epsilon, beta):
    """The GEM normalised scores (reconstructed from Raskhodnikova & Smith, FOCS
    2016, as in GeneralizedExponentialMechanism), written as a plain double loop."""
    q = [float(c) for c in costs]
    g = [float(s) for s in sensitivities]
    n = len(q)
    t = 2.0 * math.log(n / beta) / epsilon
    r = [q[i] + t * g[i] for i in range(n)]
    scores = []
    for i in range(n):
        best = 0.0  # the j = i term
        for j in range(n):
            if j == i:
                continue
            if g[i] + g[j] > 0:
                term = (r[i] - r[j]) / (g[i] + g[j])
            elif r[i] > r[j]:
                term = math.inf
            elif r[i] < r[j]:
                term = -math.inf
            else:
                term = 0.0
            best = max(best, term)
        scores.append(best)
    return np.array(scores)


def log_softmax(logits):
    """log of the normalised exp(logits); entries at -inf stay -inf."""
    logits = np.asarray(logits, dtype=float)
    return logits - special.logsumexp(logits)


def max_abs_log_ratio_from_logs(log_p, log_q):
    """max_i |log_p_i - log_q_i|; outcomes impossible in one law must be in both."""
    log_p = np.asarray(log_p, dtype=float)
    log_q = np.asarray(log_q, dtype=float)
    if not np.array_equal(np.isneginf(log_p), np.isneginf(log_q)):
        return math.inf
    mask = ~np.isneginf(log_p)
    return float(np.max(np.abs(log_p[mask] - log_q[mask])))


def max_abs_log_ratio(p, q):
    """max_i |log p_i - log q_i| over outcomes with mass; both must vanish together."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    if not np.array_equal(p == 0, q == 0):
        return math.inf
    mask = p > 0
    if not mask.any():
        return 0.0
    return float(np.max(np.abs(np.log(p[mask]) - np.log(q[mask]))))


def clopper_pearson(k, n, alpha):
    """Two one-sided (1 - alpha) Clopper-Pearson bounds on a binomial proportion."""
    low = stats.beta.ppf(alpha, k, n - k + 1) if k > 0 else 0.0
    high = stats.beta.ppf(1 - alpha, k + 1, n - k) if k < n else 1.0
    return float(low), float(high)


def selection_log_ratio_lower_bound(a, b, n_outcomes, confidence=0.999):
    """High-confidence lower bound on max_S |log P[M(D) in S] / P[M(D') in S]|.

    ``a`` and ``b`` are selected indices from M(D) and M(D'). For each single
    outcome and each direction, bound the larger probability from below and the
    smaller from above (Bonferroni over all 2 * n_outcomes tests). If the
    mechanism is eps-DP, the result is <= eps with probability >= confidence.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    alpha = (1.0 - confidence) / (2 * n_outcomes)
    best = 0.0
    for i in range(n_outcomes):
        for first, second in ((a, b), (b, a)):
            k1, k2 = int(np.sum(first == i)), int(np.sum(second == i))
            p_low, _ = clopper_pearson(k1, first.size, alpha)
            _, q_high = clopper_pearson(k2, second.size, alpha)
            if p_low > 0:
                best = max(best, math.log(p_low / q_high))
    return best


def chisquare_pvalue(samples, probabilities, min_expected=5.0):
    """Goodness of fit of sampled indices to ``probabilities``.

    Outcomes with expected count below ``min_expected`` are pooled; an outcome
    with probability 0 that was sampled gives p-value 0.
    """
    probabilities = np.asarray(probabilities, dtype=float)
    counts = np.bincount(np.asarray(samples), minlength=probabilities.size).astype(float)
    n = counts.sum()
    if np.any((probabilities == 0) & (counts > 0)):
        return 0.0
    expected = probabilities * n
    big = expected >= min_expected
    obs = list(counts[big])
    exp = list(expected[big])
    if (~big).any() and expected[~big].sum() > 0:
        obs.append(counts[~big].sum())
        exp.append(expected[~big].sum())
    if len(obs) < 2:
        return 1.0
    return float(stats.chisquare(obs, exp).pvalue)


def variance_pvalue(residuals, sigma):
    """Two-sided p-value that i.i.d. N(0, s^2) residuals have s = sigma.

    Under the null, sum(r^2) / sigma^2 is chi-square with r.size degrees of
    freedom.
    """
    r = np.asarray(residuals, dtype=float).ravel()
    statistic = float(np.sum(r**2) / sigma**2)
    dist = stats.chi2(df=r.size)
    return float(min(1.0, 2 * min(dist.cdf(statistic), dist.sf(statistic))))
