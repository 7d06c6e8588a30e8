"""Following people through one requester's successive regions: what a region's shape tells
an adversary who once knew where they were.

The intersection attack (:func:`simulators.attacks.intersection_attack`) asks *who* asked;
this asks *where* the people inside a requester's regions are. A DS, or anyone who reads the
regions, saw where each user inside the first region was at that moment (she met them, they
are her colleagues, it was their home) and follows each through the later regions: each
estimate moves to the centroid of the part of the region nearest to it, a connected union of
tiles for a session of tiles, the whole region otherwise. Her error is measured against where
each really is, and beside it the error of the prior she would have without the regions
(the position she once knew). The figure is the risk a session's tiles add: members are
hidden per tile (a square of just over A_min), not per region.

Positions are metres of the scenario's projection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import shapely
from numpy.typing import NDArray
from shapely.geometry.base import BaseGeometry

__all__ = ["RULES", "RegionTracker", "TrackingFigures", "tracking_figures"]

F64 = NDArray[np.float64]


RULES = ("centroid", "nearest", "midway")
"""Where a tracker puts someone in the part of a region nearest its last estimate: the part's
centroid, the part's point nearest the last estimate, or midway between the two. The figures
report the rule that located the most (the adversary keeps her best)."""


@dataclass(slots=True)
class RegionTracker:
    """One requester's tracker. ``rows``: the users inside her first region (the requester
    among them); ``start``: where they were then, what the adversary knew, ``(n, 2)``;
    ``est``: her present estimates by each of :data:`RULES`, ``(len(RULES), n, 2)``;
    ``truth``: where they were at the latest region; ``follows``: later regions seen.
    Metres."""

    requester: int
    rows: NDArray[np.int64]
    start: F64
    est: F64
    truth: F64
    follows: int = 0

    @classmethod
    def first(cls, requester: int, rows: NDArray[np.int64], xy: F64) -> RegionTracker:
        """The adversary saw where each of ``rows`` (and the requester, whom a fix scattered
        off her may leave outside) was, ``xy[rows]``, at the first region."""
        rows = np.union1d(np.asarray(rows, dtype=np.int64), [requester])
        at = np.array(xy[rows], dtype=np.float64)
        est = np.repeat(at[None], len(RULES), axis=0)
        return cls(requester, rows, at, est, at.copy())

    def follow(self, shape: BaseGeometry, xy: F64) -> None:
        """A later region ``shape`` (metres; a Polygon, or a MultiPolygon of disjoint
        parts) answered when the users stood at ``xy``: each estimate moves into the part
        nearest it (distance 0 when inside one; ties to the first part), by each rule."""
        parts = shapely.get_parts(shape)
        if len(parts) == 0:
            return
        centres = shapely.get_coordinates(shapely.centroid(parts))
        for r, rule in enumerate(RULES):
            points = shapely.points(self.est[r])
            nearest = np.argmin(shapely.distance(points[:, None], parts[None, :]), axis=1)
            centre = centres[nearest]
            if rule == "centroid":
                self.est[r] = centre
                continue
            line = shapely.shortest_line(points, parts[nearest])
            near = shapely.get_coordinates(shapely.get_point(line, 1))
            self.est[r] = near if rule == "nearest" else (near + centre) / 2.0
        self.truth = np.array(xy[self.rows], dtype=np.float64)
        self.follows += 1

    def errors(self) -> tuple[F64, F64]:
        """Per rule and tracked user, the error (m) of the estimate, ``(len(RULES), n)``,
        and per user that of the prior (the position once known), against where each
        stood at the latest region."""
        track: F64 = np.hypot(*np.moveaxis(self.est - self.truth[None], -1, 0))
        prior: F64 = np.hypot(*(self.start - self.truth).T)
        return track, prior


@dataclass(frozen=True, slots=True)
class TrackingFigures:
    """Over the requesters whose first region was followed at least once, at each one's
    latest region: the median error (m) of the tracker's best rule and of the prior, over
    every tracked user and over the requesters alone, and the shares located within
    ``side_m``."""

    tracked: int
    rule: str
    error_m_median: float
    prior_error_m_median: float
    requester_error_m_median: float
    requester_prior_error_m_median: float
    within_side: float
    prior_within_side: float
    side_m: float


def tracking_figures(trackers: list[RegionTracker], side_m: float) -> TrackingFigures:
    """What ``trackers`` (one per requester) achieved with the rule that located the largest
    share within ``side_m`` (a tile's side, say √A_min; ties to the least median error)."""
    used = [t for t in trackers if t.follows > 0]
    if not used:
        nan = math.nan
        return TrackingFigures(0, "", nan, nan, nan, nan, nan, nan, side_m)
    pairs = [t.errors() for t in used]
    track = np.concatenate([p[0] for p in pairs], axis=1)
    prior = np.concatenate([p[1] for p in pairs])
    me = [int(np.flatnonzero(t.rows == t.requester)[0]) for t in used]
    req_track = np.array([p[0][:, i] for p, i in zip(pairs, me, strict=True)]).T
    req_prior = np.array([p[1][i] for p, i in zip(pairs, me, strict=True)])
    within = np.mean(track <= side_m, axis=1)
    medians = np.median(track, axis=1)
    best = min(range(len(RULES)), key=lambda r: (-within[r], medians[r]))
    return TrackingFigures(
        tracked=track.shape[1],
        rule=RULES[best],
        error_m_median=float(medians[best]),
        prior_error_m_median=float(np.median(prior)),
        requester_error_m_median=float(np.median(req_track[best])),
        requester_prior_error_m_median=float(np.median(req_prior)),
        within_side=float(within[best]),
        prior_within_side=float(np.mean(prior <= side_m)),
        side_m=side_m,
    )
