"""Privacy over time: the three attacks without and with their defences, and what they cost.

    .venv/bin/python benchmarks/bench_privacy.py [--quick] [--only SECTION,...]

(``--only`` reruns those sections into the existing results file and keeps the others.)

* static device - 30 days of Protocol 4 broadcasts every 10 min from a device that never
  moves; the averaging adversary's error (in σ) with the previous defence (fresh draws reused
  an hour, at most 24 per place) and with keyed place noise;
* wandering static device - a year of broadcasts every 10 min from a device at home whose fixes
  scatter by 0, 10, 25 or 50 m per axis, without and with a daily walk (300-1,500 m); the
  averaging adversary's best error (in σ) against one point per place (before) and against
  dwelling anchors with scatter-sized hysteresis and region noise (after);
* region edges - where the cloaker's region edges sit (half-way between the nearest users
  inside and outside, on a member, at the session margin) on uniform, clustered and tied
  populations, shared regions and sessions, against what a blind placement gives;
* repeated cloaks, cloaking core - 2,000 users random-walk over 4 km x 4 km, 100 ask k = 5
  every minute for 30 minutes; intersection attack success, region area, answered share;
  without sessions, with worst-case margins and the first group only, one box per region
  (``one_box``, the sessions before 2026-12-06) and the shipped sessions (regions of tiles);
  then over conditions (1,000-4,000 users, 0.7-3 m/s, k 5-10,
  30-60 min), with fixes at every request and every 30 s (stale fixes, walkers turning);
* session lengths - the issue's goal at defaults over 30, 45 and 60 minute sessions: the
  default walkers (k = 5), fixes at every request and every 30 s, three walk seeds, with the
  oracles' figures and whether each cell meets the goal (<= 5x, >= 95 % answered, <= 1 %
  narrowed);
* repeated cloaks, people who stay and leave - the same attack on users who alternate
  heavy-tailed stays and walks (a stay may end at any moment, right after a fix too), fixes
  every 30 s, over densities, stay lengths, k and session lengths;
* repeated cloaks, real neighbours and devices - the same attack where a fifth of the users
  who do not ask cycle at 6 m/s, or drive at 10 m/s among people who stay and walk (and set
  off at that speed when a stay ends), or where 30 % of fixes are lost; fixes every 30 s;
* repeated cloaks, city simulator - the ``city_sessions`` scenario on the virtual clock
  (2,000 pedestrians on a street grid, 30 % of them never moving, 100 users asking by P1 or
  P3 every minute for 30-60 minutes, reports every 30 s) on five seeds (one seed's median
  moves by ~10 % when coordinates move by a micrometre: ties on streets), in worker
  processes; the same figures through the real protocol machines, also without the
  margins sized by stays (every seed), and on the first seed with worst-case margins and no
  adoption and with sessions re-keyed at 3x the shared region (opt-in: the attack's success
  across restarts); without the joint box (members each by her own distance) on every seed;
  the requester-finding guesses (centre, edge) for both rankings; with devices that ignore
  the anonymizer's fix requests (``no_fix_answers``: every region from reports up to 30 s
  old; the shipped rows have devices answer a second later, as apps with a
  ``position_source`` do; also on the walker conditions with 30 s fixes); and the oracles: one that
  knows every future position (choosing the set by each member's distance, and by the box it
  makes together) and one that knows only who never moves and keeps, from the first request,
  the k - 1 of them nearest the requester;
* scattered fixes - the default walkers with fixes every 30 s whose fixes lie off the truth by
  0, 5, 10 or 20 m per axis (the adversary knows the truth): the design before fix requests
  and error margins, fix requests whose margins ignore the scatter, and the shipped margins
  with reports that give their accuracy and with reports that do not; the shipped margins
  also on 4,000 walkers, on people who stay and walk and where a fifth cycle; and the city
  (every seed) with fixes scattered by 10 m (accuracy said and unsaid) and 20 m (said);
* member tracking - the default walkers at 1,000, 2,000 and 4,000 users, fixes at every
  request and every 30 s: an adversary who knew where everyone inside a requester's first
  region was follows them through her later regions (one-shot regions, one box per
  session, the shipped tiles); the requester's median error after 30 minutes and the share
  of everyone tracked located within √A_min, against the prior (``simulators.tracking``);
* P4 broker tracking - a day of dwell-and-move devices; how long the broker follows one
  device under one identity, and its position error;
* P4 accuracy with and without keyed noise - the ``demo`` scenario, P4 only, on the virtual
  clock: success rate, DS error, rounds, exactness of answers.

Prints a table and writes benchmarks/results/bench_privacy.json. Deterministic (seeded).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from simulators.attacks import (
    GuessTally,
    broker_tracking_attack,
    edge_attack,
    repeated_cloaks_attack,
    session_area_bound,
    static_device_attack,
)
from simulators.city import CITY_SEEDS, CITY_SESSION_S, city_figures, city_run, city_scenario
from simulators.evaluate import QueryRecord, region_sessions
from simulators.scenario import build, load_scenario
from simulators.virtual import VirtualConfig, run_virtual

OUT = Path(__file__).resolve().parent / "results" / "bench_privacy.json"

WALKER_SESSION_S = 3600.0
"""The walker conditions' ``session_s``."""

ONE_BOX: dict[str, Any] = {"session_tile_factor": 0.0}
"""Sessions of one box per region, the design before regions of tiles became the default
(2026-12-06): every session row has it beside the tiles' ("one_box")."""

