"""Block-pruned exact MDAV kernel (the public API is :func:`locpriv.tabular.microagg.mdav.mdav`).

The records are laid out column by column (``XT``, d × n) in the leaf order of a k-d tree, cut
into blocks of at most ``B`` records. Each block keeps its live records at the front of its
span (a removed record is replaced by the block's last live one) and the bounding box of its
live records. A query (furthest record, or k-1 nearest, from a point) first bounds every block
from its box, in one vectorised loop over the blocks, and then computes exact distances only
in blocks the bounds cannot rule out. Exact distances add the columns in order 0..d-1 (as the
reference does), and bounds keep a relative slack far above rounding, so ties and near-ties
are decided exactly as the plain algorithm decides them.

It reuses the primitives of :mod:`.mdav_common` and the k-d tree, box and swap-remove helpers of
:mod:`.block_index` (numba cache: see :mod:`locpriv.tabular._kernels`).
"""

from __future__ import annotations

import numba
import numpy as np

from locpriv.tabular._kernels.block_index import _bk_box, _kd_order, _leave_block
from locpriv.tabular.microagg._kernels.mdav_common import (
    _SLACK,
    _chunk_sq,
    _fold,
    _insert,
    _r_group,
    _scan,
    _sqdist,
    _stops,
    _two_sum,
    furthest_from_centroid,
)

# slots of the diagnostic counters returned in ``stats`` (1-3: see furthest_from_centroid;
# ST_STOP = 7 as in mdav_common)
ST_ITER, ST_PIVOT, ST_LIST, ST_CCAND, ST_RBLOCKS, ST_SBLOCKS, ST_POINTS = range(7)
_SEEDS = 4  # blocks visited first: the nearest (and furthest) boxes


