"""Prometheus metrics of a service process (``--metrics-port``): a thin driver-side module.

The driver reports what it handles and publishes (:meth:`ServiceMetrics.handled`,
:meth:`ServiceMetrics.sent`); everything else is read from the driver and its machine when
Prometheus scrapes (:class:`_StateCollector`), so the machines stay pure and pay nothing.

=====================================  =========  ============================================
metric                                 type       labels
=====================================  =========  ============================================
``locpriv_messages_total``             counter    ``service``, ``kind`` (route: location,
                                                  p1, p2, p3, ds, svc_ds, ds_answer)
``locpriv_errors_total``               counter    ``service``, ``kind``, ``code``
``locpriv_request_seconds``            histogram  ``service``, ``kind``: receipt to reply
``locpriv_queue_depth``                gauge      ``service``, ``queue`` (inbound, outbound)
``locpriv_reconnects_total``           counter    ``service``
``locpriv_reconnects_recent``          gauge      ``service``: within the last 60 s (10 or
                                                  more: a storm, logged at ERROR; another
                                                  client may be using the service's id)
``locpriv_unsolicited_total``          counter    ``service``: answers with no request of
                                                  ours outstanding, dropped unread
``locpriv_pending_requests``           gauge      ``service`` (waiting for DS or a cloak)
``locpriv_pending_cloaks``             gauge      ``service`` (temporal cloaking)
``locpriv_users``                      gauge      ``service``, ``tile`` (tiles this process
                                                  serves only: bounded)
``locpriv_forged_answers_total``       counter    ``service``: DS replies whose ``mac`` did not
                                                  check, dropped unrelayed (mediator)
``locpriv_shed_total``                 counter    ``service``, ``reason`` (DS: ``too_costly``,
                                                  ``waited`` - overloaded by waiting time,
                                                  ``lane_rate`` - public lane over its rate)
``locpriv_session_regions_total``      counter    ``service``, ``margins`` (``thin``,
                                                  ``worst_case``; regions of tiles:
                                                  ``tiles``, ``tile_boxes`` - the box of more
                                                  tiles than a region carries): session
                                                  cloaks answered
``locpriv_session_events_total``       counter    ``service``, ``event`` (``short`` - a
                                                  worst-case region because fewer than k +
                                                  slack members were left; ``audit_dropped``
                                                  - members the self-audit dropped;
                                                  ``rekeys`` - sessions restarted;
                                                  ``restored`` - sessions carried over a
                                                  restart or a crash; ``fix_asked`` -
                                                  members asked for a fresh report;
                                                  ``fix_waits`` - session requests that
                                                  waited for such reports)
=====================================  =========  ============================================

Labels never hold a user id, a correlation id or a position. Latencies are monotonic seconds
from the message's receipt to the confirmed publish of its answer (or error).

Prometheus scrapes from the HTTP server's thread, while the driver and its machine belong to
the event loop: the state gauges are therefore read *on the loop* (the scrape thread hands it
the read and waits up to :data:`SCRAPE_WAIT_S`), so a scrape never sees a dict or a table
half-way through an update. A loop too busy to answer in time gets the previous scrape's
values (or, before any, those read when the endpoint started; logged at WARNING), never a
hung or failed scrape.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from locpriv.protocols.dispatch import Route, salvage_reply
from locpriv.protocols.effects import Send
from locpriv.wire.envelope import Received
from locpriv.wire.messages import ErrorReply

if TYPE_CHECKING:
    from locpriv.service.driver import ServiceDriver

__all__ = ["SCRAPE_WAIT_S", "SESSION_EVENTS", "SESSION_REGIONS", "ServiceMetrics"]

log = logging.getLogger(__name__)

SCRAPE_WAIT_S = 5.0
"""How long, seconds, a scrape waits for the event loop to read the state gauges before it
answers with the previous scrape's values."""

