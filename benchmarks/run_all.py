"""Run every benchmark, one after the other (each prints its table and writes its JSON).

    .venv/bin/python benchmarks/run_all.py [--quick] [--only NAME[,NAME...]]

Benchmarks are never collected by the test run. Results land in benchmarks/results/<name>.json.
Run them on an otherwise idle machine: they measure wall-clock speed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke runs")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(names)}")
    args = ap.parse_args()
    chosen = [n for n in args.only.split(",") if n] or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)}")
    failed: list[str] = []
    for name in chosen:
        cmd = [sys.executable, str(HERE / f"{name}.py"), *(["--quick"] if args.quick else [])]
        print(f"\n=== {name}", flush=True)
        start = time.perf_counter()
        rc = subprocess.call(cmd, cwd=HERE.parent)
        print(f"=== {name}: exit {rc} after {time.perf_counter() - start:.1f} s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
