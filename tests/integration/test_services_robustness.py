"""Services reject bad messages with error replies and keep serving; survive broker restarts."""

from __future__ import annotations

import asyncio
import json

import pytest
from _svc_helpers import PROJ, make_config, running, seed_population, wait_until

from locpriv.client import Client
from locpriv.errors import ErrorCode, RemoteError
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.broker import MosquittoProcess
from locpriv.service.driver import ServiceDriver
from locpriv.service.ds import DSService
from locpriv.transport import Received, connect
from locpriv.wire.messages import CloakReply, ErrorReply, NearestQuery, decode
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

LON, LAT = PROJ.point_to_lonlat(200.0, 100.0)


async def _collect(t: object, n: int, timeout: float = 5.0) -> list[Received]:
    out: list[Received] = []
    async with asyncio.timeout(timeout):
        async for msg in t.messages():  # type: ignore[attr-defined]
            out.append(msg)
            if len(out) == n:
                break
    return out


def _cloak_request(reply_to: str, cid: str, **extra: object) -> dict[str, object]:
    body: dict[str, object] = {
        "type": "cloak_request",
        "correlation_id": cid,
        "reply_to": reply_to,
        "user_id": "bob",
        "lat": LAT,
        "lon": LON,
        "profile": {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 3},
    }
    body.update(extra)
    return body


@pytest.mark.asyncio
async def test_bad_messages_get_error_replies_and_service_keeps_serving(
    broker_url: str, topics: Topics
) -> None:
    config = make_config(topics)
    anonymizer = AnonymizerService(broker_url, config)
    reply_to = topics.reply("tester")
    errors_topic = topics.errors("anonymizer")
    async with running(anonymizer), connect(broker_url) as t:
        await seed_population(broker_url, topics, n=20)
        await t.subscribe(reply_to)
        await t.subscribe(errors_topic)
        cases: list[tuple[bytes, str, ErrorCode, str | None, str | None]] = [
            (b"\xffnot json{", errors_topic, ErrorCode.MALFORMED, None, None),
            (b"[1, 2]", errors_topic, ErrorCode.MALFORMED, None, None),
            (
                json.dumps(_cloak_request(reply_to, "big", pad="x" * 70_000)).encode(),
                reply_to,
                ErrorCode.TOO_LARGE,
                None,
                "big",
            ),
            (
                json.dumps(_cloak_request(reply_to, "ver", v=99)).encode(),
                reply_to,
                ErrorCode.UNSUPPORTED_VERSION,
                "v",
                "ver",
            ),
            (
                json.dumps(_cloak_request(reply_to, "typ", type="teleport")).encode(),
                reply_to,
                ErrorCode.UNKNOWN_TYPE,
                "type",
                "typ",
            ),
            (
                json.dumps(
                    {
                        "type": "query_request",
                        "correlation_id": "wrong",
                        "reply_to": reply_to,
                        "user_id": "bob",
                        "protocol": 2,
                        "lat": LAT,
                        "lon": LON,
                        "query": {"kind": "nearest", "category": "cafe", "n": 1},
                    }
                ).encode(),
                reply_to,
                ErrorCode.WRONG_TYPE,
                "type",
                "wrong",
            ),
            (
                json.dumps(
                    _cloak_request(reply_to, "fld", profile={"k": 0, "a_min_m2": 1, "a_max_m2": 2})
                ).encode(),
                reply_to,
                ErrorCode.INVALID_FIELD,
                "profile.k",
                "fld",
            ),
            (
                json.dumps(
                    _cloak_request(
                        reply_to, "bnd", profile={"k": 5000, "a_min_m2": 1, "a_max_m2": 2}
                    )
                ).encode(),
                reply_to,
                ErrorCode.BAD_PARAMETERS,
                "profile.k",
                "bnd",
            ),
        ]
        for payload, *_ in cases:
            await t.publish(topics.p3_cloak("bob"), payload)
        got = await _collect(t, len(cases))
        by_key = {}
        for msg in got:
            err = decode(msg.payload)
            assert isinstance(err, ErrorReply)
            assert err.reason
            by_key[(msg.topic, err.code, err.correlation_id)] = err
        for _, topic, code, field, cid in cases:
            err = by_key[(topic, code, cid)]
            assert err.field == field
        # the service is still serving: a valid request afterwards is answered
        await t.publish(topics.p3_cloak("bob"), json.dumps(_cloak_request(reply_to, "ok")).encode())
        (answer,) = await _collect(t, 1)
        reply = decode(answer.payload)
        assert isinstance(reply, CloakReply) and reply.correlation_id == "ok"
        assert reply.users >= 3


