"""k-nearest queries on the block index (:mod:`.block_index`), numba.

A query bounds every block from its box and computes exact distances only in blocks whose bound
does not rule them out; records enter by the plain pass's (squared distance, compact position)
key, so the answers are :func:`.knn._knn`'s, ties included.

numba cache: see the maintenance note of :mod:`locpriv.tabular._kernels`.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from locpriv.tabular._kernels.block_index import _BK_SEEDS, _bk_bounds, _bk_seeds
from locpriv.tabular._kernels.knn import _SLACK, _chunk_dist, _survivors

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@numba.njit(cache=True, nogil=True)
def _key_insert(  # noqa: PLR0917
    hd: FloatArray, ht: IntArray, size: int, cap: int, dv: float, key: int
) -> int:
    """Insert (dv, key) into the (distance, key)-ascending buffer hd/ht (capacity ``cap``)."""
    if size == cap:
        if dv > hd[size - 1] or (dv == hd[size - 1] and key > ht[size - 1]):
            return size
        size -= 1
    j = size
    while j > 0 and (hd[j - 1] > dv or (hd[j - 1] == dv and ht[j - 1] > key)):
        hd[j] = hd[j - 1]
        ht[j] = ht[j - 1]
        j -= 1
    hd[j] = dv
    ht[j] = key
    return size + 1


@numba.njit(cache=True, nogil=True)
def _n_prune_bk(d: int) -> int:
    """Columns of the partial-distance bound in the block queries: about two thirds (at most 8)."""
    return max(1, min(8, (2 * d) // 3))


@numba.njit(cache=True, nogil=True)
def _bk_block_dist(  # noqa: PLR0917
    BT: FloatArray,
    p0: int,
    L: int,
    q: FloatArray,
    cols: IntArray,
    J: int,
    lim: float,
    part: FloatArray,
    surv: IntArray,
    acc: FloatArray,
) -> int:
    """The records ``p0..p0+L-1`` of a block whose squared distance to ``q`` may be at most
    ``lim``: their offsets to ``surv``, their exact squared distances (columns added in order
    0..d-1, bit-identical to :func:`_chunk_dist`) to ``acc``; returns how many.

    With ``lim = inf`` all records, in one vectorised pass. Otherwise a partial distance over
    ``cols[:J]`` (vectorised, four columns per sweep) is a lower bound: a record is dropped
    only if it exceeds ``lim`` by more than a relative slack far above rounding error.
    """
    if lim == np.inf:
        _chunk_dist(BT, p0, L, q, acc)
        for i in range(L):
            surv[i] = i
        return L
    for i in range(L):
        part[i] = 0.0
    u = 0
    while u + 4 <= J:
        j0 = cols[u]
        j1 = cols[u + 1]
        j2 = cols[u + 2]
        j3 = cols[u + 3]
        q0 = q[j0]
        q1 = q[j1]
        q2 = q[j2]
        q3 = q[j3]
        r0 = BT[j0, p0 : p0 + L]
        r1 = BT[j1, p0 : p0 + L]
        r2 = BT[j2, p0 : p0 + L]
        r3 = BT[j3, p0 : p0 + L]
        for i in range(L):
            t0 = r0[i] - q0
            t1 = r1[i] - q1
            t2 = r2[i] - q2
            t3 = r3[i] - q3
            part[i] += (t0 * t0 + t1 * t1) + (t2 * t2 + t3 * t3)
        u += 4
    while u < J:
        j0 = cols[u]
        q0 = q[j0]
        r0 = BT[j0, p0 : p0 + L]
        for i in range(L):
            t0 = r0[i] - q0
            part[i] += t0 * t0
        u += 1
    cut = lim * (1.0 + 4.0 * _SLACK)
    c = 0
    for i in range(L):
        c += part[i] <= cut
    if c == 0:
        return 0
    return _survivors(BT, p0, L, q, part, cut, surv, acc)


@numba.njit(cache=True, nogil=True)
def _bk_query(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    ix,
    ws,
    q: FloatArray,
    self_o: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    pos_of: IntArray,
    center: FloatArray,
    sec: IntArray,
    top: IntArray,
    rem: IntArray,
    near_d: FloatArray,
    near_t: IntArray,
    guess: float = np.inf,
) -> int:
    """:func:`_knn` through the block index: the ``cap`` smallest (squared distance, compact
    position) pairs of the live records into hd/ht (compact positions), original record
    ``self_o`` (if >= 0) first at distance -1. Returns the number kept.

    With a non-empty ``top`` (SEC ids; ``sec[o]`` the SEC of original record o, ``rem[v]`` the
    live records of SEC v) also, for each SEC v of ``top``, the smallest (distance, position)
    pair of its live records (``self_o`` at -1) into ``near_d[v]``/``near_t[v]``, which the
    caller set to (inf, -1): the candidate pass of :mod:`.sec_pk`.

    The plain pass keeps exactly these pairs (records arrive in position order and a later one
    wins only if strictly nearer); here records arrive block by block and win by the same
    (distance, position) key. A block is skipped only if its box bound exceeds both the kth
    distance and every wanted SEC's nearest (no record in it can change anything, ties
    included), a record only if its partial distance does, by more than the slack.

    ``guess`` (a guess of the final bound, e.g. from the previous query) prunes from the first
    block on; if the kth distance or a wanted SEC's nearest does not end below it, the query is
    repeated without it (as :func:`_knn_range` does).
    """
    BT, bidx, pblk, bstart, bcnt, _, _, bpos = ix
    mind, vis, stamp, seeds, part, surv, acc, cols, gap = ws
    nb = bcnt.shape[0]
    ntop = top.shape[0]
    d = BT.shape[0]
    # columns by decreasing (q_j - center_j)**2 (insertion sort; any order is correct)
    for j in range(d):
        g = (q[j] - center[j]) ** 2
        u = j
        while u > 0 and gap[u - 1] < g:
            gap[u] = gap[u - 1]
            cols[u] = cols[u - 1]
            u -= 1
        gap[u] = g
        cols[u] = j
    J = _n_prune_bk(d)
    _bk_bounds(ix, q, mind)
    nseed = 0
    if self_o >= 0:
        seeds[0] = pblk[bpos[self_o]]
        nseed = 1
    nseed += _bk_seeds(mind, _BK_SEEDS, seeds[nseed:])
    size = 0
    for attempt in range(2):
        gs = guess if attempt == 0 else np.inf
        if attempt == 1:  # the guess was too small: again without it, from scratch
            for w in range(ntop):
                near_d[top[w]] = np.inf
                near_t[top[w]] = -1
        stamp[0] += 1
        st = stamp[0]
        size = 0
        kth = np.inf
        if self_o >= 0:
            ks = pos_of[self_o]
            size = _key_insert(hd, ht, size, cap, -1.0, ks)
            if size == cap:
                kth = hd[cap - 1]
            for w in range(ntop):
                if top[w] == sec[self_o]:
                    near_d[top[w]] = -1.0
                    near_t[top[w]] = ks
        # the wanted SECs' nearest bound the pass too (SECs without live records are not
        # waited for)
        wmax = -np.inf
        for w in range(ntop):
            if rem[top[w]] > 0:
                wmax = max(wmax, near_d[top[w]])
        lim = min(max(kth, wmax), gs)
        for step in range(nseed + nb):
            b = seeds[step] if step < nseed else step - nseed
            if vis[b] == st:
                continue
            vis[b] = st
            if mind[b] > lim or bcnt[b] == 0:
                continue
            p0 = bstart[b]
            ns = _bk_block_dist(BT, p0, bcnt[b], q, cols, J, lim, part, surv, acc)
            for s in range(ns):
                a = acc[s]
                if a > lim:
                    continue
                o = bidx[p0 + surv[s]]
                if o == self_o:
                    continue
                key = pos_of[o]
                if ntop > 0:
                    v = sec[o]
                    for w in range(ntop):
                        if top[w] == v and (a < near_d[v] or (a == near_d[v] and key < near_t[v])):
                            near_d[v] = a
                            near_t[v] = key
                            wmax = -np.inf
                            for w2 in range(ntop):
                                if rem[top[w2]] > 0:
                                    wmax = max(wmax, near_d[top[w2]])
                if a <= kth:
                    size = _key_insert(hd, ht, size, cap, a, key)
                    if size == cap:
                        kth = hd[cap - 1]
                lim = min(max(kth, wmax), gs)
        if gs == np.inf:
            break
        # every record left out is further than the guess (its box bound, partial distance
        # or distance exceeds it), so the answer stands if the kth and every wanted SEC's
        # nearest ended strictly below the guess
        ok = size == cap and hd[cap - 1] < gs
        for w in range(ntop):
            if rem[top[w]] > 0 and not near_d[top[w]] < gs:
                ok = False
        if ok:
            break
    return size


@numba.njit(cache=True, nogil=True)
def _bk_knn(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    ix,
    ws,
    q: FloatArray,
    self_o: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    pos_of: IntArray,
    center: FloatArray,
    guess: float = np.inf,
) -> int:
    """:func:`_bk_query` without SECs: the ``cap`` nearest live records (see there)."""
    none = np.empty(0, dtype=np.int64)
    return _bk_query(
        ix,
        ws,
        q,
        self_o,
        cap,
        hd,
        ht,
        pos_of,
        center,
        none,
        none,
        none,
        np.empty(0),
        none,
        guess,
    )
