"""Fix requests between a running anonymizer and apps, on a real broker (embedded amqtt and
mosquitto): the anonymizer asks a session's members whose reports are old for fresh ones, the
apps answer with their ``position_source``, and nothing an app's source does (fail, give
nothing) or a flood of requests on its topic stops the app or the anonymizer."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest
from _svc_helpers import PROJ, running

from locpriv.client import Client
from locpriv.config import CloakSection, LimitsSection, MqttSection, ServiceConfig
from locpriv.core.geo import LonLat
from locpriv.service.anonymizer import AnonymizerService
from locpriv.transport import connect
from locpriv.wire.messages import FixWanted, encode
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

PROFILE = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 3.0, "session_s": 600.0}


def _config(topics: Topics) -> ServiceConfig:
    return ServiceConfig(
        prefix=topics.prefix,
        cloak=CloakSection(epoch_s=0.2, session_fresh_s=1.0, session_fix_wait_s=1.0),
        limits=LimitsSection(),
        mqtt=MqttSection(client_id=f"{topics.prefix}-anon", backoff_max_s=0.5),
    )


@pytest.mark.asyncio
async def test_members_answer_and_a_failing_source_harms_nothing(
    broker_url: str, topics: Topics
) -> None:
    anonymizer = AnonymizerService(broker_url, _config(topics))
    here = {f"m{i}": PROJ.point_to_lonlat(20.0 * i, 10.0 * (i % 2)) for i in range(6)}
    calls: dict[str, int] = dict.fromkeys(here, 0)

    def source(user: str) -> LonLat | None:
        calls[user] += 1
        if user == "m1":
            raise RuntimeError("no GPS")  # the app's source fails
        if user == "m2":
            return None  # the app declines
        return LonLat(*here[user])

    async with running(anonymizer), AsyncExitStack() as stack:
        members = {
            u: await stack.enter_async_context(
                Client(
                    broker_url,
                    user_id=u,
                    prefix=topics.prefix,
                    position_source=lambda u=u: source(u),  # type: ignore[misc]
                )
            )
            for u in here
        }
        alice = await stack.enter_async_context(
            Client(broker_url, user_id="alice", prefix=topics.prefix)
        )
        for u, c in members.items():
            await c.update_location(lon=here[u][0], lat=here[u][1])
        lon, lat = PROJ.point_to_lonlat(30.0, 5.0)
        await alice.update_location(lon=lon, lat=lat)
        await asyncio.sleep(0.5)  # past the next snapshot epoch
        await alice.cloak(**PROFILE)  # type: ignore[arg-type]
        await asyncio.sleep(1.5)  # the members' reports are now older than session_fresh_s
        for _ in range(3):
            cloak = await alice.cloak(lon=lon, lat=lat, **PROFILE)  # type: ignore[arg-type]
            assert cloak.users >= 3
            await asyncio.sleep(1.2)
        counts = anonymizer.machine.session_counts()  # type: ignore[attr-defined]
        assert counts.get("fix_asked", 0) >= 3 and counts.get("fix_waits", 0) >= 1
        asked = {u for u, n in calls.items() if n}
        assert asked, "the anonymizer asked the members"
        answered = {u for u, c in members.items() if c.fixes_sent}
        assert answered == asked - {"m1", "m2"}
        assert members["m1"].fixes_sent == members["m2"].fixes_sent == 0
        # a flood on m0's fix topic (these test brokers have no ACL): m0 answers at most one
        # per second, and her client keeps working
        before = members["m0"].fixes_sent
        async with connect(broker_url) as t:
            for _ in range(50):
                await t.publish(topics.fix_wanted("m0"), encode(FixWanted(within_s=1.0)))
        await asyncio.sleep(1.0)
        assert 1 <= members["m0"].fixes_sent - before <= 2  # the flood arrived, one answered
        await members["m0"].update_location(lon=here["m0"][0], lat=here["m0"][1])
        # the anonymizer still answers after all that
        assert (await alice.cloak(lon=lon, lat=lat, **PROFILE)).users >= 3  # type: ignore[arg-type]
