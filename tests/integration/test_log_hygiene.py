"""No user id or raw coordinate reaches the logs above DEBUG (services, client, transport)."""

from __future__ import annotations

import logging

import pytest
from _svc_helpers import PROJ, make_config, running, seed_population, wait_until

from locpriv.client import Client
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from locpriv.wire.messages import NearestQuery
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

SECRET_ID = "zelda-7f3a9"


@pytest.mark.asyncio
async def test_no_user_id_or_coordinates_above_debug(
    broker_url: str, topics: Topics, caplog: pytest.LogCaptureFixture
) -> None:
    lon, lat = PROJ.point_to_lonlat(217.0, -143.0)
    caplog.set_level(logging.DEBUG)
    config = make_config(topics)
    anonymizer = AnonymizerService(broker_url, config)
    async with running(anonymizer, DSService(broker_url, config)):
        await seed_population(broker_url, topics)
        async with Client(broker_url, user_id=SECRET_ID, prefix=topics.prefix) as c:
            await c.update_location(lat=lat, lon=lon)
            await c.query(NearestQuery(category="cafe", n=2), protocol=2)
            await c.query(
                NearestQuery(category="cafe", n=2),
                protocol=1,
                k=3,
                a_min_m2=1e4,
                a_max_m2=5e7,
                max_delay_s=3,
            )
            # a malformed request from this user is logged by the service as a rejection
            rejected = anonymizer.stats["rejected"]
            await c._transport.publish(
                topics.p2_query(SECRET_ID), f'{{"user_id":"{SECRET_ID}"'.encode()
            )
            await wait_until(lambda: anonymizer.stats["rejected"] > rejected)
    ours = [r for r in caplog.records if r.name.startswith("locpriv")]
    # a coordinate printed with 3 or more decimals, whatever its format, contains these
    needles = [SECRET_ID, *(f"{v:.6f}"[:-3] for v in (lat, lon))]
    assert any(r.levelno >= logging.INFO for r in ours), "services log nothing at INFO?"
    leaks = [
        r.getMessage()
        for r in ours
        if r.levelno > logging.DEBUG and any(x in r.getMessage() for x in needles)
    ]
    assert leaks == []
