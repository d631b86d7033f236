"""The helpers the benchmarks share run as documented (timing only: no speed is asserted)."""

import doctest
import importlib.util
import math
import pathlib

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_timing_helper_examples_run():
    result = doctest.testmod(_load("_timing"))
    assert result.attempted > 0 and result.failed == 0


def test_timed_calls_restores_the_original_even_after_an_error():
    timing = _load("_timing")
    times, entered = [], []

    class Around:
        def __enter__(self):
            entered.append(True)

        def __exit__(self, *exc):
            return False

    original = math.sqrt
    try:
        with timing.timed_calls(math, "sqrt", times, Around):
            assert math.sqrt(9.0) == 3.0
            math.sqrt(-1.0)
    except ValueError:
        pass
    assert math.sqrt is original
    assert len(times) == 2 and entered == [True, True]
