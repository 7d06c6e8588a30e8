"""Benchmark: microaggregation at scale (the partitioned method) against exact MDAV.

Usage: ``.venv/bin/python benchmarks/bench_scale.py [--quick] [--big] [--only NAME,...]``

Data: 13-D uniform on [0, 1)^d (seed 12345), k = 3; the p-sensitive run adds one confidential
attribute with 8 equally likely values (p = 2). Every measurement runs in its own child process
(numba kernels loaded from the cache by a warm-up call), whose wall time and peak resident memory
(``VmHWM`` of the child's own process, read by the child at its end) are recorded. Ratios compare
runs of this same invocation, so they hold on a loaded machine better than the seconds do.

* ``mdav_ref``: exact MDAV on 100k rows, in-process kernel time (the reference of the goals), and
  ``cli_mdav_ref``: the same through ``locpriv anonymize --method mdav`` (Parquet in and out);
* ``il_200k``: IL of exact MDAV and of the partitioned method on the same 200k rows (uniform),
  and on 200k Census-like rows (Census resampled, 5 % log-normal noise: skewed, correlated);
* ``cli``: ``locpriv anonymize`` with the default method (partitioned from 200k rows), Parquet
  in and out, at 250k, 500k and 1M rows: wall time, peak RSS, IL, seconds per million rows;
* ``cli_p2``: the same at 1M with ``--sensitive s --p 2``; every equivalence class of the
  released file is checked (>= 3 rows, >= 2 values of s) from the file itself;
* ``workers``: the 1M run with ``--workers 1`` (the blocks in the CLI's own process) and
  ``--workers 2`` (two spawned worker processes, the default on this 2-core machine): the gain of
  the local pool (peak memory here is the CLI process's; each worker holds one block);
* ``cluster``: the 1M run through ``--scheduler`` on a LocalCluster of 2 worker processes;
* ``best``: IL and time of ``best`` (exact MDAV, local search, ruin-and-recreate) and of the
  partitioned method at 100k and 200k uniform rows: where the default switches over;
* ``big`` (``--big``): 10M x 13 through the Python API on a LocalCluster of 2 worker processes:
  rows per second per worker.

``--quick``: 10x smaller everywhere (smoke run). Writes benchmarks/results/bench_scale.json
(``--quick``: bench_scale_quick.json) and prints a table; with ``--only`` the sections run are
merged into the existing file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SEED = 12345
K = 3
D = 13
QI = [f"x{j}" for j in range(D)]
CENSUS = ROOT.parent / "shared" / "data" / "census.csv"


def _uniform(n: int) -> Any:
    import numpy as np

    return np.random.default_rng(SEED).random((n, D))


def _census_like(n: int) -> Any:
    import numpy as np
    import pandas as pd

    census = pd.read_csv(CENSUS).to_numpy(dtype=np.float64)
    rng = np.random.default_rng(SEED)
    rows = census[rng.integers(0, census.shape[0], n)]
    return rows * rng.lognormal(0.0, 0.05, rows.shape)


def _write_parquet(path: Path, n: int) -> None:
    import numpy as np
    import pandas as pd

    df = pd.DataFrame(_uniform(n), columns=QI)
    df["s"] = np.random.default_rng(SEED + 1).integers(0, 8, n)
    df["id"] = np.arange(n)
    df.to_parquet(path, index=False, row_group_size=100_000)


def _vm_hwm_mb() -> float:
    """This process's peak resident memory in MB (``VmHWM``: after exec, so not the parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")  # pragma: no cover - Linux only


def _child(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run ``argv``; its wall time and last stdout line (JSON with its ``peak_rss_mb``)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT)
        deadline = t0 + timeout
        while True:
            pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"timeout_s": timeout}
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().strip().splitlines()
        res: dict[str, Any] = {"wall_s": wall}
        if proc.returncode:
            res["error"] = err.read().strip().splitlines()[-1:]
        elif text and text[-1].startswith("{"):
            res.update(json.loads(text[-1]))
        return res


