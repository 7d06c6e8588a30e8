"""Per-group and per-row statistics over a range of groups or rows (``nogil``: the ranges run
at once on threads, :func:`locpriv.tabular.threads.map_items`).

Groups are reached through ``order``/``start`` from :func:`group_order`: a counting sort of the
rows by label, stable, so each group's rows ascend and a group's sums run in row order, as one
pass over all rows in row order adds them. Every result of a group or a row depends on that
group or row alone, so how the ranges are cut (and how many threads run them) never changes a
bit of it.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def group_order(labels, g):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """Rows ordered by group (stable: ascending within a group) and the groups' starts
    (``start[g]`` = n); ``labels`` in ``0..g-1``."""
    start = np.zeros(g + 1, dtype=np.int64)
    for i in range(labels.size):
        start[labels[i] + 1] += 1
    for c in range(g):
        start[c + 1] += start[c]
    fill = start[:g].copy()
    order = np.empty(labels.size, dtype=np.int64)
    for i in range(labels.size):
        c = labels[i]
        order[fill[c]] = i
        fill[c] += 1
    return order, start


@numba.njit(cache=True, nogil=True)
def means_range(X, order, start, c0, c1, out):  # type: ignore[no-untyped-def]  # noqa: PLR0917  # pragma: no cover
    """``out[c]`` = mean of group c's rows of ``X`` (0 for an empty group) for c in
    ``c0..c1-1``; the sums in row order."""
    d = X.shape[1]
    for c in range(c0, c1):
        for j in range(d):
            out[c, j] = 0.0
        for t in range(start[c], start[c + 1]):
            i = order[t]
            for j in range(d):
                out[c, j] += X[i, j]
        m = max(start[c + 1] - start[c], 1)
        for j in range(d):
            out[c, j] = out[c, j] / m


@numba.njit(cache=True, nogil=True)
def span_range(X, order, start, c0, c1, lo, hi):  # type: ignore[no-untyped-def]  # noqa: PLR0917  # pragma: no cover
    """``lo[c]``, ``hi[c]`` = least and greatest values of group c's rows (``inf``/``-inf``
    for an empty group) for c in ``c0..c1-1``."""
    d = X.shape[1]
    for c in range(c0, c1):
        for j in range(d):
            lo[c, j] = np.inf
            hi[c, j] = -np.inf
        for t in range(start[c], start[c + 1]):
            i = order[t]
            for j in range(d):
                v = X[i, j]
                lo[c, j] = min(lo[c, j], v)
                hi[c, j] = max(hi[c, j], v)


@numba.njit(cache=True, nogil=True)
def row_sq_range(X, mu, a, b, out):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """``out[i]`` = squared distance of row i of ``X`` to ``mu`` (columns 0..d-1 in order) for
    i in ``a..b-1``."""
    d = X.shape[1]
    for i in range(a, b):
        e = 0.0
        for j in range(d):
            r = X[i, j] - mu[j]
            e += r * r
        out[i] = e


@numba.njit(cache=True, nogil=True)
def row_sq_diff_range(A, B, a, b, out):  # type: ignore[no-untyped-def]  # pragma: no cover
    """``out[i]`` = squared distance between rows i of ``A`` and ``B`` (columns in order) for
    i in ``a..b-1``."""
    d = A.shape[1]
    for i in range(a, b):
        e = 0.0
        for j in range(d):
            r = A[i, j] - B[i, j]
            e += r * r
        out[i] = e
