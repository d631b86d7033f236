"""Continual release of running sums by the binary tree mechanism.

Data arrives in chunks (``fit``, then ``partial_fit`` calls); after each chunk
the running sum is released. Releasing the exact running sum with fresh noise
each time would make every record pay one release per chunk. The tree
mechanism [CSS11]_ [DNPR10]_ instead keeps dyadic partial sums, each noised
once, and releases a prefix as the sum of at most ``floor(log2 t) + 1`` of
them; a record belongs to at most that many noised nodes, so its privacy loss
grows with ``log t``.

We keep the Fenwick form of the binary tree (Ullah, PhD thesis, Johns Hopkins
University 2024, Ch. 5, whose Alg. 30-32 as printed are garbled; the
index arithmetic below is the standard Fenwick tree): chunk
``t`` completes node ``F(t)`` covering chunks ``(t - lowbit(t), t]``. Only the
nodes of the current prefix are stored (they partition the chunks seen), since
every later node is a sum of them and of new chunks. Their exact sums are
integers, so removing a record is an exact subtraction.

References
----------
.. [CSS11] T.-H. H. Chan, E. Shi and D. Song, "Private and continual release of
   statistics", ACM TISSEC 2011, Section 3.4.
.. [DNPR10] C. Dwork, M. Naor, T. Pitassi and G. Rothblum, "Differential privacy
   under continual observation", STOC 2010.
"""

from dataclasses import dataclass

import numpy as np

from .._transaction import on_commit, on_rollback
from .._validation import is_scratch
from .mechanisms import GaussianMechanism, symmetric_scratch

__all__ = ["TreeAggregator", "TreeNode"]


@dataclass
class TreeNode:
    """A noised dyadic sum over chunks ``first .. last`` (inclusive).

    ``exact`` is secret; ``noisy`` is ``exact`` plus the node's own noise.
    """

    first: int
    last: int
    exact: np.ndarray
    noisy: np.ndarray


class TreeAggregator:
    """Running sums of exact integer statistics, released through a tree.

    Parameters
    ----------
    mechanism : GaussianMechanism
        Noise added once to each node. ``contribution_bound`` must bound one
        record's contribution to a node in the norm the mechanism assumes.
    symmetric : bool
        Statistics are symmetric matrices (noise by ``release_symmetric``).
    scale : float
        Multiplier from the integer codes of the exact sums to real units;
        noise is added in real units.
    """

    def __init__(self, mechanism: GaussianMechanism, symmetric: bool, scale: float):
        self.mechanism = mechanism
        self.symmetric = symmetric
        self.scale = scale
        self.nodes: list[TreeNode] = []
        self.n_chunks = 0

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_scratch", None)  # the noise's scratch: contents meaningless
        state.pop("_spares", None)  # the next re-releases' buffers: likewise
        return state

    def _noised(self, exact: np.ndarray, rng, out: np.ndarray | None = None) -> np.ndarray:
        # Cast and scale in one pass (the same float64 values as astype, then *=),
        # into ``out`` if given; a symmetric release does it tile by tile.
        if not self.symmetric:
            value = np.multiply(exact, self.scale, out=out, dtype=np.float64)
            return self.mechanism.release(value, rng)
        # The bands of noise are drawn in a scratch kept from one release to
        # the next (made by the fit's), never pickled: a deletion's re-release
        # allocates no band (the tiled draw of large matrices needs none).
        self._scratch = symmetric_scratch(len(exact), self.__dict__.get("_scratch"))
        return self.mechanism.release_scaled_symmetric(
            exact, self.scale, rng, out=out, work=self._scratch
        )

    def append(self, chunk_sum: np.ndarray, rng: np.random.Generator) -> TreeNode:
        """Add the next chunk's exact sum; noise the node it completes.

        Parameters
        ----------
        chunk_sum : ndarray of int64
            Exact (integer-coded) sum of the chunk's records.
        rng : numpy.random.Generator

        Returns
        -------
        TreeNode
            The new node (its range is what this release touched).
        """
        t = self.n_chunks + 1
        first = t - (t & -t) + 1
        merged = [node for node in self.nodes if node.first >= first]
        kept = [node for node in self.nodes if node.first < first]
        exact = chunk_sum.astype(np.int64, copy=True)
        for node in merged:
            exact += node.exact
        node = TreeNode(first, t, exact, self._noised(exact, rng))
        self.nodes = [*kept, node]
        self.n_chunks = t
        spares = self.__dict__.setdefault("_spares", [])
        if self.symmetric and not any(is_scratch(b, exact.shape, own=True) for b in spares):
            # renoise's buffer, its pages touched here rather than in the
            # first deletion (8 MB at q = 1000: a fault every 4 KiB)
            spare = np.empty_like(node.noisy)
            spare.fill(0.0)
            spares.append(spare)
        return node

    def node_of(self, chunk: int) -> TreeNode:
        """The stored node whose range contains ``chunk``."""
        for node in self.nodes:
            if node.first <= chunk <= node.last:
                return node
        raise KeyError(chunk)

    def renoise(self, node: TreeNode, rng: np.random.Generator) -> None:
        """Replace ``node``'s noise by a fresh draw (after its exact sum changed).

        The new release goes to a spare buffer, one per node a deletion
        renoises, kept from one call to the next and never pickled: a fresh
        ``q x q`` array would cost a page fault every 4 KiB (8 MB at
        q = 1000) at every deletion. The old one becomes a spare when the
        enclosing
        :func:`~sklearn_dpu._transaction.atomic` block commits: until then
        it is the release a failed deletion puts back (with the node's
        attributes, which the caller keeps). Same values.
        """
        spares = self.__dict__.setdefault("_spares", [])
        shape, old = node.exact.shape, node.noisy
        index = next((i for i, b in enumerate(spares) if is_scratch(b, shape, own=True)), None)
        spare = None if index is None else spares.pop(index)
        if spare is not None:
            on_rollback(lambda: spares.append(spare))
        node.noisy = self._noised(node.exact, rng, out=spare if self.symmetric else None)
        if self.symmetric and is_scratch(old, shape, own=True):
            on_commit(lambda: spares.append(old))

    def draw_noise(self, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        """A fresh draw of the noise one node receives (no data involved)."""
        return self._noised(np.zeros(shape, dtype=np.int64), rng)

    def set_noise(self, node: TreeNode, noise: np.ndarray) -> None:
        """Release ``node`` with the given noise draw (its exact sum plus ``noise``).

        For correlated re-releases: the caller builds ``noise`` from noise
        draws only, never from released values, so no rounding of the exact
        sum leaks into it.
        """
        node.noisy = node.exact.astype(np.float64) * self.scale + noise

    def released_sum(self) -> np.ndarray:
        """The current noisy running sum (post-processing of released nodes)."""
        if len(self.nodes) == 1:  # the usual case: no stacked temporary
            return self.nodes[0].noisy.copy()
        return np.sum([node.noisy for node in self.nodes], axis=0)

    def exact_sum(self) -> np.ndarray:
        """The secret exact running sum, in real units."""
        return np.sum([node.exact for node in self.nodes], axis=0) * self.scale
