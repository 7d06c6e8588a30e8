"""Client library for apps (Protocols 1-3)::

    async with Client("mqtt://broker:1883", user_id="alice") as c:
        await c.update_location(lat=41.39, lon=2.17)
        cloak = await c.cloak(k=5, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=2)
        answer = await c.query(NearestQuery(category="cafe", n=3), protocol=1)

* Protocol 1: the query and the exact location go to the trusted mediator, which cloaks and asks
  DS; the candidate set that comes back is refined here with the exact location.
* Protocol 2: the mediator forwards the exact location without identity; the answer is exact.
* Protocol 3: the anonymizer returns only a region; this client queries DS directly with the
  region and refines the candidates locally. DS sees only the region and a random reply topic.

The MQTT client id (and so the reply topic) is random unless given, never derived from the user
id. Errors: :class:`~locpriv.errors.RemoteError` (``.code``) and its subclasses below for error
replies, :class:`~locpriv.errors.RequestTimeout` when no reply arrives,
:class:`~locpriv.errors.TransportError` when the broker is unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

from shapely.geometry import Polygon

from locpriv.core.geo import region_from_wire, region_to_wire
from locpriv.core.poi import refine
from locpriv.errors import ErrorCode, LocalProtocolError, RemoteError
from locpriv.service.rpc import Requester
from locpriv.transport import MemoryTransport, MqttTransport, connect, new_client_id
from locpriv.wire.messages import (
    POI,
    CloakReply,
    CloakRequest,
    DSQuery,
    LocationUpdate,
    Message,
    PointLocation,
    PrivacyProfile,
    Query,
    QueryAnswer,
    QueryRequest,
    RegionLocation,
    encode,
)
from locpriv.wire.topics import DEFAULT_PREFIX, Topics

__all__ = [
    "Answer",
    "Client",
    "Cloak",
    "CloakInfeasibleError",
    "CloakTimeoutError",
    "ServiceUnavailableError",
]

log = logging.getLogger(__name__)

_PLACEHOLDER = "pending"


class CloakTimeoutError(RemoteError):
    """Temporal cloaking gave up after ``max_delay_s`` (code ``cloak_timeout``)."""


class CloakInfeasibleError(RemoteError):
    """No region satisfies the privacy profile now (code ``cloak_infeasible``)."""


class ServiceUnavailableError(RemoteError):
    """The service is shutting down or overloaded (codes ``unavailable``, ``overloaded``)."""


_ERRORS: dict[ErrorCode, type[RemoteError]] = {
    ErrorCode.CLOAK_TIMEOUT: CloakTimeoutError,
    ErrorCode.CLOAK_INFEASIBLE: CloakInfeasibleError,
    ErrorCode.UNAVAILABLE: ServiceUnavailableError,
    ErrorCode.OVERLOADED: ServiceUnavailableError,
}


def _specific(exc: RemoteError) -> RemoteError:
    cls = _ERRORS.get(exc.code)
    return cls(exc.raw_code, exc.reason, exc.field) if cls else exc


@dataclass(frozen=True, slots=True)
class Cloak:
    """A cloaked region: polygon in lon/lat degrees, area in m², [t1, t2] (s) and ``users``
    inside (None when the service did not say, as in Protocol 1 answers)."""

    region: Polygon
    area_m2: float
    users: int | None
    t1: float
    t2: float


@dataclass(frozen=True, slots=True)
class Answer:
    """A query's answer at the user's exact location.

    ``received`` is how many POIs came over the wire (the candidate set for Protocols 1 and 3);
    ``cloak`` the region used (Protocols 1 and 3), else None.
    """

    pois: list[POI]
    protocol: int
    received: int
    cloak: Cloak | None = None


class Client:
    """An app's connection to the trusted services. Keyword-only, like ``aiomqtt.Client``.

    ``profile`` is the default privacy profile for P1/P3 (None: the operator's default);
    ``timeout_s`` bounds each request (plus ``max_delay_s`` for temporal cloaking).
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
        location_qos: int = 1,
        **transport_options: Any,
    ) -> None:
        self.user_id = user_id
        self.topics = Topics(prefix)
        self.topics.location(user_id)  # validates the id as a topic segment
        self.client_id = client_id or new_client_id("c")
        self.profile = profile
        self.timeout_s = timeout_s
        self.location_qos = location_qos
        self._transport: MqttTransport | MemoryTransport = connect(
            url, client_id=self.client_id, **transport_options
        )
        self._requester = Requester(self._transport, self.topics.reply(self.client_id))
        self._runner: asyncio.Task[None] | None = None
        self._position: tuple[float, float] | None = None

    async def __aenter__(self) -> Self:
        await self._transport.__aenter__()
        try:
            await self._requester.start()
        except BaseException:
            await self._transport.__aexit__(None, None, None)
            raise
        self._runner = asyncio.create_task(self._requester.run(), name=f"client-{self.client_id}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
            self._runner = None
        await self._transport.__aexit__(exc_type, exc, tb)

    @property
    def position(self) -> tuple[float, float] | None:
        """The last ``(lat, lon)`` sent with :meth:`update_location`."""
        return self._position

    # ------------------------------------------------------------------ location

    async def update_location(
        self, *, lat: float, lon: float, t: float | None = None, accuracy_m: float | None = None
    ) -> None:
        """Publish the user's exact position (degrees) to the anonymizer."""
        update = LocationUpdate(
            user_id=self.user_id,
            lat=lat,
            lon=lon,
            t=time.time() if t is None else t,
            accuracy_m=accuracy_m,
        )
        await self._transport.publish(
            self.topics.location(self.user_id), encode(update), qos=self.location_qos
        )
        self._position = (lat, lon)

    # -------------------------------------------------------------------- cloak

    def _profile(
        self,
        k: int | None,
        a_min_m2: float | None,
        a_max_m2: float | None,
        max_delay_s: float | None,
    ) -> PrivacyProfile | None:
        if k is None and a_min_m2 is None and a_max_m2 is None and max_delay_s is None:
            return self.profile
        base = self.profile
        if base is None:
            if k is None or a_min_m2 is None or a_max_m2 is None:
                raise LocalProtocolError("give k, a_min_m2 and a_max_m2 (or a default profile)")
            return PrivacyProfile(
                k=k, a_min_m2=a_min_m2, a_max_m2=a_max_m2, max_delay_s=max_delay_s or 0.0
            )
        return PrivacyProfile(
            k=base.k if k is None else k,
            a_min_m2=base.a_min_m2 if a_min_m2 is None else a_min_m2,
            a_max_m2=base.a_max_m2 if a_max_m2 is None else a_max_m2,
            max_delay_s=base.max_delay_s if max_delay_s is None else max_delay_s,
        )

    def _here(self, lat: float | None, lon: float | None) -> tuple[float, float]:
        if lat is not None and lon is not None:
            return lat, lon
        if self._position is None:
            raise LocalProtocolError("no position: call update_location() or pass lat/lon")
        return self._position

    async def _request(self, topic: str, message: Message, timeout_s: float) -> Message:
        try:
            return await self._requester.request(topic, message, timeout_s)
        except RemoteError as exc:
            raise _specific(exc) from None

    async def cloak(
        self,
        *,
        k: int | None = None,
        a_min_m2: float | None = None,
        a_max_m2: float | None = None,
        max_delay_s: float | None = None,
        lat: float | None = None,
        lon: float | None = None,
        timeout_s: float | None = None,
    ) -> Cloak:
        """Protocol 3: a cloaked region around the user (at ``lat``/``lon`` if given, else her
        last update). Raises CloakInfeasibleError, CloakTimeoutError, RemoteError,
        RequestTimeout."""
        profile = self._profile(k, a_min_m2, a_max_m2, max_delay_s)
        request = CloakRequest(
            correlation_id=_PLACEHOLDER,
            reply_to=self._requester.reply_to,
            user_id=self.user_id,
            lat=lat,
            lon=lon,
            profile=profile,
        )
        delay = profile.max_delay_s if profile is not None else 0.0
        wait = (timeout_s or self.timeout_s) + delay
        reply = await self._request(self.topics.p3_cloak, request, wait)
        if not isinstance(reply, CloakReply):
            raise LocalProtocolError(f"expected a cloak_reply, got {type(reply).__name__}")
        return Cloak(region_from_wire(reply.region), reply.area_m2, reply.users, reply.t1, reply.t2)

    # -------------------------------------------------------------------- query

    async def query(
        self,
        query: Query,
        *,
        protocol: Literal[1, 2, 3] = 1,
        lat: float | None = None,
        lon: float | None = None,
        k: int | None = None,
        a_min_m2: float | None = None,
        a_max_m2: float | None = None,
        max_delay_s: float | None = None,
        attributes: dict[str, str | int | float] | None = None,
        timeout_s: float | None = None,
    ) -> Answer:
        """Ask ``query`` at the user's position by Protocol 1, 2 or 3; the answer is exact
        (refined locally for 1 and 3). ``attributes`` (P1/P2) are stripped by the mediator."""
        here_lat, here_lon = self._here(lat, lon)
        wait = timeout_s or self.timeout_s
        if protocol == 3:
            cloak = await self.cloak(
                k=k,
                a_min_m2=a_min_m2,
                a_max_m2=a_max_m2,
                max_delay_s=max_delay_s,
                lat=lat,
                lon=lon,
                timeout_s=timeout_s,
            )
            ds_query = DSQuery(
                correlation_id=_PLACEHOLDER,
                reply_to=self._requester.reply_to,
                query=query,
                location=RegionLocation(region=region_to_wire(cloak.region)),
            )
            reply = await self._request(self.topics.ds_query, ds_query, wait)
            if not isinstance(reply, QueryAnswer):
                raise LocalProtocolError(f"expected a query_answer, got {type(reply).__name__}")
            pois = refine(reply.pois, query, here_lat, here_lon)
            return Answer(pois, 3, len(reply.pois), cloak)
        if protocol not in (1, 2):
            raise LocalProtocolError(f"unknown protocol {protocol!r} (1, 2 or 3)")
        profile = self._profile(k, a_min_m2, a_max_m2, max_delay_s) if protocol == 1 else None
        request = QueryRequest(
            correlation_id=_PLACEHOLDER,
            reply_to=self._requester.reply_to,
            user_id=self.user_id,
            protocol=protocol,
            lat=here_lat,
            lon=here_lon,
            query=query,
            profile=profile,
            attributes=attributes or {},
        )
        topic = self.topics.p1_query if protocol == 1 else self.topics.p2_query
        if profile is not None:
            wait += profile.max_delay_s
        reply = await self._request(topic, request, wait)
        if not isinstance(reply, QueryAnswer):
            raise LocalProtocolError(f"expected a query_answer, got {type(reply).__name__}")
        p1_cloak: Cloak | None = None
        if reply.region is not None:
            p1_cloak = Cloak(
                region_from_wire(reply.region),
                reply.area_m2 or 0.0,
                reply.users,
                reply.t1 or 0.0,
                reply.t2 or 0.0,
            )
        pois = refine(reply.pois, query, here_lat, here_lon) if reply.candidates else reply.pois
        return Answer(list(pois), protocol, len(reply.pois), p1_cloak)

    async def ds_query(
        self, query: Query, *, lat: float, lon: float, timeout_s: float | None = None
    ) -> list[POI]:
        """Ask DS directly at an exact point (no privacy; for tests and baselines)."""
        ds_query = DSQuery(
            correlation_id=_PLACEHOLDER,
            reply_to=self._requester.reply_to,
            query=query,
            location=PointLocation(lat=lat, lon=lon),
        )
        reply = await self._request(self.topics.ds_query, ds_query, timeout_s or self.timeout_s)
        if not isinstance(reply, QueryAnswer):
            raise LocalProtocolError(f"expected a query_answer, got {type(reply).__name__}")
        return list(reply.pois)
