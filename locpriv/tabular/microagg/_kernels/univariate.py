"""Dynamic programme of optimal univariate microaggregation (see
:func:`locpriv.tabular.microagg.univariate.optimal_univariate`)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _dp(v, k):  # type: ignore[no-untyped-def]
    """Shortest path over the sorted values ``v``: returns (cost, size of the last group)."""
    n = v.shape[0]
    cost = np.full(n + 1, np.inf)
    last = np.zeros(n + 1, dtype=np.intp)
    cost[0] = 0.0
    for i in range(k, n + 1):
        # the group v[i-s .. i-1] for s = 1, 2, ...: Welford's running mean and sum of squares
        mean = 0.0
        m2 = 0.0
        for s in range(1, min(2 * k - 1, i) + 1):
            x = v[i - s]
            delta = x - mean
            mean += delta / s
            m2 += delta * (x - mean)
            if s >= k:
                c = cost[i - s] + m2
                if c < cost[i]:  # strict: among equal costs the shortest last group wins
                    cost[i] = c
                    last[i] = s
    return cost, last
