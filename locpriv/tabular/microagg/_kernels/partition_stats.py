"""Per-group statistics and face distances of the partitioned method's serial stages.

The parent process runs these between the block tasks (joining leftovers, the repair rounds'
pool selection), so their time bounds the speed-up on many cores (Amdahl); the ``_range``
kernels (``nogil``) run ranges of blocks or groups on the parent's threads. One pass over the
rows in row order replaces one ``np.bincount`` per column and ``np.minimum.at``; sums are added
in the same order as ``bincount`` adds them, so the results equal the numpy ones bit for bit
(the release does not change).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def group_means(X, labels, g):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """g x d means of the groups ``labels`` (>= 0) over ``X`` (an empty group's mean is 0) and
    their sizes; the sums run in row order (as ``np.bincount(weights=...)``)."""
    n, d = X.shape
    sums = np.zeros((g, d))
    cnt = np.zeros(g, dtype=np.int64)
    for i in range(n):
        lab = labels[i]
        cnt[lab] += 1
        for j in range(d):
            sums[lab, j] += X[i, j]
    for c in range(g):
        m = max(cnt[c], 1)
        for j in range(d):
            sums[c, j] = sums[c, j] / m
    return sums, cnt


@numba.njit(cache=True, nogil=True)
def pool_stats(X, labels, cen, face, g):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per group: the sum of its records' squared errors about ``cen`` (each record's error
    summed over the columns 0..d-1, then over the records in row order) and the least ``face``
    distance of its records (``inf`` for an empty group)."""
    n, d = X.shape
    err = np.zeros(g)
    near = np.full(g, np.inf)
    for i in range(n):
        lab = labels[i]
        e = 0.0
        for j in range(d):
            r = X[i, j] - cen[lab, j]
            e += r * r
        err[lab] += e
        near[lab] = min(near[lab], face[i])
    return err, near


@numba.njit(cache=True, nogil=True)
def face_distance(X, rows, starts, lo_all, hi_all):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Each record's distance to the nearest cut face of its block: block b holds the records
    ``rows[starts[b]:starts[b+1]]``; a face of the block's box that lies inside the data's box
    (``lo_all``, ``hi_all``) is a cut. (:func:`face_distance_range` over every block.)"""
    out = np.empty(X.shape[0])
    face_distance_range(X, rows, starts, lo_all, hi_all, 0, starts.size - 1, out)
    return out


@numba.njit(cache=True, nogil=True)
def face_distance_range(X, rows, starts, lo_all, hi_all, b0, b1, out):  # type: ignore[no-untyped-def]  # noqa: PLR0917  # pragma: no cover
    """:func:`face_distance` of the records of blocks ``b0..b1-1`` into ``out`` (each record's
    value depends on its block alone: blocks run on threads, the parent's
    :func:`locpriv.tabular.threads.map_items`)."""
    d = X.shape[1]
    for b in range(b0, b1):
        a, z = starts[b], starts[b + 1]
        lo = np.full(d, np.inf)
        hi = np.full(d, -np.inf)
        for t in range(a, z):
            i = rows[t]
            for j in range(d):
                v = X[i, j]
                lo[j] = min(lo[j], v)
                hi[j] = max(hi[j], v)
        for t in range(a, z):
            i = rows[t]
            gap = np.inf
            for j in range(d):
                if lo[j] > lo_all[j]:
                    gap = min(gap, X[i, j] - lo[j])
                if hi[j] < hi_all[j]:
                    gap = min(gap, hi[j] - X[i, j])
            out[i] = gap


@numba.njit(cache=True, nogil=True)
def pool_stats_range(X, order, start, cen, face, c0, c1, err, near):  # type: ignore[no-untyped-def]  # noqa: PLR0917  # pragma: no cover
    """:func:`pool_stats` of groups ``c0..c1-1``, their rows reached through ``order`` /
    ``start`` (ascending within a group, from a stable counting sort): each group's squared
    errors summed in row order, as :func:`pool_stats` sums them (the same values bit for bit)."""
    d = X.shape[1]
    for c in range(c0, c1):
        total = 0.0
        lo = np.inf
        for t in range(start[c], start[c + 1]):
            i = order[t]
            e = 0.0
            for j in range(d):
                r = X[i, j] - cen[c, j]
                e += r * r
            total += e
            lo = min(lo, face[i])
        err[c] = total
        near[c] = lo


@numba.njit(cache=True, nogil=True)
def canonical(labels, g):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """Labels ``0..`` numbered in order of each group's first record, for labels in
    ``0..g-1`` (one pass; equals ``improve._canonical``)."""
    rank = np.full(g, -1, dtype=np.int64)
    out = np.empty(labels.size, dtype=np.int64)
    nxt = 0
    for i in range(labels.size):
        lab = labels[i]
        if rank[lab] < 0:
            rank[lab] = nxt
            nxt += 1
        out[i] = rank[lab]
    return out


@numba.njit(cache=True, nogil=True)
def group_span(X, labels, g):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """g x d least and greatest values of each group's records (``inf`` / ``-inf`` for an empty
    group) and the group sizes, in one pass over the rows (replaces ``np.minimum.at`` and
    ``np.maximum.at``, which are several times slower; minima and maxima are exact, so the
    results are identical)."""
    n, d = X.shape
    lo = np.full((g, d), np.inf)
    hi = np.full((g, d), -np.inf)
    cnt = np.zeros(g, dtype=np.int64)
    for i in range(n):
        lab = labels[i]
        cnt[lab] += 1
        for j in range(d):
            v = X[i, j]
            lo[lab, j] = min(lo[lab, j], v)
            hi[lab, j] = max(hi[lab, j], v)
    return lo, hi, cnt


@numba.njit(cache=True, nogil=True)
def squared_error(X, labels, cen):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """Sum over the records of the squared distance to their group's row of ``cen`` (each
    record's error summed over the columns 0..d-1, then over the records in row order); one
    pass, no n x d temporaries (the numpy form allocates two)."""
    n, d = X.shape
    total = 0.0
    for i in range(n):
        lab = labels[i]
        e = 0.0
        for j in range(d):
            r = X[i, j] - cen[lab, j]
            e += r * r
        total += e
    return total


@numba.njit(cache=True, nogil=True)
def rows_by_bucket(bucket, count):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """Rows ``i`` with ``0 <= bucket[i] < count`` grouped by bucket (a counting sort: stable,
    so each bucket's rows ascend) and the buckets' starts (``starts[count]`` = rows placed);
    rows with a bucket < 0 are left out. Equals a stable argsort of ``bucket`` cut at the
    buckets, without the O(n log n) sort."""
    starts = np.zeros(count + 1, dtype=np.int64)
    for i in range(bucket.size):
        b = bucket[i]
        if b >= 0:
            starts[b + 1] += 1
    for b in range(count):
        starts[b + 1] += starts[b]
    fill = starts[:-1].copy()
    out = np.empty(starts[count], dtype=np.int64)
    for i in range(bucket.size):
        b = bucket[i]
        if b >= 0:
            out[fill[b]] = i
            fill[b] += 1
    return out, starts
