"""In-process cloaking throughput and quality of locpriv.core.cloak.cloaker.Cloaker.

Workload per scenario (n users over 20 km x 20 km, uniform or clustered): for each 1 s epoch,
every user sends one location update (random-walk step, batches of 1000 through
``update_many``), and after every batch ``rate/100`` cloak requests arrive for random users with a
profile drawn from PROFILES. At each epoch boundary ``Cloaker.prepare`` (as a service timer would)
takes the snapshot and pre-builds the partitions the previous epoch used ("prep ms" per epoch).

Reported: cloaks/s (requests / wall time in ``request()`` plus ``prepare()``, and the same per
thread CPU second, which is what one core sustains when the machine is shared); p50/p99/max latency
of ``request()`` (including any partition build a request still triggers); updates/s absorbed
(batched and single ``update()``); success rate (all requests, and those for which a feasible
region provably exists: the smallest square centred on the user holding k users fits under A_max);
mean achieved k over requested k (achieved = users inside R, checked by brute force on a sample)
and over a reference ``max(k, users in the A_min square centred on the user)`` (A_min alone may
force more than k); median area / A_min. A second table compares achieved k with Hilbert Cloak and
a quadtree (Casper / Interval Cloak) on k-only requests.

    .venv/bin/python benchmarks/bench_cloak.py [--quick]
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
from numpy.typing import NDArray
from scipy.spatial import cKDTree

from locpriv.core.cloak.cloaker import CloakConfig, Cloaker, CloakParams

SIDE = 20_000.0
PROFILES = [
    CloakParams(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0),
    CloakParams(k=10, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0),
    CloakParams(k=20, a_min_m2=5e4, a_max_m2=4e6, max_delay_s=0.0),
    CloakParams(k=50, a_min_m2=1e5, a_max_m2=1e7, max_delay_s=0.0),
]
OUT = Path(__file__).resolve().parent / "results" / "bench_cloak.json"


def population(kind: str, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Uniform, or clustered: 20 % in one 30 m spot, 60 % in 8 Gaussian hot spots, 20 % uniform."""
    if kind == "uniform":
        return rng.uniform(0, SIDE, (n, 2))
    xy = rng.uniform(0, SIDE, (n, 2))
    spot = int(0.2 * n)
    xy[:spot] = rng.normal((7000.0, 12_000.0), 30.0, (spot, 2))
    hs = int(0.6 * n)
    centres = rng.uniform(2000, SIDE - 2000, (8, 2))
    sd = rng.uniform(300, 1500, 8)
    which = rng.integers(0, 8, hs)
    xy[spot : spot + hs] = centres[which] + rng.normal(size=(hs, 2)) * sd[which, None]
    out: NDArray[np.float64] = np.clip(xy, 0.0, SIDE)
    return out


