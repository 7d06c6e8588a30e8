"""locpriv's cloaker against the classic cloaks on one static population, and the attacks.

Pure functions behind the comparison in ``notebooks/mobility_and_privacy.ipynb``:

* :func:`population` — users on a square: ``"uniform"``, or ``"hotspots"`` (three Gaussian
  crowds of 60, 150 and 400 m and a 20 % uniform background);
* :func:`locpriv_cloak` — every user's region from locpriv's shared partition
  (:func:`locpriv.core.cloak.partition.build_partition`, then the leaf or, above ``a_max``, the
  leaf shrunk toward its members or its core: what
  :func:`~locpriv.core.cloak.partition.cloak_once` returns
  for each user, built once for all; Protocols 1 and 3 get their regions from this cloaker);
* :func:`region_metrics` — achieved k, areas and the area window, reciprocity, and three
  adversaries who know every position and see the region of a request made by a uniformly
  drawn user: the **centre** and **centroid** attacks (guess the user nearest the region's centre,
  or the users-inside' centroid) and the **re-run** attack (run the cloak for every user inside
  and keep those who would have got this very region; guess one of them).

Regions are rectangles ``(xmin, ymin, xmax, ymax)`` in metres, NaN for a request that failed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from locpriv.core.cloak.partition import RegionCache, build_partition, shared_region
from locpriv.core.cloak.types import CloakParams
from simulators.baselines import users_inside

__all__ = ["locpriv_cloak", "population", "region_metrics"]

F64 = NDArray[np.float64]


def population(kind: str, n: int, side_m: float, seed: int) -> F64:
    """``n`` users on ``[0, side_m]²``, ``kind`` ``"uniform"`` or ``"hotspots"``."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.uniform(0.0, side_m, (n, 2))
    if kind != "hotspots":
        raise ValueError(f"kind must be 'uniform' or 'hotspots', got {kind!r}")
    centres = np.array([[0.3, 0.3], [0.7, 0.6], [0.4, 0.8]]) * side_m
    sd = np.array([60.0, 150.0, 400.0])
    which = rng.choice(3, size=n, p=[0.4, 0.3, 0.3])
    xy = centres[which] + rng.normal(size=(n, 2)) * sd[which, None]
    bg = rng.random(n) < 0.2
    xy[bg] = rng.uniform(0.0, side_m, (int(bg.sum()), 2))
    out: F64 = np.clip(xy, 0.0, side_m)
    return out


def locpriv_cloak(xy: F64, params: CloakParams, world: tuple[float, float, float, float]) -> F64:
    """Every user's locpriv region (n × 4; NaN where no region fits the area window)."""
    xy = np.asarray(xy, dtype=np.float64)
    n = len(xy)
    t = np.zeros(n)
    part = build_partition(xy[:, 0], xy[:, 1], t, world, k=params.k, a_min_m2=params.a_min_m2)
    cache = RegionCache()
    out: F64 = np.full((n, 4), np.nan)
    for i in range(n):
        region, _ = shared_region(part, i, params, 0.0, x=xy[:, 0], y=xy[:, 1], t=t, cache=cache)
        if region is not None:
            out[i] = region.polygon.bounds
    return out


def region_metrics(xy: F64, rects: F64, k: int, a_min_m2: float, a_max_m2: float) -> dict[str, Any]:
    """Figures of one cloak on one population, every user a requester once.

    ``inside``: users in the region (boundaries included); ``window``: share of requests whose
    region satisfies ``a_min < area < a_max`` (a failed request counts as outside);
    ``reciprocal``: share of regions that every user inside would get too; ``rerun_below_k``:
    share of requests whose re-run candidates (users inside who would get the same region) are
    fewer than k; ``*_success``: the adversaries' success rates, to compare with ``1/k``.
    """
    xy = np.asarray(xy, dtype=np.float64)
    n = len(xy)
    ok = ~np.isnan(rects).any(axis=1)
    uniq, region_of = np.unique(rects[ok], axis=0, return_inverse=True)
    region_of = region_of.ravel()
    inside = users_inside(xy, uniq)
    reg = np.full(n, -1, dtype=np.int64)
    reg[ok] = region_of
    counts = np.array([len(m) for m in inside])
    area = (uniq[:, 2] - uniq[:, 0]) * (uniq[:, 3] - uniq[:, 1])
    # per region: the re-run candidates, the centre and centroid guesses
    consistent = np.array([int((reg[m] == j).sum()) for j, m in enumerate(inside)])
    centre_guess = np.empty(len(uniq), dtype=np.int64)
    centroid_guess = np.empty(len(uniq), dtype=np.int64)
    for j, m in enumerate(inside):
        pts = xy[m]
        c = uniq[j].reshape(2, 2).mean(axis=0)
        centre_guess[j] = m[np.argmin(np.hypot(*(pts - c).T))]
        centroid_guess[j] = m[np.argmin(np.hypot(*(pts - pts.mean(axis=0)).T))]
    users = np.flatnonzero(ok)
    r = reg[users]
    a = area[r]
    return {
        "failed": float(1.0 - ok.mean()),
        "inside_min": int(counts[r].min()),
        "inside_median": float(np.median(counts[r])),
        "below_k": float((counts[r] < k).mean()),
        "area_median_m2": float(np.median(a)),
        "area_p95_m2": float(np.percentile(a, 95)),
        "window": float(((a > a_min_m2) & (a < a_max_m2)).sum() / n),
        "reciprocal": float((consistent[r] == counts[r]).mean()),
        "rerun_below_k": float((consistent[r] < k).mean()),
        "rerun_min": int(consistent[r].min()),
        "uniform_success": float(np.mean(1.0 / counts[r])),
        "centre_success": float((centre_guess[r] == users).sum() / n),
        "centroid_success": float((centroid_guess[r] == users).sum() / n),
        "rerun_success": float(np.mean(1.0 / consistent[r])),
    }
