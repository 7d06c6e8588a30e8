"""Standing fuzz test: thousands of seeded hostile payloads at every request topic of running
services on mosquitto. No crash, no wedge, an answer for every request with a usable
``reply_to``, nothing published outside the reply, error and status namespaces (and the
mediator's DS hop), and the services' state bounded afterwards."""

from __future__ import annotations

import asyncio
import os
from collections import Counter

import pytest
from _svc_helpers import Spy, make_config, running, seed_population

from locpriv.config import CloakSection, TilesSection
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from locpriv.transport import connect
from locpriv.wire.topics import Topics
from simulators.hostile import fuzz_cases, stray_topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(240)]

CASES = int(os.environ.get("LOCPRIV_FUZZ_CASES", "3000"))


@pytest.mark.asyncio
@pytest.mark.parametrize("side_m", [0.0, 1000.0], ids=["one-tile", "tiles"])
async def test_fuzzed_requests_on_mosquitto(
    mosquitto_url: str, topics: Topics, side_m: float
) -> None:
    """With tiles, 10 % of the requests also travel on a wrong or malformed tile segment."""
    config = make_config(topics, max_queue=100_000).model_copy(
        update={
            "cloak": CloakSection(
                epoch_s=0.2, default_k=3, default_max_delay_s=1.0, max_delay_s_bound=2.0
            ),
            "tiles": TilesSection(side_m=side_m),
        }
    )
    anonymizer, ds = AnonymizerService(mosquitto_url, config), DSService(mosquitto_url, config)
    tile_of = anonymizer.machine.anonymizer.tile_at if side_m else None  # type: ignore[attr-defined]
    cases = list(fuzz_cases(topics, CASES, seed=7, tile_of=tile_of))
    expected = Counter(c.expect_reply for c in cases if c.expect_reply is not None)
    sent = Counter(c.topic for c in cases)
    async with running(anonymizer, ds), Spy(mosquitto_url, f"{topics.root}/#") as spy:
        sent.update(await seed_population(mosquitto_url, topics, n=30, tile_of=tile_of))
        async with connect(mosquitto_url) as t:
            for case in cases:
                await t.publish(case.topic, case.payload)
        async with asyncio.timeout(120):
            while True:
                got = Counter(m.topic for m in spy.seen if m.topic in expected)
                if all(got[topic] >= 1 for topic in expected):
                    break
                await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # late duplicates would show below
        seen = Counter(m.topic for m in spy.seen)
        for service in (anonymizer, ds):
            assert service.connected and service.stats["internal"] == 0
            assert service.stats["publish_failed"] == 0
        assert stray_topics(topics, seen, sent) == []
        unexpected = [
            t
            for t in seen
            if t.startswith(topics.reply_prefix)
            and t not in expected
            and t != topics.reply(config.mqtt.client_id)
        ]
        assert unexpected == []
        # every request answered once (the mediator's own DS replies aside)
        assert all(seen[topic] == n for topic, n in expected.items())
        if side_m:  # the wrong tile segments were refused as such, with a reason
            refused = [
                m
                for m in spy.seen
                if m.topic in expected and b'"field":"tile"' in m.payload.replace(b" ", b"")
            ]
            assert len(refused) >= CASES // 100, len(refused)
        # nothing piles up: no request left pending, caches bounded
        async with asyncio.timeout(10):
            while anonymizer.machine.pending:  # type: ignore[attr-defined]
                await asyncio.sleep(0.1)
        assert len(anonymizer.dispatcher._route_cache) <= 100_000
        assert len(anonymizer.machine.anonymizer.cloakers) <= 30 + 50 + 1  # type: ignore[attr-defined]
    assert sum(expected.values()) > CASES // 3
