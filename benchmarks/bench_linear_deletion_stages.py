"""Where a DPLinearRegression one-row deletion spends its time, stage by stage.

At n = 1e5, d = 1000 (``--quick``: n = 5e3, d = 100), after a fit in the same
process, ``--deletions`` one-row deletions back to back; each is split into:

* ``subtract``: the deleted row's products out of the exact Gram matrix;
* ``noise``: the re-release's symmetric Gaussian noise, cast and scaled with
  the codes (``privacy.mechanisms._add_tiled_noise``, for released matrices
  of 512 rows or more; below, the noise is drawn in ``rest``);
* ``solve``: the released model from the released matrix, split into the
  eigenvalue bound (above 160 slopes the float32 copy of the slopes' system
  and the Lanczos iterations; up to 160 LAPACK, and below 128, as with
  ``--quick``, the factorization test that spares it when the lift is 0), the
  conjugate gradients, and the rest (building the slopes' system,
  eliminating the intercept);
* ``rest``: everything else (ids, registry, ledger, report).

Stages are timed by wrapping the library's functions (timing only: the same
calls, the same values). Medians over the deletions after the first; the
first is printed apart. ``--serial-solve`` runs the solve with every BLAS
library on one thread (``sklearn_dpu._row_threads.SerialBlas``), which frees
the noise's second core from the worker OpenBLAS keeps spinning after a
threaded product; the library itself does so up to 1024 coefficients
(``_lifted_solve.solve_blas``), so at d = 1000 the option changes nothing. Writes
``results/linear_deletion_stages[_serial][_Kthreads].txt``.

Run: ``python benchmarks/bench_linear_deletion_stages.py [--threads K]
[--serial-solve] [--deletions N] [--quick]``.
"""

import argparse
import contextlib
import os
import pathlib
import time

import numpy as np
from _timing import timed_calls
from bench_linear_scaling import _data, _params
from threadpoolctl import threadpool_limits

from sklearn_dpu._row_threads import SerialBlas
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    _dp_linear,
    _lifted_solve,
    _linear_solvers,
)
from sklearn_dpu.privacy import mechanisms

RESULTS = pathlib.Path(__file__).parent / "results"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--deletions", type=int, default=30)
    parser.add_argument("--serial-solve", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, d = (5_000, 100) if args.quick else (10**5, 1000)
    stages = {"subtract": [], "noise": [], "solve": []}
    # parts of the solve, printed under it (its rest: the slopes' system and
    # right-hand side, the intercept)
    parts_of_solve = {"bound": [], "cg": []}
    timing = contextlib.ExitStack()
    for module, name, times, around in [
        (_dp_linear, "subtract_gram_of_codes", stages["subtract"], contextlib.nullcontext),
        (mechanisms, "_add_tiled_noise", stages["noise"], contextlib.nullcontext),
        (
            _linear_solvers,
            "solve_noisy_gram",
            stages["solve"],
            SerialBlas if args.serial_solve else contextlib.nullcontext,
        ),
        (_lifted_solve, "_eigenvalue_bound", parts_of_solve["bound"], contextlib.nullcontext),
        # below 128 slopes the bound is the factorization test's (and
        # LAPACK's when it fails), which does not go through _eigenvalue_bound
        (_lifted_solve, "_factored_lift", parts_of_solve["bound"], contextlib.nullcontext),
        (_lifted_solve, "conjugate_gradients", parts_of_solve["cg"], contextlib.nullcontext),
    ]:
        timing.enter_context(timed_calls(module, name, times, around))
    X, y = _data(n, d)  # the scaling benchmark's data and bounds
    load = os.getloadavg()
    lines = [
        "DPLinearRegression deletion stages (bench_linear_deletion_stages.py)",
        f"n = {n}, d = {d}; BLAS threads: {args.threads}; the solve's BLAS threads: "
        + (
            "1 (--serial-solve)"
            if args.serial_solve
            else f"the library's rule (1 up to {_lifted_solve._SERIAL_SLOPES} slopes)"
        )
        + f"; cores: {os.cpu_count()}; load average at start: {load[0]:.1f}",
    ]
    with timing, threadpool_limits(args.threads):
        reg = DPLinearRegression(**{**_params(d), "random_state": None})
        start = time.perf_counter()
        reg.fit(X, y)
        fit = time.perf_counter() - start
        for times in (*stages.values(), *parts_of_solve.values()):
            times.clear()  # the fit's own release
        totals, cpu = [], []
        parts = {name: [] for name in stages}
        inner = {name: [] for name in parts_of_solve}
        for i in range(args.deletions):
            calls = {name: len(times) for name, times in stages.items()}
            inner_calls = {name: len(times) for name, times in parts_of_solve.items()}
            start, cpu_start = time.perf_counter(), time.process_time()
            reg.delete_samples([i])
            totals.append(time.perf_counter() - start)
            cpu.append(time.process_time() - cpu_start)
            for name, times in stages.items():  # this deletion's calls (none: 0)
                parts[name].append(sum(times[calls[name] :]))
            for name, times in parts_of_solve.items():
                inner[name].append(sum(times[inner_calls[name] :]))
    totals = np.array(totals)
    parts = {name: np.array(values) for name, values in parts.items()}
    inner = {name: np.array(values) for name, values in inner.items()}
    rest = totals - sum(parts.values())

    def ms(values):
        return f"{np.median(values[1:]) * 1e3:6.2f} ms (first {values[0] * 1e3:6.2f})"

    lines.append(f"fit (the first in this process): {fit:.2f} s")
    lines.append(f"deletion total  {ms(totals)}; CPU {ms(np.array(cpu))}")
    labels = {
        "bound": "eigenvalue bound (float32 copy and Lanczos, or LAPACK, or the factored lift)",
        "cg": "conjugate gradients",
        "other": "the rest: the slopes' system, the intercept, a factorization",
    }
    for name, values in (*parts.items(), ("rest", rest)):
        lines.append(f"  {name:9s}     {ms(values)}")
        if name == "solve":
            other = values - sum(inner.values())
            for part, times in (*inner.items(), ("other", other)):
                lines.append(f"    {ms(times)}  {labels[part]}")
    lines.append(
        f"fit / median deletion: {fit / np.median(totals[1:]):.0f}x; "
        f"load average at end: {os.getloadavg()[0]:.1f}"
    )
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        suffix = ("_serial" if args.serial_solve else "") + (
            "" if args.threads == 1 else f"_{args.threads}threads"
        )
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"linear_deletion_stages{suffix}.txt").write_text(text)


if __name__ == "__main__":
    main()
