"""Study (not a shipped design): how much of a session's area is its members' stale fixes?

    .venv/bin/python benchmarks/study_fix_interval.py [--seeds 23,24] [--intervals 30,5]

bench_privacy's city (``city_sessions``: 2,000 pedestrians, 100 of them asking every minute
for 30-60 minutes with k in {3, 5, 10}; the real protocol machines on the virtual clock) with
every device reporting its position every ``interval`` seconds instead of the scenario's 30 s,
on each seed: the undefended median area (no sessions), the sessions' median (the shipped
settings, ``session_s`` = 600 s), their ratio (issue 22's goal: at most 5), the share of
requests answered and of sessions the intersection attack narrows below k. A session keeps
each member off its region's edges by how far she may have walked since her last fix, so
fresher fixes mean smaller regions; this measures what a deployment whose devices report more
often, or an anonymizer that asked a session's members for a fresh fix before it answers,
would pay. Prints a table and writes benchmarks/results/study_fix_interval.json (with
``--seeds`` or ``--intervals``, study_fix_interval_custom.json). Deterministic per seed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from simulators.city import CITY_SEEDS, CITY_SESSION_S, city_figures, city_scenario  # noqa: E402
from simulators.scenario import build  # noqa: E402
from simulators.virtual import VirtualConfig, run_virtual  # noqa: E402

INTERVALS = (30.0, 5.0)
"""Seconds between a device's location reports (30: the scenario's own)."""


def _run(job: tuple[int, float, float]) -> dict[str, Any]:
    seed, interval, session_s = job
    t0 = time.perf_counter()
    sc = city_scenario(session_s, False, seed).replace(update_interval_s=interval)
    f = city_figures(run_virtual(build(sc), config=VirtualConfig()))
    return {
        "seed": seed,
        "interval_s": interval,
        "session_s": session_s,
        "area_m2_median": f["area_m2_median"],
        "narrowed": f["success_rate"],
        "answered": f["answered_rate"],
        "seconds": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="", help="comma-separated city seeds (default 23-27)")
    ap.add_argument("--intervals", default="", help="comma-separated report intervals, s")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s] or list(CITY_SEEDS)
    intervals = [float(s) for s in args.intervals.split(",") if s] or list(INTERVALS)
    jobs = [(s, i, x) for s in seeds for i in intervals for x in (0.0, CITY_SESSION_S)]
    jobs.sort(key=lambda j: j[1])  # the slow short intervals last, spread over the workers
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
        runs = list(pool.map(_run, jobs))
    by = {(r["seed"], r["interval_s"], r["session_s"] > 0): r for r in runs}
    rows = []
    print(f"{'seed':>4s} {'interval s':>10s} {'undefended m2':>14s} {'sessions m2':>12s} "
          f"{'ratio':>6s} {'answered':>9s} {'narrowed':>9s}")  # fmt: skip
    for seed in seeds:
        for interval in intervals:
            base, ses = by[(seed, interval, False)], by[(seed, interval, True)]
            ratio = ses["area_m2_median"] / base["area_m2_median"]
            rows.append(
                {
                    "seed": seed,
                    "interval_s": interval,
                    "undefended_m2": base["area_m2_median"],
                    "sessions_m2": ses["area_m2_median"],
                    "ratio": ratio,
                    "answered": ses["answered"],
                    "narrowed": ses["narrowed"],
                }
            )
            print(f"{seed:4d} {interval:10g} {base['area_m2_median']:14.0f} "
                  f"{ses['area_m2_median']:12.0f} {ratio:6.2f} {ses['answered']:9.1%} "
                  f"{ses['narrowed']:9.1%}")  # fmt: skip
    for interval in intervals:
        rs = [r["ratio"] for r in rows if r["interval_s"] == interval]
        print(f"interval {interval:g} s: ratio mean {sum(rs) / len(rs):.2f}, max {max(rs):.2f}")
    seconds = time.perf_counter() - t0
    custom = bool(args.seeds or args.intervals)
    out = HERE / "results" / f"study_fix_interval{'_custom' if custom else ''}.json"
    machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
    doc = {"machine": machine, "rows": rows, "runs": runs, "seconds": seconds}
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out} ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