NO_STILL_MARGINS: dict[str, Any] = {"session_risk": 1e-12, **ONE_BOX}
DISTANCE_RANKING: dict[str, Any] = {"session_joint_box": False, **ONE_BOX}
"""One-box sessions whose members are ranked each by her own distance (no joint box)."""
"""Sessions whose thin margins ignore how long a member stayed put (a budget so small that
every margin is the ordinary ``floor + drift * age``)."""

WORST_CASE_SESSIONS: dict[str, Any] = {"session_slack": 0, "session_adopt": False, **ONE_BOX}
"""Sessions without thin regions and adoption: every member kept off the edges by the
worst-case margin, the set the first group only (what those two parts buy)."""


def _city(
    session_s: float,
    quick: bool,
    cloak: dict[str, Any] | None = None,
    seed: int = CITY_SEEDS[0],
    fix_answers: bool = True,
) -> dict[str, Any]:
    res, built = city_run(session_s, quick, cloak, seed, fix_answers=fix_answers)
    return {
        **city_figures(res),
        "areas_by_kind": _areas_by_kind(res.records, built.trajectories.static),
        "requester_guesses": requester_guess_figures(res.records, built.trajectories),
    }


def requester_guess_figures(records: Sequence[QueryRecord], trajectories: Any) -> dict[str, float]:
    """The requester-finding guesses over every region of the attacked sessions but their
    first (:class:`~simulators.attacks.GuessTally`): hits of the user nearest the centre and
    of the one nearest an edge, among everyone inside and among the session's candidates,
    each over what a guess at random among those gets (1: chance). A region of tiles is
    guessed on its tiles' bounding box."""
    tally = GuessTally()
    for user, rs in region_sessions(records).items():
        for r in rs:
            rings = r.region_rings_xy or ((r.region_xy,) if r.region_xy else ())
            if r.inside is None or not rings:
                continue
            ring = np.concatenate([np.asarray(g, dtype=float) for g in rings])  # tiles: all
            bounds = (ring[:, 0].min(), ring[:, 1].min(), ring[:, 0].max(), ring[:, 1].max())
            x, y = trajectories.at(r.t_anon_s if r.t_anon_s is not None else r.t_request_s)
            tally.add(user, bounds, np.column_stack([x, y]), r.inside, user)
    return tally.figures()


def _areas_by_kind(records: Sequence[QueryRecord], still: np.ndarray) -> dict[str, list[float]]:
    """Region areas (m^2) of the sessions the intersection attack plays, split by whether
    the requester never moves."""
    out: dict[str, list[float]] = {"still": [], "moving": []}
    for user, rs in region_sessions(records).items():
        out["still" if still[user] else "moving"] += [
            r.area_m2 for r in rs if r.area_m2 is not None
        ]
    return out


def _kind_shares(areas: dict[str, list[float]], undefended_m2: float) -> dict[str, Any]:
    """Per kind of requester: how many requests, their median ratio to the undefended
    median, and the share of requests at most 5x it."""
    out: dict[str, Any] = {}
    for kind, a in areas.items():
        ratios = np.asarray(a, dtype=float) / undefended_m2
        out[kind] = {
            "requests": int(ratios.size),
            "ratio_median": float(np.median(ratios)) if ratios.size else None,
            "share_at_most_5x": float(np.mean(ratios <= 5.0)) if ratios.size else None,
        }
    return out


NO_FIX_ANSWERS = "no_fix_answers"
"""The design whose devices ignore fix requests (the shipped sessions from stale reports)."""


def _city_job(job: tuple[str, int, float, dict[str, Any] | None, bool]) -> dict[str, Any]:
    name, seed, session_s, cloak, quick = job
    answers = name != NO_FIX_ANSWERS
    return {"design": name, "seed": seed, **_city(session_s, quick, cloak, seed, answers)}


def _city_all(quick: bool) -> dict[str, Any]:
    """The city on every seed without and with sessions (and, on the first seed, the older
    designs), in worker processes (one virtual run is single-threaded)."""
    seeds = CITY_SEEDS[:2] if quick else CITY_SEEDS
    jobs: list[tuple[str, int, float, dict[str, Any] | None, bool]] = []
    for seed in seeds:
        jobs += [
            ("before", seed, 0.0, None, quick),
            ("after", seed, CITY_SESSION_S, None, quick),
            # what fresh reports buy: devices that ignore the anonymizer's fix requests
            (NO_FIX_ANSWERS, seed, CITY_SESSION_S, None, quick),
            # what the margins of those who stayed put buy: everyone the ordinary thin margin
            ("no_still_margins", seed, CITY_SESSION_S, NO_STILL_MARGINS, quick),
            # what choosing the set by its joint box buys: members each by her own distance
            (
                "distance_ranking",
                seed,
                CITY_SESSION_S,
                {"session_joint_box": False, **ONE_BOX},
                quick,
            ),
            # one box per region: the sessions before regions of tiles
            ("one_box", seed, CITY_SESSION_S, ONE_BOX, quick),
        ]
    jobs += [
        ("worst_case_sessions", seeds[0], CITY_SESSION_S, WORST_CASE_SESSIONS, quick),
        ("rekeyed_3x", seeds[0], CITY_SESSION_S, {"session_rekey_factor": 3.0, **ONE_BOX}, quick),
    ]
    with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as ex:
        rows = list(ex.map(_city_job, jobs))
    out: dict[str, Any] = {"seeds": {}}
    for r in rows:
        out["seeds"].setdefault(str(r.pop("seed")), {})[r.pop("design")] = r
    for per in out["seeds"].values():
        base = per["before"]["area_m2_median"]
        for r in per.values():
            r["area_ratio"] = r["area_m2_median"] / base
            r["by_requester"] = _kind_shares(r.pop("areas_by_kind"), base)
    after = [per["after"] for per in out["seeds"].values()]
    for design in ("after", "one_box", NO_FIX_ANSWERS, "no_still_margins", "distance_ranking"):
        out[f"{design}_mean"] = {
            key: float(np.mean([per[design][key] for per in out["seeds"].values()]))
            for key in ("area_ratio", "answered_rate", "success_rate")
        }
    out["after_max_area_ratio"] = float(max(r["area_ratio"] for r in after))
    out["after_min_answered_rate"] = float(min(r["answered_rate"] for r in after))
    out["after_max_success_rate"] = float(max(r["success_rate"] for r in after))
    out["bounds"] = {
        seed: _city_bound(quick, int(seed), per["before"]["area_m2_median"])
        for seed, per in out["seeds"].items()
    }
    return out


