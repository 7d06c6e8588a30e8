"""Study (not a shipped design): what issue 22's third goal costs when a session's regions may be
unions of tiles instead of one box (:mod:`simulators.tile_sessions`).

    .venv/bin/python benchmarks/study_tile_sessions.py   # results/study_tile_sessions.json

The walkers and the ratio's denominator are bench_privacy's session-length section's (2,000 over
4 km x 4 km, 1.4 m/s, a new heading every minute, 100 askers with k = 5 asking every minute for
30, 45 and 60 minutes; walk seeds 0-9; the undefended median is the one-shot cloaker's on the
same walks with fixes at every request). A session keeps the requester and k - 1 + ``spare``
others drawn at random from her group of a k-d split (groups of 10-19) for its whole life; each
region is the union of the tiles (:data:`TILES`: 101 m, just over A_min = 10^4 m², and 202 m,
about the undefended median) on a grid at a random offset per session that hold a member or come
within the margin of one. Margins: 3 m
(a fresh fix), 14 m (a fix 10 s old at 1.4 m/s: what the cloaker allows before it asks a
session's members for fresh ones) and 42 m (30 s old). Spares: 0 and 2 (members who may leave
without the set falling under k; each costs a tile). Then bench_privacy's other walkers (1,000
and 4,000 users, 0.7 and 3 m/s, k = 10) for an hour, seed 0; and the city (``city_sessions``:
2,000 pedestrians on a Manhattan grid, 30 % who never move, stays of up to 10 minutes, 100
askers with k = 3, 5 or 10 for 30-60 minutes; seeds 23-32), its positions read at every
request and its denominator the one-shot cloaker's median over the same requests; the city
again with fixes scattered by 10 and 20 m per axis (:data:`SCATTERS`; spares 0, 2 and 4), the
tiles placed round the fixes and the attack played on true positions.

Reported per row: the median region over the undefended median (mean and range over the
seeds), the share answered, the share of sessions the intersection attack narrows below k and
the candidates it leaves, the share of members a region missed (scattered fixes), the share of
sessions one device the adversary parks in the requester's group leaves with fewer than k honest
members (:data:`INSIDERS`), and what the
tiles give away - the area that holds each member
(her tile or tiles) over the undefended median, where one box holds every member in the whole
region. Deterministic; about 9 minutes on 2 cores.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulators.attacks import repeated_cloaks_attack
from simulators.causal_sessions import request_frames
from simulators.city import city_figures, city_run, city_session_frames
from simulators.tile_sessions import Asker, TileReplay, askers_at, replay_askers

RESULTS = Path(__file__).resolve().parent / "results"
MINUTES = (30.0, 45.0, 60.0)
SEEDS = tuple(range(10))
K, ASKERS, GOAL = 5, 100, 5.0
TILES = (101.0, 202.0)
"""Tile sides, metres: just over A_min = 10^4 m² (each member held at the floor every region
allows), and twice that (4 A_min, about the undefended median: each member held by as much as
one one-shot region holds her)."""
MARGINS = (3.0, 14.0, 42.0)
SPARES = (0, 2)
CONDITIONS: dict[str, dict[str, Any]] = {
    "users=1000": {"users": 1000},
    "users=4000": {"users": 4000},
    "speed_m_s=0.7": {"speed_m_s": 0.7},
    "speed_m_s=3": {"speed_m_s": 3.0},
    "k=10": {"k": 10},
}
"""bench_privacy's other walker conditions, played for an hour on walk seed 0."""
SCATTERS = ((10.0, 20.0), (10.0, 30.0), (20.0, 40.0), (20.0, 60.0))
"""(fix scatter per axis, margin), metres: the city again with every fix off the truth by a
normal draw of that standard deviation per axis, tiles placed round the fix with a margin of
2 or 3 times it (the cloaker keeps 2 x a report's accuracy; 60 m spans up to 3 x 3 tiles of
101 m), the attack on true positions."""
INSIDERS = 1
"""Devices the adversary parks in each requester's group (drawn apart from everything else, so
no other figure moves): the share of sessions left with fewer than k honest members."""
CITY_SEEDS = tuple(range(23, 33))
"""The city's seeds of bench_privacy (23-27) and of the rerun of 2026-12-06 (28-32)."""


