"""Dask and out-of-core: throughput against in-memory numpy, bounded-memory streams.

1. Throughput: seeded fits of ``DPLinearRegression`` (one Gram pass) and
   ``DPLogisticRegression(solver='noisy_gd')`` (a Gram and ``max_iter``
   gradient sums) on a Dask array (local threaded scheduler, blocks of
   ``1e6`` rows) and on the same numpy array; ratio = numpy time / Dask time
   (>= 1: Dask is faster). The Dask time includes reading the blocks (they are
   made by ``da.from_array`` of the in-memory array, as a persisted collection
   would be).
2. Out of core: ``partial_fit`` of ``DPLinearRegression`` and
   ``DPLogisticRegression`` over 64 chunks of a float64 memmap on disk (in
   /tmp, ``n x (d + 1)``: X and the target), each run in a fresh interpreter:
   Python-heap peak (tracemalloc, numpy buffers included) as a fraction of the
   data file, against the goal of 0.25 (a data set 4x larger than the memory
   allowed). Runs with the deletion rows in memory (the default) and in a
   memory-mapped file (``disk_backed_rows``). Also the peak anonymous resident
   memory (``RssAnon``, sampled after every chunk: page cache of the memmaps
   is not in it, and the kernel reclaims it) over the interpreter's baseline.
3. Deletion metadata per row, measured at ``n`` rows and extrapolated to 1e8
   with ``bytes_per_row * 1e8``, for each estimator.
4. Latency of one Dask task round trip (local threaded scheduler) against
   one in-memory batch gradient of ``UnlearnableSGDClassifier``'s size: why
   the SGD does not run one Dask computation per step.
5. ``UnlearnableSGDClassifier`` on Dask input (rows stored on the workers,
   the batches of a block of steps gathered per round trip): one epoch
   (``batch_size=1000``, ``max_iter = n / 1000``) on the numpy array, on a
   Dask array (local threaded scheduler) and on a ``LocalCluster`` of two
   worker processes whose data are generated and persisted on the workers
   (not timed); ratio = numpy time / Dask time. An untimed numpy fit runs
   first: the privacy calibration of the schedule (an accountant computation,
   the same for every path and cached) is left out of every timing, and so
   are Dask's first-call imports (an untimed small Dask fit). The
   threaded run is bit-identical to the numpy run (checked).

Usage: ``python benchmarks/bench_dask.py [--quick]``; writes
``benchmarks/results/dask.{txt,json}``.
"""

import argparse
import contextlib
import gc
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc

import dask
import dask.array as da
import numpy as np
from sklearn.base import clone

from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.unlearning import disk_backed_rows

RESULTS = pathlib.Path(__file__).parent / "results"


def _timed(function):
    gc.collect()
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def throughput(n: int, d: int, block: int) -> list[dict]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y_reg = np.clip(X @ rng.normal(size=d) / np.sqrt(d), -1, 1)
    y_clf = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    Xd = da.from_array(X, chunks=(block, d))
    rows = []
    cases = [
        (
            "DPLinearRegression",
            lambda: DPLinearRegression(feature_norm=5.0, target_bound=1.0),
            y_reg,
        ),
        (
            "DPLogisticRegression(noisy_gd)",
            lambda: DPLogisticRegression(feature_norm=5.0, solver="noisy_gd"),
            y_clf,
        ),
    ]
    for name, make, y in cases:
        t_np, _ = _timed(lambda make=make, y=y: make().set_params(random_state=0).fit(X, y))
        yd = da.from_array(y, chunks=block)
        t_da, _ = _timed(lambda make=make, yd=yd: make().set_params(random_state=0).fit(Xd, yd))
        rows.append(
            {
                "estimator": name,
                "n": n,
                "d": d,
                "numpy_s": t_np,
                "dask_s": t_da,
                "ratio": t_np / t_da,
            }
        )
        gc.collect()
    return rows


def _write_memmap(path: str, n: int, d: int, chunk: int) -> None:
    rng = np.random.default_rng(1)
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, d + 1))
    for start in range(0, n, chunk):  # written chunk by chunk: never all in memory
        stop = min(n, start + chunk)
        part = rng.normal(size=(stop - start, d))
        X[start:stop, :d] = part
        X[start:stop, d] = np.clip(part[:, 0] * 0.3, -1, 1)
    X.flush()


def _rss_anon() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


_ESTIMATORS = {
    "DPLinearRegression": lambda: DPLinearRegression(
        feature_norm=5.0, target_bound=1.0, random_state=0
    ),
    "DPLogisticRegression": lambda: DPLogisticRegression(feature_norm=5.0, random_state=0),
}


