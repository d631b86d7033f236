"""Where privacy noise comes from.

With ``random_state=None`` every release draws a generator seeded from fresh OS
entropy, and no generator state is ever stored: a stored state would let anyone
holding the estimator regenerate (PCG64 can be stepped backwards) and subtract
past noise. An int seed makes releases reproducible; it is meant for tests and
examples only, because anyone who knows the seed can remove the noise.
"""

from numbers import Integral

import numpy as np

__all__ = ["release_generator"]


def release_generator(
    random_state: None | int | np.random.RandomState, release_index: int
) -> np.random.Generator:
    """Return the generator for the ``release_index``-th release of an estimator.

    Parameters
    ----------
    random_state : None, int or numpy.random.RandomState
        The estimator's ``random_state`` parameter.
    release_index : int
        How many releases the estimator made before this one. Distinct indices
        give independent streams, so no two releases share a noise draw.

    Returns
    -------
    numpy.random.Generator
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, Integral):
        seed = int(random_state)
    elif isinstance(random_state, np.random.RandomState):
        seed = int(random_state.randint(np.iinfo(np.uint32).max))
    else:
        raise TypeError(f"random_state must be None, an int or a RandomState, got {random_state!r}")
    return np.random.default_rng(np.random.SeedSequence([seed, release_index]))
