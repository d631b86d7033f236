"""DPLinearRegression's fit and deletion cost against shape, measured in one run.

Prints (and writes to results/linear_scaling.txt and .json, or
linear_scaling_Kthreads.* with ``--threads K``):

* fit at n = 1e6, d in {20, 100} (and n = 1e5, d = 1000) as ratios to
  ``LinearRegression().fit`` and to a bare ``X.T @ X`` on the same array (goals:
  <= 0.25 and <= 3), and the peak memory the fit allocates (tracemalloc, the
  input excluded) over the input's size (goal: <= 0.5, i.e. input plus fit <=
  1.5 times the input); ``--fits-only`` runs just these, best of ``--repeats``,
  and writes results/linear_fit_ratios[_Kthreads].txt;
* one-row deletion at n = 1e5, d = 1000 in a fresh process, the first
  deletion included, as a speed-up over the fit (goal >= 100);
* a scaling table: fit and one-row deletion time for n in 1e4..1e7 and d in
  {10, 100, 1000} (where the input fits in ``--max-gb``), with log-log slopes
  (fit: 1 in n and up to 2 in d; deletion: 0 in n, 2 to 3 in d).

All contenders run with the same BLAS thread count (``--threads``, default 1:
on a shared machine a multi-threaded BLAS spin-waits and times become
meaningless). Ratios come from one run; timings on a busy machine are noisy.
``--quick`` shrinks the sizes for a smoke run. ``--deletion-only`` runs just
the n = 1e5, d = 1000 deletion case, in ``--runs`` fresh processes, and
reports medians (``--out`` saves the text); ``--pause`` sleeps that many
seconds before each deletion (requests that arrive apart, not back to back).
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np
from sklearn.linear_model import LinearRegression
from threadpoolctl import threadpool_limits

from sklearn_dpu.linear_model import DPLinearRegression

RESULTS = pathlib.Path(__file__).parent / "results"


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = X @ rng.normal(size=d) / np.sqrt(d) + 0.1 * rng.normal(size=n)
    return X, y


def _params(d):
    return dict(feature_norm=float(np.sqrt(d)), target_bound=4.0, random_state=0)


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(min(times))


def fit_ratios(n, d, repeats):
    X, y = _data(n, d)
    gram = _best(lambda: X.T @ X, repeats)
    sklearn_fit = _best(lambda: LinearRegression().fit(X, y), repeats)
    private_fit = _best(lambda: DPLinearRegression(**_params(d)).fit(X, y), repeats)
    tracemalloc.start()
    DPLinearRegression(**_params(d)).fit(X, y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "n": n,
        "d": d,
        "gram_s": gram,
        "sklearn_fit_s": sklearn_fit,
        "private_fit_s": private_fit,
        "ratio_to_sklearn": private_fit / sklearn_fit,
        "ratio_to_gram": private_fit / gram,
        "input_mb": X.nbytes / 1e6,
        "fit_peak_mb": peak / 1e6,
        "peak_over_input": peak / X.nbytes,
    }


def deletion_run(n, d, n_deletions, warm=False, pause=0.0):
    """Fit, then time ``n_deletions`` one-row deletions (the first included).

    ``warm``: first fit and delete on a tiny data set of the same width, so
    that one-time costs (the noise calibration, imports) do not hide the
    slopes of the scaling table. ``pause``: seconds slept before each
    deletion (requests that arrive apart rather than back to back: a
    multi-threaded OpenBLAS keeps a worker spinning on a core for about
    0.1 s after its last threaded call, and a deletion that starts within
    that time shares the core with it).
    """
    if warm:
        DPLinearRegression(**_params(d)).fit(*_data(2 * d + 10, d)).delete_samples([0])
    X, y = _data(n, d)
    start, cpu_start = time.perf_counter(), time.process_time()
    reg = DPLinearRegression(**_params(d)).fit(X, y)
    fit, fit_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    deletions, deletions_cpu, faults = [], [], []
    for i in range(n_deletions):
        time.sleep(pause)
        faults_start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start, cpu_start = time.perf_counter(), time.process_time()
        reg.delete_samples([i])
        deletions.append(time.perf_counter() - start)
        deletions_cpu.append(time.process_time() - cpu_start)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_start)
    # CPU time too: with one BLAS thread it is what the process used, and
    # much less disturbed than wall time when other jobs share the cores.
    return {
        "n": n,
        "d": d,
        "fit_s": fit,
        "deletions_s": deletions,
        "fit_cpu_s": fit_cpu,
        "deletions_cpu_s": deletions_cpu,
        # Minor page faults: fresh memory each deletion touches (load-independent).
        "deletions_minflt": faults,
    }


def fresh_deletion_run(n, d, n_deletions, threads, warm=False, pause=0.0):
    """:func:`deletion_run` in a fresh interpreter (nothing warmed by earlier runs)."""
    code = (
        "import json, sys; from threadpoolctl import threadpool_limits; "
        "sys.path.insert(0, sys.argv[1]); import bench_linear_scaling as b; "
        "threadpool_limits(int(sys.argv[5])); "
        "print(json.dumps(b.deletion_run(*map(int, sys.argv[2:5]), warm=sys.argv[6] == '1', "
        "pause=float(sys.argv[7]))))"
    )
    here = str(pathlib.Path(__file__).parent)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            here,
            *map(str, (n, d, n_deletions, threads, int(warm), pause)),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def deletion_speedups(n, d, runs, threads, pause=0.0):
    """The deletion case in ``runs`` fresh processes: per-run lines and medians."""
    results = [fresh_deletion_run(n, d, 5, threads, pause=pause) for _ in range(runs)]
    lines = []
    for r in results:
        first, rest = r["deletions_s"][0], float(np.median(r["deletions_s"][1:]))
        lines.append(
            f"  run: fit {r['fit_s']:.2f} s, first deletion {first * 1e3:.1f} ms "
            f"({r['fit_s'] / first:.0f}x), next 4 {rest * 1e3:.1f} ms ({r['fit_s'] / rest:.0f}x); "
            f"CPU: fit {r['fit_cpu_s']:.2f} s, first {r['deletions_cpu_s'][0] * 1e3:.1f} ms "
            f"({r['fit_cpu_s'] / r['deletions_cpu_s'][0]:.0f}x); minor page faults "
            f"{r['deletions_minflt']}"
        )
        print(lines[-1], flush=True)

    def median(key):
        return float(np.median([key(r) for r in results]))

    fit = median(lambda r: r["fit_s"])
    first = median(lambda r: r["deletions_s"][0])
    rest = median(lambda r: np.median(r["deletions_s"][1:]))
    first_ratio = median(lambda r: r["fit_s"] / r["deletions_s"][0])
    rest_ratio = median(lambda r: r["fit_s"] / np.median(r["deletions_s"][1:]))
    cpu_ratio = median(lambda r: r["fit_cpu_s"] / r["deletions_cpu_s"][0])
    lines.append(
        f"One-row deletion at n={n}, d={d}, medians of {runs} fresh processes: fit {fit:.2f} s, "
        f"first deletion {first * 1e3:.1f} ms (speed-up {first_ratio:.0f}x), later deletions "
        f"{rest * 1e3:.1f} ms (speed-up {rest_ratio:.0f}x); first in CPU time {cpu_ratio:.0f}x; "
        "goal >= 100x"
    )
    return lines


def _slope(xs, ys):
    if len(xs) < 2:
        return float("nan")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def scaling(ns, ds, max_bytes, n_deletions, threads):
    rows = []
    for d in ds:
        for n in ns:
            if n * d * 8 > max_bytes or n <= d:
                continue
            run = fresh_deletion_run(n, d, n_deletions, threads, warm=True)
            rows.append(
                {
                    "n": n,
                    "d": d,
                    "fit_s": run["fit_s"],
                    "first_deletion_s": run["deletions_s"][0],
                    "deletion_s": float(np.median(run["deletions_s"])),
                    "fit_cpu_s": run["fit_cpu_s"],
                    "deletion_cpu_s": float(np.median(run["deletions_cpu_s"])),
                }
            )
            print(
                f"  n={n:>9} d={d:>5}  fit {run['fit_s']:8.3f} s  "
                f"deletion {rows[-1]['deletion_s'] * 1e3:8.2f} ms",
                flush=True,
            )
    slopes = {}

    def add(name, points, key):
        xs, ys = [p[0] for p in points], [key(p[1]) for p in points]
        slopes[name] = _slope(xs, ys)
        if len(xs) > 2:  # the largest two: the asymptotic term, fixed costs aside
            slopes[f"{name}, {xs[-2]}..{xs[-1]}"] = _slope(xs[-2:], ys[-2:])

    for d in ds:
        sub = [(r["n"], r) for r in rows if r["d"] == d]
        add(f"fit vs n (d={d})", sub, lambda r: r["fit_s"])
        add(f"deletion vs n (d={d})", sub, lambda r: r["deletion_s"])
    for n in ns:
        sub = [(r["d"], r) for r in rows if r["n"] == n]
        add(f"fit vs d (n={n})", sub, lambda r: r["fit_s"])
        add(f"deletion vs d (n={n})", sub, lambda r: r["deletion_s"])
    slopes = {k: v for k, v in slopes.items() if np.isfinite(v)}
    return rows, slopes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-gb", type=float, default=1.0)
    parser.add_argument("--deletion-only", action="store_true")
    parser.add_argument(
        "--fits-only", action="store_true", help="only the fit ratios (best of --repeats)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="best of (the fit ratios)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes (--deletion-only)")
    parser.add_argument("--out", type=pathlib.Path, help="write the text here (--deletion-only)")
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds before each deletion (--deletion-only)"
    )
    args = parser.parse_args()
    if args.deletion_only:
        n, d = (5_000, 100) if args.quick else (10**5, 1000)
        load = os.getloadavg()
        lines = [
            "DPLinearRegression one-row deletion (bench_linear_scaling.py --deletion-only)",
            f"BLAS threads: {args.threads}; cores: {os.cpu_count()}; load average at start: "
            f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (other jobs were running if > 0)",
            f"pause before each deletion: {args.pause} s; OPENBLAS_THREAD_TIMEOUT: "
            f"{os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'unset')}",
        ]
        print("\n".join(lines), flush=True)
        lines += deletion_speedups(n, d, args.runs, args.threads, args.pause)
        load = os.getloadavg()
        lines.append(f"load average at end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        print(lines[-2] + "\n" + lines[-1])
        if args.out is not None:
            args.out.write_text("\n".join(lines) + "\n")
        return
    if args.quick:
        fit_shapes, deletion_shape, repeats = [(20_000, 20)], (5_000, 100), 1
        ns, ds = [1_000, 10_000], [10, 100]
    else:
        fit_shapes = [(10**6, 20), (10**6, 100), (10**5, 1000)]
        deletion_shape, repeats = (10**5, 1000), args.repeats
        ns, ds = [10**4, 10**5, 10**6, 10**7], [10, 100, 1000]
    stem = "linear_scaling" + ("" if args.threads == 1 else f"_{args.threads}threads")
    load = os.getloadavg()
    lines = [
        "DPLinearRegression scaling (bench_linear_scaling.py)",
        f"BLAS threads: {args.threads}; cores: {os.cpu_count()}; load average at start: "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (other jobs were running if > 0)",
        "",
        f"Fit (best of {repeats}): ratios to LinearRegression and to a bare X.T @ X",
    ]
    print("\n".join(lines), flush=True)
    with threadpool_limits(args.threads):
        fits = [fit_ratios(n, d, repeats) for n, d in fit_shapes]
    for f in fits:
        line = (
            f"  n={f['n']} d={f['d']}: private {f['private_fit_s']:.3f} s, sklearn "
            f"{f['sklearn_fit_s']:.3f} s (ratio {f['ratio_to_sklearn']:.3f}, goal <= 0.25), "
            f"X.T @ X {f['gram_s']:.3f} s (ratio {f['ratio_to_gram']:.2f}, goal <= 3); "
            f"fit peak {f['fit_peak_mb']:.0f} MB over input {f['input_mb']:.0f} MB = "
            f"{f['peak_over_input']:.2f} (goal <= 0.5)"
        )
        lines.append(line)
        print(line, flush=True)
    if args.fits_only:
        load = os.getloadavg()
        lines.append(f"load average at end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        if not args.quick:
            RESULTS.mkdir(exist_ok=True)
            name = stem.replace("linear_scaling", "linear_fit_ratios")
            (RESULTS / f"{name}.txt").write_text("\n".join(lines) + "\n")
        return
    n, d = deletion_shape
    run = fresh_deletion_run(n, d, 5, args.threads)
    first, rest = run["deletions_s"][0], float(np.median(run["deletions_s"][1:]))
    line = (
        f"One-row deletion at n={n}, d={d} (fresh process): fit {run['fit_s']:.2f} s, first "
        f"deletion {first * 1e3:.1f} ms (speed-up {run['fit_s'] / first:.0f}x), median of the "
        f"next 4 {rest * 1e3:.1f} ms (speed-up {run['fit_s'] / rest:.0f}x); goal >= 100x"
    )
    cpu_first = run["deletions_cpu_s"][0]
    cpu_rest = float(np.median(run["deletions_cpu_s"][1:]))
    line += (
        f"\n  in CPU time: fit {run['fit_cpu_s']:.2f} s, first deletion {cpu_first * 1e3:.1f} ms "
        f"(speed-up {run['fit_cpu_s'] / cpu_first:.0f}x), next 4 {cpu_rest * 1e3:.1f} ms "
        f"(speed-up {run['fit_cpu_s'] / cpu_rest:.0f}x)"
    )
    lines += [
        "",
        line,
        "",
        "Scaling (fresh process per shape, warmed on tiny data; deletion = median of 3):",
    ]
    print(line, flush=True)
    rows, slopes = scaling(ns, ds, args.max_gb * 1e9, 3, args.threads)
    lines += [
        f"  n={r['n']:>9} d={r['d']:>5}  fit {r['fit_s']:9.3f} s  deletion "
        f"{r['deletion_s'] * 1e3:9.2f} ms (first {r['first_deletion_s'] * 1e3:.2f} ms); CPU: fit "
        f"{r['fit_cpu_s']:.3f} s, deletion {r['deletion_cpu_s'] * 1e3:.2f} ms"
        for r in rows
    ]
    lines += [
        "",
        "Log-log slopes over each series, and between its largest two sizes (expected: fit 1 "
        "in n; in d, 1 while reading X dominates, up to 2 where the Gram's n d^2 does; "
        "deletion 0 in n, 2 to 3 in d once the d^2 noise and d^3 solve dominate):",
    ]
    lines += [f"  {k}: {v:.2f}" for k, v in slopes.items()]
    load = os.getloadavg()
    lines.append(f"\nload average at end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{stem}.txt").write_text(text)
        payload = {"fits": fits, "deletion": run, "scaling": rows, "slopes": slopes}
        (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
