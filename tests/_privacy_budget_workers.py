"""Process entry point for the PrivacyBudget concurrency test.

It lives in an importable module (not in the test file) because the test uses
the ``spawn`` start method, whose children import their target by name.
"""

from dp_accounting import dp_event

from sklearn_dpu.exceptions import BudgetExceededError
from sklearn_dpu.privacy.budget import PrivacyBudget


def concurrent_session(atomic, racy, delta, multiplier, attempts, worker, barrier, queue):
    """Charge two shared ledgers, racing the other workers.

    ``atomic`` and ``racy`` are ``(path, cap)``. Phase 1: after a barrier, try
    ``attempts`` charges of ``GaussianDpEvent(multiplier)`` on the atomic ledger
    with :meth:`PrivacyBudget.charge`. Phase 2 (negative control): a broken,
    non-atomic charge on the racy ledger, ``check`` then a barrier then
    ``charge_over_cap``, so every worker passes the check before any records.

    Puts ``(worker, descriptions charged in phase 1, recorded in phase 2)``.
    """
    event = dp_event.GaussianDpEvent(multiplier)
    budget = PrivacyBudget(atomic[1], delta, atomic[0])
    barrier.wait(timeout=120)
    charged = []
    for j in range(attempts):
        description = f"worker {worker} charge {j}"
        try:
            budget.charge([event], description)
        except BudgetExceededError:
            continue
        charged.append(description)

    racy_budget = PrivacyBudget(racy[1], delta, racy[0])
    description = f"worker {worker} racy charge"
    racy_budget.check([event], description)
    barrier.wait(timeout=120)
    racy_budget.charge_over_cap([event], description)
    queue.put((worker, charged, [f"{description} [over cap]"]))
