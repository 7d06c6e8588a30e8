"""Primitives shared by the two exact MDAV kernels (:mod:`.mdav_sweep`, :mod:`.mdav_blocks`).

Squared distances add the columns in order 0..d-1 (no FMA), so every kernel computes the same
bits as the plain algorithm; the column sums of the live records are kept in double-double
precision (:func:`_two_sum`), so the centroid is the correctly rounded mean.
"""

from __future__ import annotations

import numba
import numpy as np

_SLACK = 1e-9  # relative slack of the pruning bounds (rounding error is ~1e-15)
_CHUNK = 256  # records per chunk of a distance sweep (the chunk's distances stay in L1)
ST_STOP = 7  # slot of ``stats`` set to 1 when a run stops at a group lacking p distinct values
N_STATS = ST_STOP + 1  # length of the ``stats`` array every MDAV kernel fills


@numba.njit(cache=True, nogil=True, inline="always")
def _two_sum(a: float, b: float) -> tuple[float, float]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(cache=True, nogil=True, inline="always")
def _sqdist(XT, i, q):  # type: ignore[no-untyped-def]
    """Squared distance of the live record at position ``i`` to ``q`` (columns in order)."""
    acc = 0.0
    for j in range(XT.shape[0]):
        t = XT[j, i] - q[j]
        acc += t * t
    return acc


@numba.njit(cache=True, nogil=True, inline="always")
def _before(da, ia, db, ib):  # type: ignore[no-untyped-def]
    """(da, ia) sorts before (db, ib): smaller distance, then lower index."""
    return da < db or (da == db and ia < ib)


@numba.njit(cache=True, nogil=True, inline="always")
def _insert(dd, ii, near_d, near_i, cnt, kk):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Insert (dd, original index ii) into the sorted list of the kk nearest; returns its size."""
    if cnt < kk:
        t = cnt
        cnt += 1
    elif kk > 0 and _before(dd, ii, near_d[kk - 1], near_i[kk - 1]):
        t = kk - 1
    else:
        return cnt
    while t > 0 and _before(dd, ii, near_d[t - 1], near_i[t - 1]):
        near_d[t] = near_d[t - 1]
        near_i[t] = near_i[t - 1]
        t -= 1
    near_d[t] = dd
    near_i[t] = ii
    return cnt


@numba.njit(cache=True, nogil=True)
def _chunk_sq(XT, i0, L, q, cols, ncols, acc):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """``acc[:L]`` = sum over ``cols[:ncols]`` (in that order) of ``(XT[j, i] - q[j])**2`` for
    the live records ``i = i0..i0+L-1``.

    Four columns per sweep over the chunk, added one after the other (so with ``cols = 0..d-1``
    the result is bit-identical to a plain loop over the columns); the sweep vectorises.
    """
    for i in range(L):
        acc[i] = 0.0
    u = 0
    while u + 4 <= ncols:
        j0 = cols[u]
        j1 = cols[u + 1]
        j2 = cols[u + 2]
        j3 = cols[u + 3]
        r0 = XT[j0, i0 : i0 + L]
        r1 = XT[j1, i0 : i0 + L]
        r2 = XT[j2, i0 : i0 + L]
        r3 = XT[j3, i0 : i0 + L]
        q0 = q[j0]
        q1 = q[j1]
        q2 = q[j2]
        q3 = q[j3]
        for i in range(L):
            t0 = r0[i] - q0
            t1 = r1[i] - q1
            t2 = r2[i] - q2
            t3 = r3[i] - q3
            acc[i] = (((acc[i] + t0 * t0) + t1 * t1) + t2 * t2) + t3 * t3
        u += 4
    if u + 2 <= ncols:
        j0 = cols[u]
        j1 = cols[u + 1]
        r0 = XT[j0, i0 : i0 + L]
        r1 = XT[j1, i0 : i0 + L]
        q0 = q[j0]
        q1 = q[j1]
        for i in range(L):
            t0 = r0[i] - q0
            t1 = r1[i] - q1
            acc[i] = (acc[i] + t0 * t0) + t1 * t1
        u += 2
    if u < ncols:
        j0 = cols[u]
        r0 = XT[j0, i0 : i0 + L]
        q0 = q[j0]
        for i in range(L):
            t0 = r0[i] - q0
            acc[i] += t0 * t0


@numba.njit(cache=True, nogil=True)
def _scan(acc, L, far, kth):  # type: ignore[no-untyped-def]
    """Does any of ``acc[:L]`` reach ``far`` or fall to ``kth``? (vectorised count)"""
    hits = 0
    for t in range(L):
        v = acc[t]
        hits += (v >= far) | (v <= kth)
    return hits > 0


@numba.njit(cache=True, nogil=True)
def _fold(acc, L, p0, idx, rp, far, sp, kth, near_d, near_i, cnt, kk):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Fold the squared distances ``acc[:L]`` of positions ``p0..p0+L-1`` into the running
    furthest (``far`` at ``sp``; ties: lowest original index) and the sorted ``kk`` nearest
    other than ``rp``. Returns the updated ``(far, sp, kth, cnt)``."""
    for t in range(L):
        v = acc[t]
        p = p0 + t
        if v >= far and (v > far or idx[p] < idx[sp]):
            far = v
            sp = p
        if v <= kth and p != rp:
            cnt = _insert(v, idx[p], near_d, near_i, cnt, kk)
            if cnt == kk:
                kth = near_d[kk - 1]
    return far, sp, kth, cnt


