"""Protocol 4 group selection: among m replies choose k-1 that, with the requester's own perturbed
point, span an area A with A_min < A < A_max (m²) and minimise the within-group SSE (m²).

Pure and synchronous; points are metres in one local projection (see :mod:`locpriv.core.geo`).
Area is the convex-hull area by default, the bounding-box area as an option
(:class:`AreaMode`); both never decrease when a point joins, which the search uses.
:func:`select_group` is exact by branch and bound while within a node budget and a bounded
heuristic beyond; infeasibility is reported with an :class:`InfeasibleReason`.

The kernels are compiled with numba (cached on disk); points are taken relative to the
requester's point (the origin) and candidates sorted by distance to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import numba
import numpy as np
from numpy.typing import ArrayLike


@numba.njit(cache=True)
def _area(xs, ys, n, area_mode, wx, wy):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Area in m² of the first ``n`` points (hull or bounding box); ``wx``/``wy`` scratch."""
    if area_mode == 1:
        x0 = x1 = xs[0]
        y0 = y1 = ys[0]
        for i in range(1, n):
            x0 = min(x0, xs[i])
            x1 = max(x1, xs[i])
            y0 = min(y0, ys[i])
            y1 = max(y1, ys[i])
        return (x1 - x0) * (y1 - y0)
    if n < 3:
        return 0.0
    # insertion sort by (x, y) into wx, wy
    for i in range(n):
        x = xs[i]
        y = ys[i]
        j = i - 1
        while j >= 0 and (wx[j] > x or (wx[j] == x and wy[j] > y)):
            wx[j + 1] = wx[j]
            wy[j + 1] = wy[j]
            j -= 1
        wx[j + 1] = x
        wy[j + 1] = y
    # Andrew's monotone chain; hull indices into wx/wy kept in h (reuse tail of scratch)
    h = np.empty(2 * n, dtype=np.int64)
    t = 0
    for i in range(n):
        while t >= 2:
            a = h[t - 2]
            b = h[t - 1]
            cr = (wx[b] - wx[a]) * (wy[i] - wy[a]) - (wy[b] - wy[a]) * (wx[i] - wx[a])
            if cr > 0.0:
                break
            t -= 1
        h[t] = i
        t += 1
    lo = t + 1
    for i in range(n - 2, -1, -1):
        while t >= lo:
            a = h[t - 2]
            b = h[t - 1]
            cr = (wx[b] - wx[a]) * (wy[i] - wy[a]) - (wy[b] - wy[a]) * (wx[i] - wx[a])
            if cr > 0.0:
                break
            t -= 1
        h[t] = i
        t += 1
    s = 0.0
    for q in range(t - 1):
        a = h[q]
        b = h[q + 1]
        s += wx[a] * wy[b] - wx[b] * wy[a]
    return abs(s) * 0.5


