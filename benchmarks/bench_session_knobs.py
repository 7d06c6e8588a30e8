"""Session settings: what each one does to the cost of historical k-anonymity.

    .venv/bin/python benchmarks/bench_session_knobs.py [--quick] [--parts city,walkers]
        [--seeds 23,24] [--knob '{"session_shrink_requests": 5}' ...] [--scatter 10]
        [--tag NAME]

For the shipped settings and each ``--knob`` (CloakConfig fields over the shipped ones; by
default the alternatives docs/algorithms.md names as tried and not taken):

**city**: bench_privacy's city (``city_sessions`` through the real protocol machines on the
virtual clock) on each seed, and per setting (``--scatter S``: every P1-P3 fix of the
sessions lies off the truth by ``S`` metres per axis, each report giving its accuracy, as in
bench_privacy's ``scattered_fixes_city``; the undefended runs keep exact fixes, so the ratio
is over the undefended median of exact fixes, as there):

* ``ratio``: the median region area of the attacked sessions over the same seed's undefended
  median (the goal: at most 5); ``answered``: the share of P1 and P3 requests answered;
  ``narrowed``: the share of sessions the intersection attack singles out below k;
* where the cost lies: per k, the sessions' median over the undefended median of the same k;
  per request index within a session (0-9, 10-29, 30 and later), the median over the seed's
  undefended median (a set only shrinks, so members scatter as a session ages); ``thin_share``:
  the share of session regions answered from thin margins (the rest from worst-case ones),
  ``short_share`` the share answered from worst-case margins because fewer than k + slack
  members were left, ``audit_dropped`` the members the self-audit dropped (the cloaker's
  ``session_counts``; in the JSON for the walker conditions too);
* who asked: bench_privacy's requester guesses (the user inside nearest the centre, or nearest
  an edge, over a guess at random among those inside; 1 is chance), per seed and their range;
  the same guesses among the session's candidates only (the users inside every region so far).

**walkers**: bench_privacy's 17 random-walker and stay-and-walk conditions (``walker_runs``):
per condition, the median area over its undefended median, answered share, narrowed share;
devices answer the cloaker's fix requests a second later (as in the city), so the rows with
30 s fixes are made from fresh reports of the members asked.

Runs go to worker processes (one run is single-threaded). Prints tables and writes
benchmarks/results/bench_session_knobs.json (``--quick``: bench_session_knobs_quick.json; with
``--knob``, ``--seeds`` or ``--scatter``, ``_custom`` is added to the name, so an exploratory
run never replaces the record; ``--tag NAME`` writes bench_session_knobs_NAME.json instead;
``--knob '{}'`` runs the shipped settings alone); with ``--parts``, only the parts named are
run and replaced in that file (each part records its own settings and seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from bench_privacy import (
    FIX_REPLY_S,
    WALKER_SESSION_S,
    requester_guess_figures,
    walker_runs,
)

from simulators.attacks import repeated_cloaks_attack
from simulators.city import CITY_SEEDS, CITY_SESSION_S, city_figures, city_run
from simulators.evaluate import QueryRecord, region_sessions

RESULTS = Path(__file__).resolve().parent / "results"

KNOBS: tuple[dict[str, Any], ...] = (
    {"session_candidate_factor": 8},
    {"session_candidate_factor": 16},
    {"session_candidate_factor": 24},
    {"session_shrink_requests": 3},
    {"session_shrink_requests": 5},
    {"session_shrink_requests": 20},
    {"session_pool_factor": 1},
    {"session_pool_factor": 3},
    {"session_slack": 1},
    {"session_slack": 4},
)
"""Alternatives to the shipped settings measured by default (each one field changed)."""

AGES = ((0, 10), (10, 30), (30, None))
"""Request-index bands within a session: the first ten (the set shrinks to k over them), the
rest of the first half hour (a request a minute), and later."""


def _areas(records: Sequence[QueryRecord]) -> list[tuple[int, int, float]]:
    """(k, index within the session, area m²) of every answered region of the attacked
    sessions (``region_sessions``)."""
    return [
        (r.k_requested, i, r.area_m2)
        for rs in region_sessions(records).values()
        for i, r in enumerate(rs)
        if r.area_m2 is not None
    ]


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if len(values) else None


def _job(job: tuple[int, float, dict[str, Any], bool, float]) -> dict[str, Any]:
    """One city run (``seed``, ``session_s``, ``cloak``, ``quick``, ``scatter_m``)."""
    seed, session_s, cloak, quick, scatter_m = job
    res, built = city_run(session_s, quick, cloak or None, seed, scatter_m=scatter_m)
    f = city_figures(res)
    g = requester_guess_figures(res.records, built.trajectories)
    return {
        "seed": seed,
        "knob": cloak,
        "session_s": session_s,
        "area_m2_median": f["area_m2_median"],
        "narrowed": f["success_rate"],
        "answered": f["answered_rate"],
        "areas": _areas(res.records),
        # fix requests over every periodic report and fix answer the devices sent
        "location_updates": res.stats.location_updates,
        **_session_shares(res.extra["sessions"]),
        **{k: v for k, v in g.items() if k.endswith("over_chance")},
    }


SESSION_KEYS = ("thin_share", "short_share", "audit_dropped", "fix_asked", "fix_asked_per_region")
"""What :func:`_session_shares` reports per run."""


def _session_shares(counts: Mapping[str, int]) -> dict[str, Any]:
    """From the cloaker's ``session_counts``: the share of session regions answered from thin
    margins (``thin_share``; the rest from worst-case margins), the share answered from
    worst-case margins because fewer than k + slack members were left (``short_share``), and
    the members the self-audit dropped (``audit_dropped``); what the settings cost devices:
    the fix requests the cloaker sent (``fix_asked``), per session region answered."""
    n = counts.get("thin", 0) + counts.get("worst_case", 0)
    return {
        "thin_share": counts.get("thin", 0) / n if n else None,
        "short_share": counts.get("short", 0) / n if n else None,
        "audit_dropped": counts.get("audit_dropped", 0),
        "fix_asked": counts.get("fix_asked", 0),
        "fix_asked_per_region": counts.get("fix_asked", 0) / n if n else None,
    }


def _breakdown(run: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """The session run's cost per k and per request index, against ``before`` (no sessions)."""
    base = before["area_m2_median"]
    by_k: dict[str, Any] = {}
    for k in sorted({k for k, _, _ in run["areas"]}):
        mine = [a for kk, _, a in run["areas"] if kk == k]
        theirs = _median([a for kk, _, a in before["areas"] if kk == k])
        med = _median(mine)
        by_k[str(k)] = {
            "requests": len(mine),
            "ratio": med / theirs if med is not None and theirs else None,
        }
    by_age: dict[str, Any] = {}
    for lo, hi in AGES:
        got = [a for _, i, a in run["areas"] if i >= lo and (hi is None or i < hi)]
        med = _median(got)
        by_age[f"{lo}-{'' if hi is None else hi - 1}"] = {
            "requests": len(got),
            "ratio": med / base if med is not None else None,
        }
    return {"by_k": by_k, "by_age": by_age}


