"""``locpriv serve`` as a process: serves P2 on mosquitto, exits cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from _svc_helpers import PROJ, serve_process

from locpriv.client import Client
from locpriv.transport import connect
from locpriv.wire.messages import NearestQuery
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.mark.asyncio
@pytest.mark.mosquitto
async def test_serve_all_then_sigterm(mosquitto_url: str, topics: Topics, tmp_path: Path) -> None:
    toml = tmp_path / "locpriv.toml"
    toml.write_text(f'prefix = "{topics.prefix}"\n')
    async with serve_process(mosquitto_url, "all", toml, banner=b"serving ds, anonymizer") as proc:
        lon, lat = PROJ.point_to_lonlat(0.0, 0.0)
        async with Client(mosquitto_url, user_id="fay", prefix=topics.prefix) as fay:
            answer = await fay.query(
                NearestQuery(category="atm", n=2), protocol=2, lat=lat, lon=lon
            )
        assert len(answer.pois) == 2
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            code = await proc.wait()
        assert code == 0
        async with connect(mosquitto_url) as t:
            await t.subscribe(topics.status("anonymizer"))
            async with asyncio.timeout(5):
                async for msg in t.messages():
                    assert msg.payload == b"offline"
                    break
