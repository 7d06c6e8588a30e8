"""Fresh reply topics on connections of their own, for brokers whose ACL binds reply topics
to client ids.

Under the shipped mosquitto ACL (``pattern read {prefix}/v1/reply/%c``) a client reads only
``reply/<its own client id>``. A machine that wants a fresh reply topic ``reply/<X>`` (Protocol
3's DS hop, Protocol 4's DS answers and token requests; so that DS cannot link a session's
queries by topic) gets it here: :class:`ReplyEndpoints` opens a short-lived connection whose
MQTT client id is ``X``, with the same URL and credentials, subscribes it to ``reply/<X>``,
hands what arrives to ``deliver`` and closes it on unsubscription. Every other filter (the
client's own reply topic, discovery cells, Protocol 4's peer reply topics) goes to the main
connection.
``X`` must never be shown to anyone but the service asked: whoever knows it can CONNECT with
it and take the connection over (docs/peer.md §2, "Reply topics").

Cost: one broker connection per fresh topic (see docs/operations.md, "Costs of fresh reply
topics"); closing happens in the background so that an answer is never delayed by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from locpriv.errors import TransportError
from locpriv.transport.base import Received, Transport
from locpriv.wire.topics import Topics

__all__ = ["Opener", "ReplyEndpoints"]

log = logging.getLogger(__name__)

Opener = Callable[[str], Transport]
"""Makes a (not yet connected) transport to the same broker with the given client id."""


class ReplyEndpoints:
    """Routes subscriptions: fresh reply topics to connections of their own, the rest to
    ``main``. ``own`` are topics the main connection may read (its reply topic)."""

    def __init__(
        self,
        main: Transport,
        topics: Topics,
        *,
        opener: Opener,
        deliver: Callable[[Received], None],
        own: frozenset[str] = frozenset(),
    ) -> None:
        self.main = main
        self.topics = topics
        self.opener = opener
        self.deliver = deliver
        self.own = own | {topics.reply(main.client_id)}
        self._open: dict[str, tuple[Transport, asyncio.Task[None]]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self.opened = 0
        """Connections opened so far (for diagnostics and benchmarks)."""

    def fresh(self, topic: str) -> bool:
        """True when ``topic`` is a reply topic the main connection cannot read."""
        return self.topics.is_reply(topic) and topic not in self.own

    @property
    def active(self) -> int:
        """Extra connections currently open."""
        return len(self._open)

    async def subscribe(self, *filters: str, qos: int = 1) -> None:
        """Subscribe to every filter; fresh reply topics open their connections concurrently."""
        fresh = [f for f in filters if self.fresh(f) and f not in self._open]
        for f in filters:
            if not self.fresh(f):
                await self.main.subscribe(f, qos=qos)
        if fresh:
            await asyncio.gather(*(self._open_one(f, qos) for f in fresh))

    async def _open_one(self, topic: str, qos: int) -> None:
        client_id = topic[len(self.topics.reply_prefix) :]
        transport = self.opener(client_id)
        await transport.__aenter__()
        try:
            await transport.subscribe(topic, qos=qos)
        except BaseException:
            await transport.__aexit__(None, None, None)
            raise
        task = asyncio.get_running_loop().create_task(
            self._forward(transport), name=f"reply-{client_id}"
        )
        self._open[topic] = (transport, task)
        self.opened += 1

    async def _forward(self, transport: Transport) -> None:
        async for received in transport.messages():
            try:
                self.deliver(received)
            except Exception:  # a bug in the consumer must not kill the endpoint
                log.exception("reply endpoint: delivering a message failed")

    async def unsubscribe(self, topic_filter: str) -> None:
        """Drop a subscription; a fresh topic's connection is closed in the background."""
        entry = self._open.pop(topic_filter, None)
        if entry is None:
            if not self.fresh(topic_filter):
                await self.main.unsubscribe(topic_filter)
            return
        task = asyncio.get_running_loop().create_task(self._close(*entry))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close(transport: Transport, task: asyncio.Task[None]) -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TransportError):
            await task
        with contextlib.suppress(TransportError, OSError):
            await transport.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Close every extra connection (and wait for those closing)."""
        for topic in list(self._open):
            await self.unsubscribe(topic)
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
