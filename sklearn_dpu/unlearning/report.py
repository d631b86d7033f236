"""What a deletion did: one :class:`DeletionReport` per ``delete_samples`` call."""

from dataclasses import asdict, dataclass, field

__all__ = ["DeletionReport"]


@dataclass(frozen=True)
class DeletionReport:
    """Record of one ``delete_samples`` call, appended to ``deletion_log_``.

    It names no deleted id and holds no value derived from a deleted row.

    Attributes
    ----------
    n_deleted : int
        How many samples the call removed.
    method : {"exact", "certified", "retrain"}
        How the model was brought to its post-deletion state.
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
    cost : dict
        What the deletion cost: ``wall_time_s`` and method-specific counts
        (e.g. ``recomputed_steps``, ``gradient_evaluations``, ``flops``).
        Counts come from public quantities or released (charged) noisy
        counts, never from the exact number of samples:
        ``DPLogisticRegression``'s ``gradient_evaluations`` is the planner's
        prediction from its chunks' released counts.
    retrain_cost : dict
        The same quantities for a full retrain on the remaining samples
        (estimated from public sizes, not run). ``DPLinearRegression`` uses the
        released count (``released_count``: the intercept entry of the
        released Gram matrix, or noisy GD's noised count) and gives per-row
        costs alone when no count is released (``solver='ssp'`` without
        intercept).
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
    cost: dict = field(default_factory=dict)
    retrain_cost: dict = field(default_factory=dict)
    deletion_epsilon: float | None = None
    deletion_delta: float | None = None
    rerelease_epsilon: float | None = None
    reason: str = ""
    remaining_epsilon: float | None = None
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """The report as plain types (for logs and JSON)."""
        return asdict(self)

    def summary(self) -> str:
        """One human-readable paragraph."""
        speedup = ""
        own, full = self.cost.get("wall_time_s"), self.retrain_cost.get("wall_time_s")
        if own and full:
            speedup = f" in {1e3 * own:.3g} ms (a retrain: about {1e3 * full:.3g} ms)"
        lines = [
            f"deleted {self.n_deleted} sample(s) by {self.method} unlearning{speedup}",
            f"guarantee: {self.guarantee}",
        ]
        if self.deletion_epsilon is not None:
            lines.append(
                f"deletion (eps, delta) = ({self.deletion_epsilon:.4g}, {self.deletion_delta:g})"
            )
        if self.rerelease_epsilon is not None:
            lines.append(
                f"re-release cost to remaining samples: eps = {self.rerelease_epsilon:.4g}"
            )
        if self.remaining_epsilon is not None:
            lines.append(
                f"everything published so far (privacy_spent_): eps = "
                f"{self.remaining_epsilon:.4g} for the most exposed record (one call deleting "
                "many ids costs one re-release)"
            )
        if self.reason:
            lines.append(f"why: {self.reason}")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)
