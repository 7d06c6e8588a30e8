"""Numba kernel of V-MDAV (see :func:`locpriv.tabular.microagg.improve.vmdav`)."""

from __future__ import annotations

import numba
import numpy as np

from locpriv.tabular.microagg._kernels.neighbours import _d2

# ---- V-MDAV ------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def vmdav_kernel(X, k, gamma):  # type: ignore[no-untyped-def]
    """V-MDAV (Solanas & Martínez-Ballesté 2006) in O(n² d / k): returns labels."""
    n, d = X.shape
    live = np.arange(n)  # unassigned records, contiguous (swap-remove)
    where = np.arange(n)
    lab = np.full(n, -1, dtype=np.int64)
    mind = np.empty(n)  # squared distance of each unassigned record to the current group
    dist = np.empty(n)
    ssum = np.zeros(d)
    for i in range(n):
        for j in range(d):
            ssum[j] += X[i, j]
    c = np.empty(d)
    m = n
    g = 0
    gsize = np.zeros(n // k + 1, dtype=np.int64)
    gsum = np.zeros((n // k + 1, d))
    chosen = np.empty(k, dtype=np.int64)

    def take(i: int, g: int, m: int) -> int:
        lab[i] = g
        gsize[g] += 1
        for j in range(d):
            ssum[j] -= X[i, j]
            gsum[g, j] += X[i, j]
        p = where[i]
        last = live[m - 1]
        live[p] = last
        where[last] = p
        mind[p] = mind[m - 1]
        return m - 1

    while m >= k:
        for j in range(d):
            c[j] = ssum[j] / m
        e = -1
        best = -1.0
        for p in range(m):
            i = live[p]
            a = 0.0
            for j in range(d):
                t = X[i, j] - c[j]
                a += t * t
            if a > best:
                best = a
                e = i
        # e and its k-1 nearest unassigned records
        for p in range(m):
            dist[p] = _d2(X, live[p], e)
        dist[where[e]] = np.inf
        for t in range(k - 1):
            bp = 0
            for p in range(1, m):
                if dist[p] < dist[bp]:
                    bp = p
            chosen[t] = live[bp]
            dist[bp] = np.inf
        for p in range(m):
            mind[p] = np.inf
        for t in range(k):
            i = e if t == 0 else chosen[t - 1]
            m = take(i, g, m)
            for p in range(m):
                mind[p] = min(mind[p], _d2(X, live[p], i))
        # extend while the nearest outsider is much nearer to the group than to the others
        while gsize[g] < 2 * k - 1 and m > 0:
            bp = 0
            for p in range(1, m):
                if mind[p] < mind[bp]:
                    bp = p
            i = live[bp]
            d_in = np.sqrt(mind[bp])
            d_out = np.inf
            for p in range(m):
                dist[p] = _d2(X, live[p], i)
                if p != bp and dist[p] < d_out:
                    d_out = dist[p]
            d_out = np.sqrt(d_out)
            if not d_in < gamma * d_out:
                break
            for p in range(m):
                mind[p] = min(mind[p], dist[p])
            m = take(i, g, m)
        g += 1
    # fewer than k left: each joins the group with the nearest centroid
    for p in range(m):
        i = live[p]
        bg = 0
        bd = np.inf
        for h in range(g):
            a = 0.0
            for j in range(d):
                t = X[i, j] - gsum[h, j] / gsize[h]
                a += t * t
            if a < bd:
                bd = a
                bg = h
        lab[i] = bg
    return lab
