"""Carrying out a machine's effects on a transport: the part every asyncio driver shares.

:class:`EffectRunner` publishes ``Send`` effects, performs ``Subscribe``/``Unsubscribe`` (a
subscription is acknowledged before the effects that follow it), and settles ``Done``/``Failed``
outcomes into the futures of the requests the driver is waiting on. :meth:`EffectRunner.spawn`
settles outcomes at once and carries out the rest in a background task, so that a reader never
waits on the broker; :meth:`EffectRunner.request` starts a request and waits for its outcome.
The app client and the peer client drive their machines with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from locpriv.errors import RequestTimeout, TransportError
from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe, Unsubscribe
from locpriv.transport.base import Transport
from locpriv.transport.endpoints import ReplyEndpoints
from locpriv.wire.messages import encode

__all__ = ["EffectRunner", "settle_outcome"]

log = logging.getLogger(__name__)


def settle_outcome(
    futures: dict[str, asyncio.Future[Any]], e: Effect, *, pop: bool = False
) -> bool:
    """Resolve ``futures[e.request_id]`` with a ``Done`` value or a ``Failed`` error (removing
    it with ``pop``); False when ``e`` is not an outcome."""
    if not isinstance(e, Done | Failed):
        return False
    fut = futures.pop(e.request_id, None) if pop else futures.get(e.request_id)
    if fut is not None and not fut.done():
        if isinstance(e, Done):
            fut.set_result(e.value)
        else:
            fut.set_exception(e.error)
    return True


class EffectRunner:
    """Effects onto ``transport``; subscriptions through ``endpoints`` when given (fresh reply
    topics on connections of their own, consecutive ones opened concurrently); ``after`` runs
    once a batch is done (e.g. a timer's poke)."""

    def __init__(
        self,
        transport: Transport,
        *,
        endpoints: ReplyEndpoints | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        self.transport = transport
        self.endpoints = endpoints
        self.after = after
        self.futures: dict[str, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def settle(self, e: Effect) -> bool:
        """Resolve the future of a ``Done``/``Failed`` outcome; False for other effects."""
        return settle_outcome(self.futures, e)

    async def run(self, effects: list[Effect]) -> None:
        """Carry out ``effects`` in order (a run of subscriptions is acknowledged before what
        follows it)."""
        i = 0
        while i < len(effects):
            e = effects[i]
            if isinstance(e, Subscribe):
                j = i
                while j < len(effects) and isinstance(effects[j], Subscribe):
                    j += 1
                await self._subscribe([s for s in effects[i:j] if isinstance(s, Subscribe)])
                i = j
                continue
            if isinstance(e, Send):
                await self.transport.publish(e.topic, encode(e.message), qos=e.qos)
            elif isinstance(e, Unsubscribe):
                if self.endpoints is not None:
                    await self.endpoints.unsubscribe(e.topic)
                else:
                    await self.transport.unsubscribe(e.topic)
            else:
                self.settle(e)
            i += 1
        if self.after is not None:
            self.after()

    async def _subscribe(self, group: list[Subscribe]) -> None:
        if self.endpoints is None:
            for s in group:
                await self.transport.subscribe(s.topic, qos=s.qos)
            return
        for qos in sorted({s.qos for s in group}):
            await self.endpoints.subscribe(*(s.topic for s in group if s.qos == qos), qos=qos)

    def spawn(self, effects: list[Effect]) -> None:
        """Settle outcomes now; carry out the rest in a background task."""
        rest = [e for e in effects if not self.settle(e)]
        if rest:
            task = asyncio.get_running_loop().create_task(self.run(rest))
            self._tasks.add(task)
            task.add_done_callback(self._finished)
        elif self.after is not None:
            self.after()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("effects failed: %s", task.exception())

    async def flush(self) -> None:
        """Wait until every background batch is done."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def request(
        self, request_id: str, effects: list[Effect], timeout_s: float | None = None
    ) -> Any:
        """Carry out a request's first effects and wait for its outcome (its value, or its
        error raised); ``timeout_s`` bounds the wait (RequestTimeout)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.futures[request_id] = fut
        try:
            await self.run(effects)
            if timeout_s is None:
                return await fut
            try:
                async with asyncio.timeout(timeout_s):
                    return await fut
            except TimeoutError:
                raise RequestTimeout(f"no answer within {timeout_s:g} s") from None
        finally:
            self.futures.pop(request_id, None)

    def fail_all(self, error: Exception | None = None) -> None:
        """Fail every request still waiting (the transport closed)."""
        for fut in self.futures.values():
            if not fut.done():
                fut.set_exception(error or TransportError("transport closed"))

    async def close(self) -> None:
        """Cancel the background batches."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
