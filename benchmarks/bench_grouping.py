"""Protocol 4 group selection (locpriv.core.grouping.select_group): exact and heuristic timings,
quality.

Cases: the requester at the origin, m neighbours' perturbed points uniform in a square of side
``side_m`` around her, group size k, window (A_min, A_max) in m². For each case, many random
instances (fresh seeds); reported per case: median / p99 / max wall time in ms per call, share of
feasible instances, share proven exact, and for the heuristic the SSE ratio to the exact optimum
(computed on the same instance with an unlimited node budget).

* exact: ``node_budget=None`` (branch and bound to the end), goal m=30, k=5 in <= 10 ms;
* heuristic: ``node_budget=B`` then 1-swap local search, goal m=200 in <= 5 ms with SSE within
  5 % of the exact optimum;
* default: the library default (``DEFAULT_NODE_BUDGET``), which is what PeerClient uses.

The numba kernels are compiled (and cached) before timing.

    .venv/bin/python benchmarks/bench_grouping.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from locpriv.core.grouping import DEFAULT_NODE_BUDGET, Group, select_group

OUT = Path(__file__).resolve().parent / "results" / "bench_grouping.json"

CASES: list[dict[str, Any]] = [
    # name, m, k, side_m, a_min, a_max, budget (None = exact)
    {
        "name": "exact m=30 k=5",
        "m": 30,
        "k": 5,
        "side": 1000.0,
        "a_min": 2e4,
        "a_max": 1e6,
        "budget": None,
    },
    {
        "name": "exact m=30 k=5 tight window",
        "m": 30,
        "k": 5,
        "side": 1000.0,
        "a_min": 1.5e5,
        "a_max": 2.5e5,
        "budget": None,
    },
    {
        "name": "exact m=30 k=8",
        "m": 30,
        "k": 8,
        "side": 1000.0,
        "a_min": 2e4,
        "a_max": 1e6,
        "budget": None,
    },
    {
        "name": "heuristic m=200 k=5 B=2000",
        "m": 200,
        "k": 5,
        "side": 2000.0,
        "a_min": 2e4,
        "a_max": 1e6,
        "budget": 2000,
    },
    {
        "name": "heuristic m=200 k=5 tight B=2000",
        "m": 200,
        "k": 5,
        "side": 2000.0,
        "a_min": 1.5e5,
        "a_max": 2.5e5,
        "budget": 2000,
    },
    {
        "name": "heuristic m=200 k=5 tight B=20000",
        "m": 200,
        "k": 5,
        "side": 2000.0,
        "a_min": 1.5e5,
        "a_max": 2.5e5,
        "budget": 20000,
    },
    {
        "name": "heuristic m=200 k=10 B=2000",
        "m": 200,
        "k": 10,
        "side": 2000.0,
        "a_min": 5e4,
        "a_max": 2e6,
        "budget": 2000,
    },
    {
        "name": "default m=200 k=5",
        "m": 200,
        "k": 5,
        "side": 2000.0,
        "a_min": 2e4,
        "a_max": 1e6,
        "budget": DEFAULT_NODE_BUDGET,
    },
    {
        "name": "exact m=200 k=5",
        "m": 200,
        "k": 5,
        "side": 2000.0,
        "a_min": 2e4,
        "a_max": 1e6,
        "budget": None,
    },
]


def run_case(case: dict[str, Any], reps: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    times: list[float] = []
    ratios: list[float] = []
    nodes: list[int] = []
    feasible = exact = 0
    h = case["side"] / 2
    for _ in range(reps):
        cand = rng.uniform(-h, h, (case["m"], 2))
        args = ((0.0, 0.0), cand, case["k"], case["a_min"], case["a_max"])
        t0 = time.perf_counter()
        g = select_group(*args, node_budget=case["budget"])
        times.append((time.perf_counter() - t0) * 1e3)
        if isinstance(g, Group):
            feasible += 1
            exact += g.exact
            nodes.append(g.nodes)
            if case["budget"] is not None:
                ref = select_group(*args, node_budget=None)
                assert isinstance(ref, Group)
                ratios.append(g.sse_m2 / ref.sse_m2)
    t = np.array(times)
    row: dict[str, Any] = {
        **{k: v for k, v in case.items()},
        "reps": reps,
        "median_ms": float(np.median(t)),
        "p99_ms": float(np.percentile(t, 99)),
        "max_ms": float(t.max()),
        "feasible": feasible / reps,
        "proven_exact": exact / max(feasible, 1),
        "median_nodes": float(np.median(nodes)) if nodes else None,
    }
    if ratios:
        r = np.array(ratios)
        row["sse_ratio_mean"] = float(r.mean())
        row["sse_ratio_max"] = float(r.max())
        row["within_5pct"] = float((r <= 1.05).mean())
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    reps = 50 if args.quick else 200
    select_group((0.0, 0.0), np.ones((6, 2)) * np.arange(6)[:, None], 3, 0.0, 1e9)  # compile
    rows = [run_case(c, reps, seed=i + 1) for i, c in enumerate(CASES)]
    head = (
        f"{'case':34s} {'med ms':>7s} {'p99 ms':>7s} {'max ms':>7s} {'feas':>5s} {'exact':>5s} "
        f"{'SSE/opt mean':>12s} {'max':>6s} {'<=5%':>5s} {'med nodes':>9s}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        extra = (
            f"{r['sse_ratio_mean']:12.4f} {r['sse_ratio_max']:6.3f} {r['within_5pct']:5.2f}"
            if "sse_ratio_mean" in r
            else f"{'-':>12s} {'-':>6s} {'-':>5s}"
        )
        print(
            f"{r['name']:34s} {r['median_ms']:7.3f} {r['p99_ms']:7.3f} {r['max_ms']:7.3f} "
            f"{r['feasible']:5.2f} {r['proven_exact']:5.2f} {extra} {r['median_nodes'] or 0:9.0f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "benchmark": "bench_grouping",
                "quick": args.quick,
                "machine": {"python": platform.python_version(), "cpu": platform.processor()},
                "goals": {
                    "exact m=30 k=5": "<= 10 ms",
                    "heuristic m=200": "<= 5 ms, SSE <= 1.05 x exact",
                },
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
