"""DPLinearRegression: a one-row deletion against a *warm* fit, and the dense cut-off.

``bench_linear_scaling.py`` compares a deletion with the first fit in a fresh
process; a fit is faster once warm (at n = 1e6, d = 100 on 2 cores, 0.34-0.45 s
against 0.63-0.72 s), so this compares the median deletion with the best of
the later fits in the same process, at n = 1e6 and several d.

The eigenvalue bound of each release is computed exactly by LAPACK up to
``_lifted_solve._DENSE_SLOPES`` slopes and by Lanczos iterations above.
``--cutoffs A B`` times the deletions with each value of that constant in
turn, interleaved in blocks of 20 (the same process, the same model; the
released models differ only in the lift's last digits), which is how it was
chosen. ``--baseline MODULE`` also times the deletions of a model fitted by
an older copy of the package, importable as ``MODULE`` (made as
``bench_solver_speed.py`` says), in the same blocks: before and after under
the same load. Writes ``results/linear_deletion_warm[_Kthreads][_LABEL].txt``.

Run: ``python benchmarks/bench_linear_deletion_warm.py [--threads K] [--n N]
[--dims D ...] [--cutoffs A B ...] [--deletions N] [--label LABEL]
[--baseline MODULE]``.
"""

import argparse
import importlib
import os
import pathlib
import time

import numpy as np
from bench_linear_scaling import _data, _params
from threadpoolctl import threadpool_limits

from sklearn_dpu.linear_model import DPLinearRegression, _lifted_solve

RESULTS = pathlib.Path(__file__).parent / "results"


def measure(n, d, cutoffs, deletions, block=20, baseline=None):
    X, y = _data(n, d)  # the scaling table's data and public bounds
    params = _params(d)
    fits = []
    for _ in range(3):
        start = time.perf_counter()
        reg = DPLinearRegression(**params).fit(X, y)
        fits.append(time.perf_counter() - start)
    # (label, model, dense cut-off or None for the baseline's own)
    variants = [(f"dense cut-off {cut:4d}", reg, cut) for cut in cutoffs]
    if baseline is not None:
        older = baseline.linear_model.DPLinearRegression(**params).fit(X, y)
        variants.append((f"baseline {baseline.__name__:>9s}", older, None))
    next_id = {}
    for _, model, _ in variants:
        if id(model) not in next_id:
            for i in range(5):  # the first deletions after a fit allocate the flags
                model.delete_samples([i])
            next_id[id(model)] = 5
    times = {label: [] for label, _, _ in variants}
    original = _lifted_solve._DENSE_SLOPES
    try:
        for b in range(max(1, deletions // (block * len(variants)))):
            for label, model, cut in variants if b % 2 == 0 else variants[::-1]:
                _lifted_solve._DENSE_SLOPES = original if cut is None else cut
                for _ in range(block):
                    start = time.perf_counter()
                    model.delete_samples([next_id[id(model)]])
                    times[label].append(time.perf_counter() - start)
                    next_id[id(model)] += 1
    finally:
        _lifted_solve._DENSE_SLOPES = original
    warm = min(fits[1:])
    return [
        f"n = {n}, d = {d:4d}, {label}: median deletion "
        f"{np.median(ts) * 1e3:7.3f} ms; warm fit {warm:.3f} s ({warm / np.median(ts):5.0f}x), "
        f"first fit {fits[0]:.3f} s ({fits[0] / np.median(ts):5.0f}x)"
        for label, ts in times.items()
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--dims", type=int, nargs="+", default=[20, 100, 200, 300])
    parser.add_argument("--cutoffs", type=int, nargs="+", default=[_lifted_solve._DENSE_SLOPES])
    parser.add_argument("--deletions", type=int, default=200, help="per cut-off and d")
    parser.add_argument("--label", default="", help="suffix of the result file")
    parser.add_argument("--baseline", default=None, help="module name of an older copy")
    args = parser.parse_args()
    baseline = importlib.import_module(args.baseline) if args.baseline else None
    lines = [
        "DPLinearRegression one-row deletion against a warm fit (bench_linear_deletion_warm.py)",
        f"BLAS threads: {args.threads}; cores: {os.cpu_count()}; load average at start: "
        f"{os.getloadavg()[0]:.1f}; medians of {args.deletions} deletions per cut-off, "
        "interleaved in blocks of 20"
        + (f"; baseline = {args.baseline} (its own cut-off)" if baseline else ""),
        "(the fits timed are the current package's)",
    ]
    print("\n".join(lines), flush=True)
    with threadpool_limits(args.threads):
        for d in args.dims:
            variants = len(args.cutoffs) + (baseline is not None)
            rows = measure(args.n, d, args.cutoffs, args.deletions * variants, baseline=baseline)
            print("\n".join(rows), flush=True)
            lines += rows
    lines.append(f"load average at end: {os.getloadavg()[0]:.1f}")
    suffix = ("" if args.threads == 1 else f"_{args.threads}threads") + (
        f"_{args.label}" if args.label else ""
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"linear_deletion_warm{suffix}.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
