"""Benchmark: the virtual-clock runner on the ``city_grid`` scenario (wall time, outcomes).

Usage: ``.venv/bin/python benchmarks/bench_virtual.py [--quick]``

Runs :func:`simulators.virtual.run_virtual` (the real protocol machines and wire messages on a
virtual clock) on ``city_grid`` (10,000 users, one simulated hour; ``--quick``: 2,000 users,
ten minutes) and reports the wall time, the queries, the share answered per protocol, and the
share of P1/P3 answers whose region held fewer than k users in truth (reports are up to one
update interval old). Writes benchmarks/results/bench_virtual.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

from simulators.scenario import build, load_scenario
from simulators.virtual import run_virtual

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "bench_virtual.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="2,000 users for ten simulated minutes")
    args = ap.parse_args()
    sc = load_scenario("city_grid")
    if args.quick:
        sc = sc.replace(users=2000, duration_s=600.0)
    built = build(sc)
    t0 = time.perf_counter()
    res = run_virtual(built)
    wall = time.perf_counter() - t0
    per: dict[str, Any] = {}
    for proto in (1, 2, 3, 4):
        recs = [r for r in res.records if r.protocol == proto]
        if not recs:
            continue
        ok = [r for r in recs if r.ok]
        row: dict[str, Any] = {"queries": len(recs), "answered_pct": 100 * len(ok) / len(recs)}
        if proto in (1, 3):
            short = [r for r in ok if r.k_achieved is not None and r.k_achieved < r.k_requested]
            row["below_k_in_truth_pct"] = 100 * len(short) / max(1, len(ok))
        per[str(proto)] = row
    out = {
        "meta": {"python": platform.python_version(), "quick": args.quick},
        "scenario": {"name": "city_grid", "users": sc.users, "duration_s": sc.duration_s},
        "wall_seconds": wall,
        "queries": len(res.records),
        "protocols": per,
    }
    print(f"city_grid {sc.users} users, {sc.duration_s:.0f} simulated s: {len(res.records)} "
          f"queries in {wall:.1f} s wall")  # fmt: skip
    for proto, row in per.items():
        extra = row.get("below_k_in_truth_pct")
        tail = "" if extra is None else f", below k in truth {extra:.1f} %"
        print(f"  P{proto}: {row['queries']} queries, {row['answered_pct']:.1f} % answered{tail}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
