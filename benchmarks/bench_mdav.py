"""Benchmark: the MDAV kernel, its first-call JIT cost, the numpy reference, and best_partition.

Usage: ``.venv/bin/python benchmarks/bench_mdav.py [--quick] [--repeat R]``

* ``mdav``: n ∈ {10k, 100k} × d ∈ {2, 13} × k ∈ {3, 5}, X uniform on [0, 1)^d (seed 12345);
  each configuration runs ``R`` times (default 3), each in a fresh child process after a small
  warm-up call (numba kernels loaded from the cache), so ``peak_mb`` is the growth of the
  child's peak resident memory during the timed call. Seconds: min and median of the runs (the
  machine may be shared: the load average is recorded).
* ``kernels``: both MDAV kernels on 100k × 13 records with 3 latent dimensions
  (``Z @ A + 0.05 · noise``, Z 100k × 3 and A 3 × 13 standard normal) and on uniform 100k × 13,
  k = 3 (one run each): the block kernel wins when few dimensions carry the variance.
* ``reference``: the plain numpy MDAV of tests/tabular/_mdav_helpers.py at 10k (one run), and
  whether its labels equal the kernel's.
* ``jit``: the first call in a process with an empty numba cache (compilation), and the first
  call in a fresh process once the cache is filled (loading), on a 200-record input.
* ``census``: IL of MDAV and of best_partition on Census (z-scored, 13 columns), k = 3, 4, 5, 10.
* ``other_data``: the same on data the heuristic was not tuned on: Adult's six numeric columns
  (all 32561 rows, z-scored), 5000 records in 50 Gaussian clusters (5 columns, z-scored) and
  5000 uniform records in 8 columns; k = 3, 5, 10.
* ``improve``: best_partition on uniform data, 10k × 13 (no budget) and 100k × 13 with a 60 s
  budget, k = 3: seconds and IL against MDAV's.

Writes benchmarks/results/bench_mdav.json and prints tables. ``--quick``: 10k only, no 100k
improver run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "bench_mdav.json"
SEED = 12345


def _data(n: int, d: int) -> Any:
    import numpy as np

    return np.random.default_rng(SEED).random((n, d))


def _child_mdav(n: int, d: int, k: int) -> dict[str, Any]:
    from locpriv.tabular.microagg.mdav import mdav

    X = _data(n, d)
    mdav(X[:200], k)  # load the compiled kernel
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    c0 = time.process_time()
    labels = mdav(X, k)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": secs,
        "cpu_seconds": cpu,
        "peak_mb": max(0, after - before) / 1024.0,
        "groups": int(labels.max()) + 1,
    }


def _child_kernels(kind: str) -> dict[str, Any]:
    import numpy as np

    from locpriv.tabular.microagg._kernels.mdav_blocks import mdav_blocks
    from locpriv.tabular.microagg._kernels.mdav_sweep import mdav_kernel
    from locpriv.tabular.microagg.mdav import _BLOCK, effective_dimension

    rng = np.random.default_rng(SEED)
    if kind == "latent3":
        X = rng.normal(size=(100_000, 3)) @ rng.normal(size=(3, 13))
        X = np.ascontiguousarray(X + 0.05 * rng.normal(size=(100_000, 13)))
    else:
        X = rng.random((100_000, 13))
    stats = np.zeros(8, dtype=np.int64)
    no_s = np.zeros((X.shape[0], 0), dtype=np.int64)
    mdav_blocks(X[:200], 3, _BLOCK, stats, no_s[:200], 0)  # load both compiled kernels
    mdav_kernel(X[:200], 3, stats, no_s[:200], 0)
    t0 = time.perf_counter()
    a = mdav_blocks(X, 3, _BLOCK, stats, no_s, 0)
    t_blocks = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = mdav_kernel(X, 3, stats, no_s, 0)
    t_sweep = time.perf_counter() - t0
    return {
        "data": kind,
        "effective_dimension": effective_dimension(X),
        "blocks_seconds": t_blocks,
        "sweep_seconds": t_sweep,
        "labels_equal": bool(np.array_equal(a, b)),
    }


def _child_reference(n: int, d: int, k: int) -> dict[str, Any]:
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from locpriv.tabular.microagg.mdav import mdav
    from tests.tabular._mdav_helpers import mdav_reference

    X = _data(n, d)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    ref = mdav_reference(X, k)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": secs,
        "peak_mb": max(0, after - before) / 1024.0,
        "labels_equal_kernel": bool(np.array_equal(ref, mdav(X, k))),
    }


def _child_jit() -> dict[str, Any]:
    t0 = time.perf_counter()
    from locpriv.tabular.microagg.mdav import mdav

    imported = time.perf_counter() - t0
    X = _data(200, 13)
    t0 = time.perf_counter()
    mdav(X, 3)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    mdav(X, 3)
    second = time.perf_counter() - t0
    return {"import_s": imported, "first_call_s": first, "second_call_s": second}


def _child_census() -> dict[str, Any]:
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from locpriv.tabular.microagg.improve import best_partition
    from locpriv.tabular.microagg.mdav import mdav
    from locpriv.tabular.quality.metrics import il_percent
    from tests.tabular._mdav_helpers import CENSUS, load_census

    if not CENSUS.exists():
        return {"skipped": f"{CENSUS} not found"}
    X = load_census()
    rows = {}
    for k in (3, 4, 5, 10):
        il_m = il_percent(X, mdav(X, k))
        t0 = time.perf_counter()
        labels = best_partition(X, k)
        secs = time.perf_counter() - t0
        il_b = il_percent(X, labels)
        rows[str(k)] = {
            "mdav_il": round(il_m, 4),
            "best_il": round(il_b, 4),
            "below_mdav_percent": round(100 * (1 - il_b / il_m), 2),
            "best_seconds": secs,
            "max_group": int(np.bincount(labels).max()),
        }
    return rows


def _child_other_data() -> dict[str, Any]:
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from locpriv.tabular.microagg.improve import best_partition
    from locpriv.tabular.microagg.mdav import mdav
    from locpriv.tabular.quality.metrics import il_percent
    from tests.tabular._mdav_helpers import ADULT, load_adult_numeric, zscore

    rng = np.random.default_rng(SEED)
    centres = rng.normal(size=(50, 5)) * 4
    sets = {
        "clustered_5000x5": zscore(centres[rng.integers(0, 50, 5000)] + rng.normal(size=(5000, 5))),
        "uniform_5000x8": rng.random((5000, 8)),
    }
    if ADULT.exists():
        sets["adult_numeric_32561x6"] = load_adult_numeric()
    rows: dict[str, Any] = {}
    for name, X in sets.items():
        for k in (3, 5, 10):
            il_m = il_percent(X, mdav(X, k))
            t0 = time.perf_counter()
            il_b = il_percent(X, best_partition(X, k))
            rows[f"{name} k={k}"] = {
                "mdav_il": round(il_m, 4),
                "best_il": round(il_b, 4),
                "below_mdav_percent": round(100 * (1 - il_b / il_m), 2),
                "best_seconds": time.perf_counter() - t0,
            }
    return rows


def _child_improve(n: int, d: int, k: int, budget: float | None) -> dict[str, Any]:
    from locpriv.tabular.microagg.improve import best_partition
    from locpriv.tabular.microagg.mdav import mdav
    from locpriv.tabular.quality.metrics import il_percent

    X = _data(n, d)
    best_partition(X[:300], k)  # load the compiled kernels
    t0 = time.perf_counter()
    il_m = il_percent(X, mdav(X, k))
    t_m = time.perf_counter() - t0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    labels = best_partition(X, k, time_budget_s=budget)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    il_b = il_percent(X, labels)
    return {
        "budget_s": budget,
        "seconds": secs,
        "mdav_seconds": t_m,
        "peak_mb": max(0, after - before) / 1024.0,
        "mdav_il": il_m,
        "best_il": il_b,
        "below_mdav_percent": 100 * (1 - il_b / il_m),
    }


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "mdav": _child_mdav,
    "reference": _child_reference,
    "kernels": _child_kernels,
    "jit": _child_jit,
    "census": _child_census,
    "other_data": _child_other_data,
    "improve": _child_improve,
}


def _run(kind: str, *args: Any, env: dict[str, str] | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", json.dumps([kind, *args])]
    out = subprocess.run(
        cmd, capture_output=True, text=True, check=True, env=env, cwd=ROOT, timeout=3600
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="10k records only")
    ap.add_argument("--repeat", type=int, default=3, help="runs per MDAV configuration")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = json.loads(args.child)
        print(json.dumps(CHILDREN[kind](*rest)))
        return 0

    results: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "loadavg_start": os.getloadavg(),
        },
        "data": f"uniform [0,1)^d, numpy default_rng({SEED})",
    }

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        cold = _run("jit", env=env)
        warm = _run("jit", env=env)
    results["jit"] = {"empty_cache": cold, "filled_cache": warm}
    print(
        f"JIT: first call {cold['first_call_s']:.2f} s with an empty cache (compiling), "
        f"{warm['first_call_s']:.3f} s once cached; a later call {warm['second_call_s']:.4f} s"
    )

    _run("mdav", 1000, 2, 3)  # fill the default cache before timing
    sizes = [10_000] if args.quick else [10_000, 100_000]
    rows = []
    print(f"\n{'n':>7} {'d':>3} {'k':>2} {'min s':>8} {'median s':>9} {'cpu s':>7} {'peak MB':>8}")
    for n in sizes:
        for d in (2, 13):
            for k in (3, 5):
                runs = [_run("mdav", n, d, k) for _ in range(args.repeat)]
                secs = [r["seconds"] for r in runs]
                row = {
                    "n": n,
                    "d": d,
                    "k": k,
                    "seconds_min": min(secs),
                    "seconds_median": statistics.median(secs),
                    "seconds_all": secs,
                    "cpu_seconds_min": min(r["cpu_seconds"] for r in runs),
                    "peak_mb": max(r["peak_mb"] for r in runs),
                    "groups": runs[0]["groups"],
                }
                rows.append(row)
                print(
                    f"{n:>7} {d:>3} {k:>2} {row['seconds_min']:>8.3f} "
                    f"{row['seconds_median']:>9.3f} {row['cpu_seconds_min']:>7.3f} "
                    f"{row['peak_mb']:>8.1f}"
                )
    results["mdav"] = rows

    if not args.quick:
        kernels = [_run("kernels", kind) for kind in ("latent3", "uniform")]
        results["kernels"] = kernels
        print("\n100k x 13, k=3         eff. dim  blocks s  sweep s  equal")
        for r in kernels:
            print(
                f"  {r['data']:<20} {r['effective_dimension']:>8} {r['blocks_seconds']:>9.2f} "
                f"{r['sweep_seconds']:>8.2f}  {r['labels_equal']}"
            )

    ref = _run("reference", 10_000, 13, 3)
    kern = next(r for r in rows if (r["n"], r["d"], r["k"]) == (10_000, 13, 3))
    results["reference"] = {"n": 10_000, "d": 13, "k": 3, **ref}
    print(
        f"\nnumpy reference, 10k x 13, k=3: {ref['seconds']:.1f} s "
        f"(kernel {kern['seconds_min']:.3f} s, {ref['seconds'] / kern['seconds_min']:.0f}x); "
        f"labels equal: {ref['labels_equal_kernel']}"
    )

    census = _run("census")
    results["census"] = census
    if "skipped" not in census:
        print("\nCensus  k  MDAV IL  best_partition IL  below MDAV  seconds")
        for kk, r in census.items():
            print(
                f"       {kk:>2} {r['mdav_il']:>8.4f} {r['best_il']:>18.4f} "
                f"{r['below_mdav_percent']:>9.2f}% {r['best_seconds']:>8.2f}"
            )

    other = _run("other_data")
    results["other_data"] = other
    print("\nother data           MDAV IL  best_partition IL  below MDAV  seconds")
    for name, r in other.items():
        print(
            f"  {name:<28} {r['mdav_il']:>8.4f} {r['best_il']:>10.4f} "
            f"{r['below_mdav_percent']:>9.2f}% {r['best_seconds']:>8.2f}"
        )

    improve = [_run("improve", 10_000, 13, 3, None)]
    if not args.quick:
        improve.append(_run("improve", 100_000, 13, 3, 60.0))
    results["improve"] = improve
    print("\nbest_partition, uniform, d=13, k=3")
    for r, n in zip(improve, (10_000, 100_000), strict=False):
        print(
            f"  n={n:>6} budget={r['budget_s']}: {r['seconds']:.1f} s "
            f"(MDAV {r['mdav_seconds']:.1f} s), IL {r['best_il']:.4f} vs MDAV "
            f"{r['mdav_il']:.4f} ({r['below_mdav_percent']:.2f} % below), peak "
            f"{r['peak_mb']:.0f} MB"
        )

    results["machine"]["loadavg_end"] = os.getloadavg()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
