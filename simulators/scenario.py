"""Scenario files (TOML) and their deterministic expansion into trajectories and a workload.

A scenario names everything a run needs; the same file and seed give the same users, movements,
profiles and queries. Example (``simulators/scenarios/demo.toml``)::

    name = "demo"
    seed = 7
    origin = { lat = 41.3874, lon = 2.1686 }   # projection centre, WGS84 degrees
    duration_s = 30.0                           # simulated time, s
    dt_s = 1.0                                  # trajectory sampling step, s
    users = 2000
    static_fraction = 0.3                       # users that never move
    update_interval_s = 8.0                     # each user's location-update period, s

    [mobility]
    model = "manhattan"       # random_waypoint | manhattan | sumo | trace
    blocks = 20               # manhattan/sumo: grid of blocks x blocks
    block_m = 200.0           # block length, m
    speed_mps = [0.8, 1.6]
    pause_s = [0.0, 300.0]

    [workload]                # see simulators.workload
    queries_per_user_per_hour = 60.0
    protocol_mix = { p1 = 0.25, p2 = 0.25, p3 = 0.25, p4 = 0.25 }

Mobility keys per model: ``random_waypoint`` (``width_m``, ``height_m``, ``speed_mps``,
``pause_s``), ``manhattan`` (``blocks``, ``block_m``, ``speed_mps``, ``pause_s``,
``max_trip_blocks``), ``sumo`` (``blocks``, ``block_m``, ``vehicle`` = ``"car"`` or
``"pedestrian-speed"``), ``trace`` (``path``, relative to the scenario file; ``width_m`` and
``height_m`` for static users default to the trace's extent).

Seeds: ``numpy.random.SeedSequence(seed)`` is split into independent streams for roaming users,
static users, profiles, queries and the protocols (P4 noise, update jitter).
"""

from __future__ import annotations

import dataclasses
import logging
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from locpriv.core.geo import LocalProjection
from simulators import mobility
from simulators.mobility import Trajectories
from simulators.workload import Workload, WorkloadConfig, generate_workload

log = logging.getLogger(__name__)

SCENARIO_DIR = Path(__file__).with_name("scenarios")
"""Directory of the bundled scenario files."""

__all__ = ["SCENARIO_DIR", "BuiltScenario", "Scenario", "build", "load_scenario"]

