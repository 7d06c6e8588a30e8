"""Transport types shared by the MQTT and in-process transports."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Final, Protocol, Self, runtime_checkable

from locpriv.wire.envelope import Received

__all__ = ["Received", "Transport", "new_client_id"]

_CLOSED: Final = object()


@runtime_checkable
class Transport(Protocol):
    """Everything drivers (services, clients, simulators) use of a broker connection.

    ``client_id`` names the connection (and its reply topic); ``url`` is the broker without
    credentials; ``connected`` is true while the connection is up (always, in memory);
    ``reconnects`` counts re-established connections; ``backlog`` the messages received and not
    yet taken; ``take_nowait`` takes one without waiting (None when there is none).
    """

    client_id: str
    url: str

    @property
    def connected(self) -> bool: ...

    @property
    def reconnects(self) -> int: ...

    @property
    def backlog(self) -> int: ...

    def take_nowait(self) -> Received | None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False
    ) -> None: ...

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None: ...

    async def unsubscribe(self, topic_filter: str) -> None: ...

    def messages(self) -> AsyncIterator[Received]: ...


def new_client_id(prefix: str = "locpriv") -> str:
    """A random MQTT client id usable as a topic segment (``prefix-<12 hex>``)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def _drain(queue: asyncio.Queue[Received | object]) -> AsyncIterator[Received]:
    """Every message put on ``queue`` until the closing marker (left for other readers)."""
    while True:
        item = await queue.get()
        if item is _CLOSED:
            queue.put_nowait(_CLOSED)
            return
        assert isinstance(item, Received)
        yield item


def _take_nowait(queue: asyncio.Queue[Received | object]) -> Received | None:
    try:
        item = queue.get_nowait()
    except asyncio.QueueEmpty:
        return None
    if item is _CLOSED:
        queue.put_nowait(_CLOSED)
        return None
    assert isinstance(item, Received)
    return item
