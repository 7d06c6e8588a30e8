"""Benchmark: MDAV and the p-sensitive methods on uniform random data (seconds, peak memory).

Usage: ``.venv/bin/python benchmarks/bench_tabular.py [--quick] [--timeout S]``

Each (method, n, d, k) runs in its own child process (after a small warm-up run that compiles the
numba kernels), so the peak resident memory of the run can be measured: ``peak_mb`` is the
growth of the child's peak RSS during the timed call. Data: X uniform on [0, 1)^d, one
confidential attribute with 10 equally likely values; p = 2 for k = 3 and p = 3 for k = 5.
Writes benchmarks/results/bench_tabular.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "bench_tabular.json"
METHODS = ("mdav", "mdav-seed", "random-seed", "sec-pk", "enhanced-pk", "k-increase")


def _one(method: str, n: int, d: int, k: int, p: int) -> dict[str, Any]:
    import numpy as np

    from locpriv.tabular.estimators import run_method
    from locpriv.tabular.metrics import il_percent
    from locpriv.tabular.validate import is_p_sensitive

    rng = np.random.default_rng(12345)
    X = rng.random((n, d))
    S = rng.integers(0, 10, (n, 1))
    warm = rng.random((200, d))
    run_method(method, warm, S[:200], k, p if method != "mdav" else 1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    labels, k_used = run_method(method, X, S, k, p if method != "mdav" else 1)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": secs,
        "peak_mb": max(0, after - before) / 1024.0,
        "il_percent": il_percent(X, labels),
        "groups": int(labels.max()) + 1,
        "k_used": k_used,
        "valid": bool(is_p_sensitive(labels, S, k, p if method != "mdav" else 1)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small smoke run (n=10k, d=2, k=3)")
    ap.add_argument("--timeout", type=float, default=600.0, help="per-run limit in seconds")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        m, n, d, k, p = args.one.split(":")
        print(json.dumps(_one(m, int(n), int(d), int(k), int(p))))
        return 0
    sizes = (
        [(10_000, 2, 3)]
        if args.quick
        else [(n, d, k) for n in (10_000, 100_000) for d in (2, 13) for k in (3, 5)]
    )
    rows: list[dict[str, Any]] = []
    OUT.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "quick": args.quick,
        "complete": False,
        "note": "shared 2-core machine, heavily loaded by other jobs; timings are noisy",
    }

    def dump() -> None:
        OUT.write_text(json.dumps({"meta": meta, "runs": rows}, indent=2) + "\n")

    print(
        f"{'method':12s} {'n':>7s} {'d':>3s} {'k':>2s} {'p':>2s} {'sec':>8s} {'peakMB':>7s} "
        f"{'IL%':>7s} {'k_used':>6s} {'xMDAV':>6s} valid"
    )
    for n, d, k in sizes:
        p = 2 if k == 3 else 3
        mdav_s = None
        for method in args.methods.split(","):
            row: dict[str, Any] = {
                "method": method,
                "n": n,
                "d": d,
                "k": k,
                "p": 1 if method == "mdav" else p,
            }
            try:
                res = subprocess.run(
                    [sys.executable, __file__, "--one", f"{method}:{n}:{d}:{k}:{p}"],
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    check=True,
                    cwd=ROOT,
                )
                row.update(json.loads(res.stdout.strip().splitlines()[-1]))
            except subprocess.TimeoutExpired:
                row.update({"seconds": None, "timeout_s": args.timeout})
            if method == "mdav" and row.get("seconds") is not None:
                mdav_s = row["seconds"]
            if mdav_s and row.get("seconds") is not None:
                row["x_mdav"] = row["seconds"] / mdav_s
            rows.append(row)
            dump()
            sec = f"{row['seconds']:8.2f}" if row.get("seconds") is not None else " timeout"
            nan = float("nan")
            print(
                f"{method:12s} {n:7d} {d:3d} {k:2d} {row['p']:2d} {sec} "
                f"{row.get('peak_mb', nan):7.1f} {row.get('il_percent', nan):7.3f} "
                f"{row.get('k_used', '-')!s:>6s} {row.get('x_mdav', float('nan')):6.2f} "
                f"{row.get('valid', '-')}",
                flush=True,
            )
    meta["complete"] = True
    dump()
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
