"""Protocol 4 (TTP-free): the device's peer machine, requester and responder in one (sans-I/O).

Requester, per query (``start_query``):

1. subscribe to two fresh random reply topics (one for peers, one for DS, so DS and peers cannot
   link the two by topic) and publish a :class:`PeerRequest` carrying the device's *perturbed*
   point to the 3×3 block of discovery cells around it (:mod:`locpriv.cells`);
2. collect :class:`PeerReply` messages for ``window_s`` seconds, dropping and counting invalid,
   unsolicited, duplicated (per responder, per point), stale and implausibly far ones;
3. choose ``k-1`` replies with :func:`locpriv.grouping.select_group` (A_min < A < A_max, least
   SSE); when infeasible broadcast again (replies accumulate across rounds), up to
   ``max_rounds``, then fail with :class:`GroupInfeasible` naming the reason;
4. send a :class:`DSQuery` with the group centroid (:class:`CentroidLocation`, no identifier) and
   a radius from a fixed ladder that covers the true point, then refine the candidate answer
   with the true location (:func:`locpriv.poi.refine`).

Responder (``receive(PeerRequest)``): answers with the device's current perturbed point under
:class:`ResponderPolicy` (opt-out, maximum distance, token buckets per requester pseudonym and
overall); it never replies to itself and only to topics under ``{root}/reply/``.

The perturbed point is one :class:`~locpriv.noise.PerturbedPoint` shared by requests and
replies (the averaging defence); the device listens on the cell of that perturbed point.
Times are Unix seconds given by the driver; randomness comes from the ``rng`` passed in.
Effects and configuration live in :mod:`locpriv.protocols.p4_types` and are re-exported here.
"""

from __future__ import annotations

import functools
import logging
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from locpriv.cells import CellGrid
from locpriv.errors import ConfigError, GroupInfeasible, RemoteError, RequestTimeout
from locpriv.geo import LocalProjection, haversine_m
from locpriv.grouping import Group, Infeasible, select_group
from locpriv.messages import (
    CentroidLocation,
    DSQuery,
    ErrorReply,
    Message,
    PeerReply,
    PeerRequest,
    Query,
    QueryAnswer,
)
from locpriv.noise import PerturbedPoint
from locpriv.poi import refine
from locpriv.protocols import Send
from locpriv.protocols.p4_types import (
    MAX_RADIUS_M,
    Effect,
    PeerAnswer,
    PeerConfig,
    QueryDone,
    QueryFailed,
    ResponderPolicy,
    Subscribe,
    TokenBucket,
    Unsubscribe,
    radius_ladder,
)
from locpriv.topics import Topics

__all__ = [
    "MAX_RADIUS_M",
    "Effect",
    "PeerAnswer",
    "PeerConfig",
    "PeerMachine",
    "QueryDone",
    "QueryFailed",
    "ResponderPolicy",
    "Subscribe",
    "TokenBucket",
    "Unsubscribe",
    "radius_ladder",
]

log = logging.getLogger(__name__)

PROJECTION_GRID_DEG = 0.1
"""Spacing (degrees) of the origins of the local projections used for grouping."""


@functools.lru_cache(maxsize=64)
def _projection(lat0: float, lon0: float) -> LocalProjection:
    return LocalProjection(lat0, lon0)


# --------------------------------------------------------------------------- machine


@dataclass(slots=True)
class _Query:
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
    centroid: tuple[float, float] = (0.0, 0.0)
    radius_m: float = 0.0
    ds_sent: float = 0.0


