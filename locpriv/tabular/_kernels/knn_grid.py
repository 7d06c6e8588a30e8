"""Grid index for the k-nearest queries of the p-sensitive methods when d <= 2 (numba).

A grid over the data's box (about 8 records per cell) keeps per-cell lists of the live compact
positions, updated on swap-remove; a query walks rings of cells around the query point with the
(distance, position) key of the plain pass until the records outside the rings are provably
further than the kth. Answers equal :func:`.knn._knn`'s, ties included.
:func:`_grid_pass` is sec-pk's candidate pass on the same grid (it also finds the nearest
record of every wanted SEC).

numba cache: see the maintenance note of :mod:`locpriv.tabular._kernels`.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from locpriv.tabular._kernels.knn import _GRID_MIN, _lex_insert

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@numba.njit(cache=True, nogil=True)
def _grid_build(  # noqa: PLR0917
    XT: FloatArray,
    lo: FloatArray,
    hi: FloatArray,
    G: int,
    cellid: IntArray,
    cstart: IntArray,
    ccnt: IntArray,
    cm: IntArray,
    slot: IntArray,
) -> FloatArray:
    """A G^d grid (d <= 2) over the box [lo, hi]: per cell the positions of its live records
    (``cm[cstart[c] : cstart[c] + ccnt[c]]``), ``slot`` the index of a position in ``cm``.
    Returns the cell widths."""
    d, n = XT.shape
    w = np.empty(d)
    for j in range(d):
        w[j] = (hi[j] - lo[j]) / G if hi[j] > lo[j] else 1.0
    ncell = G**d
    for c in range(ncell):
        ccnt[c] = 0
    for t in range(n):
        c = 0
        mul = 1
        for j in range(d):
            cj = int((XT[j, t] - lo[j]) / w[j])
            cj = min(max(cj, 0), G - 1)
            c += cj * mul
            mul *= G
        cellid[t] = c
        ccnt[c] += 1
    cstart[0] = 0
    for c in range(ncell):
        cstart[c + 1] = cstart[c] + ccnt[c]
        ccnt[c] = 0
    for t in range(n):
        c = cellid[t]
        s = cstart[c] + ccnt[c]
        cm[s] = t
        slot[t] = s
        ccnt[c] += 1
    return w


@numba.njit(cache=True, nogil=True)
def _grid_index(XT: FloatArray, lo: FloatArray, hi: FloatArray):  # type: ignore[no-untyped-def]
    """The grid of the records ``XT`` (d × n) over the box [lo, hi] when d <= 2 and n is at
    least ``_GRID_MIN`` (about 8 records per cell), else unused empty arrays. Returns
    ``(use, G, cellid, slot, cm, cstart, ccnt, w)`` (see :func:`_grid_build`)."""
    d, n = XT.shape
    use = d <= 2 and n >= _GRID_MIN
    G = max(1, int((n / 8.0) ** (1.0 / d))) if use else 1
    cellid = np.empty(n if use else 0, dtype=np.int64)
    slot = np.empty(n if use else 0, dtype=np.int64)
    cm = np.empty(n if use else 0, dtype=np.int64)
    cstart = np.empty(G**d + 1 if use else 1, dtype=np.int64)
    ccnt = np.empty(G**d if use else 0, dtype=np.int64)
    w = np.ones(d)
    if use:
        w = _grid_build(XT, lo, hi, G, cellid, cstart, ccnt, cm, slot)
    return use, G, cellid, slot, cm, cstart, ccnt, w


@numba.njit(cache=True, nogil=True)
def _grid_remove(  # noqa: PLR0917
    t: int,
    last: int,
    cellid: IntArray,
    cstart: IntArray,
    ccnt: IntArray,
    cm: IntArray,
    slot: IntArray,
) -> None:
    """Position ``t`` leaves; the record at position ``last`` then moves to ``t`` (swap-remove)."""
    c = cellid[t]
    e = cstart[c] + ccnt[c] - 1
    s = slot[t]
    u = cm[e]
    cm[s] = u
    slot[u] = s
    ccnt[c] -= 1
    if last != t:
        s = slot[last]
        cm[s] = t
        slot[t] = s
        cellid[t] = cellid[last]


@numba.njit(cache=True, nogil=True)
def _knn_grid(  # noqa: PLR0917
    XT: FloatArray,
    nu: int,
    q: FloatArray,
    self_t: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    lo: FloatArray,
    w: FloatArray,
    G: int,
    cstart: IntArray,
    ccnt: IntArray,
    cm: IntArray,
) -> int:
    """:func:`_knn_range` over all live records by rings of grid cells around ``q`` (d <= 2).

    The plain pass keeps the ``cap`` smallest (squared distance, position) pairs (positions
    arrive in order); here candidates are inserted by that same key, ring after ring, until the
    records outside the rings seen are provably further than the kth (distance to the rings'
    box, less a slack far above rounding). Returns -1 when the rings get too many cells for
    the live records (the caller then makes the plain pass).
    """
    d = XT.shape[0]
    cq = np.empty(d, dtype=np.int64)
    scale = 0.0
    for j in range(d):
        cj = int((q[j] - lo[j]) / w[j])
        cq[j] = min(max(cj, 0), G - 1)
        scale = max(scale, abs(lo[j]) + G * w[j] + abs(q[j]))
    bp = np.empty(cap, dtype=np.int64)
    size = 0
    if self_t >= 0:
        size = _lex_insert(hd, ht, bp, size, cap, -1.0, self_t, self_t)
    cells = 0
    for r in range(G + 1):
        # the cells of ring r (Chebyshev distance r from cq), row by row
        i_lo = cq[0] - r
        i_hi = cq[0] + r
        for i in range(max(i_lo, 0), min(i_hi, G - 1) + 1):
            edge = abs(i - cq[0]) == r
            if d == 1:
                if not edge:
                    continue
                cstep = 1
                j0 = 0
                j1 = 0
            else:
                j0 = cq[1] - r
                j1 = cq[1] + r
                cstep = 1 if edge or r == 0 else 2 * r
            jj = j0
            while jj <= j1:
                if 0 <= jj < G:
                    c = i + jj * G if d == 2 else i
                    cells += 1
                    for s in range(cstart[c], cstart[c] + ccnt[c]):
                        tpos = cm[s]
                        if tpos == self_t:
                            continue
                        a = 0.0
                        for col in range(d):
                            diff = XT[col, tpos] - q[col]
                            a += diff * diff
                        size = _lex_insert(hd, ht, bp, size, cap, a, tpos, tpos)
                jj += cstep
        gap = np.inf
        whole = True
        for j in range(d):
            if cq[j] - r > 0:
                whole = False
                gap = min(gap, q[j] - (lo[j] + (cq[j] - r) * w[j]))
            if cq[j] + r < G - 1:
                whole = False
                gap = min(gap, lo[j] + (cq[j] + r + 1) * w[j] - q[j])
        if whole:
            return size
        gap -= 1e-9 * scale
        if size == cap and gap > 0.0 and gap * gap > hd[cap - 1] * (1.0 + 1e-9):
            return size
        if cells * 8 > nu + 64:
            return -1
    return size  # pragma: no cover - the last ring covers the grid


@numba.njit(cache=True, nogil=True)
def _grid_pass(  # noqa: PLR0917
    XT: FloatArray,
    nu: int,
    xs: FloatArray,
    best_t: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    secc: IntArray,
    top: IntArray,
    rem: IntArray,
    near_d: FloatArray,
    near_t: IntArray,
    lo: FloatArray,
    w: FloatArray,
    G: int,
    cstart: IntArray,
    ccnt: IntArray,
    cm: IntArray,
) -> int:
    """The candidate pass by rings of grid cells (d <= 2); -1 when the rings get too many cells.

    The plain pass ends with ``near_t[v]`` = the record of wanted SEC v of smallest (distance,
    position) and the buffer = the ``cap`` smallest (distance, position) pairs (seed first at
    -1); the same keys are used here, so the outcome is the same. It stops when the records
    outside the rings are provably further than both the kth and every wanted SEC's nearest
    (SECs without live records are not waited for).
    """
    d = XT.shape[0]
    cq = np.empty(d, dtype=np.int64)
    scale = 0.0
    for j in range(d):
        cj = int((xs[j] - lo[j]) / w[j])
        cq[j] = min(max(cj, 0), G - 1)
        scale = max(scale, abs(lo[j]) + G * w[j] + abs(xs[j]))
    bp = np.empty(cap, dtype=np.int64)
    size = _lex_insert(hd, ht, bp, 0, cap, -1.0, best_t, best_t)
    v = secc[best_t]
    for w_ in top:
        if w_ == v:
            near_d[v] = -1.0
            near_t[v] = best_t
    cells = 0
    for r in range(G + 1):
        for i in range(max(cq[0] - r, 0), min(cq[0] + r, G - 1) + 1):
            edge = abs(i - cq[0]) == r
            if d == 1:
                if not edge:
                    continue
                j0 = 0
                j1 = 0
                cstep = 1
            else:
                j0 = cq[1] - r
                j1 = cq[1] + r
                cstep = 1 if edge or r == 0 else 2 * r
            jj = j0
            while jj <= j1:
                if 0 <= jj < G:
                    c = i + jj * G if d == 2 else i
                    cells += 1
                    for s in range(cstart[c], cstart[c] + ccnt[c]):
                        t = cm[s]
                        if t == best_t:
                            continue
                        a = 0.0
                        for col in range(d):
                            diff = XT[col, t] - xs[col]
                            a += diff * diff
                        v = secc[t]
                        if a < near_d[v] or (a == near_d[v] and t < near_t[v]):
                            for w_ in top:
                                if w_ == v:
                                    near_d[v] = a
                                    near_t[v] = t
                        size = _lex_insert(hd, ht, bp, size, cap, a, t, t)
                jj += cstep
        gap = np.inf
        whole = True
        for j in range(d):
            if cq[j] - r > 0:
                whole = False
                gap = min(gap, xs[j] - (lo[j] + (cq[j] - r) * w[j]))
            if cq[j] + r < G - 1:
                whole = False
                gap = min(gap, lo[j] + (cq[j] + r + 1) * w[j] - xs[j])
        if whole:
            return size
        lim = hd[cap - 1] if size == cap else np.inf
        for w_ in top:
            if rem[w_] > 0:
                lim = max(lim, near_d[w_])
        gap -= 1e-9 * scale
        if gap > 0.0 and gap * gap > lim * (1.0 + 1e-9):
            return size
        if cells * 8 > nu + 64:
            return -1
    return size  # pragma: no cover - the last ring covers the grid
