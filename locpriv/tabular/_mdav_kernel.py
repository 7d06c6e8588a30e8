"""Numba kernel of fixed-size MDAV (private; the public API is :func:`locpriv.tabular.mdav.mdav`).

See docs/microaggregation.md for the algorithm, the tie-breaks and why this is fast.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _two_sum(a: float, b: float) -> tuple[float, float]:
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


@numba.njit(cache=True)
def _sqdist(X: np.ndarray, i: int, q: np.ndarray) -> float:
    acc = 0.0
    for j in range(X.shape[1]):
        t = X[i, j] - q[j]
        acc += t * t
    return acc


@numba.njit(cache=True)
def mdav_kernel(X: np.ndarray, k: int) -> np.ndarray:
    """Plain fused MDAV on live rows kept contiguous (swap-remove compaction)."""
    n, d = X.shape
    Xc = X.copy()
    idx = np.arange(n)
    labels = np.full(n, -1, dtype=np.intp)
    # running column sums as double-double (hi, lo): the centroid is the correctly rounded sum / m
    s_hi = np.zeros(d)
    s_lo = np.zeros(d)
    for i in range(n):
        for j in range(d):
            h, e = _two_sum(s_hi[j], Xc[i, j])
            s_hi[j] = h
            s_lo[j] += e
    c = np.empty(d)
    q = np.empty(d)
    m = n
    g = 0
    near_d = np.empty(k)
    near_i = np.empty(k, dtype=np.intp)  # positions
    grp = np.empty(k, dtype=np.intp)

    while m >= 2 * k:
        for j in range(d):
            c[j] = (s_hi[j] + s_lo[j]) / m
        # r = furthest from c (ties: lowest original index)
        best = -1.0
        rp = -1
        for p in range(m):
            dd = _sqdist(Xc, p, c)
            if dd > best or (dd == best and idx[p] < idx[rp]):
                best = dd
                rp = p
        # group of r: r + k-1 nearest by (distance, index); also furthest from r
        _group_around(Xc, idx, m, rp, k, q, near_d, near_i, grp)
        if m >= 3 * k:
            # s = furthest from r among records not in r's group
            for j in range(d):
                q[j] = Xc[rp, j]
            best = -1.0
            sp = -1
            for p in range(m):
                inr = False
                for t in range(k):
                    if grp[t] == p:
                        inr = True
                        break
                if inr:
                    continue
                dd = _sqdist(Xc, p, q)
                if dd > best or (dd == best and idx[p] < idx[sp]):
                    best = dd
                    sp = p
            s_orig = idx[sp]
            m = _remove(Xc, idx, labels, m, grp, k, g, s_hi, s_lo)
            g += 1
            # find s again (its position may have moved during compaction)
            for p in range(m):
                if idx[p] == s_orig:
                    sp = p
                    break
            _group_around(Xc, idx, m, sp, k, q, near_d, near_i, grp)
            m = _remove(Xc, idx, labels, m, grp, k, g, s_hi, s_lo)
            g += 1
        else:
            m = _remove(Xc, idx, labels, m, grp, k, g, s_hi, s_lo)
            g += 1
            break
    for p in range(m):
        labels[idx[p]] = g
    return labels


@numba.njit(cache=True)
def _group_around(Xc, idx, m, cp, k, q, near_d, near_i, grp):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    d = Xc.shape[1]
    for j in range(d):
        q[j] = Xc[cp, j]
    cnt = 0
    kk = k - 1
    for p in range(m):
        if p == cp:
            continue
        dd = _sqdist(Xc, p, q)
        if cnt < kk:
            t = cnt
            cnt += 1
        elif kk > 0 and (
            dd < near_d[kk - 1] or (dd == near_d[kk - 1] and idx[p] < idx[near_i[kk - 1]])
        ):
            t = kk - 1
        else:
            continue
        while t > 0 and (
            dd < near_d[t - 1] or (dd == near_d[t - 1] and idx[p] < idx[near_i[t - 1]])
        ):
            near_d[t] = near_d[t - 1]
            near_i[t] = near_i[t - 1]
            t -= 1
        near_d[t] = dd
        near_i[t] = p
    grp[0] = cp
    for t in range(kk):
        grp[t + 1] = near_i[t]


@numba.njit(cache=True)
def _remove(Xc, idx, labels, m, grp, k, g, s_hi, s_lo):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    d = Xc.shape[1]
    pos = np.sort(grp[:k])[::-1]
    for t in range(k):
        p = pos[t]
        labels[idx[p]] = g
        for j in range(d):
            h, e = _two_sum(s_hi[j], -Xc[p, j])
            s_hi[j] = h
            s_lo[j] += e
        last = m - 1
        if p != last:
            for j in range(d):
                Xc[p, j] = Xc[last, j]
            idx[p] = idx[last]
        m -= 1
    return m