# ---- child bodies (``--one NAME:ARG``) -------------------------------------------------------


def _one_mdav(n: int) -> dict[str, Any]:
    from locpriv.tabular import mdav
    from locpriv.tabular.io.encoding import zscore
    from locpriv.tabular.quality.metrics import il_percent

    Z = zscore(_uniform(n))
    mdav(Z[:300], K)
    t0 = time.perf_counter()
    labels = mdav(Z, K)
    return {"seconds": time.perf_counter() - t0, "il_percent": il_percent(Z, labels)}


def _one_il(arg: str) -> dict[str, Any]:
    from locpriv.tabular import mdav
    from locpriv.tabular.io.encoding import zscore
    from locpriv.tabular.microagg.improve import best_partition
    from locpriv.tabular.microagg.partitioned import partitioned
    from locpriv.tabular.quality.metrics import il_percent

    kind, n_text, method = arg.split(",")
    n = int(n_text)
    Z = zscore(_uniform(n) if kind == "uniform" else _census_like(n))
    mdav(Z[:300], K)
    partitioned(Z[:3000], K, block_size=1024)
    best_partition(Z[:300], K)
    t0 = time.perf_counter()
    if method == "mdav":
        labels = mdav(Z, K)
    elif method == "best":
        labels = best_partition(Z, K)
    else:
        labels = partitioned(Z, K)
    return {"seconds": time.perf_counter() - t0, "il_percent": il_percent(Z, labels)}


def _one_big(n: int) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    from locpriv.tabular.io.encoding import zscore
    from locpriv.tabular.microagg.distributed import dask_runner
    from locpriv.tabular.microagg.partitioned import partitioned
    from locpriv.tabular.quality.metrics import il_percent

    Z = zscore(_uniform(n))
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        t0 = time.perf_counter()
        labels = partitioned(Z, K, runner=dask_runner(client))
        secs = time.perf_counter() - t0
        workers_mb = max(client.run(_vm_hwm_mb).values())
    return {
        "worker_peak_rss_mb": workers_mb,
        "seconds": secs,
        "rows_per_s": n / secs,
        "rows_per_s_per_worker": n / secs / 2,
        "il_percent": il_percent(Z, labels),
    }


def _check_release(path: str, p: int) -> dict[str, Any]:
    """Every equivalence class of a released file: rows >= K and (p > 1) values of s >= p."""
    import pandas as pd

    df = pd.read_parquet(path, columns=[*QI, "s"])
    g = df.groupby(QI, sort=False)["s"]
    sizes, values = g.size(), g.nunique()
    return {
        "classes": len(sizes),
        "min_class": int(sizes.min()),
        "min_values": int(values.min()),
        "valid": bool(sizes.min() >= K and (p <= 1 or values.min() >= p)),
    }


def _cli(src: Path, dst: Path, extra: list[str], timeout: float, p: int = 1) -> dict[str, Any]:
    rep = dst.with_suffix(".json")
    argv = [sys.executable, __file__, "--cli", "anonymize", str(src), str(dst)]
    argv += ["--qi", ",".join(QI), "--k", str(K), "--report", str(rep), *extra]
    res = _child(argv, timeout)
    if "wall_s" in res and "error" not in res:
        report = json.loads(rep.read_text())
        res.update({key: report[key] for key in ("method", "il_percent", "groups", "seconds")})
        res["min_group_size"] = report["min_group_size"]
        res.update(_check_release(str(dst), p))
    return res


