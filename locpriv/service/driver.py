"""The asyncio driver of a service machine: it only moves messages and time.

:class:`ServiceDriver` subscribes to a machine's routes, takes every received message in
arrival order through a :class:`~locpriv.protocols.dispatch.Dispatcher` (decode, check, reject
with a reason), feeds the machine with ``now = clock()``, publishes the effects from a pool of
publisher tasks and runs the machine's timers with a :class:`~locpriv.transport.deadlines.
DeadlineTimer`. The queue of received messages is bounded: when ``max_queue`` messages already
wait behind the one at hand, that one gets an ``overloaded`` error reply instead of being
processed.

Reliability: QoS 1 everywhere, a persistent session (``clean_session=False``) so that requests
published while the service is away are delivered when it returns, reconnection with backoff in
the transport, a retained ``status/{name}`` (``online``; ``offline`` by last will or on clean
shutdown). On :meth:`ServiceDriver.stop` every request accepted but not yet answered - queued,
waiting for DS or for a temporal cloak - is answered ``unavailable``. A task that dies, or a
connection that keeps dropping what we publish (:class:`~locpriv.service.health.PublishHealth`),
ends :meth:`ServiceDriver.run` with :class:`~locpriv.errors.ServiceFailure`, so the process exits
non-zero and its supervisor restarts it. Requests a crash would lose are journaled
(:class:`~locpriv.service.journal.Journal`) and answered ``unavailable`` by the next run;
state whose loss in a crash would weaken what was already answered (the anonymizer's sessions)
is written by ``before_emit`` before the answers it led to are published.
Reconnections alone never end it: a session taken over by another client with the service's
client id (:mod:`locpriv.service.identity`) is taken back by the transport's reconnection, the
machine keeps every accepted request, and a storm of them is a log line and a metric
(``locpriv_reconnects_recent``).

Answers to the service's own requests (routes with ``answer_errors=False``: DS's answers to the
mediator) are read only while a request of ours that names that topic as ``reply_to`` is
outstanding (sent within ``ds_timeout_s`` + 1 s; in the first such period after the start,
answers to a previous run's requests too, which the sealed tokens let this run relay): at most
one answer per request, and a message that relays nothing (undecodable, forged, late) gives its
request back; the rest is dropped unread (``stats["unsolicited"]``), so a flood on a
service-to-service route is read no faster than the service asks and cannot fill the inbound
queue. The route's ``max_bytes`` bounds each payload.

The transport and the clock are injectable (``transport=``, ``clock=``); ``password=`` is the
broker password (never logged; the URL is logged without one); the services are
:class:`locpriv.service.anonymizer.AnonymizerService` and :class:`locpriv.service.ds.DSService`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from locpriv.config import ServiceConfig
from locpriv.errors import ErrorCode, ServiceFailure, TransportError
from locpriv.protocols.dispatch import Dispatcher, Machine, Route
from locpriv.protocols.effects import Send, error_send
from locpriv.service.health import PublishHealth
from locpriv.service.journal import Journal
from locpriv.service.metrics import ServiceMetrics
from locpriv.transport import Received, Transport, connect, redact_url
from locpriv.transport.deadlines import Clock, DeadlineTimer
from locpriv.wire.messages import encode
from locpriv.wire.topics import Topics, shared

__all__ = ["ServiceDriver"]

log = logging.getLogger(__name__)


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
        clock: Clock = time.time,
        transport: Transport | None = None,
        password: str | None = None,
        status_name: str | None = None,
        retained: list[tuple[str, bytes]] | None = None,
        metrics_port: int | None = None,
        metrics_addr: str = "127.0.0.1",
        journal_file: str = "",
        on_start: Callable[[float], None] | None = None,
        on_stop: Callable[[float], None] | None = None,
        before_emit: Callable[[float], None] | None = None,
    ) -> None:
        self.url = url
        self.status_name = status_name or name
        """The ``status/{...}`` segment (one per process: shards have their own)."""
        self.retained = retained or []
        """Retained ``(topic, payload)`` published after every (re)connection."""
        self._password = password
        self.clock = clock
        self._given_transport = transport
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
            "unsolicited": 0,
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
        self._on_start = on_start
        """Called with ``clock()`` before the first message is handled (state to restore)."""
        self._on_stop = on_stop
        """Called with ``clock()`` after a clean stop, once no message is handled any more."""
        self._before_emit = before_emit
        """Called with ``clock()`` before effects go to the publishers (state to persist
        before anyone can see what it led to); what it raises is logged, never stops them."""
        self.journal = Journal(journal_file) if journal_file else None
        """This process's own journal (none without a file): the anonymizer's, never DS's."""
        self._journal_revision = -1
        self._outbox: asyncio.Queue[Send | None] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._timer = DeadlineTimer(
            machine, self._emit, clock=clock, name=name, on_error=self._count_internal
        )
        self._transport: Transport | None = None
        self._answer_topics = {r.topic_filter for r in routes if not r.answer_errors}
        self._credit_s = config.limits.ds_timeout_s + 1.0
        self._credits: deque[float] = deque()
        """Monotonic expiry of each outstanding request of ours awaiting an answer."""
        self._unsolicited_logged = -math.inf
        self._storm_logged = -math.inf
        self.metrics_port = metrics_port
        """``--metrics-port`` (0: a free port; the bound one replaces it once serving)."""
        self._metrics_addr = metrics_addr
        self.metrics: ServiceMetrics | None = None
        if metrics_port is not None:
            self.metrics = ServiceMetrics(self)

    # ----------------------------------------------------------------- lifecycle

    @property
    def backlog(self) -> int:
        """Received messages waiting to be handled."""
        t = self._transport
        return t.backlog if t is not None else 0

    @property
    def outbox_size(self) -> int:
        """Effects waiting to be published."""
        return self._outbox.qsize()

    @property
    def connected(self) -> bool:
        """True while serving over a live broker connection (subscriptions in place)."""
        t = self._transport
        return t is not None and t.connected

    @property
    def reconnects(self) -> int:
        """How often the broker connection was re-established."""
        t = self._transport
        return t.reconnects if t is not None else 0

    @property
    def reconnects_recent(self) -> int:
        """Reconnections within the health window (60 s): a storm means another client is
        connecting with this service's client id, or the network flaps."""
        return self.health.recent(time.monotonic())

    def stop(self) -> None:
        """Ask :meth:`run` to shut down cleanly (answers pending requests ``unavailable``)."""
        self._stop.set()

    async def run(self) -> None:
        """Connect, serve until :meth:`stop`, then drain and disconnect."""
        if self._warm_up is not None:  # compile kernels before taking any request
            await asyncio.to_thread(self._warm_up)
        if self._on_start is not None:
            self._on_start(self.clock())
        mq = self.config.mqtt
        status = self.topics.status(self.status_name)
        transport = self._given_transport or connect(
            self.url,
            client_id=self.client_id,
            will=(status, b"offline"),
            birth=(status, b"online"),
            clean_session=mq.clean_session,
            publish_timeout_s=mq.publish_timeout_s,
            backoff_max_s=mq.backoff_max_s,
            password=self._password,
            ca_file=mq.ca_file or None,
        )
        async with transport:
            self._transport = transport
            for route in self.routes:
                for filt in route.filters:
                    share = mq.shared_group and route.shareable
                    await transport.subscribe(shared(filt, mq.shared_group) if share else filt)
            await self._publish_retained(transport)
            if self.metrics is not None and self.metrics_port is not None:
                self.metrics_port = self.metrics.serve(self.metrics_port, self._metrics_addr)
                log.info("%s: metrics on %s:%d", self.name, self._metrics_addr, self.metrics_port)
            for effect in self._recover_journal():
                self._outbox.put_nowait(effect)
            if self._answer_topics:  # a previous run's requests may still be answered
                expiry = time.monotonic() + self._credit_s
                self._credits.extend([expiry] * self.config.limits.max_pending)
            publishers = [
                asyncio.create_task(self._publisher(), name=f"{self.name}-pub{i}")
                for i in range(self.config.limits.publishers)
            ]
            workers = [
                asyncio.create_task(self._reader(), name=f"{self.name}-reader"),
                asyncio.create_task(self._timer.run(), name=f"{self.name}-timer"),
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
            if self._on_stop is not None:  # no message is handled any more
                try:
                    self._on_stop(self.clock())
                except Exception as exc:  # the shutdown must go on
                    log.error("%s: could not save state at stop: %s", self.name, exc)
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
            if self.metrics is not None:
                self.metrics.close()
        if failure is not None:
            log.critical("%s failed: %s", self.name, failure)
            raise ServiceFailure(f"{self.name} failed: {failure}")
        log.info("%s stopped", self.name)

    async def _publish_retained(self, transport: Transport) -> None:
        for topic, payload in self.retained:
            try:
                await transport.publish(topic, payload, qos=1, retain=True)
            except TransportError as exc:
                log.error("%s: could not publish %s: %s", self.name, topic, exc)

    def _shutdown_pending(self) -> None:
        now = self.clock()
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
            credit = None
            if received.topic in self._answer_topics:
                credit = self._take_credit()
                if credit is None:
                    self._unsolicited()
                    continue
            if transport.backlog >= max_queue:
                self._overloaded(received)
                continue
            try:
                if self.metrics is not None:
                    self.metrics.handled(self._route(received.topic), received)
                effects = self.dispatcher.handle(received, self.clock())
                if credit is not None and not effects:
                    self._credits.append(credit)  # relayed nothing: the request still waits
                self._emit(effects)
            except Exception:  # the dispatcher never raises; a bug must not stop the reader
                self.stats["internal"] += 1
                log.exception("%s: failed handling a message", self.name)
                continue
            self._timer.poke()
        if not self._stop.is_set():
            raise ServiceFailure("the transport's message stream ended")

    def _take_credit(self) -> float | None:
        """Consume one outstanding request of ours, returning its expiry (None: there is none,
        the answer is unsolicited)."""
        now = time.monotonic()
        credits = self._credits
        while credits and credits[0] < now:
            credits.popleft()
        # the newest: a surplus (answers that were never asked for) then expires from the left
        return credits.pop() if credits else None

    def _unsolicited(self) -> None:
        self.stats["unsolicited"] += 1
        now = time.monotonic()
        if now - self._unsolicited_logged >= 10.0:
            self._unsolicited_logged = now
            log.warning(
                "%s: %d answers arrived with no request of ours outstanding, dropped unread",
                self.name,
                self.stats["unsolicited"],
            )

    def _overloaded(self, received: Received) -> None:
        self.stats["overloaded"] += 1
        route = self._route(received.topic)
        if route is not None and route.answer_errors and route.overload_errors:
            self._reject(received, ErrorCode.OVERLOADED, "request queue full; retry later")
        else:
            log.debug("%s: queue full, message on a no-reply topic dropped", self.name)

    async def _watchdog(self) -> None:
        """Every ``watchdog_s``: journal pending requests; log a reconnection storm; raise when
        publishing is wedged."""
        seen = 0
        while True:
            await asyncio.sleep(self.watchdog_s)
            now = time.monotonic()
            count = self.reconnects
            for _ in range(count - seen):
                self.health.reconnected(now)
            if count != seen and self._transport is not None:  # the broker may have lost them
                await self._publish_retained(self._transport)
            seen = count
            self._write_journal()
            storm = self.health.storm(now)
            if storm is not None and now - self._storm_logged >= self.health.window_s:
                self._storm_logged = now
                log.error("%s: %s", self.name, storm)
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
        if effects and self._before_emit is not None:
            try:
                self._before_emit(self.clock())
            except Exception:  # persisting state must never hold an answer back
                self.stats["internal"] += 1
                log.exception("%s: failed saving state before answering", self.name)
        metrics = self.metrics
        for effect in effects:
            if metrics is not None:
                metrics.sent(effect)
            if self._answer_topics:
                reply_to = getattr(effect.message, "reply_to", None)
                if reply_to in self._answer_topics:  # a request of ours: one answer may come
                    self._credits.append(time.monotonic() + self._credit_s)
                    if len(self._credits) > 2 * self.config.limits.max_pending:
                        self._credits.popleft()
            self._outbox.put_nowait(effect)

    def _count_internal(self, exc: Exception) -> None:
        self.stats["internal"] += 1

    def _reject(self, received: Received, code: ErrorCode, reason: str) -> None:
        self._emit([self.dispatcher.reject(received, code, reason)])
