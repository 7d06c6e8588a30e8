"""asyncio drivers of the trusted services: they only move messages and time.

:class:`ServiceDriver` is the common loop: subscribe to the routes, take every received message
in arrival order, decode it (a rejected message gets an :class:`~locpriv.wire.messages.ErrorReply`
with the reason and field, on the request's ``reply_to`` when it can be read from the raw JSON,
else on ``topics.errors(name)``), hand it to a sans-I/O machine with ``now = time.time()``, and
publish the effects from a pool of publisher tasks; a timer task runs the machine's deadlines.
The queue of received messages is bounded: when ``max_queue`` messages already wait behind the
one at hand, that one gets an ``overloaded`` error reply instead of being processed.

Reliability: QoS 1 everywhere, a persistent session (``clean_session=False``) so that requests
published while the service is away are delivered when it returns, reconnection with backoff in
the transport, a retained ``status/{name}`` (``online``; ``offline`` by last will or on clean
shutdown). On :meth:`ServiceDriver.stop` every request accepted but not yet answered - queued,
waiting for DS or for a temporal cloak - is answered ``unavailable``.

:class:`AnonymizerService` runs :class:`~locpriv.protocols.p1.TrustedCore`
(location updates, Protocols 1, 2 and 3); :class:`locpriv.service.ds.DSService` runs the database
server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from pydantic_core import from_json

from locpriv.config import ServiceConfig
from locpriv.core.cloak.cloaker import Cloaker
from locpriv.core.cloak.partition import warm_up as cloak_warm_up
from locpriv.errors import DecodeError, ErrorCode, ServiceFailure, TransportError
from locpriv.protocols import Send, error_send
from locpriv.protocols.p1 import TrustedCore
from locpriv.protocols.p2 import Mediator
from locpriv.protocols.p3 import Anonymizer
from locpriv.protocols.seal import Sealer
from locpriv.service.health import PublishHealth
from locpriv.service.journal import Journal
from locpriv.service.rpc import REPLY_MAX_BYTES
from locpriv.transport import MemoryTransport, MqttTransport, Received, connect, redact_url
from locpriv.wire.messages import (
    MAX_CORRELATION_ID,
    CloakRequest,
    ErrorReply,
    LocationUpdate,
    Message,
    QueryAnswer,
    QueryRequest,
    decode,
    encode,
)
from locpriv.wire.topics import Topics, matches, shared

__all__ = [
    "AnonymizerService",
    "Dispatcher",
    "Machine",
    "Route",
    "ServiceDriver",
    "build_trusted_core",
    "salvage_reply",
]

log = logging.getLogger(__name__)

_CORRELATION = re.compile(rf"^[A-Za-z0-9_.:-]{{1,{MAX_CORRELATION_ID}}}$")
_SALVAGE_MAX_BYTES: Final = 4 * 1024 * 1024


class Machine(Protocol):
    """What a driver needs from a sans-I/O machine.

    ``in_flight()`` lists ``(reply_to, correlation_id)`` of the accepted requests the machine
    holds that no other party will answer after a crash (the driver journals them; see
    :class:`locpriv.service.journal.Journal`); ``revision`` changes whenever that list may have.
    """

    @property
    def revision(self) -> int: ...

    def receive(self, message: Message, now: float) -> list[Send]: ...

    def on_deadline(self, now: float) -> list[Send]: ...

    def next_deadline(self) -> float | None: ...

    def shutdown(self, now: float) -> list[Send]: ...

    def in_flight(self) -> list[tuple[str, str]]: ...


def _failure(tasks: list[asyncio.Task[Any]]) -> str:
    """Why the first finished task of a service ended (they run until cancelled)."""
    for task in tasks:
        if task.done():
            if task.cancelled():
                return f"task {task.get_name()} was cancelled"
            exc = task.exception()
            if exc is not None:
                return f"{task.get_name()}: {type(exc).__name__}: {exc}"
            return f"task {task.get_name()} ended"
    return "unknown"


@dataclass(frozen=True, slots=True)
class Route:
    """A subscription: messages on ``topic_filter`` must be one of ``expect``.

    ``answer_errors``: answer rejected messages (on ``reply_to`` or the error topic) or only
    log them (DS replies). ``max_bytes`` overrides the payload limit (DS replies are larger).
    ``overload_errors``: also answer queue overflow and shutdown (requests; not location
    updates, which are dropped and counted). ``check`` may reject a decoded message with
    ``(code, reason, field)``.
    """

    topic_filter: str
    expect: tuple[type[Message], ...]
    answer_errors: bool = True
    shareable: bool = True
    overload_errors: bool = True
    max_bytes: int | None = None
    check: Callable[[Received, Message], tuple[ErrorCode, str, str] | None] | None = None


def salvage_reply(payload: bytes, topics: Topics) -> tuple[str | None, str | None]:
    """``(reply_to, correlation_id)`` read from a rejected raw payload when they are usable:
    ``reply_to`` only if it is one of ``topics``' reply topics (:meth:`Topics.is_reply`)."""
    if len(payload) > _SALVAGE_MAX_BYTES:
        return None, None
    try:
        obj: Any = from_json(payload, allow_inf_nan=True)
    except ValueError:
        return None, None
    if not isinstance(obj, dict):
        return None, None
    reply_to = obj.get("reply_to")
    cid = obj.get("correlation_id")
    ok_topic = isinstance(reply_to, str) and topics.is_reply(reply_to)
    ok_cid = isinstance(cid, str) and _CORRELATION.fullmatch(cid) is not None
    return (reply_to if ok_topic else None), (cid if ok_cid else None)


