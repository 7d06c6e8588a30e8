"""Client library for apps (Protocols 1-3)::

    async with Client("mqtt://broker:1883", user_id="alice") as c:
        await c.update_location(lon=2.17, lat=41.39)
        cloak = await c.cloak(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=2)
        answer = await c.query(NearestQuery(category="cafe", n=3), protocol=1)

* Protocol 1: the query and the exact location go to the trusted mediator, which cloaks and asks
  DS; the candidate set that comes back is refined here with the exact location.
* Protocol 2: the mediator forwards the exact location without identity; the answer is exact.
* Protocol 3: the anonymizer returns only a region; this client queries DS directly with the
  region from a fresh reply topic and refines the candidates locally. DS sees only the region.
  The fresh topic is read on a short-lived second connection whose client id is that topic's
  last segment (:class:`~locpriv.transport.endpoints.ReplyEndpoints`), as a broker ACL that
  binds reply topics to client ids requires.

Tiles: location updates and requests go to the topics of the tile of the user's position,
computed from the deployment configuration the anonymizer keeps retained on
``{prefix}/v1/config``. The client waits for it on connect (``config_timeout_s``); without it
(no anonymizer has ever run on this broker and prefix) it logs a warning, and calls that need
a tile raise ``LocalProtocolError`` saying so until it arrives.

Replies are checked against their request (:mod:`locpriv.protocols.sanity`): a cloak reply or
an answer inconsistent with it - another app may write to this client's reply topic - is
dropped, logged and counted (:attr:`Client.rejected_replies`), and the call keeps waiting for
the genuine reply or its timeout.

Fix requests: an app that passes ``position_source`` answers the anonymizer's
:class:`~locpriv.wire.messages.FixWanted` (read on ``{prefix}/v1/fix/{user_id}``, which only its
login may read and only the anonymizer write) with a location update of where the source says
it is now. The anonymizer asks the members of a historical-k-anonymity session whose reports
are old before it answers that session, so fresh answers make its regions smaller.

Broker credentials: the user name in the URL (``mqtts://alice@broker:8883``), the password as
``password=`` (not in the URL, which ends up in logs); ``ca_file=`` verifies a TLS broker.

The logic is :class:`locpriv.protocols.user.UserMachine`'s; this module only moves its messages
and time. The MQTT client id (and so the reply topic) is random unless given, never derived from
the user id. Errors (all from :mod:`locpriv.errors`): an error reply raises the class of its code
(``CloakTimeout``, ``CloakInfeasible``, ``ServiceUnavailable``, ``Overloaded``, ... - each also a
``RemoteError``), ``RequestTimeout`` when no reply arrives, ``TransportError`` when the broker is
unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal, Self

from locpriv.core.geo import LonLat
from locpriv.errors import (
    LocalProtocolError,
    LocprivError,
    TransportError,
)
from locpriv.protocols.effects import Done, Effect, Failed, Send
from locpriv.protocols.user import Answer, Cloak, UserMachine
from locpriv.transport import Received, ReplyEndpoints, Transport, connect, new_client_id
from locpriv.transport.deadlines import Clock
from locpriv.transport.host import MachineHost
from locpriv.wire.messages import (
    POI,
    REPLY_MAX_BYTES,
    DeploymentConfig,
    DSQuery,
    ErrorReply,
    FixWanted,
    PointLocation,
    PrivacyProfile,
    Query,
    QueryAnswer,
    decode,
    encode,
)
from locpriv.wire.topics import DEFAULT_PREFIX, Topics

__all__ = ["Answer", "Client", "Cloak", "PositionSource"]

log = logging.getLogger(__name__)

PositionSource = Callable[[], LonLat | Awaitable[LonLat | None] | None]
"""Where the device is *now*, degrees (sync or async): a fresh fix, never a cached old one (the
anonymizer takes the answer as a position of the moment it arrives and keeps the device that
much closer to its regions' edges); None to skip this request. An object with ``lon``,
``lat`` and ``accuracy_m`` (the fix's accuracy radius, metres, as the phone reports it) gives
the accuracy too; without it the anonymizer assumes ``[cloak] session_fix_error_m``."""

FIX_EVERY_S = 1.0
"""A client answers at most one fix request per this many seconds (monotonic clock)."""


class Client:
    """An app's connection to the trusted services. Keyword-only, like ``aiomqtt.Client``.

    ``profile`` is the default privacy profile for P1/P3 (None: the operator's default);
    ``timeout_s`` bounds each request (plus ``max_delay_s`` for temporal cloaking). ``clock``
    (Unix seconds) and ``transport`` may be injected; other keywords go to the transport.
    ``password`` and ``ca_file`` (PEM) are used for every connection the client opens.
    """

    def __init__(
        self,
        url: str,
        *,
        user_id: str,
        prefix: str = DEFAULT_PREFIX,
        client_id: str | None = None,
        profile: PrivacyProfile | None = None,
        timeout_s: float = 10.0,
        config_timeout_s: float = 5.0,
        location_qos: int = 1,
        clock: Clock = time.time,
        transport: Transport | None = None,
        password: str | None = None,
        ca_file: str | None = None,
        position_source: PositionSource | None = None,
        **transport_options: Any,
    ) -> None:
        self.user_id = user_id
        self.position_source = position_source
        """Where the device is now: asked when the anonymizer wants a fresh report (see
        :data:`PositionSource`); None: fix requests are ignored."""
        self.fixes_sent = 0
        """Location updates sent in answer to the anonymizer's fix requests."""
        self._fix_tasks: set[asyncio.Task[None]] = set()
        self._last_fix = -math.inf
        self.topics = Topics(prefix)
        self.topics.location(user_id)  # validates the id as a topic segment
        self.timeout_s = timeout_s
        self.config_timeout_s = config_timeout_s
        self.location_qos = location_qos
        self.clock = clock

        def open_connection(cid: str) -> Transport:
            return connect(
                url, client_id=cid, password=password, ca_file=ca_file, **transport_options
            )

        main = transport or open_connection(client_id or new_client_id("c"))
        self.client_id = main.client_id
        self.machine = UserMachine(self.topics, self.topics.reply(self.client_id), profile=profile)
        self._configured = asyncio.Event()
        self._host = MachineHost(
            self.machine,
            main,
            topics=self.topics,
            opener=open_connection,
            deliver=self._handle,
            clock=clock,
            name=f"client-{self.client_id}",
        )
        self._plain: dict[str, tuple[Query, LonLat]] = {}
        """Correlation ids of plain DS queries (:meth:`ds_query`) in flight; only these
        settle the host's futures from here (a machine request's id never does)."""
        self._position: LonLat | None = None
        self._accuracy_m: float | None = None

    @property
    def rejected_replies(self) -> int:
        """Replies dropped as inconsistent with their request since the start."""
        return self.machine.rejected

    @property
    def _transport(self) -> Transport:
        return self._host.transport

    @property
    def endpoints(self) -> ReplyEndpoints:
        """The connections of fresh reply topics (``opened``, ``active``: diagnostics)."""
        return self._host.endpoints

    @property
    def profile(self) -> PrivacyProfile | None:
        """The default privacy profile."""
        return self.machine.profile

    async def __aenter__(self) -> Self:
        subs = [(self.machine.reply_to, 1), (self.topics.config, 1)]
        if self.position_source is not None:
            subs.append((self.topics.fix_wanted(self.user_id), 0))
        await self._host.start(subs)
        if not await self._deployment():
            log.warning(
                "no deployment configuration on %s within %g s: is the anonymizer running?"
                " Location updates and requests fail until it arrives",
                self.topics.config,
                self.config_timeout_s,
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for task in list(self._fix_tasks):
            task.cancel()
        await self._host.stop(TransportError("client closed"), (exc_type, exc, tb))

    async def _deployment(self) -> bool:
        """Wait (at most ``config_timeout_s``) for the deployment configuration."""
        if not self._configured.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config_timeout_s):
                    await self._configured.wait()
        return self._configured.is_set()

    @property
    def position(self) -> LonLat | None:
        """The last position sent with :meth:`update_location`."""
        return self._position

    # ------------------------------------------------------------------ location

    async def update_location(
        self, *, lon: float, lat: float, t: float | None = None, accuracy_m: float | None = None
    ) -> None:
        """Publish the user's exact position (degrees) to the anonymizer of its tile."""
        await self._deployment()
        here = LonLat(lon, lat)
        sends = self.machine.location_update(
            user_id=self.user_id, position=here, now=self.clock(), t=t, accuracy_m=accuracy_m
        )
        for send in sends:  # a LocationLeave for her old tile first, when she changed tiles
            await self._transport.publish(send.topic, encode(send.message), qos=self.location_qos)
        self._position = here
        self._accuracy_m = accuracy_m

    def _here(
        self, lon: float | None, lat: float | None, accuracy_m: float | None
    ) -> tuple[LonLat, float | None]:
        if lon is not None and lat is not None:
            return LonLat(lon, lat), accuracy_m
        if self._position is None:
            raise LocalProtocolError("no position: call update_location() or pass lon/lat")
        return self._position, self._accuracy_m

    # -------------------------------------------------------------------- cloak

    async def cloak(
        self,
        *,
        k: int | None = None,
        a_min_m2: float | None = None,
        a_max_m2: float | None = None,
        max_delay_s: float | None = None,
        session_s: float | None = None,
        lon: float | None = None,
        lat: float | None = None,
        accuracy_m: float | None = None,
        timeout_s: float | None = None,
    ) -> Cloak:
        """Protocol 3: a cloaked region around the user (at ``lon``/``lat`` if given, with
        the fix's ``accuracy_m`` if known, else her last update). ``session_s`` > 0 keeps k
        of the same users in her successive regions (historical k-anonymity). Raises
        CloakInfeasible, CloakTimeout, RemoteError, RequestTimeout."""
        profile = self.machine.merge_profile(k, a_min_m2, a_max_m2, max_delay_s, session_s)
        position = LonLat(lon, lat) if lon is not None and lat is not None else None
        await self._deployment()
        rid, effects = self.machine.cloak(
            user_id=self.user_id,
            position=position,
            profile=profile,
            now=self.clock(),
            timeout_s=timeout_s or self.timeout_s,
            accuracy_m=accuracy_m if position is not None else None,
        )
        result = await self._await(rid, effects)
        assert isinstance(result, Cloak)
        return result

    # -------------------------------------------------------------------- query

    async def query(
        self,
        query: Query,
        *,
        protocol: Literal[1, 2, 3] = 1,
        lon: float | None = None,
        lat: float | None = None,
        k: int | None = None,
        a_min_m2: float | None = None,
        a_max_m2: float | None = None,
        max_delay_s: float | None = None,
        session_s: float | None = None,
        attributes: dict[str, str | int | float] | None = None,
        accuracy_m: float | None = None,
        timeout_s: float | None = None,
    ) -> Answer:
        """Ask ``query`` at the user's position (``lon``/``lat`` with the fix's
        ``accuracy_m`` if known, else her last update) by Protocol 1, 2 or 3; the answer is
        exact (refined locally for 1 and 3). ``attributes`` (P1/P2) are stripped by the
        mediator."""
        here, accuracy = self._here(lon, lat, accuracy_m)
        profile = self.machine.merge_profile(k, a_min_m2, a_max_m2, max_delay_s, session_s)
        await self._deployment()
        rid, effects = self.machine.query(
            query,
            protocol=protocol,
            user_id=self.user_id,
            position=here,
            profile=profile,
            now=self.clock(),
            timeout_s=timeout_s or self.timeout_s,
            attributes=attributes,
            accuracy_m=accuracy,
        )
        result = await self._await(rid, effects)
        assert isinstance(result, Answer)
        return result

    async def ds_query(
        self, query: Query, *, lon: float, lat: float, timeout_s: float | None = None
    ) -> list[POI]:
        """Ask DS directly at an exact point (no privacy; for tests and baselines)."""
        cid = new_client_id("d")
        message = DSQuery(
            correlation_id=cid,
            reply_to=self.machine.reply_to,
            query=query,
            location=PointLocation(lat=lat, lon=lon),
        )
        # not the machine's: the host's futures, resolved in _handle by correlation id
        effects: list[Effect] = [Send(self.topics.ds_query, message)]
        self._plain[cid] = (query, LonLat(lon, lat))
        try:
            reply = await self._host.request(cid, effects, timeout_s or self.timeout_s)
        finally:
            self._plain.pop(cid, None)
        assert isinstance(reply, QueryAnswer)
        return list(reply.pois)

    # ------------------------------------------------------------------ fixes

    def _answer_fix(self) -> None:
        """Send a fresh location report for a fix request (at most one per
        ``FIX_EVERY_S``, and one at a time)."""
        now = time.monotonic()
        if self.position_source is None or self._fix_tasks or now - self._last_fix < FIX_EVERY_S:
            return
        self._last_fix = now
        task = asyncio.get_running_loop().create_task(self._send_fix(self.position_source))
        self._fix_tasks.add(task)
        task.add_done_callback(self._fix_tasks.discard)

    async def _send_fix(self, source: PositionSource) -> None:
        try:
            got = source()
            here = await got if inspect.isawaitable(got) else got
            if here is None:
                return
            accuracy = getattr(here, "accuracy_m", None)
            await self.update_location(lon=here.lon, lat=here.lat, accuracy_m=accuracy)
            self.fixes_sent += 1
        except asyncio.CancelledError:
            raise
        except Exception:  # the app's source or the broker: the anonymizer uses the old report
            log.warning("could not answer a fix request", exc_info=True)

    # ------------------------------------------------------------------ driving

    async def _await(self, rid: str, effects: list[Effect]) -> Any:
        try:
            return await self._host.request(rid, effects)  # the machine times it out
        finally:
            await self._host.effects.run(self.machine.cancel(rid))  # no-op once it finished

    def _handle(self, received: Received) -> None:
        """One message from the main connection or a fresh reply topic's."""
        try:
            message = decode(received.payload, max_bytes=REPLY_MAX_BYTES)
        except LocprivError as exc:
            log.debug("undecodable reply dropped: %s", exc)
            return
        if received.topic == self.topics.config:
            if isinstance(message, DeploymentConfig):
                self.machine.configure(message)
                self._configured.set()
            return
        if isinstance(message, FixWanted):
            if received.topic == self.topics.fix_wanted(self.user_id):
                self._answer_fix()
            return
        cid = getattr(message, "correlation_id", None)
        if cid is not None and cid in self._plain:  # a plain ds_query
            if isinstance(message, QueryAnswer) and self.machine.refuse_plain(
                message, *self._plain[cid]
            ):
                return  # inconsistent with the query: keep waiting for DS's
            if isinstance(message, ErrorReply):
                err = message.exception()
                self._host.spawn([Failed(cid, err)])
            else:
                self._host.spawn([Done(cid, message)])
            return
        self._host.spawn(self.machine.receive(message, self.clock()))
