"""Deletion as plan, execute, report.

A ``delete_samples`` call first makes a :class:`DeletionPlan` from public
quantities (which re-releases it will make and why), then executes it, then
reports it: one :class:`DeletionReport` per call, whose work is a typed
:class:`DeletionCost`. The estimator's base class runs the three steps
(:meth:`~sklearn_dpu.base.PrivateEstimatorMixin._run_deletion`) and applies
one timing rule: ``cost.wall_time_s`` is the measured time of the execution
alone, and ``retrain_cost`` is estimated from public quantities (work counts
from parameters, shapes and released counts), never timed; no timing of a fit
is kept.
"""

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields

__all__ = [
    "DeletionCost",
    "DeletionOutcome",
    "DeletionPlan",
    "DeletionReport",
    "with_kept_release",
]


@dataclass(frozen=True)
class DeletionCost(Mapping):
    """Work done by a deletion, or estimated for a retrain.

    Only the fields that apply to an estimator are set; read as a mapping,
    the cost shows exactly those (``report.cost["flops"]``, ``dict(cost)``).
    Counts come from public quantities or released (charged) noisy counts,
    never from the exact number of samples.

    Attributes
    ----------
    action : str or None
        What was done, when an estimator chooses among several ways
        (``DPLogisticRegression``: ``'noise_only'``, ``'noise_finetune'``,
        ``'retrain'``).
    wall_time_s : float or None
        Measured time of the deletion's execution (never set for a retrain,
        which is estimated, not run).
    flops : float or None
        Floating-point operations, counted from public sizes.
    flops_per_row : float or None
        A retrain's operations per training row (when no count is released).
    gradient_evaluations : float or None
        Per-row gradient evaluations, predicted from released counts.
    predicted_gradient_evaluations : float or None
        The prediction the plan was chosen on.
    expected_gradient_evaluations : float or None
        Steps times the expected batch size.
    gradient_steps : int or None
        Full-gradient steps run.
    tested_steps, recomputed_steps : int or None
        Steps of a stored run checked and recomputed.
    renoised_sums : int or None
        Released sums given fresh noise.
    released_count : float or None
        The released (noised, charged) record count an estimate used.
    """

    action: str | None = None
    wall_time_s: float | None = None
    flops: float | None = None
    flops_per_row: float | None = None
    gradient_evaluations: float | None = None
    predicted_gradient_evaluations: float | None = None
    expected_gradient_evaluations: float | None = None
    gradient_steps: int | None = None
    tested_steps: int | None = None
    recomputed_steps: int | None = None
    renoised_sums: int | None = None
    released_count: float | None = None

    def __getitem__(self, key: str):
        value = getattr(self, key, None) if key in _COST_FIELDS else None
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return (name for name in _COST_FIELDS if getattr(self, name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"DeletionCost({', '.join(f'{k}={v!r}' for k, v in self.items())})"


_COST_FIELDS = tuple(f.name for f in fields(DeletionCost))


@dataclass(frozen=True)
class DeletionPlan:
    """How a ``delete_samples`` call will run, chosen before any row changes.

    Made from public quantities (parameters, shapes, released counts, the
    chunks the requested ids arrived in), so that the re-releases can be
    charged before the state changes.

    Attributes
    ----------
    method : {"exact", "certified", "retrain"}
        How the model will be brought to its post-deletion state.
    releases : tuple of Release or None
        The re-releases the call will add to ``privacy_ledger_``, charged to
        the budget before execution (never refused). ``None`` when only the
        execution can tell (a coupled run that tests its steps): the
        execution returns them in :attr:`DeletionOutcome.releases`.
    reason : str
        Why this method was chosen.
    accounting : tuple of Release
        Ledger entries that are not releases but account for what everything
        published shows of the deleted rows (a correlated re-release sharpens
        the view of rows in earlier releases). Charged with the re-releases,
        not counted in ``rerelease_epsilon``.
    """

    method: str
    releases: tuple | None
    reason: str = ""
    accounting: tuple = ()


@dataclass(frozen=True)
class DeletionOutcome:
    """What executing a :class:`DeletionPlan` did, for the report.

    Attributes
    ----------
    guarantee : str
        The guarantee for the deleted rows, in words.
    cost : DeletionCost
        The work done (``wall_time_s`` is filled in by the base class).
    retrain_cost : DeletionCost
        A retrain's work, estimated from public quantities.
    releases : tuple of Release or None
        The re-releases made, when the plan could not say (else ``None``).
    method : str or None
        Overrides the plan's method (a certified action that fell back to a
        retrain).
    reason : str or None
        Overrides the plan's reason.
    deletion_epsilon, deletion_delta : float or None
        See :class:`DeletionReport`.
    notes : tuple of str
    rerelease_epsilon : float or None
        The report's ``rerelease_epsilon`` when the execution knows it and
        the re-releases alone do not say it (a meta-estimator passing on its
        inner estimator's, whose new ledger entries also hold accounting
        entries). ``None``: composed from the re-releases.
    """

    guarantee: str
    cost: DeletionCost = field(default_factory=DeletionCost)
    retrain_cost: DeletionCost = field(default_factory=DeletionCost)
    releases: tuple | None = None
    method: str | None = None
    reason: str | None = None
    deletion_epsilon: float | None = None
    deletion_delta: float | None = None
    notes: tuple[str, ...] = ()
    rerelease_epsilon: float | None = None


@dataclass(frozen=True)
class DeletionReport:
    """Record of one ``delete_samples`` call, appended to ``deletion_log_``.

    It names no deleted id and holds no value derived from a deleted row.

    Attributes
    ----------
    n_deleted : int
        How many samples the call removed.
    method : {"exact", "certified", "retrain"} or str
        How the model was brought to its post-deletion state.
        :class:`~sklearn_dpu.model_selection.PrivateGridSearch` states its
        selected model's method and its own (``"exact model, certified
        selection"``).
    guarantee : str
        The guarantee in words.
    deletion_epsilon : float or None
        For ``certified``: epsilon of the indistinguishability from a retrain
        (with ``deletion_delta``). ``None`` for exact methods, except
        :class:`~sklearn_dpu.linear_model.DPLinearRegression` with
        ``rerelease_correlation > 0``: the epsilon at which everything
        published (before and after the call) shows each deleted sample, which
        the correlated re-release raises above the fit's.
    deletion_delta : float or None
    rerelease_epsilon : float or None
        Privacy cost (toward the remaining samples) of the model released after
        the deletion, alone; ``None`` if nothing was re-released. For a
        correlated re-release, the increment it adds to the joint mechanism.
    cost : DeletionCost
        What the deletion cost: ``wall_time_s`` and method-specific counts
        (e.g. ``recomputed_steps``, ``gradient_evaluations``, ``flops``).
        Counts come from public quantities or released (charged) noisy
        counts, never from the exact number of samples:
        ``DPLogisticRegression``'s ``gradient_evaluations`` is the planner's
        prediction from its chunks' released counts.
    retrain_cost : DeletionCost
        The same quantities for a full retrain on the remaining samples
        (estimated from public sizes, not run or timed). ``DPLinearRegression``
        gives ``flops`` from the released count (``released_count``: the
        intercept entry of the released Gram matrix, or noisy GD's noised
        count) and ``flops_per_row`` alone when no count is released
        (``solver='ssp'`` without intercept).
    reason : str
        Why this method was chosen.
    remaining_epsilon : float or None
        The estimator's ``privacy_spent_.epsilon`` after the call: what
        everything published so far (the fit, earlier re-releases and this
        one) costs the most exposed record, which is a remaining sample unless
        a note says otherwise (with ``DPLinearRegression``'s correlated
        re-release, a deleted row's before/after exposure can be the larger).
        A deletion that re-releases the model raises it; deleting many ids in
        one call costs one re-release.
    notes : tuple of str
        Further statements a reader of the log needs (for example that the
        ids were row positions, or that a shared budget could not be charged).
    """

    n_deleted: int
    method: str
    guarantee: str
    cost: DeletionCost = field(default_factory=DeletionCost)
    retrain_cost: DeletionCost = field(default_factory=DeletionCost)
    deletion_epsilon: float | None = None
    deletion_delta: float | None = None
    rerelease_epsilon: float | None = None
    reason: str = ""
    remaining_epsilon: float | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """The report as plain types (for logs and JSON)."""
        data = asdict(self)
        data["cost"], data["retrain_cost"] = dict(self.cost), dict(self.retrain_cost)
        return data

    def summary(self) -> str:
        """One human-readable paragraph."""
        own = self.cost.get("wall_time_s")
        timing = f" in {1e3 * own:.3g} ms" if own else ""
        kept = (
            " (noise only: the published model is kept; as a private release it "
            "already hides the deleted rows within the deletion epsilon)"
            if self.cost.get("action") == "noise_only"
            else ""
        )
        lines = [
            f"deleted {self.n_deleted} sample(s) by {self.method} unlearning{timing}{kept}",
            f"guarantee: {self.guarantee}",
        ]
        for work in ("flops", "gradient_evaluations", "recomputed_steps"):
            if work in self.cost and work in self.retrain_cost:
                lines.append(
                    f"work: {self.cost[work]:.3g} {work.replace('_', ' ')} (a retrain: "
                    f"about {self.retrain_cost[work]:.3g})"
                )
                break
        if self.deletion_epsilon is not None:
            pair = f"(eps, delta) = ({self.deletion_epsilon:.4g}, {self.deletion_delta:g})"
            if self.method == "exact":  # DPLinearRegression's correlated re-release
                lines.append(
                    f"deleted samples: everything published, before and after this call, "
                    f"shows each of them at {pair}"
                )
            else:
                lines.append(f"deleted samples: within {pair} of a retrain without them")
        if self.rerelease_epsilon is not None:
            lines.append(
                f"re-release cost to remaining samples: eps = {self.rerelease_epsilon:.4g}"
            )
        if self.remaining_epsilon is not None:
            lines.append(
                f"everything published so far (privacy_spent_): eps = "
                f"{self.remaining_epsilon:.4g} for the most exposed record"
                + (
                    " (one call deleting many ids costs one re-release)"
                    if self.rerelease_epsilon is not None
                    else ""
                )
            )
        if self.reason:
            lines.append(f"why: {self.reason}")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def with_kept_release(
    outcome: DeletionOutcome, what: str, epsilon: float, n_deleted: int
) -> DeletionOutcome:
    """``outcome`` restated for a pure-DP release that the deletion keeps.

    A release made from data that held the deleted rows (privately estimated
    bounds, say) and not recomputed is ``(epsilon, 0)``-DP, so by group
    privacy it is within ``(k epsilon, 0)`` of one made without the ``k``
    rows deleted since it was drawn ([DR14]_ Thm 2.2). The rest of the
    state's guarantee holds given it, and the two add (basic composition,
    [DR14]_ Thm 3.16): the method becomes ``"certified"`` and
    ``deletion_epsilon`` the rest's (0 for an exact method) plus
    ``k epsilon``.

    Parameters
    ----------
    outcome : DeletionOutcome
        The guarantee of the rest of the state.
    what : str
        The kept release, in words (e.g. ``"the row-norm bound feature_norm_"``).
    epsilon : float
        Its pure-DP epsilon (of the fit that drew it).
    n_deleted : int
        ``k``: rows requested for deletion since it was drawn, this call's
        included (public: the requesters named them).

    References
    ----------
    .. [DR14] C. Dwork and A. Roth, "The algorithmic foundations of
       differential privacy", 2014.
    """
    k = int(n_deleted)
    kept = k * float(epsilon)
    total = kept + (outcome.deletion_epsilon or 0.0)
    note = (
        f"{what} is kept, not recomputed: an ({float(epsilon):.4g}, 0)-DP release drawn from "
        f"data that held the {k} row(s) deleted since the fit, so within ({kept:.4g}, 0) of "
        "one drawn without them (group privacy); deletion_epsilon adds it to the rest of "
        "the state's guarantee"
    )
    return dataclasses.replace(
        outcome,
        method="certified",
        guarantee=(
            f"certified: {outcome.guarantee}; this holds given {what}, which is kept and "
            f"within ({kept:.4g}, 0) of one drawn without the deleted rows"
        ),
        deletion_epsilon=total,
        deletion_delta=outcome.deletion_delta or 0.0,
        notes=(*outcome.notes, note),
    )
