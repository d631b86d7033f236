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
chosen. Writes ``results/linear_deletion_warm[_Kthreads][_LABEL].txt``.

Run: ``python benchmarks/bench_linear_deletion_warm.py [--threads K] [--n N]
[--dims D ...] [--cutoffs A B ...] [--deletions N] [--label LABEL]``.
"""

import argparse
import os
import pathlib
import time

import numpy as np
from bench_linear_scaling import _data, _params
from threadpoolctl import threadpool_limits

from sklearn_dpu.linear_model import DPLinearRegression, _lifted_solve

RESULTS = pathlib.Path(__file__).parent / "results"


def measure(n, d, cutoffs, deletions, block=20):
    X, y = _data(n, d)  # the scaling table's data and public bounds
    params = _params(d)
    fits = []
    for _ in range(3):
        start = time.perf_counter()
        reg = DPLinearRegression(**params).fit(X, y)
        fits.append(time.perf_counter() - start)
    for i in range(5):  # the first deletions after a fit allocate the flags
        reg.delete_samples([i])
    times = {cut: [] for cut in cutoffs}
    original, k = _lifted_solve._DENSE_SLOPES, 5
    try:
        for b in range(max(1, deletions // (block * len(cutoffs)))):
            for cut in cutoffs if b % 2 == 0 else cutoffs[::-1]:
                _lifted_solve._DENSE_SLOPES = cut
                for _ in range(block):
                    start = time.perf_counter()
                    reg.delete_samples([k])
                    times[cut].append(time.perf_counter() - start)
                    k += 1
    finally:
        _lifted_solve._DENSE_SLOPES = original
    warm = min(fits[1:])
    return [
        f"n = {n}, d = {d:4d}, dense cut-off {cut:4d}: median deletion "
        f"{np.median(ts) * 1e3:7.3f} ms; warm fit {warm:.3f} s ({warm / np.median(ts):5.0f}x), "
        f"first fit {fits[0]:.3f} s ({fits[0] / np.median(ts):5.0f}x)"
        for cut, ts in times.items()
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--dims", type=int, nargs="+", default=[20, 100, 200, 300])
    parser.add_argument("--cutoffs", type=int, nargs="+", default=[_lifted_solve._DENSE_SLOPES])
    parser.add_argument("--deletions", type=int, default=200, help="per cut-off and d")
    parser.add_argument("--label", default="", help="suffix of the result file")
    args = parser.parse_args()
    lines = [
        "DPLinearRegression one-row deletion against a warm fit (bench_linear_deletion_warm.py)",
        f"BLAS threads: {args.threads}; cores: {os.cpu_count()}; load average at start: "
        f"{os.getloadavg()[0]:.1f}; medians of {args.deletions} deletions per cut-off, "
        "interleaved in blocks of 20",
    ]
    print("\n".join(lines), flush=True)
    with threadpool_limits(args.threads):
        for d in args.dims:
            rows = measure(args.n, d, args.cutoffs, args.deletions * len(args.cutoffs))
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
