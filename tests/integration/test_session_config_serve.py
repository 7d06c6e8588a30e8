"""The [cloak] session keys through ``locpriv serve`` as a process: a bad value stops the
service at start naming the key; with the keys set, a user's successive session cloaks keep k
of the same users (the intersection attack on the regions the real service returns)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import shapely
from _svc_helpers import PROJ, serve_process

from locpriv.client import Client
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

SESSION_KEYS = """
[cloak]
epoch_s = 0.2
session_candidate_factor = 2
session_pool_factor = 2
session_shrink_requests = 2
session_horizon_s = 300.0
session_keep_bystanders = true
session_speed_m_s = 2.0
session_slack = 1
session_drift_m_s = 0.5
session_floor_m = 5.0
session_adopt = true
"""


@pytest.mark.parametrize("bad", ["session_rekey_factor = -1.0", "session_slack = -1"])
def test_a_bad_session_key_stops_the_service_naming_it(tmp_path: Path, bad: str) -> None:
    toml = tmp_path / "locpriv.toml"
    toml.write_text(f"[cloak]\n{bad}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "locpriv", "serve", "anonymizer", "--config", str(toml)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert f"cloak.{bad.split(maxsplit=1)[0]}" in proc.stderr + proc.stdout


@pytest.mark.asyncio
@pytest.mark.mosquitto
async def test_session_cloaks_from_the_served_config_keep_k(
    mosquitto_url: str, topics: Topics, tmp_path: Path
) -> None:
    toml = tmp_path / "locpriv.toml"
    toml.write_text(f'prefix = "{topics.prefix}"\n{SESSION_KEYS}')
    async with serve_process(mosquitto_url, "all", toml, banner=b"serving ds, anonymizer"):
        # twelve users 40-400 m apart; the attacker knows where each is
        xy = [(40.0 * i * (-1) ** i, 30.0 * (i % 4)) for i in range(12)]
        async with AsyncExitStack() as stack:
            users = [
                await stack.enter_async_context(
                    Client(mosquitto_url, user_id=f"u{i}", prefix=topics.prefix)
                )
                for i in range(len(xy))
            ]
            for user, (x, y) in zip(users, xy, strict=True):
                lon, lat = PROJ.point_to_lonlat(x, y)
                await user.update_location(lon=lon, lat=lat)
            await asyncio.sleep(0.6)  # past the next snapshot epoch
            left: set[int] | None = None
            for _ in range(4):
                cloak = await users[0].cloak(
                    k=3, a_min_m2=1e3, a_max_m2=5e7, max_delay_s=2.0, session_s=600.0
                )
                region = PROJ.geometry_to_xy(cloak.region)
                inside = {
                    i for i, (x, y) in enumerate(xy) if shapely.covers(region, shapely.Point(x, y))
                }
                assert 0 in inside and len(inside) >= 3
                left = inside if left is None else left & inside
                await asyncio.sleep(0.3)
            assert left is not None and len(left) >= 3
