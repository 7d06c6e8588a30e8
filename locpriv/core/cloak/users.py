"""Moving-user state for the anonymizer: latest position and time per user, TTL expiry.

All coordinates are local metres (x east, y north); times are seconds on the caller's clock.

:class:`UserTable` keeps one slot per current user in flat numpy arrays; an update is a dict
lookup plus one compiled loop (:func:`locpriv.core.cloak.motion.record`), for one report or a
batch. Spatial structure is built
from a *snapshot* of the table (:mod:`locpriv.core.cloak.cloaker` re-partitions it once per
epoch). ``benchmarks/bench_index.py`` compares this design against incrementally maintained
indexes (``benchmarks/spatial_indexes.py``); the numbers and the choice are in
docs/algorithms.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from locpriv.core.cloak.motion import (
    FIX_SCATTER_M,
    SPEED_BASELINE_S,
    SPEED_MEMORY_S,
    STILL_RADIUS_M,
    VELOCITY_MEMORY_S,
    record,
)

__all__ = [
    "FIX_SCATTER_M",
    "SPEED_BASELINE_S",
    "SPEED_MEMORY_S",
    "STILL_RADIUS_M",
    "VELOCITY_MEMORY_S",
    "UserTable",
]

log = logging.getLogger(__name__)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class UserTable:
    """Latest position ``(x, y)`` in metres and update time ``t`` in seconds per user id, and
    what the anonymizer knows of how each user moves (for session cloaks, see
    :mod:`locpriv.core.cloak.history`): the report before the latest, ``(px, py, pt)``
    (``pt = -inf`` until there is one), the point her velocity is read from, ``(ox, oy, ot)``
    (a running average of her earlier reports, :data:`VELOCITY_MEMORY_S`; ``ot = -inf`` until
    there is one), ``still_t``, since when her reports have stayed
    within :data:`STILL_RADIUS_M` of the point ``(sx, sy)`` where she settled, and ``vmax``,
    the fastest she has been seen to move (m/s).

    Invariants: ``ids[uid] == slot`` iff ``alive[slot]``; freed slots are reused; arrays grow by
    doubling, so memory is O(peak number of users).
    """

    def __init__(self, capacity: int = 1024) -> None:
        cap = max(16, capacity)
        self.ids: dict[str, int] = {}
        self.slot_ids: list[str | None] = [None] * cap
        self.x: F64 = np.zeros(cap)
        self.y: F64 = np.zeros(cap)
        self.t: F64 = np.full(cap, -math.inf)
        self.px: F64 = np.zeros(cap)
        self.py: F64 = np.zeros(cap)
        self.pt: F64 = np.full(cap, -math.inf)
        self.ox: F64 = np.zeros(cap)
        self.oy: F64 = np.zeros(cap)
        self.ot: F64 = np.full(cap, -math.inf)
        self.sx: F64 = np.zeros(cap)
        self.sy: F64 = np.zeros(cap)
        self.still_t: F64 = np.zeros(cap)
        self.vmax: F64 = np.zeros(cap)
        """The fastest she has been seen to move, m/s: the chords between her reports at
        least :data:`SPEED_BASELINE_S` apart, less their scatter, each kept and halved every
        :data:`SPEED_MEMORY_S` seconds she has moved since (not while she stays put); 0
        until a chord is long enough."""
        self.error_m: F64 = np.full(cap, np.nan)
        """How far her latest fix may lie from her device, metres, as its report said (its
        accuracy); nan where it said nothing."""
        self.ax: F64 = np.zeros(cap)
        self.ay: F64 = np.zeros(cap)
        self.at: F64 = np.full(cap, -math.inf)
        """The report the next chord starts from (``at = -inf`` until there is one)."""
        self.alive: NDArray[np.bool_] = np.zeros(cap, dtype=bool)
        self.gen: I64 = np.zeros(cap, dtype=np.int64)
        """Incremented each time a slot is (re)assigned, to tell reused slots apart."""
        self._free: list[int] = list(range(cap - 1, -1, -1))
        self._known_speeds: dict[str, tuple[float, float]] = {}
        """Speeds (m/s) a previous process saw, and since when (s) they wait here: given to
        each user at her first report, forgotten by :meth:`expire` like a silent user."""
        self._seeded: list[int] = []
        # load (or compile, about a second) the kernel now, not at the first report
        self._record(np.empty(0, dtype=np.int64), np.empty(0), np.empty(0), np.empty(0), 0.0)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, user_id: object) -> bool:
        return user_id in self.ids

    def _grow(self) -> None:
        old = len(self.x)
        new = old * 2
        self.x = np.concatenate([self.x, np.zeros(old)])
        self.y = np.concatenate([self.y, np.zeros(old)])
        self.t = np.concatenate([self.t, np.full(old, -math.inf)])
        self.px = np.concatenate([self.px, np.zeros(old)])
        self.py = np.concatenate([self.py, np.zeros(old)])
        self.pt = np.concatenate([self.pt, np.full(old, -math.inf)])
        self.ox = np.concatenate([self.ox, np.zeros(old)])
        self.oy = np.concatenate([self.oy, np.zeros(old)])
        self.ot = np.concatenate([self.ot, np.full(old, -math.inf)])
        self.sx = np.concatenate([self.sx, np.zeros(old)])
        self.sy = np.concatenate([self.sy, np.zeros(old)])
        self.still_t = np.concatenate([self.still_t, np.zeros(old)])
        self.vmax = np.concatenate([self.vmax, np.zeros(old)])
        self.error_m = np.concatenate([self.error_m, np.full(old, np.nan)])
        self.ax = np.concatenate([self.ax, np.zeros(old)])
        self.ay = np.concatenate([self.ay, np.zeros(old)])
        self.at = np.concatenate([self.at, np.full(old, -math.inf)])
        self.alive = np.concatenate([self.alive, np.zeros(old, dtype=bool)])
        self.gen = np.concatenate([self.gen, np.zeros(old, dtype=np.int64)])
        self.slot_ids.extend([None] * old)
        self._free.extend(range(new - 1, old - 1, -1))

    def _slot(self, user_id: str) -> int:
        slot = self.ids.get(user_id)
        if slot is None:
            if not self._free:
                self._grow()
            slot = self._free.pop()
            self.ids[user_id] = slot
            self.slot_ids[slot] = user_id
            self.alive[slot] = True
            self.gen[slot] += 1
            if user_id in self._known_speeds:
                self._seeded.append(slot)
        return slot

    def know_speeds(self, speeds: Mapping[str, float], now: float) -> None:
        """Speeds (m/s) a previous process saw users move at (:meth:`fast_users`): each user
        starts from hers at her first report after ``now`` (s), instead of from 0 (a restarted
        anonymizer would otherwise take a driver for a pedestrian until it has timed a chord
        of hers). One that no report claims within the TTL is forgotten (:meth:`expire`)."""
        for uid, v in speeds.items():
            if math.isfinite(v) and v > 0:
                old = self._known_speeds.get(uid, (0.0, now))[0]
                self._known_speeds[uid] = (max(float(v), old), now)

    def fast_users(self, above_m_s: float) -> dict[str, float]:
        """Users seen moving faster than ``above_m_s``, and their ``vmax`` (m/s); with the
        speeds given by :meth:`know_speeds` not yet claimed by a first report."""
        out = {u: v for u, (v, _) in self._known_speeds.items() if v > above_m_s}
        for slot in np.flatnonzero(self.alive & (self.vmax > above_m_s)).tolist():
            uid = self.slot_ids[slot]
            if uid is not None:  # vectorised: this runs before every answer that is kept
                v = float(self.vmax[slot])
                out[uid] = max(v, out.get(uid, 0.0))
        return out

    def update(
        self, user_id: str, x_m: float, y_m: float, now: float, error_m: float | None = None
    ) -> int:
        """Record the latest position of ``user_id`` (``error_m``: how far the fix may lie
        from her device, metres; None: not said); returns its slot."""
        slot = self._slot(user_id)
        err = np.array([np.nan if error_m is None else error_m], dtype=np.float64)
        self._record(np.array([slot], dtype=np.int64), np.array([x_m]), np.array([y_m]), err, now)
        self.error_m[slot] = err[0]
        return slot

    def _record(self, slots: I64, xs: F64, ys: F64, errs: F64, now: float) -> None:
        record(
            slots, xs, ys, errs, float(now), self.x, self.y, self.t, self.px, self.py, self.pt,
            self.ox, self.oy, self.ot, self.ax, self.ay, self.at, self.vmax, self.sx, self.sy,
            self.still_t,
        )  # fmt: skip
        if self._seeded:  # first reports of users whose speed a previous process saw
            for slot in self._seeded:
                uid = self.slot_ids[slot]
                if uid is not None:
                    known, _ = self._known_speeds.pop(uid, (0.0, now))
                    self.vmax[slot] = max(float(self.vmax[slot]), known)
            self._seeded.clear()

    def update_many(
        self, user_ids: Sequence[str], xy_m: F64, now: float, error_m: F64 | None = None
    ) -> I64:
        """Vectorised :meth:`update` of ``len(user_ids)`` users; ``xy_m`` has shape (n, 2),
        ``error_m`` (n,) (nan or None: not said).

        Rows apply in order: an id given twice takes both reports, the last one latest.
        Returns the slots.
        """
        xy = np.asarray(xy_m, dtype=np.float64)
        if xy.shape != (len(user_ids), 2):
            raise ValueError(f"xy_m must have shape ({len(user_ids)}, 2), got {xy.shape}")
        get = self.ids.get
        slots = np.fromiter(
            (s if (s := get(u)) is not None else self._slot(u) for u in user_ids),
            dtype=np.int64,
            count=len(user_ids),
        )
        errs = np.full(len(slots), np.nan)
        if error_m is not None:
            errs[:] = np.asarray(error_m, dtype=np.float64)
        self._record(
            slots, np.ascontiguousarray(xy[:, 0]), np.ascontiguousarray(xy[:, 1]), errs, now
        )
        self.error_m[slots] = errs
        return slots

    def remove(self, user_id: str) -> bool:
        """Forget ``user_id``; returns whether it was known."""
        slot = self.ids.pop(user_id, None)
        if slot is None:
            return False
        self._release(slot)
        return True

    def _release(self, slot: int) -> None:
        self.alive[slot] = False
        self.slot_ids[slot] = None
        self.error_m[slot] = np.nan
        self.t[slot] = -math.inf
        self._free.append(slot)

    def expire(self, now: float, ttl_s: float) -> int:
        """Forget users whose last update is older than ``now - ttl_s``; returns how many."""
        stale = np.flatnonzero(self.alive & (self.t < now - ttl_s))
        for slot in stale.tolist():
            uid = self.slot_ids[slot]
            if uid is not None:
                del self.ids[uid]
            self._release(slot)
        if len(stale):
            log.debug("expired %d stale users", len(stale))
        if self._known_speeds:  # carried speeds nobody claimed within the TTL
            gone = [u for u, (_, since) in self._known_speeds.items() if since < now - ttl_s]
            for uid in gone:
                del self._known_speeds[uid]
        return len(stale)

    def oldest_update(self) -> float | None:
        """Time of the least recent update among current users, or None when empty."""
        if not self.ids:
            return None
        return float(self.t[self.alive].min())

    def active_slots(self) -> I64:
        """Slots of current users in increasing slot order."""
        return np.flatnonzero(self.alive).astype(np.int64)