def _stream_child(spec: dict) -> dict:
    """One stream over the memmap, in this (fresh) interpreter."""
    data = np.load(spec["path"], mmap_mode="r")
    n, width = data.shape
    d, chunk = width - 1, spec["chunk"]
    est = _ESTIMATORS[spec["estimator"]]()
    linear = spec["estimator"] == "DPLinearRegression"
    store = spec["store"]
    baseline = _rss_anon()
    rss = 0
    tracemalloc.start()
    start_time = time.perf_counter()
    for k, start in enumerate(range(0, n, chunk)):
        block = data[start : start + chunk]
        X, target = block[:, :d], block[:, d]
        y, kwargs = (target, {}) if linear else ((target > 0).astype(np.int64), {"classes": [0, 1]})
        context = disk_backed_rows(store) if store and k == 0 else contextlib.nullcontext()
        with context:  # the first call creates the registry (in store); the rest append
            est.partial_fit(X, y, **kwargs)
        rss = max(rss, _rss_anon() - baseline)
    seconds = time.perf_counter() - start_time
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    registry = est.unlearning_state_.registry
    data_bytes = n * width * 8
    return {
        "estimator": spec["estimator"],
        "rows_on_disk": bool(store),
        "n": n,
        "d": d,
        "chunk_rows": chunk,
        "data_bytes": data_bytes,
        "peak_traced_bytes": peak,
        "peak_over_data": peak / data_bytes,
        "rss_anon_over_baseline_bytes": rss,
        "rss_anon_over_data": rss / data_bytes,
        "registry_bytes": registry.nbytes(),
        "registry_memory_bytes": registry.memory_nbytes(),
        "registry_memory_over_data": registry.memory_nbytes() / data_bytes,
        "chunk_bytes": chunk * width * 8,
        "seconds": seconds,
        "meets_goal": peak <= 0.25 * data_bytes,
    }


def out_of_core(n: int, d: int, chunk: int) -> list[dict]:
    """Each stream in a fresh interpreter (``--child``), over one memmap in /tmp."""
    folder = tempfile.mkdtemp(prefix="bench_dask_")
    path = os.path.join(folder, "Xy.npy")
    _write_memmap(path, n, d, chunk)
    cases = [
        ("DPLinearRegression", False),
        ("DPLinearRegression", True),
        ("DPLogisticRegression", True),
    ]
    rows = []
    try:
        for estimator, on_disk in cases:
            store = os.path.join(folder, "store") if on_disk else ""
            if store:
                os.makedirs(store, exist_ok=True)
            spec = {"path": path, "chunk": chunk, "estimator": estimator, "store": store}
            done = subprocess.run(
                [sys.executable, __file__, "--child", json.dumps(spec)],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(folder)
    return rows


def metadata(n: int, d: int) -> list[dict]:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(n, d))
    y_clf = (X[:, 0] > 0).astype(int)
    y_reg = np.clip(X[:, 0] * 0.3, -1, 1)
    fits = [
        ("DPLinearRegression", DPLinearRegression(feature_norm=5.0, target_bound=1.0), y_reg),
        ("DPLogisticRegression", DPLogisticRegression(feature_norm=5.0), y_clf),
        ("UnlearnableSGDClassifier", UnlearnableSGDClassifier(feature_norm=5.0), y_clf),
    ]
    rows = []
    folder = tempfile.mkdtemp(prefix="bench_dask_meta_")
    for name, est, y in fits:
        est.set_params(random_state=0).fit(X, y)
        registry = est.unlearning_state_.registry
        per_row = registry.nbytes() / registry.capacity
        with disk_backed_rows(folder):  # the same fit, rows on disk, then one deletion
            on_disk = clone(est).fit(X, y)
        before = on_disk.unlearning_state_.registry.memory_nbytes() / n
        on_disk.delete_samples([0])
        after = on_disk.unlearning_state_.registry.memory_nbytes() / n
        rows.append(
            {
                "estimator": name,
                "n": n,
                "d": d,
                "registry_bytes": registry.nbytes(),
                "rows_dtype": str(registry.rows.dtype),
                "bytes_per_row": per_row,
                "at_1e8_rows_GB": per_row * 1e8 / 1e9,
                "on_disk_memory_bytes_per_row_before_deletion": before,
                "on_disk_memory_bytes_per_row_after_deletion": after,
            }
        )
        del on_disk
    shutil.rmtree(folder)
    return rows


def task_latency(batch: int, d: int, repeats: int) -> dict:
    rng = np.random.default_rng(3)
    A, w = rng.normal(size=(batch, d)), rng.normal(size=d)

    def gradient(A, w):
        return A.T @ (1.0 / (1.0 + np.exp(-(A @ w))) - 0.5)

    start = time.perf_counter()
    for _ in range(repeats):
        gradient(A, w)
    local = (time.perf_counter() - start) / repeats
    task = dask.delayed(gradient, pure=False)
    start = time.perf_counter()
    for _ in range(repeats):
        task(A, w).compute(scheduler="threads")
    remote = (time.perf_counter() - start) / repeats
    return {
        "batch": batch,
        "d": d,
        "in_memory_s": local,
        "dask_task_s": remote,
        "ratio": remote / local,
    }


