"""One machine on a broker connection: the wiring the app client and the device client share.

:class:`MachineHost` holds the main transport, the :class:`ReplyEndpoints` that read fresh reply
topics on connections of their own, the :class:`DeadlineTimer` that serves the machine's
deadlines and the :class:`EffectRunner` that carries out its effects. Every message read on any
of those connections goes to ``deliver``; the driver decodes it and feeds its machine. The host
starts and stops the reader and timer tasks in the right order, fails the requests still
waiting when the main connection ends, and can move to a new main connection
(:meth:`MachineHost.replace`, used by a device that changes its pseudonym).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from locpriv.errors import TransportError
from locpriv.protocols.effects import Effect
from locpriv.transport.base import Received, Transport
from locpriv.transport.deadlines import Clock, DeadlineTimer, HasDeadlines
from locpriv.transport.effects import EffectRunner
from locpriv.transport.endpoints import Opener, ReplyEndpoints
from locpriv.wire.topics import Topics

__all__ = ["MachineHost"]

log = logging.getLogger(__name__)


class MachineHost:
    """``machine`` driven over ``transport``; ``opener`` opens the extra connections of fresh
    reply topics (same credentials), ``deliver`` receives every message. ``on_closed`` runs when
    the main connection ends by itself (after the waiting requests were failed)."""

    def __init__(
        self,
        machine: HasDeadlines[Effect],
        transport: Transport,
        *,
        topics: Topics,
        opener: Opener,
        deliver: Callable[[Received], None],
        clock: Clock,
        name: str,
        on_timer_error: Callable[[Exception], None] | None = None,
        on_closed: Callable[[], None] | None = None,
    ) -> None:
        self.topics = topics
        self.opener = opener
        self.deliver = deliver
        self.name = name
        self.on_closed = on_closed
        self.transport = transport
        self.endpoints = self._endpoints(transport)
        self.timer = DeadlineTimer(
            machine, self.spawn, clock=clock, name=name, on_error=on_timer_error
        )
        self.effects = EffectRunner(transport, endpoints=self.endpoints, after=self.timer.poke)
        self._reader: asyncio.Task[None] | None = None
        self._timer_task: asyncio.Task[None] | None = None

    def _endpoints(self, transport: Transport) -> ReplyEndpoints:
        return ReplyEndpoints(transport, self.topics, opener=self.opener, deliver=self.deliver)

    def spawn(self, effects: list[Effect]) -> None:
        """Carry out ``effects`` (outcomes at once, the rest in the background)."""
        self.effects.spawn(effects)

    async def request(
        self, request_id: str, effects: list[Effect], timeout_s: float | None = None
    ) -> Any:
        """Start a request with its first effects and wait for its outcome (at most
        ``timeout_s``: RequestTimeout)."""
        return await self.effects.request(request_id, effects, timeout_s)

    async def start(self, subscriptions: Sequence[tuple[str, int]] = ()) -> None:
        """Connect, subscribe to ``(topic, qos)`` pairs, start reading and serving deadlines."""
        await self.transport.__aenter__()
        try:
            for topic, qos in subscriptions:
                await self.transport.subscribe(topic, qos=qos)
        except BaseException:
            await self.transport.__aexit__(None, None, None)
            raise
        self._reader = self._read_task(self.transport)
        self._timer_task = asyncio.create_task(self.timer.run(), name=f"{self.name}-timer")

    def _read_task(self, transport: Transport) -> asyncio.Task[None]:
        return asyncio.create_task(self._read(transport), name=f"{self.name}-read")

    async def _read(self, transport: Transport) -> None:
        async for item in transport.messages():
            self.deliver(item)
        if transport is self.transport:  # the main connection ended (not replaced)
            self.effects.fail_all(TransportError("transport closed"))
            if self.on_closed is not None:
                self.on_closed()

    async def replace(self, new: Transport, subscriptions: Sequence[tuple[str, int]] = ()) -> None:
        """Move to ``new`` as the main connection (subscribed to ``subscriptions``); the old
        one, its reader and its reply connections are closed afterwards. Call it between
        requests: replies still due on the old connection's topics are not read."""
        await new.__aenter__()
        try:
            for topic, qos in subscriptions:
                await new.subscribe(topic, qos=qos)
        except BaseException:
            await new.__aexit__(None, None, None)
            raise
        old, old_endpoints, old_reader = self.transport, self.endpoints, self._reader
        self.transport = new
        self.endpoints = self._endpoints(new)
        self.effects.transport = new
        self.effects.endpoints = self.endpoints
        self._reader = self._read_task(new)
        if old_reader is not None:
            await _cancel([old_reader])
        await old_endpoints.aclose()
        await old.__aexit__(None, None, None)

    async def stop(
        self, closed: Exception, exc_info: tuple[Any, Any, Any] = (None, None, None)
    ) -> None:
        """Stop reading and serving deadlines, fail the requests still waiting with
        ``closed``, close the reply connections and the main one."""
        await self.effects.close()
        await _cancel([t for t in (self._reader, self._timer_task) if t is not None])
        self._reader = self._timer_task = None
        self.effects.fail_all(closed)
        await self.endpoints.aclose()
        await self.transport.__aexit__(*exc_info)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` until they are done (3.11's wait_for may swallow one cancellation)."""
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.2)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            log.debug("%s ended with %r", task.get_name(), task.exception())
