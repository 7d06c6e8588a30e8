"""One open Protocol 4 query on the requester side: state, reply screening, DS query, answer.

:class:`OpenQuery` is what :class:`~locpriv.protocols.p4.machine.PeerMachine` keeps per query
between :meth:`~locpriv.protocols.p4.machine.PeerMachine.start_query` and the outcome: the true and
perturbed points (degrees), the two reply topics, the replies collected so far (one per
responder pseudonym, one per point), the chosen group and the DS query sent. No I/O and no
randomness (the machine draws the ids); times are the driver's Unix seconds.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from locpriv.core.geo import LocalProjection, LonLat, haversine_m
from locpriv.core.grouping import Group
from locpriv.core.poi import refine
from locpriv.protocols.p4.types import PeerAnswer, PeerConfig, query_radius
from locpriv.wire.messages import CentroidLocation, DSQuery, PeerReply, Query, QueryAnswer

__all__ = ["OpenQuery"]


_ORIGIN = LonLat(0.0, 0.0)


@dataclass(slots=True)
class OpenQuery:
    """A query in flight: ``phase`` is ``"collect"`` (windows open) then ``"ds"`` (DS asked).

    ``replies`` maps responder pseudonym to its ``(lon, lat)``; ``points`` holds the same
    points, so no point counts twice; ``cids`` are the correlation ids of its broadcasts.
    ``deadline`` is the end of the current window, then of the DS timeout.
    """

    id: str
    query: Query
    true_lon: float
    true_lat: float
    own_lon: float
    own_lat: float
    peer_topic: str
    ds_topic: str
    started: float
    deadline: float
    rounds: int = 1
    phase: str = "collect"
    cids: set[str] = field(default_factory=set)
    replies: dict[str, tuple[float, float]] = field(default_factory=dict)
    points: set[tuple[float, float]] = field(default_factory=set)
    dropped: Counter[str] = field(default_factory=Counter)
    ds_cid: str = ""
    group: Group | None = None
    centroid: LonLat = _ORIGIN
    radius_m: float = 0.0
    extent_m: float = 0.0
    members: tuple[str, ...] = ()
    order: list[str] = field(default_factory=list)
    covered: bool = True
    ds_sent: float = 0.0

    def reject(self, rep: PeerReply, now: float, config: PeerConfig, pseudonym: str) -> str | None:
        """Why ``rep`` is dropped (the requester's own ``pseudonym``, duplicate, stale, too
        far, overflow), or None to keep it."""
        if rep.responder == pseudonym:
            return "own"
        if rep.responder in self.replies:
            return "duplicate_responder"
        if (rep.lon, rep.lat) in self.points or (rep.lon, rep.lat) == (self.own_lon, self.own_lat):
            return "duplicate_point"
        if abs(rep.t - now) > config.stale_s:
            return "stale"
        if float(haversine_m(self.own_lon, self.own_lat, rep.lon, rep.lat)) > config.reach_m:
            return "far"
        if len(self.replies) >= config.max_replies:
            return "overflow"
        return None

    def candidates(
        self, proj: LocalProjection, config: PeerConfig
    ) -> tuple[np.ndarray, np.ndarray]:
        """Reply points in metres, thinned and capped: at most k-1 per square of side
        √A_min/2 (any k points inside one span < A_min, so a cluster cannot crowd out the
        others), then the ``max_candidates`` nearest to the requester."""
        keys = list(self.replies)
        lonlat = np.array(list(self.replies.values()), dtype=np.float64).reshape(-1, 2)
        x, y = proj.to_xy(lonlat[:, 0], lonlat[:, 1])
        xy = np.column_stack((x, y))
        ox, oy = proj.point_to_xy(self.own_lon, self.own_lat)
        d = np.hypot(x - ox, y - oy)
        order = np.argsort(d, kind="stable")
        side = math.sqrt(config.a_min_m2) / 2.0
        if side > 0.0 and len(order) > config.k - 1:
            per: Counter[tuple[int, int]] = Counter()
            keep: list[int] = []
            for i in order:
                key = (math.floor(xy[i, 0] / side), math.floor(xy[i, 1] / side))
                if per[key] < config.k - 1:
                    per[key] += 1
                    keep.append(int(i))
            if len(keep) < len(order):
                self.dropped["thinned"] += len(order) - len(keep)
            order = np.asarray(keep, dtype=np.int64)
        if len(order) > config.max_candidates:
            self.dropped["beyond_max_candidates"] += len(order) - config.max_candidates
            order = order[: config.max_candidates]
        self.order = [keys[int(i)] for i in order]
        return np.array([ox, oy]), xy[order]

    def ask_ds(
        self,
        group: Group,
        cand: np.ndarray,
        own_xy: tuple[float, float],
        proj: LocalProjection,
        *,
        config: PeerConfig,
        cid: str,
        now: float,
    ) -> DSQuery:
        """Enter the DS phase with ``group`` (indices into ``cand``, metres, the requester at
        ``own_xy``): the DS query (correlation id ``cid``) for its centroid with the radius of
        :func:`~locpriv.protocols.p4.types.query_radius` - computed from the members' perturbed
        points only. Whether that disc covers the true point is recorded (``covered``) and
        changes nothing that anyone else observes."""
        self.group = group
        cx, cy = group.centroid_xy
        clon, clat = proj.point_to_lonlat(cx, cy)
        members = cand[list(group.indices)].reshape(-1, 2)
        extent = math.hypot(own_xy[0] - cx, own_xy[1] - cy)
        if len(members):
            extent = max(extent, float(np.hypot(members[:, 0] - cx, members[:, 1] - cy).max()))
        self.extent_m = extent
        self.members = tuple(self.order[i] for i in group.indices)
        self.radius_m = query_radius(extent, config)
        tx, ty = proj.point_to_xy(self.true_lon, self.true_lat)
        self.covered = math.hypot(tx - cx, ty - cy) <= self.radius_m
        self.centroid = LonLat(clon, clat)
        self.phase = "ds"
        self.deadline = now + config.ds_timeout_s
        self.ds_cid = cid
        self.ds_sent = now
        return DSQuery(
            correlation_id=cid,
            reply_to=self.ds_topic,
            query=self.query,
            location=CentroidLocation(lat=clat, lon=clon, radius_m=self.radius_m),
        )

    def answer(self, msg: QueryAnswer, now: float) -> PeerAnswer:
        """The answer from DS's reply ``msg`` (candidates refined at the true point)."""
        assert self.group is not None
        pois = (
            refine(msg.pois, self.query, lon=self.true_lon, lat=self.true_lat)
            if msg.candidates
            else msg.pois
        )
        return PeerAnswer(
            pois=tuple(pois),
            group_size=len(self.group.indices) + 1,
            area_m2=self.group.area_m2,
            sse_m2=self.group.sse_m2,
            rounds=self.rounds,
            centroid=self.centroid,
            radius_m=self.radius_m,
            replies=len(self.replies),
            dropped=dict(self.dropped),
            candidates=len(msg.pois),
            exact=self.group.exact,
            ds_s=max(0.0, now - self.ds_sent),
            covered=self.covered,
            members=self.members,
        )