def _city_bound(quick: bool, seed: int, undefended_m2: float) -> dict[str, Any]:
    """The oracles' fixed-set areas on the city's sessions (see session_area_bound): the one
    that knows the future, with no margin, the mean margin the default speed bound gives at
    30 s updates (48 m) and 93 m; and the one that knows only who never moves and keeps, from
    each session's first request, the k - 1 of them nearest the requester (20 m margins, about
    the thin ones); and the future-knowing one choosing the set by its joint box (20 and
    48 m margins)."""
    b = build(city_scenario(CITY_SESSION_S, quick, seed))
    times: dict[int, list[float]] = {}
    for e in b.workload.events:
        times.setdefault(e.user, []).append(e.t_s)
    out: dict[str, Any] = {}
    still = b.trajectories.static
    for name, margin, online, joint in (
        ("margin_0m", 0.0, False, False),
        ("margin_48m", 48.0, False, False),
        ("margin_93m", 93.0, False, False),
        ("static_anchors_20m", 20.0, True, False),
        # the set chosen by the box it makes together (a cheaper oracle: each member's own
        # distance bounds nothing)
        ("joint_margin_20m", 20.0, False, True),
        ("joint_margin_48m", 48.0, False, True),
    ):
        areas: list[float] = []
        kinds: dict[str, list[float]] = {"still": [], "moving": []}
        for user, ts in times.items():
            if len(ts) >= 5:
                frames = [b.trajectories.at(t) for t in ts]
                k = b.workload.profiles[user].k
                got = session_area_bound(
                    frames,
                    user,
                    k,
                    margin_m=margin,
                    a_min_m2=1e4,
                    pool=still if online else None,
                    online=online,
                    joint=joint,
                )
                areas += got
                kinds["still" if still[user] else "moving"] += got
        med = float(np.median(areas))
        out[name] = {
            "area_m2_median": med,
            "ratio": med / undefended_m2,
            "by_requester": _kind_shares(kinds, undefended_m2),
        }
    return out


FIX_REPLY_S = 1.0
"""Walkers asked for a fresh fix report one second later (apps with a ``position_source``)."""

WALKER_CONDITIONS: tuple[dict[str, Any], ...] = (
    {},
    {"users": 1000},
    {"users": 4000},
    {"speed_m_s": 0.7},
    {"speed_m_s": 3.0},
    {"k": 10, "minutes": 60.0},
)
"""Random walkers (``repeated_cloaks_attack`` arguments): densities, speeds, k, session length."""

STAY_CONDITIONS: tuple[dict[str, Any], ...] = (
    {"dwell_share": 0.5},
    {"dwell_share": 0.5, "dwell_scale_s": 60.0},
    {"dwell_share": 0.8},
    {"dwell_share": 0.5, "users": 4000},
    {"dwell_share": 0.5, "k": 10, "minutes": 60.0},
)
"""People who alternate stays and walks (fixes every 30 s)."""

DEVICE_CONDITIONS: tuple[dict[str, Any], ...] = (
    {"fast_share": 0.2},
    {"fast_share": 0.2, "fast_m_s": 10.0, "dwell_share": 0.5},
    {"fix_loss": 0.3},
)
"""Real neighbours and devices (fixes every 30 s): a fifth of the users who do not ask ride
bicycles at 6 m/s; a fifth drive at 10 m/s among people who stay and walk, and set off at
that speed when a stay ends (a parked car, a bus stop); 30 % of fixes lost."""


def walker_runs(quick: bool) -> list[tuple[str, dict[str, Any]]]:
    """The walker conditions as (name, ``repeated_cloaks_attack`` arguments but the session's):
    every walker condition with fixes at every request and every 30 s, then the stays, then
    the fast users and lost fixes (:data:`DEVICE_CONDITIONS`)."""
    conds, stays = WALKER_CONDITIONS, STAY_CONDITIONS
    runs = [(c, u) for u in (0.0, 30.0) for c in (conds[:2] if quick else conds)]
    runs += [(c, 30.0) for c in (stays[:2] if quick else stays)]
    runs += [(c, 30.0) for c in (DEVICE_CONDITIONS[:1] if quick else DEVICE_CONDITIONS)]
    out = []
    for c, update_s in runs:
        key = ",".join(f"{a}={b:g}" for a, b in c.items()) or "default"
        kw = {**c, "update_s": update_s, "askers": 40 if quick else 100}
        out.append((f"{key},fixes={'30s' if update_s else 'fresh'}", kw))
    return out


