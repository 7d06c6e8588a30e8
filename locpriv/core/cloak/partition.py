"""Shared, requester-independent partition of a population snapshot for spatial k-anonymity.

The partition is an adaptive k-d tree ("k-anonymous k-d partition") built top-down over a snapshot
of user positions in local metres:

* a node is split only if the split leaves **both** children with at least ``k`` users and an
  area **strictly greater** than ``a_min`` (m²), so every leaf has ``>= k`` users and an area
  ``> a_min`` whenever the root does;
* the split axis is the longer side of the node (the other axis if that fails), and the preferred
  split sends ``k * ceil(g / 2)`` of the node's ``g * k + r`` users left, half-way between two
  users' coordinates, so leaves hold exactly ``k`` users (one leaf per node chain gets the
  remainder) unless ``a_min`` forces more;
* leaves tile the root rectangle, so a leaf holds exactly its members (ties on a boundary aside).

The region for a user is its leaf rectangle. It depends only on the snapshot and ``(k, a_min)``,
never on who asks, so all members get the same region (reciprocity) and an observer who knows all
positions learns only "one of the leaf's members asked". Cost: O(n log(n / k)) per build from two
presorted orders (x and y) shared by all builds of a snapshot.

:func:`leaf_region` / :func:`shrunk_region` turn a leaf into a :class:`CloakRegion` (shrunk, from
the leaf's data only, when the leaf exceeds ``a_max``); :func:`cloak_once` is the pure entry point
for a static population (tests, simulators).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import shapely
from numba import njit
from numpy.typing import NDArray

from locpriv.core.cloak.types import CloakParams, CloakRegion, round_a_min
from locpriv.errors import CloakInfeasible

__all__ = [
    "Partition",
    "build_partition",
    "cloak_once",
    "leaf_region",
    "shrink_toward",
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


@njit(cache=True, nogil=True)
def _split_in_gap(  # noqa: PLR0917
    coord: F64, arr: I64, lo: int, hi: int, lower: float, upper: float, s: float
) -> tuple[float, int]:
    """Where to cut a node near the preferred position ``s``: ``(position, r)`` with ``r`` the
    members left of it, or ``(nan, -1)`` when no cut is admissible.

    Admissible positions lie strictly inside ``(lower, upper)`` and on no member's coordinate.
    They form open intervals between consecutive distinct member coordinates (or an area
    bound); the cut goes to the **middle** of the interval at or next to ``s``. The position
    thus depends on members only through the two values around it, never lies within less than
    half a gap of a member, and is never on one (a member on a boundary would break
    reciprocity). ``lower``/``upper`` already keep ``>= k`` members on each side.
    """
    t = min(max(s, lower), upper)
    a = _first_at_least(coord, arr, lo, hi, t, False)
    if a < hi and coord[arr[a]] > t and a > lo:
        left = max(coord[arr[a - 1]], lower)
        right = min(coord[arr[a]], upper)
        return 0.5 * (left + right), a - lo
    # t is a member's coordinate (a tie, or lower/upper themselves): the interval just left of
    # it or the one just right of it, whichever cut lies nearer to s
    best = np.nan
    best_r = -1
    if a > lo and a < hi:
        left = max(coord[arr[a - 1]], lower)
        if left < t:
            best = 0.5 * (left + t)
            best_r = a - lo
    b = _first_at_least(coord, arr, lo, hi, t, True)
    if b < hi and t < upper:
        right = min(coord[arr[b]], upper)
        if t < right:
            cut = 0.5 * (t + right)
            if best_r < 0 or abs(cut - s) < abs(best - s):
                best = cut
                best_r = b - lo
    return best, best_r


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
            for attempt in range(2):
                axis = 0 if ((w >= h) == (attempt == 0)) else 1
                if axis == 0:
                    arr = ox
                    coord = x
                    lo_a = rx0
                    hi_a = rx1
                    other = h
                else:
                    arr = oy
                    coord = y
                    lo_a = ry0
                    hi_a = ry1
                    other = w
                if other <= 0.0:
                    continue
                ell = a_min / other
                lower = max(lo_a + ell, coord[arr[lo + k - 1]])
                upper = min(hi_a - ell, coord[arr[lo + c - k]])
                if not lower < upper:
                    continue
                g = c // k
                m = k * ((g + 1) // 2)
                s, r = _split_in_gap(
                    coord,
                    arr,
                    lo,
                    hi,
                    lower,
                    upper,
                    0.5 * (coord[arr[lo + m - 1]] + coord[arr[lo + m]]),
                )
                if r < 0:
                    continue
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
                break
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
) -> Partition:
    """Partition points ``(x[i], y[i])`` (metres, updated at ``t[i]`` s) inside ``bounds``.

    ``bounds = (xmin, ymin, xmax, ymax)`` must contain every point; it is the root leaf.
    ``order_x``/``order_y`` are ``argsort`` orders of ``x``/``y`` when already known.
    Every leaf has ``>= k`` users and area ``> a_min_m2`` provided the root does.
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
    )
    return Partition(leaf_of, rects, counts, tmin, mbrs)