@numba.njit(cache=True)
def _branch_and_bound(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    P, k, a_min, a_max, area_mode, node_budget, polish
):
    """Exact minimum-SSE choice of ``k-1`` rows of ``P`` (sorted by norm) with the origin.

    Returns ``(best_idx, best_sse, best_area, nodes, n_small, n_large, complete)``;
    ``best_idx[0] == -1`` when no group was found. ``n_small``/``n_large`` count groups
    rejected for area ≤ a_min / partial groups pruned for area ≥ a_max. ``complete`` is False
    when ``node_budget`` (> 0) ran out; the best found so far is returned then. With
    ``polish`` > 0 every new incumbent is improved by :func:`_swap_search` (``polish`` passes),
    which tightens the pruning threshold early; the search stays exact.
    """
    m = P.shape[0]
    r = k - 1
    d = np.sqrt(P[:, 0] ** 2 + P[:, 1] ** 2)
    best = np.inf
    best_area = 0.0
    best_idx = np.full(r, -1, dtype=np.int64)
    chosen = np.empty(r, dtype=np.int64)
    nxt = np.zeros(r + 1, dtype=np.int64)
    sx = np.zeros(r + 1)
    sy = np.zeros(r + 1)
    sq = np.zeros(r + 1)
    xs = np.zeros(k)
    ys = np.zeros(k)
    wx = np.zeros(k)
    wy = np.zeros(k)
    nodes = 0
    n_small = 0
    n_large = 0
    complete = True
    if r <= 0 or m < r:
        return best_idx, best, best_area, nodes, n_small, n_large, complete
    t = 0
    while t >= 0:
        j = nxt[t]
        if j > m - r + t:
            t -= 1
            continue
        nxt[t] = j + 1
        n = t + 1.0  # points so far, origin included
        cx = sx[t] / n
        cy = sy[t] / n
        sse = sq[t] - (sx[t] * sx[t] + sy[t] * sy[t]) / n
        cn = np.sqrt(cx * cx + cy * cy)
        if d[j] > cn:
            # every completion adds rr = r - t points, all with norm >= d[j]; then
            # SSE(final) >= SSE(S) + n·rr/(n+rr)·(d[j] - |c_S|)² (see select_group)
            g = d[j] - cn
            rr = r - t
            if sse + n * rr / (n + rr) * g * g >= best:
                t -= 1  # candidates are sorted by d: the rest of this level cannot win
                continue
        nodes += 1
        if node_budget > 0 and nodes > node_budget:
            complete = False
            break
        px = P[j, 0]
        py = P[j, 1]
        nsx = sx[t] + px
        nsy = sy[t] + py
        nsq = sq[t] + px * px + py * py
        nsse = nsq - (nsx * nsx + nsy * nsy) / (n + 1.0)
        if nsse >= best:
            continue
        chosen[t] = j
        xs[0] = 0.0
        ys[0] = 0.0
        for q in range(t + 1):
            xs[q + 1] = P[chosen[q], 0]
            ys[q + 1] = P[chosen[q], 1]
        area = _area(xs, ys, t + 2, area_mode, wx, wy)
        if area >= a_max:
            n_large += 1
            continue
        if t == r - 1:
            if area > a_min:
                best = nsse
                best_area = area
                for q in range(r):
                    best_idx[q] = chosen[q]
                if polish > 0:  # a better incumbent prunes more: improve it by local search
                    pidx, psse, parea = _swap_search(P, best_idx, a_min, a_max, area_mode, polish)
                    if psse < best:
                        best = psse
                        best_area = parea
                        for q in range(r):
                            best_idx[q] = pidx[q]
            else:
                n_small += 1
            continue
        sx[t + 1] = nsx
        sy[t + 1] = nsy
        sq[t + 1] = nsq
        nxt[t + 1] = j + 1
        t += 1
    return best_idx, best, best_area, nodes, n_small, n_large, complete


@numba.njit(cache=True)
def _swap_search(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    P, idx, a_min, a_max, area_mode, max_passes
):
    """1-swap local search from a feasible ``idx``: replace one member by one non-member while
    the SSE strictly drops and the area stays in the window. Returns ``(idx, sse, area)``."""
    m = P.shape[0]
    r = idx.shape[0]
    k = r + 1
    cur = idx.copy()
    member = np.zeros(m, dtype=np.bool_)
    for q in range(r):
        member[cur[q]] = True
    xs = np.zeros(k)
    ys = np.zeros(k)
    wx = np.zeros(k)
    wy = np.zeros(k)
    sx = 0.0
    sy = 0.0
    sq = 0.0
    for q in range(r):
        sx += P[cur[q], 0]
        sy += P[cur[q], 1]
        sq += P[cur[q], 0] ** 2 + P[cur[q], 1] ** 2
    best = sq - (sx * sx + sy * sy) / k
    for q in range(r):
        xs[q + 1] = P[cur[q], 0]
        ys[q + 1] = P[cur[q], 1]
    best_area = _area(xs, ys, k, area_mode, wx, wy)
    for _ in range(max_passes):
        improved = False
        for q in range(r):
            out = cur[q]
            bx = sx - P[out, 0]
            by = sy - P[out, 1]
            bq = sq - P[out, 0] ** 2 - P[out, 1] ** 2
            for j in range(m):
                if member[j]:
                    continue
                nx = bx + P[j, 0]
                ny = by + P[j, 1]
                nq = bq + P[j, 0] ** 2 + P[j, 1] ** 2
                nsse = nq - (nx * nx + ny * ny) / k
                if nsse >= best * (1.0 - 1e-12):
                    continue
                xs[q + 1] = P[j, 0]
                ys[q + 1] = P[j, 1]
                area = _area(xs, ys, k, area_mode, wx, wy)
                if area > a_min and area < a_max:
                    member[out] = False
                    member[j] = True
                    cur[q] = j
                    out = j
                    sx, sy, sq = nx, ny, nq
                    bx = sx - P[j, 0]
                    by = sy - P[j, 1]
                    bq = sq - P[j, 0] ** 2 - P[j, 1] ** 2
                    best = nsse
                    best_area = area
                    improved = True
                else:
                    xs[q + 1] = P[out, 0]
                    ys[q + 1] = P[out, 1]
        if not improved:
            break
    return cur, best, best_area


