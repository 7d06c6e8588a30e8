"""Cluster state and candidate scans of the EnhancedPKClustering kernel (:mod:`.enhanced_pk`):
Definitions 9-12 evaluated incrementally, with exactly the arithmetic of the reference
(:mod:`locpriv.tabular.traces.enhanced_pk`), so that ties fall the same way.

A cluster keeps its size, the numerical bounds ``lo``/``hi``, its first member ``rep`` and, per
categorical attribute, the level of its lowest common ancestor (in a tree, the largest LCA level
of ``rep`` with any member), its bracket ``B`` (``IL = size * B``) and, per confidential
attribute, its first ``p`` distinct values (enough for Div and Hom, which cap at p).

The scans write Div and IL inline in their loops: a call per candidate with this many array
arguments costs more than the arithmetic (reference counting at each call).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BEST_MATCH = 0  # largest Div, then smallest IL increase: the index of the best
LEAST_IL = 1  # smallest IL of the cluster with the tuple: the index of the best
ALL_KEYS = 2  # Div and IL increase of every candidate, into ``out_div`` / ``out_key``


@numba.njit(cache=True, nogil=True)
def _scan(  # noqa: PLR0917
    mode: int,
    c: int,
    rows: IntArray,
    num: FloatArray,
    inv: FloatArray,
    leaves: IntArray,
    lca: IntArray,
    invh: FloatArray,
    codes: IntArray,
    p: int,
    size: IntArray,
    lo: FloatArray,
    hi: FloatArray,
    rep: IntArray,
    lev: IntArray,
    br: FloatArray,
    vals: IntArray,
    nd: IntArray,
    out_div: IntArray,
    out_key: FloatArray,
) -> int:
    """Candidates ``rows`` (ascending) for cluster ``c``. The key is ``(|c| + 1) * B(c + t) -
    base`` with ``base = |c| * B(c)`` (the IL increase) or 0 (``LEAST_IL``: the IL of
    ``c + t``); Div is Definition 11 times r. Ties go to the first row. A partial sum that
    already reaches the best key stops early: the terms are non-negative and rounding is
    monotone, so the full key would not be below it either."""
    s1 = size[c] + 1
    base = 0.0 if mode == LEAST_IL else size[c] * br[c]
    r = codes.shape[1]
    best = -1
    bd = -1
    bf = np.inf
    for q in range(rows.size):
        x = rows[q]
        dv = 0
        if mode != LEAST_IL:
            for a in range(r):
                y = nd[c, a]
                if y < p:
                    v = codes[x, a]
                    found = False
                    for e in range(y):
                        if vals[c, a, e] == v:
                            found = True
                    if not found:
                        dv += p - y
            if mode == BEST_MATCH and dv < bd:
                continue
        stop = bf if (mode == LEAST_IL or (mode == BEST_MATCH and dv == bd)) else np.inf
        out = 0.0
        cut = False
        for j in range(num.shape[1]):
            v = num[x, j]
            out = out + (max(hi[c, j], v) - min(lo[c, j], v)) * inv[j]
            if s1 * out - base >= stop:
                cut = True
                break
        if cut:
            continue
        for j in range(leaves.shape[1]):
            lv = lev[c, j]
            if s1 > 1:
                lv = max(lv, lca[j, leaves[rep[c], j], leaves[x, j]])
            out = out + lv * invh[j]
        f = s1 * out - base
        if mode == ALL_KEYS:
            out_div[q] = dv
            out_key[q] = f
        elif dv > bd or f < bf:
            best, bd, bf = q, dv, f
    return best


@numba.njit(cache=True, nogil=True)
def _least_increase(  # noqa: PLR0917
    x: int,
    clusters: IntArray,
    num: FloatArray,
    inv: FloatArray,
    leaves: IntArray,
    lca: IntArray,
    invh: FloatArray,
    size: IntArray,
    lo: FloatArray,
    hi: FloatArray,
    rep: IntArray,
    lev: IntArray,
    br: FloatArray,
) -> int:
    """Index in ``clusters`` of the cluster whose IL grows least with tuple ``x`` (first on
    ties); the same arithmetic and early stop as :func:`_scan`."""
    best = -1
    bf = np.inf
    for i in range(clusters.size):
        c = clusters[i]
        s1 = size[c] + 1
        base = size[c] * br[c]
        out = 0.0
        cut = False
        for j in range(num.shape[1]):
            v = num[x, j]
            out = out + (max(hi[c, j], v) - min(lo[c, j], v)) * inv[j]
            if s1 * out - base >= bf:
                cut = True
                break
        if cut:
            continue
        for j in range(leaves.shape[1]):
            lv = lev[c, j]
            if s1 > 1:
                lv = max(lv, lca[j, leaves[rep[c], j], leaves[x, j]])
            out = out + lv * invh[j]
        f = s1 * out - base
        if f < bf:
            best, bf = i, f
    return best


@numba.njit(cache=True, nogil=True)
def _hom(c: int, nd: IntArray, p: int) -> int:
    """Definition 12 times r (0 iff the cluster is p-sensitive)."""
    tot = 0
    for a in range(nd.shape[1]):
        tot += p - nd[c, a]
    return tot


@numba.njit(cache=True, nogil=True)
def _add(  # noqa: PLR0917
    c: int,
    x: int,
    num: FloatArray,
    inv: FloatArray,
    leaves: IntArray,
    lca: IntArray,
    invh: FloatArray,
    codes: IntArray,
    p: int,
    lab: IntArray,
    size: IntArray,
    lo: FloatArray,
    hi: FloatArray,
    rep: IntArray,
    lev: IntArray,
    br: FloatArray,
    vals: IntArray,
    nd: IntArray,
    head: IntArray,
    nxt: IntArray,
) -> None:
    """Record ``x`` joins cluster ``c``."""
    lab[x] = c
    nxt[x] = head[c]
    head[c] = x
    if size[c] == 0:
        rep[c] = x
    for j in range(leaves.shape[1]):
        lev[c, j] = max(lev[c, j], lca[j, leaves[rep[c], j], leaves[x, j]])
    for j in range(num.shape[1]):
        lo[c, j] = min(lo[c, j], num[x, j])
        hi[c, j] = max(hi[c, j], num[x, j])
    size[c] += 1
    out = 0.0  # the bracket from the bounds, as the reference computes it from the members
    for j in range(num.shape[1]):
        out = out + (hi[c, j] - lo[c, j]) * inv[j]
    for j in range(leaves.shape[1]):
        out = out + lev[c, j] * invh[j]
    br[c] = out
    for a in range(codes.shape[1]):
        y = nd[c, a]
        if y < p:
            v = codes[x, a]
            found = False
            for e in range(y):
                if vals[c, a, e] == v:
                    found = True
            if not found:
                vals[c, a, y] = v
                nd[c, a] = y + 1


@numba.njit(cache=True, nogil=True)
def _members(c: int, head: IntArray, nxt: IntArray) -> IntArray:
    """Rows of cluster ``c``, ascending."""
    cnt = 0
    x = head[c]
    while x >= 0:
        cnt += 1
        x = nxt[x]
    out = np.empty(cnt, dtype=np.int64)
    x = head[c]
    i = 0
    while x >= 0:
        out[i] = x
        i += 1
        x = nxt[x]
    out.sort()
    return out
