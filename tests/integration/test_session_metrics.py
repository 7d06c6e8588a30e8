"""What session cloaks did, exported by a running anonymizer: after a user's session requests
over a real broker, ``/metrics`` counts every answered session region once, by the margins it
was built from, and the events (short sets, audit drops, re-keys) equal the cloakers' own
counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _svc_helpers import PROJ, make_config, running, seed_population

from locpriv.client import Client
from locpriv.service.anonymizer import AnonymizerService
from locpriv.wire.topics import Topics
from simulators.scrape import metric, scrape

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.mark.asyncio
async def test_session_regions_are_exported_by_their_margins(
    broker_url: str, topics: Topics, tmp_path: Path
) -> None:
    anonymizer = AnonymizerService(broker_url, make_config(topics), metrics_port=0)
    async with running(anonymizer):
        await seed_population(broker_url, topics, n=60)
        async with Client(broker_url, user_id="alice", prefix=topics.prefix) as alice:
            lon, lat = PROJ.point_to_lonlat(10.0, -20.0)
            await alice.update_location(lon=lon, lat=lat)
            await asyncio.sleep(0.5)  # past the next snapshot epoch
            answered = 0
            for _ in range(5):
                await alice.cloak(k=3, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=2.0, session_s=600.0)
                answered += 1
                await asyncio.sleep(0.3)
        assert anonymizer.metrics_port
        samples = await asyncio.to_thread(scrape, anonymizer.metrics_port)
    counts = anonymizer.machine.session_counts()  # type: ignore[attr-defined]
    by = {
        m: metric(samples, "locpriv_session_regions_total", service="anonymizer", margins=m)
        for m in ("thin", "worst_case")
    }
    # every answered session cloak is counted once (the first one too), by its margins
    assert by["thin"] + by["worst_case"] == answered
    assert by == {m: counts.get(m, 0) for m in ("thin", "worst_case")}
    for event in ("short", "audit_dropped", "rekeys"):
        exported = metric(
            samples, "locpriv_session_events_total", service="anonymizer", event=event
        )
        assert exported == counts.get(event, 0)
    # a fresh population with no fix older than the request: nothing to audit or re-key
    assert counts.get("rekeys", 0) == 0
