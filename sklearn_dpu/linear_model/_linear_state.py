"""The state :class:`~sklearn_dpu.linear_model.DPLinearRegression` keeps to
delete and to stream.

It holds the clipped, fixed-point coded training rows: a file holding it is as
sensitive as the data. Its qualified name is trusted by :mod:`sklearn_dpu.io`
(and so is its former one, ``sklearn_dpu.linear_model._dp_linear``, which
still resolves to it, so files saved before the move load).
"""

import numpy as np

from ..unlearning.state import VersionedState

__all__ = ["LinearStatisticsState"]


class LinearStatisticsState(VersionedState):
    """Everything :class:`~sklearn_dpu.linear_model.DPLinearRegression` needs to delete and stream.

    Attributes
    ----------
    registry : SampleRegistry
        Ids, arrival chunks and fixed-point codes of the live training rows
        (``n * (n_features + 1)`` int16 values). These are clipped, normalized
        training data: a file holding this state is as sensitive as the data.
    statistics : TreeAggregator or None
        ``solver='ssp'``: the tree of exact and noised Gram matrices, at most
        ``floor(log2 t) + 1`` nodes of ``(n_features + 2)^2`` int64 and float64
        values after ``t`` chunks.
    exact_gram : ndarray of int64 or None
        ``solver='noisy_gd'`` (and ``'ambssgd'``, which retrains from
        ``registry``): the exact Gram matrix ((n_features + 2)^2).
    frozen_params : dict
        The parameters of the first fit of the stream.
    center, half_range : float
        The public target interval.
    noise_multiplier : float
        Noise multiplier of one release.
    n_chunks : int
        Chunks received (1 for ``fit``, one more per ``partial_fit``).
    n_rereleases : int
        Deletion calls since the fit (each re-released the statistics).
    release_noise : ndarray or None
        ``rerelease_correlation > 0``: the noise of the current release
        (``(n_features + 2)^2`` floats), from which the next re-release's
        noise is drawn. It is independent of the data but correlated with the
        noise of earlier releases, which contained rows deleted since; the
        released model shows the same correlation, so the stored draw reveals
        nothing of a deleted row beyond the exposure accounted in
        ``privacy_spent_``. A fresh fit holds its own draw too, so the state
        keeps the law of a fresh fit.
    released_count : float or None
        ``solver='noisy_gd'`` or ``'ambssgd'``: the noised record count of the
        last release (charged with it), for public cost estimates.
    bounds : ReleasedBounds or None
        ``feature_norm="auto"`` or ``target_bound="auto"``: the bounds the fit
        released (an ``(eps_b, 0)``-DP release), frozen for the stream and kept
        by deletions.
    feature_norm : float or None
        The row-norm bound the statistics were clipped to when it is not the
        ``feature_norm`` parameter (``sqrt(n_features)`` after the released
        rescaling).

    Notes
    -----
    Besides, a scratch matrix the ``'ssp'`` solve of every release is built in
    (:meth:`solve_buffer`), and above 160 slopes its float32 copy for the
    eigenvalue bound's Lanczos iterations (:meth:`eigen_buffer`): kept between
    releases so that a deletion allocates no ``d x d`` array there, and first
    touched by the fit's own release; never pickled (a loaded state makes
    them again at its first release). Up to 160 slopes LAPACK computes the
    bound on a copy of the system it makes (at most 205 KB).

    Size: O(n d) for the rows, O(d^2 log t) for the statistics. The rows are
    ``2 (d + 1)`` bytes each (row-position ids add nothing, one flag byte a
    row from the first deletion on): 2.2 GB at ``n = 10**8``, ``d = 10``, in
    memory, or in a memory-mapped file with
    :func:`~sklearn_dpu.unlearning.disk_backed_rows` (then 0 bytes a row in
    memory until the first deletion, 1 after). After a Dask fit the rows were
    gathered once, at fit; a deletion reads them here, not from the workers.
    """

    FORMAT_VERSION = 1
    # Class defaults: states saved before these attributes existed load with them.
    n_rereleases = 0
    release_noise = None
    released_count = None
    bounds = None
    feature_norm = None
    _solve_buffer = None
    _eigen_buffer = None

    def __init__(
        self, registry, statistics, exact_gram, frozen_params, center, half_range, noise_multiplier
    ):
        self.registry = registry
        self.statistics = statistics
        self.exact_gram = exact_gram
        self.frozen_params = frozen_params
        self.center = center
        self.half_range = half_range
        self.noise_multiplier = noise_multiplier
        self.n_chunks = 1

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_solve_buffer", None)  # scratches: contents meaningless
        state.pop("_eigen_buffer", None)
        return state

    def solve_buffer(self, size: int) -> np.ndarray:
        """The ``(size, size)`` float64 scratch of the ``'ssp'`` solve (contents undefined).

        Made at the first release that needs it (the fit's, or the first
        after a load) and reused by every later one.
        """
        buffer = self._solve_buffer
        if buffer is None or buffer.shape != (size, size):
            buffer = self._solve_buffer = np.empty((size, size))
        return buffer

    def eigen_buffer(self, size: int) -> np.ndarray:
        """The ``(size, size)`` float32 scratch of the solve's eigenvalue bound
        (contents undefined), made and kept like :meth:`solve_buffer`'s."""
        buffer = self._eigen_buffer
        if buffer is None or buffer.shape != (size, size):
            buffer = self._eigen_buffer = np.empty((size, size), dtype=np.float32)
        return buffer

    def nbytes(self) -> int:
        """Bytes held by arrays of the state, the deletion's scratches (the
        solve's matrix and the noise's bands, rebuilt after a reload at the
        next release) included."""
        total = self.registry.nbytes()
        if self.statistics is not None:
            total += sum(n.exact.nbytes + n.noisy.nbytes for n in self.statistics.nodes)
            scratch = getattr(self.statistics, "_scratch", None)
            total += 0 if scratch is None else scratch.nbytes
        if self.exact_gram is not None:
            total += self.exact_gram.nbytes
        if self.release_noise is not None:
            total += self.release_noise.nbytes
        for buffer in (self._solve_buffer, self._eigen_buffer):
            total += 0 if buffer is None else buffer.nbytes
        return total