def main() -> int:
    from locpriv.tabular.microagg.partitioned import DEFAULT_FROM_N

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10x smaller sizes (smoke run)")
    ap.add_argument("--big", action="store_true", help="also 10M x 13 on a LocalCluster")
    ap.add_argument("--only", default="", help="comma-separated subset of the sections")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per child, seconds")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--cli", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cli:  # `locpriv ...` in this process, then its peak memory
        from locpriv.cli import main as cli_main

        code = cli_main(args.cli)
        print(json.dumps({"peak_rss_mb": _vm_hwm_mb()}))
        return code
    if args.one:
        name, arg = args.one.split(":", 1)
        body = {"mdav": lambda: _one_mdav(int(arg)), "il": lambda: _one_il(arg)}
        body["big"] = lambda: _one_big(int(arg))
        print(json.dumps(body[name]() | {"peak_rss_mb": _vm_hwm_mb()}))
        return 0
    scale = 10 if args.quick else 1
    only = {s for s in args.only.split(",") if s}
    out = RESULTS / ("bench_scale_quick.json" if args.quick else "bench_scale.json")
    meta = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "quick": args.quick,
        "load_avg_start": os.getloadavg(),
        "note": "shared 2-core machine; ratios are within this run",
        "complete": False,
    }
    res: dict[str, Any] = {}
    if only and out.exists():  # a partial run updates the last full one
        old = json.loads(out.read_text())
        meta = old["meta"] | {"updated": sorted(only), "load_avg_update": os.getloadavg()}
        res = old["results"]

    def dump() -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"meta": meta, "results": res}, indent=2) + "\n")

    def want(name: str) -> bool:
        return not only or name in only

    me = [sys.executable, __file__, "--one"]
    ref_n = 100_000 // scale
    tag = "" if not only else "_" + "_".join(sorted(only))  # a partial run's own references
    res[f"mdav_ref{tag}"] = _child([*me, f"mdav:{ref_n}"], args.timeout) | {"n": ref_n}
    ref = res[f"mdav_ref{tag}"].get("seconds")
    print(f"exact MDAV {ref_n} x {D}, k={K}: {ref:.2f} s kernel", flush=True)
    dump()
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp_dir:
        tmp = Path(tmp_dir)
        src_ref = tmp / "ref.parquet"
        _write_parquet(src_ref, ref_n)
        ref_out = tmp / "ref_out.parquet"
        res[f"cli_mdav_ref{tag}"] = _cli(src_ref, ref_out, ["--method", "mdav"], 600)
        cli_ref = res[f"cli_mdav_ref{tag}"]["wall_s"]
        print(f"  the same through the CLI: {cli_ref:.2f} s wall", flush=True)
        dump()
        if want("il_200k"):
            n = 200_000 // scale
            for kind in ("uniform", "census_like"):
                for method in ("mdav", "partitioned"):
                    r = _child([*me, f"il:{kind},{n},{method}"], args.timeout)
                    res[f"il_{kind}_{method}"] = r | {"n": n}
                    il, secs = r.get("il_percent", float("nan")), r.get("seconds", float("nan"))
                    print(
                        f"IL {kind:11s} n={n} {method:11s} {il:8.4f} %  {secs:7.2f} s", flush=True
                    )
                    dump()
        sizes = [250_000, 500_000, 1_000_000]
        if want("cli"):
            for n in (s // scale for s in sizes):
                src = tmp / f"u{n}.parquet"
                _write_parquet(src, n)
                # the default method; quick runs are below its switch-over, so they name it
                extra = [] if n >= DEFAULT_FROM_N else ["--method", "partitioned"]
                r = _cli(src, tmp / f"o{n}.parquet", extra, args.timeout) | {"n": n}
                r["x_mdav_kernel"] = r["wall_s"] / ref
                r["x_mdav_cli"] = r["wall_s"] / cli_ref
                r["s_per_million"] = r["wall_s"] / n * 1e6
                res[f"cli_{n}"] = r
                print(
                    f"CLI n={n}: {r['wall_s']:.1f} s, {r['peak_rss_mb']:.0f} MB, IL "
                    f"{r['il_percent']:.4f} %, {r['x_mdav_kernel']:.1f}x MDAV kernel, "
                    f"{r['x_mdav_cli']:.1f}x MDAV CLI, valid {r['valid']}",
                    flush=True,
                )
                dump()
        n1 = 1_000_000 // scale
        src1 = tmp / f"u{n1}.parquet"
        if not src1.exists():
            _write_parquet(src1, n1)
        if want("cli_p2"):
            extra = ["--sensitive", "s", "--p", "2"]
            extra += [] if n1 >= DEFAULT_FROM_N else ["--method", "partitioned"]
            r = _cli(src1, tmp / "p2.parquet", extra, args.timeout, 2)
            r |= {"n": n1, "x_mdav_kernel": r["wall_s"] / ref, "x_mdav_cli": r["wall_s"] / cli_ref}
            res["cli_p2"] = r
            print(
                f"CLI p=2 n={n1}: {r['wall_s']:.1f} s, {r['peak_rss_mb']:.0f} MB, "
                f"{r['x_mdav_kernel']:.1f}x MDAV kernel, classes {r['classes']}, min rows "
                f"{r['min_class']}, min values {r['min_values']}, valid {r['valid']}",
                flush=True,
            )
            dump()
        if want("workers"):
            walls = {}
            for w in (1, 2):
                extra = ["--workers", str(w)]
                extra += [] if n1 >= DEFAULT_FROM_N else ["--method", "partitioned"]
                r = _cli(src1, tmp / f"w{w}.parquet", extra, args.timeout) | {"n": n1}
                r |= {"x_mdav_kernel": r["wall_s"] / ref, "x_mdav_cli": r["wall_s"] / cli_ref}
                res[f"cli_workers{w}"] = r
                walls[w] = r["wall_s"]
                print(
                    f"CLI --workers {w} n={n1}: {r['wall_s']:.1f} s, {r['peak_rss_mb']:.0f} MB, "
                    f"IL {r['il_percent']:.4f} %, {r['x_mdav_kernel']:.1f}x MDAV kernel, "
                    f"{r['x_mdav_cli']:.1f}x MDAV CLI",
                    flush=True,
                )
                dump()
            res["cli_workers2"]["speedup_vs_1"] = walls[1] / walls[2]
            dump()
        if want("cluster"):
            from distributed import LocalCluster

            with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as lc:
                extra = ["--scheduler", str(lc.scheduler_address), "--method", "partitioned"]
                r = _cli(src1, tmp / "cl.parquet", extra, args.timeout) | {"n": n1}
            r["x_mdav_kernel"] = r["wall_s"] / ref
            res["cli_cluster2"] = r
            print(
                f"CLI on a LocalCluster of 2 workers n={n1}: {r['wall_s']:.1f} s, "
                f"{r['x_mdav_kernel']:.1f}x MDAV kernel, IL {r['il_percent']:.4f} %",
                flush=True,
            )
            dump()
        if want("best"):
            for n in (100_000 // scale, 200_000 // scale):
                for method in ("best", "partitioned"):
                    r = _child([*me, f"il:uniform,{n},{method}"], args.timeout) | {"n": n}
                    res[f"best_{method}_{n}"] = r
                    il, secs = r.get("il_percent", float("nan")), r.get("seconds", float("nan"))
                    print(f"IL uniform n={n} {method:11s} {il:8.4f} %  {secs:7.2f} s", flush=True)
                    dump()
        if args.big:
            n = 10_000_000 // scale
            r = _child([*me, f"big:{n}"], args.timeout) | {"n": n}
            res["big_cluster2"] = r
            print(
                f"10M-class run n={n} on 2 workers: {r.get('seconds', float('nan')):.0f} s, "
                f"{r.get('rows_per_s_per_worker', float('nan')):.0f} rows/s per worker, "
                f"peak {r.get('peak_rss_mb', float('nan')):.0f} MB (client)",
                flush=True,
            )
            dump()
    meta["complete"] = True
    meta["load_avg_end"] = os.getloadavg()
    dump()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
