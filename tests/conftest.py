import matplotlib
import pytest

matplotlib.use("Agg")


@pytest.fixture
def budget_path(tmp_path):
    """A fresh path for a PrivacyBudget ledger."""
    return tmp_path / "budget.sqlite"
