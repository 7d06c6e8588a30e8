"""The shipped anonymizer unit with the shipped ``locpriv.toml`` keeps its sessions over a
restart, clean (SIGTERM, what ``systemctl restart`` sends) or a crash (SIGKILL, what an OOM kill
does): it writes ``[state] sessions_file`` into its StateDirectory, sealed and private, before
its answers; the next start reads it and goes on with the session (its set keeps k users
across the restart)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import shapely
from _deploy import app, build, locpriv_paths, start_mosquitto, start_unit, stop_deployment

from locpriv.config import load_config
from locpriv.core.geo import LocalProjection
from locpriv.core.noise import offset_lonlat

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(240)]

USERS = ("alice", "bob", "carol", "dave", "erin", "fay")
PROFILE = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 5.0, "session_s": 600.0}


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
async def test_the_anonymizer_unit_keeps_its_sessions_over_a_restart(how: str) -> None:
    from conftest import _require_mosquitto

    _require_mosquitto()
    shipped = load_config(Path(__file__).resolve().parents[2] / "deploy" / "locpriv.toml")
    assert shipped.state.sessions_file == "/var/lib/locpriv/sessions.bin"
    proj = LocalProjection(shipped.projection.lat0_deg, shipped.projection.lon0_deg)
    dep = build(Path(tempfile.gettempdir()))
    broker = start_mosquitto(dep)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        paths = locpriv_paths(dep)
        unit = "locpriv-anonymizer.service"
        procs.append(start_unit(dep, unit, "locpriv-anonymizer", paths, name="anon1"))
        rng = np.random.default_rng(8)
        home = proj.point_to_lonlat(300.0, 200.0)
        lonlat = {u: offset_lonlat(*home, *rng.uniform(-150, 150, 2)) for u in USERS}
        xy = {u: proj.point_to_xy(*lonlat[u]) for u in USERS}

        async def ask(times: int) -> list[set[str]]:
            for user in USERS[1:]:
                async with app(dep, user) as c:
                    await c.update_location(lon=lonlat[user][0], lat=lonlat[user][1])
            seen = []
            async with app(dep, "alice") as alice:
                await alice.update_location(lon=lonlat["alice"][0], lat=lonlat["alice"][1])
                await asyncio.sleep(1.5)  # past the next snapshot epoch (epoch_s = 1)
                for _ in range(times):
                    cloak = await alice.cloak(**PROFILE)  # type: ignore[arg-type]
                    region = proj.geometry_to_xy(cloak.region)
                    seen.append({u for u, p in xy.items() if region.covers(shapely.Point(p))})
            return seen

        regions = await ask(2)
        procs[0].send_signal(getattr(signal, how))
        assert procs[0].wait(30) == (0 if how == "SIGTERM" else -9)
        saved = dep.root / "var-lib-locpriv" / "sessions.bin"
        assert saved.exists() and saved.stat().st_mode & 0o777 == 0o600
        raw = saved.read_bytes()
        assert not any(u.encode() in raw for u in USERS)  # sealed
        procs.append(start_unit(dep, unit, "locpriv-anonymizer", paths, name="anon2"))
        regions += await ask(2)
        assert saved.read_bytes() != raw  # written again before the new answers
        assert "went on with 1 sessions" in (dep.root / "anon2.err").read_text()
        left = set.intersection(*regions)
        assert "alice" in left and len(left) >= 3, regions
    finally:
        stop_deployment(dep, procs, broker)