class PeerMachine:
    """One device: requester and responder (sans-I/O).

    Inputs: :meth:`set_location`, :meth:`start_query`, :meth:`receive`, :meth:`receive_invalid`,
    :meth:`on_deadline`; outputs: lists of :data:`Effect`. ``stats`` counts everything dropped
    or refused, by reason.
    """

    def __init__(
        self, config: PeerConfig, *, rng: np.random.Generator, topics: Topics | None = None
    ) -> None:
        self.config = config
        self.topics = topics or Topics()
        self.rng = rng
        self.grid = CellGrid(config.side_m)
        self.point = PerturbedPoint(
            config.mechanism,
            reuse_radius_m=config.reuse_radius_m,
            reuse_ttl_s=config.reuse_ttl_s,
            max_draws_per_place=config.max_draws_per_place,
            enabled=config.reuse_enabled,
        )
        self.stats: Counter[str] = Counter()
        self._true: tuple[float, float] | None = None
        self._cell_topic: str | None = None
        self._pseudonym = ""
        self._pseudonym_at = -math.inf
        self._queries: dict[str, _Query] = {}
        self._by_cid: dict[str, str] = {}
        self._by_topic: dict[str, str] = {}
        self._overall = TokenBucket(
            config.responder.overall_rate_per_s, config.responder.overall_burst
        )
        self._per: dict[str, TokenBucket] = {}

    # ------------------------------------------------------------------ helpers

    def _token(self) -> str:
        return f"{int(self.rng.integers(0, 2**63)):016x}"

    def pseudonym(self, now: float) -> str:
        """The current rotating pseudonym (new every ``pseudonym_ttl_s``)."""
        if now - self._pseudonym_at >= self.config.pseudonym_ttl_s:
            self._pseudonym = f"p{self._token()}"
            self._pseudonym_at = now
        return self._pseudonym

    @property
    def reply_prefix(self) -> str:
        """Replies are only sent to topics starting with this."""
        return self.topics.reply("x")[:-1]

    @property
    def cell_topic(self) -> str | None:
        """The discovery topic the device listens on (cell of its perturbed point)."""
        return self._cell_topic

    @property
    def pending(self) -> int:
        """Queries in flight."""
        return len(self._queries)

    def perturbed(self, now: float) -> tuple[float, float] | None:
        """The current perturbed ``(lon, lat)`` (the one published), or None without location."""
        if self._true is None:
            return None
        return self.point.current(self._true[0], self._true[1], now, self.rng)

    def _refresh(self, now: float) -> tuple[tuple[float, float] | None, list[Effect]]:
        own = self.perturbed(now)
        if own is None:
            return None, []
        effects: list[Effect] = []
        topic = self.topics.peer_cell(self.grid.cell_of(*own))
        if topic != self._cell_topic:
            if self._cell_topic is not None:
                effects.append(Unsubscribe(self._cell_topic))
            effects.append(Subscribe(topic, qos=0))
            self._cell_topic = topic
        return own, effects

    def _projection_for(self, lon: float, lat: float) -> LocalProjection:
        """A cached aeqd projection centred on the 0.1° grid node nearest ``(lon, lat)``.

        Points of a group lie within a few km of it, where aeqd's scale error is below 1e-6;
        building a projection costs tens of ms, so a device builds one per ~10 km moved (and
        :meth:`set_location` builds it ahead of the first query).
        """
        step = PROJECTION_GRID_DEG
        return _projection(round(round(lat / step) * step, 6), round(round(lon / step) * step, 6))

    # ------------------------------------------------------------------- inputs

    def set_location(self, lon_deg: float, lat_deg: float, now: float) -> list[Effect]:
        """The device's true position (degrees); may move its discovery subscription."""
        if not (-90.0 <= lat_deg <= 90.0 and -180.0 <= lon_deg <= 180.0):
            raise ConfigError("location out of range")
        self._true = (float(lon_deg), float(lat_deg))
        own, effects = self._refresh(now)
        if own is not None:
            self._projection_for(*own)  # build (and cache) it off the query path
        return effects

    def start_query(self, query: Query, now: float) -> tuple[str, list[Effect]]:
        """Begin a query; returns its id and the effects (subscriptions, broadcasts)."""
        if self._true is None:
            raise ConfigError("set_location() before query()")
        own, effects = self._refresh(now)
        assert own is not None
        qid = self._token()
        q = _Query(
            id=qid,
            query=query,
            true_lon=self._true[0],
            true_lat=self._true[1],
            own_lon=own[0],
            own_lat=own[1],
            peer_topic=self.topics.reply(f"p4-{self._token()}"),
            ds_topic=self.topics.reply(f"p4-{self._token()}"),
            started=now,
            deadline=now + self.config.window_s,
        )
        self._queries[qid] = q
        self._by_topic[q.peer_topic] = qid
        self._by_topic[q.ds_topic] = qid
        effects += [Subscribe(q.peer_topic), Subscribe(q.ds_topic)]
        effects += self._broadcast(q, now)
        log.debug("p4 query %s started", qid)
        return qid, effects

    def _broadcast(self, q: _Query, now: float) -> list[Effect]:
        cid = self._token()
        q.cids.add(cid)
        self._by_cid[cid] = q.id
        request = PeerRequest(
            correlation_id=cid,
            reply_to=q.peer_topic,
            requester=self.pseudonym(now),
            lat=q.own_lat,
            lon=q.own_lon,
            t=max(0.0, now),
            max_distance_m=min(self.config.reach_m, MAX_RADIUS_M),
        )
        return [
            Send(self.topics.peer_cell(c), request, qos=0)
            for c in self.grid.block(q.own_lon, q.own_lat)
        ]

    def receive(self, message: Message, now: float) -> list[Effect]:
        """A decoded message from a discovery or reply topic."""
        if isinstance(message, PeerRequest):
            return self._respond(message, now)
        if isinstance(message, PeerReply):
            self._collect(message, now)
            return []
        if isinstance(message, QueryAnswer | ErrorReply):
            return self._ds_reply(message, now)
        self.stats["unexpected_type"] += 1
        return []

    def receive_invalid(self, topic: str, now: float) -> None:
        """The driver could not decode a payload received on ``topic``: count it."""
        qid = self._by_topic.get(topic)
        if qid is not None and qid in self._queries:
            self._queries[qid].dropped["invalid"] += 1
        self.stats["invalid"] += 1

    # --------------------------------------------------------------- responder

    def _respond(self, req: PeerRequest, now: float) -> list[Effect]:
        policy = self.config.responder
        if req.correlation_id in self._by_cid or req.requester == self._pseudonym:
            return []  # our own broadcast
        if not policy.enabled:
            self.stats["opted_out"] += 1
            return []
        if not req.reply_to.startswith(self.reply_prefix):
            self.stats["bad_reply_to"] += 1
            return []
        own, effects = self._refresh(now)
        if own is None:
            self.stats["no_location"] += 1
            return effects
        limit = policy.max_distance_m if policy.max_distance_m is not None else self.config.reach_m
        if req.max_distance_m is not None:
            limit = min(limit, req.max_distance_m)
        if float(haversine_m(own[0], own[1], req.lon, req.lat)) > limit:
            self.stats["too_far"] += 1
            return effects
        bucket = self._per.get(req.requester)
        if bucket is None:
            if len(self._per) >= policy.max_requesters:
                self._per.pop(next(iter(self._per)))
            bucket = TokenBucket(policy.per_requester_rate_per_s, policy.per_requester_burst)
            self._per[req.requester] = bucket
        if not bucket.take(now):
            self.stats["rate_limited_requester"] += 1
            return effects
        if not self._overall.take(now):
            self.stats["rate_limited_overall"] += 1
            return effects
        self.stats["replied"] += 1
        reply = PeerReply(
            correlation_id=req.correlation_id,
            responder=self.pseudonym(now),
            lat=own[1],
            lon=own[0],
            t=max(0.0, now),
        )
        return [*effects, Send(req.reply_to, reply)]

    # --------------------------------------------------------------- requester

    def _collect(self, rep: PeerReply, now: float) -> None:
        qid = self._by_cid.get(rep.correlation_id)
        q = self._queries.get(qid) if qid is not None else None
        if q is None or q.phase != "collect":
            self.stats["unsolicited"] += 1
            return
        reason = self._reject(q, rep, now)
        if reason is not None:
            q.dropped[reason] += 1
            self.stats[f"reply_{reason}"] += 1
            return
        q.replies[rep.responder] = (rep.lon, rep.lat)
        q.points.add((rep.lon, rep.lat))

    def _reject(self, q: _Query, rep: PeerReply, now: float) -> str | None:
        if rep.responder == self._pseudonym:
            return "own"
        if rep.responder in q.replies:
            return "duplicate_responder"
        if (rep.lon, rep.lat) in q.points or (rep.lon, rep.lat) == (q.own_lon, q.own_lat):
            return "duplicate_point"
        if abs(rep.t - now) > self.config.stale_s:
            return "stale"
        if float(haversine_m(q.own_lon, q.own_lat, rep.lon, rep.lat)) > self.config.reach_m:
            return "far"
        if len(q.replies) >= self.config.max_replies:
            return "overflow"
        return None

    def _candidates(self, q: _Query, proj: LocalProjection) -> tuple[np.ndarray, np.ndarray]:
        """Reply points in metres, thinned and capped: at most k-1 per square of side
        √A_min/2 (any k points inside one span < A_min, so a cluster cannot crowd out the
        others), then the ``max_candidates`` nearest to the requester."""
        lonlat = np.array(list(q.replies.values()), dtype=np.float64).reshape(-1, 2)
        x, y = proj.to_xy(lonlat[:, 0], lonlat[:, 1])
        xy = np.column_stack((x, y))
        ox, oy = proj.point_to_xy(q.own_lon, q.own_lat)
        d = np.hypot(x - ox, y - oy)
        order = np.argsort(d, kind="stable")
        side = math.sqrt(self.config.a_min_m2) / 2.0
        if side > 0.0 and len(order) > self.config.k - 1:
            per: Counter[tuple[int, int]] = Counter()
            keep: list[int] = []
            for i in order:
                key = (math.floor(xy[i, 0] / side), math.floor(xy[i, 1] / side))
                if per[key] < self.config.k - 1:
                    per[key] += 1
                    keep.append(int(i))
            if len(keep) < len(order):
                q.dropped["thinned"] += len(order) - len(keep)
            order = np.asarray(keep, dtype=np.int64)
        if len(order) > self.config.max_candidates:
            q.dropped["beyond_max_candidates"] += len(order) - self.config.max_candidates
            order = order[: self.config.max_candidates]
        return np.array([ox, oy]), xy[order]

    def query_of(self, correlation_id: str) -> str | None:
        """The id of this device's open query that ``correlation_id`` (a peer request or DS
        query it sent) belongs to, or None."""
        return self._by_cid.get(correlation_id)

    def next_deadline(self) -> float | None:
        """The earliest instant (s) :meth:`on_deadline` must run, or None."""
        return min((q.deadline for q in self._queries.values()), default=None)

    def on_deadline(self, now: float) -> list[Effect]:
        """Close collection windows and time out DS queries that are due at ``now``."""
        effects: list[Effect] = []
        for q in [q for q in self._queries.values() if q.deadline <= now]:
            if q.phase == "collect":
                effects += self._close_window(q, now)
            else:
                effects += self._finish(
                    q,
                    QueryFailed(
                        q.id, RequestTimeout(f"DS did not answer in {self.config.ds_timeout_s} s")
                    ),
                )
        return effects

    def _close_window(self, q: _Query, now: float) -> list[Effect]:
        cfg = self.config
        proj = self._projection_for(q.own_lon, q.own_lat)
        own_xy, cand = self._candidates(q, proj)
        result = select_group(
            (float(own_xy[0]), float(own_xy[1])),
            cand,
            cfg.k,
            cfg.a_min_m2,
            cfg.a_max_m2,
            area=cfg.area,
            node_budget=cfg.node_budget,
        )
        if isinstance(result, Infeasible):
            self.stats[f"round_{result.reason.value}"] += 1
            if q.rounds < cfg.max_rounds:
                q.rounds += 1
                q.deadline = now + cfg.window_s
                log.debug("p4 query %s: round %d (%s)", q.id, q.rounds, result.reason.value)
                return self._broadcast(q, now)
            err = GroupInfeasible(
                f"{result.reason.value}: {result.detail} "
                f"({len(q.replies)} usable replies after {q.rounds} rounds)"
            )
            return self._finish(q, QueryFailed(q.id, err))
        q.group = result
        clon, clat = proj.point_to_lonlat(*result.centroid_xy)
        tx, ty = proj.point_to_xy(q.true_lon, q.true_lat)
        dist = math.hypot(tx - result.centroid_xy[0], ty - result.centroid_xy[1])
        q.radius_m = radius_ladder(dist + cfg.radius_margin_m, cfg.radius_base_m)
        q.centroid = (clat, clon)
        q.phase = "ds"
        q.deadline = now + cfg.ds_timeout_s
        q.ds_cid = self._token()
        self._by_cid[q.ds_cid] = q.id
        for cid in q.cids:
            self._by_cid.pop(cid, None)
        ds = DSQuery(
            correlation_id=q.ds_cid,
            reply_to=q.ds_topic,
            query=q.query,
            location=CentroidLocation(lat=clat, lon=clon, radius_m=q.radius_m),
        )
        q.ds_sent = now
        return [Send(self.topics.ds_query, ds), Unsubscribe(q.peer_topic)]

    def _ds_reply(self, msg: QueryAnswer | ErrorReply, now: float) -> list[Effect]:
        qid = self._by_cid.get(msg.correlation_id or "")
        q = self._queries.get(qid) if qid is not None else None
        if q is None or q.phase != "ds" or msg.correlation_id != q.ds_cid:
            self.stats["unsolicited"] += 1
            return []
        if isinstance(msg, ErrorReply):
            return self._finish(q, QueryFailed(q.id, RemoteError(msg.code, msg.reason, msg.field)))
        assert q.group is not None
        pois = refine(msg.pois, q.query, q.true_lat, q.true_lon) if msg.candidates else msg.pois
        answer = PeerAnswer(
            pois=tuple(pois),
            group_size=len(q.group.indices) + 1,
            area_m2=q.group.area_m2,
            sse_m2=q.group.sse_m2,
            rounds=q.rounds,
            centroid=q.centroid,
            radius_m=q.radius_m,
            replies=len(q.replies),
            dropped=dict(q.dropped),
            candidates=len(msg.pois),
            exact=q.group.exact,
            ds_s=max(0.0, now - q.ds_sent),
        )
        return self._finish(q, QueryDone(q.id, answer))

    def _finish(self, q: _Query, outcome: QueryDone | QueryFailed) -> list[Effect]:
        self._queries.pop(q.id, None)
        for cid in (*q.cids, q.ds_cid):
            self._by_cid.pop(cid, None)
        self._by_topic.pop(q.peer_topic, None)
        self._by_topic.pop(q.ds_topic, None)
        effects: list[Effect] = []
        if q.phase == "collect":
            effects.append(Unsubscribe(q.peer_topic))
        effects += [Unsubscribe(q.ds_topic), outcome]
        return effects

    def cancel(self, query_id: str) -> list[Effect]:
        """Forget a query (the caller gave up); returns the unsubscriptions."""
        q = self._queries.get(query_id)
        if q is None:
            return []
        return [
            e
            for e in self._finish(q, QueryFailed(q.id, RequestTimeout("cancelled")))
            if not isinstance(e, QueryFailed)
        ]