@pytest.mark.asyncio
@pytest.mark.mosquitto
async def test_queued_while_away_delivered_and_overflow_answered_overloaded(
    mosquitto_url: str, topics: Topics
) -> None:
    """Requests sent while the service is down wait in its persistent session; on return they
    arrive in a burst larger than its queue: each one is answered, the excess ``overloaded``."""
    config = make_config(topics, max_queue=4)
    reply_to = topics.reply("flood")
    async with running(AnonymizerService(mosquitto_url, config)):
        pass  # creates the persistent session and its subscriptions, then goes away
    async with connect(mosquitto_url) as t:
        await t.subscribe(reply_to)
        n = 300
        for i in range(n):
            body = _cloak_request(reply_to, f"c{i}", user_id=f"f{i}")
            body["profile"] = {"k": 2, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 0}
            await t.publish(topics.p3_cloak(f"f{i}"), json.dumps(body).encode())
        anonymizer = AnonymizerService(mosquitto_url, config)
        async with running(anonymizer):
            got = await _collect(t, n, timeout=30)
        replies = [decode(m.payload) for m in got]
        codes = [r.code if isinstance(r, ErrorReply) else "answered" for r in replies]
        assert len({getattr(r, "correlation_id", None) for r in replies}) == n
        assert ErrorCode.OVERLOADED in codes
        assert anonymizer.stats["overloaded"] == codes.count(ErrorCode.OVERLOADED)
        assert anonymizer.stats["overloaded"] < n


async def _wait_serving(*services: ServiceDriver, reconnected: bool = True) -> None:
    async with asyncio.timeout(15):
        while not all(s.connected and (s.reconnects > 0 or not reconnected) for s in services):
            await asyncio.sleep(0.05)


@pytest.mark.asyncio
@pytest.mark.mosquitto
async def test_broker_restart_reconnect_resubscribe(
    mosquitto: MosquittoProcess, topics: Topics
) -> None:
    url = mosquitto.url
    config = make_config(topics)
    anonymizer, ds = AnonymizerService(url, config), DSService(url, config)
    query = NearestQuery(category="pharmacy", n=2)
    async with running(anonymizer, ds):
        async with Client(url, user_id="carol", prefix=topics.prefix) as carol:
            before = await carol.query(query, protocol=2, lat=LAT, lon=LON)
        mosquitto.stop()
        await wait_until(lambda: not anonymizer.connected and not ds.connected)
        mosquitto.start()
        await _wait_serving(anonymizer, ds)
        async with Client(url, user_id="carol", prefix=topics.prefix) as carol:
            after = await carol.query(query, protocol=2, lat=LAT, lon=LON)
            # and the retained status was re-published after the restart
            async with connect(url) as t:
                await t.subscribe(topics.status("anonymizer"))
                (status,) = await _collect(t, 1)
                assert status.payload == b"online"
        assert [p.id for p in after.pois] == [p.id for p in before.pois]


@pytest.mark.asyncio
async def test_pending_requests_answered_unavailable_on_shutdown(
    amqtt_url: str, topics: Topics
) -> None:
    config = make_config(topics)
    anonymizer = AnonymizerService(amqtt_url, config)  # no DS: P2 queries stay pending
    async with Client(amqtt_url, user_id="dave", prefix=topics.prefix) as dave:
        async with running(anonymizer):
            pending = asyncio.create_task(
                dave.query(NearestQuery(category="atm", n=1), protocol=2, lat=LAT, lon=LON)
            )
            async with asyncio.timeout(5):
                while anonymizer.machine.mediator.pending == 0:  # type: ignore[attr-defined]
                    await asyncio.sleep(0.02)
        with pytest.raises(RemoteError) as info:
            await pending
        assert info.value.code == ErrorCode.UNAVAILABLE


@pytest.mark.asyncio
async def test_temporal_cloak_completes_or_times_out_via_service_timer(
    amqtt_url: str, topics: Topics
) -> None:
    from locpriv.errors import CloakTimeout

    config = make_config(topics)
    anonymizer = AnonymizerService(amqtt_url, config)
    async with running(anonymizer):
        await seed_population(amqtt_url, topics, n=3)
        async with Client(amqtt_url, user_id="gus", prefix=topics.prefix) as gus:
            await gus.update_location(lat=LAT, lon=LON)
            # 4 users known, k=6: pending until two more users show up in a later epoch
            waiting = asyncio.create_task(gus.cloak(k=6, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=4))
            await wait_until(lambda: anonymizer.machine.anonymizer.pending >= 1)  # type: ignore[attr-defined]
            assert not waiting.done()
            await seed_population(amqtt_url, topics, n=6, seed=2)
            cloak = await waiting
            assert cloak.users is not None and cloak.users >= 6
            # k beyond the population: the timer answers cloak_timeout after max_delay_s
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            with pytest.raises(CloakTimeout) as info:
                await gus.cloak(k=50, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=1.0)
            assert info.value.code == ErrorCode.CLOAK_TIMEOUT
            assert 0.9 <= loop.time() - t0 < 5.0
