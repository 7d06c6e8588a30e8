"""MemoryTransport: MQTT topic matching, shared subscriptions, retained messages."""

from __future__ import annotations

import asyncio

import pytest

from locpriv.errors import TransportError
from locpriv.transport import MemoryTransport, Received, connect


async def _drain(t: MemoryTransport) -> list[Received]:
    out: list[Received] = []
    while not t._queue.empty():
        item = t._queue.get_nowait()
        if isinstance(item, Received):
            out.append(item)
    return out


@pytest.mark.asyncio
async def test_wildcards_share_and_retain() -> None:
    url = "memory://t-wild"
    async with connect(url) as a, connect(url) as b, connect(url) as c:
        assert isinstance(a, MemoryTransport) and isinstance(b, MemoryTransport)
        assert isinstance(c, MemoryTransport)
        await a.subscribe("x/+/z")
        await b.subscribe("$share/g/x/#")
        await c.subscribe("$share/g/x/#")
        for i in range(4):
            await a.publish(f"x/{i}/z", b"%d" % i)
        assert [m.payload for m in await _drain(a)] == [b"0", b"1", b"2", b"3"]
        assert len(await _drain(b)) + len(await _drain(c)) == 4
        await a.publish("s/1", b"on", retain=True)
        await b.subscribe("s/#")
        assert await _drain(b) == [Received("s/1", b"on")]


@pytest.mark.asyncio
async def test_bounded_queue_overflow_is_an_error() -> None:
    async with connect("memory://t-bound", max_queue=1) as a:
        await a.subscribe("q")
        await a.publish("q", b"1")
        with pytest.raises(TransportError):
            await a.publish("q", b"2")


@pytest.mark.asyncio
async def test_messages_ends_on_close() -> None:
    t = connect("memory://t-close")
    async with t:
        await t.subscribe("q")
        await t.publish("q", b"1")
    got = [m async for m in t.messages()]
    assert got == [Received("q", b"1")]
    with pytest.raises(TransportError):
        await t.publish("q", b"2")
    await asyncio.sleep(0)