# ------------------------------------------------------------------------------ API


class AreaMode(StrEnum):
    """How a group's area is measured (both in m², both never shrink when a point is added)."""

    HULL = "hull"
    """Convex-hull area (default): the region the points actually span."""
    BBOX = "bbox"
    """Axis-aligned bounding-box area in the local projection (≥ hull area)."""


class InfeasibleReason(StrEnum):
    """Why no group was found (named in :class:`~locpriv.errors.GroupInfeasible` messages)."""

    TOO_FEW_REPLIES = "too_few_replies"
    """Fewer than ``k-1`` usable replies."""
    AREA_TOO_SMALL = "area_too_small"
    """Every group spans at most ``A_min``."""
    AREA_TOO_LARGE = "area_too_large"
    """Every group spans at least ``A_max``."""
    WINDOW_UNSATISFIABLE = "window_unsatisfiable"
    """Groups are either too small or too large; none falls inside (A_min, A_max)."""
    SEARCH_BUDGET = "search_budget"
    """The bounded search found no group (one may exist)."""


@dataclass(frozen=True, slots=True)
class Group:
    """A chosen group: ``indices`` into the candidate array (k-1 of them, ascending), its
    ``area_m2`` (A_min < area < A_max), ``sse_m2`` (within-group sum of squared distances to the
    centroid, m², the requester's point included), ``centroid_xy`` (metres, same frame as the
    input), ``exact`` (proven optimal) and ``nodes`` (search nodes visited)."""

    indices: tuple[int, ...]
    area_m2: float
    sse_m2: float
    centroid_xy: tuple[float, float]
    exact: bool
    nodes: int


@dataclass(frozen=True, slots=True)
class Infeasible:
    """No group: the ``reason`` and a human ``detail``."""

    reason: InfeasibleReason
    detail: str


def group_area_m2(points_xy: ArrayLike, mode: AreaMode | str = AreaMode.HULL) -> float:
    """Area in m² of a point set in metres (convex hull or bounding box)."""
    p = np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    n = p.shape[0]
    if n == 0:
        return 0.0
    return float(
        _area(p[:, 0].copy(), p[:, 1].copy(), n, _MODE[AreaMode(mode)], np.zeros(n), np.zeros(n))
    )


def sse_m2(points_xy: ArrayLike) -> float:
    """Sum of squared distances (m²) of points (metres) to their centroid."""
    p = np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    return float(((p - p.mean(axis=0)) ** 2).sum()) if len(p) else 0.0


_MODE: Final = {AreaMode.HULL: 0, AreaMode.BBOX: 1}
DEFAULT_NODE_BUDGET: Final = 100_000
"""Search nodes before the exact search turns into a heuristic (about 5-10 ms)."""


