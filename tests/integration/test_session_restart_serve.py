"""A session goes on across a restart of ``locpriv serve``, clean (SIGTERM) or a crash
(SIGKILL), real mosquitto, real processes: the intersection attack on the regions the two
processes return, before and after the restart, still finds k users. The sessions file is
written before each answer; with none (``sessions_file`` unset) the session starts afresh
after the restart and the attack narrows it."""

from __future__ import annotations

import asyncio
import secrets
import signal
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import shapely
from _svc_helpers import PROJ, serve_process

from locpriv.client import Client
from locpriv.service.sessions_file import SessionsFile
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(150)]

K = 3
# two groups of six, 400 m apart; the requester u0 is in the first
BEFORE = [(15.0 * (i % 3), 15.0 * (i // 3)) for i in range(6)] + [
    (400.0 + 15.0 * (i % 3), 15.0 * (i // 3)) for i in range(6)
]
# after the restart five of the first group and one of the second stand 4 km away, and the
# other five of the second stand around u0: a fresh set would be those five and u0
AFTER = [(0.0, 0.0)] + [(3000.0 + 15.0 * (i % 3), 3000.0 + 15.0 * (i // 3)) for i in range(1, 6)]
AFTER += [(10.0 + 12.0 * (i % 3), 8.0 + 12.0 * (i // 3)) for i in range(5)] + [(3050.0, 3050.0)]


def _config(tmp_path: Path, topics: Topics, *, keep: bool = True) -> Path:
    key = tmp_path / "token.key"
    key.write_text(secrets.token_hex(32))
    key.chmod(0o600)
    toml = tmp_path / "locpriv.toml"
    kept = f'sessions_file = "{tmp_path / "sessions.bin"}"\n' if keep else ""
    toml.write_text(
        f'prefix = "{topics.prefix}"\n[cloak]\nepoch_s = 0.2\n'
        f'[state]\ntoken_key_file = "{key}"\n{kept}'
    )
    return toml


async def _ask(
    users: list[Client], xy: list[tuple[float, float]], times: int, file: SessionsFile | None
) -> list[set[int]]:
    """Everyone reports ``xy``; u0 asks ``times`` times in one session; the users inside each
    region she gets (the attacker knows every position). With ``file``: when each answer
    arrives, the sessions file already holds the set it was made from (every member inside
    the region, the request counted)."""
    for user, (x, y) in zip(users, xy, strict=True):
        lon, lat = PROJ.point_to_lonlat(x, y)
        await user.update_location(lon=lon, lat=lat)
    await asyncio.sleep(0.6)  # past the next snapshot epoch
    seen = []
    counts: list[int] = []
    for _ in range(times):
        cloak = await users[0].cloak(
            k=K, a_min_m2=1e3, a_max_m2=5e7, max_delay_s=3.0, session_s=600.0
        )
        region = PROJ.geometry_to_xy(cloak.region)
        inside = {i for i, p in enumerate(xy) if shapely.covers(region, shapely.Point(p))}
        assert 0 in inside and len(inside) >= K
        seen.append(inside)
        if file is not None:  # written before the answer was published
            records = file.load()
            assert records is not None
            (mine,) = [r for rs in records.tiles.values() for r in rs if r.user == "u0"]
            assert {int(u[1:]) for u in mine.members} <= inside and len(mine.members) >= K
            counts.append(mine.count)
        await asyncio.sleep(0.3)
    assert counts == sorted(set(counts)) and len(counts) == (times if file else 0)
    return seen


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("how", "keep"), [("SIGTERM", True), ("SIGKILL", True), ("SIGKILL", False)]
)
async def test_a_session_goes_on_across_a_restart_or_a_crash(
    mosquitto_url: str, topics: Topics, tmp_path: Path, how: str, keep: bool
) -> None:
    toml = _config(tmp_path, topics, keep=keep)
    sessions = tmp_path / "sessions.bin"
    async with AsyncExitStack() as stack:
        first = AsyncExitStack()
        p = await first.enter_async_context(
            serve_process(mosquitto_url, "all", toml, banner=b"serving ds, anonymizer")
        )
        users = [
            await stack.enter_async_context(
                Client(mosquitto_url, user_id=f"u{i}", prefix=topics.prefix)
            )
            for i in range(len(BEFORE))
        ]
        file = SessionsFile(sessions, bytes.fromhex((tmp_path / "token.key").read_text()))
        regions = await _ask(users, BEFORE, 3, file if keep else None)
        p.send_signal(getattr(signal, how))
        assert await asyncio.wait_for(p.wait(), 30) == (0 if how == "SIGTERM" else -9)
        await first.aclose()
        assert sessions.exists() == keep
        if keep:
            raw = sessions.read_bytes()
            # sealed: none of the JSON it holds shows (quoted tokens of 4+ bytes: a bare b"u1"
            # turns up in a few hundred random bytes about once in a hundred files)
            assert not any(t in raw for t in (b'"u0"', b'"u1"', b'"members"', b'"count"'))
            assert sessions.stat().st_mode & 0o777 == 0o600
        async with serve_process(mosquitto_url, "all", toml, banner=b"serving ds, anonymizer") as p:
            after = await _ask(users, AFTER, 3, file if keep else None)
            assert sessions.exists() == keep and (not keep or sessions.read_bytes() != raw)
            p.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(p.communicate(), 30)
    left = set.intersection(*regions, *after)
    if keep:  # written before each answer: a crash loses no set either
        assert b"went on with 1 sessions" in err
        assert len(left) >= K, (regions, after)
    else:  # nothing kept: a fresh set, which the attacker intersects
        assert b"went on with" not in err
        assert len(left) < K, (regions, after)
