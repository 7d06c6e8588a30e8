"""A requester's checks of a reply against her own request (pure; defence in depth).

Any app may publish on another app's reply topic, so a :class:`~locpriv.wire.messages.
CloakReply` or :class:`~locpriv.wire.messages.QueryAnswer` is believed only when it is
consistent with what was asked (:class:`Asked`). :func:`region_problem` and :func:`pois_problem`
return a reason (no coordinates in it) or None:

* the region is a valid polygon that covers the user's position: within ``POSITION_TOL_M``, plus
  how far she may have moved since the region's positions were taken (the snapshot holds her
  position as of her last update, no earlier than ``t1``): ``MAX_SPEED_M_S * (now - t1)``, at
  most half the side of a square of the region's area;
* ``area_m2`` equals the polygon's geodesic area within ``AREA_REL_TOL`` (+1 m²), and lies in the
  profile's ``[a_min_m2, a_max_m2]`` within the same tolerance, when a profile was sent;
* ``users`` is at least the profile's ``k`` (at least 1 without one), and no denser than
  ``MAX_USERS_PER_M2`` beyond that (50 users claimed in 1 m² are not);
* ``t1 <= t2``, ``t2`` not later than ``now + CLOCK_SKEW_S`` nor earlier than the request minus
  ``MAX_AGE_S``;
* every POI has the asked category, lies within ``radius_m`` (with ``DISTANCE_REL_TOL`` and
  ``DISTANCE_ABS_M``) of the point or region asked for ``within`` queries, and an exact
  ``nearest`` answer holds at most ``n``.

These cannot catch a plausible forgery (a POI moved inside the radius): that is what the
mediator's answer MAC is for (:class:`locpriv.protocols.seal.AnswerMac`). Distances are
metres in the deployment's local projection (the one DS and the anonymizer use).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import shapely
from shapely.geometry import Point, Polygon

from locpriv.core.geo import LocalProjection, LonLat, RegionShape, area_m2
from locpriv.wire.messages import POI, NearestQuery, PrivacyProfile, Query, WithinQuery

__all__ = [
    "AREA_REL_TOL",
    "CLOCK_SKEW_S",
    "DISTANCE_ABS_M",
    "DISTANCE_REL_TOL",
    "MAX_AGE_S",
    "MAX_SPEED_M_S",
    "MAX_USERS_PER_M2",
    "POSITION_TOL_M",
    "Asked",
    "pois_problem",
    "region_problem",
]

AREA_REL_TOL: Final = 0.01
"""Claimed area vs the polygon's geodesic area, and vs the profile's bounds (relative)."""
POSITION_TOL_M: Final = 1.0
"""How far outside the region the user's position may lie (edges in degrees vs metres), m."""
MAX_USERS_PER_M2: Final = 4.0
"""Most users per m² a region may claim beyond the asked k (people standing shoulder to
shoulder)."""
MAX_SPEED_M_S: Final = 70.0
"""Fastest a user may have moved since her position in the region's snapshot, m/s."""
CLOCK_SKEW_S: Final = 300.0
"""How far the service's clock may run ahead of the user's, s."""
MAX_AGE_S: Final = 86_400.0
"""Oldest ``t2`` (snapshot time) believed, before the request was sent, s."""
DISTANCE_REL_TOL: Final = 0.01
DISTANCE_ABS_M: Final = 5.0
"""A ``within`` POI may lie ``radius_m * (1 + DISTANCE_REL_TOL) + DISTANCE_ABS_M`` away."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What the user asked: her position (None: her last update), query, profile, and when
    (``sent``, her clock, s)."""

    position: LonLat | None
    query: Query | None
    profile: PrivacyProfile | None
    sent: float


def region_problem(  # noqa: PLR0917
    asked: Asked,
    region: RegionShape,
    area: float | None,
    users: int | None,
    t1: float | None,
    t2: float | None,
    now: float,
    projection: LocalProjection,
) -> str | None:
    """Why a cloaked region (with its claimed area, users and [t1, t2]) is not one the service
    could have produced for ``asked``; None when consistent."""
    if not region.is_valid or region.area <= 0.0:
        return "the region is not a valid polygon (or union of tiles)"
    true_area = area_m2(region)
    if asked.position is not None:
        p = asked.position
        if not region.covers(Point(p.lon, p.lat)):
            xy = projection.geometry_to_xy(region)
            x, y = projection.point_to_xy(p.lon, p.lat)
            off = xy.distance(Point(x, y))
            moved = MAX_SPEED_M_S * max(0.0, now - (t1 if t1 is not None else now))
            if off > POSITION_TOL_M + min(moved, 0.5 * math.sqrt(true_area)):
                return f"the region does not cover the user's position ({off:.0f} m off)"
    if area is None:
        return "no area"
    if abs(true_area - area) > AREA_REL_TOL * max(true_area, area) + 1.0:
        return f"claimed area {area:.4g} m² is not the polygon's {true_area:.4g} m²"
    prof = asked.profile
    if prof is not None and not (
        prof.a_min_m2 * (1.0 - AREA_REL_TOL) <= area <= prof.a_max_m2 * (1.0 + AREA_REL_TOL)
    ):
        return f"area {area:.4g} m² outside the asked [{prof.a_min_m2:g}, {prof.a_max_m2:g}]"
    k = prof.k if prof is not None else 1
    if users is None or users < k:
        return f"users {users} fewer than the asked k"
    if users > k and users > MAX_USERS_PER_M2 * true_area:
        return f"{users} users in {true_area:.4g} m² is implausible"
    if t1 is None or t2 is None or not t1 <= t2:
        return "no interval [t1, t2]"
    if t2 > now + CLOCK_SKEW_S or t2 < asked.sent - MAX_AGE_S:
        return "the interval [t1, t2] is not around the request's time"
    return None


def pois_problem(
    asked: Asked,
    pois: list[POI],
    where: Polygon | None,
    *,
    exact: bool,
    projection: LocalProjection,
) -> str | None:
    """Why ``pois`` cannot answer ``asked.query`` at ``where`` (a region in lon/lat; None: the
    user's position); ``exact``: not a candidate set. None when consistent."""
    query = asked.query
    if query is None:
        return None
    if query.category is not None and any(p.category != query.category for p in pois):
        return "a POI of another category than asked"
    if isinstance(query, NearestQuery):
        if exact and len(pois) > query.n:
            return f"{len(pois)} POIs for the {query.n} nearest"
        return None
    assert isinstance(query, WithinQuery)
    if not pois:
        return None
    if where is None:
        if asked.position is None:
            return None
        geom: shapely.Geometry = Point(
            *projection.point_to_xy(asked.position.lon, asked.position.lat)
        )
    else:
        geom = projection.geometry_to_xy(where)
    xs, ys = projection.to_xy(
        np.array([p.lon for p in pois], dtype=np.float64),
        np.array([p.lat for p in pois], dtype=np.float64),
    )
    d = shapely.distance(geom, shapely.points(xs, ys))
    reach = query.radius_m * (1.0 + DISTANCE_REL_TOL) + DISTANCE_ABS_M
    if not bool(np.all(np.isfinite(d))) or float(np.max(d)) > reach:
        far = float(np.nanmax(d)) if bool(np.any(np.isfinite(d))) else math.inf
        return f"a POI {far:.0f} m away, beyond the asked radius {query.radius_m:g} m"
    return None
