"""What session cloaks did, exported by a running anonymizer: after a user's session requests
over a real broker, ``/metrics`` counts every answered session region once, by the margins it
was built from, and the events (short sets, audit drops, re-keys) equal the cloakers' own
counts."""

from __future__ import annotations

import asyncio

import pytest
from _svc_helpers import PROJ, make_config, running, seed_population

from locpriv.client import Client
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.metrics import SESSION_EVENTS, SESSION_REGIONS, _session_metrics
from locpriv.wire.topics import Topics
from simulators.scrape import metric, scrape

pytestmark = [pytest.mark.timeout(90)]


@pytest.mark.integration
@pytest.mark.asyncio
async def test_session_regions_are_exported_by_their_margins(
    broker_url: str, topics: Topics
) -> None:
    anonymizer = AnonymizerService(broker_url, make_config(topics), metrics_port=0)
    async with running(anonymizer):
        await seed_population(broker_url, topics, n=60)
        async with Client(broker_url, user_id="alice", prefix=topics.prefix) as alice:
            lon, lat = PROJ.point_to_lonlat(10.0, -20.0)
            await alice.update_location(lon=lon, lat=lat)
            await asyncio.sleep(0.5)  # past the next snapshot epoch
            for _ in range(5):
                await alice.cloak(k=3, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=2.0, session_s=600.0)
                await asyncio.sleep(0.3)
        assert anonymizer.metrics_port
        samples = await asyncio.to_thread(scrape, anonymizer.metrics_port)
    counts = anonymizer.machine.session_counts()  # type: ignore[attr-defined]
    by = {
        m: metric(samples, "locpriv_session_regions_total", service="anonymizer", margins=m)
        for m in SESSION_REGIONS
    }
    # every answered session cloak is counted once (the first one too), by how it was built:
    # regions of tiles at the shipped settings
    assert sum(by.values()) == 5 and by["tiles"] + by["tile_boxes"] == 5
    assert by == {m: counts.get(m, 0) for m in SESSION_REGIONS}
    for event in SESSION_EVENTS:
        name = "locpriv_session_events_total"
        assert metric(samples, name, service="anonymizer", event=event) == counts.get(event, 0)


def test_each_session_count_reaches_its_own_sample() -> None:
    """The events a short live run leaves at 0 (short sets, audit drops, re-keys, sessions
    carried over a restart, fix requests, companions): each count lands on its own label, none
    is lost or swapped."""
    counts = {
        "thin": 7,
        "worst_case": 5,
        "tiles": 11,
        "tile_boxes": 10,
        "short": 3,
        "audit_dropped": 2,
        "rekeys": 1,
        "restored": 4,
        "fix_asked": 9,
        "fix_waits": 6,
        "companions": 8,
    }
    got = {
        (s.name, s.labels.get("margins") or s.labels.get("event")): s.value
        for family in _session_metrics("anonymizer", counts)
        for s in family.samples
        if s.labels["service"] == "anonymizer"
    }
    assert got == {
        ("locpriv_session_regions_total", "thin"): 7,
        ("locpriv_session_regions_total", "worst_case"): 5,
        ("locpriv_session_regions_total", "tiles"): 11,
        ("locpriv_session_regions_total", "tile_boxes"): 10,
        ("locpriv_session_events_total", "short"): 3,
        ("locpriv_session_events_total", "audit_dropped"): 2,
        ("locpriv_session_events_total", "rekeys"): 1,
        ("locpriv_session_events_total", "restored"): 4,
        ("locpriv_session_events_total", "fix_asked"): 9,
        ("locpriv_session_events_total", "fix_waits"): 6,
        ("locpriv_session_events_total", "companions"): 8,
    }
    empty = {s.value for f in _session_metrics("anonymizer", {}) for s in f.samples}
    assert empty == {0.0}  # every label present from the start: rate() needs no gap fill
