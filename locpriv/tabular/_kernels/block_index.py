"""Block index for the k-nearest queries of the p-sensitive methods when d > 2 (numba): build,
removal, box bounds. The queries are in :mod:`.block_query`; the k-d tree order, the box and the
swap-remove of a record from its block also serve the MDAV block kernel (:mod:`.mdav_blocks`).

The live records are copied, column by column, into ``BT`` in the leaf order of a k-d tree
(median cuts on the widest column) and cut into blocks of at most a few hundred records; each
block keeps its live records at the front of its span and the bounding box of the records it
held (tightened when a record on the box leaves). A query bounds every block from its box and
computes distances only in blocks whose bound does not rule them out. The index is a tuple
``(BT, bidx, pblk, bstart, bcnt, blo, bhi, bpos)``: ``bidx[p]`` the original index at block
position p, ``pblk[p]`` its block, ``bstart``/``bcnt`` the span start and live count of each
block, ``blo``/``bhi`` (d × nb) the boxes and ``bpos[o]`` the block position of original
record o. Ties are decided by the caller's compact position ``pos_of[o]``, the key of the
plain passes, so a query's answer does not depend on the layout.

numba cache: see the maintenance note of :mod:`locpriv.tabular._kernels`.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# records per block: at most 512 while the records number <= 32768 (the bounds prune little
# there, and larger blocks cost less per record), else at most 256 (100k x 13 uniform: ~5 %
# faster than 512; 128 was slower at both sizes)
_BLOCK = 256
_BLOCK_SMALL_N = 512
_SMALL_N = 32768
_BK_MIN = 1024  # live records from which the block index is used
_BK_SEEDS = 4  # blocks visited first: the nearest boxes


@numba.njit(cache=True, nogil=True)
def _kd_order(XT: FloatArray, nu: int, B: int, perm: IntArray, starts: IntArray) -> int:
    """Leaf order of a k-d tree over the compact records ``0..nu-1`` into ``perm[:nu]``.

    Median cuts (a selection, linear per level) on the widest column of each node; leaves hold
    at most ``B`` records. Writes the leaf starts to ``starts`` and returns the number of leaves.
    """
    d = XT.shape[0]
    for t in range(nu):
        perm[t] = t
    cap = 2 * (nu // max(B, 1)) + 4
    st_lo = np.empty(cap, dtype=np.int64)
    st_hi = np.empty(cap, dtype=np.int64)
    key = np.empty(nu)
    tmp = np.empty(nu, dtype=np.int64)
    nb = 0
    top = 1
    st_lo[0] = 0
    st_hi[0] = nu
    while top > 0:
        top -= 1
        lo = st_lo[top]
        hi = st_hi[top]
        if hi - lo <= B:
            starts[nb] = lo
            nb += 1
            continue
        jw = 0
        wbest = -1.0
        for j in range(d):
            w = kd_width(XT, perm, lo, hi, j)
            if w > wbest:
                wbest = w
                jw = j
        mid = kd_cut(XT, perm, lo, hi, jw, key, tmp)
        st_lo[top] = mid  # right half popped after the left one: leaves in left-to-right order
        st_hi[top] = hi
        top += 1
        st_lo[top] = lo
        st_hi[top] = mid
        top += 1
    return nb


@numba.njit(cache=True, nogil=True)
def kd_width(XT: FloatArray, perm: IntArray, lo: int, hi: int, j: int) -> float:
    """Width (max - min) of column ``j`` over the records ``perm[lo:hi]``."""
    mn = np.inf
    mx = -np.inf
    for t in range(lo, hi):
        v = XT[j, perm[t]]
        mn = min(mn, v)
        mx = max(mx, v)
    return mx - mn


@numba.njit(cache=True, nogil=True)
def kd_cut(  # noqa: PLR0917
    XT: FloatArray, perm: IntArray, lo: int, hi: int, jw: int, key: FloatArray, tmp: IntArray
) -> int:
    """One median cut of :func:`_kd_order`: ``perm[lo:hi]`` reordered so that the records below
    the median of column ``jw`` come first, then those equal to it, then those above (stable);
    returns the middle ``(lo + hi) // 2``. Touches ``perm``, ``key`` and ``tmp`` in
    ``lo:hi`` only, so cuts of disjoint ranges may run at once (``nogil``)."""
    for t in range(lo, hi):
        key[t] = XT[jw, perm[t]]
    mid = (lo + hi) // 2
    kv = np.partition(key[lo:hi], mid - lo)[mid - lo]
    # stable three-way split: below kv, then kv (as many as fit left of mid), then above
    a = lo
    for t in range(lo, hi):
        if key[t] < kv:
            tmp[a] = perm[t]
            a += 1
    for t in range(lo, hi):
        if key[t] == kv:
            tmp[a] = perm[t]
            a += 1
    for t in range(lo, hi):
        if key[t] > kv:
            tmp[a] = perm[t]
            a += 1
    for t in range(lo, hi):
        perm[t] = tmp[t]
    return mid


@numba.njit(cache=True, nogil=True)
def _bk_box(  # noqa: PLR0917
    BT: FloatArray, p0: int, cnt: int, b: int, blo: FloatArray, bhi: FloatArray
) -> None:
    """Bounding box of the live records ``p0 .. p0+cnt-1`` into block ``b`` (empty: +-inf,
    so every bound to it is inf)."""
    for j in range(BT.shape[0]):
        mn = np.inf
        mx = -np.inf
        r = BT[j, p0 : p0 + cnt]
        for i in range(cnt):
            mn = min(mn, r[i])
            mx = max(mx, r[i])
        blo[j, b] = mn
        bhi[j, b] = mx


@numba.njit(cache=True, nogil=True)
def _leave_block(  # noqa: PLR0917
    BT: FloatArray, p: int, last: int, blo: FloatArray, bhi: FloatArray, b: int
) -> bool:
    """The record at position ``p`` leaves its block, whose live records end at ``last`` and
    whose box is slot ``b``: the block's last live record moves to ``p`` (swap-remove of the
    columns; the caller moves its bookkeeping). Returns whether the record lay on the box, the
    only case where the box must be recomputed to stay tight."""
    edge = False
    for j in range(BT.shape[0]):
        v = BT[j, p]
        if v == blo[j, b] or v == bhi[j, b]:
            edge = True
            break
    if p != last:
        for j in range(BT.shape[0]):
            BT[j, p] = BT[j, last]
    return edge


@numba.njit(cache=True, nogil=True)
def _bk_build(XT: FloatArray, nu: int, orig: IntArray, n: int):  # type: ignore[no-untyped-def]
    """Block index of the compact live records ``0..nu-1`` (``orig``: their original indices,
    out of ``n``) and the workspace of its queries: returns ``(ix, ws)``."""
    d = XT.shape[0]
    perm = np.empty(nu, dtype=np.int64)
    B = _BLOCK_SMALL_N if nu <= _SMALL_N else _BLOCK
    starts = np.empty(2 * (nu // B) + 4, dtype=np.int64)
    nb = _kd_order(XT, nu, B, perm, starts)
    BT = np.empty((d, nu))
    bidx = np.empty(nu, dtype=np.int64)
    pblk = np.empty(nu, dtype=np.int64)
    bpos = np.full(n, -1, dtype=np.int64)
    for j in range(d):
        for p in range(nu):
            BT[j, p] = XT[j, perm[p]]
    for p in range(nu):
        o = orig[perm[p]]
        bidx[p] = o
        bpos[o] = p
    bstart = np.empty(nb + 1, dtype=np.int64)
    bstart[:nb] = starts[:nb]
    bstart[nb] = nu
    bcnt = np.empty(nb, dtype=np.int64)
    blo = np.empty((d, nb))
    bhi = np.empty((d, nb))
    for b in range(nb):
        bcnt[b] = bstart[b + 1] - bstart[b]
        for p in range(bstart[b], bstart[b + 1]):
            pblk[p] = b
        _bk_box(BT, bstart[b], bcnt[b], b, blo, bhi)
    # query workspace (allocated once per build): box bounds, visit stamps, seeds, block buffers
    bmax = max(_BLOCK, _BLOCK_SMALL_N)
    mind = np.empty(nb)
    vis = np.zeros(nb, dtype=np.int64)
    stamp = np.zeros(1, dtype=np.int64)
    seeds = np.empty(_BK_SEEDS + 1, dtype=np.int64)
    part = np.empty(bmax)
    surv = np.empty(bmax, dtype=np.int64)
    acc = np.empty(bmax)
    cols = np.empty(d, dtype=np.int64)
    gap = np.empty(d)
    ws = (mind, vis, stamp, seeds, part, surv, acc, cols, gap)
    return (BT, bidx, pblk, bstart, bcnt, blo, bhi, bpos), ws


@numba.njit(cache=True, nogil=True)
def _bk_remove(ix, o: int) -> None:  # type: ignore[no-untyped-def]
    """Original record ``o`` leaves the index (swap-remove within its block)."""
    BT, bidx, pblk, bstart, bcnt, blo, bhi, bpos = ix
    p = bpos[o]
    b = pblk[p]
    last = bstart[b] + bcnt[b] - 1
    edge = _leave_block(BT, p, last, blo, bhi, b)
    if p != last:
        u = bidx[last]
        bidx[p] = u
        bpos[u] = p
    bpos[o] = -1
    bcnt[b] -= 1
    if edge:
        _bk_box(BT, bstart[b], bcnt[b], b, blo, bhi)


@numba.njit(cache=True, nogil=True)
def _bk_bounds(ix, q: FloatArray, mind: FloatArray) -> None:  # type: ignore[no-untyped-def]
    """``mind[b]`` = squared distance from ``q`` to block b's box (inf for an empty block).

    The columns are added in order 0..d-1 from 0.0, as the exact distances are, and every term
    is at most the matching term of any record in the box (rounding is monotone), so the
    computed distance of a record in block b is never below ``mind[b]``.
    """
    blo = ix[5]
    bhi = ix[6]
    d, nb = blo.shape
    for b in range(nb):
        mind[b] = 0.0
    for j in range(d):
        qj = q[j]
        lr = blo[j]
        hr = bhi[j]
        for b in range(nb):
            g = max(0.0, lr[b] - qj, qj - hr[b])
            mind[b] += g * g


@numba.njit(cache=True, nogil=True)
def _bk_seeds(mind: FloatArray, take: int, out: IntArray) -> int:
    """The ``take`` blocks of smallest ``mind`` (finite only), nearest first; returns how many."""
    cnt = 0
    for b in range(mind.shape[0]):
        v = mind[b]
        if v == np.inf or (cnt == take and v >= mind[out[cnt - 1]]):
            continue
        t = cnt if cnt < take else take - 1
        if cnt < take:
            cnt += 1
        while t > 0 and v < mind[out[t - 1]]:
            out[t] = out[t - 1]
            t -= 1
        out[t] = b
    return cnt
