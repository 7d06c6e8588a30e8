"""The requester side of Protocols 1-3 as one sans-I/O machine.

:class:`UserMachine` is what an app (:class:`locpriv.client.Client`), the real-broker fleet and
the virtual-clock simulator all drive. It owns one reply topic and serves any number of
concurrent requests, of one user or many (a simulator's shard):

* :meth:`UserMachine.cloak` - Protocol 3's first hop: a :class:`CloakRequest`, answered with a
  :class:`Cloak`;
* :meth:`UserMachine.query` - Protocol 1 (the mediator cloaks and asks DS; the candidate set is
  refined here with the exact position), Protocol 2 (the mediator forwards the exact position;
  the answer is exact) or Protocol 3 (cloak, then ask DS with the region from a **fresh reply
  topic of its own**, so DS cannot link a session's queries, then refine).

Requests and location updates travel on the user's own topics in the tile of her position
(``loc/{tile}/{user_id}``, ``p1/query/{tile}/{user_id}``, ...), which a broker's ACL lets only
that authenticated user publish on. The tile comes from the deployment's retained
:class:`~locpriv.wire.messages.DeploymentConfig`, which the driver hands to
:meth:`UserMachine.configure` when it arrives on the ``config`` topic - never from a reply
topic, which every app may write to; until it is known, anything needing a tile raises
``LocalProtocolError``. A request without a position goes to the tile where the anonymizer
holds her (her last :meth:`location_update`, or P1/P3 request with a position).
A DS-hop topic is ``reply/<fresh id>``: under the shipped ACL an app reads only
``reply/<its client id>``, so the driver receives it on a connection of its own whose client id
is that fresh id (:class:`locpriv.transport.endpoints.ReplyEndpoints`).

Profiles: a request's ``k``, ``a_min_m2``, ``a_max_m2`` and ``max_delay_s`` override the
machine's default profile field by field; with ``bounds`` the result is clamped to the
operator's bounds (``k`` and ``max_delay_s``), as the simulators do for their users.

Replies are believed only when consistent with the request
(:mod:`locpriv.protocols.sanity`: the region covers her position, its area is the polygon's and
within her bounds, users >= k, plausible times, POIs of the category and within the radius
asked, no more than n): an inconsistent :class:`CloakReply` or :class:`QueryAnswer` - anyone
may write to a reply topic - is dropped and counted in :attr:`UserMachine.rejected`, and the
request keeps waiting for the genuine reply (or its timeout); it never becomes an answer.

Inputs: :meth:`cloak`, :meth:`query`, :meth:`receive`, :meth:`on_deadline`, :meth:`cancel`;
outputs: :mod:`~locpriv.protocols.effects` - ``Send``, ``Subscribe``/``Unsubscribe`` (the
fresh DS-hop topics), and ``Done`` (a :class:`Cloak` or an :class:`Answer`) or ``Failed``
(an exception of :mod:`locpriv.errors`: remote errors as :func:`~locpriv.errors.remote_error`,
:class:`~locpriv.errors.RequestTimeout` when ``timeout_s`` passes). Times are the driver's
``now`` (seconds); ids come from an :data:`~locpriv.protocols.ids.IdSource`.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass
from typing import Any, Literal

from locpriv.core.geo import LocalProjection, LonLat, RegionShape, region_from_wire
from locpriv.core.poi import refine
from locpriv.core.tiles import Tiling
from locpriv.errors import LocalProtocolError, RequestTimeout
from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe, Unsubscribe
from locpriv.protocols.ids import IdSource, new_id
from locpriv.protocols.sanity import Asked, pois_problem, region_problem
from locpriv.wire.messages import (
    POI,
    CloakReply,
    CloakRequest,
    DeploymentConfig,
    DSQuery,
    ErrorReply,
    LocationLeave,
    LocationUpdate,
    Message,
    PrivacyProfile,
    Query,
    QueryAnswer,
    QueryRequest,
    RegionLocation,
)
from locpriv.wire.topics import WORLD_TILE, Topics

__all__ = ["Answer", "Cloak", "ProfileBounds", "UserMachine"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Cloak:
    """A cloaked region: polygon in (lon, lat) degrees (or, for a session of tiles, the union of
    its tiles: a Polygon or MultiPolygon), area in m², ``users`` inside (None when the service
    did not say) and the interval ``[t1, t2]`` (Unix seconds) it covers."""

    region: RegionShape
    area_m2: float
    users: int | None
    t1: float
    t2: float


@dataclass(frozen=True, slots=True)
class Answer:
    """A query's answer at the user's exact position.

    ``received`` is how many POIs came over the wire (the candidate set for Protocols 1 and 3);
    ``cloak`` the region used (Protocols 1 and 3), else None.
    """

    pois: list[POI]
    protocol: int
    received: int
    cloak: Cloak | None = None


@dataclass(frozen=True, slots=True)
class ProfileBounds:
    """Operator bounds a profile is clamped to: ``k`` in [k_min, k_max], ``max_delay_s`` at
    most ``max_delay_s``."""

    k_min: int = 2
    k_max: int = 100
    max_delay_s: float = 60.0


@dataclass(slots=True)
class _Open:
    id: str
    kind: Literal["cloak", "query"]
    protocol: int
    position: LonLat | None
    query: Query | None
    deadline: float
    cid: str
    sent: float = 0.0
    profile: PrivacyProfile | None = None
    hop_topic: str | None = None
    hop_cid: str | None = None
    cloak: Cloak | None = None


class UserMachine:
    """Requests of Protocols 1-3 over one reply topic ``reply_to`` (sans-I/O)."""

    def __init__(
        self,
        topics: Topics,
        reply_to: str,
        *,
        profile: PrivacyProfile | None = None,
        bounds: ProfileBounds | None = None,
        ids: IdSource = new_id,
        deployment: DeploymentConfig | None = None,
    ) -> None:
        self.topics = topics
        self.reply_to = reply_to
        self.profile = profile
        self.bounds = bounds
        self.ids = ids
        self.deployment: DeploymentConfig | None = None
        self._projection: LocalProjection | None = None
        self._placed: dict[str, str] = {}
        """Per user, the tile whose owner holds her position (from her last location update or
        P1/P3 request with a position): left with a :class:`LocationLeave` on a tile change."""
        if deployment is not None:
            self.configure(deployment)
        self._open: dict[str, _Open] = {}
        self._by_cid: dict[str, str] = {}
        self._heap: list[tuple[float, str]] = []
        self._check_projection: LocalProjection | None = None
        self.rejected = 0
        """Replies dropped as inconsistent with their request (see the module docstring)."""

    @property
    def pending(self) -> int:
        """Requests in flight."""
        return len(self._open)

    def request_of(self, correlation_id: str | None) -> str | None:
        """The open request a message with ``correlation_id`` belongs to (request or reply)."""
        return self._by_cid.get(correlation_id or "")

    # -------------------------------------------------------------------- tiles

    def configure(self, deployment: DeploymentConfig) -> None:
        """Use ``deployment``'s projection and tile side from now on."""
        if deployment == self.deployment:
            return
        old = self.deployment
        self.deployment = deployment
        if deployment.tile_m is None:
            self._projection = None
        elif old is None or (old.lat0_deg, old.lon0_deg) != (
            deployment.lat0_deg,
            deployment.lon0_deg,
        ):
            self._projection = LocalProjection(deployment.lat0_deg, deployment.lon0_deg)
        self._placed.clear()

    def tile_at(self, position: LonLat) -> str:
        """The tile of ``position``; raises LocalProtocolError before the deployment is known
        or for a position the projection cannot place."""
        d = self.deployment
        if d is None:
            raise LocalProtocolError(
                f"no deployment configuration yet (retained on {self.topics.config}, published"
                " by the anonymizer): is the anonymizer running?"
            )
        if d.tile_m is None:
            return WORLD_TILE
        assert self._projection is not None
        x, y = self._projection.point_to_xy(position.lon, position.lat)
        tile = Tiling(d.tile_m).tile_of(x, y)
        if tile is None:
            raise LocalProtocolError("the position lies outside the deployment's projection")
        return tile

    def location_update(
        self,
        *,
        user_id: str,
        position: LonLat,
        now: float,
        t: float | None = None,
        accuracy_m: float | None = None,
    ) -> list[Send]:
        """The :class:`LocationUpdate` of ``user_id`` at ``position`` (taken at ``t``, default
        ``now``) on her tile's topic, preceded by a :class:`LocationLeave` for her previous
        tile when she changed tiles (its owner, maybe another shard, forgets her at once);
        later requests without a position go to her tile."""
        tile = self.tile_at(position)
        update = LocationUpdate(
            user_id=user_id,
            lat=position.lat,
            lon=position.lon,
            t=now if t is None else t,
            accuracy_m=accuracy_m,
        )
        return [
            *self._moved(user_id, tile, now),
            Send(self.topics.location(user_id, tile=tile), update),
        ]

    def _moved(self, user_id: str, tile: str, now: float) -> list[Send]:
        """A :class:`LocationLeave` for the tile that held the user's position, if not ``tile``."""
        previous = self._placed.get(user_id)
        self._placed[user_id] = tile
        if previous is None or previous == tile:
            return []
        leave = LocationLeave(user_id=user_id, tile=previous, t=now)
        return [Send(self.topics.location(user_id, tile=previous), leave)]

    def _tile_for(self, user_id: str, position: LonLat | None) -> str:
        """The tile of ``position``, else the tile where the anonymizer holds the user."""
        if position is not None:
            return self.tile_at(position)
        tile = self._placed.get(user_id)
        if tile is None:
            self.tile_at(LonLat(0.0, 0.0))  # raises when the deployment is unknown
            raise LocalProtocolError("no position: send a location update first or pass one")
        return tile

    # ------------------------------------------------------------------ profiles

    def merge_profile(
        self,
        k: int | None = None,
        a_min_m2: float | None = None,
        a_max_m2: float | None = None,
        max_delay_s: float | None = None,
        session_s: float | None = None,
    ) -> PrivacyProfile | None:
        """The default profile with the given fields overridden, clamped to ``bounds``; None
        (the operator's default) when nothing is given and there is no default profile. Raises
        LocalProtocolError when a field is missing and there is no default to take it from."""
        base = self.profile
        if base is None:
            given = (k, a_min_m2, a_max_m2, max_delay_s, session_s)
            if all(v is None for v in given):
                return None
            if k is None or a_min_m2 is None or a_max_m2 is None:
                raise LocalProtocolError("give k, a_min_m2 and a_max_m2 (or a default profile)")
            base = PrivacyProfile(k=k, a_min_m2=a_min_m2, a_max_m2=a_max_m2)
        k_ = base.k if k is None else k
        delay = base.max_delay_s if max_delay_s is None else max_delay_s
        if self.bounds is not None:
            k_ = max(self.bounds.k_min, min(k_, self.bounds.k_max))
            delay = min(delay, self.bounds.max_delay_s)
        return PrivacyProfile(
            k=k_,
            a_min_m2=base.a_min_m2 if a_min_m2 is None else a_min_m2,
            a_max_m2=base.a_max_m2 if a_max_m2 is None else a_max_m2,
            max_delay_s=delay,
            session_s=base.session_s if session_s is None else session_s,
        )

    # ------------------------------------------------------------------- inputs

    def cloak(
        self,
        *,
        user_id: str,
        position: LonLat | None,
        profile: PrivacyProfile | None,
        now: float,
        timeout_s: float,
        accuracy_m: float | None = None,
    ) -> tuple[str, list[Effect]]:
        """Protocol 3: ask for a region around ``position`` (None: the user's last update;
        ``accuracy_m``: how far it may lie from the device, if known). ``timeout_s`` is
        counted from ``now`` and extended by the profile's ``max_delay_s``."""
        tile = self._tile_for(user_id, position)
        req = self._new("cloak", 3, position, None, now, timeout_s, profile)
        moved = [] if position is None else self._moved(user_id, tile, now)
        send = self._cloak_request(req, user_id, position, profile, tile, accuracy_m=accuracy_m)
        return req.id, [*moved, send]

    def query(
        self,
        query: Query,
        *,
        protocol: int,
        user_id: str,
        position: LonLat,
        profile: PrivacyProfile | None,
        now: float,
        timeout_s: float,
        attributes: dict[str, str | int | float] | None = None,
        accuracy_m: float | None = None,
    ) -> tuple[str, list[Effect]]:
        """Ask ``query`` at ``position`` by Protocol 1, 2 or 3 (``profile`` is ignored by P2;
        ``attributes`` are key attributes for the mediator to strip, P1/P2; ``accuracy_m``:
        how far ``position`` may lie from the device, if known; P1 and P3)."""
        if protocol not in (1, 2, 3):
            raise LocalProtocolError(f"unknown protocol {protocol!r} (1, 2 or 3)")
        tile = self._tile_for(user_id, position)
        use = profile if protocol != 2 else None
        req = self._new("query", protocol, position, query, now, timeout_s, use)
        # P1 and P3 place the user at ``position`` in the anonymizer; P2 only relays it
        moved: list[Effect] = [*self._moved(user_id, tile, now)] if protocol != 2 else []
        if protocol == 3:
            send = self._cloak_request(req, user_id, position, use, tile, accuracy_m=accuracy_m)
            return req.id, [*moved, send]
        message = QueryRequest(
            correlation_id=req.cid,
            reply_to=self.reply_to,
            user_id=user_id,
            protocol=protocol,
            lat=position.lat,
            lon=position.lon,
            accuracy_m=accuracy_m if protocol == 1 else None,
            query=query,
            profile=use,
            attributes=attributes or {},
        )
        topic = self.topics.p1_query if protocol == 1 else self.topics.p2_query
        return req.id, [*moved, Send(topic(user_id, tile=tile), message)]

    def receive(self, message: Message, now: float) -> list[Effect]:
        """A reply on :attr:`reply_to` or on a DS-hop topic; anything else (a
        :class:`DeploymentConfig` too: it counts only from the ``config`` topic, see
        :meth:`configure`) is ignored."""
        cid = getattr(message, "correlation_id", None)
        rid = self._by_cid.get(cid or "")
        req = self._open.get(rid or "")
        if req is None:
            return []
        if isinstance(message, ErrorReply):
            err = message.exception()
            return self._finish(req, Failed(req.id, err))
        if req.hop_cid is not None and cid == req.hop_cid:
            return self._ds_answer(req, message)
        problem: str | None = None
        if isinstance(message, CloakReply):
            if req.kind == "query" and (req.protocol != 3 or req.hop_cid is not None):
                return []  # a duplicate (QoS 1 delivers at least once) or out of place
            region = Cloak(
                region_from_wire(message.region),
                message.area_m2,
                message.users,
                message.t1,
                message.t2,
            )
            problem = self._region_problem(req, region, now, area=message.area_m2, t1=message.t1)
            if self._refused(req, problem):
                return []
            if req.kind == "cloak":
                return self._finish(req, Done(req.id, region))
            return self._ds_hop(req, region, message)
        if isinstance(message, QueryAnswer):
            if req.kind != "query" or req.protocol == 3:
                return []  # a duplicate or out of place: the request goes on
            cloak: Cloak | None = None
            if message.region is not None:
                cloak = Cloak(
                    region_from_wire(message.region),
                    message.area_m2 or 0.0,
                    message.users,
                    message.t1 or 0.0,
                    message.t2 or 0.0,
                )
            if req.protocol == 1 and cloak is None:
                problem = "a protocol 1 answer without its region"
            elif cloak is not None:
                problem = self._region_problem(req, cloak, now, area=message.area_m2, t1=message.t1)
            if self._refused(req, problem or self._pois_problem(req, message, cloak)):
                return []
            return self._finish(req, Done(req.id, self._answer(req, message, cloak)))
        unexpected = LocalProtocolError(f"unexpected {type(message).__name__} reply")
        return self._finish(req, Failed(req.id, unexpected))

    def next_deadline(self) -> float | None:
        """When :meth:`on_deadline` has a request to time out (s), or None."""
        while self._heap and self._heap[0][1] not in self._open:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def on_deadline(self, now: float) -> list[Effect]:
        """Fail every request whose time is up with :class:`RequestTimeout`."""
        out: list[Effect] = []
        while self._heap and self._heap[0][0] <= now:
            _, rid = heapq.heappop(self._heap)
            req = self._open.get(rid)
            if req is not None and req.deadline <= now:
                what = "the DS hop" if req.hop_cid else f"protocol {req.protocol}"
                out += self._finish(req, Failed(rid, RequestTimeout(f"no reply for {what}")))
        return out

    def cancel(self, request_id: str) -> list[Effect]:
        """Forget a request the caller gave up on; returns the unsubscriptions it needs."""
        req = self._open.get(request_id)
        if req is None:
            return []
        return [e for e in self._finish(req, None) if not isinstance(e, Failed)]

    # --------------------------------------------------------------- internals

    def _new(  # noqa: PLR0917
        self,
        kind: Literal["cloak", "query"],
        protocol: int,
        position: LonLat | None,
        query: Query | None,
        now: float,
        timeout_s: float,
        profile: PrivacyProfile | None,
    ) -> _Open:
        delay = profile.max_delay_s if profile is not None else 0.0
        req = _Open(
            id=self.ids(),
            kind=kind,
            protocol=protocol,
            position=position,
            query=query,
            deadline=now + timeout_s + delay,
            cid=self.ids(),
            sent=now,
            profile=profile,
        )
        self._open[req.id] = req
        self._by_cid[req.cid] = req.id
        heapq.heappush(self._heap, (req.deadline, req.id))
        return req

    def _cloak_request(
        self,
        req: _Open,
        user_id: str,
        position: LonLat | None,
        profile: PrivacyProfile | None,
        tile: str,
        *,
        accuracy_m: float | None = None,
    ) -> Send:
        message = CloakRequest(
            correlation_id=req.cid,
            reply_to=self.reply_to,
            user_id=user_id,
            lat=position.lat if position else None,
            lon=position.lon if position else None,
            accuracy_m=accuracy_m if position else None,
            profile=profile,
        )
        return Send(self.topics.p3_cloak(user_id, tile=tile), message)

    def _ds_hop(self, req: _Open, cloak: Cloak, reply: CloakReply) -> list[Effect]:
        """Protocol 3's second hop: DS with the region, from a fresh reply topic."""
        assert req.query is not None
        req.cloak = cloak
        req.hop_topic = self.topics.reply(self.ids())
        req.hop_cid = self.ids()
        self._by_cid[req.hop_cid] = req.id
        ds_query = DSQuery(
            correlation_id=req.hop_cid,
            reply_to=req.hop_topic,
            query=req.query,
            location=RegionLocation(region=reply.region),
        )
        return [Subscribe(req.hop_topic), Send(self.topics.ds_query, ds_query)]

    def _ds_answer(self, req: _Open, message: Message) -> list[Effect]:
        if not isinstance(message, QueryAnswer):
            err = LocalProtocolError(f"unexpected {type(message).__name__} from DS")
            return self._finish(req, Failed(req.id, err))
        if self._refused(req, self._pois_problem(req, message, req.cloak)):
            return []
        return self._finish(req, Done(req.id, self._answer(req, message, req.cloak)))

    # ------------------------------------------------------------------ checks

    def _projection_for(self, req: _Open) -> LocalProjection:
        """The deployment's projection (DS's and the anonymizer's), else one at the user."""
        d = self.deployment
        lat0, lon0 = (
            (d.lat0_deg, d.lon0_deg)
            if d is not None
            else (req.position.lat, req.position.lon)
            if req.position is not None
            else (0.0, 0.0)
        )
        proj = self._check_projection
        if proj is None or (proj.lat0_deg, proj.lon0_deg) != (lat0, lon0):
            proj = self._check_projection = LocalProjection(lat0, lon0)
        return proj

    def _asked(self, req: _Open) -> Asked:
        return Asked(req.position, req.query, req.profile, req.sent)

    def _region_problem(
        self, req: _Open, cloak: Cloak, now: float, *, area: float | None, t1: float | None
    ) -> str | None:
        """``area`` and ``t1`` as on the wire (a P1 answer may lack them)."""
        return region_problem(
            self._asked(req),
            cloak.region,
            area,
            cloak.users,
            t1,
            cloak.t2,
            now,
            self._projection_for(req),
        )

    def _pois_problem(self, req: _Open, message: QueryAnswer, cloak: Cloak | None) -> str | None:
        return pois_problem(
            self._asked(req),
            list(message.pois),
            cloak.region if cloak is not None else None,
            exact=not message.candidates,
            projection=self._projection_for(req),
        )

    def refuse_plain(self, message: QueryAnswer, query: Query, position: LonLat) -> bool:
        """For a driver's plain DS query (no machine request): True - counted and logged -
        when ``message`` cannot answer ``query`` at ``position``."""
        req = _Open("", "query", 0, position, query, 0.0, "")
        return self._refused(req, self._pois_problem(req, message, None))

    def _refused(self, req: _Open, problem: str | None) -> bool:
        """Count and log an inconsistent reply; True when ``problem`` is not None."""
        if problem is None:
            return False
        self.rejected += 1
        log.warning("reply dropped as inconsistent with its request: %s", problem)
        return True

    def _answer(self, req: _Open, message: QueryAnswer, cloak: Cloak | None) -> Answer:
        assert req.query is not None and req.position is not None
        pois = message.pois
        if message.candidates:
            pois = refine(pois, req.query, lon=req.position.lon, lat=req.position.lat)
        return Answer(list(pois), req.protocol, len(message.pois), cloak)

    def _finish(self, req: _Open, outcome: Done[Any] | Failed | None) -> list[Effect]:
        self._open.pop(req.id, None)
        self._by_cid.pop(req.cid, None)
        out: list[Effect] = []
        if req.hop_cid is not None:
            self._by_cid.pop(req.hop_cid, None)
        if req.hop_topic is not None:
            out.append(Unsubscribe(req.hop_topic))
        if outcome is not None:
            out.append(outcome)
        return out
