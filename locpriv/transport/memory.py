"""An in-process message bus with MQTT topic matching, for tests and simulators."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from locpriv.errors import TransportError
from locpriv.transport.base import _CLOSED, Received, _drain, _take_nowait, new_client_id
from locpriv.wire.topics import matches


@dataclass(eq=False)
class MemoryBus:
    """An in-process message bus with MQTT 3.1.1 topic semantics (no QoS, no network)."""

    name: str
    members: list[MemoryTransport] = field(default_factory=list)
    retained: dict[str, bytes] = field(default_factory=dict)
    _rr: itertools.count[int] = field(default_factory=itertools.count)

    @classmethod
    def named(cls, name: str) -> MemoryBus:
        """The process-wide bus called ``name`` (created on first use)."""
        bus = _BUSES.get(name)
        if bus is None:
            bus = _BUSES[name] = cls(name)
        return bus

    def deliver(self, topic: str, payload: bytes, *, retain: bool) -> None:
        """Route one message to every matching subscription (one member per share group)."""
        if retain:
            if payload:
                self.retained[topic] = payload
            else:
                self.retained.pop(topic, None)
        groups: dict[str, list[MemoryTransport]] = {}
        for member in self.members:
            plain = False
            for topic_filter in member.filters:
                if not matches(topic_filter, topic):
                    continue
                if topic_filter.startswith("$share/"):
                    group = topic_filter.split("/", 2)[1] + "\x00" + topic_filter.split("/", 2)[2]
                    groups.setdefault(group, []).append(member)
                else:
                    plain = True
            if plain:
                member.enqueue(Received(topic, payload))
        for candidates in groups.values():
            candidates[next(self._rr) % len(candidates)].enqueue(Received(topic, payload))


_BUSES: dict[str, MemoryBus] = {}


class MemoryTransport:
    """A client of a :class:`MemoryBus`; same interface as :class:`MqttTransport`.

    ``max_queue`` > 0 bounds the incoming queue; overflow raises :class:`TransportError` in the
    publisher (nothing is dropped silently). ``will`` is delivered retained when the transport
    exits with an exception, ``birth`` when it opens.
    """

    def __init__(
        self,
        bus: MemoryBus,
        *,
        client_id: str | None = None,
        will: tuple[str, bytes] | None = None,
        birth: tuple[str, bytes] | None = None,
        max_queue: int = 0,
    ) -> None:
        self.bus = bus
        self.birth = birth
        self.reconnects = 0
        """An in-process bus never drops the connection."""
        self.client_id = client_id or new_client_id()
        self.url = f"memory://{bus.name}"
        self.will = will
        self.filters: set[str] = set()
        self._queue: asyncio.Queue[Received | object] = asyncio.Queue(max_queue)
        self._open = False

    async def __aenter__(self) -> Self:
        self._open = True
        self.bus.members.append(self)
        if self.birth is not None:
            self.bus.deliver(self.birth[0], self.birth[1], retain=True)
        return self

    @property
    def connected(self) -> bool:
        """True while open."""
        return self._open

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._open:
            self._open = False
            self.bus.members.remove(self)
            if exc is not None and self.will is not None:
                self.bus.deliver(self.will[0], self.will[1], retain=True)
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(_CLOSED)

    @property
    def backlog(self) -> int:
        """Messages delivered but not yet taken from :meth:`messages`."""
        return self._queue.qsize()

    def take_nowait(self) -> Received | None:
        """The next delivered message, or None (does not wait)."""
        return _take_nowait(self._queue)

    def enqueue(self, item: Received) -> None:
        """Deliver one message to this client (called by the bus)."""
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            raise TransportError(f"receiver {self.client_id} queue full") from None

    async def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False
    ) -> None:
        """Deliver to every matching subscriber on the bus (synchronously queued)."""
        if not self._open:
            raise TransportError("transport is closed")
        self.bus.deliver(topic, bytes(payload), retain=retain)
        await asyncio.sleep(0)

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe; matching retained messages are delivered at once."""
        self.filters.add(topic_filter)
        if not topic_filter.startswith("$share/"):
            for topic, payload in list(self.bus.retained.items()):
                if matches(topic_filter, topic):
                    self.enqueue(Received(topic, payload))

    async def unsubscribe(self, topic_filter: str) -> None:
        """Drop a subscription."""
        self.filters.discard(topic_filter)

    def messages(self) -> AsyncIterator[Received]:
        """Every delivered message until the transport closes."""
        return _drain(self._queue)
