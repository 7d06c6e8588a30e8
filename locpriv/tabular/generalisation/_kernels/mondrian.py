"""Mondrian over numeric key attributes with k-anonymity alone (the cuts of
:func:`locpriv.tabular.generalisation.mondrian.mondrian`, same classes, in one compiled loop)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def mondrian_numeric(x, rank, inv_span, k, relaxed):  # type: ignore[no-untyped-def]
    """Partition the rows of ``x`` (n × s floats): returns ``(perm, starts, cuts)``, the records
    grouped by class (``perm[starts[i]:starts[i + 1]]``, the last class running to n) and the
    number of cuts. A segment of fewer than 2k records is final; otherwise dimensions by
    normalised width ``(max - min) * inv_span``, widest first (ties: lower index), and the
    first allowable cut is made: strict at the lower median (``x <= m | x > m``, or
    ``x < m | x >= m`` when m is the maximum; both sides >= k), relaxed by halving the
    records sorted by (value, record index): ``rank[r, c]`` is record r's position in that
    order over the whole table (distinct), so the lower half is a selection, not a sort."""
    n, s = x.shape
    perm = np.arange(n)
    stack_a = np.empty(n + 1, dtype=np.int64)
    stack_b = np.empty(n + 1, dtype=np.int64)
    starts = np.empty(n, dtype=np.int64)
    nfinal = 0
    top = 0
    stack_a[0] = 0
    stack_b[0] = n
    top = 1
    cuts = 0
    lo = np.empty(s)
    hi = np.empty(s)
    widths = np.empty(s)
    buf = np.empty(n, dtype=np.int64)
    while top > 0:
        top -= 1
        a = stack_a[top]
        b = stack_b[top]
        m = b - a
        if m < 2 * k:
            starts[nfinal] = a
            nfinal += 1
            continue
        for c in range(s):
            lo[c] = np.inf
            hi[c] = -np.inf
        for i in range(a, b):
            r = perm[i]
            for c in range(s):
                v = x[r, c]
                lo[c] = min(lo[c], v)
                hi[c] = max(hi[c], v)
        for c in range(s):
            widths[c] = (hi[c] - lo[c]) * inv_span[c]
        order = np.argsort(-widths, kind="mergesort")
        split = -1
        for di in range(s):
            c = order[di]
            if widths[c] <= 0:
                break
            if relaxed:
                half = m // 2
                ranks = np.empty(m, dtype=np.int64)
                for i in range(m):
                    ranks[i] = rank[perm[a + i], c]
                last = np.partition(ranks, half - 1)[half - 1]  # highest rank of the lower half
                left = 0
                right = half
                for i in range(m):
                    r = perm[a + i]
                    if rank[r, c] <= last:
                        buf[left] = r
                        left += 1
                    else:
                        buf[right] = r
                        right += 1
                for i in range(m):
                    perm[a + i] = buf[i]
                split = a + half
                break
            vals = np.empty(m)
            for i in range(m):
                vals[i] = x[perm[a + i], c]
            med = np.partition(vals, (m - 1) // 2)[(m - 1) // 2]
            nl = 0
            for i in range(m):
                if vals[i] <= med:
                    nl += 1
            strict_less = nl == m
            if strict_less:
                nl = 0
                for i in range(m):
                    if vals[i] < med:
                        nl += 1
            if nl < k or m - nl < k:
                continue
            # stable partition of perm[a:b]: the left side first, both in their order
            left = 0
            right = nl
            for i in range(m):
                r = perm[a + i]
                v = x[r, c]
                if (v < med) if strict_less else (v <= med):
                    buf[left] = r
                    left += 1
                else:
                    buf[right] = r
                    right += 1
            for i in range(m):
                perm[a + i] = buf[i]
            split = a + nl
            break
        if split < 0:
            starts[nfinal] = a
            nfinal += 1
            continue
        cuts += 1
        stack_a[top] = split  # right side below, so the left side is taken first
        stack_b[top] = b
        stack_a[top + 1] = a
        stack_b[top + 1] = split
        top += 2
    return perm, starts[:nfinal].copy(), cuts
