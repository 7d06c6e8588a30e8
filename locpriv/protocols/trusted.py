"""The trusted anonymizer/mediator as one sans-I/O machine, with its routes and checks.

:class:`TrustedCore` wires the anonymizer (location updates, Protocol 3), the Protocol 1
mediator and the Protocol 2 mediator into the machine the service, the amqtt plugin and the
virtual-clock simulator run; :func:`anonymizer_routes` says what it subscribes to and which
checks each topic applies; :func:`build_trusted_core` builds it from a service configuration.

Identity: every topic that names a user (``loc/{user}``, ``p1/query/{user}``,
``p2/query/{user}``, ``p3/cloak/{user}``) is bound to the broker-authenticated username by the
ACL, and :func:`check_identity` rejects a message whose ``user_id`` differs from that segment
(``invalid_field``, ``field: "user_id"``), so the machines act for the topic's user only.
Abuse limits: with :class:`~locpriv.protocols.limits.RequestLimits`, each user's requests pass
a token bucket and a bound on her unanswered requests, else ``rate_limited``; her location
updates pass a bucket of their own (:attr:`Route.admit` of the location route, asked by the
dispatcher before decoding), beyond which they are dropped and counted.

Tiles: the segment before the user (``loc/{tile}/{user}``, ...) must be the tile of the
message's position, or the tile a :class:`LocationLeave` names (:func:`check_tile`,
``invalid_field`` with ``field: "tile"`` and the right tile in ``details.tile``; a segment that
is no tile id is ``invalid_field`` too), and one the process serves (else ``unavailable``);
a shard (:class:`~locpriv.core.tiles.Shard`) subscribes to its own tiles only
(:func:`shard_tiles`).
"""

from __future__ import annotations

from locpriv.config import ServiceConfig
from locpriv.core.cloak.session_records import SessionRecords
from locpriv.core.cloak.tiled import TileCloakers
from locpriv.core.tiles import Shard, parse_tile, tile_id
from locpriv.errors import ErrorCode
from locpriv.protocols.dispatch import Check, Rejection, Route
from locpriv.protocols.effects import Send, error_send
from locpriv.protocols.limits import RequestLimits, UserLimits
from locpriv.protocols.p1 import P1Mediator
from locpriv.protocols.p2 import Mediator
from locpriv.protocols.p3 import Anonymizer
from locpriv.protocols.seal import AnswerMac, Sealer, read_key
from locpriv.wire.envelope import Received
from locpriv.wire.messages import (
    REPLY_MAX_BYTES,
    CloakRequest,
    ErrorDetails,
    ErrorReply,
    LocationLeave,
    LocationUpdate,
    Message,
    QueryAnswer,
    QueryRequest,
)
from locpriv.wire.topics import Topics

__all__ = [
    "TrustedCore",
    "anonymizer_routes",
    "build_trusted_core",
    "check_identity",
    "check_tile",
    "shard_tiles",
]


