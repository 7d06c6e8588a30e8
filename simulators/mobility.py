"""Mobility models: timestamped positions of N users in local metres (pure, numpy, seeded).

Every model returns a :class:`Trajectories`: positions ``x_m, y_m`` of shape ``(N, T)`` in local
metres (east, north) around the scenario origin, sampled at times ``t_s`` (seconds from the start
of the scenario, shape ``(T,)``, strictly increasing). Between samples positions are linearly
interpolated; outside ``[t_s[0], t_s[-1]]`` they are held. :meth:`Trajectories.lonlat_at` maps
positions to WGS84 degrees through a :class:`~locpriv.core.geo.LocalProjection` for the wire.

Models (all take a ``numpy.random.Generator``; same generator state, same output):

* :func:`random_waypoint` -- uniform destinations in a rectangle, uniform speeds, pauses. A
  warm-up period removes the well-known transient of the model (users starting at uniform
  positions and all paused); ``speed_min_mps > 0`` avoids its speed decay.
* :func:`manhattan_grid` -- movement along the streets of a built-in square grid (block length
  ``block_m``): L-shaped shortest routes between random intersections, pauses at destinations.
* :func:`simulators.sumo.sumo_grid` -- SUMO vehicles on a generated road network (FCD output).
* :func:`load_trace` -- replay of a CSV trace ``user_id,t,lat,lon`` (see its docstring).
* :func:`static_users` and :func:`combine` -- a mix of static and roaming users.

Random movement alone misleads privacy evaluations (users spread uniformly, so cloaks are
smaller and adversaries weaker than on real streets): prefer the road-network models.
"""

from __future__ import annotations

import csv
import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from locpriv.core.geo import LocalProjection

log = logging.getLogger(__name__)

F64 = NDArray[np.float64]

__all__ = [
    "Trajectories",
    "combine",
    "load_trace",
    "manhattan_grid",
    "random_waypoint",
    "static_users",
    "time_grid",
    "write_trace",
]


@dataclass(frozen=True, eq=False)
class Trajectories:
    """Positions of ``N`` users sampled at ``T`` instants.

    Invariants: ``x_m.shape == y_m.shape == (len(user_ids), len(t_s))``, ``t_s`` strictly
    increasing (seconds), coordinates in local metres, ``static[i]`` true when user ``i`` never
    moves.
    """

    user_ids: tuple[str, ...]
    t_s: F64
    x_m: F64
    y_m: F64
    static: NDArray[np.bool_]

    def __post_init__(self) -> None:
        n, t = len(self.user_ids), len(self.t_s)
        if self.x_m.shape != (n, t) or self.y_m.shape != (n, t):
            raise ValueError(f"positions must have shape {(n, t)}, got {self.x_m.shape}")
        if t == 0 or (t > 1 and not np.all(np.diff(self.t_s) > 0)):
            raise ValueError("t_s must be non-empty and strictly increasing")
        if self.static.shape != (n,):
            raise ValueError("static must have one flag per user")
        if len(set(self.user_ids)) != n:
            raise ValueError("user ids must be unique")

    @property
    def n_users(self) -> int:
        """Number of users ``N``."""
        return len(self.user_ids)

    @property
    def duration_s(self) -> float:
        """Time span covered by the samples, seconds."""
        return float(self.t_s[-1] - self.t_s[0])

    def at(self, t: float) -> tuple[F64, F64]:
        """Every user's position at time ``t`` (s): ``(x_m, y_m)`` arrays of shape ``(N,)``."""
        ts = self.t_s
        if t <= ts[0]:
            return self.x_m[:, 0].copy(), self.y_m[:, 0].copy()
        if t >= ts[-1]:
            return self.x_m[:, -1].copy(), self.y_m[:, -1].copy()
        j = int(np.searchsorted(ts, t, side="right"))
        w = (t - ts[j - 1]) / (ts[j] - ts[j - 1])
        x = self.x_m[:, j - 1] * (1.0 - w) + self.x_m[:, j] * w
        y = self.y_m[:, j - 1] * (1.0 - w) + self.y_m[:, j] * w
        return x, y

    def user_at(self, i: int, t: float) -> tuple[float, float]:
        """User ``i``'s position at time ``t`` (s), metres."""
        return (
            float(np.interp(t, self.t_s, self.x_m[i])),
            float(np.interp(t, self.t_s, self.y_m[i])),
        )

    def lonlat_at(self, t: float, projection: LocalProjection) -> tuple[F64, F64]:
        """Every user's position at ``t`` in WGS84 degrees ``(lon, lat)``."""
        x, y = self.at(t)
        return projection.to_lonlat(x, y)

    def speeds_mps(self) -> F64:
        """Mean speed per user over the trace, metres per second."""
        if len(self.t_s) < 2:
            return np.zeros(self.n_users)
        d = np.hypot(np.diff(self.x_m, axis=1), np.diff(self.y_m, axis=1)).sum(axis=1)
        return np.asarray(d / self.duration_s, dtype=np.float64)

    def bounds_m(self) -> tuple[float, float, float, float]:
        """``(xmin, ymin, xmax, ymax)`` over every sample, metres."""
        return (
            float(self.x_m.min()),
            float(self.y_m.min()),
            float(self.x_m.max()),
            float(self.y_m.max()),
        )