class ServiceDriver:
    """Runs one :class:`Machine` on a broker. Use :meth:`run` (until :meth:`stop`)."""

    def __init__(
        self,
        url: str,
        *,
        name: str,
        machine: Machine,
        routes: list[Route],
        config: ServiceConfig,
        client_id: str,
        warm_up: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.name = name
        self._warm_up = warm_up
        self.machine = machine
        self.routes = routes
        self.config = config
        self.topics: Topics = config.topics
        self.client_id = client_id
        self.max_payload = config.limits.max_payload_bytes
        self.ready = asyncio.Event()
        """Set once subscribed and serving."""
        self.stats: dict[str, int] = {
            "received": 0,
            "rejected": 0,
            "overloaded": 0,
            "sent": 0,
            "publish_failed": 0,
            "internal": 0,
        }
        self.dispatcher = Dispatcher(
            name=name,
            machine=machine,
            routes=routes,
            topics=self.topics,
            max_payload=self.max_payload,
            stats=self.stats,
        )
        self.health = PublishHealth()
        self.watchdog_s = 1.0
        """Period of the watchdog (journal writes, publish health), seconds."""
        journal_file = config.state.journal_file
        self.journal = Journal(journal_file) if journal_file else None
        self._journal_revision = -1
        self._outbox: asyncio.Queue[Send | None] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._timer_at: float | None = None
        self._transport: MqttTransport | MemoryTransport | None = None

    # ----------------------------------------------------------------- lifecycle

    @property
    def connected(self) -> bool:
        """True while serving over a live broker connection (subscriptions in place)."""
        t = self._transport
        if isinstance(t, MqttTransport):
            return t.connected
        return t is not None

    @property
    def reconnects(self) -> int:
        """How often the broker connection was re-established."""
        t = self._transport
        return t.reconnects if isinstance(t, MqttTransport) else 0

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly (answers pending requests ``unavailable``)."""
        self._stop.set()

    async def run(self) -> None:
        """Connect, serve until :meth:`stop`, then drain and disconnect."""
        if self._warm_up is not None:  # compile kernels before taking any request
            await asyncio.to_thread(self._warm_up)
        mq = self.config.mqtt
        status = self.topics.status(self.name)
        transport = connect(
            self.url,
            client_id=self.client_id,
            will=(status, b"offline"),
            birth=(status, b"online"),
            clean_session=mq.clean_session,
            publish_timeout_s=mq.publish_timeout_s,
            backoff_max_s=mq.backoff_max_s,
        )
        async with transport:
            self._transport = transport
            for route in self.routes:
                topic_filter = route.topic_filter
                if mq.shared_group and route.shareable:
                    topic_filter = shared(topic_filter, mq.shared_group)
                await transport.subscribe(topic_filter, qos=1)
            if isinstance(transport, MemoryTransport):
                await transport.publish(status, b"online", qos=1, retain=True)
            for effect in self._recover_journal():
                self._outbox.put_nowait(effect)
            publishers = [
                asyncio.create_task(self._publisher(), name=f"{self.name}-pub{i}")
                for i in range(self.config.limits.publishers)
            ]
            workers = [
                asyncio.create_task(self._reader(), name=f"{self.name}-reader"),
                asyncio.create_task(self._worker(), name=f"{self.name}-worker"),
                asyncio.create_task(self._watchdog(), name=f"{self.name}-watchdog"),
                *publishers,
            ]
            self.ready.set()
            log.info("%s serving on %s", self.name, redact_url(self.url))
            stopper = asyncio.create_task(self._stop.wait())
            await asyncio.wait([stopper, *workers], return_when=asyncio.FIRST_COMPLETED)
            failure = None if stopper.done() else _failure(workers)
            for task in (stopper, *workers):
                if task not in publishers:
                    task.cancel()
            await asyncio.gather(stopper, *workers[:3], return_exceptions=True)
            self._shutdown_pending()
            self._write_journal(force=True)
            for _ in publishers:
                self._outbox.put_nowait(None)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10.0):
                    await asyncio.gather(*publishers, return_exceptions=True)
            for task in publishers:
                task.cancel()
            with contextlib.suppress(TransportError):
                await transport.publish(status, b"offline", qos=1, retain=True)
            self._transport = None
        if failure is not None:
            log.critical("%s failed: %s", self.name, failure)
            raise ServiceFailure(f"{self.name} failed: {failure}")
        log.info("%s stopped", self.name)

    def _shutdown_pending(self) -> None:
        now = time.time()
        transport = self._transport
        while transport is not None and (received := transport.take_nowait()) is not None:
            route = self._route(received.topic)
            if route is not None and route.answer_errors and route.overload_errors:
                self._reject(received, ErrorCode.UNAVAILABLE, f"{self.name} is shutting down")
        for effect in self.machine.shutdown(now):
            self._outbox.put_nowait(effect)

    # ------------------------------------------------------------------- tasks

    async def _reader(self) -> None:
        transport = self._transport
        assert transport is not None
        max_queue = self.config.limits.max_queue
        async for received in transport.messages():
            self.stats["received"] += 1
            if transport.backlog >= max_queue:
                self._overloaded(received)
                continue
            try:
                self._handle(received, time.time())
            except Exception:  # the dispatcher never raises; a bug must not stop the reader
                self.stats["internal"] += 1
                log.exception("%s: failed handling a message", self.name)
                continue
            deadline = self.machine.next_deadline()
            if deadline is not None and (self._timer_at is None or deadline < self._timer_at):
                self._wake.set()  # the timer sleeps past the new earliest deadline
        if not self._stop.is_set():
            raise ServiceFailure("the transport's message stream ended")

    def _overloaded(self, received: Received) -> None:
        self.stats["overloaded"] += 1
        route = self._route(received.topic)
        if route is not None and route.answer_errors and route.overload_errors:
            self._reject(received, ErrorCode.OVERLOADED, "request queue full; retry later")
        else:
            log.debug("%s: queue full, message on a no-reply topic dropped", self.name)

    async def _worker(self) -> None:
        """Runs the machine's deadlines (temporal cloaking, DS timeouts, user expiry)."""
        while True:
            deadline = self.machine.next_deadline()
            self._timer_at = deadline
            timeout = None if deadline is None else max(0.0, deadline - time.time())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            now = time.time()
            deadline = self.machine.next_deadline()
            if deadline is not None and deadline <= now:
                self._emit(self._safe(self.machine.on_deadline, now))
            await asyncio.sleep(0)

    async def _watchdog(self) -> None:
        """Every ``watchdog_s``: journal pending requests; raise when publishing is wedged."""
        seen = 0
        while True:
            await asyncio.sleep(self.watchdog_s)
            now = time.monotonic()
            count = self.reconnects
            for _ in range(count - seen):
                self.health.reconnected(now)
            seen = count
            self._write_journal()
            verdict = self.health.verdict(now)
            if verdict is not None:
                raise ServiceFailure(verdict)

    async def _publisher(self) -> None:
        assert self._transport is not None
        transport = self._transport
        while True:
            effect = await self._outbox.get()
            if effect is None:
                return
            self.health.started()
            try:
                await transport.publish(effect.topic, encode(effect.message), qos=effect.qos)
            except Exception as exc:  # TransportError, or a bug: the publisher must go on
                self.stats["publish_failed"] += 1
                self.health.finished(ok=False)
                kind = type(effect.message).__name__
                log.error(
                    "%s: could not publish a %s: %s: %s",
                    self.name,
                    kind,
                    type(exc).__name__,
                    str(exc)[:200],
                )
            else:
                self.stats["sent"] += 1
                self.health.finished(ok=True)

    # ------------------------------------------------------------------ journal

    def _recover_journal(self) -> list[Send]:
        """Requests the previous run left pending, answered ``unavailable`` (then forgotten)."""
        journal = self.journal
        if journal is None:
            return []
        entries = journal.load()
        journal.clear()
        if entries:
            log.warning(
                "%s: answering %d requests left pending by the previous run",
                self.name,
                len(entries),
            )
        return [
            error_send(
                reply_to,
                cid,
                ErrorCode.UNAVAILABLE,
                f"{self.name} restarted while this request was pending; retry",
            )
            for reply_to, cid in entries
            if self.topics.is_reply(reply_to)
        ]

    def _write_journal(self, *, force: bool = False) -> None:
        journal = self.journal
        if journal is None:
            return
        revision = self.machine.revision
        if force or revision != self._journal_revision:
            try:
                journal.save(self.machine.in_flight())
            except OSError as exc:
                log.error("%s: cannot write the journal: %s", self.name, exc)
                return
            self._journal_revision = revision

    # ---------------------------------------------------------------- handling

    def _route(self, topic: str) -> Route | None:
        return self.dispatcher.route(topic)

    def _emit(self, effects: list[Send]) -> None:
        for effect in effects:
            self._outbox.put_nowait(effect)

    def _safe(self, fn: Callable[[float], list[Send]], now: float) -> list[Send]:
        try:
            return fn(now)
        except Exception:
            log.exception("%s: machine failed", self.name)
            return []

    def _reject(self, received: Received, code: ErrorCode, reason: str) -> None:
        self._outbox.put_nowait(self.dispatcher.reject(received, code, reason))

    def _handle(self, received: Received, now: float) -> None:
        self._emit(self.dispatcher.handle(received, now))


class Dispatcher:
    """Routes raw messages to a machine: decode, check, reject with an error reply (sans-I/O).

    Shared by :class:`ServiceDriver` and the amqtt plugin. ``stats`` counts ``rejected``.
    """

    def __init__(
        self,
        *,
        name: str,
        machine: Machine,
        routes: list[Route],
        topics: Topics,
        max_payload: int,
        stats: dict[str, int] | None = None,
    ) -> None:
        self.name = name
        self.machine = machine
        self.routes = routes
        self.topics = topics
        self.max_payload = max_payload
        self.stats = stats if stats is not None else {"rejected": 0}
        self.stats.setdefault("rejected", 0)
        self._route_cache: dict[str, Route | None] = {}

    def route(self, topic: str) -> Route | None:
        """The first route whose filter matches ``topic`` (memoised per topic)."""
        try:
            return self._route_cache[topic]
        except KeyError:
            pass
        found = next((r for r in self.routes if matches(r.topic_filter, topic)), None)
        if len(self._route_cache) >= 100_000:
            self._route_cache.clear()
        self._route_cache[topic] = found
        return found

    def reject(
        self, received: Received, code: ErrorCode, reason: str, field: str | None = None
    ) -> Send:
        """An error reply to the raw message's ``reply_to`` if readable, else the error topic."""
        self.stats["rejected"] += 1
        reply_to, cid = salvage_reply(received.payload, self.topics)
        target = reply_to or self.topics.errors(self.name)
        return error_send(target, cid, code, reason, field)

    def _bad_reply_to(self, route: Route, message: Message) -> list[Send]:
        """A request whose ``reply_to`` lies outside the reply namespace: answered on the
        error topic, never on the topic it named."""
        self.stats["rejected"] += 1
        if not route.answer_errors:
            return []
        cid = getattr(message, "correlation_id", None)
        reason = f"reply_to must be {self.topics.reply_prefix}<one segment of [A-Za-z0-9_.:@-]>"
        return [
            error_send(
                self.topics.errors(self.name),
                cid,
                ErrorCode.INVALID_FIELD,
                reason,
                "reply_to",
            )
        ]

    def handle(self, received: Received, now: float) -> list[Send]:
        """Decode ``received`` for its route and run the machine; never raises."""
        route = self.route(received.topic)
        if route is None:
            return []
        try:
            limit = route.max_bytes or self.max_payload
            message = decode(received.payload, expect=route.expect, max_bytes=limit)
        except DecodeError as exc:
            if route.answer_errors:
                return [self.reject(received, exc.code, exc.reason, exc.field)]
            log.info("%s: rejected message on a no-reply topic: %s", self.name, exc.code)
            return []
        reply_to = getattr(message, "reply_to", None)
        if isinstance(reply_to, str) and not self.topics.is_reply(reply_to):
            return self._bad_reply_to(route, message)
        if route.check is not None:
            problem = route.check(received, message)
            if problem is not None:
                return [self.reject(received, *problem)] if route.answer_errors else []
        try:
            return self.machine.receive(message, now)
        except Exception:
            log.exception("%s: machine failed on a %s", self.name, type(message).__name__)
            if route.answer_errors:
                return [self.reject(received, ErrorCode.INTERNAL, "internal error; see the log")]
            return []


# ------------------------------------------------------------------ anonymizer


def build_trusted_core(config: ServiceConfig, reply_to: str) -> TrustedCore:
    """The P1/P2/P3 machine for ``config``; DS answers are expected on ``reply_to``."""
    anonymizer = Anonymizer(Cloaker(config.cloak_config()), config.make_projection())
    mediator = Mediator(
        ds_topic=config.topics.ds_query,
        reply_to=reply_to,
        ds_timeout_s=config.limits.ds_timeout_s,
        max_pending=config.limits.max_pending,
        sealer=Sealer.from_config(config.state.token_key_file or None),
    )
    return TrustedCore(anonymizer, mediator)


def _check_protocol(
    expected: int,
) -> Callable[[Received, Message], tuple[ErrorCode, str, str] | None]:
    def check(received: Received, message: Message) -> tuple[ErrorCode, str, str] | None:
        if isinstance(message, QueryRequest) and message.protocol != expected:
            return (
                ErrorCode.INVALID_FIELD,
                f"this topic takes protocol {expected} queries",
                "protocol",
            )
        return None

    return check


def _check_location_topic(
    received: Received, message: Message
) -> tuple[ErrorCode, str, str] | None:
    if isinstance(message, LocationUpdate) and received.topic.rsplit("/", 1)[-1] != message.user_id:
        return ErrorCode.INVALID_FIELD, "user_id does not match the topic", "user_id"
    return None


def anonymizer_routes(topics: Topics, reply_to: str) -> list[Route]:
    """Subscriptions of the anonymizer/mediator service."""
    return [
        Route(
            topics.location_filter,
            (LocationUpdate,),
            answer_errors=True,
            shareable=False,
            overload_errors=False,
            check=_check_location_topic,
        ),
        Route(topics.p1_query, (QueryRequest,), check=_check_protocol(1)),
        Route(topics.p2_query, (QueryRequest,), check=_check_protocol(2)),
        Route(topics.p3_cloak, (CloakRequest,)),
        Route(
            reply_to,
            (QueryAnswer, ErrorReply),
            answer_errors=False,
            shareable=False,
            max_bytes=REPLY_MAX_BYTES,
        ),
    ]


class AnonymizerService(ServiceDriver):
    """The trusted anonymizer/mediator (Protocols 1, 2, 3) as an MQTT client."""

    def __init__(self, url: str, config: ServiceConfig | None = None) -> None:
        config = config or ServiceConfig()
        client_id = config.mqtt.client_id
        reply_to = config.topics.reply(client_id)
        super().__init__(
            url,
            name="anonymizer",
            machine=build_trusted_core(config, reply_to),
            routes=anonymizer_routes(config.topics, reply_to),
            config=config,
            client_id=client_id,
            warm_up=cloak_warm_up,
        )
