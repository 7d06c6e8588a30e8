"""Client library against services on the in-process memory bus (no broker), and its errors."""

from __future__ import annotations

import uuid

import pytest
from _svc_helpers import PROJ, make_config, running, wait_until

from locpriv.client import Client
from locpriv.errors import (
    CloakInfeasible,
    ErrorCode,
    LocalProtocolError,
    RemoteError,
    RequestTimeout,
)
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from locpriv.transport import connect
from locpriv.wire.messages import LocationUpdate, NearestQuery, WithinQuery, encode
from locpriv.wire.topics import Topics

pytestmark = pytest.mark.timeout(60)


async def _seed(url: str, topics: Topics, n: int) -> None:
    async with connect(url) as t:
        for i in range(n):
            lon, lat = PROJ.point_to_lonlat(100.0 * i, -50.0 * i)
            msg = LocationUpdate(user_id=f"m{i}", lat=lat, lon=lon, t=0.0)
            await t.publish(topics.location(f"m{i}"), encode(msg))


@pytest.mark.asyncio
async def test_client_on_memory_bus(topics: Topics) -> None:
    url = f"memory://{uuid.uuid4().hex}"
    config = make_config(topics)
    anonymizer = AnonymizerService(url, config)
    async with running(anonymizer, DSService(url, config)):
        await _seed(url, topics, 12)
        await wait_until(lambda: len(anonymizer.machine.anonymizer.cloakers) >= 12)  # type: ignore[attr-defined]
        lon, lat = PROJ.point_to_lonlat(150.0, -80.0)
        async with Client(url, user_id="hana", prefix=topics.prefix, timeout_s=5) as hana:
            with pytest.raises(LocalProtocolError):
                await hana.query(NearestQuery(category="cafe", n=1), protocol=2)
            with pytest.raises(LocalProtocolError):
                await hana.cloak(k=3)  # no default profile: the whole window is needed
            await hana.update_location(lat=lat, lon=lon)
            assert hana.position == (lon, lat)
            cloak = await hana.cloak(k=3, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=2)
            assert cloak.users is not None and cloak.users >= 3
            query = WithinQuery(category="pharmacy", radius_m=1500.0)
            p1 = await hana.query(query, protocol=1, k=3, a_min_m2=1e4, a_max_m2=5e7)
            p2 = await hana.query(query, protocol=2)
            p3 = await hana.query(query, protocol=3, k=3, a_min_m2=1e4, a_max_m2=5e7)
            assert {p.id for p in p1.pois} == {p.id for p in p2.pois} == {p.id for p in p3.pois}
            assert p1.received >= len(p1.pois) and p1.cloak is not None
            # the area window cannot hold k users: a specific RemoteError subclass
            with pytest.raises(CloakInfeasible) as info:
                await hana.cloak(k=12, a_min_m2=1.0, a_max_m2=2.0, max_delay_s=0)
            assert info.value.code == ErrorCode.CLOAK_INFEASIBLE
            with pytest.raises(RemoteError) as bad:
                await hana.cloak(k=500, a_min_m2=1e4, a_max_m2=5e7)
            assert bad.value.code == ErrorCode.BAD_PARAMETERS


@pytest.mark.asyncio
async def test_request_timeout_without_services(topics: Topics) -> None:
    url = f"memory://{uuid.uuid4().hex}"
    query = NearestQuery(category="atm", n=1)
    kw = {"prefix": topics.prefix, "timeout_s": 0.2, "config_timeout_s": 0.2}
    # no anonymizer ever ran here: no deployment configuration, and the client says so
    async with Client(url, user_id="ivy", **kw) as ivy:
        with pytest.raises(LocalProtocolError, match=f"{topics.config}.*anonymizer running"):
            await ivy.query(query, protocol=2, lat=41.0, lon=2.0)
    # the configuration is retained but no service answers: the request times out
    async with connect(url) as t:
        await t.publish(topics.config, encode(make_config(topics).deployment_config()), retain=True)
    async with Client(url, user_id="ivy", **kw) as ivy:
        with pytest.raises(RequestTimeout):
            await ivy.query(query, protocol=2, lat=41.0, lon=2.0)
