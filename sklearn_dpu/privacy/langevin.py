"""Noisy gradient descent as Langevin dynamics: the mechanism and its two bounds.

:class:`LangevinRun` draws the noise of ``K`` full-batch noisy gradient steps
on a ``Lambda``-strongly convex, ``beta``-smooth summed objective
``F(theta) = sum_i l(theta; x_i) + Lambda/2 ||theta||^2``::

    theta_{k+1} = theta_k - eta grad F(theta_k) + sqrt(2 eta) sigma xi_k,   xi_k ~ N(0, I)

from the data-independent start ``theta_0 ~ N(0, sigma^2 / (Lambda (1 - eta
Lambda / 2)) I)`` (Chourasia & Shah 2023, Alg. 2 and Thm 5.1, the start
written for the summed objective), and gives two bounds for a record whose
gradient is at most ``G`` in norm (add/remove-one; the sensitivity of the
gradient sum is ``G``):

* **composition** (the ledger's ``dp_event``): step ``k`` releases
  ``grad F(theta_k) + N(0, (2 sigma^2 / eta) I)``, a Gaussian mechanism with
  multiplier ``m = sigma sqrt(2 / eta) / G``; ``K`` of them compose exactly
  (``SelfComposedDpEvent``). Valid for every step size and every loss, and it
  covers an observer who sees every iterate.
* **Langevin** (Rényi, the last iterate only): Chourasia & Shah 2023, the
  proof of Thm G.15 (its phase I, the record present from the start; Thm G.9
  states the same bound loosened, with the erratum ``eta^2`` printed for
  ``n^2``), for ``eta < 1 / (Lambda + beta)``::

      R_q <= q G^2 / (2 c sigma^2) (1 - exp(-c eta K)),   c = Lambda (1 - eta Lambda / 2)

  i.e. ``rho``-zCDP with ``rho = G^2 / (2 c sigma^2) (1 - e^{-c eta K})``.
  ``c`` is the log-Sobolev constant the dynamics keep from the start
  (Lemma G.14). The proof integrates ``d/ds (e^{c s} R_q / q) <= e^{c s} g^2 /
  (2 sigma^2)`` along a characteristic ``q(s)`` (Lemma G.13, Lemma G.6) with
  ``g`` the gap between the two runs' drifts: ``2 L / n`` in the paper's mean
  objective under replacement, ``G`` here (summed objective, add/remove);
  its last line then loosens ``1 / (1 - eta Lambda / 2) <= 2`` and ``c >=
  Lambda / 2``, which is the Theorem's ``4 q L^2 / (lambda sigma^2 n^2)
  exp(-lambda eta K / 2)``. This module keeps the line before the loosening:
  a stationary value half as large and a decay twice as fast, both proven.
  Uniform in ``K``; smaller than the composition once ``c eta K >= 1.6``
  (and twice it for few steps, where :attr:`LangevinRun.rho` takes the
  smaller of the two, both being valid).

Deletion (Chourasia & Shah 2023, Thm 5.1 (18), the proof of Thm G.15 before
its last loosening): after ``K`` more steps on data sets that agree (the
record removed), the divergence from a run that never saw it is at most
``rho_0 exp(-c eta K)``, ``rho_0 = G^2 / (2 c sigma^2)`` the stationary
Langevin bound (any number of earlier steps).
:func:`unlearning_steps` inverts it. The bound is linear in the order ``q``
for every ``q > 1`` (a zCDP bound), so the conversion to ``(epsilon,
delta)`` by ``dp_accounting``'s RDP accountant optimizes the order per
deletion. Numerical check (``tests/test_dp_logistic_langevin.py``): for 1-D
dynamics with a linear record loss, whose laws are Gaussian with a computable
divergence, the exact stationary ``R_q`` is ``(1 - eta Lambda / 2)^2`` of
this bound (nearly tight at the small ``eta Lambda`` a fit uses) and decays
per step by ``(1 - eta Lambda)^2 <= exp(-c eta)``.

``dp_accounting`` has no event for the Langevin bound as a privacy *profile*:
a ``rho``-zCDP guarantee does not imply the Gaussian mechanism's profile (its
hockey-stick curve is tighter than any zCDP conversion). The ledger therefore
holds the composed Gaussian (valid, looser); the zCDP bound is what the
deletion certificates start from (:func:`unlearning_rho`, converted by
``dp_accounting``'s RDP accountant in :func:`zcdp_epsilon`), and
:meth:`LangevinRun.zcdp_event` gives it as an event for callers who want it.

References
----------
.. [CS23] R. Chourasia and N. Shah, "Forget unlearning: towards true
   data-deletion in machine learning", ICML 2023: Alg. 2, Def. 5.1, Thm 5.1,
   Thm G.9 (with the erratum above), Lemma G.6, Lemma G.13, Lemma G.14,
   Thm G.15 and its proof, Thm 4.3.
.. [BS16] M. Bun and T. Steinke, "Concentrated differential privacy:
   simplifications, extensions, and lower bounds", TCC 2016, Prop. 1.3
   (Gaussian mechanism is zCDP), Lemma 2.3 (composition).
.. [DRS22] J. Dong, A. Roth and W. J. Su, "Gaussian differential privacy",
   JRSS B 2022, Cor. 3.3.
"""

