"""City-scale study of tile sharding: load per shard and the price of tile borders.

    .venv/bin/python benchmarks/study_shards.py     # results/study_shards.json + the figure

What is simulated how (a lightweight path; nothing here goes over a broker):

* **Population**: 1,000,000 users at one instant over a 50 km x 50 km metro area, from a
  synthetic density (a seeded mixture: a dense centre, four sub-centres and a sparser
  street-grid background snapped to 200 m streets). Not SUMO: at this size the point is the
  spatial density, which decides both the load of a tile and the size of its regions.
* **Load**: every user sends a location update every 10 s and 2 requests an hour (the
  ``city_grid`` workload's rate); tiles go to N = 1 … 64 shards by the same rendezvous hashing
  as ``locpriv serve anonymizer --shard I/N`` (:func:`locpriv.core.tiles.shard_of`); users and
  messages per shard are reported as max and mean.
* **Cloak quality**: the cloaking core itself - the shared k-d partition of
  :mod:`locpriv.core.cloak.partition` with the anonymizer's rounding of ``a_min_m2`` and its
  shrinking to ``a_max_m2`` - once over the whole area (one process, no tiles) and once per
  tile, for 20,000 sampled requesters and three profiles. A requester is **near a border**
  when her unsharded region crosses a tile border (only there can tiling change her cloak).
  Quality does not depend on N: a tile's cloaks are the same whichever shard hosts it.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from locpriv.core.cloak.partition import (  # noqa: E402
    Partition,
    build_partition,
    shared_region,
)
from locpriv.core.cloak.types import CloakParams, round_a_min  # noqa: E402
from locpriv.core.tiles import Tiling, shard_of  # noqa: E402

HALF_M = 25_000.0
USERS = 1_000_000
SAMPLE = 20_000
UPDATE_S = 10.0
REQUESTS_PER_H = 2.0
SHARDS = (1, 2, 4, 8, 16, 32, 64)
SIDES_M = (2500.0, 5000.0)
PROFILES = (
    CloakParams(k=10, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0),
    CloakParams(k=50, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0),
    CloakParams(k=100, a_min_m2=1e5, a_max_m2=1e6, max_delay_s=0.0),
)
STEP = 2.0**0.125  # the anonymizer's a_min_step
OUT = ROOT / "benchmarks" / "results" / "study_shards.json"
FIGURE = ROOT / "docs" / "figures" / "shards_study.png"


def metro(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` positions (metres) of a synthetic metro area of side 2 * HALF_M."""
    parts = []
    k_centre, k_sub = int(0.3 * n), int(0.3 * n)
    parts.append(rng.normal(0.0, 3000.0, size=(k_centre, 2)))
    subs = np.array([[-12e3, -8e3], [10e3, -11e3], [13e3, 9e3], [-9e3, 12e3]])
    pick = rng.integers(0, len(subs), size=k_sub)
    parts.append(subs[pick] + rng.normal(0.0, 2000.0, size=(k_sub, 2)))
    rest = n - k_centre - k_sub
    grid = rng.uniform(-HALF_M, HALF_M, size=(rest, 2))
    axis = rng.integers(0, 2, size=rest)
    grid[np.arange(rest), axis] = np.round(grid[np.arange(rest), axis] / 200.0) * 200.0
    parts.append(grid)
    xy = np.concatenate(parts)
    return np.clip(xy, -HALF_M + 0.5, HALF_M - 0.5)


