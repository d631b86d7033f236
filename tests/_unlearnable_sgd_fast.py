"""UnlearnableSGDClassifier without the privacy accountant, for statistical tests.

Every deletion report states ``remaining_epsilon`` (``privacy_spent_``), which
runs the PLD accountant on the ledger: seconds per edit at the small noise
multipliers the coupling tests need, thousands of edits per test. The coupling
does not depend on the accounting (which is tested in
``test_unlearnable_sgd.py`` and ``test_unlearnable_sgd_privacy_target.py``),
so these tests report NaN instead.
"""

import math

from sklearn_dpu import UnlearnableSGDClassifier
from sklearn_dpu.privacy.ledger import PrivacySpent


class UnaccountedSGDClassifier(UnlearnableSGDClassifier):
    """Same fit and edits; ``privacy_spent_`` and ``privacy_per_model_`` are NaN."""

    @property
    def privacy_spent_(self):
        return PrivacySpent(math.nan, self.delta)

    @property
    def privacy_per_model_(self):
        return PrivacySpent(math.nan, self.delta)
