"""Colluding insiders parked beside a requester who stays put, against historical k-anonymity.

    .venv/bin/python benchmarks/bench_session_insiders.py [--quick] [--tree PATH]

Each of 40 requesters who never move has 0, 1, 2 or 4 insiders' devices (a login each)
parked within 10 m of her, reporting like everyone, over a 40-minute session at k = 5;
towns of 200 still users and 400 who pause and walk, or 50 and 150, on 2 km x 2 km; seeds 0
and 1 (:func:`simulators.attacks.parked_insiders_attack`). Per cell: the share of sessions in
whose every region fewer than k honest users were inside, and the median honest count.
``--tree PATH`` imports ``locpriv`` from another checkout (e.g. a ``git worktree`` of an older
commit) to measure its cloaker with the same attack. Prints a table and writes
benchmarks/results/bench_session_insiders.json (not with ``--tree``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "results" / "bench_session_insiders.json"
TOWNS = {"200 still / 400 walking": (200, 400), "50 still / 150 walking": (50, 150)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed, 0 and 2 insiders")
    ap.add_argument("--tree", help="a checkout whose locpriv to measure instead")
    args = ap.parse_args()
    if args.tree:
        sys.path.insert(0, str(Path(args.tree).resolve()))
        import locpriv  # noqa: F401  (bound to that tree before simulators imports it)

        sys.path.pop(0)
    from simulators.attacks import parked_insiders_attack

    seeds = (0,) if args.quick else (0, 1)
    counts = (0, 2) if args.quick else (0, 1, 2, 4)
    t0 = time.perf_counter()
    rows: dict[str, Any] = {}
    print(f"{'town':28} {'insiders':>8} {'below k (per seed)':>22} {'honest median':>16}")
    for town, (still, walking) in TOWNS.items():
        for c in counts:
            runs = [
                parked_insiders_attack(c, still_users=still, walkers=walking, seed=s) for s in seeds
            ]
            rows[f"{town}, insiders={c}"] = [dataclasses.asdict(r) for r in runs]
            below = " / ".join(f"{r.below_k_rate:.2f}" for r in runs)
            honest = " / ".join(f"{r.honest_median:g}" for r in runs)
            print(f"{town:28} {c:8d} {below:>22} {honest:>16}")
    seconds = time.perf_counter() - t0
    print(f"({seconds:.0f} s)")
    if not args.tree:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        result = {
            "machine": platform.platform(),
            "quick": args.quick,
            "cells": rows,
            "seconds": seconds,
        }
        OUT.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
