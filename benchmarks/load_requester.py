"""A raw request/reply load generator's correlator (benchmark tooling, not the library).

``bench_e2e.py`` sends the same raw requests to a bare aiomqtt echo, a relay and the locpriv
services, so it needs a correlator that knows nothing of the protocols: a :class:`Requester`
owns one reply topic, stamps every request with a fresh ``correlation_id`` and that
``reply_to``, and resolves the matching future when the reply arrives. Apps use
:class:`locpriv.client.Client` (the P1-P3 requester machine) instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

from locpriv.errors import DecodeError, RemoteError, RequestTimeout, TransportError
from locpriv.transport import Received, Transport
from locpriv.wire.messages import REPLY_MAX_BYTES, ErrorReply, Message, decode, encode

__all__ = ["REPLY_MAX_BYTES", "Requester", "new_correlation_id"]

log = logging.getLogger(__name__)


def new_correlation_id() -> str:
    """A fresh random correlation id (32 hex characters)."""
    return uuid.uuid4().hex


class Requester:
    """Correlates requests and replies on the private topic ``reply_to``."""

    def __init__(self, transport: Transport, reply_to: str) -> None:
        self.transport = transport
        self.reply_to = reply_to
        self._waiting: dict[str, asyncio.Future[Message]] = {}
        self._started = False

    async def start(self) -> None:
        """Subscribe to the reply topic (idempotent)."""
        if not self._started:
            await self.transport.subscribe(self.reply_to, qos=1)
            self._started = True

    @property
    def pending(self) -> int:
        """Requests waiting for a reply."""
        return len(self._waiting)

    def feed(self, received: Received) -> bool:
        """Offer one received message; True if it was a reply on our topic (consumed)."""
        if received.topic != self.reply_to:
            return False
        try:
            message = decode(received.payload, max_bytes=REPLY_MAX_BYTES)
        except DecodeError as exc:
            log.warning("undecodable reply dropped: %s", exc)
            return True
        cid = getattr(message, "correlation_id", None)
        fut = self._waiting.pop(cid, None) if isinstance(cid, str) else None
        if fut is None:
            log.debug("reply with unknown correlation id dropped")
            return True
        if not fut.done():
            fut.set_result(message)
        return True

    async def run(self) -> None:
        """Consume the transport's messages, feeding replies; returns when it closes."""
        async for received in self.transport.messages():
            self.feed(received)
        self.fail_all(TransportError("transport closed"))

    def fail_all(self, exc: BaseException) -> None:
        """Fail every waiting request with ``exc``."""
        waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(exc)

    async def request(
        self,
        topic: str,
        message: Message,
        timeout_s: float,
        *,
        correlation_id: str | None = None,
    ) -> Message:
        """Publish ``message`` (re-stamped with a fresh correlation id and our ``reply_to``) on
        ``topic`` and wait up to ``timeout_s`` seconds for the reply.

        Raises RemoteError for an error reply, RequestTimeout when none arrives, TransportError
        when the broker is unreachable.
        """
        await self.start()
        cid = correlation_id or new_correlation_id()
        stamped = message.model_copy(update={"correlation_id": cid, "reply_to": self.reply_to})
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[cid] = fut
        try:
            async with asyncio.timeout(timeout_s):
                await self.transport.publish(topic, encode(stamped), qos=1)
                reply = await fut
        except TimeoutError:
            raise RequestTimeout(f"no reply on {topic} within {timeout_s:g} s") from None
        finally:
            self._waiting.pop(cid, None)
            if not fut.done():
                fut.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                if fut.done() and not fut.cancelled():
                    fut.exception()
        if isinstance(reply, ErrorReply):
            raise RemoteError(reply.code, reply.reason, reply.field)
        return reply
