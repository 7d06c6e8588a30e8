"""Benchmark: the partitioned method on many cores (issue 23): speed-up, serial share, memory.

Usage (from the repository root; needs only numpy, numba, pandas, pyarrow and scipy, no install)::

    PYTHONPATH=. python benchmarks/bench_cores.py            # 1M x 13, workers 1,2,4,8,16
    PYTHONPATH=. python benchmarks/bench_cores.py --big      # also 10M x 13, k=3, p=1 and p=2
    PYTHONPATH=. python benchmarks/bench_cores.py --sizes 200000 --workers 1,2   # 2-core machine
    PYTHONPATH=. python benchmarks/bench_cores.py --sizes 1000000 --workers 1,2 --p 1,2 \
        --kinds threads,processes                      # thread vs process workers, one run
    PYTHONPATH=. python benchmarks/bench_cores.py --big --kinds threads,processes --tag 16core
                                                       # 16 cores: both kinds at 2..16 workers

Data: 13-D uniform on [0, 1)^d (seed 12345), k = 3, through the Python API
``anonymize(df, qi, k=3, method="partitioned", workers=W, workers_kind=K)`` (the issue's
measurement: the default method from 200k records); the p = 2 runs add one
confidential attribute with 8 equally likely values. Worker counts above ``os.cpu_count()`` are
skipped unless ``--oversubscribe`` (a memory model of many workers on a small machine: their
memory, not their speed). ``--kinds`` (default ``threads``, the API's default) lists the kinds
of local workers measured at every count above 1; the ``--big`` runs use the first. Every run
records a SHA-256 of its released frame and of its report without its timings
(``release_sha256``, ``report_sha256``): equal across worker counts and kinds when the
release is identical.
Every run is its own child process (numba kernels loaded by a warm-up call first); it
reports its wall time, IL, the stage report (``report["stages"]``: seconds and share of cores
busy per stage, serial share; ``serial_seconds`` / ``serial_cpu_seconds``: the stages without
tasks, ``parent_cpu_seconds``: the parent's own CPU in every stage) and peak memory: the
child's own ``VmHWM`` (thread workers included: they are the child's threads), the largest
worker process's peak (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` after the pool has exited; 0
for threads; it also counts the pages a child shared with the parent when it was forked, before
it ran its own program: at 10M the parent's whole size), the largest sampled ``VmRSS`` of any
worker process (``worker_rss_peak_mb``, its own memory) and the peak of the sum of the
resident memory of the child and all its workers (sampled every 0.2 s from /proc by the parent
benchmark process, whose CPU is not the child's; ``tree_peak_pss_mb`` sums the proportional
set sizes instead, counting the shared key matrix once).

Derived: speed-up and efficiency against the 1-worker run of the same size (same invocation),
the serial share of the 1-worker run from the stage report (Amdahl: the limit of the speed-up
is 1 / serial share) and the Karp-Flatt serial fraction ``(1/S - 1/W) / (1 - 1/W)`` of each
measured speed-up S at W workers (it includes imbalance and overheads, not only serial stages).

The 1-worker runs also get ``projected_speedup``: the bound their stage report gives at 2..16
workers (a stage of t tasks takes ceil(t/W)/t of its time; in stages without tasks the parallel
sections, column-wise work of i items on threads, take ceil(i/W)/i of theirs and the rest stays
serial; ``projected_speedup_cpu``: the same from CPU seconds). ``--p 1,2`` also runs the
``--sizes`` with p = 2.

Writes benchmarks/results/bench_cores.json (``--tag T``: bench_cores_T.json; one file per
invocation, never merged) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SEED = 12345
K = 3
D = 13


def _rss_kb(pid: int, key: str = "VmRSS") -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out.extend(int(c) for c in fh.read().split())
    except OSError:
        return out
    return out


def _pss_kb(pid: int) -> int:
    """Proportional set size: shared pages (the key matrix in shared memory, the libraries)
    divided among the processes that map them, so a sum over processes counts them once."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _workers_left() -> list[int]:
    """This process's children other than multiprocessing's resource tracker (which lives as
    long as this process)."""
    out = []
    for pid in _children(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"resource_tracker" in fh.read():
                    continue
        except OSError:
            continue
        out.append(pid)
    return out


class TreeSampler:
    """Peak of the summed VmRSS, and of the summed PSS, of this process and its descendants
    (sampled; RSS counts a page shared by several processes once in each, PSS once in all)."""

    def __init__(self, root: int, every_s: float = 0.2) -> None:
        self.root = root
        self.every_s = every_s
        self.peak_kb = 0
        self.peak_pss_kb = 0
        self.peak_each_kb: dict[int, int] = {}  # sampled VmRSS peak of each process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            todo, total, pss = [self.root], 0, 0
            while todo:
                pid = todo.pop()
                rss = _rss_kb(pid)
                total += rss
                self.peak_each_kb[pid] = max(self.peak_each_kb.get(pid, 0), rss)
                pss += _pss_kb(pid)
                todo.extend(_children(pid))
            self.peak_kb = max(self.peak_kb, total)
            self.peak_pss_kb = max(self.peak_pss_kb, pss)
            self._stop.wait(self.every_s)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _sha256_release(out: Any, report: dict[str, Any]) -> tuple[str, str]:
    """SHA-256 of the released frame (values, columns, dtypes) and of the report without its
    timings (``seconds`` and the stage log)."""
    import hashlib

    import pandas as pd

    h = hashlib.sha256()
    h.update(repr([(str(c), str(t)) for c, t in out.dtypes.items()]).encode())
    h.update(pd.util.hash_pandas_object(out, index=True).to_numpy().tobytes())
    rest = {k: v for k, v in report.items() if k not in ("stages", "seconds")}
    r = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode())
    return h.hexdigest(), r.hexdigest()


