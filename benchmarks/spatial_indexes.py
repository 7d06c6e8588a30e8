"""Moving-point indexes measured against the cloaker's arrays by ``bench_index.py`` (not shipped).

Each keeps a :class:`locpriv.core.cloak.users.UserTable` in step and adds a spatial structure:
an incremental R-tree, a uniform grid, or a k-d tree rebuilt on demand. They answer k-nearest
and box-count queries; ``bench_index.py`` checks every answer against brute force before
timing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.spatial import cKDTree

from locpriv.core.cloak.users import UserTable

__all__ = ["GridIndex", "KDTreeIndex", "RtreeIndex", "SpatialIndex", "verify"]

log = logging.getLogger(__name__)

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


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


def verify(seed: int = 3) -> None:
    """Check every index against brute force after random moves and deletions (raises
    AssertionError); ``bench_index.py`` runs it before timing anything."""
    for kind in ("rtree", "grid", "kdtree"):
        rng = np.random.default_rng(seed)
        tab = UserTable()
        idx: SpatialIndex = (
            RtreeIndex()
            if kind == "rtree"
            else GridIndex(cell_m=250.0)
            if kind == "grid"
            else KDTreeIndex(tab)
        )
        pts: dict[int, tuple[float, float]] = {}
        for step in range(3000):
            uid = f"u{rng.integers(400)}"
            if step % 10 == 9 and uid in tab:
                slot = tab.ids[uid]
                tab.remove(uid)
                idx.delete(slot)
                del pts[slot]
                continue
            x, y = (float(v) for v in rng.uniform(0, 5000, 2))
            slot = tab.update(uid, x, y, float(step))
            idx.move(slot, x, y)
            pts[slot] = (x, y)
        for _ in range(30):
            qx, qy = (float(v) for v in rng.uniform(0, 5000, 2))
            k = int(rng.integers(1, 20))
            got = sorted(math.hypot(pts[s][0] - qx, pts[s][1] - qy) for s in idx.nearest(qx, qy, k))
            want = sorted(math.hypot(px - qx, py - qy) for px, py in pts.values())[:k]
            assert np.allclose(got, want), kind
            x0, y0 = qx - 400, qy - 300
            inside = sum(x0 <= px <= qx and y0 <= py <= qy for px, py in pts.values())
            assert idx.count_in(x0, y0, qx, qy) == inside, kind