class TrustedCore:
    """The anonymizer/mediator service as one machine: P1, P2, P3 and location updates.

    ``receive`` routes by message type; a :class:`QueryRequest` goes to P1 or P2 by its
    ``protocol`` field (the driver checks it matches the topic). DS replies are
    :class:`QueryAnswer`/:class:`ErrorReply` on the mediator's reply topic. With ``limits``,
    requests beyond a user's bucket or pending bound are answered ``rate_limited``.
    """

    def __init__(
        self, anonymizer: Anonymizer, mediator: Mediator, limits: RequestLimits | None = None
    ) -> None:
        self.anonymizer = anonymizer
        self.mediator = mediator
        self.p1 = P1Mediator(anonymizer, mediator)
        self.limits = UserLimits(limits) if limits is not None else None

    def receive(self, message: Message, now: float) -> list[Send]:
        """Route one decoded message; returns the effects."""
        limits = self.limits
        if limits is None or not isinstance(message, CloakRequest | QueryRequest):
            return self._settled(self._route(message, now))
        reason = limits.admit(message.user_id, now)
        if reason is not None:
            return [
                error_send(message.reply_to, message.correlation_id, ErrorCode.RATE_LIMITED, reason)
            ]
        limits.opened(message.user_id, message.reply_to, message.correlation_id)
        return self._settled(self._route(message, now))

    def _settled(self, effects: list[Send]) -> list[Send]:
        if self.limits is not None:
            self.limits.settle(effects)
        return effects

    def _route(self, message: Message, now: float) -> list[Send]:
        if isinstance(message, LocationUpdate | LocationLeave | CloakRequest):
            return self.anonymizer.receive(message, now)
        if isinstance(message, QueryRequest):
            if message.protocol == 1:
                return self.p1.receive(message, now)
            return self.mediator.receive(message, now)
        if isinstance(message, QueryAnswer | ErrorReply):
            return self.mediator.receive(message, now)
        return []

    @property
    def pending(self) -> int:
        """Requests waiting for a cloak or for DS."""
        return self.anonymizer.pending + self.mediator.pending

    @property
    def forged_answers(self) -> int:
        """DS replies dropped unrelayed: their ``mac`` did not check (see :class:`Mediator`)."""
        return self.mediator.forged

    @property
    def pending_cloaks(self) -> int:
        """Cloak requests waiting for enough users (temporal cloaking)."""
        return self.anonymizer.pending

    def session_counts(self) -> dict[str, int]:
        """What session cloaks did in every tile (:meth:`TileCloakers.session_counts`)."""
        return self.anonymizer.cloakers.session_counts()

    @property
    def sessions_revision(self) -> int:
        """Grows whenever a session may have changed (:attr:`TileCloakers.sessions_revision`)."""
        return self.anonymizer.cloakers.sessions_revision

    def export_sessions(self, now: float, since: int = -1) -> SessionRecords:
        """The live sessions (those changed after revision ``since``; -1: all) and fast
        users' speeds of every tile, to carry over a restart or a crash."""
        cloakers = self.anonymizer.cloakers
        return SessionRecords(
            saved_at=now,
            tiles=cloakers.export_sessions(now, since),
            speeds=cloakers.export_speeds(),
        )

    def restore_sessions(self, records: SessionRecords, now: float) -> int:
        """Go on with the sessions (and speeds) a previous process exported; returns how many
        sessions."""
        self.anonymizer.cloakers.restore_speeds(records.speeds, now)
        return self.anonymizer.cloakers.restore_sessions(records.tiles, now)

    def users_per_tile(self) -> dict[str, int]:
        """Current users of every tile this machine has a cloaker for."""
        return self.anonymizer.cloakers.users_per_tile()

    @property
    def revision(self) -> int:
        """Changes whenever :meth:`in_flight` may have."""
        return self.anonymizer.revision + self.mediator.revision

    def in_flight(self) -> list[tuple[str, str]]:
        """Requests a crash would lose: waiting cloaks, and DS queries whose token no
        restarted process could open (ephemeral key)."""
        return self.anonymizer.in_flight() + self.mediator.in_flight()

    def on_deadline(self, now: float) -> list[Send]:
        """Timers of both halves."""
        return self._settled(self.anonymizer.on_deadline(now) + self.mediator.on_deadline(now))

    def next_deadline(self) -> float | None:
        """The earlier of both halves' deadlines (s), or None."""
        times = [
            t
            for t in (self.anonymizer.next_deadline(), self.mediator.next_deadline())
            if t is not None
        ]
        return min(times) if times else None

    def shutdown(self, now: float) -> list[Send]:
        """Answer everything pending with ``unavailable``."""
        return self._settled(self.anonymizer.shutdown(now) + self.mediator.shutdown(now))


def build_trusted_core(config: ServiceConfig, reply_to: str) -> TrustedCore:
    """The P1/P2/P3 machine for ``config``; DS answers are expected on ``reply_to`` (a
    ``svc/reply/{client id}`` topic), its queries go to ``svc/ds/query``, and with an answer
    key (``[state] answer_key_file``) only DS-tagged answers are relayed."""
    token_key = read_key(config.state.token_key_file or None, "token")
    cloakers = TileCloakers(config.cloak_config(), config.tiling(), secret=token_key)
    anonymizer = Anonymizer(cloakers, config.make_projection(), topics=config.topics)
    mediator = Mediator(
        ds_topic=config.topics.svc_ds_query,
        reply_to=reply_to,
        ds_timeout_s=config.limits.ds_timeout_s,
        max_pending=config.limits.max_pending,
        sealer=Sealer.from_config(config.state.token_key_file or None),
        answer_mac=AnswerMac.from_config(config.state.answer_key_file or None),
    )
    lim = config.limits
    limits = RequestLimits(
        requests_per_s=lim.requests_per_s,
        burst=lim.burst,
        max_pending_per_user=lim.max_pending_per_user,
        updates_per_s=lim.updates_per_s,
        update_burst=lim.update_burst,
    )
    return TrustedCore(anonymizer, mediator, limits)


def check_identity(topics: Topics) -> Check:
    """The check of every route that names a user: the message's ``user_id`` must equal the
    topic's user segment, which the broker binds to the authenticated username."""

    def check(received: Received, message: Message) -> Rejection | None:
        user = topics.user_of(received.topic)
        claimed = getattr(message, "user_id", None)
        if user is None or claimed != user:
            return Rejection(ErrorCode.INVALID_FIELD, "user_id does not match the topic", "user_id")
        return None

    return check