def _conditions(quick: bool) -> dict[str, Any]:
    """Random walkers over densities, speeds, k and session lengths, with fixes at every
    request and every 30 s (stale); then people who alternate stays and walks, fixes every
    30 s: no sessions, worst-case margins with the first group only, the shipped sessions."""
    out: dict[str, Any] = {}
    for name, kw in walker_runs(quick):
        base = repeated_cloaks_attack(session_s=0.0, oracle_margin_m=20.0, **kw)
        row: dict[str, Any] = {
            "undefended_area_m2_median": base.area_m2_median,
            # the future-knowing oracle on the same walks, 20 m margins (about the thin ones)
            "oracle_20m_ratio": base.oracle_area_m2_median / base.area_m2_median,
            # ... and the one choosing the set by its joint box: near the least a fixed set pays
            "oracle_joint_20m_ratio": base.oracle_joint_area_m2_median / base.area_m2_median,
            # ... and the one told every present position, committing to k at the first request
            "oracle_online_20m_ratio": base.oracle_online_area_m2_median / base.area_m2_median,
        }
        designs: list[tuple[str, dict[str, Any], float | None]] = [
            ("worst_case", WORST_CASE_SESSIONS, FIX_REPLY_S),
            ("one_box", ONE_BOX, FIX_REPLY_S),
            ("after", {}, FIX_REPLY_S),
        ]
        if kw["update_s"] > 0:  # with fixes at every request nobody is asked
            designs.append((NO_FIX_ANSWERS, {}, None))
        for design, over, reply in designs:
            r = repeated_cloaks_attack(
                session_s=WALKER_SESSION_S, cloak=over, fix_reply_s=reply, **kw
            )
            row[design] = {
                **dataclasses.asdict(r),
                "area_ratio": r.area_m2_median / base.area_m2_median,
            }
        out[name] = row
    return out


SESSION_MINUTES = (30.0, 45.0, 60.0)
"""Session lengths the issue's goal spans (30-60 min), on the default walkers."""

LENGTH_SEEDS = tuple(range(10))
"""Walk seeds of the session-length section (its figures are per seed and their mean)."""


def _lengths(quick: bool) -> dict[str, Any]:
    """The goal at defaults over session lengths: the default walkers (2,000 over 4 km ×
    4 km, 1.4 m/s, k = 5) asking every minute for 30, 45 and 60 minutes, fixes at every
    request and every 30 s, on ten walk seeds; median area over the undefended median of
    the same walks, answered share, sessions narrowed below k, and the oracles (20 m)."""
    out: dict[str, Any] = {}
    minutes_all = SESSION_MINUTES[::2] if quick else SESSION_MINUTES
    for minutes in minutes_all:
        for update_s in (0.0, 30.0):
            cells = []
            for seed in LENGTH_SEEDS[:1] if quick else LENGTH_SEEDS:
                kw: dict[str, Any] = {
                    "minutes": minutes,
                    "update_s": update_s,
                    "seed": seed,
                    "askers": 40 if quick else 100,
                }
                base = repeated_cloaks_attack(session_s=0.0, oracle_margin_m=20.0, **kw)
                r = repeated_cloaks_attack(
                    session_s=WALKER_SESSION_S, fix_reply_s=FIX_REPLY_S, **kw
                )
                box = repeated_cloaks_attack(
                    session_s=WALKER_SESSION_S, fix_reply_s=FIX_REPLY_S, cloak=ONE_BOX, **kw
                )
                cells.append(
                    {
                        "seed": seed,
                        "area_ratio": r.area_m2_median / base.area_m2_median,
                        "one_box_area_ratio": box.area_m2_median / base.area_m2_median,
                        "one_box_narrowed": box.success_rate,
                        "answered": r.answered_rate,
                        "narrowed": r.success_rate,
                        "oracle_joint_20m_ratio": base.oracle_joint_area_m2_median
                        / base.area_m2_median,
                        "oracle_online_20m_ratio": base.oracle_online_area_m2_median
                        / base.area_m2_median,
                    }
                )
            mean = {
                key: float(np.mean([c[key] for c in cells])) for key in cells[0] if key != "seed"
            }
            out[f"minutes={minutes:g},fixes={'30s' if update_s else 'fresh'}"] = {
                "seeds": cells,
                "mean": mean,
                "meets_goal": bool(
                    mean["area_ratio"] <= 5.0
                    and min(c["answered"] for c in cells) >= 0.95
                    and max(c["narrowed"] for c in cells) <= 0.01
                ),
            }
    return out


SCATTERS_M = (0.0, 5.0, 10.0, 20.0)
"""Per-axis scatter of the walkers' fixes (m): exact, good GPS, city GPS, Wi-Fi."""

SCATTER_DESIGNS: tuple[tuple[str, dict[str, Any], float | None, bool], ...] = (
    # (name, session settings, fix reply delay, reports give their accuracy)
    ("before", {"session_fix_error_m": 0.0, "session_fresh_s": 0.0}, None, False),
    ("fix_requests_no_error", {"session_fix_error_m": 0.0}, FIX_REPLY_S, False),
    ("accuracy_said", {}, FIX_REPLY_S, True),
    ("accuracy_unsaid", {}, FIX_REPLY_S, False),
)
"""The walkers of the default condition, fixes every 30 s: the design before fix requests and
error margins; fix requests with margins that ignore where a fix may lie; the shipped ones
with reports that give their accuracy (``accuracy_m``, as phones do) and with reports that
do not (``session_fix_error_m``, 20 m)."""


SCATTER_POPULATIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("users=4000", {"users": 4000}),
    ("dwell_share=0.5", {"dwell_share": 0.5}),
    ("fast_share=0.2", {"fast_share": 0.2}),
)
"""Walker populations besides the default that the shipped margins are also attacked on with
scattered fixes (dense, people who stay and walk, a fifth cycling): reports that give their
accuracy and reports that do not."""