@numba.njit(cache=True, nogil=True)
def kd_blocks(X, B):  # type: ignore[no-untyped-def]
    """Leaf order of a k-d tree (median cuts on the widest column) and the leaf starts
    (``starts[-1] = n``); the tree is :func:`.block_index._kd_order`'s."""
    n = X.shape[0]
    perm = np.empty(n, dtype=np.int64)
    starts = np.empty(2 * (n // max(B, 1)) + 5, dtype=np.int64)
    nb = _kd_order(np.ascontiguousarray(X.T), n, max(B, 1), perm, starts)
    starts[nb] = n
    return perm, starts[: nb + 1].copy()


@numba.njit(cache=True, nogil=True)
def _bounds(q, blo, bhi, nact, lo_out, hi_out):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Squared min and max distance from ``q`` to the boxes of slots ``0..nact-1``."""
    for s in range(nact):
        lo_out[s] = 0.0
        hi_out[s] = 0.0
    for j in range(blo.shape[0]):
        qj = q[j]
        lr = blo[j, :nact]
        hr = bhi[j, :nact]
        for s in range(nact):
            a = lr[s] - qj
            b = qj - hr[s]
            g = max(0.0, a, b)
            lo_out[s] += g * g
            f = max(-a, -b)
            hi_out[s] += f * f


@numba.njit(cache=True, nogil=True)
def _min_bounds(q, blo, bhi, nact, lo_out):  # type: ignore[no-untyped-def]
    """Squared min distance from ``q`` to the boxes of slots ``0..nact-1``."""
    for s in range(nact):
        lo_out[s] = 0.0
    for j in range(blo.shape[0]):
        qj = q[j]
        lr = blo[j, :nact]
        hr = bhi[j, :nact]
        for s in range(nact):
            g = max(0.0, lr[s] - qj, qj - hr[s])
            lo_out[s] += g * g


@numba.njit(cache=True, nogil=True)
def _select(vals, nact, take, largest, out):  # type: ignore[no-untyped-def]
    """The ``take`` slots with the smallest (or largest) ``vals``, best first, into ``out``;
    returns how many (``min(take, nact)``)."""
    cnt = 0
    for s in range(nact):
        v = -vals[s] if largest else vals[s]
        if cnt == take and v >= (-vals[out[cnt - 1]] if largest else vals[out[cnt - 1]]):
            continue
        t = cnt if cnt < take else take - 1
        if cnt < take:
            cnt += 1
        while t > 0 and v < (-vals[out[t - 1]] if largest else vals[out[t - 1]]):
            out[t] = out[t - 1]
            t -= 1
        out[t] = s
    return cnt


@numba.njit(cache=True, nogil=True)
def mdav_blocks(X, k, B, stats, S, pmin):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Labels of fixed-size MDAV (same contract as ``mdav_sweep.mdav_kernel``, ``B`` records
    per block)."""
    perm, bstart = kd_blocks(X, B)
    return mdav_on_blocks(X, k, perm, bstart, stats, S, pmin)


@numba.njit(cache=True, nogil=True)
def mdav_on_blocks(X, k, perm, bstart, stats, S, pmin):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """:func:`mdav_blocks` on the blocks ``kd_blocks(X, B)`` built beforehand (they depend on
    ``X`` and ``B`` only, so runs for several k share them)."""
    n, d = X.shape
    nb = bstart.shape[0] - 1
    XT = np.empty((d, n))
    for p in range(n):
        for j in range(d):
            XT[j, p] = X[perm[p], j]
    idx = perm.copy()  # original index of the record at each position
    pos = np.empty(n, dtype=np.int64)  # position of each original index
    for p in range(n):
        pos[idx[p]] = p
    pblk = np.empty(n, dtype=np.int64)  # block of each position (fixed)
    for b in range(nb):
        for p in range(bstart[b], bstart[b + 1]):
            pblk[p] = b
    bcnt = np.empty(nb, dtype=np.int64)  # live records of each block
    slot_of = np.empty(nb, dtype=np.int64)  # slot of each block (active blocks: 0..nact-1)
    slot_blk = np.empty(nb, dtype=np.int64)
    blo = np.empty((d, nb))
    bhi = np.empty((d, nb))
    for b in range(nb):
        bcnt[b] = bstart[b + 1] - bstart[b]
        slot_of[b] = b
        slot_blk[b] = b
        _bk_box(XT, bstart[b], bcnt[b], b, blo, bhi)
    nact = nb
    mind = np.empty(nb)
    maxd = np.empty(nb)
    visited = np.zeros(nb, dtype=np.int64)  # per slot: the query stamp of the last visit
    seeds = np.empty(2 * _SEEDS + 1, dtype=np.int64)
    qstamp = 0

    labels = np.full(n, -1, dtype=np.intp)
    allcols = np.arange(d)
    s_hi = np.zeros(d)
    s_lo = np.zeros(d)
    for j in range(d):
        for i in range(n):
            h, e = _two_sum(s_hi[j], X[i, j])
            s_hi[j] = h
            s_lo[j] += e
    c = np.empty(d)
    piv = np.empty(d)
    q = np.empty(d)
    dp = np.empty(n)  # distance (not squared) of each live record to the pivot
    acc = np.empty(max(np.max(bstart[1:] - bstart[:-1]), 1))  # the largest block
    kk = k - 1
    near_d = np.empty(max(kk, 1))
    near_i = np.empty(max(kk, 1), dtype=np.intp)
    outer = np.empty(n, dtype=np.intp)
    cstate = np.array([0.0, 0.0, np.inf, 0.01])  # see furthest_from_centroid
    spans = np.empty((nb, 2), dtype=np.int64)  # live positions: (start, length) per block
    members = np.empty(k, dtype=np.intp)
    seen = np.zeros(S.max() + 2 if pmin > 0 and S.size > 0 else 1, dtype=np.bool_)
    m = n
    g = 0

    while m >= 2 * k:
        stats[ST_ITER] += 1
        for j in range(d):
            c[j] = (s_hi[j] + s_lo[j]) / m
        # ---- r: furthest from c -----------------------------------------------------------------
        for s in range(nact):
            b = slot_blk[s]
            spans[s, 0] = bstart[b]
            spans[s, 1] = bcnt[b]
        rp = furthest_from_centroid(
            XT, idx, pos, labels, m, c, piv, dp, outer, cstate, spans[:nact], stats
        )
        # ---- around r: s (the furthest) and r's k-1 nearest, block by block --------------------
        for j in range(d):
            q[j] = XT[j, rp]
        _bounds(q, blo, bhi, nact, mind, maxd)
        qstamp += 1
        far = -1.0
        sp = -1
        cnt = 0
        kth = np.inf if kk > 0 else -1.0
        # seeds: r's own block and the nearest boxes (for the nearest), the furthest boxes
        # (for s); then every block its bounds cannot rule out
        nseed = 0
        seeds[0] = slot_of[pblk[rp]]
        nseed = 1 + _select(mind, nact, _SEEDS, False, seeds[1:])
        nseed += _select(maxd, nact, _SEEDS, True, seeds[nseed:])
        for step in range(nseed + nact):
            if step < nseed:
                s = seeds[step]
            else:
                s = step - nseed
                if visited[s] == qstamp:
                    continue
                if not (
                    maxd[s] * (1.0 + _SLACK) + 1e-300 >= far
                    or mind[s] <= kth * (1.0 + _SLACK) + 1e-300
                ):
                    continue
            if visited[s] == qstamp:
                continue
            visited[s] = qstamp
            stats[ST_RBLOCKS] += 1
            b = slot_blk[s]
            p0 = bstart[b]
            L = bcnt[b]
            stats[ST_POINTS] += L
            _chunk_sq(XT, p0, L, q, allcols, d, acc)
            if _scan(acc, L, far, kth):
                far, sp, kth, cnt = _fold(
                    acc, L, p0, idx, rp, far, sp, kth, near_d, near_i, cnt, kk
                )
        s_idx, s_in_group = _r_group(idx, rp, sp, near_i, kk, members)
        if _stops(S, members, pmin, seen, stats):
            return labels
        m, nact = _remove(
            XT, idx, pos, pblk, bstart, bcnt, slot_of, slot_blk, blo, bhi, dp, visited,
            labels, m, nact, members, g, s_hi, s_lo,
        )  # fmt: skip
        g += 1
        if m < 2 * k:
            break
        # ---- s's group -----------------------------------------------------------------------
        if s_in_group:  # only when every record ties at one distance: s = furthest outside
            far = -1.0
            s_idx = -1
            for s in range(nact):
                b = slot_blk[s]
                for p in range(bstart[b], bstart[b] + bcnt[b]):
                    v = _sqdist(XT, p, q)
                    if v > far or (v == far and idx[p] < s_idx):
                        far = v
                        s_idx = idx[p]
        sp = pos[s_idx]
        for j in range(d):
            q[j] = XT[j, sp]
        _min_bounds(q, blo, bhi, nact, mind)
        qstamp += 1
        cnt = 0
        kth = np.inf if kk > 0 else -1.0
        seeds[0] = slot_of[pblk[sp]]
        nseed = 1 + _select(mind, nact, _SEEDS, False, seeds[1:])
        for step in range(nseed + nact):
            if step < nseed:
                s = seeds[step]
            else:
                s = step - nseed
                if not mind[s] <= kth * (1.0 + _SLACK) + 1e-300:
                    continue
            if visited[s] == qstamp:
                continue
            visited[s] = qstamp
            stats[ST_SBLOCKS] += 1
            b = slot_blk[s]
            p0 = bstart[b]
            L = bcnt[b]
            stats[ST_POINTS] += L
            _chunk_sq(XT, p0, L, q, allcols, d, acc)
            if not _scan(acc, L, np.inf, kth):
                continue
            for t in range(L):
                v = acc[t]
                p = p0 + t
                if v <= kth and p != sp:
                    cnt = _insert(v, idx[p], near_d, near_i, cnt, kk)
                    if cnt == kk:
                        kth = near_d[kk - 1]
        members[0] = s_idx
        members[1:] = near_i[:kk]
        if _stops(S, members, pmin, seen, stats):
            return labels
        m, nact = _remove(
            XT, idx, pos, pblk, bstart, bcnt, slot_of, slot_blk, blo, bhi, dp, visited,
            labels, m, nact, members, g, s_hi, s_lo,
        )  # fmt: skip
        g += 1
    for s in range(nact):
        b = slot_blk[s]
        for p in range(bstart[b], bstart[b] + bcnt[b]):
            labels[idx[p]] = g
    return labels


@numba.njit(cache=True, nogil=True)
def _remove(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    XT, idx, pos, pblk, bstart, bcnt, slot_of, slot_blk, blo, bhi, dp, visited,
    labels, m, nact, members, g, s_hi, s_lo,
):  # fmt: skip
    """Label ``members`` (original indices) ``g``; swap-remove each within its block, refresh
    the block's box, and drop emptied blocks from the active slots."""
    d = XT.shape[0]
    for t in range(members.shape[0]):
        ii = members[t]
        labels[ii] = g
        i = pos[ii]
        for j in range(d):
            h, e = _two_sum(s_hi[j], -XT[j, i])
            s_hi[j] = h
            s_lo[j] += e
        b = pblk[i]
        s = slot_of[b]
        last = bstart[b] + bcnt[b] - 1
        edge = _leave_block(XT, i, last, blo, bhi, s)
        if i != last:
            moved = idx[last]
            idx[i] = moved
            pos[moved] = i
            dp[i] = dp[last]
        bcnt[b] -= 1
        m -= 1
        if bcnt[b] > 0:
            if edge:
                _bk_box(XT, bstart[b], bcnt[b], s, blo, bhi)
        else:  # move the last active slot into this one
            ls = nact - 1
            if s != ls:
                lb = slot_blk[ls]
                slot_blk[s] = lb
                slot_of[lb] = s
                for j in range(d):
                    blo[j, s] = blo[j, ls]
                    bhi[j, s] = bhi[j, ls]
                visited[s] = visited[ls]
            nact -= 1
    return m, nact