def select_group(
    own_xy: tuple[float, float],
    candidates_xy: ArrayLike,
    k: int,
    a_min_m2: float,
    a_max_m2: float,
    *,
    area: AreaMode | str = AreaMode.HULL,
    node_budget: int | None = DEFAULT_NODE_BUDGET,
    max_swap_passes: int = 20,
) -> Group | Infeasible:
    """Choose ``k-1`` candidates which with ``own_xy`` span ``A_min < area < A_max`` (m²) with the
    least within-group SSE (m²). Points in metres in one local projection.

    Branch and bound over candidates ordered by distance ``d`` to ``own_xy``: partial SSE never
    drops when a point joins (``SSE(S∪{p}) = SSE(S) + |S|/(|S|+1)·|p-c_S|²``). Completing a
    partial group ``S`` (n points, centroid ``c_S``) with ``r`` points whose distances are all
    ``≥ d_j`` gives ``SSE ≥ SSE(S) + n·r/(n+r)·(d_j - |c_S|)²`` when ``d_j > |c_S|`` (from
    ``SSE = Σ|p|² - k|c|²`` and ``|c| ≤ (n|c_S| + Σd)/k``); since ``d`` is sorted, once this
    reaches the best SSE the rest of the level is cut at once. Partial groups whose area
    already reaches ``A_max`` are cut (area is monotone).
    Every new incumbent is improved by 1-swap local search (up to ``max_swap_passes`` passes;
    0 turns this off), which lowers the pruning threshold early. The search is exact when it
    finishes within ``node_budget`` nodes (``None``: no limit; always so when ``C(m, k-1)`` ≤
    the budget); otherwise the best group found is returned with ``exact=False`` (a bounded
    heuristic).
    """
    if k < 2:
        raise ValueError("k must be >= 2")
    if not 0.0 <= a_min_m2 < a_max_m2:
        raise ValueError("need 0 <= a_min_m2 < a_max_m2")
    mode = _MODE[AreaMode(area)]
    cand = np.asarray(candidates_xy, dtype=np.float64).reshape(-1, 2)
    m = cand.shape[0]
    if m < k - 1:
        return Infeasible(
            InfeasibleReason.TOO_FEW_REPLIES, f"{m} usable replies, {k - 1} needed for k={k}"
        )
    rel = cand - np.asarray(own_xy, dtype=np.float64)
    order = np.argsort(np.hypot(rel[:, 0], rel[:, 1]), kind="stable")
    P = np.ascontiguousarray(rel[order])
    budget = 0 if node_budget is None else int(node_budget)
    idx, sse, area_m2, nodes, n_small, n_large, complete = _branch_and_bound(
        P, k, float(a_min_m2), float(a_max_m2), mode, budget, max_swap_passes
    )
    if idx[0] < 0:
        if not complete:
            return Infeasible(
                InfeasibleReason.SEARCH_BUDGET,
                f"no group within {budget} search nodes among {m} replies",
            )
        if n_small and n_large:
            return Infeasible(
                InfeasibleReason.WINDOW_UNSATISFIABLE,
                f"every group of {k} spans <= A_min or >= A_max",
            )
        if n_large:
            return Infeasible(InfeasibleReason.AREA_TOO_LARGE, f"every group of {k} spans >= A_max")
        return Infeasible(InfeasibleReason.AREA_TOO_SMALL, f"every group of {k} spans <= A_min")
    chosen = np.sort(order[idx])
    members = np.vstack((np.asarray(own_xy, dtype=np.float64), cand[chosen]))
    cx, cy = members.mean(axis=0)
    return Group(
        indices=tuple(int(i) for i in chosen),
        area_m2=float(area_m2),
        sse_m2=float(sse),
        centroid_xy=(float(cx), float(cy)),
        exact=bool(complete),
        nodes=int(nodes),
    )


def warm_up() -> None:
    """Load (or compile) the numba kernels now rather than on the first query (~1 s cold)."""
    pts = np.array([[10.0, 0.0], [0.0, 10.0], [10.0, 10.0], [20.0, 5.0]])
    select_group((0.0, 0.0), pts, 3, 1.0, 1e6, node_budget=1)
    select_group((0.0, 0.0), pts, 3, 1.0, 1e6)


__all__ = [
    "DEFAULT_NODE_BUDGET",
    "AreaMode",
    "Group",
    "Infeasible",
    "InfeasibleReason",
    "group_area_m2",
    "select_group",
    "sse_m2",
    "warm_up",
]