def _fix_costs(rows: list[dict[str, Any]], key: str) -> None:
    """Print what each setting costs devices: fix requests, in all and per session region
    answered (and, in the city, over the location updates the devices sent)."""
    print(f"{'fix requests':32} {'in all':>9} {'per region':>12} {'of updates':>11}")
    for row in rows:
        per = list(row[key].values())
        rates = [p["fix_asked_per_region"] for p in per if p["fix_asked_per_region"] is not None]
        shares = [p["fix_share_of_updates"] for p in per if "fix_share_of_updates" in p]
        span = f"{min(rates):5.2f}-{max(rates):<5.2f}" if rates else "-"
        share = f"{min(shares):5.1%}-{max(shares):<5.1%}" if shares else ""
        total = sum(p["fix_asked"] for p in per)
        print(f"{_label(row['knob']):32} {total:9d} {span:>12} {share:>11}")


def _machine() -> dict[str, Any]:
    """Where a part ran (each part records its own: ``--parts`` reruns one alone)."""
    return {"python": platform.python_version(), "cpus": os.cpu_count()}


def _label(knob: dict[str, Any]) -> str:
    return ", ".join(f"{k.removeprefix('session_')}={v}" for k, v in knob.items()) or "shipped"


def _walker_job(job: tuple[str, dict[str, Any], dict[str, Any] | None]) -> dict[str, Any]:
    """One walker condition: without sessions (``knob`` None) or with them and ``knob``."""
    name, kw, knob = job
    if knob is None:
        r = repeated_cloaks_attack(session_s=0.0, **kw)
    else:
        r = repeated_cloaks_attack(
            session_s=WALKER_SESSION_S, cloak=knob, fix_reply_s=FIX_REPLY_S, **kw
        )
    return {
        "condition": name,
        "knob": knob,
        "area_m2_median": r.area_m2_median,
        "answered": r.answered_rate,
        "narrowed": r.success_rate,
        **_session_shares(r.session_counts),
        **{
            f.name: getattr(r, f.name)
            for f in dataclasses.fields(r)
            if f.name.endswith("over_chance")
        },
    }


