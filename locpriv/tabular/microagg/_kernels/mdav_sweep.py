"""Numba kernel of fixed-size MDAV (public API: :func:`locpriv.tabular.microagg.mdav.mdav`).

Exact: the same partition as the textbook algorithm with the tie-breaks documented in
:func:`locpriv.tabular.microagg.mdav.mdav`. docs/microaggregation.md
explains why it is fast. In short:

* the live records are kept contiguous, column by column (``XT`` is d × n); a removed record is
  replaced by the last live one (swap-remove), so every pass touches live records only, and the
  distance loops run across records, four columns per sweep, which LLVM vectorises (AVX2);
* the column sums of the live records are updated as records leave, in double-double precision,
  so the centroid is the correctly rounded mean (as if recomputed) at O(d) per record removed;
* one full distance pass per iteration: the distances to ``r`` give both ``s`` (the furthest)
  and r's k-1 nearest; they are kept in ``dr``;
* s's k-1 nearest are searched with lower bounds: ``d(x, s) >= d(s, r) - d(x, r)`` and partial
  distances over the columns where ``s`` lies furthest out (6 in one vectorised sweep, then up to
  10 on the survivors), against a guess of the kth-neighbour distance (checked afterwards;
  widened and repeated in the rare case it was too small);
* the furthest record from the centroid ``c`` is searched with a pivot ``p`` (an earlier
  centroid) and its distance table ``dp``: ``d(x, c) <= d(x, p) + d(p, c)`` rules out all but a
  thin outer shell, kept in a short list of records (rebuilt when the shell leaves it); ``p``
  moves to the current centroid when the shell gets thick.

The filters only skip records that cannot win: every candidate's squared distance is computed
exactly as the reference does (columns added in order 0..d-1, no FMA), and each bound keeps a
relative slack ``_SLACK`` far above rounding error, so the result equals the plain algorithm's.
The primitives shared with the block kernel are in :mod:`.mdav_common`.
"""

from __future__ import annotations

import numba
import numpy as np

