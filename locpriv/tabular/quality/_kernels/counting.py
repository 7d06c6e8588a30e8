"""Counting kernels of the release checks: distinct values per group, without sorting pairs.

``distinct_counts(labels, S, g)``: ``labels`` n int64 in ``0..g-1``, ``S`` n × m int64 codes
``>= 0`` (C-contiguous); returns the g × m numbers of distinct values of each attribute in each
group. The rows are ordered by group with one counting sort (O(n + g)); then, per attribute,
one pass over the groups marks each value with the last group that held it (an array of
``max(S[:, j]) + 1`` entries), so a value counts once per group. O(n·m + g + max code) time,
no sort of (group, value) pairs.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def distinct_counts(labels, S, g):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """g × m distinct values of each column of ``S`` per group ``labels`` (0..g-1)."""
    n, m = S.shape
    start = np.zeros(g + 1, dtype=np.int64)
    for i in range(n):
        start[labels[i] + 1] += 1
    for c in range(g):
        start[c + 1] += start[c]
    pos = start[:g].copy()
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        c = labels[i]
        order[pos[c]] = i
        pos[c] += 1
    out = np.zeros((g, m), dtype=np.int64)
    for j in range(m):
        top = 0
        for i in range(n):
            top = max(top, S[i, j])
        last = np.full(top + 1, -1, dtype=np.int64)
        for c in range(g):
            cnt = 0
            for t in range(start[c], start[c + 1]):
                v = S[order[t], j]
                if last[v] != c:
                    last[v] = c
                    cnt += 1
            out[c, j] = cnt
    return out