def _summary(per: dict[str, dict[str, Any]]) -> dict[str, float]:
    ratios = [p["ratio"] for p in per.values()]
    out = {
        "ratio_mean": float(np.mean(ratios)),
        "ratio_max": float(np.max(ratios)),
        "answered_min": float(min(p["answered"] for p in per.values())),
        "narrowed_max": float(max(p["narrowed"] for p in per.values())),
    }
    guesses = (
        "centre_over_chance",
        "edge_over_chance",
        "centre_among_candidates_over_chance",
        "edge_among_candidates_over_chance",
        "rank_among_candidates_over_chance",
        "rank_decoy_over_chance",
    )
    for guess in guesses:
        got = [p[guess] for p in per.values() if guess in p]
        if got:
            out[guess.replace("over_chance", "min")] = float(np.min(got))
            out[guess.replace("over_chance", "max")] = float(np.max(got))
    return out


def _table(rows: list[dict[str, Any]], key: str, cell: int) -> None:
    names = list(rows[0][key])
    guesses = "edge_min" in rows[0]
    print(
        f"{'setting':32} {'ratio by ' + key:>{cell * len(names)}} {'mean':>6} {'max':>6}"
        f" {'answ':>6} {'narr':>5}"
        + (
            f" {'centre/chance':>13} {'edge/chance':>11} {'edge/chance, cand.':>18}"
            f" {'rank/chance, cand. (decoy)':>26}"
            if guesses
            else ""
        )
    )
    for row in rows:
        cells = "".join(f"{p['ratio']:{cell}.2f}" for p in row[key].values())
        extra = (
            f" {row['centre_min']:6.2f}-{row['centre_max']:<6.2f}"
            f" {row['edge_min']:5.2f}-{row['edge_max']:<5.2f}"
            f" {row['edge_among_candidates_min']:11.2f}-{row['edge_among_candidates_max']:<5.2f}"
            f" {row['rank_among_candidates_min']:8.2f}-{row['rank_among_candidates_max']:<5.2f}"
            f" ({row['rank_decoy_min']:.2f}-{row['rank_decoy_max']:.2f})"
            if guesses
            else ""
        )
        print(
            f"{_label(row['knob']):32} {cells} {row['ratio_mean']:6.2f} {row['ratio_max']:6.2f}"
            f" {row['answered_min']:6.3f} {row['narrowed_max']:5.3f}{extra}"
        )


def _city_part(
    seeds: list[int], knobs: list[dict[str, Any]], q: bool, ex: Any, scatter_m: float = 0.0
) -> dict[str, Any]:
    t0 = time.perf_counter()
    jobs: list[tuple[int, float, dict[str, Any], bool, float]] = [
        (seed, 0.0, {}, q, 0.0) for seed in seeds
    ]
    jobs += [(seed, CITY_SESSION_S, knob, q, scatter_m) for knob in knobs for seed in seeds]
    runs = list(ex.map(_job, jobs))
    before = {r["seed"]: r for r in runs if r["session_s"] == 0.0}
    rows: list[dict[str, Any]] = []
    for knob in knobs:
        per = {}
        for r in runs:
            if r["session_s"] > 0.0 and r["knob"] == knob:
                b = before[r["seed"]]
                per[str(r["seed"])] = {
                    "ratio": r["area_m2_median"] / b["area_m2_median"],
                    "answered": r["answered"],
                    "narrowed": r["narrowed"],
                    **{k: r[k] for k in SESSION_KEYS},
                    "fix_share_of_updates": r["fix_asked"] / max(1, r["location_updates"]),
                    **{k: v for k, v in r.items() if k.endswith("over_chance")},
                    **_breakdown(r, b),
                }
        rows.append({"knob": knob, "seeds": per, **_summary(per)})
    scattered = f", session fixes scattered {scatter_m:g} m per axis" if scatter_m else ""
    print(f"city, seeds {', '.join(map(str, seeds))}{scattered}")
    _table(rows, "seeds", 7)
    shipped = rows[0]["seeds"]
    ks = sorted({k for p in shipped.values() for k in p["by_k"]}, key=int)
    print(
        f"\n{'shipped, where the cost lies':32} "
        + " ".join(f"{'k=' + k:>7}" for k in ks)
        + " "
        + " ".join(f"{'req ' + a:>9}" for a in next(iter(shipped.values()))["by_age"])
        + f" {'thin':>6} {'short':>6} {'dropped':>7}"
    )
    for seed, p in shipped.items():
        kc = " ".join(f"{p['by_k'][k]['ratio']:7.2f}" for k in ks if k in p["by_k"])
        ac = " ".join(f"{b['ratio']:9.2f}" for b in p["by_age"].values())
        shares = " ".join(
            f"{'' if p[key] is None else format(p[key], '.3f'):>6}"
            for key in ("thin_share", "short_share")
        )
        print(f"{'city seed ' + seed:32} {kc} {ac} {shares} {p['audit_dropped']:7d}")
    _fix_costs(rows, "seeds")
    seconds = time.perf_counter() - t0
    print(f"(city: {seconds:.0f} s)\n")
    return {
        "machine": _machine(),
        "seeds": seeds,
        "scatter_m": scatter_m,
        "settings": rows,
        "seconds": seconds,
    }


