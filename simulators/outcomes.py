"""Scoring a finished query against ground truth, once for both runners.

The fleet (real broker, real clock) and the virtual runner (virtual clock) get the same
outcomes from the same machines - :class:`~locpriv.protocols.user.Answer` for Protocols 1-3,
:class:`~locpriv.protocols.p4.types.PeerAnswer` for Protocol 4, or an exception - and fill a
:class:`~simulators.evaluate.QueryRecord` with these functions. Positions are metres in the
scenario's projection; times are the runner's seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from shapely.geometry import MultiPolygon, Polygon

from locpriv.core.geo import LocalProjection
from locpriv.errors import GroupInfeasible, LocprivError, RemoteError, RequestTimeout
from locpriv.protocols.p4.types import PeerAnswer
from locpriv.protocols.user import Answer
from simulators.evaluate import QueryRecord, precision_recall, region_truth

__all__ = ["error_key", "score_peer", "score_trusted"]

Positions = tuple[NDArray[np.float64], NDArray[np.float64]]


def error_key(exc: BaseException) -> str:
    """A failed query's ``QueryRecord.error``: the wire code of an error reply,
    ``group_infeasible:<reason>`` for Protocol 4 (``group_infeasible`` when it names none),
    ``timeout`` when no reply came."""
    if isinstance(exc, RemoteError):
        return exc.raw_code
    if isinstance(exc, GroupInfeasible):
        return f"group_infeasible:{exc.reason_code}" if exc.reason_code else "group_infeasible"
    if isinstance(exc, RequestTimeout):
        return "timeout"
    if isinstance(exc, LocprivError):
        return str(exc.code)
    return type(exc).__name__


def score_trusted(
    rec: QueryRecord,
    answer: Answer,
    *,
    exact: Sequence[str],
    proj: LocalProjection,
    xy: tuple[float, float],
    positions: Positions,
    user: int,
    t_request: float,
    reported_xy: tuple[float, float] | None = None,
) -> None:
    """Fill ``rec`` from a Protocol 1-3 answer: precision/recall against the ``exact`` POI ids;
    for a region, its area, the service's count, the users truly inside (``positions`` at
    answer time), the adversaries' errors and how long it was held (``t2 - t_request``).
    Without a region (P2) DS and an adversary there see the fix the request reported
    (``reported_xy``, metres; default the truth ``xy``): their error is its distance from
    the truth."""
    rec.precision, rec.recall = precision_recall([p.id for p in answer.pois], exact)
    cloak = answer.cloak
    if answer.protocol == 2 or cloak is None:
        fx, fy = reported_xy if reported_xy is not None else xy
        rec.ds_error_m = math.hypot(fx - xy[0], fy - xy[1])
        rec.adversary_error_m = rec.ds_error_m
        return
    rec.area_m2 = cloak.area_m2
    rec.k_reported = cloak.users
    rec.held_s = max(0.0, cloak.t2 - t_request)
    region_xy = proj.geometry_to_xy(cloak.region)
    rec.k_achieved = region_truth(rec, region_xy, xy, positions, user)
    if isinstance(region_xy, Polygon):
        rec.region_xy = _ring_xy(region_xy)
    elif isinstance(region_xy, MultiPolygon):  # a session's tiles
        rec.region_rings_xy = tuple(_ring_xy(g) for g in region_xy.geoms)


def _ring_xy(polygon: Polygon) -> tuple[tuple[float, float], ...]:
    """The outer ring of ``polygon`` (metres), not closed, to 0.1 m."""
    ring = list(polygon.exterior.coords)[:-1]
    return tuple((round(float(x), 1), round(float(y), 1)) for x, y, *_ in ring)


def score_peer(
    rec: QueryRecord,
    answer: PeerAnswer,
    *,
    exact: Sequence[str],
    proj: LocalProjection,
    xy: tuple[float, float],
) -> None:
    """Fill ``rec`` from a Protocol 4 answer: the group (its size is both achieved and
    reported k), its area, and DS's and the adversary's error (both see the centroid)."""
    rec.precision, rec.recall = precision_recall([p.id for p in answer.pois], exact)
    rec.k_achieved = answer.group_size
    rec.k_reported = answer.group_size
    rec.area_m2 = answer.area_m2
    rec.held_s = 0.0
    cx, cy = proj.point_to_xy(*answer.centroid)
    rec.ds_error_m = math.hypot(cx - xy[0], cy - xy[1])
    rec.group_xyr = (round(float(cx), 1), round(float(cy), 1), round(float(answer.radius_m), 1))
    rec.adversary_error_m = rec.ds_error_m
