"""Displays: privacy-utility curves, deletion costs and budget timelines.

In the style of scikit-learn's ``*Display`` classes: each holds the values it
shows, draws them with :meth:`plot` and exposes the matplotlib objects as
``ax_``, ``figure_`` and ``line_``; classmethods build one from an estimator,
a budget, or precomputed values. Matplotlib is needed only to plot
(``pip install sklearn-dpu[plot]``).
"""

from ._displays import BudgetTimelineDisplay, DeletionCostDisplay, PrivacyUtilityDisplay

__all__ = ["BudgetTimelineDisplay", "DeletionCostDisplay", "PrivacyUtilityDisplay"]