@numba.njit(cache=True, nogil=True)
def lacks_p(S, members, p, seen):  # type: ignore[no-untyped-def]
    """True when the records ``members`` (original indices) hold fewer than ``p`` distinct
    values in some column of the confidential codes ``S`` (n × m, int64 codes ``>= 0``).
    ``seen`` (bool, longer than the largest code) must be all False; it is left so."""
    for j in range(S.shape[1]):
        cnt = 0
        for t in range(members.shape[0]):
            v = S[members[t], j]
            if not seen[v]:
                seen[v] = True
                cnt += 1
        for t in range(members.shape[0]):
            seen[S[members[t], j]] = False
        if cnt < p:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def _max_nonneg(a, m):  # type: ignore[no-untyped-def]
    """Max of ``a[:m]`` (all >= 0): compared as int64 bit patterns, which vectorises."""
    b = a[:m].view(np.int64)
    hi = 0
    for i in range(m):
        hi = max(hi, b[i])
    return np.array([hi]).view(np.float64)[0]


@numba.njit(cache=True, nogil=True)
def furthest_from_centroid(XT, idx, pos, labels, m, c, piv, dp, outer, st, spans, stats):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Position of the live record furthest from ``c`` (ties: lowest original index).

    ``dp`` holds each live record's distance (not squared) to the pivot ``piv``: with
    ``e = |piv - c|``, ``|x - c| <= dp(x) + e < max dp - e`` whenever ``dp(x) < max dp - 2e``,
    so only a thin outer shell can hold the answer. ``outer[:n]`` lists (original indices) the
    records with ``dp >= t_outer``; it is rebuilt when the shell leaves it, and the pivot moves
    to ``c`` when the shell gets thick. State in ``st``: [pivot valid, n, t_outer, width].
    ``spans`` (``(start, length)`` rows) lists the live positions; ``stats`` counts pivot moves,
    list rebuilds and candidates in slots 1, 2, 3.
    """
    d = XT.shape[0]
    if st[0] == 0.0:  # (re)compute the pivot table
        stats[1] += 1
        piv[:] = c
        allcols = np.arange(d)
        for u in range(spans.shape[0]):
            p0 = spans[u, 0]
            L = spans[u, 1]
            for i0 in range(p0, p0 + L, _CHUNK):
                n0 = min(_CHUNK, p0 + L - i0)
                _chunk_sq(XT, i0, n0, piv, allcols, d, dp[i0 : i0 + n0])
            for i in range(p0, p0 + L):
                dp[i] = np.sqrt(dp[i])
        st[0] = 1.0
        st[1] = 0.0
    e2 = 0.0
    for j in range(d):
        t = piv[j] - c[j]
        e2 += t * t
    e = np.sqrt(e2)
    # the outer list: drop records grouped since; its max is the max of dp if >= t_outer
    n_outer = int(st[1])
    dmax = -1.0
    w = 0
    for u in range(n_outer):
        ii = outer[u]
        if labels[ii] < 0:
            outer[w] = ii
            w += 1
            dmax = max(dmax, dp[pos[ii]])
    n_outer = w
    thr = dmax - 2.0 * e - _SLACK * (dmax + e)
    if n_outer == 0 or thr < st[2]:  # the shell is not inside the list: rebuild it
        stats[2] += 1
        dmax = 0.0
        for u in range(spans.shape[0]):
            dmax = max(dmax, _max_nonneg(dp[spans[u, 0] :], spans[u, 1]))
        thr = dmax - 2.0 * e - _SLACK * (dmax + e)
        # the list spans [thr - width * dmax, dmax]; the width adapts so that it holds about
        # 64 + m/128 records (it then lasts several iterations: outer records leave, e grows)
        st[2] = thr - st[3] * dmax
        n_outer = 0
        for u in range(spans.shape[0]):
            for i in range(spans[u, 0], spans[u, 0] + spans[u, 1]):
                if dp[i] >= st[2]:
                    outer[n_outer] = idx[i]
                    n_outer += 1
        st[3] *= min(2.0, max(0.5, (64.0 + m / 128.0) / max(n_outer, 1.0)))
    st[1] = n_outer
    best = -1.0
    rp = -1
    ncand = 0
    for u in range(n_outer):
        i = pos[outer[u]]
        if dp[i] >= thr:
            ncand += 1
            dd = _sqdist(XT, i, c)
            if dd >= best and (dd > best or idx[i] < idx[rp]):
                best = dd
                rp = i
    stats[3] += ncand
    if ncand > 16 + (m >> 7):
        st[0] = 0.0  # the shell got thick: re-centre the pivot next time
    return rp


@numba.njit(cache=True, nogil=True)
def _r_group(idx, rp, sp, near_i, kk, members):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """r's group into ``members`` (original indices): r (position ``rp``) and its ``kk`` nearest.
    Returns the original index of s (position ``sp``) and whether s is in r's group (only when
    every record ties at one distance from r)."""
    members[0] = idx[rp]
    members[1:] = near_i[:kk]
    s_idx = idx[sp]
    for t in range(kk + 1):
        if members[t] == s_idx:
            return s_idx, True
    return s_idx, False


@numba.njit(cache=True, nogil=True)
def _stops(S, members, pmin, seen, stats):  # type: ignore[no-untyped-def]
    """With ``pmin > 0``: True, and ``stats[ST_STOP] = 1``, when the group ``members`` lacks
    ``pmin`` distinct values of a column of ``S`` (see :func:`lacks_p`)."""
    if pmin > 0 and lacks_p(S, members, pmin, seen):
        stats[ST_STOP] = 1
        return True
    return False
