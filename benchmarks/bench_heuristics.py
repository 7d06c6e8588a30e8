"""Benchmark: information loss of the searches (``best``, ``best-p``) against the greedy methods.

Usage: ``.venv/bin/python benchmarks/bench_heuristics.py [--quick]``

* ``best``: IL of MDAV and of ``best_partition`` (default rounds) on data unlike Census, each
  z-scored: correlated log-normal 834 × 13 (income-like, the generator of
  tests/tabular/test_improve.py, seed 5), Student-t with 2 degrees of freedom 1500 × 6 (extreme
  outliers), uniform 1000 × 13 (k = 3, 4, 5, 10) and uniform 10k × 13 (k = 3; skipped by
  ``--quick``), with seconds.
* ``census_p``: Census (12 z-scored key attributes, the 13th in 10 equal-frequency classes, as
  tests/tabular/test_psensitive.py cuts it) for 2 <= p <= k <= 5: IL of ``mdav-seed``,
  ``random-seed`` (mean over seeds 0, 1, 2), ``sec-pk``, ``enhanced-pk`` (the paper's
  EnhancedPKClustering), ``k-increase`` and ``best-p`` (from the best of the others, default
  rounds). Skipped when ../shared/data/census.csv is
  missing.
* ``best_p_large``: ``best-p`` at 100k × 13 uniform, 10 uniform confidential values, k = 3,
  p = 2: seconds of the two starts and of the rounds, SSE gain (skipped by ``--quick``).

Writes benchmarks/results/bench_heuristics.json and prints tables.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from locpriv.tabular import (
    best_p_sensitive,
    enhanced_pk_clustering,
    il_percent,
    k_increase,
    mdav,
    mdav_seed,
    random_seed,
    sse,
)
from locpriv.tabular.io.encoding import zscore
from locpriv.tabular.microagg.improve import best_partition
from locpriv.tabular.psensitive.sec_pk import sec_pk_clustering

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "bench_heuristics.json"
CENSUS = ROOT.parent / "shared" / "data" / "census.csv"


def _lognormal(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(d, d))
    return np.exp(rng.multivariate_normal(np.zeros(d), L @ L.T / d, size=n))


def bench_best(quick: bool) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    sets = [
        ("lognormal_834x13", _lognormal(834, 13, 5), (3, 4, 5, 10)),
        ("student_t2_1500x6", rng.standard_t(2, size=(1500, 6)), (3, 4, 5, 10)),
        ("uniform_1000x13", rng.random((1000, 13)), (3, 4, 5, 10)),
    ]
    if not quick:
        sets.append(("uniform_10000x13", rng.random((10000, 13)), (3,)))
    rows = []
    print("\nbest_partition vs MDAV      k   MDAV IL   best IL  below MDAV  seconds")
    for name, X, ks in sets:
        Z = zscore(X)
        for k in ks:
            a = il_percent(Z, mdav(Z, k))
            t0 = time.perf_counter()
            b = il_percent(Z, best_partition(Z, k))
            secs = time.perf_counter() - t0
            row = {"data": name, "k": k, "mdav_il": a, "best_il": b, "below_pct": 100 * (1 - b / a)}
            row["seconds"] = secs
            rows.append(row)
            print(f"  {name:24s} {k:2d} {a:9.4f} {b:9.4f} {row['below_pct']:9.2f}% {secs:8.2f}")
    return rows


def bench_census_p() -> list[dict[str, Any]]:
    if not CENSUS.exists():
        print(f"census_p skipped: {CENSUS} not found")
        return []
    df = pd.read_csv(CENSUS)
    Z = zscore(df.iloc[:, :12].to_numpy(np.float64))
    s = pd.qcut(df.iloc[:, 12].rank(method="first"), 10, labels=False).to_numpy(np.int64)
    rows = []
    print(
        "\nCensus IL %   k p  mdav-seed random-seed  sec-pk enhanced-pk k-increase  best-p  seconds"
    )
    for k in range(2, 6):
        for p in range(2, k + 1):
            labs = {
                "mdav-seed": mdav_seed(Z, s, k, p),
                "sec-pk": sec_pk_clustering(Z, s, k, p),
                "enhanced-pk": enhanced_pk_clustering(Z, s, k, p),
                "k-increase": k_increase(Z, s, k, p)[0],
            }
            rand = [
                il_percent(Z, random_seed(Z, s, k, p, np.random.default_rng(r))) for r in range(3)
            ]
            start = min((*labs.values(),), key=lambda lab: sse(Z, lab))
            t0 = time.perf_counter()
            bp = best_p_sensitive(Z, s, k, p, start=start)
            secs = time.perf_counter() - t0
            row: dict[str, Any] = {m: il_percent(Z, lab) for m, lab in labs.items()}
            row.update({"k": k, "p": p, "random-seed": float(np.mean(rand))})
            row.update({"best-p": il_percent(Z, bp), "best_p_seconds": secs})
            rows.append(row)
            print(
                f"             {k} {p} {row['mdav-seed']:10.2f} {row['random-seed']:11.2f} "
                f"{row['sec-pk']:7.2f} {row['enhanced-pk']:11.2f} {row['k-increase']:10.2f} "
                f"{row['best-p']:7.2f} {secs:8.2f}"
            )
    return rows


def bench_best_p_large() -> dict[str, Any]:
    rng = np.random.default_rng(12345)
    X = rng.random((100_000, 13))
    S = rng.integers(0, 10, (100_000, 1))
    best_p_sensitive(X[:300], S[:300], 3, 2)  # load the compiled kernels
    t0 = time.perf_counter()
    starts = [mdav_seed(X, S, 3, 2), sec_pk_clustering(X, S, 3, 2)]
    start = min(starts, key=lambda lab: sse(X, lab))
    t_starts = time.perf_counter() - t0
    t0 = time.perf_counter()
    lab = best_p_sensitive(X, S, 3, 2, start=start)
    t_rounds = time.perf_counter() - t0
    gain = 100 * (1 - sse(X, lab) / sse(X, start))
    print(f"\nbest-p 100k x 13 k=3 p=2: starts {t_starts:.1f} s, rounds {t_rounds:.1f} s, "
          f"SSE {gain:.2f} % below the start")  # fmt: skip
    return {"starts_seconds": t_starts, "rounds_seconds": t_rounds, "sse_below_start_pct": gain}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small data only")
    args = ap.parse_args()
    out: dict[str, Any] = {
        "meta": {"python": platform.python_version(), "quick": args.quick},
        "best": bench_best(args.quick),
        "census_p": bench_census_p(),
    }
    if not args.quick:
        out["best_p_large"] = bench_best_p_large()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
