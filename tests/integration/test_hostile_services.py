"""Running services against hostile messages: nothing stops, wedges or silences them, and they
publish only in the reply and error namespaces (both brokers)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from _svc_helpers import PROJ, Spy, make_config, running, seed_population
from test_hostile_input import BAD_REPLY_TO, HOSTILE

from locpriv.errors import ErrorCode
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from locpriv.transport import Received, connect
from locpriv.wire.messages import CloakReply, ErrorReply, QueryAnswer, decode
from locpriv.wire.topics import Topics, matches
from simulators.hostile import stray_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

LON, LAT = PROJ.point_to_lonlat(100.0, -50.0)


def _cloak(reply_to: str, cid: str) -> bytes:
    return json.dumps(
        {
            "type": "cloak_request",
            "correlation_id": cid,
            "reply_to": reply_to,
            "user_id": "bob",
            "lat": LAT,
            "lon": LON,
            "profile": {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 3},
        },
        ensure_ascii=True,
    ).encode("utf-8", "surrogatepass")


def _query(reply_to: str, cid: str, protocol: int) -> bytes:
    return json.dumps(
        {
            "type": "query_request",
            "correlation_id": cid,
            "reply_to": reply_to,
            "user_id": "bob",
            "protocol": protocol,
            "lat": LAT,
            "lon": LON,
            "query": {"kind": "nearest", "category": "cafe", "n": 1},
        }
    ).encode("utf-8", "surrogatepass")


def _ds(reply_to: str, cid: str) -> bytes:
    return json.dumps(
        {
            "type": "ds_query",
            "correlation_id": cid,
            "reply_to": reply_to,
            "query": {"kind": "nearest", "category": "cafe", "n": 1},
            "location": {"kind": "point", "lat": LAT, "lon": LON},
        }
    ).encode("utf-8", "surrogatepass")


def _stray(topics: Topics, seen: list[Received], sent: Counter[str]) -> list[str]:
    return stray_topics(topics, Counter(m.topic for m in seen), sent)


async def _answered(url: str, topics: Topics, cid: str) -> None:
    """A valid cloak request with reply topic ``reply/probe`` is answered with a region."""
    reply_to = topics.reply("probe")
    async with connect(url) as t:
        await t.subscribe(reply_to)
        await t.publish(topics.p3_cloak("bob"), _cloak(reply_to, cid))
        async with asyncio.timeout(10):
            async for msg in t.messages():
                if msg.topic != reply_to:  # amqtt 0.12 also sends other clients' retained
                    continue
                reply = decode(msg.payload)
                if getattr(reply, "correlation_id", None) == cid:
                    assert isinstance(reply, CloakReply), reply
                    return


@pytest.mark.asyncio
async def test_hostile_payloads_on_every_topic_stop_nothing(
    broker_url: str, topics: Topics
) -> None:
    config = make_config(topics)
    anonymizer, ds = AnonymizerService(broker_url, config), DSService(broker_url, config)
    targets = [
        topics.location("u1"),
        topics.p1_query("bob"),
        topics.p2_query("bob"),
        topics.p3_cloak("bob"),
        topics.ds_query,
        topics.svc_ds_query,  # DS's service lane
        topics.svc_reply(config.mqtt.client_id),  # the mediator's own DS reply topic
    ]
    async with running(anonymizer, ds), Spy(broker_url, f"{topics.root}/#") as spy:
        await seed_population(broker_url, topics, n=30)
        sent: Counter[str] = Counter(topics.location(f"u{i}") for i in range(30))
        async with connect(broker_url) as t:
            for topic in targets:
                for _, payload, _ in HOSTILE:
                    await t.publish(topic, payload)
                    sent[topic] += 1
        await _answered(broker_url, topics, "after-hostile")
        sent[topics.p3_cloak("bob")] += 1
        rejected = anonymizer.stats["rejected"] + ds.stats["rejected"]
        assert rejected >= len(HOSTILE) * (len(targets) - 1)
        assert anonymizer.stats["internal"] == ds.stats["internal"] == 0
        assert _stray(topics, spy.seen, sent) == []


@pytest.mark.asyncio
async def test_bad_reply_to_is_answered_on_the_error_topic_only(
    broker_url: str, topics: Topics
) -> None:
    config = make_config(topics)
    anonymizer, ds = AnonymizerService(broker_url, config), DSService(broker_url, config)
    bad = [b.replace("city/", f"{topics.prefix}/", 1) for b in BAD_REPLY_TO]
    requests = []
    for i, reply_to in enumerate(bad):
        requests += [
            (topics.p3_cloak("bob"), _cloak(reply_to, f"c{i}"), "anonymizer"),
            (topics.p1_query("bob"), _query(reply_to, f"q{i}", 1), "anonymizer"),
            (topics.p2_query("bob"), _query(reply_to, f"r{i}", 2), "anonymizer"),
            (topics.ds_query, _ds(reply_to, f"d{i}"), "ds"),
            (topics.svc_ds_query, _ds(reply_to, f"e{i}"), "ds"),
        ]
    # finding 3: sixteen lone surrogates used to kill the sixteen publisher tasks
    surrogate = f"{topics.reply_prefix}\ud800"
    requests += [
        (topics.p3_cloak("bob"), _cloak(surrogate, f"s{i}"), "anonymizer") for i in range(40)
    ]
    async with running(anonymizer, ds), Spy(broker_url, f"{topics.root}/#") as spy:
        await seed_population(broker_url, topics, n=30)
        sent: Counter[str] = Counter(topics.location(f"u{i}") for i in range(30))
        async with connect(broker_url) as t:
            for topic, payload, _ in requests:
                await t.publish(topic, payload)
                sent[topic] += 1
        await _answered(broker_url, topics, "after-bad-reply-to")
        sent[topics.p3_cloak("bob")] += 1
        errors = Counter(
            (m.topic.rsplit("/", 1)[1], getattr(decode(m.payload), "correlation_id", None))
            for m in spy.seen
            if matches(topics.errors_filter, m.topic)
        )
        expected: Counter[tuple[str, str | None]] = Counter()
        for _, payload, service in requests:
            # a lone surrogate escape is not JSON the parser accepts, but the correlation id
            # before it is read all the same (docs/protocol.md, "Errors")
            expected[(service, json.loads(payload)["correlation_id"])] += 1
        assert errors == expected
        for m in spy.seen:
            if matches(topics.errors_filter, m.topic):
                err = decode(m.payload)
                assert isinstance(err, ErrorReply)
                assert err.code in (ErrorCode.INVALID_FIELD, ErrorCode.MALFORMED)
        assert _stray(topics, spy.seen, sent) == []
        assert all(
            m.topic in (topics.reply("probe"), topics.svc_reply(config.mqtt.client_id))
            for m in spy.seen
            if m.topic.startswith(topics.reply_prefix)
        )
        assert anonymizer.stats["publish_failed"] == 0


@pytest.mark.asyncio
async def test_p2_answer_still_relayed_after_hostile_ds_replies(
    broker_url: str, topics: Topics
) -> None:
    """Forged and garbled answers on the mediator's reply topic are dropped; real ones pass."""
    from locpriv.client import Client
    from locpriv.wire.messages import NearestQuery

    config = make_config(topics)
    anonymizer, ds = AnonymizerService(broker_url, config), DSService(broker_url, config)
    async with running(anonymizer, ds):
        async with connect(broker_url) as t:
            forged = QueryAnswer(correlation_id="s1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", pois=[])
            await t.publish(
                topics.svc_reply(config.mqtt.client_id), forged.model_dump_json().encode()
            )
            for _, payload, _ in HOSTILE:
                await t.publish(topics.svc_reply(config.mqtt.client_id), payload)
        async with Client(broker_url, user_id="bob", prefix=topics.prefix) as bob:
            answer = await bob.query(
                NearestQuery(category="cafe", n=2), protocol=2, lat=LAT, lon=LON
            )
        assert len(answer.pois) == 2