def shrink_toward(rect: F64, mbr: F64, target_m2: float) -> F64:
    """The rectangle ``mbr + lam * (rect - mbr)`` with the smallest ``lam`` in [0, 1] whose
    area is at least ``target_m2`` (``rect`` itself if even ``lam = 1`` falls short).

    Interpolating every side keeps the members' box at the same *relative* place inside the
    leaf (set by split lines half-way between users), so nobody is put at the centre.
    """
    w0 = float(mbr[2] - mbr[0])
    h0 = float(mbr[3] - mbr[1])
    dw = float(rect[2] - rect[0]) - w0
    dh = float(rect[3] - rect[1]) - h0
    # (w0 + lam dw)(h0 + lam dh) = target  ->  a lam² + b lam + c = 0
    a = dw * dh
    b = w0 * dh + h0 * dw
    c = w0 * h0 - target_m2
    if c >= 0:
        lam = 0.0
    elif a > 0:
        lam = (-b + np.sqrt(b * b - 4 * a * c)) / (2 * a)
    elif b > 0:
        lam = -c / b
    else:
        lam = 1.0
    lam = min(1.0, max(0.0, float(lam) * (1 + 1e-9) + 1e-12))
    out = np.asarray(mbr, dtype=np.float64) + lam * (np.asarray(rect) - np.asarray(mbr))
    if (out[2] - out[0]) * (out[3] - out[1]) < target_m2:
        out = np.asarray(rect, dtype=np.float64).copy()
    return out


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

    Computed from the leaf's data and ``p`` only (reciprocal): the leaf is shrunk toward its
    members' box (:func:`shrink_toward`) to a target area between ``lo = max(a_min, box area)``
    and ``hi = min(a_max, leaf area)``: ``4 × box area`` (a compact region) but at most the
    geometric middle ``sqrt(lo · hi)``, never below ``lo``. The middle keeps the edges away from
    the outermost members whenever there is room: a target at the members' box itself would put
    an edge on a member's exact coordinate. It still holds exactly the leaf's members, so
    ``users`` is unchanged.
    """
    mbr = part.mbrs[leaf]
    lo = max(p.a_min_m2 * (1 + 1e-6), _rect_area(mbr))
    hi = min(p.a_max_m2 * (1 - 1e-9), _rect_area(part.rects[leaf]))
    if lo >= hi:
        return None
    target = max(lo, min(4.0 * _rect_area(mbr), math.sqrt(lo * hi)))
    r = shrink_toward(part.rects[leaf], mbr, target)
    area = _rect_area(r)
    if not p.a_min_m2 < area < p.a_max_m2:
        return None
    return CloakRegion(_box(r), area, int(part.counts[leaf]), float(part.tmin[leaf]), t2)


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
    ``world`` defaults to the bounding box of the users grown to exceed ``a_min_m2``; users
    outside a given ``world`` widen it.
    Raises :class:`locpriv.errors.CloakInfeasible` when no region of the partition fits.
    """
    xy = np.asarray(users_xy, dtype=np.float64)
    n = len(xy)
    if not 0 <= user_index < n:
        raise IndexError("user_index out of range")
    x0, y0 = (float(v) for v in xy.min(axis=0))
    x1, y1 = (float(v) for v in xy.max(axis=0))
    if world is not None:  # users outside the extent widen it, as in Cloaker
        world = (min(world[0], x0), min(world[1], y0), max(world[2], x1), max(world[3], y1))
    else:
        side = math.sqrt(params.a_min_m2) * 1.01 + 1.0
        w = max(x1 - x0, side)
        h = max(y1 - y0, side)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        world = (
            min(x0, cx - w / 2),
            min(y0, cy - h / 2),
            max(x1, cx + w / 2),
            max(y1, cy + h / 2),
        )
    if n < params.k:
        raise CloakInfeasible(f"too few users: {n} users, k={params.k} requested")
    a_min = round_a_min(params.a_min_m2, a_min_step)
    part = build_partition(xy[:, 0], xy[:, 1], np.full(n, now), world, k=params.k, a_min_m2=a_min)
    leaf = int(part.leaf_of[user_index])
    region = leaf_region(part, leaf, now)
    if region.area_m2 < params.a_max_m2:
        return region
    small = shrunk_region(part, leaf, params, now)
    if small is None:
        raise CloakInfeasible(
            f"a_max_m2 too small for k={params.k}: the shared region holding the user needs "
            "more than a_max_m2"
        )
    return small


def warm_up() -> None:
    """Compile the partition kernels (or load them from numba's cache) before serving.

    The first compilation takes seconds; a service calls this off its event loop at start so
    that no request pays for it.
    """
    xy = np.random.default_rng(0).uniform(0.0, 100.0, size=(8, 2))
    cloak_once(xy, 0, CloakParams(k=2, a_min_m2=1.0, a_max_m2=1e6, max_delay_s=0.0))