def time_grid(duration_s: float, dt_s: float) -> F64:
    """Sample instants ``0, dt, 2 dt, ..., duration_s`` (s); the last is exactly ``duration_s``."""
    if duration_s <= 0 or dt_s <= 0:
        raise ValueError("duration_s and dt_s must be positive")
    n = math.ceil(duration_s / dt_s - 1e-9)
    t = np.arange(n + 1, dtype=np.float64) * dt_s
    t[-1] = duration_s
    return t


def _ids(n: int, prefix: str, start: int = 0) -> tuple[str, ...]:
    return tuple(f"{prefix}{i:06d}" for i in range(start, start + n))


def _waypoint_path(
    rng: np.random.Generator,
    *,
    start: tuple[float, float],
    t_begin: float,
    t_end: float,
    pick_route: _RoutePicker,
    speed: tuple[float, float],
    pause: tuple[float, float],
) -> tuple[list[float], list[float], list[float]]:
    """Breakpoints ``(t, x, y)`` of one user moving along routes from ``pick_route``."""
    ts, xs, ys = [t_begin], [start[0]], [start[1]]
    t, pos = t_begin, start
    while t < t_end:
        route = pick_route(rng, pos)
        v = rng.uniform(speed[0], speed[1])
        for p in route:
            d = math.hypot(p[0] - pos[0], p[1] - pos[1])
            t += d / v
            ts.append(t)
            xs.append(p[0])
            ys.append(p[1])
            pos = p
        hold = rng.uniform(pause[0], pause[1])
        if hold > 0:
            t += hold
            ts.append(t)
            xs.append(pos[0])
            ys.append(pos[1])
    return ts, xs, ys


class _RoutePicker:
    """Chooses the next route (a list of corner points, metres) from a position."""

    def __call__(
        self, rng: np.random.Generator, pos: tuple[float, float]
    ) -> list[tuple[float, float]]:
        raise NotImplementedError


class _UniformDestination(_RoutePicker):
    def __init__(self, width_m: float, height_m: float) -> None:
        self.hw, self.hh = width_m / 2, height_m / 2

    def __call__(
        self, rng: np.random.Generator, pos: tuple[float, float]
    ) -> list[tuple[float, float]]:
        return [(float(rng.uniform(-self.hw, self.hw)), float(rng.uniform(-self.hh, self.hh)))]


class _GridRoute(_RoutePicker):
    """L-shaped route along grid streets to a random intersection within ``max_blocks``."""

    def __init__(self, blocks: int, block_m: float, max_blocks: int) -> None:
        self.blocks, self.block_m, self.max_blocks = blocks, block_m, max_blocks
        self.half = blocks * block_m / 2

    def snap(self, v: float) -> int:
        return round((v + self.half) / self.block_m)

    def __call__(
        self, rng: np.random.Generator, pos: tuple[float, float]
    ) -> list[tuple[float, float]]:
        # Waypoints are always intersections, so the user stands on two streets.
        i, j = self.snap(pos[0]), self.snap(pos[1])
        lo_i, hi_i = max(0, i - self.max_blocks), min(self.blocks, i + self.max_blocks)
        lo_j, hi_j = max(0, j - self.max_blocks), min(self.blocks, j + self.max_blocks)
        di = int(rng.integers(lo_i, hi_i + 1))
        dj = int(rng.integers(lo_j, hi_j + 1))
        dest = (di * self.block_m - self.half, dj * self.block_m - self.half)
        corner = (dest[0], pos[1]) if rng.random() < 0.5 else (pos[0], dest[1])
        return [corner, dest]