TRACKING_USERS = (1000, 2000, 4000)
"""Walker densities of the tracking section (over 4 km x 4 km)."""

TRACKING_SEEDS = (0, 1, 2)
"""Walk seeds of the tracking section (its figures are the means over them)."""


def _tracking(quick: bool) -> dict[str, Any]:
    """Following people through a requester's regions (:mod:`simulators.tracking`): the
    default walkers (k = 5, 30 minutes, asking every minute) at three densities with fixes at
    every request and every 30 s; one-shot regions, one box per session and the shipped
    tiles; an adversary who knew where everyone inside each requester's first region was
    follows them; median errors (m) at the last region and the share within √A_min (100 m),
    with the prior (the position once known) beside them; means over three walk seeds."""
    out: dict[str, Any] = {}
    designs: list[tuple[str, dict[str, Any]]] = [
        ("one_shot", {"session_s": 0.0}),
        ("one_box", {"session_s": 1800.0, "cloak": ONE_BOX}),
        ("tiles", {"session_s": 1800.0}),
    ]
    for users in TRACKING_USERS[::2] if quick else TRACKING_USERS:
        for update_s in (0.0, 30.0):
            row: dict[str, Any] = {}
            for design, over in designs:
                waits = bool(update_s and over["session_s"])  # nobody is asked otherwise
                kw = {**over, "fix_reply_s": FIX_REPLY_S} if waits else over
                per = []
                for seed in TRACKING_SEEDS[:1] if quick else TRACKING_SEEDS:
                    r = repeated_cloaks_attack(
                        users=users,
                        update_s=update_s,
                        askers=40 if quick else 100,
                        minutes=30.0,
                        seed=seed,
                        track=True,
                        **kw,
                    )
                    assert r.tracking is not None
                    per.append({**dataclasses.asdict(r.tracking), "narrowed": r.success_rate})
                row[design] = {
                    key: float(np.mean([p[key] for p in per]))
                    for key in per[0]
                    if isinstance(per[0][key], float | int)
                }
                row[design]["rules"] = [p["rule"] for p in per]
            out[f"users={users},fixes={'30s' if update_s else 'fresh'}"] = row
    return out


def _scattered(quick: bool) -> dict[str, Any]:
    """The intersection attack on sessions whose members' fixes scatter (the adversary knows
    where everyone really is), by scatter and design: narrowed share, area over the
    undefended median of exact fixes, answered share. Every design on the default walkers;
    the shipped margins (accuracy said and unsaid) on :data:`SCATTER_POPULATIONS` too."""
    askers = 40 if quick else 100
    out: dict[str, Any] = {}
    populations = [("default", {}), *(SCATTER_POPULATIONS[:1] if quick else SCATTER_POPULATIONS)]
    for pop, kw in populations:
        base = repeated_cloaks_attack(
            session_s=0.0, update_s=30.0, askers=askers, **kw
        ).area_m2_median
        designs = SCATTER_DESIGNS if pop == "default" else SCATTER_DESIGNS[2:]
        prefix = "" if pop == "default" else f"{pop},"
        if pop == "default":
            out["undefended_area_m2_median"] = base
        for sigma in SCATTERS_M if pop == "default" else SCATTERS_M[1:]:
            row: dict[str, Any] = {}
            for name, cloak, reply, says in designs:
                r = repeated_cloaks_attack(
                    session_s=WALKER_SESSION_S,
                    update_s=30.0,
                    askers=askers,
                    cloak=cloak,
                    fix_reply_s=reply,
                    scatter_m=sigma,
                    says_accuracy=says,
                    **kw,
                )
                row[name] = {
                    "narrowed": r.success_rate,
                    "area_ratio": r.area_m2_median / base,
                    "answered": r.answered_rate,
                }
            out[f"{prefix}scatter_{sigma:g}m"] = row
    return out


CITY_SCATTERS: tuple[tuple[float, bool], ...] = ((10.0, True), (10.0, False), (20.0, True))
"""The city's scattered fixes (per-axis scatter in m, reports give their accuracy)."""


def _city_scatter_job(job: tuple[int, float, bool, bool]) -> dict[str, Any]:
    seed, sigma, says, quick = job
    res, _ = city_run(CITY_SESSION_S, quick, None, seed, scatter_m=sigma, says_accuracy=says)
    f = city_figures(res)
    return {"seed": seed, "sigma": sigma, "says": says, **f}


def _city_scattered(quick: bool, undefended: dict[str, float]) -> dict[str, Any]:
    """The city with every P1-P3 fix scattered (:data:`CITY_SCATTERS`), shipped sessions, on
    every seed, against each seed's undefended median of exact fixes (``undefended``, by
    seed): narrowed share, area ratio, answered share; in worker processes."""
    seeds = CITY_SEEDS[:2] if quick else CITY_SEEDS
    jobs = [(seed, sigma, says, quick) for seed in seeds for sigma, says in CITY_SCATTERS]
    with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as ex:
        rows = list(ex.map(_city_scatter_job, jobs))
    out: dict[str, Any] = {}
    for r in rows:
        key = f"scatter_{r['sigma']:g}m_{'said' if r['says'] else 'unsaid'}"
        out.setdefault(key, {})[str(r["seed"])] = {
            "narrowed": r["success_rate"],
            "area_ratio": r["area_m2_median"] / undefended[str(r["seed"])],
            "answered": r["answered_rate"],
        }
    for per in out.values():
        per["mean"] = {
            f: float(np.mean([v[f] for v in per.values()]))
            for f in ("narrowed", "area_ratio", "answered")
        }
    return out