import math
from dataclasses import dataclass

import numpy as np
from dp_accounting import dp_event as _events
from dp_accounting.rdp import RdpAccountant

__all__ = ["LangevinRun", "unlearning_rho", "unlearning_steps", "zcdp_epsilon"]

_ORDERS = tuple(
    [1.0 + x / 20.0 for x in range(1, 20)] + [2.0 + x / 4.0 for x in range(1, 100)]
) + tuple(float(q) for q in range(27, 4097, 4))


@dataclass(frozen=True)
class LangevinRun:
    """``steps`` noisy full-batch gradient steps at temperature ``sigma`` [CS23]_.

    Parameters
    ----------
    contribution_bound : float
        ``G``: bound on the norm of one record's gradient (add/remove sensitivity
        of the gradient sum).
    ridge : float
        ``Lambda``: strong convexity of the summed objective.
    step_size : float
        ``eta``; the Langevin bound needs ``eta <= 1 / (Lambda + beta)``.
    temperature : float
        ``sigma``: each step adds ``N(0, 2 eta sigma^2 I)``.
    steps : int
        ``K``.
    """

    contribution_bound: float
    ridge: float
    step_size: float
    temperature: float
    steps: int

    @property
    def noise_multiplier(self) -> float:
        """Multiplier of one step as a Gaussian release of the gradient sum."""
        return self.temperature * math.sqrt(2.0 / self.step_size) / self.contribution_bound

    @property
    def step_std(self) -> float:
        """Standard deviation of one step's noise on each coordinate."""
        return math.sqrt(2.0 * self.step_size) * self.temperature

    @property
    def init_std(self) -> float:
        """Standard deviation of the data-independent start ([CS23]_ Thm 5.1)."""
        lam, eta = self.ridge, self.step_size
        return self.temperature / math.sqrt(lam * (1.0 - eta * lam / 2.0))

    @property
    def dp_event(self) -> _events.DpEvent:
        """The composition of the ``steps`` Gaussian releases (the ledger's event)."""
        gaussian = _events.GaussianDpEvent(noise_multiplier=float(self.noise_multiplier))
        return _events.SelfComposedDpEvent(gaussian, int(self.steps))

    @property
    def contraction(self) -> float:
        """``c = Lambda (1 - eta Lambda / 2)``: the log-Sobolev constant of the
        dynamics ([CS23]_ Lemma G.14) and the rate, per unit of time ``eta K``,
        at which the divergence decays (the proof of Thm G.15)."""
        lam = self.ridge
        return lam * (1.0 - self.step_size * lam / 2.0)

    @property
    def stationary_rho(self) -> float:
        """``G^2 / (2 c sigma^2)``: the Langevin zCDP bound for any number of
        steps ([CS23]_ proof of Thm G.15, before its last loosening)."""
        return self.contribution_bound**2 / (2.0 * self.contraction * self.temperature**2)

    @property
    def langevin_rho(self) -> float:
        """The Langevin zCDP bound of these ``steps`` from a data-independent start
        ([CS23]_ proof of Thm G.15, phase I; Thm G.9 loosened it)."""
        decay = -math.expm1(-self.contraction * self.step_size * self.steps)
        return self.stationary_rho * decay

    @property
    def composition_rho(self) -> float:
        """zCDP of the composed Gaussian releases: ``K / (2 m^2)`` ([BS16]_)."""
        return self.steps / (2.0 * self.noise_multiplier**2)

    @property
    def rho(self) -> float:
        """The smaller of the two valid zCDP bounds of the last iterate."""
        return min(self.langevin_rho, self.composition_rho)

    def zcdp_event(self) -> _events.ZCDpEvent:
        """``dp_accounting``'s event of the (tighter) zCDP bound of the last iterate."""
        return _events.ZCDpEvent(rho=float(self.rho))

    def start(self, n_params: int, rng: np.random.Generator) -> np.ndarray:
        """Draw the data-independent start."""
        return rng.normal(0.0, self.init_std, size=n_params)

    def step_noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        """One step's noise, ``N(0, 2 eta sigma^2 I)`` of the given shape."""
        return rng.normal(0.0, self.step_std, size=shape)

    def with_steps(self, steps: int) -> "LangevinRun":
        """The same dynamics run for ``steps`` steps (a continuation)."""
        return LangevinRun(
            self.contribution_bound, self.ridge, self.step_size, self.temperature, int(steps)
        )


