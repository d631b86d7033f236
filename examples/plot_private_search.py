"""
Choosing hyper-parameters privately
===================================

``GridSearchCV`` publishes exact cross-validation scores, which are
themselves computed from the private data. :class:`~sklearn_dpu.model_selection.PrivateGridSearch`
instead trains every candidate privately on a random training part of the
rows and chooses one by a differentially private selection on the disjoint
rest: no score is published, only the choice. The whole search is checked
against the budget before any data is read and charged once.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from sklearn_dpu.inspection import BudgetTimelineDisplay
from sklearn_dpu.linear_model import DPLogisticRegression
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.privacy import PrivacyBudget

X, y = make_classification(8000, 10, n_informative=5, random_state=0)
X = X / (2 * np.sqrt(10))  # a fixed public scale: rows of norm about 1 or less
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)

budget = PrivacyBudget(epsilon=3.0, delta=1e-5)
search = PrivateGridSearch(
    DPLogisticRegression(epsilon=1.0, feature_norm=1.0),
    param_grid={"C": [0.01, 0.1, 1.0, 10.0]},
    selection_epsilon=1.0,
    budget=budget,
    random_state=0,
)
search.fit(X_train, y_train)
print("chosen:", search.best_params_)
print(f"test accuracy of the chosen model: {np.mean(search.predict(X_test) == y_test):.3f}")
print("privacy spent by the search:", search.privacy_spent_)

# %%
# Because a row is in the training part or in the validation part, never
# both, the search costs the larger of the two parts' costs, not their sum.
# The budget was charged once for the whole search; a later private fit on
# the same data is charged on top of it.
DPLogisticRegression(epsilon=1.0, feature_norm=1.0, budget=budget, **search.best_params_).fit(
    X_train, y_train
)
display = BudgetTimelineDisplay.from_budget(budget)
for k, description in enumerate(display.descriptions, start=1):
    print(f"charge {k}: {description}")
display.ax_.set_title("the search, then one more fit")
plt.tight_layout()
