"""Protocol 4 end to end on real brokers (embedded amqtt and mosquitto) with the real DS service:
20+ PeerClients in one process, exact refined answers, nothing identifying reaches DS, Sybil
flooding over the wire, the averaging defence on the wire."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from _svc_helpers import wait_until

import locpriv
from locpriv.config import MqttSection, ServiceConfig
from locpriv.core.noise import offset_lonlat
from locpriv.core.poi import load_pois, refine
from locpriv.errors import GroupInfeasible
from locpriv.peer import PeerClient
from locpriv.protocols.p4.types import PeerConfig, ResponderPolicy
from locpriv.service.ds import DSService
from locpriv.transport import Received, connect
from locpriv.wire.messages import (
    DSQuery,
    NearestQuery,
    PeerReply,
    PeerRequest,
    Query,
    WithinQuery,
    decode,
    encode,
)
from locpriv.wire.topics import Topics

LAT0, LON0 = 41.3874, 2.1686
POIS = load_pois(Path(locpriv.__file__).parent / "data" / "pois.csv")
K, A_MIN, A_MAX, SIGMA = 5, 20_000.0, 1_000_000.0, 60.0

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


@contextlib.asynccontextmanager
async def ds_running(url: str, topics: Topics) -> AsyncIterator[DSService]:
    config = ServiceConfig(
        prefix=topics.prefix, mqtt=MqttSection(ds_client_id=f"{topics.prefix}-ds")
    )
    ds = DSService(url, config)
    task = asyncio.create_task(ds.run())
    try:
        ready = asyncio.create_task(ds.ready.wait())
        await asyncio.wait({ready, task}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        assert ds.ready.is_set()
        yield ds
    finally:
        ds.stop()
        await asyncio.gather(task, return_exceptions=True)


async def stop(task: asyncio.Task[None]) -> None:
    """Cancel until done: Python 3.11's wait_for can swallow a cancellation that races a
    completing publish, so one cancel() is not always enough."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.2)


@contextlib.asynccontextmanager
async def spy(url: str, topic_filter: str) -> AsyncIterator[list[Received]]:
    seen: list[Received] = []
    async with connect(url) as t:
        await t.subscribe(topic_filter)

        async def pump() -> None:
            async for item in t.messages():
                seen.append(item)

        task = asyncio.create_task(pump())
        try:
            yield seen
        finally:
            await stop(task)


@contextlib.asynccontextmanager
async def fleet(
    url: str, topics: Topics, n: int, seed: int, **kw: object
) -> AsyncIterator[tuple[list[PeerClient], list[tuple[float, float]]]]:
    rng = np.random.default_rng(seed)
    where = [offset_lonlat(LON0, LAT0, *rng.uniform(-400, 400, 2)) for _ in range(n)]
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for i, (lon, lat) in enumerate(where):
            # a window long enough for 21 replies through a loaded broker (the suite runs beside
            # other work): one round is the expected case, not a race
            config = PeerConfig(k=K, a_min_m2=A_MIN, a_max_m2=A_MAX, window_s=1.0, **kw)  # type: ignore[arg-type]
            p = PeerClient(
                url,
                user_id=f"user{i}",
                config=config,
                topics=topics,
                rng=np.random.default_rng(seed * 1000 + i),
            )
            clients.append(await stack.enter_async_context(p))
            p.set_location(lat=lat, lon=lon)
        await asyncio.gather(*(p.flush() for p in clients))  # subscriptions acknowledged
        yield clients, where


@pytest.mark.timeout(90)
async def test_twenty_devices_end_to_end(broker_url: str, topics: Topics) -> None:
    async with (
        ds_running(broker_url, topics),
        spy(broker_url, topics.ds_query) as ds_seen,
        fleet(broker_url, topics, 22, seed=1) as (clients, where),
    ):
        queries: list[Query] = [NearestQuery(category="pharmacy", n=3), WithinQuery(radius_m=300.0)]
        askers = [0, 5, 11]
        answers = await asyncio.gather(
            *(clients[i].query(queries[j % 2], timeout_s=20) for j, i in enumerate(askers))
        )
        for j, (i, a) in enumerate(zip(askers, answers, strict=True)):
            lon, lat = where[i]
            assert list(a.pois) == refine(POIS, queries[j % 2], lon=lon, lat=lat)
            assert a.group_size == K
            assert A_MIN < a.area_m2 < A_MAX
            assert a.rounds == 1 and a.replies >= K - 1
        await wait_until(lambda: len(ds_seen) >= len(askers), timeout=5.0)
        assert len(ds_seen) == len(askers)
        for item in ds_seen:
            msg = decode(item.payload)
            assert isinstance(msg, DSQuery) and msg.location.kind == "centroid"
            raw = item.payload.decode()
            assert "user" not in raw and "requester" not in raw and "responder" not in raw
        # everybody else answered as a responder
        assert sum(c.stats["replied"] for c in clients) >= 3 * (K - 1)


@pytest.mark.timeout(60)
async def test_too_few_devices_is_infeasible(amqtt_url: str, topics: Topics) -> None:
    async with fleet(amqtt_url, topics, 3, seed=2, max_rounds=2) as (clients, _):
        with pytest.raises(GroupInfeasible, match="too_few_replies"):
            await clients[0].query(NearestQuery(category="atm", n=1), timeout_s=10)
        assert clients[0].stats["round_too_few_replies"] == 2


