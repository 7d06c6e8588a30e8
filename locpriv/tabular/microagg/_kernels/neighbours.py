"""Numba k-nearest-neighbour graph of the partition improver (candidate groups of each record):
exact for small inputs, a random-projection forest refined once for large ones (see
:mod:`locpriv.tabular.microagg.improve`)."""

from __future__ import annotations

import numba
import numpy as np

# ---- k-nearest-neighbour graph (candidate groups for each record) -----------------------------


@numba.njit(cache=True, nogil=True, inline="always")
def _d2(X, i, o):  # type: ignore[no-untyped-def]
    a = 0.0
    for j in range(X.shape[1]):
        t = X[i, j] - X[o, j]
        a += t * t
    return a


@numba.njit(cache=True, nogil=True)
def _offer(nd, ni, i, o, dd):  # type: ignore[no-untyped-def]
    """Offer neighbour ``o`` at squared distance ``dd`` to record ``i``'s sorted list."""
    L = nd.shape[1]
    if dd >= nd[i, L - 1]:
        return
    for t in range(L):
        if ni[i, t] == o:
            return
    t = L - 1
    while t > 0 and nd[i, t - 1] > dd:
        nd[i, t] = nd[i, t - 1]
        ni[i, t] = ni[i, t - 1]
        t -= 1
    nd[i, t] = dd
    ni[i, t] = o


@numba.njit(cache=True, nogil=True)
def knn_exact(X, L):  # type: ignore[no-untyped-def]
    """The ``L`` nearest other records of every record, by brute force (O(n² d))."""
    n = X.shape[0]
    nd = np.full((n, L), np.inf)
    ni = np.full((n, L), -1, dtype=np.int64)
    for i in range(n):
        for o in range(i + 1, n):
            dd = _d2(X, i, o)
            _offer(nd, ni, i, o, dd)
            _offer(nd, ni, o, i, dd)
    return ni


@numba.njit(cache=True, nogil=True)
def knn_approx(X, L, trees, leaf, seed, refine=True):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Approximate ``L`` nearest neighbours: a random-projection forest (records sharing a
    leaf of any of ``trees`` trees are candidates), then (``refine``) one
    neighbours-of-neighbours round.

    Uses numba's own (legacy-API) generator, seeded here with ``seed``; its state is per thread,
    so worker threads running this kernel at once (it releases the GIL) do not disturb each
    other's streams.
    """
    np.random.seed(seed)  # noqa: NPY002
    n, d = X.shape
    nd = np.full((n, L), np.inf)
    ni = np.full((n, L), -1, dtype=np.int64)
    perm = np.arange(n)
    proj = np.empty(n)
    stack_lo = np.empty(2 * n // max(leaf, 1) + 64, dtype=np.int64)
    stack_hi = np.empty_like(stack_lo)
    for _ in range(trees):
        np.random.shuffle(perm)  # noqa: NPY002
        top = 0
        stack_lo[0] = 0
        stack_hi[0] = n
        top = 1
        while top > 0:
            top -= 1
            lo = stack_lo[top]
            hi = stack_hi[top]
            if hi - lo <= leaf:
                for a in range(lo, hi):
                    for b in range(a + 1, hi):
                        i = perm[a]
                        o = perm[b]
                        dd = _d2(X, i, o)
                        _offer(nd, ni, i, o, dd)
                        _offer(nd, ni, o, i, dd)
                continue
            # split at the median of the projection on the direction between two random records
            a = perm[lo + np.random.randint(hi - lo)]  # noqa: NPY002
            b = perm[lo + np.random.randint(hi - lo)]  # noqa: NPY002
            for t in range(lo, hi):
                i = perm[t]
                s = 0.0
                for j in range(d):
                    s += X[i, j] * (X[a, j] - X[b, j])
                proj[t] = s + 1e-12 * np.random.random()  # noqa: NPY002 (breaks ties)
            o = np.argsort(proj[lo:hi])
            seg = perm[lo:hi].copy()
            for t in range(hi - lo):
                perm[lo + t] = seg[o[t]]
            mid = (lo + hi) // 2
            stack_lo[top] = lo
            stack_hi[top] = mid
            top += 1
            stack_lo[top] = mid
            stack_hi[top] = hi
            top += 1
    if not refine:
        return ni
    # neighbours of neighbours
    snap = ni.copy()
    for i in range(n):
        for u in range(L):
            j = snap[i, u]
            if j < 0:
                continue
            for v in range(L):
                o = snap[j, v]
                if o >= 0 and o != i:
                    _offer(nd, ni, i, o, _d2(X, i, o))
    return ni
