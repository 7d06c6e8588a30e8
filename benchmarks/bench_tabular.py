"""Benchmark: MDAV and the p-sensitive methods on uniform random data (seconds, peak memory).

Usage: ``.venv/bin/python benchmarks/bench_tabular.py [--quick] [--timeout S] [--methods M,...]
[--cold-start] [--adult]``

Each (method, n, d, k) runs in its own child process (after a small warm-up run that compiles the
numba kernels), so the peak resident memory of the run can be measured: ``peak_mb`` is the
growth of the child's peak RSS during the timed call. Data: X uniform on [0, 1)^d, one
confidential attribute with 10 equally likely values; p = 2 for k = 3 and p = 3 for k = 5.
Writes benchmarks/results/bench_tabular.json and prints a table. ``default`` is what runs
without ``--method`` (``Microaggregator(k, p)``: MDAV for p = 1, the race of ``P_DEFAULT`` for
p >= 2), to check its stated budget (``DEFAULT_BUDGET`` times MDAV).

``--cold-start`` (also part of every full run): the first call of ``anonymize`` in a fresh
process, twice, with an empty numba cache directory (``NUMBA_CACHE_DIR``, a temporary one): the
first process compiles every kernel it uses and writes the cache, the second loads it.
``--adult``: MDAV, the default and ``best`` on mixed Adult (../shared/data/adult.csv: age,
fnlwgt, education-num, hours-per-week numerical, sex and race nominal, k = 5; the default also
with p = 2 of occupation), each in its own warmed process, seconds and IL on the written file.
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
METHODS = ("mdav", "mdav-seed", "random-seed", "sec-pk", "enhanced-pk", "k-increase", "default")
ADULT = ROOT.parent / "shared" / "data" / "adult.csv"
COLD = """
import time
t0 = time.perf_counter()
import numpy as np, pandas as pd
from locpriv.tabular import anonymize
t1 = time.perf_counter()
rng = np.random.default_rng(0)
n = 2000
df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.integers(0, 50, n),
                   "c": rng.choice(list("xyz"), n), "s": rng.integers(0, 5, n)})
out = {"import_s": t1 - t0}
for name, p in (("p1", 1), ("p2", 2)):
    t = time.perf_counter()
    anonymize(df, ["a", "b", "c"], "s", k=3, p=p, nominal="c", warn=lambda _: None)
    out[name + "_s"] = time.perf_counter() - t
out["total_s"] = time.perf_counter() - t0
print(__import__("json").dumps(out))
"""


def _cold_start() -> dict[str, Any]:
    """Two fresh processes on one empty numba cache directory: the first compiles, the
    second loads the cache. Seconds of the import and of the first default call (p=1, p=2)."""
    import tempfile

    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for name in ("first_process", "second_process"):
            run = subprocess.run(
                [sys.executable, "-c", COLD],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
                env=env,
            )
            res[name] = json.loads(run.stdout.strip().splitlines()[-1])
    return res


def _adult_one(method: str, p: int) -> dict[str, Any]:
    import pandas as pd

    from locpriv.tabular import anonymize

    df = pd.read_csv(ADULT)
    qi = ["age", "fnlwgt", "education-num", "hours-per-week", "sex", "race"]
    m = None if method == "default" else method
    kw: dict[str, Any] = {"nominal": ["sex", "race"], "warn": lambda _: None, "seed": 0}
    anonymize(df.head(300), qi, "occupation", 5, p, m, **kw)  # compile
    t0 = time.perf_counter()
    _, rep = anonymize(df, qi, "occupation", 5, p, m, **kw)
    return {
        "seconds": time.perf_counter() - t0,
        "il_percent": rep["il_percent"],
        "method_run": rep["method"],
        "min_group_size": rep["min_group_size"],
    }


def _one(method: str, n: int, d: int, k: int, p: int) -> dict[str, Any]:
    import numpy as np

    from locpriv.tabular.io.estimators import Microaggregator, run_method
    from locpriv.tabular.quality.metrics import il_percent
    from locpriv.tabular.quality.validate import is_p_sensitive

    rng = np.random.default_rng(12345)
    X = rng.random((n, d))
    S = rng.integers(0, 10, (n, 1))
    warm = rng.random((200, d))
    if method == "default":  # what runs without --method (Z-scored, as the CLI)
        Microaggregator(k=k, p=p).fit(warm, S[:200])
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        est = Microaggregator(k=k, p=p).fit(X, S)
        secs = time.perf_counter() - t0
        labels, k_used = est.labels_, est.k_used_
    else:
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
    ap.add_argument("--cold-start", action="store_true", help="only the cold-start row")
    ap.add_argument("--adult", action="store_true", help="only the mixed Adult rows")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--adult-one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        m, n, d, k, p = args.one.split(":")
        print(json.dumps(_one(m, int(n), int(d), int(k), int(p))))
        return 0
    if args.adult_one:
        m, p = args.adult_one.split(":")
        print(json.dumps(_adult_one(m, int(p))))
        return 0
    if args.cold_start or args.adult:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        extra: dict[str, Any] = {}
        if args.cold_start:
            extra["cold_start"] = _cold_start()
            print(json.dumps(extra["cold_start"], indent=1))
        if args.adult:
            extra["adult"] = {}
            for m, p in (("mdav", 1), ("default", 1), ("best", 1), ("default", 2)):
                res = subprocess.run(
                    [sys.executable, __file__, "--adult-one", f"{m}:{p}"],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=ROOT,
                    timeout=args.timeout,
                )
                extra["adult"][f"{m} p={p}"] = json.loads(res.stdout.strip().splitlines()[-1])
                print(m, p, extra["adult"][f"{m} p={p}"], flush=True)
        path = OUT.with_name("bench_tabular_release.json")  # updated, part by part
        old = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**old, **extra}, indent=2) + "\n")
        print(f"wrote {path}")
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
    meta["cold_start"] = _cold_start()
    print("cold start:", meta["cold_start"])
    meta["complete"] = True
    dump()
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
