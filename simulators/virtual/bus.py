"""An in-process MQTT-like router on a virtual clock (synchronous, deterministic).

:class:`VirtualBus` has :class:`locpriv.transport.MemoryBus` semantics - topic filters with
``+``/``#`` (:func:`locpriv.wire.topics.matches`), every matching subscription gets a copy, no
retained messages - but no asyncio: a publish schedules its delivery ``latency_s`` seconds
later on an event queue, and :meth:`VirtualBus.run_until` delivers the due events in order of
(time, publish order). Payloads are the real encoded bytes (:func:`locpriv.wire.messages.encode`);
handlers decode them. Timers (:meth:`call_at`) share the queue, so one run is a deterministic
sequence of events.

Every publish is counted by a ``tag`` the publisher supplies (the simulator uses the protocol
of the query it belongs to, or ``"updates"``) and by message type, with its size in bytes.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable
from typing import Generic, TypeVar

from locpriv.transport.deadlines import HasDeadlines
from locpriv.wire import messages as m
from locpriv.wire.topics import matches

__all__ = ["Handler", "VirtualBus", "VirtualTimer"]

E = TypeVar("E")

Handler = Callable[[str, bytes, object, float], None]
"""``(topic, payload, tag, now)``: one delivered copy; ``tag`` is the publisher's."""

_DELIVER = 0
_CALL = 1


class VirtualBus:
    """Topic router with a virtual-time event queue; ``latency_s`` per hop (publish->delivery)."""

    def __init__(self, latency_s: float = 0.001) -> None:
        if latency_s < 0.0:
            raise ValueError("latency_s must be >= 0")
        self.latency_s = latency_s
        self.now = 0.0
        self._queue: list[tuple[float, int, int, object]] = []
        self._seq = itertools.count()
        self._exact: dict[str, list[Handler]] = {}
        self._wild: list[tuple[str, Handler]] = []
        self.messages: Counter[tuple[str, str]] = Counter()
        """Publishes by ``(tag, message type)``."""
        self.bytes: Counter[str] = Counter()
        """Bytes published by tag."""
        self.delivered = 0

    # ------------------------------------------------------------ subscriptions
    def subscribe(self, topic_filter: str, handler: Handler) -> None:
        """Deliver messages matching ``topic_filter`` to ``handler`` (idempotent)."""
        if "+" in topic_filter or "#" in topic_filter:
            if (topic_filter, handler) not in self._wild:
                self._wild.append((topic_filter, handler))
            return
        hs = self._exact.setdefault(topic_filter, [])
        if handler not in hs:
            hs.append(handler)

    def unsubscribe(self, topic_filter: str, handler: Handler) -> None:
        """Stop delivering ``topic_filter`` to ``handler``."""
        if "+" in topic_filter or "#" in topic_filter:
            self._wild = [(f, h) for f, h in self._wild if (f, h) != (topic_filter, handler)]
            return
        hs = self._exact.get(topic_filter)
        if hs is not None and handler in hs:
            hs.remove(handler)
            if not hs:
                del self._exact[topic_filter]

    # -------------------------------------------------------------------- events
    def publish(
        self, topic: str, message: m.Message, now: float, *, tag: object = None, label: str = ""
    ) -> int:
        """Encode ``message`` and deliver it at ``now + latency_s``; returns its size.

        ``tag`` travels with the delivery; ``label`` names the counter (e.g. ``"p1"``)."""
        payload = m.encode(message)
        self.messages[(label, type(message).__name__)] += 1
        self.bytes[label] += len(payload)
        self._push(now + self.latency_s, _DELIVER, (topic, payload, tag))
        return len(payload)

    def call_at(self, t: float, fn: Callable[[float], None]) -> None:
        """Run ``fn(t)`` at virtual time ``t`` (not before the current time)."""
        self._push(max(t, self.now), _CALL, fn)

    def _push(self, t: float, kind: int, item: object) -> None:
        heapq.heappush(self._queue, (t, next(self._seq), kind, item))

    def run_until(self, t_end: float) -> None:
        """Process every event due at or before ``t_end`` (events may schedule more)."""
        q = self._queue
        while q and q[0][0] <= t_end:
            t, _, kind, item = heapq.heappop(q)
            self.now = t
            if kind == _CALL:
                fn: Callable[[float], None] = item  # type: ignore[assignment]
                fn(t)
                continue
            topic: str
            payload: bytes
            tag: object
            topic, payload, tag = item  # type: ignore[misc]
            handlers = list(self._exact.get(topic, ()))
            handlers += [h for f, h in self._wild if matches(f, topic)]
            for h in handlers:
                self.delivered += 1
                h(topic, payload, tag, t)
        self.now = max(self.now, t_end)


class VirtualTimer(Generic[E]):
    """A machine's deadlines on the virtual clock (the twin of the asyncio
    :class:`~locpriv.transport.deadlines.DeadlineTimer`): :meth:`arm` after feeding the machine
    schedules ``on_deadline`` at its next deadline (earlier ones supersede later ones), and
    ``emit(effects, now)`` carries the effects out."""

    def __init__(
        self,
        bus: VirtualBus,
        machine: HasDeadlines[E],
        emit: Callable[[list[E], float], None],
    ) -> None:
        self.bus = bus
        self.machine = machine
        self.emit = emit
        self._at: float | None = None

    def arm(self) -> None:
        """Schedule the machine's next deadline unless an earlier call is already due."""
        due = self.machine.next_deadline()
        if due is not None and (self._at is None or due < self._at):
            self._at = due
            self.bus.call_at(due, self._fire)

    def _fire(self, now: float) -> None:
        if self._at is not None and now < self._at:
            return  # superseded by an earlier call that already ran
        self._at = None
        due = self.machine.next_deadline()
        if due is not None and due <= now:
            self.emit(self.machine.on_deadline(now), now)
        self.arm()