def zcdp_epsilon(rho: float, delta: float) -> float:
    """``epsilon`` at ``delta`` of a ``rho``-zCDP guarantee, by ``dp_accounting``'s
    RDP accountant (its conversion from the RDP curve ``q rho``)."""
    if rho <= 0:
        return 0.0
    accountant = RdpAccountant(orders=list(_ORDERS))
    accountant.compose(_events.ZCDpEvent(rho=float(rho)))
    return float(accountant.get_epsilon(float(delta)))


def unlearning_rho(run: LangevinRun, steps: int, floor_rho: float = 0.0, group: int = 1) -> float:
    """zCDP bound of ``group`` deleted records after ``steps`` steps without them.

    ``floor_rho + k^2 rho_0 exp(-c eta K)`` with ``rho_0 = G^2 / (2 c
    sigma^2)`` the stationary Langevin bound and ``c = Lambda (1 - eta Lambda
    / 2)`` ([CS23]_ Thm 5.1 (18), the proof of Thm G.15 before its last
    loosening: the divergence grows to at most ``rho_0`` while the record is
    present, whatever the number of steps, then contracts). ``k`` records move the gradient sum
    by ``k G``, so the stationary bound of the group is ``k^2 rho_0`` (the same
    proof with the sensitivity ``k G``). ``floor_rho`` is what other releases
    that do not decay (a released count) add, by composition ([BS16]_ Lemma
    2.3); the caller scales it to the group.
    """
    decay = math.exp(-run.contraction * run.step_size * steps)
    return floor_rho + group**2 * run.stationary_rho * decay


def unlearning_steps(
    run: LangevinRun, epsilon: float, delta: float, floor_rho: float = 0.0, group: int = 1
) -> int | None:
    """Fewest steps after which a deleted record is ``(epsilon, delta)``-deleted.

    ``None`` when no number of steps reaches it (``floor_rho`` alone exceeds
    it). Found by bisection on :func:`unlearning_rho` with the ``dp_accounting``
    conversion of :func:`zcdp_epsilon`.
    """
    if zcdp_epsilon(floor_rho, delta) >= epsilon:
        return None
    lo, hi = 0.0, 1.0
    if zcdp_epsilon(unlearning_rho(run, 0, floor_rho, group), delta) <= epsilon:
        return 0
    while zcdp_epsilon(unlearning_rho(run, int(hi), floor_rho, group), delta) > epsilon:
        hi *= 2.0
    while hi - lo > 1:
        mid = math.floor((lo + hi) / 2.0)
        if zcdp_epsilon(unlearning_rho(run, mid, floor_rho, group), delta) > epsilon:
            lo = mid
        else:
            hi = mid
    return int(hi)
