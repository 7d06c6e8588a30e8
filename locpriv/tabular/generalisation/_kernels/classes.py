"""Equivalence classes of recoded key rows, by hashing (one pass, no sort, no overflow).

``dense_rows(codes)``: ``codes`` is U × q (C-contiguous int64) recoded key values of U distinct
original rows; returns the class id of each row (``0..g-1`` in order of first appearance: rows
with equal codes share an id) and ``g``. Open addressing in a table of at least 2U slots; equal
hashes are resolved by comparing the rows, so the result is exact for any key width.
"""

from __future__ import annotations

import numba
import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SEED = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True)
def dense_rows(codes):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """Class id of each row of ``codes`` (U × q) and the number of classes."""
    u, q = codes.shape
    cap = 1
    while cap < 2 * u + 2:
        cap *= 2
    mask = np.uint64(cap - 1)
    table = np.full(cap, -1, dtype=np.int64)  # a representative row per slot
    ids = np.empty(u, dtype=np.int64)
    g = 0
    for i in range(u):
        h = _SEED
        for j in range(q):
            h = (h ^ np.uint64(codes[i, j])) * _M1
            h ^= h >> np.uint64(31)
        h = (h ^ (h >> np.uint64(29))) * _M2
        slot = np.int64(h & mask)
        while True:
            r = table[slot]
            if r < 0:
                table[slot] = i
                ids[i] = g
                g += 1
                break
            same = True
            for j in range(q):
                if codes[r, j] != codes[i, j]:
                    same = False
                    break
            if same:
                ids[i] = ids[r]
                break
            slot = (slot + 1) & (cap - 1)
    return ids, g