def child(n: int, workers: int, p: int, kind: str = "threads") -> dict[str, Any]:
    """One measurement in this (fresh) process."""
    import numpy as np
    import pandas as pd

    from locpriv.tabular.io.frame import anonymize

    qi = [f"x{j}" for j in range(D)]
    # blocks of 6,000 records (> 4,000: the projection-forest neighbour graph too), so every
    # kernel of the timed run is compiled (or loaded from its cache) before it
    warm = pd.DataFrame(np.random.default_rng(1).random((12_000, D)), columns=qi)
    warm["s"] = np.arange(12_000) % 8
    anonymize(warm, qi, ["s"] if p > 1 else [], K, p, "partitioned", block_size=8192)
    df = pd.DataFrame(np.random.default_rng(SEED).random((n, D)), columns=qi)
    sens: list[str] = []
    if p > 1:
        df["s"] = np.random.default_rng(SEED + 1).integers(0, 8, n)
        sens = ["s"]
    t0 = time.perf_counter()
    out, report = anonymize(
        df, qi, sens, K, p, "partitioned", seed=0, workers=workers, workers_kind=kind
    )
    wall = time.perf_counter() - t0
    release_sha, report_sha = _sha256_release(out, report)
    del out
    # the pool is handed back without waiting; its workers count in RUSAGE_CHILDREN once reaped
    deadline = time.monotonic() + 60.0
    while _workers_left() and time.monotonic() < deadline:
        time.sleep(0.1)
    return {
        "n": n,
        "p": p,
        "workers": workers,
        "workers_kind": kind if workers > 1 else "-",
        "seconds": wall,
        "release_sha256": release_sha,
        "report_sha256": report_sha,
        "il_percent": report["il_percent"],
        "method": report["method"],
        "groups": report["groups"],
        "stages": report.get("stages"),
        # the stage log covers anonymize from the encoding to the output frame; outside it only
        # the argument checks and the estimator's SSE of the result remain
        "outside_fit_seconds": wall - float((report.get("stages") or {}).get("seconds", 0.0)),
        **_serial(report.get("stages") or {}),
        "parent_peak_mb": _rss_kb(os.getpid(), "VmHWM") / 1024,
        "worker_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _serial(stages: dict[str, Any]) -> dict[str, float]:
    """Wall and CPU seconds of the stages that ran no task (the parent alone), less their
    parallel sections (column-wise work on threads), and the parent's own CPU seconds over
    every stage (serial stages plus sending the tasks)."""
    rows = stages.get("stages", [])
    return {
        "serial_seconds": sum(
            float(r["seconds"]) - float(r.get("parallel_seconds", 0.0))
            for r in rows
            if r["tasks"] == 0
        ),
        "serial_cpu_seconds": sum(
            float(r["cpu_seconds"]) - float(r.get("parallel_cpu_seconds", 0.0))
            for r in rows
            if r["tasks"] == 0
        ),
        "parallel_stage_seconds": sum(
            float(r.get("parallel_seconds", 0.0)) for r in rows if r["tasks"] == 0
        ),
        "parent_cpu_seconds": sum(
            float(r.get("parent_cpu_seconds", r["cpu_seconds"] if r["tasks"] == 0 else 0.0))
            for r in rows
        ),
    }


def _spawn(n: int, workers: int, p: int, kind: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--child", f"{n},{workers},{p},{kind}"]
    # the memory of the child and its workers is sampled from here, so the sampling (reading
    # /proc/PID/smaps_rollup costs CPU) is not counted in the child's stage report
    with (
        subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        ) as proc,
        TreeSampler(proc.pid) as tree,
    ):
        stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"child {n},{workers},{p},{kind} failed:\n{stderr[-4000:]}")
    out: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    out["tree_peak_mb"] = tree.peak_kb / 1024
    out["tree_peak_pss_mb"] = tree.peak_pss_kb / 1024
    others = [kb for pid, kb in tree.peak_each_kb.items() if pid != proc.pid]
    out["worker_rss_peak_mb"] = max(others, default=0) / 1024
    return out