_MAX_TRACKED = 100_000
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServiceMetrics:
    """The metrics of one service driver, in a registry of their own."""

    def __init__(self, driver: ServiceDriver) -> None:
        self.driver = driver
        self.service = driver.status_name
        self.registry = CollectorRegistry()
        self.messages = Counter(
            "locpriv_messages",
            "Messages handled, by route",
            ["service", "kind"],
            registry=self.registry,
        )
        self.errors = Counter(
            "locpriv_errors",
            "Error replies published, by route and code",
            ["service", "kind", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "locpriv_request_seconds",
            "Seconds from a request's receipt to the publish of its answer",
            ["service", "kind"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.state = _StateCollector(driver)
        self.registry.register(self.state)
        self._open: dict[tuple[str, str], tuple[float, str]] = {}
        self._server: Any = None

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Start the HTTP endpoint (``/metrics``) in a thread; returns the bound port. Call it
        from the event loop that runs the driver: the state gauges are read on that loop."""
        self.state.loop = asyncio.get_running_loop()
        self.state.prime()
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        """Stop the HTTP endpoint."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handled(self, route: Route | None, received: Received) -> None:
        """A message taken from the broker (before its effects are emitted)."""
        if route is None:
            return
        kind = route.label or route.topic_filter
        self.messages.labels(self.service, kind).inc()
        if route.answer_errors and route.overload_errors:  # a request: time its answer
            reply_to, cid = salvage_reply(received.payload, self.driver.topics)
            if reply_to is not None and cid is not None:
                if len(self._open) >= _MAX_TRACKED:
                    self._open.pop(next(iter(self._open)))
                self._open[(reply_to, cid)] = (time.monotonic(), kind)

    def sent(self, effect: Send) -> None:
        """An effect about to be published: an answer ends its request's timing."""
        cid = getattr(effect.message, "correlation_id", None)
        opened = self._open.pop((effect.topic, cid), None) if cid is not None else None
        kind = opened[1] if opened is not None else "other"
        if isinstance(effect.message, ErrorReply):
            self.errors.labels(self.service, kind, effect.message.code.value).inc()
        if opened is not None:
            self.latency.labels(self.service, kind).observe(time.monotonic() - opened[0])


class _StateCollector(Collector):
    """Gauges read from the driver and its machine at scrape time, on the driver's loop."""

    def __init__(self, driver: ServiceDriver) -> None:
        self.driver = driver
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop that runs the driver (set by :meth:`ServiceMetrics.serve`); None: read
        in the caller's thread."""
        self._last: list[Any] = []
        self.late = 0
        """Scrapes the loop did not answer within :data:`SCRAPE_WAIT_S`."""

    def prime(self) -> None:
        """Read the state now (call on the loop): what a scrape gets if the loop is busy
        before any scrape has been answered."""
        self._last = _read_state(self.driver)

    def collect(self) -> Iterator[Any]:
        loop = self.loop
        if loop is None or loop.is_closed() or _on_loop(loop):
            families = _read_state(self.driver)
        else:
            done: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()

            def read() -> None:
                if done.set_running_or_notify_cancel():
                    try:
                        done.set_result(_read_state(self.driver))
                    except BaseException as exc:  # handed to the scrape thread
                        done.set_exception(exc)

            try:
                loop.call_soon_threadsafe(read)
            except RuntimeError:  # the loop has closed: nothing writes any more
                yield from _read_state(self.driver)
                return
            try:
                families = done.result(timeout=SCRAPE_WAIT_S)
            except concurrent.futures.TimeoutError:  # the loop is busy
                done.cancel()
                self.late += 1
                log.warning(
                    "metrics: the event loop did not read the state within %.0f s; the"
                    " previous scrape's values are served",
                    SCRAPE_WAIT_S,
                )
                families = self._last
        self._last = families
        yield from families


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the calling thread is running ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _read_state(d: ServiceDriver) -> list[Any]:
    """The state gauges and counters of driver ``d`` and its machine (call on its loop)."""
    return list(_state_families(d))


def _state_families(d: ServiceDriver) -> Iterator[Any]:
    name = d.status_name
    queue = GaugeMetricFamily(
        "locpriv_queue_depth", "Messages waiting in the process", labels=["service", "queue"]
    )
    queue.add_metric([name, "inbound"], d.backlog)
    queue.add_metric([name, "outbound"], d.outbox_size)
    yield queue
    yield _one(CounterMetricFamily, "locpriv_reconnects", _RECONNECTS, name, d.reconnects)
    yield _one(GaugeMetricFamily, "locpriv_reconnects_recent", _RECENT, name, d.reconnects_recent)
    unsolicited = d.stats.get("unsolicited", 0)
    yield _one(CounterMetricFamily, "locpriv_unsolicited", _UNSOLICITED, name, unsolicited)
    yield _one(CounterMetricFamily, "locpriv_dropped", _DROPPED, name, d.stats.get("dropped", 0))
    machine: Any = d.machine
    pending = float(getattr(machine, "pending", 0))
    yield _one(GaugeMetricFamily, "locpriv_pending_requests", _PENDING, name, pending)
    if hasattr(machine, "pending_cloaks"):
        cloaks = machine.pending_cloaks
        yield _one(GaugeMetricFamily, "locpriv_pending_cloaks", _CLOAKS, name, cloaks)
    if hasattr(machine, "users_per_tile"):
        users = GaugeMetricFamily(
            "locpriv_users", "Current users by tile", labels=["service", "tile"]
        )
        for tile, n in sorted(machine.users_per_tile().items()):
            users.add_metric([name, tile], float(n))
        yield users
    if hasattr(machine, "forged_answers"):
        forged = machine.forged_answers
        yield _one(CounterMetricFamily, "locpriv_forged_answers", _FORGED, name, forged)
    if hasattr(machine, "session_counts"):
        yield from _session_metrics(name, machine.session_counts())
    shed = CounterMetricFamily(
        "locpriv_shed", "Requests refused to keep a fair share", labels=["service", "reason"]
    )
    for reason in ("too_costly", "waited", "lane_rate"):
        if reason in d.stats:
            shed.add_metric([name, reason], float(d.stats[reason]))
    yield shed


_RECONNECTS = "Broker connections re-established"
_RECENT = "Broker connections re-established within the last 60 s"
_UNSOLICITED = "Answers on a service-to-service route with no request outstanding, dropped unread"
_DROPPED = "Messages dropped unread by a per-user rate limit (location updates)"
_PENDING = "Requests waiting for DS or a cloak"
_CLOAKS = "Temporal cloaks waiting"
_FORGED = "DS replies dropped unrelayed: their mac did not check"


def _one(
    family: type[CounterMetricFamily] | type[GaugeMetricFamily],
    metric: str,
    doc: str,
    service: str,
    value: float,
) -> CounterMetricFamily | GaugeMetricFamily:
    """A family of one sample, labelled with the service only."""
    out = family(metric, doc, labels=["service"])
    out.add_metric([service], float(value))
    return out


SESSION_REGIONS = ("thin", "worst_case", "tiles", "tile_boxes")
"""The ``margins`` of ``locpriv_session_regions_total``: how a session's region was built (one
box from thin or worst-case margins, or tiles, or the box of more tiles than a region
carries)."""

SESSION_EVENTS = (
    "short",
    "audit_dropped",
    "rekeys",
    "restored",
    "fix_asked",
    "fix_waits",
    "companions",
)
"""The ``event`` labels of ``locpriv_session_events_total``."""


def _session_metrics(service: str, counts: dict[str, int]) -> Iterator[Any]:
    """The cloakers' ``session_counts`` as two counter families (fixed label values: bounded)."""
    regions = CounterMetricFamily(
        "locpriv_session_regions",
        "Session cloaks answered, by the margins they were built from",
        labels=["service", "margins"],
    )
    for margins in SESSION_REGIONS:
        regions.add_metric([service, margins], float(counts.get(margins, 0)))
    yield regions
    events = CounterMetricFamily(
        "locpriv_session_events",
        "Session events: short sets, members the self-audit dropped, sessions re-keyed, "
        "sessions carried over a restart, members asked for fresh reports, requests that "
        "waited for them, thin regions given up for members who move together",
        labels=["service", "event"],
    )
    for event in SESSION_EVENTS:
        events.add_metric([service, event], float(counts.get(event, 0)))
    yield events
