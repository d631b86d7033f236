"""Display classes: what a model costs in privacy, in utility and in deletion time.

Each display holds plain arrays (what it shows), draws them with ``plot`` and
keeps the matplotlib objects it made, after scikit-learn's
``RocCurveDisplay``. Drawing is post-processing: a plot of released values is
as private as the values (Dwork & Roth [DR14]_, Proposition 2.1). What is
*not* released by an estimator is said where a display takes it: test scores
read the test set, and a retrain time is measured by the caller.

References
----------
.. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of differential
   privacy", Foundations and Trends in Theoretical Computer Science 9(3-4),
   2014.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.metrics import check_scoring

from ..privacy.budget import PrivacyBudget
from ..unlearning.report import DeletionReport

__all__ = ["BudgetTimelineDisplay", "DeletionCostDisplay", "PrivacyUtilityDisplay"]


def _pyplot(who: str):
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is in the test extra
        raise ImportError(f"{who} requires matplotlib: pip install 'sklearn-dpu[plot]'") from exc
    return plt


def _axes(ax, who: str):
    plt = _pyplot(who)
    if ax is None:
        _, ax = plt.subplots()
    return ax, ax.figure


def _positive_vector(values, what: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numbers, got {values!r}") from exc
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D sequence, got shape {array.shape}")
    if not (np.all(np.isfinite(array)) and np.all(array > 0)):
        raise ValueError(f"{what} must be finite and > 0, got {array.tolist()}")
    return array


def _positive_or_none(value, what: str) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not (np.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{what} must be a finite number > 0 or None, got {value!r}")
    return float(value)


class PrivacyUtilityDisplay:
    """Test score against epsilon, with the non-private reference.

    Build it with :meth:`from_estimator` (fits the estimator at each epsilon)
    or :meth:`from_scores` (scores computed elsewhere). The line is the median
    over repeats, the band their range.

    Parameters
    ----------
    epsilons : array-like of shape (n_epsilons,)
        The epsilons, finite and > 0, increasing.
    scores : array-like of shape (n_epsilons, n_repeats) or (n_epsilons,)
        Scores of the private models, one row per epsilon.
    non_private_score : float, default=None
        Score of a non-private model, drawn as a horizontal line.
    name : str, default=None
        Label of the curve.
    score_name : str, default="test score"
        Label of the y axis.

    Attributes
    ----------
    line_ : matplotlib.lines.Line2D
        The median score at each epsilon.
    spread_ : matplotlib.collections.PolyCollection or None
        The band from the lowest to the highest score (``None`` with one repeat).
    reference_line_ : matplotlib.lines.Line2D or None
        The non-private score.
    ax_ : matplotlib.axes.Axes
    figure_ : matplotlib.figure.Figure

    See Also
    --------
    DeletionCostDisplay, BudgetTimelineDisplay

    Examples
    --------
    >>> from sklearn_dpu.inspection import PrivacyUtilityDisplay
    >>> display = PrivacyUtilityDisplay.from_scores(
    ...     [0.1, 1.0, 10.0], [[0.2, 0.4], [0.7, 0.8], [0.9, 0.9]], non_private_score=0.95)
    >>> display.line_.get_ydata().tolist()
    [0.30000000000000004, 0.75, 0.9]
    >>> display.ax_.get_xscale()
    'log'
    """

    def __init__(
        self,
        *,
        epsilons: Sequence[float],
        scores: Any,
        non_private_score: float | None = None,
        name: str | None = None,
        score_name: str = "test score",
    ):
        epsilons = _positive_vector(epsilons, "epsilons")
        if np.any(np.diff(epsilons) <= 0):
            raise ValueError(f"epsilons must be strictly increasing, got {epsilons.tolist()}")
        scores = np.asarray(scores, dtype=float)
        if scores.ndim == 1:
            scores = scores[:, None]
        if scores.ndim != 2 or scores.shape[0] != len(epsilons) or scores.shape[1] == 0:
            raise ValueError(
                f"scores must have one row per epsilon ({len(epsilons)}), got shape {scores.shape}"
            )
        if non_private_score is not None and not np.isfinite(non_private_score):
            raise ValueError(f"non_private_score must be finite, got {non_private_score!r}")
        self.epsilons = epsilons
        self.scores = scores
        self.non_private_score = None if non_private_score is None else float(non_private_score)
        self.name = name
        self.score_name = score_name

    def plot(
        self,
        ax: Any = None,
        *,
        name: str | None = None,
        spread: bool = True,
        line_kwargs: dict | None = None,
        reference_kwargs: dict | None = None,
    ) -> PrivacyUtilityDisplay:
        """Draw the curve.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, default=None
            Axes to draw on; a new figure when ``None``.
        name : str, default=None
            Label of the curve; overrides the display's ``name``.
        spread : bool, default=True
            Whether to shade the range of the repeats.
        line_kwargs, reference_kwargs : dict, default=None
            Passed to ``ax.plot`` for the curve and ``ax.axhline`` for the
            non-private score.

        Returns
        -------
        display : PrivacyUtilityDisplay
        """
        ax, figure = _axes(ax, f"{type(self).__name__}.plot")
        name = self.name if name is None else name
        median = np.median(self.scores, axis=1)
        kwargs = {"marker": "o", "label": name or "private", **(line_kwargs or {})}
        (self.line_,) = ax.plot(self.epsilons, median, **kwargs)
        self.spread_ = None
        if spread and self.scores.shape[1] > 1:
            self.spread_ = ax.fill_between(
                self.epsilons,
                self.scores.min(axis=1),
                self.scores.max(axis=1),
                alpha=0.2,
                color=self.line_.get_color(),
            )
        self.reference_line_ = None
        if self.non_private_score is not None:
            reference = {"linestyle": "--", "color": "k", "label": "non-private"}
            reference.update(reference_kwargs or {})
            self.reference_line_ = ax.axhline(self.non_private_score, **reference)
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel(self.score_name)
        ax.legend(loc="lower right")
        self.ax_, self.figure_ = ax, figure
        return self

    @classmethod
    def from_scores(
        cls,
        epsilons: Sequence[float],
        scores: Any,
        *,
        non_private_score: float | None = None,
        name: str | None = None,
        score_name: str = "test score",
        ax: Any = None,
        **plot_kwargs: Any,
    ) -> PrivacyUtilityDisplay:
        """Plot scores computed elsewhere (the ``from_predictions`` of this display).

        Parameters
        ----------
        epsilons : array-like of shape (n_epsilons,)
        scores : array-like of shape (n_epsilons, n_repeats) or (n_epsilons,)
        non_private_score : float, default=None
        name : str, default=None
        score_name : str, default="test score"
        ax : matplotlib.axes.Axes, default=None
        **plot_kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        display : PrivacyUtilityDisplay
        """
        display = cls(
            epsilons=epsilons,
            scores=scores,
            non_private_score=non_private_score,
            name=name,
            score_name=score_name,
        )
        return display.plot(ax=ax, **plot_kwargs)

    @classmethod
    def from_estimator(
        cls,
        estimator: Any,
        X_train: Any,
        y_train: Any,
        X_test: Any,
        y_test: Any,
        *,
        epsilons: Sequence[float],
        n_repeats: int = 5,
        non_private_estimator: Any = None,
        scoring: str | Callable | None = None,
        param_name: str = "epsilon",
        random_state: int | None = None,
        name: str | None = None,
        ax: Any = None,
        **plot_kwargs: Any,
    ) -> PrivacyUtilityDisplay:
        """Fit clones of ``estimator`` at each epsilon and plot their test scores.

        Each fit is a differentially private release of the training data
        (charged to the estimator's ``budget`` if it has one: ask
        ``budget.can_afford(estimator, n_fits=len(epsilons) * n_repeats)``
        first). The scores read ``X_test, y_test`` and are as private as that
        set is: use held-out data you may publish scores of. The non-private
        reference is not private at all; keep it for your own evaluation.

        Parameters
        ----------
        estimator : estimator or Pipeline
            A private estimator; cloned for every fit.
        X_train, y_train : array-like
            Training data.
        X_test, y_test : array-like
            Data the fitted models are scored on.
        epsilons : array-like of shape (n_epsilons,)
            Strictly increasing, finite and > 0.
        n_repeats : int, default=5
            Fits per epsilon (the noise differs between them).
        non_private_estimator : estimator, default=None
            Fitted once on the training data for the reference line.
        scoring : str or callable, default=None
            As in :func:`sklearn.metrics.check_scoring`; ``None`` is the
            estimator's ``score``.
        param_name : str, default="epsilon"
            The parameter set to each epsilon, e.g.
            ``"dplinearregression__epsilon"`` for a pipeline.
        random_state : int, default=None
            Seeds the fits (through the ``random_state`` parameter next to
            ``param_name``) for a reproducible figure; ``None`` gives every
            fit fresh OS entropy, whatever the estimator's own seed (the
            repeats would otherwise draw the same noise).
        name : str, default=None
            Label of the curve; the estimator's class name by default.
        ax : matplotlib.axes.Axes, default=None
        **plot_kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        display : PrivacyUtilityDisplay
        """
        epsilons = _positive_vector(epsilons, "epsilons")
        if isinstance(n_repeats, bool) or not isinstance(n_repeats, numbers.Integral):
            raise ValueError(f"n_repeats must be an int >= 1, got {n_repeats!r}")
        if n_repeats < 1:
            raise ValueError(f"n_repeats must be an int >= 1, got {n_repeats!r}")
        params = estimator.get_params()
        if param_name not in params:
            raise ValueError(
                f"{type(estimator).__name__} has no parameter {param_name!r}; pass "
                "param_name= (for a pipeline, '<step>__epsilon')"
            )
        prefix = param_name.rpartition("__")[0]
        seed_name = f"{prefix}__random_state" if prefix else "random_state"
        seeds = np.full((len(epsilons), n_repeats), None, dtype=object)
        if random_state is not None:
            seeds = np.random.default_rng(random_state).integers(2**31 - 1, size=seeds.shape)
        scorer = check_scoring(estimator, scoring=scoring)
        models = np.empty((len(epsilons), n_repeats), dtype=object)
        for i, epsilon in enumerate(epsilons):
            for r in range(n_repeats):
                model = clone(estimator).set_params(**{param_name: float(epsilon)})
                if seed_name in params:
                    seed = seeds[i, r]
                    model.set_params(**{seed_name: None if seed is None else int(seed)})
                models[i, r] = model
        _check_budget_for(models.ravel())
        scores = np.empty((len(epsilons), n_repeats))
        for i in range(len(epsilons)):
            for r in range(n_repeats):
                models[i, r].fit(X_train, y_train)
                scores[i, r] = scorer(models[i, r], X_test, y_test)
        reference = None
        if non_private_estimator is not None:
            baseline = clone(non_private_estimator).fit(X_train, y_train)
            reference = check_scoring(baseline, scoring=scoring)(baseline, X_test, y_test)
        if name is None:
            final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
            name = type(final).__name__
        score_name = f"test {scoring}" if isinstance(scoring, str) else "test score"
        return cls.from_scores(
            epsilons,
            scores,
            non_private_score=reference,
            name=name,
            score_name=score_name,
            ax=ax,
            **plot_kwargs,
        )


def _check_budget_for(models) -> None:
    """Refuse, before any fit, fits that the final steps' budgets cannot afford
    all together (each planned from its parameters, as a search does), so a
    display never spends part of a budget and then fails."""
    from ..base import planned_fit
    from ..privacy.ledger import worst_case_events

    planned: dict = {}
    for model in models:
        final = getattr(model, "_final_estimator", model)
        budget = getattr(final, "budget", None)
        if budget is None or not hasattr(final, "_plan_releases"):
            continue
        plan = planned_fit(final)
        events, bounds = planned.setdefault(budget.path, (budget, [], []))[1:]
        events += worst_case_events(plan.releases, budget.delta)
        bounds += [(b.epsilon, b.delta) for b in plan.bounds]
    for budget, events, bounds in planned.values():
        budget.check(events, f"{len(models)} fits of the privacy-utility display", bounds)


class DeletionCostDisplay:
    """Time of each deletion call, against the time of a retrain.

    The deletion times are the ``cost.wall_time_s`` of an estimator's
    :class:`~sklearn_dpu.unlearning.DeletionReport` entries: the measured time
    of each deletion's execution, the only timing a report holds. A retrain's
    time is not published by the estimators (how long a fit takes depends on
    the number of private rows); measure one yourself if you want the
    reference line, and keep that figure with the data, not with the model.

    Parameters
    ----------
    wall_times : array-like of shape (n_calls,)
        Seconds per deletion call, > 0.
    n_deleted : array-like of shape (n_calls,)
        Samples each call deleted.
    methods : sequence of str, default=None
        Each call's method (``"exact"``, ``"certified"``, ...), as reported.
    retrain_time : float, default=None
        Seconds of one retrain, measured by the caller; drawn as a line.
    name : str, default=None
        Label of the deletion curve.

    Attributes
    ----------
    line_ : matplotlib.lines.Line2D
        Seconds per call (or per deleted sample), by call.
    retrain_line_ : matplotlib.lines.Line2D or None
    ax_ : matplotlib.axes.Axes
    figure_ : matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dpu.linear_model import DPLinearRegression
    >>> from sklearn_dpu.inspection import DeletionCostDisplay
    >>> X = np.random.default_rng(0).uniform(-1, 1, (200, 3))
    >>> reg = DPLinearRegression(feature_norm=2.0, target_bound=1.0, random_state=0)
    >>> reg = reg.fit(X, X[:, 0]).delete_samples([0]).delete_samples([1, 2])
    >>> display = DeletionCostDisplay.from_estimator(reg, retrain_time=1.0)
    >>> display.n_deleted.tolist(), len(display.line_.get_ydata())
    ([1, 2], 2)
    """

    def __init__(
        self,
        *,
        wall_times: Sequence[float],
        n_deleted: Sequence[int],
        methods: Sequence[str] | None = None,
        retrain_time: float | None = None,
        name: str | None = None,
    ):
        wall_times = _positive_vector(wall_times, "wall_times")
        n_deleted = np.asarray(n_deleted)
        if n_deleted.shape != wall_times.shape or not np.all(n_deleted >= 1):
            raise ValueError(
                f"n_deleted must hold one count >= 1 per call ({len(wall_times)}), "
                f"got {n_deleted.tolist()}"
            )
        if methods is not None and len(methods) != len(wall_times):
            raise ValueError(f"methods must name one method per call ({len(wall_times)})")
        self.wall_times = wall_times
        self.n_deleted = n_deleted.astype(int)
        self.methods = None if methods is None else tuple(methods)
        self.retrain_time = _positive_or_none(retrain_time, "retrain_time")
        self.name = name

    def plot(
        self,
        ax: Any = None,
        *,
        name: str | None = None,
        per_sample: bool = False,
        line_kwargs: dict | None = None,
        retrain_kwargs: dict | None = None,
    ) -> DeletionCostDisplay:
        """Draw the deletion times (log scale) and the retrain line.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, default=None
        name : str, default=None
            Label of the deletion curve; overrides the display's ``name``.
        per_sample : bool, default=False
            Divide each call's time by the number of samples it deleted.
        line_kwargs, retrain_kwargs : dict, default=None
            Passed to ``ax.plot`` and ``ax.axhline``.

        Returns
        -------
        display : DeletionCostDisplay
        """
        ax, figure = _axes(ax, f"{type(self).__name__}.plot")
        name = self.name if name is None else name
        seconds = self.wall_times / self.n_deleted if per_sample else self.wall_times
        calls = np.arange(1, len(seconds) + 1)
        kwargs = {"marker": "o", "label": name or "deletion", **(line_kwargs or {})}
        (self.line_,) = ax.plot(calls, seconds, **kwargs)
        self.retrain_line_ = None
        if self.retrain_time is not None:
            retrain = {"linestyle": "--", "color": "k", "label": "retrain (measured by you)"}
            retrain.update(retrain_kwargs or {})
            self.retrain_line_ = ax.axhline(self.retrain_time, **retrain)
        from matplotlib.ticker import MaxNLocator  # noqa: PLC0415 (optional dependency)

        ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # calls are counted
        ax.set_xlabel("deletion call")
        ax.set_ylabel("seconds per deleted sample" if per_sample else "seconds per call")
        ax.legend(loc="best")
        self.ax_, self.figure_ = ax, figure
        return self

    @classmethod
    def from_reports(
        cls,
        reports: Sequence[DeletionReport],
        *,
        retrain_time: float | None = None,
        name: str | None = None,
        ax: Any = None,
        **plot_kwargs: Any,
    ) -> DeletionCostDisplay:
        """Plot a sequence of :class:`~sklearn_dpu.unlearning.DeletionReport`.

        Parameters
        ----------
        reports : sequence of DeletionReport
            E.g. an estimator's ``deletion_log_``; each must carry a
            ``cost.wall_time_s``.
        retrain_time : float, default=None
            Seconds of one retrain, measured by the caller.
        name : str, default=None
        ax : matplotlib.axes.Axes, default=None
        **plot_kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        display : DeletionCostDisplay
        """
        reports = list(reports)
        if not reports:
            raise ValueError("no deletion reports: call delete_samples first")
        for k, report in enumerate(reports):
            if not isinstance(report, DeletionReport):
                raise TypeError(f"reports[{k}] is a {type(report).__name__}, not a DeletionReport")
            if report.cost.wall_time_s is None:
                raise ValueError(f"reports[{k}] has no cost.wall_time_s to plot")
        display = cls(
            wall_times=[r.cost.wall_time_s for r in reports],
            n_deleted=[r.n_deleted for r in reports],
            methods=[r.method for r in reports],
            retrain_time=retrain_time,
            name=name,
        )
        return display.plot(ax=ax, **plot_kwargs)

    @classmethod
    def from_estimator(
        cls,
        estimator: Any,
        *,
        retrain_time: float | None = None,
        name: str | None = None,
        ax: Any = None,
        **plot_kwargs: Any,
    ) -> DeletionCostDisplay:
        """Plot the ``deletion_log_`` of a fitted estimator (a pipeline's final step).

        Parameters
        ----------
        estimator : estimator or Pipeline
            Fitted, with at least one deletion.
        retrain_time : float, default=None
            Seconds of one retrain, measured by the caller.
        name : str, default=None
            Label; the estimator's class name by default.
        ax : matplotlib.axes.Axes, default=None
        **plot_kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        display : DeletionCostDisplay
        """
        final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
        log = getattr(final, "deletion_log_", None)
        if log is None:
            raise ValueError(
                f"{type(final).__name__} has no deletion_log_: fit it and call delete_samples"
            )
        return cls.from_reports(
            log,
            retrain_time=retrain_time,
            name=type(final).__name__ if name is None else name,
            ax=ax,
            **plot_kwargs,
        )


class BudgetTimelineDisplay:
    """Epsilon spent on a :class:`~sklearn_dpu.privacy.PrivacyBudget`, charge by charge.

    The step line starts at 0 before the first charge; the k-th step is the
    composed epsilon of the first k charges (``Charge.total_epsilon``), at the
    budget's delta. The budget's cap is a horizontal line.

    Parameters
    ----------
    total_epsilon : array-like of shape (n_charges,)
        Composed epsilon after each charge (non-decreasing, >= 0).
    epsilon_cap : float
        The budget's cap.
    delta : float, default=None
        The delta of the totals, for the axis label.
    descriptions : sequence of str, default=None
        What each charge was (``"DPLinearRegression.fit"``, ...).

    Attributes
    ----------
    line_ : matplotlib.lines.Line2D
        The cumulative epsilon, ``[0, *total_epsilon]`` at ``0, 1, ..., n_charges``.
    cap_line_ : matplotlib.lines.Line2D
    ax_ : matplotlib.axes.Axes
    figure_ : matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dpu.inspection import BudgetTimelineDisplay
    >>> from sklearn_dpu.linear_model import DPLinearRegression
    >>> from sklearn_dpu.privacy import PrivacyBudget
    >>> budget = PrivacyBudget(epsilon=3.0, delta=1e-5)
    >>> X = np.random.default_rng(0).uniform(-1, 1, (100, 2))
    >>> for _ in range(2):
    ...     _ = DPLinearRegression(epsilon=1.0, feature_norm=2.0, target_bound=1.0,
    ...                            budget=budget, random_state=0).fit(X, X[:, 0])
    >>> display = BudgetTimelineDisplay.from_budget(budget)
    >>> np.round(display.line_.get_ydata(), 2).tolist(), display.cap_line_.get_ydata()[0]
    ([0.0, 1.0, 1.47], 3.0)
    """

    def __init__(
        self,
        *,
        total_epsilon: Sequence[float],
        epsilon_cap: float,
        delta: float | None = None,
        descriptions: Sequence[str] | None = None,
    ):
        total = np.asarray(total_epsilon, dtype=float)
        if total.ndim != 1:
            raise ValueError(f"total_epsilon must be 1-D, got shape {total.shape}")
        if not np.all(np.isfinite(total)) or np.any(total < 0) or np.any(np.diff(total) < -1e-9):
            raise ValueError(
                f"total_epsilon must be finite, >= 0 and non-decreasing, got {total.tolist()}"
            )
        if descriptions is not None and len(descriptions) != len(total):
            raise ValueError(f"descriptions must describe each of the {len(total)} charges")
        self.total_epsilon = total
        self.epsilon_cap = _positive_or_none(epsilon_cap, "epsilon_cap")
        if self.epsilon_cap is None:
            raise ValueError("epsilon_cap must be a finite number > 0, got None")
        self.delta = delta
        self.descriptions = None if descriptions is None else tuple(descriptions)

    def plot(
        self,
        ax: Any = None,
        *,
        line_kwargs: dict | None = None,
        cap_kwargs: dict | None = None,
    ) -> BudgetTimelineDisplay:
        """Draw the cumulative epsilon as steps and the cap as a line.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, default=None
        line_kwargs, cap_kwargs : dict, default=None
            Passed to ``ax.plot`` and ``ax.axhline``.

        Returns
        -------
        display : BudgetTimelineDisplay
        """
        ax, figure = _axes(ax, f"{type(self).__name__}.plot")
        from matplotlib.ticker import MaxNLocator

        steps = np.arange(len(self.total_epsilon) + 1)
        kwargs = {"drawstyle": "steps-post", "marker": "o", "label": "spent"}
        kwargs.update(line_kwargs or {})
        (self.line_,) = ax.plot(steps, np.r_[0.0, self.total_epsilon], **kwargs)
        cap = {
            "linestyle": "--",
            "color": "C3",
            "label": f"budget (epsilon = {self.epsilon_cap:g})",
        }
        cap.update(cap_kwargs or {})
        self.cap_line_ = ax.axhline(self.epsilon_cap, **cap)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("charges")
        label = "epsilon spent" if self.delta is None else f"epsilon spent (delta = {self.delta:g})"
        ax.set_ylabel(label)
        ax.legend(loc="best")
        self.ax_, self.figure_ = ax, figure
        return self

    @classmethod
    def from_budget(
        cls, budget: PrivacyBudget, *, ax: Any = None, **plot_kwargs: Any
    ) -> BudgetTimelineDisplay:
        """Plot the ledger of ``budget`` (its hash chain is verified on reading).

        Parameters
        ----------
        budget : PrivacyBudget
        ax : matplotlib.axes.Axes, default=None
        **plot_kwargs
            Passed to :meth:`plot`.

        Returns
        -------
        display : BudgetTimelineDisplay
        """
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"budget must be a PrivacyBudget, got {type(budget).__name__}")
        charges = budget.charges()
        display = cls(
            total_epsilon=[c.total_epsilon for c in charges],
            epsilon_cap=budget.epsilon,
            delta=budget.delta,
            descriptions=[c.description for c in charges],
        )
        return display.plot(ax=ax, **plot_kwargs)