def _p4_accuracy(keyed: bool, quick: bool) -> dict[str, Any]:
    sc = load_scenario("demo")
    wl = dataclasses.replace(sc.workload, queries_per_user_per_hour=120.0, protocol_mix={4: 1.0})
    sc = sc.replace(users=300 if quick else 1000, duration_s=60.0, workload=wl)
    cfg = VirtualConfig()
    cfg = dataclasses.replace(cfg, p4=dataclasses.replace(cfg.p4, keyed_noise=keyed))
    res = run_virtual(build(sc), config=cfg)
    recs = [r for r in res.records if r.protocol == 4]
    ok = [r for r in recs if r.ok]
    return {
        "queries": len(recs),
        "success_rate": len(ok) / len(recs) if recs else None,
        "ds_error_m_median": float(np.median([r.ds_error_m for r in ok])) if ok else None,
        "exact_share": (
            sum(r.precision == 1.0 and r.recall == 1.0 for r in ok) / len(ok) if ok else None
        ),
        "rounds": res.extra["p4_rounds"],
    }


def _wandering(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scatter in (0.0, 10.0, 25.0, 50.0):
        for walks in (0.0, 1.0):
            row = {}
            for name, places_only in (("before", True), ("after", False)):
                r = static_device_attack(
                    devices=4 if quick else 8,
                    days=90.0 if quick else 365.0,
                    scatter_m=scatter,
                    walks_per_day=walks,
                    seed=11,
                    through_machine=False,
                    places_only=places_only,
                )
                row[name] = {**dataclasses.asdict(r), "best_sigma": r.best_sigma}
            out[f"scatter_{scatter:g}m_walks_{walks:g}"] = row
    return out


def _edges() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pop in ("uniform", "clustered", "tied"):
        for sessions in (False, True):
            r = edge_attack(pop, sessions=sessions)
            out[f"{pop}_{'sessions' if sessions else 'shared'}"] = {
                **dataclasses.asdict(r),
                "pinned": r.pinned,
                "blind": r.blind,
            }
    return out


def _core() -> dict[str, Any]:
    out = {
        name: dataclasses.asdict(repeated_cloaks_attack(session_s=s))
        for name, s in (("before", 0.0), ("after", 600.0))
    }
    out["worst_case_sessions"] = dataclasses.asdict(
        repeated_cloaks_attack(session_s=600.0, cloak=WORST_CASE_SESSIONS)
    )
    out["one_box"] = dataclasses.asdict(repeated_cloaks_attack(session_s=600.0, cloak=ONE_BOX))
    out["rekeyed_3x"] = dataclasses.asdict(
        repeated_cloaks_attack(session_s=600.0, cloak={"session_rekey_factor": 3.0, **ONE_BOX})
    )
    return out


def _section(name: str, q: bool, result: dict[str, Any]) -> Any:
    """Compute one section of the results (``result``: the sections computed so far)."""
    if name == "static_device":
        devices = 10 if q else 50
        return {
            n: dataclasses.asdict(static_device_attack(devices=devices, keyed=keyed))
            for n, keyed in (("before", False), ("after", True))
        }
    if name == "wandering_device":
        return _wandering(q)
    if name == "edges":
        return _edges()
    if name == "repeated_cloaks_core":
        return _core()
    if name == "repeated_cloaks_conditions":
        return _conditions(q)
    if name == "session_lengths":
        return _lengths(q)
    if name == "scattered_fixes":
        return _scattered(q)
    if name == "member_tracking":
        return _tracking(q)
    if name == "repeated_cloaks_city":
        return _city_all(q)
    if name == "scattered_fixes_city":
        seeds = result["repeated_cloaks_city"]["seeds"]
        return _city_scattered(q, {s: per["before"]["area_m2_median"] for s, per in seeds.items()})
    if name == "broker_tracking":
        return {
            n: dataclasses.asdict(broker_tracking_attack(devices=10 if q else 30, defended=d))
            for n, d in (("before", False), ("after", True))
        }
    if name == "p4_accuracy":
        return {n: _p4_accuracy(keyed, q) for n, keyed in (("unkeyed", False), ("keyed", True))}
    raise ValueError(f"unknown section {name!r}; the sections are {', '.join(SECTIONS)}")


SECTIONS = (
    "static_device",
    "wandering_device",
    "edges",
    "repeated_cloaks_core",
    "repeated_cloaks_conditions",
    "session_lengths",
    "scattered_fixes",
    "member_tracking",
    "repeated_cloaks_city",
    "scattered_fixes_city",
    "broker_tracking",
    "p4_accuracy",
)
"""The results' sections, in the order they are computed (``--only`` reruns some of them)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    ap.add_argument(
        "--only",
        default="",
        help="comma-separated sections to rerun into the existing results file (the others"
        f" are kept): {', '.join(SECTIONS)}",
    )
    args = ap.parse_args()
    q = args.quick
    t0 = time.perf_counter()
    only = [n for n in args.only.split(",") if n]
    if only:
        unknown = [n for n in only if n not in SECTIONS]
        if unknown:
            ap.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
        if not OUT.exists():
            ap.error(f"--only needs an earlier full run's {OUT}")
        result: dict[str, Any] = json.loads(OUT.read_text())
        if result.get("quick") != q:
            ap.error(f"{OUT} was written {'with' if result.get('quick') else 'without'} --quick")
        missing = [n for n in SECTIONS if n not in result and n not in only]
        if missing:
            ap.error(f"{OUT} lacks {', '.join(missing)}: rerun them too (or everything)")
        for name in only:
            result[name] = _section(name, q, result)
        result.setdefault("reruns", {})[",".join(only)] = time.perf_counter() - t0
    else:
        result = {"machine": {"python": platform.python_version()}, "quick": q}
        for name in SECTIONS:
            result[name] = _section(name, q, result)
        result["seconds"] = time.perf_counter() - t0
        result.pop("reruns", None)
    sd, rc, city = (
        result["static_device"],
        result["repeated_cloaks_core"],
        result["repeated_cloaks_city"],
    )
    first = next(iter(city["seeds"]))
    cc = city["seeds"][first]  # the first seed's runs, for the summary rows
    bt, pa = result["broker_tracking"], result["p4_accuracy"]
    rows = [
        (
            "static device: averaging error (σ)",
            sd["before"]["error_distinct_sigma"],
            min(sd["after"]["error_all_sigma"], sd["after"]["error_distinct_sigma"]),
        ),
        (
            "core: intersection attack success",
            rc["before"]["success_rate"],
            rc["after"]["success_rate"],
        ),
        ("core: median area (m²)", rc["before"]["area_m2_median"], rc["after"]["area_m2_median"]),
        (
            f"city (seed {first}): attack success",
            cc["before"]["success_rate"],
            cc["after"]["success_rate"],
        ),
        (
            f"city (seed {first}): median area (m²)",
            cc["before"]["area_m2_median"],
            cc["after"]["area_m2_median"],
        ),
        (
            f"city (seed {first}): answered (P1, P3)",
            cc["before"]["answered_rate"],
            cc["after"]["answered_rate"],
        ),
        (
            "broker: hours one device is followed",
            bt["before"]["linked_hours_mean"],
            bt["after"]["linked_hours_mean"],
        ),
        ("broker: median error (m)", bt["before"]["error_m_median"], bt["after"]["error_m_median"]),
        ("P4: success rate", pa["unkeyed"]["success_rate"], pa["keyed"]["success_rate"]),
        (
            "P4: median DS error (m)",
            pa["unkeyed"]["ds_error_m_median"],
            pa["keyed"]["ds_error_m_median"],
        ),
    ]
    print(f"{'figure':40} {'before':>12} {'defended':>12}")
    for name, before, after in rows:
        print(f"{name:40} {before:12.3f} {after:12.3f}")
    print(f"\n{'sessions re-keyed at 3x (opt-in)':40} {'narrowed':>12} {'area ratio':>12}")
    for name, r in (("core", rc), ("city", cc)):
        ratio = r["rekeyed_3x"]["area_m2_median"] / r["before"]["area_m2_median"]
        print(f"{name:40} {r['rekeyed_3x']['success_rate']:12.3f} {ratio:12.2f}")
    print(f"\n{'sessions (narrowed/ratio/answered)':40} {'worst-case':>18} {'shipped':>18}")
    for name, r in (("core", rc), ("city", cc)):
        base = r["before"]["area_m2_median"]
        cells = [
            f"{r[d]['success_rate']:.2f}/{r[d]['area_m2_median'] / base:.1f}"
            f"/{r[d]['answered_rate']:.3f}"
            for d in ("worst_case_sessions", "after")
        ]
        print(f"{name:40} {cells[0]:>18} {cells[1]:>18}")
    print(f"{'(walkers: no fix answers; oracles 20 m, by distance/joint box/online)':>109}")
    for key, row in result["repeated_cloaks_conditions"].items():
        cells = [
            f"{row[d]['success_rate']:.2f}/{row[d]['area_ratio']:.1f}/{row[d]['answered_rate']:.3f}"
            if d in row
            else "-"
            for d in ("worst_case", "after", NO_FIX_ANSWERS)
        ]
        oracle = "/".join(f"{row[f'oracle_{m}20m_ratio']:.1f}" for m in ("", "joint_", "online_"))
        print(f"{'walkers ' + key:40} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18} {oracle:>12}")
    print(
        f"\n{'walkers: requester found, shipped (x chance)':48} {'centre':>7} {'edge':>7}"
        f" {'centre|c':>9} {'edge|c':>7} {'rank|c':>7} {'decoy':>6}"
    )
    for key, row in result["repeated_cloaks_conditions"].items():
        g = row["after"]
        found = " ".join(
            f"{g[f'{guess}over_chance']:{w}.2f}"
            for guess, w in (
                ("centre_", 7),
                ("edge_", 7),
                ("centre_among_candidates_", 9),
                ("edge_among_candidates_", 7),
                ("rank_among_candidates_", 7),
                ("rank_decoy_", 6),
            )
        )
        print(f"{'walkers ' + key:48} {found}")
    print(
        f"\n{'city by seed (narrowed/ratio/answered)':32} {'no fix answers':>17}"
        f" {'no still margins':>17} {'distance ranking':>17} {'shipped':>17} {'bounds':>20}"
    )
    designs = (NO_FIX_ANSWERS, "no_still_margins", "distance_ranking", "after")
    for seed, per in city["seeds"].items():
        b = city["bounds"][seed]
        cells = [
            f"{r['success_rate']:.2f}/{r['area_ratio']:.2f}/{r['answered_rate']:.3f}"
            for r in (per[d] for d in designs)
        ]
        bounds = "/".join(
            f"{b[key]['ratio']:.2f}"
            for key in ("margin_48m", "static_anchors_20m", "joint_margin_48m", "joint_margin_20m")
        )
        line = " ".join(f"{c:>17}" for c in cells)
        print(f"{'city seed ' + seed:32} {line} {bounds:>20}")
    means = [
        f"{m['success_rate']:.2f}/{m['area_ratio']:.2f}/{m['answered_rate']:.3f}"
        for m in (city[f"{d}_mean"] for d in designs)
    ]
    print(
        f"{'city, mean of the seeds':32} {' '.join(f'{c:>17}' for c in means)}"
        f"  (largest shipped ratio {city['after_max_area_ratio']:.2f})"
    )
    print(
        "(bounds: future-knowing oracle, 48 m margins / who-never-moves anchors, 20 m /"
        " future-knowing, set by its joint box, 48 m / 20 m)"
    )
    print(
        f"\n{'city: requester found (x chance)':40} {'distance ranking':>50} {'shipped':>50}"
        "\n(|c: among the candidates left by the intersection attack; rank: the best depth-rank"
        " guess, decoy: its score on a decoy, what it gets when nothing leaks)"
    )
    for seed, per in city["seeds"].items():
        cells = [
            f"centre {g['centre_over_chance']:.2f} edge {g['edge_over_chance']:.2f}"
            f" edge|c {g['edge_among_candidates_over_chance']:.2f}"
            f" rank|c {g['rank_among_candidates_over_chance']:.2f}"
            f" ({g['rank_decoy_over_chance']:.2f})"
            for g in (per[d]["requester_guesses"] for d in ("distance_ranking", "after"))
        ]
        print(f"{'city seed ' + seed:40} {cells[0]:>50} {cells[1]:>50}")
    print(f"\n{'city: requests <= 5x (still / moving)':40} {'shipped':>18} {'oracle 48 m':>18}")
    for seed, per in city["seeds"].items():
        a, o = per["after"]["by_requester"], city["bounds"][seed]["margin_48m"]["by_requester"]
        cells = [
            f"{r['still']['share_at_most_5x']:.2f} / {r['moving']['share_at_most_5x']:.2f}"
            for r in (a, o)
        ]
        print(f"{'city seed ' + seed:40} {cells[0]:>18} {cells[1]:>18}")

    def cell(r: dict[str, float]) -> str:
        return f"{r['narrowed']:.2f}/{r['area_ratio']:.2f}/{r['answered']:.3f}".rjust(24)

    sf = result["scattered_fixes"]
    names = [d[0] for d in SCATTER_DESIGNS]
    shipped = names[2:]
    print(f"\n{'scattered fixes (narrowed/ratio/answered)':30}{''.join(f'{n:>24}' for n in names)}")
    for key in [k for k in sf if k.startswith("scatter_")]:
        print(f"{key:30}{''.join(cell(sf[key][n]) for n in names)}")
    print(f"{'... other walkers, shipped':30}{''.join(f'{n:>24}' for n in shipped)}")
    for key in [k for k in sf if "," in k]:
        print(f"{key:30}{''.join(cell(sf[key][n]) for n in shipped)}")
    print(
        f"\n{'session lengths, default walkers':32} {'ratio over seeds':>20} {'mean':>6}"
        f" {'answered':>9} {'narrowed':>9} {'oracles':>10} {'goal':>5}"
    )
    for key, row in result["session_lengths"].items():
        ratios = [c["area_ratio"] for c in row["seeds"]]
        per = f"{min(ratios):.2f}-{max(ratios):.2f}, {sum(r > 5.0 for r in ratios)} > 5"
        m = row["mean"]
        oracles = f"{m['oracle_joint_20m_ratio']:.1f}/{m['oracle_online_20m_ratio']:.1f}"
        print(
            f"{key:32} {per:>20} {m['area_ratio']:6.2f}"
            f" {min(c['answered'] for c in row['seeds']):9.3f}"
            f" {max(c['narrowed'] for c in row['seeds']):9.3f} {oracles:>10}"
            f" {'met' if row['meets_goal'] else 'no':>5}"
        )
    cs = result["scattered_fixes_city"]
    print(f"\n{'city, scattered fixes':30}{''.join(f'{k:>24}' for k in cs)}")
    for seed in next(iter(cs.values())):
        label = "city, mean of the seeds" if seed == "mean" else "city seed " + seed
        print(f"{label:30}{''.join(cell(cs[k][seed]) for k in cs)}")
    print(f"\n{'wandering device (best error, σ)':40} {'before':>12} {'defended':>12}")
    for key, row in result["wandering_device"].items():
        print(f"{key:40} {row['before']['best_sigma']:12.3f} {row['after']['best_sigma']:12.3f}")
    print(
        f"\n{'region edges':24} {'edges':>6} {'midway':>7} {'member':>7} {'offset':>7} {'blind':>6}"
    )
    for key, e in result["edges"].items():
        print(
            f"{key:24} {e['edges']:6d} {e['midway']:7d} {e['at_member']:7d}"
            f" {e['at_offset']:7d} {e['blind']:6.2f}"
        )
    print(
        f"\n{'tracking after 30 min (median error m':40} {'one-shot':>16} {'one box':>16}"
        f" {'tiles':>16} {'prior':>10}"
    )
    print(f"{' requester / share of all within 100 m)':40}")
    for key, row in result["member_tracking"].items():
        cells = [
            f"{row[d]['requester_error_m_median']:.0f} / {row[d]['within_side']:.3f}"
            for d in ("one_shot", "one_box", "tiles")
        ]
        t = row["tiles"]
        prior = f"{t['requester_prior_error_m_median']:.0f} / {t['prior_within_side']:.3f}"
        print(f"{'walkers ' + key:40} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} {prior:>10}")
    if only:  # what this run took, not the full run's figure the results file keeps
        print(f"({time.perf_counter() - t0:.0f} s for {', '.join(only)}; the last full run took"
              f" {result['seconds']:.0f} s)")  # fmt: skip
    else:
        print(f"({result['seconds']:.0f} s)")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
