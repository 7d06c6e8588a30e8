"""Shared, requester-independent partition of a population snapshot for spatial k-anonymity.

The partition is an adaptive k-d tree ("k-anonymous k-d partition") built top-down over a snapshot
of user positions in local metres:

* a node is split only if the split leaves **both** children with at least ``k`` users and an
  area **strictly greater** than ``a_min`` (m²), so every leaf has ``>= k`` users and an area
  ``> a_min`` whenever the root does;
* the split axis is the longer side of the node (the other axis if that fails), and the preferred
  split sends about ``k * ceil(g / 2)`` of the node's ``g * k + r`` users left, at a position
  of a grid of the node (``j / 16**L`` of its side, coarsest level first) chosen by the counts
  on each side, so leaves hold ``k`` users or a few more (one leaf per node chain gets the
  remainder) unless ``a_min`` forces more;
* leaves tile the root rectangle, so a leaf holds exactly its members (ties on a boundary aside).

No edge is a function of members' coordinates, only of counts in data-independent cells (as in
Casper's pyramid, refined by counts): split lines lie on grids of their node, the root is a
data-independent rectangle (:func:`covering_world`), and shrunk regions are boxes of a fixed
family of sub-boxes of the leaf (:func:`grid_box`). Static users therefore get the same
partition every epoch (nothing to average), and an observer who knows every position but one
learns from the regions only which cells hold that one.

The region for a user is its leaf rectangle. It depends only on the snapshot and ``(k, a_min)``,
never on who asks, so all members get the same region (reciprocity) and an observer who knows all
positions learns only "one of the leaf's members asked". Cost: O(n log(n / k)) per build from two
presorted orders (x and y) shared by all builds of a snapshot.

:func:`leaf_region` / :func:`shrunk_region` turn a leaf into a :class:`CloakRegion` (shrunk, from
the leaf's data only, when the leaf exceeds ``a_max``); when even that exceeds ``a_max``,
:func:`core_region` answers the members inside the smallest family box holding ``k`` of them.
:func:`shared_region` chooses among the three for a user; :func:`cloak_once` is the pure entry
point for a static population (tests, simulators).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
import shapely
from numba import njit
from numpy.typing import NDArray

from locpriv.core.cloak.types import CloakParams, CloakRegion, round_a_min
from locpriv.errors import CloakInfeasible

__all__ = [
    "Partition",
    "RegionCache",
    "build_partition",
    "cloak_once",
    "core_box",
    "core_region",
    "covering_world",
    "grid_box",
    "leaf_region",
    "shared_region",
    "shrunk_region",
    "warm_up",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class Partition(NamedTuple):
    """Leaves of a k-anonymous k-d partition.

    ``leaf_of[i]`` is the leaf of point ``i``; ``rects[j] = (xmin, ymin, xmax, ymax)`` in metres;
    ``counts[j]`` members of leaf ``j``; ``tmin[j]`` earliest update time (s) among its members;
    ``mbrs[j]`` the members' bounding box (same layout as ``rects``).
    """

    leaf_of: I64
    rects: F64
    counts: I64
    tmin: F64
    mbrs: F64


@njit(cache=True, nogil=True)
def _stable_split(arr: I64, tmp: I64, lo: int, hi: int, flag: NDArray[np.bool_]) -> None:
    """Stably move the flagged entries of ``arr[lo:hi]`` to the front."""
    a = lo
    b = 0
    for i in range(lo, hi):
        p = arr[i]
        if flag[p]:
            arr[a] = p
            a += 1
        else:
            tmp[b] = p
            b += 1
    for i in range(b):
        arr[a + i] = tmp[i]


@njit(cache=True, nogil=True)
def _first_at_least(  # noqa: PLR0917
    coord: F64, arr: I64, lo: int, hi: int, v: float, strict: bool
) -> int:
    """First index ``i`` in ``[lo, hi)`` with ``coord[arr[i]] >= v`` (``> v`` if ``strict``);
    ``arr[lo:hi]`` is sorted by ``coord``."""
    a = lo
    b = hi
    while a < b:
        mid = (a + b) // 2
        c = coord[arr[mid]]
        if c < v or (strict and c == v):
            a = mid + 1
        else:
            b = mid
    return a


GRID_BASE = 32
"""A node side is cut at multiples of ``1 / GRID_BASE**L`` of it, coarsest level ``L`` first
(finer grids place edges nearer members: 32 keeps their distance to members as for a blind
placement, measured by tests/test_cloak_privacy.py)."""


@njit(cache=True, nogil=True)
def _split_on_grid(  # noqa: PLR0917
    coord: F64,
    arr: I64,
    lo: int,
    hi: int,
    lo_a: float,
    hi_a: float,
    ell: float,
    k: int,
    m: int,
    phase: float,
) -> tuple[float, int]:
    """Where to cut a node of side ``[lo_a, hi_a]``: ``(position, r)`` with ``r`` the members
    left of it, or ``(nan, -1)`` when no cut is admissible.

    Candidate positions form a grid of the node that depends on its rectangle only:
    ``lo_a + (hi_a - lo_a) (j + phase) / GRID_BASE**L``, coarsest level ``L`` first. A
    candidate is admissible when both sides keep ``>= k`` members and a side longer than
    ``ell`` (area ``> a_min``) and no member lies on it (a member on a boundary would break
    reciprocity). Among the admissible candidates of the coarsest level that has one, the cut
    sends the number of members nearest to ``m`` left (ties: nearest the node's middle). The
    position is thus chosen by *counts* in grid cells: it is no function of any member's
    coordinate, so an observer who knows other users' positions learns from an edge only who
    is inside and who is outside it.
    """
    c = hi - lo
    lower = max(lo_a + ell, coord[arr[lo + k - 1]])  # a cut at or left of this fails
    upper = min(hi_a - ell, coord[arr[lo + c - k]])  # a cut right of this fails
    if not lower < upper:
        return np.nan, -1
    width = hi_a - lo_a
    mid = 0.5 * (lo_a + hi_a)
    cells = 1.0
    for _level in range(int(56 // math.log2(GRID_BASE))):
        cells *= GRID_BASE
        step = width / cells
        j0 = max(0, math.floor((lower - lo_a) / step - phase))
        j1 = min(int(cells) - 1, math.ceil((upper - lo_a) / step - phase))
        lv = np.nan
        lv_r = -1
        lv_score = 0.0
        for j in range(j0, j1 + 1):
            pos = lo_a + width * ((j + phase) / cells)
            if not (lower < pos <= upper) or pos - lo_a <= ell or hi_a - pos <= ell:
                continue
            a = _first_at_least(coord, arr, lo, hi, pos, False)
            r = a - lo
            if r < k or c - r < k or (a < hi and coord[arr[a]] == pos):
                continue
            score = abs(r - m) * 2.0 * width + abs(pos - mid)
            if lv_r < 0 or score < lv_score:
                lv = pos
                lv_r = r
                lv_score = score
        if lv_r >= 0:
            return lv, lv_r
    return np.nan, -1


@njit(cache=True, nogil=True)
def _kd_partition(  # noqa: PLR0917
    x: F64,
    y: F64,
    t: F64,
    ox_in: I64,
    oy_in: I64,
    bounds: F64,
    k: int,
    a_min: float,
    phase: float,
) -> tuple[I64, F64, I64, F64, F64]:
    n = x.shape[0]
    ox = ox_in.copy()
    oy = oy_in.copy()
    flag = np.zeros(n, dtype=np.bool_)
    tmp = np.empty(n, dtype=np.int64)
    leaf_of = np.zeros(n, dtype=np.int64)
    max_leaves = n // max(k, 1) + 2
    rects = np.empty((max_leaves, 4))
    counts = np.empty(max_leaves, dtype=np.int64)
    tmins = np.empty(max_leaves)
    mbrs = np.empty((max_leaves, 4))
    cap = 2 * max_leaves + 64
    st_lo = np.empty(cap, dtype=np.int64)
    st_hi = np.empty(cap, dtype=np.int64)
    st_r = np.empty((cap, 4))
    sp = 0
    st_lo[0] = 0
    st_hi[0] = n
    st_r[0, :] = bounds
    sp = 1
    nl = 0
    while sp > 0:
        sp -= 1
        lo = st_lo[sp]
        hi = st_hi[sp]
        rx0 = st_r[sp, 0]
        ry0 = st_r[sp, 1]
        rx1 = st_r[sp, 2]
        ry1 = st_r[sp, 3]
        c = hi - lo
        w = rx1 - rx0
        h = ry1 - ry0
        done = False
        if c >= 2 * k:
            g = c // k
            m = k * ((g + 1) // 2)
            # both axes are tried; the cut nearer to m members wins (ties: the longer side)
            best_s = np.nan
            best_r = -1
            best_axis = -1
            for attempt in range(2):
                axis = 0 if ((w >= h) == (attempt == 0)) else 1
                other = h if axis == 0 else w
                if other <= 0.0:
                    continue
                if axis == 0:
                    s_, r_ = _split_on_grid(x, ox, lo, hi, rx0, rx1, a_min / other, k, m, phase)
                else:
                    s_, r_ = _split_on_grid(y, oy, lo, hi, ry0, ry1, a_min / other, k, m, phase)
                if r_ >= 0 and (best_r < 0 or abs(r_ - m) < abs(best_r - m)):
                    best_s = s_
                    best_r = r_
                    best_axis = axis
            if best_r >= 0:
                axis = best_axis
                s = best_s
                r = best_r
                arr = ox if axis == 0 else oy
                for i in range(lo, lo + r):
                    flag[arr[i]] = True
                for i in range(lo + r, hi):
                    flag[arr[i]] = False
                if axis == 0:
                    _stable_split(oy, tmp, lo, hi, flag)
                else:
                    _stable_split(ox, tmp, lo, hi, flag)
                # push right then left (left processed first)
                st_lo[sp] = lo + r
                st_hi[sp] = hi
                st_lo[sp + 1] = lo
                st_hi[sp + 1] = lo + r
                if axis == 0:
                    st_r[sp, 0] = s
                    st_r[sp, 1] = ry0
                    st_r[sp, 2] = rx1
                    st_r[sp, 3] = ry1
                    st_r[sp + 1, 0] = rx0
                    st_r[sp + 1, 1] = ry0
                    st_r[sp + 1, 2] = s
                    st_r[sp + 1, 3] = ry1
                else:
                    st_r[sp, 0] = rx0
                    st_r[sp, 1] = s
                    st_r[sp, 2] = rx1
                    st_r[sp, 3] = ry1
                    st_r[sp + 1, 0] = rx0
                    st_r[sp + 1, 1] = ry0
                    st_r[sp + 1, 2] = rx1
                    st_r[sp + 1, 3] = s
                sp += 2
                done = True
        if not done:
            rects[nl, 0] = rx0
            rects[nl, 1] = ry0
            rects[nl, 2] = rx1
            rects[nl, 3] = ry1
            counts[nl] = c
            tm = np.inf
            mx0 = np.inf
            my0 = np.inf
            mx1 = -np.inf
            my1 = -np.inf
            for i in range(lo, hi):
                p = ox[i]
                leaf_of[p] = nl
                tm = min(tm, t[p])
                mx0 = min(mx0, x[p])
                my0 = min(my0, y[p])
                mx1 = max(mx1, x[p])
                my1 = max(my1, y[p])
            tmins[nl] = tm
            mbrs[nl, 0] = mx0
            mbrs[nl, 1] = my0
            mbrs[nl, 2] = mx1
            mbrs[nl, 3] = my1
            nl += 1
    return leaf_of, rects[:nl].copy(), counts[:nl].copy(), tmins[:nl].copy(), mbrs[:nl].copy()


def build_partition(
    x: F64,
    y: F64,
    t: F64,
    bounds: tuple[float, float, float, float],
    *,
    k: int,
    a_min_m2: float,
    order_x: I64 | None = None,
    order_y: I64 | None = None,
    phase: float = 0.5,
) -> Partition:
    """Partition points ``(x[i], y[i])`` (metres, updated at ``t[i]`` s) inside ``bounds``.

    ``bounds = (xmin, ymin, xmax, ymax)`` must contain every point; it is the root leaf.
    ``order_x``/``order_y`` are ``argsort`` orders of ``x``/``y`` when already known.
    Every leaf has ``>= k`` users and area ``> a_min_m2`` provided the root does.
    ``phase`` in (0, 1) places the grids of split positions inside their cells (a service
    draws it once, secretly, so that the grids do not line up with round coordinates).
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    t = np.ascontiguousarray(t, dtype=np.float64)
    if order_x is None:
        order_x = np.argsort(x)
    if order_y is None:
        order_y = np.argsort(y)
    b = np.asarray(bounds, dtype=np.float64)
    leaf_of, rects, counts, tmin, mbrs = _kd_partition(
        x,
        y,
        t,
        np.ascontiguousarray(order_x, dtype=np.int64),
        np.ascontiguousarray(order_y, dtype=np.int64),
        b,
        int(k),
        float(a_min_m2),
        float(phase),
    )
    return Partition(leaf_of, rects, counts, tmin, mbrs)


SPAN_STARTS = 8
"""A shrunk box's span of length ``size`` starts at a multiple of ``size / SPAN_STARTS``."""


def _dyadic_span(lo: float, hi: float, a: float, b: float) -> list[tuple[float, float]]:
    """Spans of ``[lo, hi]`` covering ``[a, b]`` (closed), from long to short: per level
    ``L = 0, 1, ...`` the span of length ``(hi - lo) / sqrt(2)**L`` starting at the largest
    multiple of an eighth of that length not above ``a``, if it covers ``b`` (clipped to
    ``[lo, hi]``); when only the whole side fits, also ``[lo, hi]`` trimmed by whole 64ths.
    Positions depend on ``lo``, ``hi`` and ``L`` only."""
    out = [(lo, hi)]
    side = hi - lo
    for level in range(1, 80):
        size = side / math.sqrt(2.0) ** level
        step = size / SPAN_STARTS
        s0 = lo + math.floor((a - lo) / step) * step
        s0 = min(s0, hi - size)
        s1 = s0 + size
        if s1 < b:
            if size < b - a:
                break
            continue
        out.append((s0, s1))
    if len(out) == 1:  # members spread over most of the side: trim whole 64ths off its ends
        step = side / 64.0
        s0 = lo + max(0, math.floor((a - lo) / step)) * step
        s1 = hi - max(0, math.floor((hi - b) / step)) * step
        if s1 - s0 < side:
            out.append((s0, s1))
    return out


def grid_box(rect: F64, mbr: F64, min_area_m2: float) -> F64:
    """The smallest box of a data-independent family of sub-boxes of ``rect`` that covers
    ``mbr`` and has area ``> min_area_m2`` (or ``rect`` when none is smaller).

    Per axis, the family holds the spans of length ``side / sqrt(2)**L`` that start at
    multiples of an eighth of that length (:func:`_dyadic_span`; the chosen span is at most
    about 1.6× the members' extent). Every edge is therefore a position
    fixed by ``rect`` alone; which box is chosen tells an observer which family members hold
    all members (inside/outside), never where a member is. Too small a box is grown back one
    level at a time on the axis with the shorter span (deterministic: no information added).
    """
    xs = _dyadic_span(float(rect[0]), float(rect[2]), float(mbr[0]), float(mbr[2]))
    ys = _dyadic_span(float(rect[1]), float(rect[3]), float(mbr[1]), float(mbr[3]))
    lx, ly = len(xs) - 1, len(ys) - 1

    def area(i: int, j: int) -> float:
        return (xs[i][1] - xs[i][0]) * (ys[j][1] - ys[j][0])

    while area(lx, ly) <= min_area_m2 and (lx > 0 or ly > 0):
        wx = xs[lx][1] - xs[lx][0]
        wy = ys[ly][1] - ys[ly][0]
        if lx > 0 and (ly == 0 or wx <= wy):
            lx -= 1
        else:
            ly -= 1
    return np.array([xs[lx][0], ys[ly][0], xs[lx][1], ys[ly][1]])


CORE_MAX_LEVEL = 12
"""Finest level per axis searched for a core box (spans of side / 64, ~500 starts)."""


def _level_spans(lo: float, hi: float, level: int) -> tuple[F64, float]:
    """Every span of level ``level`` of :func:`_dyadic_span`'s family of ``[lo, hi]``: the
    starts (metres) of the spans of length ``(hi - lo) / sqrt(2)**level`` that begin at a
    multiple of an eighth of that length, the last one moved to end at ``hi``; and the length."""
    side = hi - lo
    size = side / math.sqrt(2.0) ** level
    step = size / SPAN_STARTS
    last = hi - size
    starts: F64 = lo + step * np.arange(math.floor((last - lo) / step + 1e-9) + 1, dtype=np.float64)
    if last - starts[-1] > 1e-9 * side:
        starts = np.append(starts, last)
    return starts, size


def core_box(
    rect: F64, px: F64, py: F64, k: int, min_area_m2: float
) -> tuple[F64, NDArray[np.bool_]] | None:
    """A box of the family of sub-boxes of ``rect`` that holds ``>= k`` of the points
    ``(px, py)`` (a leaf's members, metres), for a leaf whose members span too much to fit
    ``a_max``: ``(box, inside)`` with ``inside`` the points it holds (edges included), or None
    when no box of the family holds ``k``.

    Boxes of level ``s`` pair an x span of level ``Lx`` with a y span of level ``s - Lx``
    (:func:`_level_spans`), so all have area ``|rect| / 2**(s / 2)``. Levels are descended
    from ``s = 0`` while some box of the next level holds ``>= k`` points and has area
    ``> min_area_m2``; the core is the box of the last such level holding the most points
    (ties: the coarser x span, then the lower starts). Edges are family positions, fixed by
    ``rect`` alone, and the choice reads only counts in family boxes, so the box says which
    boxes hold ``k``, never where a member lies in one. It depends on no ``a_max``.
    """
    area0 = float((rect[2] - rect[0]) * (rect[3] - rect[1]))
    best: tuple[F64, NDArray[np.bool_]] | None = None
    for s in range(2 * CORE_MAX_LEVEL + 1):
        if s > 0 and area0 / 2.0 ** (s / 2) <= min_area_m2:
            break
        top = -1
        level_best: tuple[F64, NDArray[np.bool_]] | None = None
        for lx in range(max(0, s - CORE_MAX_LEVEL), min(s, CORE_MAX_LEVEL) + 1):
            sx, wx = _level_spans(float(rect[0]), float(rect[2]), lx)
            sy, wy = _level_spans(float(rect[1]), float(rect[3]), s - lx)
            in_x = (px[None, :] >= sx[:, None]) & (px[None, :] <= sx[:, None] + wx)
            in_y = (py[None, :] >= sy[:, None]) & (py[None, :] <= sy[:, None] + wy)
            counts = in_x.astype(np.int32) @ in_y.T.astype(np.int32)
            a, b = np.unravel_index(int(np.argmax(counts)), counts.shape)
            if counts[a, b] >= k and counts[a, b] > top:
                top = int(counts[a, b])
                box = np.array([sx[a], sy[b], sx[a] + wx, sy[b] + wy])
                level_best = (box, in_x[a] & in_y[b])
        if level_best is None:
            break
        best = level_best
    return best


def _box(rect: F64) -> shapely.Polygon:
    return shapely.box(float(rect[0]), float(rect[1]), float(rect[2]), float(rect[3]))


def _rect_area(r: F64) -> float:
    return float((r[2] - r[0]) * (r[3] - r[1]))


def leaf_region(part: Partition, leaf: int, t2: float) -> CloakRegion:
    """The whole leaf rectangle as a region (shared by every member)."""
    r = part.rects[leaf]
    return CloakRegion(_box(r), _rect_area(r), int(part.counts[leaf]), float(part.tmin[leaf]), t2)


def shrunk_region(part: Partition, leaf: int, p: CloakParams, t2: float) -> CloakRegion | None:
    """A sub-rectangle of a leaf too large for ``a_max_m2``, or None if none fits.

    Computed from the leaf's data and ``p.a_min_m2`` only (reciprocal, and the same whatever
    ``a_max_m2`` a request names, so varying it reveals nothing): the smallest box of a grid of
    the leaf (:func:`grid_box`) that covers the members and has area ``> a_min_m2``. Its edges
    are grid lines whose positions depend on the leaf's rectangle and ``a_min_m2`` alone, never
    on a member's coordinate. It still holds exactly the leaf's members, so ``users`` is
    unchanged.
    """
    rect = part.rects[leaf]
    r = grid_box(rect, part.mbrs[leaf], p.a_min_m2 * (1 + 1e-6))
    area = _rect_area(r)
    if not p.a_min_m2 < area < p.a_max_m2:
        return None
    return CloakRegion(_box(r), area, int(part.counts[leaf]), float(part.tmin[leaf]), t2)


def core_region(
    part: Partition, leaf: int, p: CloakParams, t2: float, *, x: F64, y: F64, t: F64
) -> tuple[CloakRegion, I64] | None:
    """The core of a leaf whose members span too much for any ``a_max`` it was asked with: the
    region of :func:`core_box` (from the leaf's rectangle, its members' positions ``x``, ``y``
    and ``p.k``, ``p.a_min_m2`` only) and the members it holds (indices into ``x``), or None.

    Reciprocal: it holds only members of the leaf, and each of them gets it; the leaf's other
    members (fewer than ``k``) get no region. Not checked against ``a_max_m2``: like
    :func:`shrunk_region`'s box, it is the same whatever ``a_max`` a request names.
    """
    members = np.flatnonzero(part.leaf_of == leaf)
    got = core_box(part.rects[leaf], x[members], y[members], p.k, p.a_min_m2 * (1 + 1e-6))
    if got is None:
        return None
    box, inside = got
    held = members[inside]
    area = _rect_area(box)
    region = CloakRegion(_box(box), area, len(held), float(t[held].min()), t2)
    return region, held


@dataclass(slots=True)
class RegionCache:
    """One partition's regions by leaf, kept across requests (none depends on ``a_max``)."""

    leaves: dict[int, CloakRegion] = field(default_factory=dict)
    cores: dict[int, tuple[CloakRegion, I64] | None] = field(default_factory=dict)


def shared_region(
    part: Partition,
    i: int,
    p: CloakParams,
    t2: float,
    *,
    x: F64,
    y: F64,
    t: F64,
    cache: RegionCache | None = None,
    a_min_m2: float | None = None,
) -> tuple[CloakRegion | None, I64 | None]:
    """The reciprocal region the partition gives point ``i`` (of ``x``, ``y``, updated at
    ``t``) for ``p``, or ``(None, None)``: the leaf if it is under ``a_max_m2``, else its
    :func:`shrunk_region`, else its :func:`core_region` if that holds ``i`` and fits. The second
    value lists the members of a core region (indices into ``x``); it is None when the region
    holds the whole leaf. ``a_min_m2`` (default ``p.a_min_m2``) is the partition's: the
    rounded ``a_min`` it was built with, which shrunk regions and cores keep to.
    """
    memo = RegionCache() if cache is None else cache
    leaf = int(part.leaf_of[i])
    region = memo.leaves.get(leaf)
    if region is None:
        region = memo.leaves[leaf] = leaf_region(part, leaf, t2)
    if region.area_m2 < p.a_max_m2:
        return region, None
    if a_min_m2 is not None and a_min_m2 != p.a_min_m2:
        p = replace(p, a_min_m2=a_min_m2)
    small = shrunk_region(part, leaf, p, t2)
    if small is not None:
        return small, None
    if leaf not in memo.cores:
        memo.cores[leaf] = core_region(part, leaf, p, t2, x=x, y=y, t=t)
    core = memo.cores[leaf]
    if core is not None and core[0].area_m2 < p.a_max_m2 and bool(np.any(core[1] == i)):
        return core
    return None, None


def covering_world(
    xy: F64, a_min_m2: float, world: tuple[float, float, float, float] | None = None
) -> tuple[float, float, float, float]:
    """A root rectangle holding every point of ``xy`` whose edges are no member's coordinate.

    With ``world``: that rectangle, doubled about its centre until it holds every point (users
    outside the configured extent widen it by powers of two, not to their own coordinates).
    Without: the square of the power-of-two grid (side ``s >= `` the points' extent and
    ``> sqrt(a_min_m2)``) whose lower-left cell holds the points' lower-left corner, doubled.
    """
    x0, y0 = (float(v) for v in xy.min(axis=0))
    x1, y1 = (float(v) for v in xy.max(axis=0))
    if world is not None:
        wx0, wy0, wx1, wy1 = world
        cx, cy = (wx0 + wx1) / 2, (wy0 + wy1) / 2
        hw, hh = (wx1 - wx0) / 2, (wy1 - wy0) / 2
        while not (cx - hw <= x0 and x1 <= cx + hw and cy - hh <= y0 and y1 <= cy + hh):
            hw, hh = 2 * hw, 2 * hh
        return (cx - hw, cy - hh, cx + hw, cy + hh)
    extent = max(x1 - x0, y1 - y0, math.sqrt(max(a_min_m2, 0.0)) * 1.01, 1.0)
    s = 2.0 ** math.ceil(math.log2(extent))
    gx, gy = math.floor(x0 / s) * s, math.floor(y0 / s) * s
    return (gx, gy, gx + 2 * s, gy + 2 * s)


def cloak_once(
    users_xy: F64,
    user_index: int,
    params: CloakParams,
    *,
    world: tuple[float, float, float, float] | None = None,
    now: float = 0.0,
    a_min_step: float = 1.0,
) -> CloakRegion:
    """Cloak user ``user_index`` of the static population ``users_xy`` (shape (n, 2), metres).

    Uses the same shared partition as :class:`Cloaker` (no rounding of ``a_min_m2`` by default).
    ``world`` defaults to a power-of-two square holding the users (:func:`covering_world`);
    users outside a given ``world`` widen it by doubling.
    Raises :class:`locpriv.errors.CloakInfeasible` when no region of the partition fits.
    """
    xy = np.asarray(users_xy, dtype=np.float64)
    n = len(xy)
    if not 0 <= user_index < n:
        raise IndexError("user_index out of range")
    world = covering_world(xy, params.a_min_m2, world)
    if n < params.k:
        raise CloakInfeasible(f"too few users: {n} users, k={params.k} requested")
    a_min = round_a_min(params.a_min_m2, a_min_step)
    t = np.full(n, now)
    part = build_partition(xy[:, 0], xy[:, 1], t, world, k=params.k, a_min_m2=a_min)
    region, _ = shared_region(
        part, user_index, params, now, x=xy[:, 0], y=xy[:, 1], t=t, a_min_m2=a_min
    )
    if region is None:
        raise CloakInfeasible(
            f"a_max_m2 too small for k={params.k}: the shared region holding the user needs "
            "more than a_max_m2"
        )
    return region


def warm_up() -> None:
    """Compile the partition kernels (or load them from numba's cache) before serving.

    The first compilation takes seconds; a service calls this off its event loop at start so
    that no request pays for it.
    """
    xy = np.random.default_rng(0).uniform(0.0, 100.0, size=(8, 2))
    cloak_once(xy, 0, CloakParams(k=2, a_min_m2=1.0, a_max_m2=1e6, max_delay_s=0.0))