def _walker_part(knobs: list[dict[str, Any]], q: bool, ex: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    conds = walker_runs(q)
    jobs: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
        (name, kw, None) for name, kw in conds
    ]
    jobs += [(name, kw, knob) for knob in knobs for name, kw in conds]
    runs = list(ex.map(_walker_job, jobs))
    before = {r["condition"]: r for r in runs if r["knob"] is None}
    rows: list[dict[str, Any]] = []
    for knob in knobs:
        per = {
            r["condition"]: {
                "ratio": r["area_m2_median"] / before[r["condition"]]["area_m2_median"],
                "answered": r["answered"],
                "narrowed": r["narrowed"],
                **{k: r[k] for k in SESSION_KEYS},
                **{k: v for k, v in r.items() if k.endswith("over_chance")},
            }
            for r in runs
            if r["knob"] == knob
        }
        rows.append({"knob": knob, "conditions": per, **_summary(per)})
    print("walkers, conditions: " + "; ".join(f"{i}: {n}" for i, (n, _) in enumerate(conds)))
    _table(rows, "conditions", 6)
    thin = [p["thin_share"] for p in rows[0]["conditions"].values() if p["thin_share"] is not None]
    if thin:
        label = _label(rows[0]["knob"])
        print(f"{label}: thin share {min(thin):.3f}-{max(thin):.3f} over the conditions")
    _fix_costs(rows, "conditions")
    seconds = time.perf_counter() - t0
    print(f"(walkers: {seconds:.0f} s)\n")
    return {"machine": _machine(), "settings": rows, "seconds": seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs, two seeds")
    ap.add_argument("--parts", default="city,walkers", help="city, walkers or both (default)")
    ap.add_argument("--seeds", help="comma-separated seeds (default: bench_privacy's city seeds)")
    ap.add_argument(
        "--knob",
        action="append",
        type=json.loads,
        help="CloakConfig fields as a JSON object (repeatable; default: the tried alternatives)",
    )
    ap.add_argument(
        "--scatter",
        type=float,
        default=0.0,
        help="city: session fixes scattered by this many metres per axis (reports say so)",
    )
    ap.add_argument(
        "--tag",
        help="write bench_session_knobs_TAG.json instead (a record of its own, e.g. an ablation)",
    )
    args = ap.parse_args()
    q = args.quick
    if not 0.0 <= args.scatter <= 1000.0:  # nan fails too
        ap.error(f"--scatter takes 0-1000 metres, got {args.scatter!r}")
    parts = [p for p in args.parts.split(",") if p]
    if not parts or set(parts) - {"city", "walkers"}:
        ap.error(f"--parts takes city and/or walkers, got {args.parts!r}")
    seeds = (
        [int(s) for s in args.seeds.split(",")]
        if args.seeds
        else list(CITY_SEEDS[:2] if q else CITY_SEEDS)
    )
    knobs: list[dict[str, Any]] = [{}]
    for knob in args.knob if args.knob is not None else KNOBS:
        if not isinstance(knob, dict):
            ap.error(f"--knob wants a JSON object, got {knob!r}")
        # the same setting twice is one run: --knob '{}' runs the shipped settings only
        if knob not in knobs:
            knobs.append(knob)
    # a run with other knobs or seeds is not the record docs/algorithms.md quotes: its own file
    custom = args.knob is not None or args.seeds is not None or args.scatter > 0
    name = "bench_session_knobs" + ("_quick" if q else "") + ("_custom" if custom else "")
    if args.tag:
        if not args.tag.replace("_", "").isalnum():
            ap.error(f"--tag takes letters, digits and _, got {args.tag!r}")
        name = f"bench_session_knobs{'_quick' if q else ''}_{args.tag}"
    out = RESULTS / f"{name}.json"
    result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    result["quick"] = q
    with ProcessPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        if "city" in parts:
            result["city"] = _city_part(seeds, knobs, q, ex, args.scatter)
        if "walkers" in parts:
            result["walkers"] = _walker_part(knobs, q, ex)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
