"""Timing helpers shared by the benchmarks.

>>> import math
>>> times = []
>>> with timed_calls(math, "sqrt", times):
...     math.sqrt(4.0)
2.0
>>> len(times), math.sqrt.__name__
(1, 'sqrt')
"""

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import ModuleType


@contextmanager
def timed_calls(
    module: ModuleType,
    name: str,
    times: list,
    around: Callable[[], AbstractContextManager] = nullcontext,
):
    """Within the block, each call of ``module.name`` appends its wall time
    (seconds) to ``times``, and runs inside ``around()`` (for instance
    ``SerialBlas``). Timing only: arguments and results pass through, and
    the original is restored on leaving the block.
    """
    original = getattr(module, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            with around():
                return original(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - start)

    setattr(module, name, timed)
    try:
        yield times
    finally:
        setattr(module, name, original)
