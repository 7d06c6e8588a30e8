"""Moving-user state for the anonymizer: latest position and time per user, TTL expiry.

All coordinates are local metres (x east, y north); times are seconds on the caller's clock.

:class:`UserTable` keeps one slot per current user in flat numpy arrays, so that an update is a
dict lookup plus three array writes and a batch update is vectorised. Spatial structure is built
from a *snapshot* of the table (:mod:`locpriv.core.cloak.cloaker` re-partitions it once per
epoch). ``benchmarks/bench_index.py`` compares this design against incrementally maintained
indexes (``benchmarks/spatial_indexes.py``); the numbers and the choice are in
docs/algorithms.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["UserTable"]

log = logging.getLogger(__name__)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class UserTable:
    """Latest position ``(x, y)`` in metres and update time ``t`` in seconds per user id.

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
        self.alive: NDArray[np.bool_] = np.zeros(cap, dtype=bool)
        self.gen: I64 = np.zeros(cap, dtype=np.int64)
        """Incremented each time a slot is (re)assigned, to tell reused slots apart."""
        self._free: list[int] = list(range(cap - 1, -1, -1))

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
        return slot

    def update(self, user_id: str, x_m: float, y_m: float, now: float) -> int:
        """Record the latest position of ``user_id``; returns its slot."""
        slot = self._slot(user_id)
        self.x[slot] = x_m
        self.y[slot] = y_m
        self.t[slot] = now
        return slot

    def update_many(self, user_ids: Sequence[str], xy_m: F64, now: float) -> I64:
        """Vectorised :meth:`update` of ``len(user_ids)`` users; ``xy_m`` has shape (n, 2).

        When an id occurs twice, the last row wins. Returns the slots.
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
        self.x[slots] = xy[:, 0]
        self.y[slots] = xy[:, 1]
        self.t[slots] = now
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
        return len(stale)

    def oldest_update(self) -> float | None:
        """Time of the least recent update among current users, or None when empty."""
        if not self.ids:
            return None
        return float(self.t[self.alive].min())

    def active_slots(self) -> I64:
        """Slots of current users in increasing slot order."""
        return np.flatnonzero(self.alive).astype(np.int64)