def shard_tiles(config: ServiceConfig, shard: Shard) -> list[str] | None:
    """The tiles ``shard`` serves: those of the configured world (``[cloak] world_half_m``)
    that rendezvous hashing gives it; None without tiles (the one tile covers everything)."""
    if not config.tiles.side_m:
        return None
    h = config.cloak.world_half_m
    return [t for t in config.tiling().covering((-h, -h, h, h)) if shard.owns(t)]


def check_tile(topics: Topics, anonymizer: Anonymizer, tiles: list[str] | None) -> Check:
    """The topic's tile must hold the message's position (when it has one), equal the tile the
    message names (a :class:`LocationLeave`), and be one of ``tiles`` (None: any tile)."""
    served = None if tiles is None else frozenset(tiles)

    def check(received: Received, message: Message) -> Rejection | None:
        tile = topics.tile_of(received.topic)
        if tile is None:
            return Rejection(ErrorCode.INVALID_FIELD, "no tile in the topic", "tile")
        ij = parse_tile(tile)
        if ij is None or tile_id(*ij) != tile:
            return Rejection(
                ErrorCode.INVALID_FIELD, f"{tile[:32]!r} is not a tile id t<i>_<j>", "tile"
            )
        if served is not None and tile not in served:
            return Rejection(ErrorCode.UNAVAILABLE, f"tile {tile} is not served here", "tile")
        named = getattr(message, "tile", None)
        if named is not None and named != tile:
            return Rejection(
                ErrorCode.INVALID_FIELD, f"the topic's tile is {tile}, not {named}", "tile"
            )
        lon, lat = getattr(message, "lon", None), getattr(message, "lat", None)
        if lon is not None and lat is not None:
            actual = anonymizer.tile_at(lon, lat)
            if actual is None:
                return Rejection(
                    ErrorCode.INVALID_FIELD, "the position has no tile in this deployment", "lat"
                )
            if actual != tile:
                return Rejection(
                    ErrorCode.INVALID_FIELD,
                    f"the position lies in tile {actual}, not in the topic's tile {tile}"
                    f" (see {topics.config})",
                    "tile",
                    ErrorDetails(tile=actual),
                )
        return None

    return check


def _both(first: Check, second: Check | None) -> Check:
    if second is None:
        return first

    def check(received: Received, message: Message) -> Rejection | None:
        return first(received, message) or second(received, message)

    return check


def _check_request(topics: Topics, protocol: int) -> Check:
    """Identity, then (``protocol`` 1 or 2) the query's protocol field against the topic."""
    identity = check_identity(topics)

    def check(received: Received, message: Message) -> Rejection | None:
        problem = identity(received, message)
        if problem is None and isinstance(message, QueryRequest) and message.protocol != protocol:
            return Rejection(
                ErrorCode.INVALID_FIELD, f"this topic takes protocol {protocol} queries", "protocol"
            )
        return problem

    return check


def anonymizer_routes(
    topics: Topics,
    reply_to: str,
    *,
    anonymizer: Anonymizer | None = None,
    tiles: list[str] | None = None,
    subscribe_tiles: bool = False,
    limits: UserLimits | None = None,
) -> list[Route]:
    """Subscriptions of the anonymizer/mediator service. With ``anonymizer`` the tile of every
        location and request topic is checked (:func:`check_tile`) after the identity: it must
        hold the position and be one of ``tiles`` (None: any). ``subscribe_tiles``: subscribe to
        those tiles' topics only (a shard), not to every tile's. ``limits``: location updates and
    leaves beyond a user's update bucket are dropped before decoding (the trusted core's own)."""
    tile_check = None if anonymizer is None else check_tile(topics, anonymizer, tiles)

    def subs(i: int) -> tuple[str, ...]:
        if tiles is None or not subscribe_tiles:
            return ()
        return tuple(topics.tile_filters(t)[i] for t in tiles)

    return [
        Route(
            topics.location_filter,
            (LocationUpdate, LocationLeave),
            answer_errors=True,
            shareable=False,
            overload_errors=False,
            check=_both(check_identity(topics), tile_check),
            subscriptions=subs(0),
            admit=None if limits is None else limits.admit_update,
            label="location",
        ),
        Route(
            topics.p1_query_filter,
            (QueryRequest,),
            check=_both(_check_request(topics, 1), tile_check),
            subscriptions=subs(1),
            label="p1",
        ),
        Route(
            topics.p2_query_filter,
            (QueryRequest,),
            check=_both(_check_request(topics, 2), tile_check),
            subscriptions=subs(2),
            label="p2",
        ),
        Route(
            topics.p3_cloak_filter,
            (CloakRequest,),
            check=_both(_check_request(topics, 3), tile_check),
            subscriptions=subs(3),
            label="p3",
        ),
        Route(
            reply_to,
            (QueryAnswer, ErrorReply),
            answer_errors=False,
            shareable=False,
            max_bytes=REPLY_MAX_BYTES,
            label="ds_answer",
        ),
    ]
