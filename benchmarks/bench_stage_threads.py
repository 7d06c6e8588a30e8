"""Benchmark: the parent's column-wise stages on 1 and more threads (issue 23).

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_stage_threads.py                 # 1M x 13, threads 1,2
    PYTHONPATH=. python benchmarks/bench_stage_threads.py --n 200000 --threads 1,2,4

The stages that run no block task (``encode``, ``metrics``, ``release``, ``audit``) do their
column- and group-wise work through :func:`locpriv.tabular.threads.map_items`; the stage report
counts that work as parallel and the projection of many workers divides it by the workers
(``benchmarks/bench_cores.py``, ``projected_speedup``). This measures how far that holds: each
function the stages call, as the stage calls it (its serial parts included), timed on 1 thread
and on more (``kernel_threads``), alternately, ``--repeat`` times, the least wall time kept.
Data: 13-D uniform (seed 12345), groups of 3 random records, one confidential column of 8 values
(the audit's case with p = 2). Every thread count must give the same results: checked here too.

Writes benchmarks/results/bench_stage_threads.json (``--tag``) and prints a table: wall and CPU
seconds per thread count and the speed-up over 1 thread.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _cases(n: int) -> dict[str, Callable[[], Any]]:
    import numpy as np
    import pandas as pd

    from locpriv.tabular.io import frame
    from locpriv.tabular.io.encoding import encode, encode_written
    from locpriv.tabular.quality import metrics

    d = 13
    qi = [f"x{j}" for j in range(d)]
    df = pd.DataFrame(np.random.default_rng(12345).random((n, d)), columns=qi)
    df["s"] = np.random.default_rng(12346).integers(0, 8, n)
    labels = (np.random.default_rng(1).permutation(n) // 3).astype(np.int64)
    cols, values = frame._key_columns(df, qi, [], [])
    Z = encode(cols, values).Z
    keys, written = frame._written_keys(df, cols, values, labels, "centroids")
    assert written is not None
    WZ = encode_written(cols, values, written)
    return {
        "encode (z-scores, matrix)": lambda: encode(cols, values).Z,
        "metrics: group means": lambda: metrics.group_means(Z, labels),
        "metrics: SST": lambda: metrics.sst(Z),
        "metrics: Truta's IL (spans)": lambda: metrics.truta_il_normalised(Z, labels),
        "release: written keys": lambda: frame._written_keys(df, cols, values, labels, "centroids")[
            0
        ],
        "release: written on the scale": lambda: encode_written(cols, values, written),
        "release: squared error": lambda: metrics.squared_distances(Z, WZ),
        "release: classes (row hash)": lambda: frame.release_classes(keys, qi),
        "audit (13 key columns, 1 confidential)": lambda: frame.audit_pass_through(
            df, qi, {"s": "confidential"}, 3
        ),
    }


def _same(a: Any, b: Any) -> bool:
    import numpy as np
    import pandas as pd

    if isinstance(a, pd.DataFrame):
        return bool(a.equals(b))
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(
        json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="records")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="timings of each (least kept)")
    ap.add_argument("--tag", default="", help="suffix of the results file")
    args = ap.parse_args()
    from locpriv.tabular.threads import kernel_threads

    counts = [int(t) for t in args.threads.split(",")]
    cases = _cases(args.n)
    rows = []
    for name, fn in cases.items():
        fn()  # compile / load the kernels
        best: dict[int, tuple[float, float]] = {}
        first: dict[int, Any] = {}
        for _ in range(args.repeat):
            for t in counts:
                with kernel_threads(t):
                    w0, c0 = time.perf_counter(), time.process_time()
                    out = fn()
                    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                first.setdefault(t, out)
                if t not in best or wall < best[t][0]:
                    best[t] = (wall, cpu)
        same = all(_same(first[counts[0]], first[t]) for t in counts)
        rows.append(
            {
                "stage": name,
                "wall": {str(t): best[t][0] for t in counts},
                "cpu": {str(t): best[t][1] for t in counts},
                "speedup": {str(t): best[counts[0]][0] / best[t][0] for t in counts},
                "same_result": same,
            }
        )
        cells = "  ".join(
            f"{t} thr {best[t][0]:.3f} s (CPU {best[t][1]:.3f}, "
            f"x{best[counts[0]][0] / best[t][0]:.2f})"
            for t in counts
        )
        print(f"{name:<42} {cells}  same={same}", flush=True)
    tot = {str(t): sum(r["wall"][str(t)] for r in rows) for t in counts}
    print(
        "all: "
        + ", ".join(f"{t} thr {tot[str(t)]:.3f} s" for t in counts)
        + f"  (x{tot[str(counts[0])] / tot[str(counts[-1])]:.2f} at {counts[-1]})"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "bench_stage_threads" + (f"_{args.tag}" if args.tag else "") + ".json"
    doc = {
        "machine": {"cpu_count": os.cpu_count(), "load": os.getloadavg()},
        "python": sys.version.split()[0],
        "n": args.n,
        "rows": rows,
        "total_wall": tot,
    }
    (RESULTS / name).write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {RESULTS / name}")


if __name__ == "__main__":
    main()