def sgd_throughput(n: int, d: int, block: int) -> list[dict]:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    params = dict(feature_norm=5.0, batch_size=1000, max_iter=max(1, n // 1000), random_state=0)
    # Untimed first fit: the accountant's calibration of the schedule (the same
    # for both paths, cached after the first run) is not data work.
    UnlearnableSGDClassifier(**params).fit(X, y)
    small = da.from_array(X[:4000], chunks=(1000, d)), da.from_array(y[:4000], chunks=1000)
    UnlearnableSGDClassifier(**{**params, "max_iter": 4}).fit(*small)  # Dask's imports
    t_np, ref = _timed(lambda X=X, y=y: UnlearnableSGDClassifier(**params).fit(X, y))
    Xd, yd = da.from_array(X, chunks=(block, d)), da.from_array(y, chunks=block)
    t_th, got = _timed(lambda X=Xd, y=yd: UnlearnableSGDClassifier(**params).fit(X, y))
    identical = bool(np.array_equal(ref.coef_, got.coef_))
    rows = [
        {
            "estimator": "UnlearnableSGDClassifier",
            "scheduler": "threads",
            "n": n,
            "d": d,
            "steps": int(ref.n_iter_),
            "numpy_s": t_np,
            "dask_s": t_th,
            "ratio": t_np / t_th,
            "bit_identical": identical,
        }
    ]
    del X, y, Xd, yd, ref, got
    gc.collect()
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        Xc = da.random.default_rng(5).normal(size=(n, d), chunks=(block, d)).persist()
        yc = (Xc[:, 0] + 0.5 * Xc[:, 1] > 0).astype(np.int64).persist()
        t_cl, _ = _timed(lambda: UnlearnableSGDClassifier(**params).fit(Xc, yc))
    rows.append(
        {
            **rows[0],
            "scheduler": "LocalCluster(2 processes)",
            "dask_s": t_cl,
            "ratio": t_np / t_cl,
            "bit_identical": None,
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_stream_child(json.loads(args.child))))
        return
    if args.quick:
        n, ooc_n, meta_n = 200_000, 400_000, 20_000
    else:
        n, ooc_n, meta_n = 10_000_000, 8_000_000, 100_000
    d = 10
    results = {
        "concurrent_machine": True,
        "throughput": throughput(n, d, block=min(n, 1_000_000)),
        "out_of_core": out_of_core(ooc_n, d, chunk=ooc_n // 64),
        "metadata": metadata(meta_n, d),
        "task_latency": task_latency(256, d, 200),
        "sgd_throughput": sgd_throughput(n, d, block=min(n, 1_000_000)),
    }
    lines = []
    for row in results["throughput"]:
        lines.append(
            f"{row['estimator']:32s} n={row['n']:.0e} d={row['d']}: "
            f"numpy {row['numpy_s']:.2f} s, dask {row['dask_s']:.2f} s, "
            f"ratio numpy/dask {row['ratio']:.2f}"
        )
    for o in results["out_of_core"]:
        where = "rows on disk" if o["rows_on_disk"] else "rows in memory"
        lines.append(
            f"{o['estimator']:20s} partial_fit, {where:14s}: memmap of "
            f"{o['data_bytes'] / 1e6:.0f} MB in {o['n'] // o['chunk_rows']} chunks: peak traced "
            f"{o['peak_traced_bytes'] / 1e6:.0f} MB ({o['peak_over_data']:.3f} of the data, "
            f"goal <= 0.25: {'met' if o['meets_goal'] else 'NOT met'}); registry in memory "
            f"{o['registry_memory_bytes'] / 1e6:.1f} MB ({o['registry_memory_over_data']:.3f}); "
            f"RssAnon +{o['rss_anon_over_baseline_bytes'] / 1e6:.0f} MB "
            f"({o['rss_anon_over_data']:.3f}); {o['seconds']:.1f} s"
        )
    for row in results["metadata"]:
        lines.append(
            f"{row['estimator']:26s} deletion metadata {row['bytes_per_row']:.1f} B/row "
            f"({row['rows_dtype']} rows, d={row['d']}) -> "
            f"{row['at_1e8_rows_GB']:.1f} GB at 1e8 rows; with disk_backed_rows, in memory "
            f"{row['on_disk_memory_bytes_per_row_before_deletion']:.2f} B/row before a deletion, "
            f"{row['on_disk_memory_bytes_per_row_after_deletion']:.2f} after"
        )
    t = results["task_latency"]
    lines.append(
        f"one batch gradient ({t['batch']} x {t['d']}): in memory {t['in_memory_s'] * 1e6:.0f} us, "
        f"as a Dask task {t['dask_task_s'] * 1e6:.0f} us ({t['ratio']:.0f}x)"
    )
    for row in results["sgd_throughput"]:
        lines.append(
            f"{row['estimator']} on Dask ({row['scheduler']}) n={row['n']:.0e} d={row['d']}, "
            f"{row['steps']} steps: numpy {row['numpy_s']:.2f} s, dask {row['dask_s']:.2f} s, "
            f"ratio numpy/dask {row['ratio']:.2f}"
            + ("" if row["bit_identical"] is None else f", bit-identical {row['bit_identical']}")
        )
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    note = f"# load average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n"
    (RESULTS / f"dask{suffix}.txt").write_text(note + text + "\n")
    (RESULTS / f"dask{suffix}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
