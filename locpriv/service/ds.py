"""The reference location-based database server (DS) as an MQTT client process.

It runs :class:`~locpriv.protocols.ds.DSCore` over a POI file (CSV or GeoJSON; default: the demo
set :data:`~locpriv.core.poi.DEFAULT_POIS`) on two lanes: the mediator's ``svc/ds/query`` and the
public ``ds/query``.

Fair share under floods (``[limits]``): messages are taken from the broker as soon as they
arrive and queued in their lane (:class:`~locpriv.protocols.lanes.Lanes`), then served by
weighted round robin, ``ds_service_weight`` service queries per public one, so a flood of the
public lane cannot starve Protocols 1 and 2. A query that waited more than ``ds_max_wait_s``
seconds in its lane is answered ``overloaded`` (counted as ``waited``); a lane holding
``max_queue`` queries answers new ones ``overloaded`` at once. The public lane also passes a
token bucket of ``ds_public_per_s`` messages per second (``ds_public_burst`` at once) for all
apps together - DS cannot tell requesters apart - beyond which messages are dropped unread
(counted as ``lane_rate``). The cost limit is the machine's (``ds_max_answer_pois``). With an
answer key (``[state] answer_key_file``) every reply to a ``svc/reply/...`` topic - answers,
and the errors the driver itself makes - carries DS's ``mac``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from locpriv.config import ServiceConfig
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois
from locpriv.errors import ErrorCode, ServiceFailure
from locpriv.protocols.ds import PUBLIC_LANE, SERVICE_LANE, DSCore, ds_routes, tag_service_replies
from locpriv.protocols.effects import Send
from locpriv.protocols.lanes import Lanes
from locpriv.protocols.limits import TokenBucket
from locpriv.protocols.seal import AnswerMac
from locpriv.service.driver import ServiceDriver
from locpriv.service.identity import DS, service_client_id
from locpriv.transport import Received

__all__ = ["DSService"]

log = logging.getLogger(__name__)


class DSService(ServiceDriver):
    """DS as an MQTT client serving ``svc/ds/query`` and ``ds/query``; ``**driver`` go to
    ServiceDriver (``clock=``, ``transport=``)."""

    def __init__(
        self,
        url: str,
        config: ServiceConfig | None = None,
        *,
        pois: str | Path | None = None,
        index: POIIndex | None = None,
        **driver: Any,
    ) -> None:
        config = config or ServiceConfig()
        if index is None:
            index = POIIndex(load_pois(pois or DEFAULT_POIS), config.make_projection())
        lim = config.limits
        self.answer_mac = AnswerMac.from_config(config.state.answer_key_file or None)
        if self.answer_mac is None:
            log.warning(
                "ds: no answer key ([state] answer_key_file): answers to"
                " the mediator carry no mac, and a mediator holding a key drops them"
            )
        super().__init__(
            url,
            name="ds",
            machine=DSCore(
                index,
                max_answer_pois=lim.ds_max_answer_pois,
                topics=config.topics,
                answer_mac=self.answer_mac,
            ),
            routes=ds_routes(config.topics),
            config=config,
            client_id=service_client_id(DS, driver.get("password"), config.mqtt.ds_client_id),
            **driver,
        )
        self.index = index
        self.lanes: Lanes[Received] = Lanes(
            {SERVICE_LANE: lim.ds_service_weight, PUBLIC_LANE: 1},
            max_wait_s=lim.ds_max_wait_s,
            max_len=lim.max_queue,
        )
        self.public_bucket = TokenBucket(lim.ds_public_per_s, lim.ds_public_burst)
        for key in ("too_costly", "waited", "lane_rate"):
            self.stats[key] = 0

    @property
    def backlog(self) -> int:
        """Queries waiting: in the lanes and not yet taken from the broker connection."""
        return super().backlog + len(self.lanes)

    def _emit(self, effects: list[Send]) -> None:
        super()._emit(tag_service_replies(effects, self.topics, self.answer_mac))

    def _intake(self, received: Received, now: float) -> None:
        """Queue one message in its lane (or refuse it at once)."""
        self.stats["received"] += 1
        route = self._route(received.topic)
        if route is None:
            return
        lane = route.label
        if lane == PUBLIC_LANE and not self.public_bucket.take(now):
            self.stats["lane_rate"] += 1
            self.stats["dropped"] += 1
            return
        if not self.lanes.push(lane, received, now):
            self._overloaded(received)

    async def _reader(self) -> None:
        """Take every message already received into its lane, shed those that waited too long,
        serve one by weighted round robin, let the connection read; repeat."""
        transport = self._transport
        assert transport is not None
        stream = aiter(transport.messages())
        lanes = self.lanes
        machine: Any = self.machine
        while True:
            if not lanes:
                try:
                    first = await anext(stream)
                except StopAsyncIteration:
                    if self._stop.is_set():
                        return
                    raise ServiceFailure("the transport's message stream ended") from None
                self._intake(first, time.monotonic())
            while (more := transport.take_nowait()) is not None:
                self._intake(more, time.monotonic())
            now = time.monotonic()
            for _lane, late in lanes.expired(now):
                self.stats["waited"] += 1
                self.stats["overloaded"] += 1
                self._reject(
                    late,
                    ErrorCode.OVERLOADED,
                    f"waited more than {lanes.max_wait_s:g} s for the database server; retry",
                )
            item = lanes.pop()
            if item is not None:
                received = item[1]
                try:
                    if self.metrics is not None:
                        self.metrics.handled(self._route(received.topic), received)
                    self._emit(self.dispatcher.handle(received, self.clock()))
                except Exception:  # the dispatcher never raises; a bug must not stop the reader
                    self.stats["internal"] += 1
                    log.exception("%s: failed handling a message", self.name)
                self.stats["too_costly"] = machine.too_costly
            await asyncio.sleep(0)  # the connection reads (and publishes) between queries

    def _shutdown_pending(self) -> None:
        for _lane, received in self.lanes.drain():
            self._reject(received, ErrorCode.UNAVAILABLE, f"{self.name} is shutting down")
        super()._shutdown_pending()