def projected_speedup(stages: dict[str, Any], workers: int, clock: str = "seconds") -> float:
    """Speed-up bound at ``workers`` from a 1-worker stage report: a stage of t equal tasks
    takes ceil(t / workers) / t of its time (no overheads); in a stage without tasks, each of
    its parallel sections (column-, group- or block-wise work on threads,
    ``parallel_by_items``: wall seconds by number of items i, measured on one thread) takes
    ceil(i / workers) / i of its time and the rest stays serial. ``clock="cpu_seconds"``: the
    same from the CPU seconds (the sections' share of a stage's CPU taken from
    ``parallel_cpu_seconds``), which other jobs on the machine distort less."""
    total, proj = 0.0, 0.0
    for r in stages["stages"]:
        sec, t = float(r[clock]), int(r["tasks"])
        total += sec
        if t > 0:
            proj += sec * -(-t // workers) / t
            continue
        by = {int(i): float(v) for i, v in r.get("parallel_by_items", {}).items()}
        if not by and int(r.get("parallel_items", 0)) > 0:
            by = {int(r["parallel_items"]): float(r.get("parallel_seconds", 0.0))}
        wall = sum(by.values())
        if clock != "seconds" and wall > 0:  # the sections' CPU, split as their wall seconds
            cpu = float(r.get("parallel_cpu_seconds", 0.0))
            by = {i: v * cpu / wall for i, v in by.items()}
        par = sum(by.values())
        scale = min(1.0, sec / par) if par > 0 else 0.0  # the sections lie inside the stage
        proj += sec - par * scale + sum(v * scale * -(-i // workers) / i for i, v in by.items())
    return total / proj if proj > 0 else 1.0


def _derive(runs: list[dict[str, Any]]) -> None:
    for r in runs:
        if r["workers"] == 1 and r.get("stages"):
            r["projected_speedup"] = {
                str(w): projected_speedup(r["stages"], w) for w in (2, 4, 8, 16)
            }
            r["projected_speedup_cpu"] = {
                str(w): projected_speedup(r["stages"], w, "cpu_seconds") for w in (2, 4, 8, 16)
            }
    base = {(r["n"], r["p"]): r for r in runs if r["workers"] == 1}
    for r in runs:
        b = base.get((r["n"], r["p"]))
        if b is None:
            continue
        s = b["seconds"] / r["seconds"]
        w = r["workers"]
        r["speedup"] = s
        r["efficiency"] = s / w
        r["karp_flatt"] = (1 / s - 1 / w) / (1 - 1 / w) if w > 1 else None
        r["il_equal_to_1_worker"] = r["il_percent"] == b["il_percent"]
        r["release_equal_to_1_worker"] = (
            r["release_sha256"] == b["release_sha256"] and r["report_sha256"] == b["report_sha256"]
        )


def _table(runs: list[dict[str, Any]]) -> str:
    head = (
        f"{'n':>9} {'p':>2} {'W':>3} {'kind':>9} {'seconds':>8} {'speedup':>8} {'eff':>5} "
        f"{'serial':>7} "
        f"{'KF':>6} {'ser.CPU':>7} {'ser.s':>6} {'IL %':>7} {'parent MB':>9} {'worker MB':>9} "
        f"{'tree MB':>8} {'PSS MB':>7} {'same':>4}"
    )
    lines = [head]
    for r in runs:
        st = r.get("stages") or {}
        kf = r.get("karp_flatt")
        lines.append(
            f"{r['n']:>9} {r['p']:>2} {r['workers']:>3} {r['workers_kind']:>9} "
            f"{r['seconds']:>8.2f} "
            f"{r.get('speedup', float('nan')):>8.2f} {r.get('efficiency', float('nan')):>5.2f} "
            f"{100 * st.get('serial_share', float('nan')):>6.1f}% "
            f"{'' if kf is None else f'{kf:.3f}':>6} "
            f"{100 * st.get('serial_cpu_share', float('nan')):>6.1f}% "
            f"{r.get('serial_cpu_seconds', float('nan')):>6.2f} {r['il_percent']:>7.4f} "
            f"{r['parent_peak_mb']:>9.0f} {r.get('worker_rss_peak_mb', 0.0):>9.0f} "
            f"{r['tree_peak_mb']:>8.0f} "
            f"{r.get('tree_peak_pss_mb', float('nan')):>7.0f} "
            f"{r.get('release_equal_to_1_worker', '')!s:>4}"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000", help="records, comma-separated")
    ap.add_argument("--workers", default="1,2,4,8,16", help="worker counts, comma-separated")
    ap.add_argument("--p", default="1", help="p of the --sizes runs, comma-separated (1, 2)")
    ap.add_argument(
        "--kinds",
        default="threads",
        help="kinds of local workers at counts above 1, comma-separated (threads, processes)",
    )
    ap.add_argument("--big", action="store_true", help="also 10M x 13, p=1 and p=2")
    ap.add_argument("--big-p", default="1,2", help="p of the --big runs, comma-separated")
    ap.add_argument(
        "--oversubscribe",
        action="store_true",
        help="keep worker counts above the machine's cores (memory of many workers)",
    )
    ap.add_argument("--big-n", type=int, default=10_000_000, help="records of --big (smoke runs)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each setting (best kept)")
    ap.add_argument("--tag", default="", help="suffix of the results file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        n_s, w_s, p_s, kind = args.child.split(",")
        print(json.dumps(child(int(n_s), int(w_s), int(p_s), kind)))
        return
    cores = os.cpu_count() or 1
    counts = [
        w for w in (int(v) for v in args.workers.split(",")) if w <= cores or args.oversubscribe
    ]
    kinds = [k for k in args.kinds.split(",") if k]
    ps = [int(v) for v in args.p.split(",")]
    plan = [
        (int(n), w, p, kind)
        for n in args.sizes.split(",")
        for p in ps
        for w in counts
        for kind in (kinds if w > 1 else kinds[:1])
    ]
    if args.big:
        plan += [(args.big_n, max(counts), int(p), kinds[0]) for p in args.big_p.split(",")]
    runs = []
    for n, w, p, kind in plan:
        best = min(
            (_spawn(n, w, p, kind) for _ in range(max(1, args.repeat))),
            key=lambda r: r["seconds"],
        )
        runs.append(best)
        print(
            f"n={n} p={p} workers={w} {kind}: {best['seconds']:.2f} s",
            file=sys.stderr,
            flush=True,
        )
    _derive(runs)
    print(_table(runs))
    for r in runs:
        if r["workers"] == min(counts) and r.get("stages"):
            print(f"\nstages, n={r['n']} p={r['p']} workers={r['workers']}:")
            if "projected_speedup" in r:
                proj = ", ".join(f"{w}: {v:.2f}" for w, v in r["projected_speedup"].items())
                print(f"  projected speed-up from these stages (workers: x): {proj}")
                cpu = ", ".join(f"{w}: {v:.2f}" for w, v in r["projected_speedup_cpu"].items())
                print(f"  the same from their CPU seconds: {cpu}")
            for s in r["stages"]["stages"]:
                par = float(s.get("parallel_seconds", 0.0))
                on = f"  parallel {par:.3f} s ({s.get('parallel_items', 0)} items)" if par else ""
                print(
                    f"  {s['stage']:<20} {s['seconds']:>8.3f} s  CPU {s['cpu_seconds']:>8.3f} s"
                    f"  busy {100 * s['busy']:.0f} %{on}"
                )
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "bench_cores" + (f"_{args.tag}" if args.tag else "") + ".json"
    doc = {
        "machine": {"cpu_count": cores, "platform": platform.platform()},
        "python": sys.version.split()[0],
        "runs": runs,
    }
    (RESULTS / name).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {RESULTS / name}")


if __name__ == "__main__":
    main()