def _sample_paths(
    rng: np.random.Generator,
    *,
    starts: Sequence[tuple[float, float]],
    t: F64,
    warmup_s: float,
    picker: _RoutePicker,
    speed: tuple[float, float],
    pause: tuple[float, float],
) -> tuple[F64, F64]:
    n = len(starts)
    x = np.empty((n, len(t)))
    y = np.empty((n, len(t)))
    for i, s in enumerate(starts):
        ts, xs, ys = _waypoint_path(
            rng,
            start=s,
            t_begin=-warmup_s,
            t_end=float(t[-1]),
            pick_route=picker,
            speed=speed,
            pause=pause,
        )
        x[i] = np.interp(t, ts, xs)
        y[i] = np.interp(t, ts, ys)
    return x, y


def _check_motion(speed: tuple[float, float], pause: tuple[float, float]) -> None:
    if not 0 < speed[0] <= speed[1]:
        raise ValueError("need 0 < speed_min_mps <= speed_max_mps")
    if not 0 <= pause[0] <= pause[1]:
        raise ValueError("need 0 <= pause_min_s <= pause_max_s")


def random_waypoint(
    n: int,
    *,
    duration_s: float,
    dt_s: float,
    width_m: float,
    height_m: float,
    rng: np.random.Generator,
    speed_mps: tuple[float, float] = (0.5, 1.5),
    pause_s: tuple[float, float] = (0.0, 120.0),
    warmup_s: float = 1800.0,
    id_prefix: str = "rwp",
) -> Trajectories:
    """Random waypoint in the rectangle ``[-w/2, w/2] x [-h/2, h/2]`` (metres).

    Each leg: a uniform destination, a uniform speed in ``speed_mps`` (m/s), then a uniform pause
    in ``pause_s`` (s). Movement starts ``warmup_s`` seconds before ``t = 0``.
    """
    _check_motion(speed_mps, pause_s)
    t = time_grid(duration_s, dt_s)
    hw, hh = width_m / 2, height_m / 2
    starts = [(float(a), float(b)) for a, b in rng.uniform((-hw, -hh), (hw, hh), size=(n, 2))]
    picker = _UniformDestination(width_m, height_m)
    x, y = _sample_paths(
        rng, starts=starts, t=t, warmup_s=warmup_s, picker=picker, speed=speed_mps, pause=pause_s
    )
    return Trajectories(_ids(n, id_prefix), t, x, y, np.zeros(n, dtype=bool))


def manhattan_grid(
    n: int,
    *,
    duration_s: float,
    dt_s: float,
    blocks: int,
    block_m: float,
    rng: np.random.Generator,
    speed_mps: tuple[float, float] = (0.8, 1.6),
    pause_s: tuple[float, float] = (0.0, 300.0),
    max_trip_blocks: int = 8,
    warmup_s: float = 1800.0,
    id_prefix: str = "grid",
) -> Trajectories:
    """Movement on a built-in Manhattan grid of ``blocks x blocks`` blocks of ``block_m`` metres.

    Streets run at ``x, y = -half + i * block_m`` (``half = blocks * block_m / 2``); every sample
    lies on a street. Each trip goes to a random intersection at most ``max_trip_blocks`` away per
    axis along an L-shaped shortest path at a uniform speed, then pauses.
    """
    _check_motion(speed_mps, pause_s)
    if blocks < 1 or block_m <= 0 or max_trip_blocks < 1:
        raise ValueError("need blocks >= 1, block_m > 0, max_trip_blocks >= 1")
    t = time_grid(duration_s, dt_s)
    picker = _GridRoute(blocks, block_m, max_trip_blocks)
    ij = rng.integers(0, blocks + 1, size=(n, 2))
    starts = [(float(a * block_m - picker.half), float(b * block_m - picker.half)) for a, b in ij]
    x, y = _sample_paths(
        rng, starts=starts, t=t, warmup_s=warmup_s, picker=picker, speed=speed_mps, pause=pause_s
    )
    return Trajectories(_ids(n, id_prefix), t, x, y, np.zeros(n, dtype=bool))