def _figures(minutes: float, seed: int, k: int, **walk: Any) -> dict[str, Any]:
    """Every margin and spare on one walk: ratios over that walk's undefended median."""
    base = repeated_cloaks_attack(
        session_s=0.0, minutes=minutes, seed=seed, askers=ASKERS, k=k, **walk
    )
    a1 = base.area_m2_median
    frames = request_frames(minutes=minutes, seed=seed, askers=ASKERS, **walk)
    out: dict[str, Any] = {"undefended_area_m2_median": a1, "policies": {}}
    for tile, margin, spare in itertools.product(TILES, MARGINS, SPARES):
        r = replay_askers(
            askers_at(frames, ASKERS, k),
            tile_m=tile,
            margin_m=margin,
            spare=spare,
            insiders=INSIDERS,
            seed=seed,
        )
        out["policies"][f"tile={tile:g},margin={margin:g},spare={spare}"] = _row(r, a1)
    return out


def _row(r: TileReplay, a1: float) -> dict[str, float]:
    return {
        "ratio": float(np.median(r.areas_m2)) / a1,
        "ratio_p95": float(np.quantile(r.areas_m2, 0.95)) / a1,
        "member_ratio": float(np.median(r.member_areas_m2)) / a1,
        "answered": r.answered,
        "narrowed": r.narrowed,
        "candidates": r.candidates,
        "missed": r.missed,
        "infiltrated": r.infiltrated,
    }


def _summary(per: list[dict[str, float]]) -> dict[str, Any]:
    """One policy's rows (:func:`_row`), one per seed: means, worst cases, the seeds over the
    goal."""
    ratios = [p["ratio"] for p in per]
    return {
        "ratio_mean": float(np.mean(ratios)),
        "ratio_seeds": ratios,
        "over_goal_seeds": int(sum(r > GOAL for r in ratios)),
        "ratio_p95_mean": float(np.mean([p["ratio_p95"] for p in per])),
        "member_ratio_mean": float(np.mean([p["member_ratio"] for p in per])),
        "answered_min": min(p["answered"] for p in per),
        "narrowed_max": max(p["narrowed"] for p in per),
        "narrowed_mean": float(np.mean([p["narrowed"] for p in per])),
        "missed_mean": float(np.mean([p["missed"] for p in per])),
        "infiltrated_mean": float(np.mean([p["infiltrated"] for p in per])),
        "candidates_min": min(p["candidates"] for p in per),
    }


def _city_job(seed: int) -> dict[str, Any]:
    """One city seed: the one-shot cloaker's median area over the session users' requests
    (``city_run`` without sessions), then every tile, margin and spare on exact positions at
    each of their requests (each asker her own k: 3, 5 or 10)."""
    res, _ = city_run(0.0, False, None, seed)
    a1 = float(city_figures(res)["area_m2_median"])
    askers = [Asker(u, frames, k) for u, k, frames in city_session_frames(seed)]
    out: dict[str, Any] = {"undefended_area_m2_median": a1, "policies": {}, "scattered": {}}
    for tile, margin, spare in itertools.product(TILES, MARGINS, SPARES):
        r = replay_askers(
            askers, tile_m=tile, margin_m=margin, spare=spare, insiders=INSIDERS, seed=seed
        )
        out["policies"][f"tile={tile:g},margin={margin:g},spare={spare}"] = _row(r, a1)
    for tile, (scatter, margin), spare in itertools.product(TILES, SCATTERS, (0, 2, 4)):
        r = replay_askers(
            askers,
            tile_m=tile,
            margin_m=margin,
            spare=spare,
            scatter_m=scatter,
            insiders=INSIDERS,
            seed=seed,
        )
        name = f"tile={tile:g},scatter={scatter:g},margin={margin:g},spare={spare}"
        out["scattered"][name] = _row(r, a1)
    return out


