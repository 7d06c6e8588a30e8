"""Kernel of EnhancedPKClustering (Truta, Campan & Meyer 2007): the steps of the printed
algorithm over the cluster state of :mod:`.epk_state`, with the reference's tie-breaks
(:mod:`locpriv.tabular.traces.enhanced_pk`; tests compare the labels).

Work: Split and the p and k steps scan their candidate tuples once per tuple placed
(``O(n^2)`` overall, as the paper says). The rounds that give every cluster one tuple of
``pSEC^1_j`` pick, over and over, the best (tuple, cluster) pair left; the pairs' scores do not
change during a round (only the chosen cluster changes, and it leaves the round), so each
cluster keeps its best few tuples, sorted, in a heap keyed by the best of them, and a cluster
whose kept tuples were all taken by others sorts the tuples left again.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from locpriv.tabular.psensitive._kernels.epk_state import (
    ALL_KEYS,
    BEST_MATCH,
    LEAST_IL,
    _add,
    _hom,
    _least_increase,
    _members,
    _scan,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_TOP = 32  # tuples kept per cluster in the pSEC rounds


@numba.njit(cache=True, nogil=True)
def _less(hd: IntArray, hf: FloatArray, hc: IntArray, i: int, j: int) -> bool:
    """Heap order: larger Div, then smaller IL increase, then earlier cluster."""
    if hd[i] != hd[j]:
        return bool(hd[i] > hd[j])
    if hf[i] != hf[j]:
        return bool(hf[i] < hf[j])
    return bool(hc[i] < hc[j])


@numba.njit(cache=True, nogil=True)
def _swap(hd: IntArray, hf: FloatArray, hc: IntArray, i: int, j: int) -> None:
    hd[i], hd[j] = hd[j], hd[i]
    hf[i], hf[j] = hf[j], hf[i]
    hc[i], hc[j] = hc[j], hc[i]


@numba.njit(cache=True, nogil=True)
def _push(  # noqa: PLR0917
    hd: IntArray, hf: FloatArray, hc: IntArray, n: int, d: int, f: float, c: int
) -> int:
    hd[n] = d
    hf[n] = f
    hc[n] = c
    i = n
    while i > 0 and _less(hd, hf, hc, i, (i - 1) // 2):
        _swap(hd, hf, hc, i, (i - 1) // 2)
        i = (i - 1) // 2
    return n + 1


@numba.njit(cache=True, nogil=True)
def _pop(hd: IntArray, hf: FloatArray, hc: IntArray, n: int) -> int:
    """Remove the top (read it before); returns the new size."""
    n -= 1
    _swap(hd, hf, hc, 0, n)
    i = 0
    while True:
        a = 2 * i + 1
        if a >= n:
            break
        if a + 1 < n and _less(hd, hf, hc, a + 1, a):
            a += 1
        if not _less(hd, hf, hc, a, i):
            break
        _swap(hd, hf, hc, a, i)
        i = a
    return n


@numba.njit(cache=True, nogil=True)
def _epk_kernel(  # noqa: PLR0917
    num: FloatArray,
    inv: FloatArray,
    leaves: IntArray,
    lca: IntArray,
    invh: FloatArray,
    codes: IntArray,
    sec_rows: IntArray,
    sec_start: IntArray,
    M: int,
    iv: int,
    k: int,
    p: int,
) -> IntArray:
    """Labels ``0..v-1`` (final order of S). ``num`` (n × s) with ``inv`` = 1 / range (0 for a
    constant column); ``leaves`` (n × t) with ``lca[j]`` the LCA levels of hierarchy j and
    ``invh`` = 1 / height; ``codes``: confidential codes, hardest attribute first;
    ``sec_rows[sec_start[j]:sec_start[j+1]]``: rows of ``SEC^1_{j+1}``, ascending."""
    n = num.shape[0]
    r = codes.shape[1]
    lab = -np.ones(n, dtype=np.int64)
    size = np.zeros(M, dtype=np.int64)
    lo = np.full((M, num.shape[1]), np.inf)
    hi = np.full((M, num.shape[1]), -np.inf)
    rep = -np.ones(M, dtype=np.int64)
    lev = np.zeros((M, leaves.shape[1]), dtype=np.int64)
    br = np.zeros(M)
    vals = np.zeros((M, r, p), dtype=np.int64)
    nd = np.zeros((M, r), dtype=np.int64)
    head = -np.ones(M, dtype=np.int64)
    nxt = -np.ones(n, dtype=np.int64)
    nodiv = np.empty(0, dtype=np.int64)
    nokey = np.empty(0)
    free = np.empty(n, dtype=np.int64)

    # Split: SEC^1_{s_1} down to SEC^1_{p-iValue+1}, round robin over the clusters
    i = 0
    full = False
    for j in range(sec_start.size - 2, p - iv - 1, -1):
        nf = sec_start[j + 1] - sec_start[j]
        free[:nf] = sec_rows[sec_start[j] : sec_start[j + 1]]
        while nf > 0 and not full:
            q = 0  # into an empty cluster every tuple ties (Div r*p, IL increase 0)
            if size[i] > 0:
                q = _scan(BEST_MATCH, i, free[:nf], num, inv, leaves, lca, invh, codes, p, size,
                          lo, hi, rep, lev, br, vals, nd, nodiv, nokey)  # fmt: skip
            _add(i, free[q], num, inv, leaves, lca, invh, codes, p, lab, size, lo, hi, rep, lev,
                 br, vals, nd, head, nxt)  # fmt: skip
            free[q : nf - 1] = free[q + 1 : nf].copy()
            nf -= 1
            i += 1
            if i == M:
                if size[M - 1] < iv:
                    i = 0
                else:
                    full = True
        if full:
            break

    # for j = p - iValue down to 1: one tuple of SEC^1_j for every cluster, best pair first
    hd = np.empty(M, dtype=np.int64)
    hf = np.empty(M)
    hc = np.empty(M, dtype=np.int64)
    top = np.empty((M, _TOP), dtype=np.int64)
    tdv = np.empty((M, _TOP), dtype=np.int64)
    tf = np.empty((M, _TOP))
    ntop = np.zeros(M, dtype=np.int64)
    ptr = np.zeros(M, dtype=np.int64)
    for j in range(p - iv - 1, -1, -1):
        rows = sec_rows[sec_start[j] : sec_start[j + 1]]
        avail = rows.size
        hn = 0
        for c in range(M):
            _fill_top(c, rows, lab, top, tdv, tf, ntop, ptr, num, inv, leaves, lca, invh,
                      codes, p, size, lo, hi, rep, lev, br, vals, nd)  # fmt: skip
            hn = _push(hd, hf, hc, hn, tdv[c, 0], tf[c, 0], c)
        while hn > 0 and avail > 0:
            c = hc[0]
            x = top[c, ptr[c]]
            hn = _pop(hd, hf, hc, hn)
            if lab[x] < 0:
                _add(c, x, num, inv, leaves, lca, invh, codes, p, lab, size, lo, hi, rep,
                     lev, br, vals, nd, head, nxt)  # fmt: skip
                avail -= 1
                continue
            ptr[c] += 1
            if ptr[c] == ntop[c]:  # all taken; some tuple is free (avail > 0), so ntop was full
                _fill_top(c, rows, lab, top, tdv, tf, ntop, ptr, num, inv, leaves, lca,
                          invh, codes, p, size, lo, hi, rep, lev, br, vals, nd)  # fmt: skip
            q = ptr[c]
            hn = _push(hd, hf, hc, hn, tdv[c, q], tf[c, q], c)

    # T: the tuples not assigned; clusters most diverse first, then make each p-sensitive
    T = np.flatnonzero(lab < 0)
    nt = T.size
    homs = np.empty(M, dtype=np.int64)
    for c in range(M):
        homs[c] = _hom(c, nd, p)
    order = np.argsort(homs, kind="mergesort")
    h = 0
    while h < M and homs[order[h]] == 0:
        h += 1
    aux = M
    while h < aux:
        while h < aux and nt > 0:
            c = order[h]
            q = _scan(BEST_MATCH, c, T[:nt], num, inv, leaves, lca, invh, codes, p, size, lo,
                      hi, rep, lev, br, vals, nd, nodiv, nokey)  # fmt: skip
            _add(c, T[q], num, inv, leaves, lca, invh, codes, p, lab, size, lo, hi, rep, lev, br,
                 vals, nd, head, nxt)  # fmt: skip
            T[q : nt - 1] = T[q + 1 : nt].copy()
            nt -= 1
            if _hom(c, nd, p) == 0:
                h += 1
        if nt == 0 and h < aux:
            T = _members(order[aux - 1], head, nxt)  # redistribute the last cluster
            nt = T.size
            for x in T:
                lab[x] = -1
            aux -= 1

    # k: largest first; keep the u clusters of >= k and as many others as T can fill to k
    live = order[:aux][np.argsort(-size[order[:aux]], kind="mergesort")]
    u = 0
    while u < aux and size[live[u]] >= k:
        u += 1
    pool = nt
    for i in range(u, aux):
        pool += size[live[i]]
    v = min(aux, u + pool // k)
    for i in range(v, aux):
        for x in _members(live[i], head, nxt):
            lab[x] = -1
    T = np.flatnonzero(lab < 0)
    nt = T.size
    for i in range(u, v):
        c = live[i]
        while size[c] < k:
            q = _scan(LEAST_IL, c, T[:nt], num, inv, leaves, lca, invh, codes, p, size, lo, hi,
                      rep, lev, br, vals, nd, nodiv, nokey)  # fmt: skip
            _add(c, T[q], num, inv, leaves, lca, invh, codes, p, lab, size, lo, hi, rep, lev, br,
                 vals, nd, head, nxt)  # fmt: skip
            T[q : nt - 1] = T[q + 1 : nt].copy()
            nt -= 1
    live = live[:v]
    for q in range(nt):  # extra tuples: the cluster whose IL grows least
        i = _least_increase(T[q], live, num, inv, leaves, lca, invh, size, lo, hi, rep, lev, br)
        _add(live[i], T[q], num, inv, leaves, lca, invh, codes, p, lab, size, lo, hi, rep, lev,
             br, vals, nd, head, nxt)  # fmt: skip
    pos = -np.ones(M, dtype=np.int64)
    for i in range(v):
        pos[live[i]] = i
    out = np.empty(n, dtype=np.int64)
    for x in range(n):
        out[x] = pos[lab[x]]
    return out


@numba.njit(cache=True, nogil=True)
def _fill_top(  # noqa: PLR0917
    c: int,
    rows: IntArray,
    lab: IntArray,
    top: IntArray,
    tdv: IntArray,
    tf: FloatArray,
    ntop: IntArray,
    ptr: IntArray,
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
) -> None:
    """Cluster ``c``'s best ``_TOP`` free tuples of ``rows`` by (larger Div, smaller IL
    increase, lower row); at least one is free."""
    m = 0
    for x in rows:
        if lab[x] < 0:
            m += 1
    xs = np.empty(m, dtype=np.int64)
    m = 0
    for x in rows:
        if lab[x] < 0:
            xs[m] = x
            m += 1
    dv = np.empty(m, dtype=np.int64)
    f = np.empty(m)
    _scan(ALL_KEYS, c, xs, num, inv, leaves, lca, invh, codes, p, size, lo, hi, rep, lev, br,
          vals, nd, dv, f)  # fmt: skip
    o1 = np.argsort(f, kind="mergesort")  # rows ascending: stable sorts keep them so on ties
    o2 = o1[np.argsort(-dv[o1], kind="mergesort")]
    cnt = min(m, top.shape[1])
    for q in range(cnt):
        top[c, q] = xs[o2[q]]
        tdv[c, q] = dv[o2[q]]
        tf[c, q] = f[o2[q]]
    ntop[c] = cnt
    ptr[c] = 0