def tile_index(xy: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
    return np.floor(xy[:, 0] / side).astype(np.int64), np.floor(xy[:, 1] / side).astype(np.int64)


def load(xy: np.ndarray, side: float) -> list[dict[str, Any]]:
    """Users and messages per shard for every N."""
    ix, iy = tile_index(xy, side)
    keys, counts = np.unique(np.column_stack([ix, iy]), axis=0, return_counts=True)
    tiles = [f"t{a}_{b}" for a, b in keys.tolist()]
    rate = 1.0 / UPDATE_S + REQUESTS_PER_H / 3600.0  # messages per user per second
    rows = []
    for n in SHARDS:
        per = np.zeros(n)
        for tile, c in zip(tiles, counts, strict=True):
            per[shard_of(tile, n)] += c
        rows.append(
            {
                "shards": n,
                "users_max": int(per.max()),
                "users_mean": float(per.mean()),
                "imbalance": float(per.max() / per.mean()),
                "messages_per_s_max": float(per.max() * rate),
                "messages_per_s_mean": float(per.mean() * rate),
                "idle_shards": int((per == 0).sum()),
            }
        )
    return rows


def _partition(xy: np.ndarray, bounds: tuple[float, ...], p: CloakParams) -> Partition:
    return build_partition(
        xy[:, 0],
        xy[:, 1],
        np.zeros(len(xy)),
        (bounds[0], bounds[1], bounds[2], bounds[3]),
        k=p.k,
        a_min_m2=round_a_min(p.a_min_m2, STEP),
    )


def _region(
    part: Partition, xy: np.ndarray, i: int, p: CloakParams
) -> tuple[bool, int, float, tuple[float, ...]]:
    """What the anonymizer answers user ``i`` of ``xy``: (ok, users, area m², bounds)."""
    rung = CloakParams(p.k, round_a_min(p.a_min_m2, STEP), p.a_max_m2, 0.0)
    t = np.zeros(len(xy))
    region, _ = shared_region(part, i, rung, 0.0, x=xy[:, 0], y=xy[:, 1], t=t)
    if region is None:
        return False, 0, math.nan, ()
    return True, region.users, region.area_m2, tuple(region.polygon.bounds)


def quality(xy: np.ndarray, side: float, sample: np.ndarray) -> list[dict[str, Any]]:
    """Unsharded against per-tile cloaks of the sampled requesters, per profile."""
    ix, iy = tile_index(xy, side)
    rows = []
    for p in PROFILES:
        whole = _partition(xy, (-HALF_M, -HALF_M, HALF_M, HALF_M), p)
        base = [_region(whole, xy, int(i), p) for i in sample]
        order = np.lexsort((iy, ix))
        tiled: dict[int, tuple[bool, int, float, tuple[float, ...]]] = {}
        want = set(sample.tolist())
        keys = np.column_stack([ix[order], iy[order]])
        cuts = np.flatnonzero(np.any(np.diff(keys, axis=0) != 0, axis=1)) + 1
        for block in np.split(order, cuts):
            hit = [j for j, u in enumerate(block.tolist()) if u in want]
            if not hit:
                continue
            a, b = int(ix[block[0]]), int(iy[block[0]])
            rect = Tiling(side).rect(f"t{a}_{b}") or (0.0, 0.0, 0.0, 0.0)
            if len(block) < p.k:
                for j in hit:
                    tiled[int(block[j])] = (False, 0, math.nan, ())
                continue
            part = _partition(xy[block], rect, p)
            for j in hit:
                tiled[int(block[j])] = _region(part, xy[block], j, p)
        near = []
        for i, (ok, _u, _a, bounds) in zip(sample.tolist(), base, strict=True):
            rect = Tiling(side).rect(f"t{ix[i]}_{iy[i]}") or (0.0, 0.0, 0.0, 0.0)
            crosses = ok and not (
                bounds[0] >= rect[0] - 1e-6
                and bounds[1] >= rect[1] - 1e-6
                and bounds[2] <= rect[2] + 1e-6
                and bounds[3] <= rect[3] + 1e-6
            )
            near.append(crosses)
        near_a = np.array(near)
        row: dict[str, Any] = {
            "k": p.k,
            "a_min_m2": p.a_min_m2,
            "a_max_m2": p.a_max_m2,
            "near_border_fraction": float(near_a.mean()),
        }
        for label, mask in (("all", np.ones(len(sample), bool)), ("near_border", near_a)):
            idx = np.flatnonzero(mask)
            b = [base[j] for j in idx]
            t = [tiled[int(sample[j])] for j in idx]
            both = [(x, y) for x, y in zip(b, t, strict=True) if x[0] and y[0]]
            row[label] = {
                "requests": len(idx),
                "success_one": float(np.mean([x[0] for x in b])) if b else None,
                "success_tiled": float(np.mean([y[0] for y in t])) if t else None,
                "median_users_one": float(np.median([x[1] for x, _ in both])) if both else None,
                "median_users_tiled": float(np.median([y[1] for _, y in both])) if both else None,
                "median_area_one_m2": float(np.median([x[2] for x, _ in both])) if both else None,
                "median_area_tiled_m2": (
                    float(np.median([y[2] for _, y in both])) if both else None
                ),
            }
        rows.append(row)
    return rows


def figure(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for side, study in result["sides"].items():
        rows = study["load"]
        n = [r["shards"] for r in rows]
        ax1.plot(n, [r["messages_per_s_max"] for r in rows], "o-", label=f"max, tiles {side}")
        ax1.plot(n, [r["messages_per_s_mean"] for r in rows], "k--", lw=0.8)
        ax2.plot(n, [r["imbalance"] for r in rows], "o-", label=f"tiles {side}")
    ax1.set(xscale="log", yscale="log", xlabel="shards", ylabel="messages/s per shard")
    ax1.set_title("1M users, 50 km x 50 km: load (dashed: mean)")
    ax1.legend()
    ax2.set(xscale="log", xlabel="shards", ylabel="max / mean users per shard")
    ax2.set_title("max / mean users per shard (uneven tiles)")
    ax2.legend()
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=90)


def main() -> None:
    t0 = time.perf_counter()
    rng = np.random.default_rng(2024)
    xy = metro(USERS, rng)
    sample = rng.choice(USERS, size=SAMPLE, replace=False)
    result: dict[str, Any] = {
        "users": USERS,
        "area_m": 2 * HALF_M,
        "sampled_requesters": SAMPLE,
        "update_interval_s": UPDATE_S,
        "requests_per_user_per_h": REQUESTS_PER_H,
        "sides": {},
    }
    for side in SIDES_M:
        key = f"{side / 1000:g} km"
        result["sides"][key] = {"load": load(xy, side), "quality": quality(xy, side, sample)}
        print(key, json.dumps(result["sides"][key]["quality"], indent=1), flush=True)
    result["elapsed_s"] = time.perf_counter() - t0
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    figure(result)
    for side, study in result["sides"].items():
        print(f"\ntiles {side}: shards | users max/mean | msgs/s max | imbalance")
        for r in study["load"]:
            print(
                f"  {r['shards']:>3} | {r['users_max']:>8} / {r['users_mean']:>9.0f}"
                f" | {r['messages_per_s_max']:>8.0f} | {r['imbalance']:.2f}"
            )
        for q in study["quality"]:
            a, nb = q["all"], q["near_border"]
            print(
                f"  k={q['k']}: near border {q['near_border_fraction']:.1%}; success all"
                f" {a['success_one']:.3f} -> {a['success_tiled']:.3f}, near border"
                f" {nb['success_one']} -> {nb['success_tiled']}"
            )
    print(f"wrote {OUT} and {FIGURE} in {result['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()