@pytest.mark.timeout(60)
async def test_sybil_flood_over_the_wire(broker_url: str, topics: Topics) -> None:
    """A Sybil answering every request with garbage, far, duplicate and clustered points cannot
    prevent a group when honest neighbours exist; everything it sent is dropped and counted."""
    async with (
        ds_running(broker_url, topics),
        fleet(broker_url, topics, 12, seed=3) as (clients, where),
        connect(broker_url) as sybil,
    ):
        await sybil.subscribe(f"{topics.root}/peer/cell/+", qos=0)

        async def attack() -> None:
            async for item in sybil.messages():
                req = decode(item.payload)
                if not isinstance(req, PeerRequest):
                    continue
                far = offset_lonlat(req.lon, req.lat, 40_000.0, 0.0)
                near = offset_lonlat(req.lon, req.lat, 120.0, 40.0)
                out = [b"\x00garbage", b"{}", b'{"type":"peer_reply"}']
                out += [
                    encode(
                        PeerReply(
                            correlation_id=req.correlation_id,
                            responder=f"f{i}",
                            lat=far[1],
                            lon=far[0] + i * 1e-5,
                            t=req.t,
                        )
                    )
                    for i in range(40)
                ]
                out += [
                    encode(
                        PeerReply(
                            correlation_id=req.correlation_id,
                            responder="dup",
                            lat=near[1],
                            lon=near[0],
                            t=req.t,
                        )
                    )
                    for _ in range(20)
                ]
                out += [
                    encode(
                        PeerReply(
                            correlation_id=req.correlation_id,
                            responder=f"c{i}",
                            lat=req.lat + i * 1e-8,
                            lon=req.lon,
                            t=req.t,
                        )
                    )
                    for i in range(1, 60)
                ]
                for payload in out:
                    await sybil.publish(req.reply_to, payload, qos=0)

        task = asyncio.create_task(attack())
        try:
            a = await clients[0].query(NearestQuery(category="cafe", n=2), timeout_s=20)
        finally:
            await stop(task)
        lon, lat = where[0]
        assert list(a.pois) == refine(POIS, NearestQuery(category="cafe", n=2), lon=lon, lat=lat)
        assert a.rounds == 1
        d = a.dropped
        assert d.get("invalid", 0) >= 1
        assert d.get("far", 0) >= 1
        assert d.get("duplicate_responder", 0) >= 1
        assert d.get("thinned", 0) >= 1


@pytest.mark.timeout(60)
async def test_static_device_replies_with_one_point(amqtt_url: str, topics: Topics) -> None:
    """An observer asking a static device 30 times gets the same perturbed point every time
    (the averaging defence on the wire), never the true one."""
    policy = ResponderPolicy(per_requester_rate_per_s=100.0, per_requester_burst=100.0)
    async with (
        fleet(amqtt_url, topics, 1, seed=4, responder=policy) as (_, where),
        connect(amqtt_url) as observer,
    ):
        from locpriv.core.cells import CellGrid

        side = PeerConfig(k=K, a_min_m2=A_MIN, a_max_m2=A_MAX).side_m
        reply_to = topics.peer_reply(CellGrid(side).cell_of(*where[0]), "observer")
        await observer.subscribe(reply_to)
        got: list[tuple[float, float]] = []

        async def collect() -> None:
            async for item in observer.messages():
                msg = decode(item.payload)
                if isinstance(msg, PeerReply):
                    got.append((msg.lon, msg.lat))

        task = asyncio.create_task(collect())
        cfg = PeerConfig(k=K, a_min_m2=A_MIN, a_max_m2=A_MAX)
        lon, lat = where[0]
        for r in range(30):
            req = PeerRequest(
                correlation_id=f"c{r}", reply_to=reply_to, requester="obs", lat=lat, lon=lon, t=0.0
            )
            for cell in CellGrid(cfg.side_m).block(lon, lat):
                await observer.publish(topics.peer_cell(cell), encode(req), qos=0)
        for _ in range(100):
            if len(got) >= 30:
                break
            await asyncio.sleep(0.05)
        await stop(task)
        assert len(got) == 30
        assert len(set(got)) == 1
        assert got[0] != (lon, lat)


@pytest.mark.timeout(90)
@pytest.mark.mosquitto
async def test_connection_rotates_with_the_pseudonym(mosquitto_url: str, topics: Topics) -> None:
    """A new pseudonym period: the device reconnects under a fresh client id (what the broker
    saw under the old one no longer links to it), and its queries still work."""
    async with (
        ds_running(mosquitto_url, topics),
        fleet(mosquitto_url, topics, 12, seed=4, pseudonym_ttl_s=1.5) as (clients, where),
    ):
        me = clients[0]
        before = await me.query(NearestQuery(category="cafe", n=1), timeout_s=20)
        # Counted from here: on a slow machine the fleet's start-up alone can outlast a period,
        # and the first query then rotates too.
        rotations, first_id = me.rotations, me.transport.client_id
        seen_pseudonyms = {me.machine.pseudonym(me.clock())}
        await asyncio.sleep(1.6)  # the pseudonym period ends
        after = await me.query(NearestQuery(category="cafe", n=1), timeout_s=20)
        seen_pseudonyms.add(me.machine.pseudonym(me.clock()))
        assert len(seen_pseudonyms) == 2
        assert me.rotations == rotations + 1 and me.transport.client_id != first_id
        lon, lat = where[0]
        exact = refine(POIS, NearestQuery(category="cafe", n=1), lon=lon, lat=lat)
        assert list(before.pois) == list(after.pois) == exact
