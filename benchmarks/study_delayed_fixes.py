"""Study (not a shipped design): would session regions be affordable if a request waited for
its members' next fixes?

    .venv/bin/python benchmarks/study_delayed_fixes.py   # results/study_delayed_fixes.json

Random walkers as in bench_privacy's conditions with fixes every 30 s (each user at her own
phase; walkers draw a heading every minute; 100 askers, historical k-anonymity over a 30 or
60 minute session). The walks are generated first, then replayed through the cloaking core in
three ways, every region judged against the true positions at the request:

* ``stale`` - what the shipped simulator does (``repeated_cloaks_attack`` with ``update_s``):
  each fix when it is sent, the askers' own fixes with their requests;
* ``nearest`` - what a request that waits up to one update interval could use: every member
  boxed at her fix nearest in time to the request, before or after it, with the worst-case
  margin ``session_speed_m_s`` x that fix's distance in time; thin regions off
  (``session_slack = 0``), because dead reckoning from a later fix would run the wrong way.
  The replay hands the cloaker those fixes stamped ``now - |dt|``: the margins and positions
  are those of the waiting design, its timing and messages are not modelled;
* ``exact`` - every user's true position at every request (what no delay can beat).

Ratios are over the undefended median (no sessions, ``stale``) of the same walks; ``narrowed``
is the intersection attack's success. Prints a table and writes the JSON. Deterministic.
"""

from __future__ import annotations

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

from locpriv.core.cloak.cloaker import Cloaker
from locpriv.core.cloak.types import CloakConfig, CloakParams
from simulators.attacks import intersection_attack, random_walks

RESULTS = Path(__file__).resolve().parent / "results"
CONDITIONS: tuple[dict[str, Any], ...] = (
    {},
    {"users": 1000},
    {"users": 4000},
    {"speed_m_s": 0.7},
    {"speed_m_s": 3.0},
    {"k": 10, "minutes": 60.0},
)
"""bench_privacy's random-walker conditions (its ``WALKER_CONDITIONS``)."""
MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("stale", {}),
    ("nearest", {"session_slack": 0}),
    ("exact", {}),
)


def replay(
    mode: str,
    *,
    users: int = 2000,
    side_m: float = 4000.0,
    askers: int = 100,
    k: int = 5,
    minutes: float = 30.0,
    speed_m_s: float = 1.4,
    session_s: float = 3600.0,
    update_s: float = 30.0,
    seed: int = 0,
    cloak: dict[str, Any] | None = None,
) -> dict[str, float]:
    """One replay: the median region area (m²), narrowed and answered shares."""
    every_s, dt = 60.0, 5.0
    steps = int(minutes * 60 / every_s)
    frames: list[np.ndarray] = []
    stamps: list[float] = []
    fixes: list[np.ndarray] = []
    at_request: dict[int, int] = {}  # request round -> its frame
    # bench_privacy's walks (the same draws), one round past the last request: fixes after it
    for w in random_walks(
        users=users,
        side_m=side_m,
        askers=askers,
        every_s=every_s,
        rounds=steps + 1,
        speed_m_s=speed_m_s,
        update_s=update_s,
        seed=seed,
    ):
        frames.append(w.xy.copy())
        stamps.append(w.t)
        fixes.append(np.isin(np.arange(users), w.due))
        if w.request is not None:
            at_request[w.request] = len(frames) - 1
    walk = np.stack(frames)  # (frames, users, 2), frame f at times[f]; frame 0 everyone's fix
    times = np.asarray(stamps)
    due = np.stack(fixes)  # who sends a fix in each frame
    ids = [f"u{i}" for i in range(users)]
    t0 = float(times[0])
    cloaker = Cloaker(
        CloakConfig(world=(0.0, 0.0, side_m, side_m), epoch_s=1.0, **(cloak or {})),
        rng=np.random.default_rng(seed + 1),
    )
    params = CloakParams(k=k, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=session_s)
    regions: list[list[frozenset[int]]] = [[] for _ in range(askers)]
    areas: list[float] = []
    asked = answered = 0
    cloaker.update_many(ids, walk[0], t0)
    fed = 0
    reach = int(update_s / dt) + 1
    for step in range(steps):
        now = 1000.0 + step * every_s
        f_now = at_request[step]
        pos = walk[f_now]
        if mode == "stale":
            for f in range(fed + 1, f_now + 1):
                d = np.flatnonzero(due[f])
                if len(d):
                    cloaker.update_many([ids[u] for u in d], walk[f, d], float(times[f]))
            fed = f_now
            cloaker.update_many(ids[:askers], pos[:askers], now)
        elif mode == "exact":
            cloaker.update_many(ids, pos, now)
        else:  # nearest: each user's fix nearest in time, before or after the request
            gap = np.full(users, np.inf)
            at = np.full(users, f_now)
            for f in range(max(0, f_now - reach), min(len(walk) - 1, f_now + reach) + 1):
                d = due[f] & (abs(f - f_now) < gap)
                gap[d] = abs(f - f_now)
                at[d] = f
            gap[:askers], at[:askers] = 0, f_now  # the askers' fixes come with the requests
            for g in np.unique(gap):
                rows = np.flatnonzero(gap == g)
                cloaker.update_many([ids[u] for u in rows], walk[at[rows], rows], now - g * dt)
        for a in range(askers):
            asked += 1
            out = cloaker.request(("q", a, step), ids[a], params, now)
            if out is None or out.region is None:
                continue
            answered += 1
            x0, y0, x1, y1 = out.region.polygon.bounds
            inside = (pos[:, 0] >= x0) & (pos[:, 0] <= x1) & (pos[:, 1] >= y0) & (pos[:, 1] <= y1)
            regions[a].append(frozenset(np.flatnonzero(inside).tolist()))
            areas.append(out.region.area_m2)
    res = intersection_attack([r for r in regions if r], k)
    return {
        "area_m2_median": float(np.median(areas)),
        "narrowed": float(res["success_rate"]),
        "answered": answered / asked,
    }


def _job(cond: dict[str, Any]) -> dict[str, Any]:
    base = replay("stale", session_s=0.0, **cond)
    row: dict[str, Any] = {"undefended_area_m2_median": base["area_m2_median"]}
    for mode, cloak in MODES:
        r = replay(mode, cloak=cloak, **cond)
        row[mode] = {**r, "ratio": r["area_m2_median"] / base["area_m2_median"]}
    return row


def main() -> None:
    t0 = time.perf_counter()
    names = [",".join(f"{a}={b:g}" for a, b in c.items()) or "default" for c in CONDITIONS]
    with ProcessPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        rows = dict(zip(names, ex.map(_job, CONDITIONS), strict=True))
    print(f"{'condition (fixes every 30 s)':30} " + " ".join(f"{m:>18}" for m, _ in MODES))
    for name, row in rows.items():
        cells = " ".join(
            f"{row[m]['ratio']:6.2f}x {row[m]['narrowed']:4.0%} {row[m]['answered']:5.1%}"
            for m, _ in MODES
        )
        print(f"{name:30} {cells}")
    seconds = time.perf_counter() - t0
    print(f"(ratio over the undefended median, narrowed, answered; {seconds:.0f} s)")
    out = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "conditions": rows,
        "seconds": seconds,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "study_delayed_fixes.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
