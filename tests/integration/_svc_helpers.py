"""Helpers for service integration tests: run services, seed a population, spy on topics."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import numpy as np

from locpriv.config import CloakSection, LimitsSection, MqttSection, ServiceConfig
from locpriv.core.geo import LocalProjection, LonLat
from locpriv.core.grouping import Infeasible, select_group
from locpriv.core.noise import offset_lonlat
from locpriv.protocols.p4.machine import device_point
from locpriv.protocols.p4.types import PeerConfig
from locpriv.service.driver import ServiceDriver
from locpriv.transport import Received, connect
from locpriv.wire.messages import LocationUpdate, encode
from locpriv.wire.topics import WORLD_TILE, Topics

LAT0, LON0 = 41.3874, 2.1686
PROJ = LocalProjection(LAT0, LON0)
HOME = PROJ.point_to_lonlat(120.0, -80.0)
"""alice's position in the deployment tests (lon, lat): inside one tile of the shipped tiling."""


def deploy_p4_devices() -> list[tuple[float, float]]:
    """The positions (lon, lat) of test_deploy's Protocol 4 devices: five within 300 m of
    ``HOME`` (east and north), the same every run. tests/test_p4_thin_groups.py measures how
    often random noise secrets leave them no group."""
    rng = np.random.default_rng(9)
    return [offset_lonlat(HOME[0], HOME[1], *rng.uniform(-300, 300, 2)) for _ in range(5)]


def p4_thin_reason(where: list[LonLat], config: PeerConfig, secrets: list[bytes]) -> str | None:
    """Why devices standing still at ``where``, device ``i`` keying its place noise with
    ``secrets[i]``, leave the first one no group (an ``InfeasibleReason`` value), or ``None``
    when she gets one: their perturbed points (``device_point``) and ``select_group`` around
    hers (in ``PROJ``'s metres), what the P4 machine runs. Keyed points are a function of the
    secret and the place only (no key period by default), so the answer is the same at any
    time."""
    xy = []
    for i, p in enumerate(where):
        point = device_point(config, secret=secrets[i])
        lon, lat = point.current(p.lon, p.lat, 1000.0, np.random.default_rng(i))
        xy.append(PROJ.point_to_xy(lon, lat))
    pts = np.asarray(xy)
    got = select_group(
        (float(pts[0, 0]), float(pts[0, 1])), pts[1:], config.k, config.a_min_m2, config.a_max_m2
    )
    return got.reason.value if isinstance(got, Infeasible) else None


@contextlib.asynccontextmanager
async def serve_process(
    url: str, what: str, config: Path, banner: bytes = b"serving"
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``locpriv serve WHAT --broker URL --config CONFIG`` as a child process, yielded once its
    first line of output holds ``banner`` (60 s at most); killed at the end if still running."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "locpriv",
        "serve",
        what,
        "--broker",
        url,
        "--config",
        str(config),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            line = await proc.stdout.readline()
        assert banner in line, line
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def make_config(topics: Topics, **limits: float) -> ServiceConfig:
    """A config with a unique prefix, fast epochs and short timeouts."""
    return ServiceConfig(
        prefix=topics.prefix,
        cloak=CloakSection(epoch_s=0.2, default_k=5, default_max_delay_s=3.0),
        limits=LimitsSection(**limits),
        mqtt=MqttSection(
            client_id=f"{topics.prefix}-anon",
            ds_client_id=f"{topics.prefix}-ds",
            backoff_max_s=0.5,
            publish_timeout_s=10.0,
        ),
    )


@contextlib.asynccontextmanager
async def running(*services: ServiceDriver) -> AsyncIterator[None]:
    """Run services in the background until the block ends; stop them cleanly."""
    tasks = [asyncio.create_task(s.run()) for s in services]
    try:
        async with asyncio.timeout(15):
            for s, t in zip(services, tasks, strict=True):
                ready = asyncio.create_task(s.ready.wait())
                await asyncio.wait({ready, t}, return_when=asyncio.FIRST_COMPLETED)
                if t.done():
                    t.result()
                ready.cancel()
        yield
    finally:
        for s in services:
            s.stop()
        await asyncio.gather(*tasks, return_exceptions=True)


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` every 10 ms until it holds (TimeoutError after ``timeout`` s)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def seed_population(
    url: str,
    topics: Topics,
    n: int = 40,
    seed: int = 1,
    *,
    tile_of: Callable[[float, float], str | None] | None = None,
) -> list[str]:
    """``n`` users ``u0..`` scattered within 1.5 km of the origin publish one update each
    (on their tile's topic, with ``tile_of``); returns the topics published on."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-1500, 1500, size=(n, 2))
    lon, lat = PROJ.to_lonlat(xy[:, 0], xy[:, 1])
    published = []
    async with connect(url) as t:
        for i in range(n):
            update = LocationUpdate(
                user_id=f"u{i}", lat=float(lat[i]), lon=float(lon[i]), t=time.time()
            )
            tile = (tile_of(float(lon[i]), float(lat[i])) if tile_of else None) or WORLD_TILE
            published.append(topics.location(f"u{i}", tile=tile))
            await t.publish(published[-1], encode(update))
    return published


class Spy:
    """Records every payload on a topic filter."""

    def __init__(self, url: str, topic_filter: str) -> None:
        self.transport = connect(url)
        self.topic_filter = topic_filter
        self.seen: list[Received] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Spy:
        await self.transport.__aenter__()
        await self.transport.subscribe(self.topic_filter)
        self._task = asyncio.create_task(self._collect())
        return self

    async def _collect(self) -> None:
        async for msg in self.transport.messages():
            self.seen.append(msg)

    async def __aexit__(self, *exc: object) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.transport.__aexit__(None, None, None)

    async def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        async with asyncio.timeout(timeout):
            while len(self.seen) < count:
                await asyncio.sleep(0.01)
        return self.seen