from locpriv.tabular.microagg._kernels.mdav_common import (
    _CHUNK,
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

_J1 = 6  # columns of the vectorised lower bound on the distance to s
_J2 = 10  # columns of the second lower bound (survivors of the first only)
_GUESS = 1.25  # s's kth-neighbour distance is guessed as this times the previous one

# slots of the diagnostic counters returned in ``stats`` (1-3: see furthest_from_centroid);
# ST_STOP (7, in mdav_common) is set to 1 when the run stopped at a group lacking p values
ST_ITER, ST_PIVOT, ST_LIST, ST_CCAND, ST_SCAND1, ST_SCAND, ST_SRETRY = range(7)


@numba.njit(cache=True, nogil=True)
def _around(XT, idx, m, rp, q, allcols, dr, kk, near_d, near_i):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """The full pass: ``dr[:m]`` = squared distances of the live records to ``q`` (the record
    at position ``rp``). Returns the position of the furthest and fills the sorted ``kk``
    nearest other than ``rp`` into ``near_d``/``near_i`` (original indices)."""
    d = XT.shape[0]
    far = -1.0
    sp = -1
    cnt = 0
    kth = np.inf if kk > 0 else -1.0
    for i0 in range(0, m, _CHUNK):
        L = min(_CHUNK, m - i0)
        acc = dr[i0 : i0 + L]
        _chunk_sq(XT, i0, L, q, allcols, d, acc)
        if _scan(acc, L, far, kth):
            far, sp, kth, cnt = _fold(acc, L, i0, idx, rp, far, sp, kth, near_d, near_i, cnt, kk)
    return sp


@numba.njit(cache=True, nogil=True)
def _near_candidates(XT, m, sp, q, cols, dr, ds, delta, cand, cand2, part, acc):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Positions (other than ``sp``) of live records that may lie within ``delta`` of ``q``.

    Lower bounds of ``d(x, q)`` rule records out: ``ds - sqrt(dr(x))`` (the triangle inequality
    through r, where ``ds = d(q, r)``) and the partial distance over the first ``_J1`` columns
    of ``cols`` (one vectorised sweep), then over all of ``cols`` (on the survivors only).
    Returns (n1, n2): the survivors of the first two bounds are in ``cand[:n1]``, those of all
    three in ``cand2[:n2]``.
    """
    if delta < np.inf:
        lo = ds - delta * (1.0 + _SLACK) - _SLACK * ds
        thr_r = lo * lo if lo > 0 else -1.0
        b2 = delta * delta * (1.0 + _SLACK)
    else:
        thr_r = -1.0
        b2 = np.inf
    J1 = min(_J1, cols.shape[0])
    n1 = 0
    for i0 in range(0, m, _CHUNK):
        L = min(_CHUNK, m - i0)
        _chunk_sq(XT, i0, L, q, cols, J1, acc)
        drc = dr[i0 : i0 + L]
        hits = 0
        for i in range(L):
            hits += (acc[i] <= b2) & (drc[i] >= thr_r)
        if hits == 0:
            continue
        for i in range(L):
            if acc[i] <= b2 and drc[i] >= thr_r and i0 + i != sp:
                cand[n1] = i0 + i
                part[n1] = acc[i]
                n1 += 1
    if cols.shape[0] == J1:
        cand2[:n1] = cand[:n1]
        return n1, n1
    n2 = 0
    for t in range(n1):
        i = cand[t]
        a = part[t]
        for u in range(J1, cols.shape[0]):
            j = cols[u]
            v = XT[j, i] - q[j]
            a += v * v
        if a <= b2:
            cand2[n2] = i
            n2 += 1
    return n1, n2


@numba.njit(cache=True, nogil=True)
def _remove(XT, idx, pos, dp, dr, labels, m, members, g, s_hi, s_lo):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Label the records ``members`` (original indices) ``g`` and swap-remove them."""
    d = XT.shape[0]
    for t in range(members.shape[0]):
        ii = members[t]
        labels[ii] = g
        i = pos[ii]
        for j in range(d):
            h, e = _two_sum(s_hi[j], -XT[j, i])
            s_hi[j] = h
            s_lo[j] += e
        last = m - 1
        if i != last:
            for j in range(d):
                XT[j, i] = XT[j, last]
            moved = idx[last]
            idx[i] = moved
            pos[moved] = i
            dp[i] = dp[last]
            dr[i] = dr[last]
        m -= 1
    return m


@numba.njit(cache=True, nogil=True)
def mdav_kernel(X, k, stats, S, pmin):  # type: ignore[no-untyped-def]
    """Labels of fixed-size MDAV for ``X`` (n × d, C-contiguous float64) and ``1 <= k <= n``.

    ``stats`` (int64, length >= ``N_STATS``) receives diagnostic counters (``ST_*``). With
    ``pmin > 0`` the run stops at the first group built with fewer than ``pmin`` distinct values
    of a column of ``S`` (n × m int64 codes) and sets ``stats[ST_STOP] = 1`` (the labels are then
    partial); the last group (the records left at the end) is not checked. ``pmin = 0`` with an
    n × 0 ``S`` is plain MDAV.
    """
    n, d = X.shape
    XT = np.ascontiguousarray(X.T)  # live records contiguous, per column
    idx = np.arange(n)  # original index of the record at each position
    pos = np.arange(n)  # position of each original index (valid while live)
    labels = np.full(n, -1, dtype=np.intp)
    allcols = np.arange(d)
    s_hi = np.zeros(d)
    s_lo = np.zeros(d)
    for j in range(d):
        for i in range(n):
            h, e = _two_sum(s_hi[j], XT[j, i])
            s_hi[j] = h
            s_lo[j] += e
    scale = np.empty(d)  # column standard deviations, to rank s's outlying columns
    for j in range(d):
        mean = (s_hi[j] + s_lo[j]) / n
        var = 0.0
        for i in range(n):
            var += (XT[j, i] - mean) ** 2
        scale[j] = np.sqrt(var / n) if var > 0 else 1.0
    c = np.empty(d)
    p = np.empty(d)  # pivot of the furthest-from-centroid search
    q = np.empty(d)
    out = np.empty(d)
    dp = np.empty(n)  # distance (not squared) of each live record to the pivot
    dr = np.empty(n)  # squared distance of each live record to the current r
    kk = k - 1
    near_d = np.empty(max(kk, 1))
    near_i = np.empty(max(kk, 1), dtype=np.intp)
    cand = np.empty(n, dtype=np.intp)
    cand2 = np.empty(n, dtype=np.intp)
    part = np.empty(n)
    acc = np.empty(_CHUNK)
    outer = np.empty(n, dtype=np.intp)  # records (original indices) with dp >= t_outer
    cstate = np.array([0.0, 0.0, np.inf, 0.01])  # see furthest_from_centroid
    spans = np.zeros((1, 2), dtype=np.int64)  # the live positions: 0..m-1
    members = np.empty(k, dtype=np.intp)
    seen = np.zeros(S.max() + 2 if pmin > 0 and S.size > 0 else 1, dtype=np.bool_)
    m = n
    g = 0
    s_guess = np.inf  # guess of the distance from s to its kth nearest

    while m >= 2 * k:
        stats[ST_ITER] += 1
        for j in range(d):
            c[j] = (s_hi[j] + s_lo[j]) / m
        # ---- r: the furthest record from c ----------------------------------------------------
        spans[0, 1] = m
        rp = furthest_from_centroid(XT, idx, pos, labels, m, c, p, dp, outer, cstate, spans, stats)
        # ---- the full pass around r: r's k-1 nearest and s, the furthest from r -------------
        for j in range(d):
            q[j] = XT[j, rp]
        sp = _around(XT, idx, m, rp, q, allcols, dr, kk, near_d, near_i)
        s_idx, s_in_group = _r_group(idx, rp, sp, near_i, kk, members)
        if _stops(S, members, pmin, seen, stats):
            return labels
        m = _remove(XT, idx, pos, dp, dr, labels, m, members, g, s_hi, s_lo)
        g += 1
        if m < 2 * k:  # the step with 2k..3k-1 records: the rest is the last group
            break
        # ---- s's group ----------------------------------------------------------------------
        if s_in_group:  # only when every record ties at one distance: s = furthest outside
            far = -1.0
            for i in range(m):
                if dr[i] > far or (dr[i] == far and idx[i] < s_idx):
                    far = dr[i]
                    s_idx = idx[i]
        sp = pos[s_idx]
        for j in range(d):
            q[j] = XT[j, sp]
            out[j] = -abs(q[j] - c[j]) / scale[j]
        cols = np.argsort(out)[: min(d, _J2)]  # where s lies furthest out, first
        ds = np.sqrt(dr[sp])
        delta = s_guess
        found = 0.0
        while kk > 0:
            n1, n2 = _near_candidates(XT, m, sp, q, cols, dr, ds, delta, cand, cand2, part, acc)
            stats[ST_SCAND1] += n1
            stats[ST_SCAND] += n2
            cnt = 0
            for t in range(n2):
                i = cand2[t]
                dd = _sqdist(XT, i, q)
                if cnt < kk or dd <= near_d[kk - 1]:
                    cnt = _insert(dd, idx[i], near_d, near_i, cnt, kk)
            if cnt == kk:
                found = np.sqrt(near_d[kk - 1])
                if found <= delta:
                    break  # every record left out is further than delta >= the kth nearest
            # the guess was too small. The kth nearest among the first survivors bounds the
            # true one from above: one more sweep with it is exact
            stats[ST_SRETRY] += 1
            if n1 >= kk:
                cnt = 0
                for t in range(n1):
                    i = cand[t]
                    dd = _sqdist(XT, i, q)
                    if cnt < kk or dd <= near_d[kk - 1]:
                        cnt = _insert(dd, idx[i], near_d, near_i, cnt, kk)
                delta = np.sqrt(near_d[kk - 1]) * (1.0 + _SLACK)
            else:
                delta = np.inf if delta >= ds else max(2.0 * delta, 1e-3 * ds)
        s_guess = _GUESS * found
        members[0] = s_idx
        members[1:] = near_i[:kk]
        if _stops(S, members, pmin, seen, stats):
            return labels
        m = _remove(XT, idx, pos, dp, dr, labels, m, members, g, s_hi, s_lo)
        g += 1
    for i in range(m):
        labels[idx[i]] = g
    return labels