def _length_job(job: tuple[float, int]) -> dict[str, Any]:
    return _figures(job[0], job[1], K)


def _condition_job(name: str) -> dict[str, Any]:
    walk = dict(CONDITIONS[name])
    k = int(walk.pop("k", K))
    return _figures(60.0, 0, k, **walk)


def main() -> None:
    t0 = time.perf_counter()
    jobs = [(m, s) for m in MINUTES for s in SEEDS]
    workers = max(1, os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers) as ex:
        rows = dict(zip(jobs, ex.map(_length_job, jobs), strict=True))
        conds = dict(zip(CONDITIONS, ex.map(_condition_job, CONDITIONS), strict=True))
        city = dict(zip(CITY_SEEDS, ex.map(_city_job, CITY_SEEDS), strict=True))
    names = list(rows[jobs[0]]["policies"])
    table: dict[str, Any] = {}
    print(
        f"{'session':8} {'policy':28} {'median/undefended':>24} {'p95':>6}"
        f" {'member':>7} {'answered':>9} {'narrowed':>9} {'left':>5} {'insider':>8}"
    )
    for minutes in MINUTES:
        for name in names:
            cell = _summary([rows[(minutes, s)]["policies"][name] for s in SEEDS])
            table[f"minutes={minutes:g},{name}"] = cell
            lo, hi = min(cell["ratio_seeds"]), max(cell["ratio_seeds"])
            print(
                f"{minutes:4g} min {name:28} {cell['ratio_mean']:5.2f}x ({lo:4.2f}-{hi:4.2f}x)"
                f" {cell['ratio_p95_mean']:5.2f}x {cell['member_ratio_mean']:6.2f}x"
                f" {cell['answered_min']:9.1%} {cell['narrowed_max']:9.1%}"
                f" {cell['candidates_min']:5.1f} {cell['infiltrated_mean']:8.1%}"
            )
    print(f"(mean of walk seeds {SEEDS[0]}-{SEEDS[-1]}; range over them in brackets)\n")
    cols = [f"margin={m:g},spare={sp}" for m in MARGINS for sp in SPARES]
    print(f"{'an hour, seed 0':26} " + " ".join(f"{c:>18}" for c in cols))
    for cond, row in conds.items():
        for tile in TILES:
            cells = " ".join(
                f"{row['policies'][f'tile={tile:g},{c}']['ratio']:17.2f}x" for c in cols
            )
            print(f"{cond + f', tiles of {tile:g} m':26} {cells}")
    city_table: dict[str, Any] = {}
    print(
        f"\n{'city, seeds 23-32':42} {'median/undefended':>24} {'member':>7}"
        f" {'answered':>9} {'narrowed':>9} {'missed':>7} {'insider':>8}"
    )
    for part in ("policies", "scattered"):
        for name in city[CITY_SEEDS[0]][part]:
            cell = _summary([city[s][part][name] for s in CITY_SEEDS])
            city_table[name] = cell
            lo, hi = min(cell["ratio_seeds"]), max(cell["ratio_seeds"])
            print(
                f"{name:42} {cell['ratio_mean']:5.2f}x ({lo:4.2f}-{hi:4.2f}x)"
                f" {cell['member_ratio_mean']:6.2f}x {cell['answered_min']:9.1%}"
                f" {cell['narrowed_max']:9.1%} {cell['missed_mean']:7.2%}"
                f" {cell['infiltrated_mean']:8.1%}"
            )
    seconds = time.perf_counter() - t0
    print(f"(median area over the undefended median; {seconds:.0f} s)")
    out = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "tiles_m": TILES,
        "lengths": table,
        "conditions": {c: r for c, r in conds.items()},
        "city": city_table,
        "city_runs": {f"seed={s}": r for s, r in city.items()},
        "runs": {f"minutes={m:g},seed={s}": r for (m, s), r in rows.items()},
        "seconds": seconds,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "study_tile_sessions.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