_MODELS = ("random_waypoint", "manhattan", "sumo", "trace")


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario (units in the names: s, m, m²); see the module docstring."""

    name: str
    seed: int
    origin_lat: float
    origin_lon: float
    duration_s: float
    dt_s: float
    users: int
    static_fraction: float
    update_interval_s: float
    mobility: Mapping[str, Any]
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    base_dir: Path = Path(".")

    def __post_init__(self) -> None:
        if self.users < 1 or self.duration_s <= 0 or self.dt_s <= 0:
            raise ValueError("need users >= 1, duration_s > 0, dt_s > 0")
        if not 0.0 <= self.static_fraction <= 1.0:
            raise ValueError("static_fraction must be in [0, 1]")
        if self.update_interval_s <= 0:
            raise ValueError("update_interval_s must be > 0")
        if self.mobility.get("model") not in _MODELS:
            raise ValueError(f"mobility.model must be one of {_MODELS}")

    def replace(self, **changes: Any) -> Scenario:
        """A copy with some fields changed (for ``--users`` and ``--seconds`` overrides)."""
        return dataclasses.replace(self, **changes)

    @property
    def projection(self) -> LocalProjection:
        """The local projection centred on the scenario origin."""
        return LocalProjection(self.origin_lat, self.origin_lon)

    def extent_m(self) -> tuple[float, float]:
        """Width and height (m) of the area where users live, centred on the origin."""
        m = self.mobility
        if m["model"] in ("manhattan", "sumo"):
            side = float(m.get("blocks", 20)) * float(m.get("block_m", 200.0))
            return side, side
        return float(m.get("width_m", 4000.0)), float(m.get("height_m", 4000.0))


@dataclass(frozen=True)
class BuiltScenario:
    """A scenario expanded: trajectories of every user, workload, projection, RNG for protocols."""

    scenario: Scenario
    trajectories: Trajectories
    workload: Workload
    projection: LocalProjection
    protocol_seed: int


def load_scenario(path_or_name: str | Path) -> Scenario:
    """Read a TOML scenario from a path or by name from :data:`SCENARIO_DIR`."""
    path = Path(path_or_name)
    if not path.exists() and (SCENARIO_DIR / f"{path_or_name}.toml").exists():
        path = SCENARIO_DIR / f"{path_or_name}.toml"
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    return scenario_from_mapping(raw, base_dir=path.parent, default_name=path.stem)


def scenario_from_mapping(
    raw: Mapping[str, Any], *, base_dir: Path = Path("."), default_name: str = "scenario"
) -> Scenario:
    """Build a :class:`Scenario` from a parsed TOML table; raises ``ValueError`` on bad keys."""
    known = {
        "name",
        "seed",
        "origin",
        "duration_s",
        "dt_s",
        "users",
        "static_fraction",
        "update_interval_s",
        "mobility",
        "workload",
        "description",
    }
    if extra := set(raw) - known:
        raise ValueError(f"unknown scenario key(s) {sorted(extra)}")
    origin = raw.get("origin", {"lat": 41.3874, "lon": 2.1686})
    return Scenario(
        name=str(raw.get("name", default_name)),
        seed=int(raw.get("seed", 0)),
        origin_lat=float(origin["lat"]),
        origin_lon=float(origin["lon"]),
        duration_s=float(raw.get("duration_s", 60.0)),
        dt_s=float(raw.get("dt_s", 1.0)),
        users=int(raw.get("users", 100)),
        static_fraction=float(raw.get("static_fraction", 0.0)),
        update_interval_s=float(raw.get("update_interval_s", 10.0)),
        mobility=dict(raw.get("mobility", {"model": "manhattan"})),
        workload=WorkloadConfig.from_mapping(raw.get("workload", {})),
        base_dir=base_dir,
    )


def _pair(v: Any, default: tuple[float, float]) -> tuple[float, float]:
    if v is None:
        return default
    a, b = v
    return float(a), float(b)


def _roaming(sc: Scenario, n: int, rng: np.random.Generator) -> Trajectories:
    m = sc.mobility
    model = m["model"]
    if model == "random_waypoint":
        w, h = sc.extent_m()
        return mobility.random_waypoint(
            n,
            duration_s=sc.duration_s,
            dt_s=sc.dt_s,
            width_m=w,
            height_m=h,
            rng=rng,
            speed_mps=_pair(m.get("speed_mps"), (0.5, 1.5)),
            pause_s=_pair(m.get("pause_s"), (0.0, 120.0)),
        )
    if model == "manhattan":
        return mobility.manhattan_grid(
            n,
            duration_s=sc.duration_s,
            dt_s=sc.dt_s,
            blocks=int(m.get("blocks", 20)),
            block_m=float(m.get("block_m", 200.0)),
            rng=rng,
            speed_mps=_pair(m.get("speed_mps"), (0.8, 1.6)),
            pause_s=_pair(m.get("pause_s"), (0.0, 300.0)),
            max_trip_blocks=int(m.get("max_trip_blocks", 8)),
        )
    if model == "sumo":
        from simulators.sumo import sumo_grid

        return sumo_grid(
            n,
            duration_s=sc.duration_s,
            dt_s=sc.dt_s,
            blocks=int(m.get("blocks", 10)),
            block_m=float(m.get("block_m", 200.0)),
            seed=int(rng.integers(0, 2**31 - 1)),
            vehicle=str(m.get("vehicle", "pedestrian-speed")),
        )
    path = Path(m["path"])
    if not path.is_absolute():
        path = sc.base_dir / path
    return mobility.load_trace(path, sc.projection, dt_s=sc.dt_s, duration_s=sc.duration_s)


def build(sc: Scenario) -> BuiltScenario:
    """Expand a scenario: same scenario (and seed), same result.

    For ``trace`` scenarios the number of roaming users is the trace's; ``users`` then counts
    the static users added on top only through ``static_fraction`` of the trace's users.
    """
    ss = np.random.SeedSequence(sc.seed)
    r_roam, r_static, r_work, r_proto = (np.random.default_rng(s) for s in ss.spawn(4))
    n_static = round(sc.users * sc.static_fraction)
    n_roam = sc.users - n_static
    parts: list[Trajectories] = []
    if n_roam > 0 or sc.mobility["model"] == "trace":
        parts.append(_roaming(sc, max(n_roam, 1), r_roam))
    if n_static > 0:
        t = parts[0].t_s if parts else mobility.time_grid(sc.duration_s, sc.dt_s)
        w, h = sc.extent_m()
        block = (
            sc.mobility.get("block_m") if sc.mobility["model"] in ("manhattan", "sumo") else None
        )
        parts.append(
            mobility.static_users(
                n_static,
                t_s=t,
                width_m=w,
                height_m=h,
                rng=r_static,
                block_m=None if block is None else float(block),
            )
        )
    traj = mobility.combine(*parts)
    workload = generate_workload(sc.workload, traj.n_users, sc.duration_s, r_work)
    log.debug(
        "scenario %s: %d users (%d static), %d queries",
        sc.name,
        traj.n_users,
        int(traj.static.sum()),
        len(workload.events),
    )
    return BuiltScenario(sc, traj, workload, sc.projection, int(r_proto.integers(0, 2**63 - 1)))
