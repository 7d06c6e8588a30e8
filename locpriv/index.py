"""Moving-user state for the anonymizer: latest position and time per user, TTL expiry, indexes.

All coordinates are local metres (x east, y north); times are seconds on the caller's clock.

:class:`UserTable` keeps one slot per current user in flat numpy arrays, so that an update is a
dict lookup plus three array writes and a batch update is vectorised. Spatial structure is built
from a *snapshot* of the table (see :mod:`locpriv.cloak`, which re-partitions the snapshot once per
epoch). ``benchmarks/bench_index.py`` compares this "arrays + per-epoch rebuild" design against
incrementally maintained indexes (:class:`RtreeIndex`, :class:`GridIndex`) and a
:class:`KDTreeIndex` rebuilt on demand; the numbers and the choice are in docs/algorithms.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.spatial import cKDTree

__all__ = [
    "GridIndex",
    "KDTreeIndex",
    "RtreeIndex",
    "SpatialIndex",
    "UserTable",
]

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


class SpatialIndex(Protocol):
    """A moving-point index as measured by ``benchmarks/bench_index.py`` (keys are int slots)."""

    def move(self, key: int, x: float, y: float) -> None: ...

    def delete(self, key: int) -> None: ...

    def nearest(self, x: float, y: float, k: int) -> list[int]: ...

    def count_in(self, xmin: float, ymin: float, xmax: float, ymax: float) -> int: ...


class RtreeIndex:
    """Incremental R-tree (libspatialindex via ``rtree``): a move is a delete plus an insert.

    Uses the quadratic split with fill factor 0.4: with moving points it is ~20x faster per
    move than the default R* variant, whose forced reinsertion makes deletes cost ~0.5 ms.
    """

    def __init__(self) -> None:
        from rtree import index as rindex

        props = rindex.Property()
        props.variant = rindex.RT_Quadratic
        props.fill_factor = 0.4
        self._idx = rindex.Index(properties=props)
        self._pos: dict[int, tuple[float, float]] = {}

    def move(self, key: int, x: float, y: float) -> None:
        old = self._pos.get(key)
        if old is not None:
            self._idx.delete(key, (old[0], old[1], old[0], old[1]))
        self._idx.insert(key, (x, y, x, y))
        self._pos[key] = (x, y)

    def delete(self, key: int) -> None:
        old = self._pos.pop(key, None)
        if old is not None:
            self._idx.delete(key, (old[0], old[1], old[0], old[1]))

    def nearest(self, x: float, y: float, k: int) -> list[int]:
        return [int(i) for i in self._idx.nearest((x, y, x, y), k)][:k]

    def count_in(self, xmin: float, ymin: float, xmax: float, ymax: float) -> int:
        return int(self._idx.count((xmin, ymin, xmax, ymax)))


class GridIndex:
    """Uniform grid of ``cell_m``-metre buckets (dict of sets); O(1) moves, ring-search k-NN."""

    def __init__(self, cell_m: float) -> None:
        if cell_m <= 0:
            raise ValueError("cell_m must be positive")
        self.cell_m = cell_m
        self._cells: dict[tuple[int, int], set[int]] = {}
        self._pos: dict[int, tuple[float, float, tuple[int, int]]] = {}

    def _cell(self, x: float, y: float) -> tuple[int, int]:
        return (math.floor(x / self.cell_m), math.floor(y / self.cell_m))

    def move(self, key: int, x: float, y: float) -> None:
        c = self._cell(x, y)
        old = self._pos.get(key)
        if old is not None and old[2] != c:
            bucket = self._cells[old[2]]
            bucket.discard(key)
            if not bucket:
                del self._cells[old[2]]
        if old is None or old[2] != c:
            self._cells.setdefault(c, set()).add(key)
        self._pos[key] = (x, y, c)

    def delete(self, key: int) -> None:
        old = self._pos.pop(key, None)
        if old is not None:
            bucket = self._cells[old[2]]
            bucket.discard(key)
            if not bucket:
                del self._cells[old[2]]

    def _ring(self, cx: int, cy: int, r: int) -> Iterable[tuple[int, int]]:
        if r == 0:
            yield (cx, cy)
            return
        for i in range(-r, r + 1):
            yield (cx + i, cy - r)
            yield (cx + i, cy + r)
        for j in range(-r + 1, r):
            yield (cx - r, cy + j)
            yield (cx + r, cy + j)

    def nearest(self, x: float, y: float, k: int) -> list[int]:
        if not self._pos:
            return []
        k = min(k, len(self._pos))
        cx, cy = self._cell(x, y)
        found: list[tuple[float, int]] = []
        r = 0
        # After scanning rings 0..r every point within distance r*cell_m has been seen.
        while True:
            for c in self._ring(cx, cy, r):
                for key in self._cells.get(c, ()):
                    px, py, _ = self._pos[key]
                    found.append(((px - x) ** 2 + (py - y) ** 2, key))
            if len(found) >= k:
                found.sort()
                if found[k - 1][0] <= (r * self.cell_m) ** 2:
                    return [key for _, key in found[:k]]
            r += 1

    def count_in(self, xmin: float, ymin: float, xmax: float, ymax: float) -> int:
        c0 = self._cell(xmin, ymin)
        c1 = self._cell(xmax, ymax)
        n = 0
        for i in range(c0[0], c1[0] + 1):
            for j in range(c0[1], c1[1] + 1):
                for key in self._cells.get((i, j), ()):
                    px, py, _ = self._pos[key]
                    n += xmin <= px <= xmax and ymin <= py <= ymax
        return n


class KDTreeIndex:
    """``scipy.spatial.cKDTree`` over a :class:`UserTable`, rebuilt when older than ``max_age``.

    ``max_age=0`` rebuilds on every query after a change (exact); a positive ``max_age``
    (seconds, caller's clock via :meth:`tick`) answers from the last snapshot, which is the
    epoch model used by the cloaker.
    """

    def __init__(self, table: UserTable, max_age: float = 0.0) -> None:
        self.table = table
        self.max_age = max_age
        self._tree: cKDTree | None = None
        self._slots: I64 = np.zeros(0, dtype=np.int64)
        self._built_at = -math.inf
        self._now = 0.0
        self._dirty = True

    def tick(self, now: float) -> None:
        """Advance the index's notion of time (seconds)."""
        self._now = now

    def move(self, key: int, x: float, y: float) -> None:
        # positions live in the table; the caller wrote them already
        self._dirty = True

    def delete(self, key: int) -> None:
        self._dirty = True

    def _ensure(self) -> cKDTree:
        stale = self._now - self._built_at >= self.max_age if self.max_age > 0 else self._dirty
        if self._tree is None or stale:
            self._slots = self.table.active_slots()
            pts = np.column_stack([self.table.x[self._slots], self.table.y[self._slots]])
            self._tree = cKDTree(pts)
            self._built_at = self._now
            self._dirty = False
        return self._tree

    def nearest(self, x: float, y: float, k: int) -> list[int]:
        tree = self._ensure()
        k = min(k, len(self._slots))
        if k == 0:
            return []
        _, idx = tree.query((x, y), k=k)
        return [int(s) for s in self._slots[np.atleast_1d(idx)]]

    def count_in(self, xmin: float, ymin: float, xmax: float, ymax: float) -> int:
        tree = self._ensure()
        cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
        r = max(xmax - xmin, ymax - ymin) / 2
        idx = tree.query_ball_point((cx, cy), r, p=math.inf)
        s = self._slots[np.asarray(idx, dtype=np.int64)]
        xs, ys = self.table.x[s], self.table.y[s]
        return int(np.count_nonzero((xs >= xmin) & (xs <= xmax) & (ys >= ymin) & (ys <= ymax)))