def static_users(
    n: int,
    *,
    t_s: F64,
    width_m: float,
    height_m: float,
    rng: np.random.Generator,
    block_m: float | None = None,
    id_prefix: str = "static",
) -> Trajectories:
    """``n`` users who never move, uniform in the rectangle (metres).

    With ``block_m`` they stand on the streets of a grid of that block length (one coordinate
    snapped to a street), as people in buildings along streets do.
    """
    hw, hh = width_m / 2, height_m / 2
    pos = rng.uniform((-hw, -hh), (hw, hh), size=(n, 2))
    if block_m is not None and n:
        axis = rng.integers(0, 2, size=n)
        half = (hw, hh)
        for a in (0, 1):
            sel = axis == a
            pos[sel, a] = np.round((pos[sel, a] + half[a]) / block_m) * block_m - half[a]
    x = np.repeat(pos[:, :1], len(t_s), axis=1)
    y = np.repeat(pos[:, 1:], len(t_s), axis=1)
    return Trajectories(_ids(n, id_prefix), np.asarray(t_s, float), x, y, np.ones(n, dtype=bool))


def combine(*parts: Trajectories) -> Trajectories:
    """Users of several trajectory sets on the same time grid, in order."""
    if not parts:
        raise ValueError("nothing to combine")
    t = parts[0].t_s
    for p in parts[1:]:
        if p.t_s.shape != t.shape or not np.allclose(p.t_s, t):
            raise ValueError("trajectories must share their time grid")
    return Trajectories(
        tuple(u for p in parts for u in p.user_ids),
        t,
        np.concatenate([p.x_m for p in parts]),
        np.concatenate([p.y_m for p in parts]),
        np.concatenate([p.static for p in parts]),
    )


def load_trace(
    path: str | Path,
    projection: LocalProjection,
    *,
    dt_s: float,
    duration_s: float | None = None,
) -> Trajectories:
    """Replay a CSV trace resampled every ``dt_s`` seconds.

    Format: a header ``user_id,t,lat,lon`` then one row per fix; ``t`` in seconds (Unix time or
    relative), ``lat``/``lon`` in WGS84 degrees; rows in any order. Times are shifted so that the
    earliest fix is ``t = 0``. A user is held at her first fix before it and at her last fix after
    it; a user with one fix is static. ``duration_s`` defaults to the trace's span.
    """
    rows: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"user_id", "t", "lat", "lon"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"trace {path} lacks column(s) {sorted(missing)}")
        for row in reader:
            rows[row["user_id"]].append((float(row["t"]), float(row["lat"]), float(row["lon"])))
    if not rows:
        raise ValueError(f"trace {path} has no rows")
    t0 = min(r[0] for fixes in rows.values() for r in fixes)
    t_last = max(r[0] for fixes in rows.values() for r in fixes)
    span = duration_s if duration_s is not None else max(t_last - t0, dt_s)
    t = time_grid(span, dt_s)
    ids = tuple(sorted(rows))
    x = np.empty((len(ids), len(t)))
    y = np.empty((len(ids), len(t)))
    static = np.zeros(len(ids), dtype=bool)
    for i, uid in enumerate(ids):
        fixes = np.array(sorted(rows[uid]), dtype=np.float64)
        fx, fy = projection.to_xy(fixes[:, 2], fixes[:, 1])
        ft = fixes[:, 0] - t0
        x[i] = np.interp(t, ft, fx)
        y[i] = np.interp(t, ft, fy)
        static[i] = bool(np.ptp(fx) == 0 and np.ptp(fy) == 0)
    log.debug("trace %s: %d users, %d samples", path, len(ids), len(t))
    return Trajectories(ids, t, x, y, static)


def write_trace(
    traj: Trajectories, projection: LocalProjection, path: str | Path, *, t0_s: float = 0.0
) -> None:
    """Write trajectories as a CSV trace (the format :func:`load_trace` reads), times + ``t0_s``."""
    lon, lat = projection.to_lonlat(traj.x_m, traj.y_m)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["user_id", "t", "lat", "lon"])
        for i, uid in enumerate(traj.user_ids):
            for j, tj in enumerate(traj.t_s):
                w.writerow([uid, f"{tj + t0_s:.3f}", f"{lat[i, j]:.8f}", f"{lon[i, j]:.8f}"])
