"""The city of repeated requests: ``city_sessions`` (2,000 pedestrians on a Manhattan grid,
100 of them asking for a cloak every minute for 30-60 minutes) run on the virtual clock.

One place for the runs that ``benchmarks/bench_privacy.py``, the session benchmarks and the
demo's attacks plot (:func:`simulators.attacks.attacks_summary`) measure the city with: the
scenario at a session length and seed, a run with the anonymizer's settings and the fixes'
scatter, and the run's intersection-attack figures. Areas are m², times seconds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simulators.evaluate import summarize
from simulators.scenario import BuiltScenario, Scenario, build, load_scenario
from simulators.virtual import VirtualConfig, VirtualResult, default_cloak_config, run_virtual
from simulators.workload import Distribution

__all__ = [
    "CITY_SEEDS",
    "CITY_SESSION_S",
    "city_figures",
    "city_run",
    "city_scenario",
    "city_session_frames",
]

CITY_SESSION_S = 600.0
"""The city's ``session_s`` (seconds without a request before a session ends)."""

CITY_SEEDS = (23, 24, 25, 26, 27)
"""The city's seeds: one seed's median area moves by ~10 % when every coordinate moves by a
micrometre (users on one street share a coordinate, and the partition's ties follow), so
figures are given per seed and as their mean."""


def city_scenario(session_s: float, quick: bool, seed: int = CITY_SEEDS[0]) -> Scenario:
    """``city_sessions`` with sessions of ``session_s`` (0: every request a one-shot cloak);
    ``quick``: 800 people for 40 minutes instead of 2,000 for 90 (sparser, so one-shot regions
    are larger and sessions shorter: its area ratios are not the city's)."""
    sc = load_scenario("city_sessions")
    profile = dict(sc.workload.profile)
    profile["session_s"] = Distribution.parse(session_s)
    sc = sc.replace(seed=seed, workload=dataclasses.replace(sc.workload, profile=profile))
    if quick:
        sc = sc.replace(users=800, duration_s=2400.0)
    return sc


def city_run(
    session_s: float,
    quick: bool,
    cloak: dict[str, Any] | None = None,
    seed: int = CITY_SEEDS[0],
    *,
    fix_answers: bool = True,
    scatter_m: float = 0.0,
    says_accuracy: bool = True,
) -> tuple[VirtualResult, BuiltScenario]:
    """One virtual run of the city (``cloak``: CloakConfig fields over the simulator's
    defaults; ``fix_answers``: devices answer the anonymizer's fix requests a second later,
    as apps with a ``position_source`` do; ``scatter_m``: every P1-P3 fix lies off the truth
    by that much per axis, its report giving its accuracy or not, ``says_accuracy``); returns
    the run's result and the built scenario."""
    sc = city_scenario(session_s, quick, seed)
    cfg = VirtualConfig(fix_scatter_m=scatter_m, says_accuracy=says_accuracy)
    if not fix_answers:
        cfg = dataclasses.replace(cfg, fix_reply_s=None)
    if cloak:
        cfg = dataclasses.replace(cfg, cloak=default_cloak_config(sc, cfg, **cloak))
    built = build(sc)
    return run_virtual(built, config=cfg), built


def city_figures(res: VirtualResult) -> dict[str, Any]:
    """A city run's intersection attack (``success_rate``, ``area_m2_median``, ...) and the
    share of its P1 and P3 requests answered (``answered_rate``)."""
    s = summarize(res.records, res.stats)
    answered = [s["protocols"][p]["success_rate"] for p in ("p1", "p3") if p in s["protocols"]]
    return {**s["attacks"]["intersection"], "answered_rate": float(np.mean(answered))}


def city_session_frames(
    seed: int = CITY_SEEDS[0], quick: bool = False
) -> list[tuple[int, int, list[NDArray[np.float64]]]]:
    """Per user who asks in the city's sessions, in user order: ``(user index, her k, every
    user's true position ((n, 2) metres) at each of her requests)`` - what an anonymizer
    that sees exact positions would work from (``simulators.tile_sessions``)."""
    built = build(city_scenario(CITY_SESSION_S, quick, seed))
    times: dict[int, list[float]] = {}
    for e in built.workload.events:
        if e.protocol in (1, 3):
            times.setdefault(e.user, []).append(e.t_s)
    out = []
    for user in sorted(times):
        frames = [np.column_stack(built.trajectories.at(t)) for t in sorted(times[user])]
        out.append((user, built.workload.profiles[user].k, frames))
    return out
