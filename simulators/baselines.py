"""Classic spatial cloaks, as comparison points for locpriv's cloaker (not part of the library).

Pure functions over a static population ``xy`` (n × 2, metres) that return every user's cloak
as a rectangle ``(xmin, ymin, xmax, ymax)`` (n × 4):

* :func:`quadtree_cloak` — Gruteser & Grunwald (2003), the spatial part of their adaptive
  interval cloaking: starting from the whole area, the quadrant holding the requester is
  subdivided while it still holds at least k users; the region is the last quadrant with at
  least k. Each user's region depends on where *she* is, so a user inside another's region may
  get a smaller one: not reciprocal.
* :func:`hilbert_cloak` — Kalnis, Ghinita, Mouratidis & Papadias (2007): users sorted by their
  Hilbert value are cut into buckets of k consecutive users (the last takes the remainder, up to
  2k - 1); the region is the bounding box of the requester's bucket. Every member of a bucket
  gets the same region: reciprocal.

:func:`users_inside` counts the users in rectangles (boundaries included), the ground truth of
the comparison in ``notebooks/mobility_and_privacy.ipynb``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["hilbert_cloak", "hilbert_index", "quadtree_cloak", "users_inside"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
Bounds = tuple[float, float, float, float]

MAX_DEPTH = 40
"""Quadtree subdivisions at most (k users on one point would otherwise split forever)."""


def _root(xy: F64, bounds: Bounds | None) -> Bounds:
    """``bounds`` widened to hold every user; by default the users' box."""
    x0, y0 = (float(v) for v in xy.min(axis=0))
    x1, y1 = (float(v) for v in xy.max(axis=0))
    if bounds is not None:
        x0, y0 = min(x0, bounds[0]), min(y0, bounds[1])
        x1, y1 = max(x1, bounds[2]), max(y1, bounds[3])
    return x0, y0, x1, y1


def quadtree_cloak(xy: F64, k: int, bounds: Bounds | None = None) -> F64:
    """Every user's quadtree cloak (n × 4): the smallest quadrant of the recursive subdivision
    of ``bounds`` that holds her and at least ``k`` users. Quadrants are half-open (the lower
    edges belong to the quadrant), so each user lies in exactly one per level. Raises
    ``ValueError`` when there are fewer than ``k`` users."""
    xy = np.asarray(xy, dtype=np.float64)
    if not 1 <= k <= len(xy):
        raise ValueError(f"need 1 <= k <= n users, got k={k}, n={len(xy)}")
    out = np.empty((len(xy), 4))
    stack = [(_root(xy, bounds), np.arange(len(xy)), 0)]
    while stack:
        (x0, y0, x1, y1), idx, depth = stack.pop()
        if depth == MAX_DEPTH:
            out[idx] = (x0, y0, x1, y1)
            continue
        xm, ym = 0.5 * (x0 + x1), 0.5 * (y0 + y1)
        east = xy[idx, 0] >= xm
        north = xy[idx, 1] >= ym
        for quad, rect in (
            (~east & ~north, (x0, y0, xm, ym)),
            (east & ~north, (xm, y0, x1, ym)),
            (~east & north, (x0, ym, xm, y1)),
            (east & north, (xm, ym, x1, y1)),
        ):
            sub = idx[quad]
            if len(sub) >= k:
                stack.append((rect, sub, depth + 1))
            elif len(sub):
                out[sub] = (x0, y0, x1, y1)  # her quadrant would hold fewer than k
    return out


def hilbert_index(xy: F64, order: int = 16, bounds: Bounds | None = None) -> I64:
    """Position of each user along the Hilbert curve of a ``2**order`` × ``2**order`` grid laid
    over ``bounds`` (cells of equal size; users on the far edges fall in the last cell)."""
    xy = np.asarray(xy, dtype=np.float64)
    x0, y0, x1, y1 = _root(xy, bounds)
    side = 1 << order
    ix = np.clip(((xy[:, 0] - x0) / max(x1 - x0, 1e-300) * side).astype(np.int64), 0, side - 1)
    iy = np.clip(((xy[:, 1] - y0) / max(y1 - y0, 1e-300) * side).astype(np.int64), 0, side - 1)
    d = np.zeros(len(xy), dtype=np.int64)
    s = side >> 1
    while s > 0:  # from the coarsest quadrant down: add its rank, then orient the sub-curve
        rx = (ix & s) > 0
        ry = (iy & s) > 0
        d += s * s * ((3 * rx) ^ ry)
        flip = ~ry & rx
        ix = np.where(flip, side - 1 - ix, ix)
        iy = np.where(flip, side - 1 - iy, iy)
        swap = ~ry
        ix, iy = np.where(swap, iy, ix), np.where(swap, ix, iy)
        s >>= 1
    return d


def hilbert_cloak(xy: F64, k: int, order: int = 16, bounds: Bounds | None = None) -> F64:
    """Every user's Hilbert Cloak (n × 4): the bounding box of her bucket of k consecutive users
    in Hilbert order (ties by row; the last bucket takes the remainder). Raises ``ValueError``
    when there are fewer than ``k`` users."""
    xy = np.asarray(xy, dtype=np.float64)
    n = len(xy)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n users, got k={k}, n={n}")
    rank = np.argsort(hilbert_index(xy, order, bounds), kind="stable")
    bucket = np.empty(n, dtype=np.int64)
    bucket[rank] = np.minimum(np.arange(n) // k, n // k - 1)
    nb = n // k
    lo = np.full((nb, 2), np.inf)
    hi = np.full((nb, 2), -np.inf)
    np.minimum.at(lo, bucket, xy)
    np.maximum.at(hi, bucket, xy)
    out: F64 = np.hstack([lo, hi])[bucket]
    return out


def users_inside(xy: F64, rects: F64) -> list[I64]:
    """For each rectangle (m × 4), the users inside it, boundaries included (ascending rows)."""
    xy = np.asarray(xy, dtype=np.float64)
    order = np.argsort(xy[:, 0], kind="stable")
    xs = xy[order, 0]
    out = []
    for x0, y0, x1, y1 in np.asarray(rects, dtype=np.float64):
        a, b = np.searchsorted(xs, x0, "left"), np.searchsorted(xs, x1, "right")
        cand = order[a:b]
        ys = xy[cand, 1]
        out.append(np.sort(cand[(ys >= y0) & (ys <= y1)]))
    return out
