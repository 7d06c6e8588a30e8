"""Moving-user index candidates for the anonymizer workload (see docs/algorithms.md).

n users over 20 km x 20 km (uniform). One epoch (1 s of caller time) = every user sends one
location update (random-walk step of ~10 m), interleaved with ``rate`` cloak-style queries
(k = 10 nearest users of a random user's current position) — the ratio of the cloak benchmark.
Every candidate keeps the :class:`locpriv.core.cloak.users.UserTable` (latest position/time, TTL)
and adds:

* ``rtree``: incremental R*-tree (delete + insert per update), exact queries;
* ``grid``: incremental uniform grid (250 m cells, dict of sets), exact ring-search queries;
* ``kdtree-exact``: cKDTree rebuilt on the first query after any update (measured on a few
  queries and extrapolated: it rebuilds for nearly every query);
* ``kdtree-epoch``: cKDTree rebuilt once per epoch (snapshot; answers describe the snapshot);
* ``snapshot-partition``: the cloaker itself (UserTable + per-epoch sorted snapshot and
  k-anonymous k-d partition); a query is ``Cloaker.request`` (k = 10).

Update and mean query costs are thread CPU time (the machine may be shared); the query p99 is
wall time. ``epoch cpu s`` = CPU for one epoch of traffic; <= 1 means one core keeps up.

    .venv/bin/python benchmarks/bench_index.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from spatial_indexes import GridIndex, KDTreeIndex, RtreeIndex, SpatialIndex, verify

from locpriv.core.cloak.cloaker import CloakConfig, Cloaker, CloakParams
from locpriv.core.cloak.users import UserTable

SIDE = 20_000.0
K = 10
OUT = Path(__file__).resolve().parent / "results" / "bench_index.json"
CANDIDATES = ["rtree", "grid", "kdtree-exact", "kdtree-epoch", "snapshot-partition"]


def run(name: str, n: int, rate: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, SIDE, (n, 2))
    ids = [f"user-{i}" for i in range(n)]
    table = UserTable(capacity=n)
    idx: SpatialIndex | None = None
    kd: KDTreeIndex | None = None
    ck: Cloaker | None = None
    t0 = time.perf_counter()
    if name == "snapshot-partition":
        ck = Cloaker(CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0))
        ck.update_many(ids, xy, now=0.0)
    else:
        slots = table.update_many(ids, xy, now=0.0)
        if name == "rtree":
            idx = RtreeIndex()
        elif name == "grid":
            idx = GridIndex(cell_m=250.0)
        else:
            kd = KDTreeIndex(table, max_age=1.0 if name == "kdtree-epoch" else 0.0)
            idx = kd
        for s, (x, y) in zip(slots.tolist(), xy.tolist(), strict=True):
            idx.move(s, x, y)
    build_s = time.perf_counter() - t0
    params = CloakParams(k=K, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0)
    order = rng.permutation(n)
    step = max(1, n // rate)  # updates between two queries
    max_queries = 20 if name == "kdtree-exact" else rate
    upd_t = 0.0
    q_lat: list[float] = []
    q_cpu: list[float] = []
    updates = 0
    moved = np.clip(xy[order] + rng.normal(0, 10.0, (n, 2)), 0.0, SIDE)
    xy[order] = moved
    queried = rng.integers(0, n, len(order)).tolist()
    order_l = order.tolist()
    xs = moved[:, 0].tolist()
    ys = moved[:, 1].tolist()
    now = 1.0  # one epoch, starting at an epoch boundary
    c_chunk = time.thread_time()  # CPU of the updates since the last query
    for j, u in enumerate(order_l):
        x = xs[j]
        y = ys[j]
        now = 1.0 + 0.999 * j / n
        if ck is not None:
            ck.update(ids[u], x, y, now)
        else:
            s = table.update(ids[u], x, y, now)
            idx.move(s, x, y)  # type: ignore[union-attr]
        updates += 1
        if j % step == 0 and len(q_lat) < max_queries:
            upd_t += time.thread_time() - c_chunk
            v = queried[j]
            t0 = time.perf_counter()
            c0 = time.thread_time()
            if ck is not None:
                ck.request(j, ids[v], params, now)
            else:
                assert idx is not None
                if kd is not None:
                    kd.tick(now)
                idx.nearest(float(xy[v, 0]), float(xy[v, 1]), K)
            q_cpu.append(time.thread_time() - c0)
            q_lat.append(time.perf_counter() - t0)
            c_chunk = time.thread_time()
        if name == "kdtree-exact" and len(q_lat) >= max_queries and updates >= 20_000:
            break
    upd_t += time.thread_time() - c_chunk
    ql = np.array(q_lat)
    upd_us = upd_t / updates * 1e6
    q_us = float(np.mean(q_cpu) * 1e6)
    # one epoch of this workload: n updates and `rate` queries; time it would take on one core
    epoch_s = n * upd_us * 1e-6 + rate * q_us * 1e-6
    return {
        "candidate": name,
        "users": n,
        "queries_per_epoch": rate,
        "build_s": build_s,
        "update_us": upd_us,
        "query_mean_us": q_us,
        "query_p99_us": float(np.percentile(ql, 99) * 1e6),
        "epoch_cpu_s": epoch_s,
        "sustainable": epoch_s <= 1.0,
        "queries_measured": len(q_lat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    args = ap.parse_args()
    verify()  # every candidate answers like brute force before anything is timed
    sizes = [(10_000, 2_000)] if args.quick else [(10_000, 2_000), (100_000, 20_000)]
    run("snapshot-partition", 2000, 200)  # warm-up (numba cache)
    rows = [run(c, n, rate) for n, rate in sizes for c in CANDIDATES]
    head = (
        f"{'candidate':>19} {'users':>7} {'build s':>8} {'upd µs':>7} {'query µs':>9} "
        f"{'q p99 µs':>9} {'epoch cpu s':>11}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['candidate']:>19} {r['users']:>7} {r['build_s']:>8.2f} {r['update_us']:>7.2f} "
            f"{r['query_mean_us']:>9.1f} {r['query_p99_us']:>9.1f} {r['epoch_cpu_s']:>11.3f}"
        )
    meta = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "quick": args.quick,
        "k": K,
        "note": "shared machine (other jobs running); epoch_cpu_s = n updates + queries, 1 s epoch",
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