def run(
    kind: str, n: int, epochs: int, rate: int, seed: int = 0, *, use_prepare: bool = True
) -> dict[str, Any]:
    prep_time = 0.0
    prep_cpu = 0.0
    req_cpu = 0.0
    rng = np.random.default_rng(seed)
    ck = Cloaker(CloakConfig(world=(0.0, 0.0, SIDE, SIDE), epoch_s=1.0, user_ttl_s=30.0))
    ids = [f"user-{i}" for i in range(n)]
    xy = population(kind, n, rng)
    ck.update_many(ids, xy, now=-0.5)
    batch = 1000
    per_batch = max(1, rate * batch // n)
    lat: list[float] = []
    upd_time = 0.0
    upd_count = 0
    ok = 0
    feasible = 0
    ok_feasible = 0
    ratio_k: list[float] = []
    area_ratio: list[float] = []
    ratio_ref: list[float] = []
    checks: list[tuple[NDArray[np.float64], int, int, tuple[float, float, float, float]]] = []
    snap_xy = xy.copy()
    tree = cKDTree(snap_xy)
    now = 0.0
    for epoch in range(epochs):
        order = rng.permutation(n)
        for b0 in range(0, n, batch):
            sel = order[b0 : b0 + batch]
            xy[sel] = np.clip(xy[sel] + rng.normal(0, 10.0, (len(sel), 2)), 0.0, SIDE)
            now = epoch + 0.999 * b0 / n
            t0 = time.perf_counter()
            ck.update_many([ids[i] for i in sel], xy[sel], now)
            upd_time += time.perf_counter() - t0
            upd_count += len(sel)
            if b0 == 0:  # the epoch's snapshot holds these positions
                snap_xy = xy.copy()
                tree = cKDTree(snap_xy)
                if use_prepare:  # a timer at the epoch boundary does the epoch's heavy work
                    t0 = time.perf_counter()
                    c0 = time.thread_time()
                    ck.prepare(now)
                    prep_cpu += time.thread_time() - c0
                    prep_time += time.perf_counter() - t0
            users = rng.integers(0, n, per_batch)
            profs = rng.integers(0, len(PROFILES), per_batch)
            for u, pi in zip(users.tolist(), profs.tolist(), strict=True):
                p = PROFILES[pi]
                t0 = time.perf_counter()
                c0 = time.thread_time()
                out = ck.request(len(lat), ids[u], p, now)
                req_cpu += time.thread_time() - c0
                lat.append(time.perf_counter() - t0)
                # feasibility: smallest centred square holding k users (Chebyshev k-NN)
                d, _ = tree.query(snap_xy[u], k=[p.k], p=np.inf)
                side = 2 * float(d[0])
                feas = side * side < p.a_max_m2
                feasible += feas
                if out is not None and out.region is not None:
                    ok += 1
                    ok_feasible += feas
                    ratio_k.append(out.region.users / p.k)
                    area_ratio.append(out.region.area_m2 / p.a_min_m2)
                    # reference: users in the A_min square centred on U (A_min may force > k)
                    half = 0.5 * float(np.sqrt(p.a_min_m2))
                    in_amin = int(
                        tree.query_ball_point(snap_xy[u], half, p=np.inf, return_length=True)
                    )
                    ratio_ref.append(out.region.users / max(p.k, in_amin))
                    if len(checks) < 300 and len(lat) % 7 == 0:
                        checks.append((snap_xy, u, p.k, out.region.polygon.bounds))
    # single update() calls (a service absorbing one message at a time)
    t0 = time.perf_counter()
    singles = min(n, 50_000)
    sel = rng.integers(0, n, singles)
    for i in sel.tolist():
        ck.update(ids[i], float(xy[i, 0]), float(xy[i, 1]), now)
    single_rate = singles / (time.perf_counter() - t0)
    # brute-force check of achieved k on a sample (positions of the last snapshot)
    bad = 0
    for sxy, u, k, (x0, y0, x1, y1) in checks:
        inside = (sxy[:, 0] >= x0) & (sxy[:, 0] <= x1) & (sxy[:, 1] >= y0) & (sxy[:, 1] <= y1)
        bad += int(inside.sum() < k or not inside[u])
    la = np.array(lat)
    total = len(lat)
    return {
        "scenario": f"{kind}-{n // 1000}k",
        "users": n,
        "distribution": kind,
        "requests": total,
        "cloaks_per_s": total / (float(la.sum()) + prep_time),
        "cloaks_per_cpu_s": total / (req_cpu + prep_cpu),
        "epoch_prepare_ms": prep_time / epochs * 1e3,
        "p50_us": float(np.percentile(la, 50) * 1e6),
        "p99_us": float(np.percentile(la, 99) * 1e6),
        "max_ms": float(la.max() * 1e3),
        "updates_per_s_batched": upd_count / upd_time,
        "updates_per_s_single": single_rate,
        "success_rate": ok / total,
        "feasible_share": feasible / total,
        "success_rate_feasible": ok_feasible / max(1, feasible),
        "mean_achieved_k_over_k": float(np.mean(ratio_k)) if ratio_k else float("nan"),
        "mean_achieved_k_over_ref": float(np.mean(ratio_ref)) if ratio_ref else float("nan"),
        "median_area_over_a_min": float(np.median(area_ratio)) if area_ratio else float("nan"),
        "brute_force_violations": bad,
    }


def _keys(xy: NDArray[np.float64], order: int = 16, hilbert: bool = True) -> NDArray[np.int64]:
    """Hilbert (or Morton) keys of points on a 2^order grid over the world square."""
    n = 1 << order
    xi = np.clip((xy[:, 0] / SIDE * n).astype(np.int64), 0, n - 1)
    yi = np.clip((xy[:, 1] / SIDE * n).astype(np.int64), 0, n - 1)
    d = np.zeros(len(xy), dtype=np.int64)
    s = n >> 1
    while s > 0:
        rx = (xi & s) > 0
        ry = (yi & s) > 0
        if hilbert:
            d += s * s * ((3 * rx.astype(np.int64)) ^ ry.astype(np.int64))
            flip = ~ry & rx
            xi = np.where(flip, n - 1 - xi, xi)
            yi = np.where(flip, n - 1 - yi, yi)
            xi, yi = np.where(~ry, yi, xi), np.where(~ry, xi, yi)
        else:
            d += s * s * (2 * ry.astype(np.int64) + rx.astype(np.int64))
        s >>= 1
    return d


def baselines(kind: str, n: int, samples: int = 400, seed: int = 1) -> list[dict[str, Any]]:
    """Mean achieved k / k (users inside R, k-only requests) of this partition vs the classics.

    * quadtree (Casper's basic pyramid / Interval Cloak): the smallest quadtree cell around U
      holding >= k users;
    * Hilbert Cloak (Kalnis et al. 2007): buckets of k consecutive users in Hilbert order, R is
      the bucket's bounding rectangle (which may also contain users of other buckets);
    * this partition with A_min = 1 m².
    """
    rng = np.random.default_rng(seed)
    xy = population(kind, n, rng)
    users = rng.integers(0, n, samples)
    morton = np.sort(_keys(xy, hilbert=False))
    mk = _keys(xy, hilbert=False)
    hk = _keys(xy)
    horder = np.argsort(hk, kind="stable")
    hrank = np.empty(n, dtype=np.int64)
    hrank[horder] = np.arange(n)
    ck = Cloaker(CloakConfig(world=(0.0, 0.0, SIDE, SIDE), a_min_step=1.0))
    ids = [f"user-{i}" for i in range(n)]
    ck.update_many(ids, xy, now=0.0)
    rows = []
    for k in sorted({p.k for p in PROFILES}):
        q: list[float] = []
        h: list[float] = []
        o: list[float] = []
        for u in users.tolist():
            # quadtree: descend while the child cell holding u keeps >= k users
            cnt = n
            for level in range(1, 17):
                shift = 2 * (16 - level)
                lo = (int(mk[u]) >> shift) << shift
                c = int(np.searchsorted(morton, lo + (1 << shift)) - np.searchsorted(morton, lo))
                if c < k:
                    break
                cnt = c
            q.append(cnt / k)
            # Hilbert Cloak bucket MBR
            b = hrank[u] // k
            nb = n // k
            lo_r = b * k if b < nb else (nb - 1) * k
            hi_r = n if b >= nb - 1 else lo_r + k
            mem = xy[horder[lo_r:hi_r]]
            (x0, y0), (x1, y1) = mem.min(axis=0), mem.max(axis=0)
            inside = (xy[:, 0] >= x0) & (xy[:, 0] <= x1) & (xy[:, 1] >= y0) & (xy[:, 1] <= y1)
            h.append(int(inside.sum()) / k)
            out = ck.request(u, ids[u], CloakParams(k, 1.0, 1e9, 0.0), now=0.5)
            assert out is not None and out.region is not None
            o.append(out.region.users / k)
        rows.append(
            {
                "scenario": f"{kind}-{n // 1000}k",
                "k": k,
                "this_partition": float(np.mean(o)),
                "hilbert_cloak": float(np.mean(h)),
                "quadtree": float(np.mean(q)),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    args = ap.parse_args()
    if args.quick:
        grid = [("uniform", 10_000), ("clustered", 10_000)]
        epochs, rate = 2, 5_000
    else:
        grid = [
            ("uniform", 10_000),
            ("clustered", 10_000),
            ("uniform", 100_000),
            ("clustered", 100_000),
        ]
        epochs, rate = 4, 20_000
    run("uniform", 2000, 1, 1000)  # warm up numba's cache and allocators
    rows = [run(kind, n, epochs, rate) for kind, n in grid]
    cols = [
        ("scenario", "{:>14}"),
        ("cloaks_per_s", "{:>12,.0f}"),
        ("cloaks_per_cpu_s", "{:>12,.0f}"),
        ("p50_us", "{:>8.1f}"),
        ("p99_us", "{:>8.1f}"),
        ("max_ms", "{:>7.1f}"),
        ("epoch_prepare_ms", "{:>8.1f}"),
        ("updates_per_s_batched", "{:>13,.0f}"),
        ("updates_per_s_single", "{:>12,.0f}"),
        ("success_rate", "{:>8.4f}"),
        ("success_rate_feasible", "{:>9.4f}"),
        ("mean_achieved_k_over_k", "{:>8.3f}"),
        ("mean_achieved_k_over_ref", "{:>8.3f}"),
        ("median_area_over_a_min", "{:>9.2f}"),
        ("brute_force_violations", "{:>4d}"),
    ]
    heads = [
        "scenario",
        "cloaks/s",
        "per CPU s",
        "p50 µs",
        "p99 µs",
        "max ms",
        "prep ms",
        "upd/s batch",
        "upd/s one",
    ]
    heads += ["success", "succ|feas", "k̄/k", "k̄/ref", "area/Amin", "viol"]
    widths = [len(f.format(rows[0][c])) for c, f in cols]
    print(" ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)))
    for r in rows:
        print(" ".join(f.format(r[c]) for c, f in cols))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "processor": platform.processor(),
        "quick": args.quick,
        "epochs": epochs,
        "request_rate_per_s": rate,
        "profiles": [{"k": p.k, "a_min_m2": p.a_min_m2, "a_max_m2": p.a_max_m2} for p in PROFILES],
        "note": "shared machine (other jobs running); timings are pessimistic",
    }
    base = [r for kind, n in grid for r in baselines(kind, n, samples=100 if args.quick else 400)]
    print("\nmean achieved k / k, k-only requests (A_min = 1 m²):")
    print(f"{'scenario':>14} {'k':>3} {'this':>6} {'Hilbert Cloak':>13} {'quadtree':>8}")
    for b in base:
        print(
            f"{b['scenario']:>14} {b['k']:>3} {b['this_partition']:>6.3f} "
            f"{b['hilbert_cloak']:>13.3f} {b['quadtree']:>8.3f}"
        )
    OUT.write_text(
        json.dumps({"meta": meta, "results": rows, "achieved_k_baselines": base}, indent=2) + "\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
