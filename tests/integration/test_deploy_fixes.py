"""Fix requests on the shipped deployment: the anonymizer unit (shipped ``locpriv.toml``) asks
the members of a session whose reports are old for fresh ones on ``fix/<login>``, the apps
answer through :class:`locpriv.client.Client`'s ``position_source``, and the session's next
region is made from where they are now. The shipped ACL lets only the member read her topic
and only the anonymizer write it: another login neither sees the requests nor makes a device
report by forging one."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import numpy as np
import pytest
import shapely
from _deploy import (
    Deployment,
    app,
    build,
    locpriv_paths,
    start_mosquitto,
    start_unit,
    stop_deployment,
)
from test_deploy import watching

from locpriv.config import load_config
from locpriv.core.geo import LocalProjection, LonLat
from locpriv.core.noise import offset_lonlat
from locpriv.transport import connect
from locpriv.wire.messages import FixWanted, encode
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(240)]

MEMBERS = ("bob", "carol", "dave", "erin", "fay")
PROFILE = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 5.0, "session_s": 600.0}
TOPICS = Topics()


@pytest.mark.asyncio
async def test_session_members_report_afresh_when_the_anonymizer_asks() -> None:
    from conftest import _require_mosquitto

    _require_mosquitto()
    shipped = load_config(Path(__file__).resolve().parents[2] / "deploy" / "locpriv.toml")
    fresh_s = shipped.cloak.session_fresh_s
    assert fresh_s > 0 and shipped.cloak.session_fix_wait_s > 0
    proj = LocalProjection(shipped.projection.lat0_deg, shipped.projection.lon0_deg)
    dep = build(Path(tempfile.gettempdir()))
    broker = start_mosquitto(dep)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            start_unit(dep, "locpriv-anonymizer.service", "locpriv-anonymizer",
                       locpriv_paths(dep), name="anon")
        )  # fmt: skip
        rng = np.random.default_rng(3)
        home = proj.point_to_lonlat(300.0, 200.0)
        here = {u: offset_lonlat(*home, *rng.uniform(-150, 150, 2)) for u in ("alice", *MEMBERS)}
        asked: dict[str, int] = dict.fromkeys(MEMBERS, 0)

        def source(user: str) -> LonLat:
            asked[user] += 1
            return LonLat(*here[user])

        mallory_auth = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
        async with AsyncExitStack() as stack:
            apps = {
                u: await stack.enter_async_context(
                    app(dep, u, position_source=lambda u=u: source(u))  # type: ignore[misc]
                )
                for u in MEMBERS
            }
            seen = await stack.enter_async_context(
                watching(dep.app_url("mallory"), [f"{TOPICS.root}/fix/#", "#"], **mallory_auth)
            )
            alice = await stack.enter_async_context(app(dep, "alice"))
            for u, c in apps.items():
                await c.update_location(lon=here[u][0], lat=here[u][1])
            await alice.update_location(lon=here["alice"][0], lat=here["alice"][1])
            await asyncio.sleep(1.5)  # past the next snapshot epoch (epoch_s = 1)
            first = await alice.cloak(**PROFILE)  # type: ignore[arg-type]
            assert first.users >= 3
            assert sum(asked.values()) == 0  # a session's first request asks nobody
            # the members walk 400 m east without reporting; their reports grow old
            old = dict(here)
            for u in MEMBERS:
                here[u] = offset_lonlat(*here[u], 400.0, 0.0)
            here["alice"] = offset_lonlat(*here["alice"], 400.0, 0.0)
            await asyncio.sleep(fresh_s + 1.0)
            second = await alice.cloak(
                lon=here["alice"][0],
                lat=here["alice"][1],
                **PROFILE,  # type: ignore[arg-type]
            )
            region = proj.geometry_to_xy(second.region)

            def inside(p: tuple[float, float]) -> bool:
                return bool(region.covers(shapely.Point(proj.point_to_xy(*p))))

            now_inside = {u for u in MEMBERS if inside(here[u])}
            answered = {u for u, n in asked.items() if n}
            assert answered, "the anonymizer asked the session's members"
            assert all(apps[u].fixes_sent == asked[u] for u in MEMBERS)
            # the region is made from their fresh reports: k - 1 of them are inside it where
            # they are now, none where they last reported on their own, 400 m away
            assert len(now_inside) + 1 >= PROFILE["k"], now_inside
            assert not [u for u in now_inside if inside(old[u])], now_inside
            # mallory forges a fix request to bob: the broker drops it (only the anonymizer
            # writes fix/+), so bob's app does not report
            before = asked["bob"]
            await forge_fix_request(dep, mallory_auth)
            await asyncio.sleep(1.0)
            assert asked["bob"] == before
        # nothing on anyone's fix topic reached mallory, though she subscribed to them all
        # (her "#" did subscribe: the retained config reached her)
        assert TOPICS.config in {m.topic for m in seen}
        assert not [m for m in seen if "/fix/" in m.topic]
    finally:
        stop_deployment(dep, procs, broker)


async def forge_fix_request(dep: Deployment, auth: dict[str, str]) -> None:
    """mallory publishes a FixWanted on bob's fix topic with her own login."""
    async with connect(dep.app_url("mallory"), **auth) as t:
        await t.publish(TOPICS.fix_wanted("bob"), encode(FixWanted(within_s=2.0)))
