"""Tile-sharded anonymizers on one mosquitto, as operators run them (``locpriv serve anonymizer
--shard I/N`` processes): two shards give the same valid, reciprocal cloaks as one process for
the same population; a killed shard affects only its tiles; every process's Prometheus
endpoint is scraped.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import shapely
from _svc_helpers import PROJ, wait_until

from locpriv.client import Client, Cloak
from locpriv.core.tiles import Shard, Tiling
from locpriv.errors import RequestTimeout
from locpriv.service.broker import MosquittoProcess, free_port
from locpriv.transport import connect
from simulators.scrape import metric, scrape, total

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(180)]

SIDE = 2000.0
TILES = ("t-1_-1", "t0_-1", "t-1_0", "t0_0")  # around the origin
PROFILE = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 2.0}
CONFIG = f"""
[tiles]
side_m = {SIDE}
[cloak]
epoch_s = 0.5
[limits]
requests_per_s = 100.0
burst = 100.0
"""


@dataclass
class Proc:
    """One ``locpriv serve anonymizer`` process and its metrics port."""

    popen: subprocess.Popen[bytes]
    metrics_port: int
    log: Path


def _start(url: str, prefix: str, config: Path, shard: str | None, workdir: Path) -> Proc:
    port = free_port()
    text = f'prefix = "{prefix}"\n' + config.read_text()
    cfg = workdir / f"{prefix}-{(shard or 'all').replace('/', 'of')}.toml"
    cfg.write_text(text + f'[mqtt]\nclient_id = "{prefix}-anon"\n')
    exe = Path(sys.executable).parent / "locpriv"
    argv = [str(exe), "serve", "anonymizer", "--broker", url, "--config", str(cfg)]
    argv += ["--metrics-port", str(port)] + (["--shard", shard] if shard else [])
    log = cfg.with_suffix(".out")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCPRIV_")}
    with log.open("wb") as out:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    return Proc(popen, port, log)


def _wait_serving(proc: Proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while b"serving " not in proc.log.read_bytes():
        if proc.popen.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no start (exit {proc.popen.poll()}): {proc.log.read_text()}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Proc]]]:
    """mosquitto with two shard processes on prefix ``sh`` and one unsharded process on ``one``
    (same tiles)."""
    from conftest import _require_mosquitto

    _require_mosquitto()
    work = tmp_path_factory.mktemp("shards")
    broker = MosquittoProcess(str(work))
    broker.start()
    config = work / "base.toml"
    # one token key for the deployment, as shards share it: it also fixes the cloak grid of each
    # tile (locpriv.core.cloak.tiled.grid_phase), so the shards cut the one process's regions
    key = work / "token.key"
    key.write_text(secrets.token_hex(32) + "\n")
    config.write_text(CONFIG + f'[state]\ntoken_key_file = "{key}"\n')
    procs = {
        "s0": _start(broker.url, "sh", config, "0/2", work),
        "s1": _start(broker.url, "sh", config, "1/2", work),
        "one": _start(broker.url, "one", config, None, work),
    }
    try:
        for p in procs.values():
            _wait_serving(p)
        yield broker.url, procs
    finally:
        for p in procs.values():
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.popen.wait(20)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait()
        broker.stop()


def _population() -> dict[str, tuple[float, float]]:
    """Ten users in each of the four tiles around the origin, (lon, lat)."""
    rng = np.random.default_rng(13)
    tiling = Tiling(SIDE)
    users: dict[str, tuple[float, float]] = {}
    for tile in TILES:
        x0, y0, x1, y1 = tiling.rect(tile) or (0.0, 0.0, 0.0, 0.0)
        for i in range(10):
            x, y = rng.uniform(x0 + 50, x1 - 50), rng.uniform(y0 + 50, y1 - 50)
            users[f"{tile.replace('-', 'm')}u{i}"] = PROJ.point_to_lonlat(float(x), float(y))
    return users


def _users_known(ports: list[int]) -> float:
    """Users the processes behind ``ports`` hold, over every tile (their metrics)."""
    return sum(total(scrape(port), "locpriv_users") for port in ports)


async def _cloak_everyone(
    url: str,
    prefix: str,
    users: dict[str, tuple[float, float]],
    timeout_s: float = 10.0,
    *,
    ports: list[int] | None = None,
) -> dict[str, Cloak | BaseException]:
    """Every user updates, then asks a cloak. With the serving processes' metrics ``ports``,
    the cloaks wait until every update has landed (else a fixed 1.2 s), then one epoch more
    (0.5 s in CONFIG), so that every user is in the snapshot the regions are cut from."""
    clients = {u: Client(url, user_id=u, prefix=prefix, timeout_s=timeout_s) for u in users}
    for c in clients.values():
        await c.__aenter__()
    try:
        await asyncio.gather(
            *(c.update_location(lon=users[u][0], lat=users[u][1]) for u, c in clients.items())
        )
        if ports is None:
            await asyncio.sleep(1.2)
        else:
            await wait_until(lambda: _users_known(ports) >= len(users), timeout=10.0)
        await asyncio.sleep(0.6)  # the protocol's time: the next epoch's snapshot holds them
        outcomes = await asyncio.gather(
            *(c.cloak(**PROFILE) for c in clients.values()), return_exceptions=True
        )
    finally:
        for c in clients.values():
            await c.__aexit__(None, None, None)
    return dict(zip(clients, outcomes, strict=True))


def _tile_of(lonlat: tuple[float, float]) -> str:
    x, y = PROJ.point_to_xy(*lonlat)
    return Tiling(SIDE).tile_of(x, y) or ""


@pytest.mark.asyncio
async def test_two_shards_cloak_like_one_process(cluster: tuple[str, dict[str, Proc]]) -> None:
    url, procs = cluster
    users = _population()
    ports = {name: [procs[name].metrics_port] for name in procs}
    sharded = await _cloak_everyone(url, "sh", users, ports=ports["s0"] + ports["s1"])
    single = await _cloak_everyone(url, "one", users, ports=ports["one"])
    tiling = Tiling(SIDE)
    # regions are cut in the deployment's projection, where their edges are straight; read
    # as straight lines in degrees a 2 km edge bows by up to 7 cm (docs/protocol.md), so a
    # user a few cm from a split may fall in the neighbouring region's lon/lat polygon:
    # who is inside is judged in metres, as the cloaker and area_m2 judge it
    xy = {u: shapely.Point(*PROJ.point_to_xy(*where)) for u, where in users.items()}
    for u, where in users.items():
        a, b = sharded[u], single[u]
        assert isinstance(a, Cloak) and isinstance(b, Cloak), (u, a, b)
        # valid: she is inside, with k users, in the window, inside her tile
        assert PROJ.geometry_to_xy(a.region).covers(xy[u])
        assert a.region.buffer(2e-6).covers(shapely.Point(*where))  # and within ~20 cm
        assert a.users is not None and a.users >= PROFILE["k"]
        assert PROFILE["a_min_m2"] < a.area_m2 < PROFILE["a_max_m2"]
        rect = tiling.rect(_tile_of(where)) or (0.0, 0.0, 0.0, 0.0)
        assert shapely.box(*rect).buffer(0.01).covers(PROJ.geometry_to_xy(a.region))
        # the same region and count as the one process serving every tile
        assert a.region.equals_exact(b.region, 1e-9) and a.users == b.users, u
    # reciprocal: everyone inside a region got that very region
    for u in users:
        a = sharded[u]
        assert isinstance(a, Cloak)
        region_xy = PROJ.geometry_to_xy(a.region)
        for v in users:
            other = sharded[v]
            if region_xy.contains(xy[v]):
                assert isinstance(other, Cloak) and other.region.equals_exact(a.region, 1e-9)
    # each shard holds its own tiles' users only, as its metrics say
    for name, index in (("s0", 0), ("s1", 1)):
        samples = scrape(procs[name].metrics_port)
        service = f"anonymizer-s{index}of2"
        for tile in TILES:
            count = metric(samples, "locpriv_users", service=service, tile=tile)
            assert count == (10.0 if Shard(index, 2).owns(tile) else None), (name, tile)
        handled = metric(samples, "locpriv_messages_total", service=service, kind="location")
        owned = sum(Shard(index, 2).owns(t) for t in TILES)
        assert handled == 10.0 * owned
        assert metric(samples, "locpriv_request_seconds_count", service=service, kind="p3") == (
            10.0 * owned
        )
        assert metric(samples, "locpriv_queue_depth", service=service, queue="inbound") == 0.0
        names = {s.name for s in samples}
        assert {"locpriv_reconnects_total", "locpriv_pending_cloaks"} <= names


@pytest.mark.asyncio
async def test_a_user_moving_to_the_other_shard_leaves_her_old_tile_at_once(
    cluster: tuple[str, dict[str, Proc]],
) -> None:
    """The old shard never sees her new tile's topic: her client's location_leave on the old
    tile's topic makes it forget her at once, not after ``user_ttl_s`` (300 s)."""
    url, procs = cluster
    old = next(t for t in TILES if Shard(0, 2).owns(t))
    new = next(t for t in TILES if Shard(1, 2).owns(t))
    tiling = Tiling(SIDE)

    def centre(tile: str) -> tuple[float, float]:
        x0, y0, x1, y1 = tiling.rect(tile) or (0.0, 0.0, 0.0, 0.0)
        return PROJ.point_to_lonlat((x0 + x1) / 2, (y0 + y1) / 2)

    def users(shard: str, tile: str) -> float | None:
        samples = scrape(procs[shard].metrics_port)
        return metric(samples, "locpriv_users", service=f"anonymizer-{shard}of2", tile=tile)

    async with Client(url, user_id="mover", prefix="sh", timeout_s=10.0) as mover:
        await mover.update_location(lon=centre(old)[0], lat=centre(old)[1])
        await wait_until(lambda: users("s0", old) == 11.0, timeout=5.0)
        await mover.update_location(lon=centre(new)[0], lat=centre(new)[1])
        await wait_until(lambda: users("s1", new) == 11.0, timeout=5.0)
        await wait_until(lambda: users("s0", old) == 10.0, timeout=5.0)


@pytest.mark.asyncio
async def test_a_killed_shard_affects_only_its_tiles(cluster: tuple[str, dict[str, Proc]]) -> None:
    url, procs = cluster
    users = _population()
    procs["s0"].popen.send_signal(signal.SIGKILL)
    procs["s0"].popen.wait(10)
    outcomes = await _cloak_everyone(url, "sh", users, timeout_s=2.0)
    for u, where in users.items():
        if Shard(0, 2).owns(_tile_of(where)):
            assert isinstance(outcomes[u], RequestTimeout), u
        else:
            assert isinstance(outcomes[u], Cloak), (u, outcomes[u])
    # the broker says so: the dead shard's retained status is its last will
    async with connect(url) as t:
        await t.subscribe("sh/v1/status/+")
        seen: dict[str, bytes] = {}
        async with asyncio.timeout(5):
            async for m in t.messages():
                seen[m.topic.rsplit("/", 1)[1]] = m.payload
                if len(seen) == 2:
                    break
    assert seen == {"anonymizer-s0of2": b"offline", "anonymizer-s1of2": b"online"}
    errors = metric(scrape(procs["s1"].metrics_port), "locpriv_errors_total")
    assert errors is None  # the surviving shard answered everything it got


# ------------------------------------------------------------- a mosquitto per site, bridged

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _documented_bridge(prefix: str, remote_port: int) -> str:
    """The bridge recipe of docs/operations.md ("A mosquitto per site, bridged"), its topic
    lines as written (prefix changed), the remote's address this test's, no TLS or login."""
    text = OPERATIONS.read_text()
    block = text[text.index("**A mosquitto per site, bridged.**") :]
    block = block[block.index("```\n") + 4 :]
    block = block[: block.index("```")]
    lines = [ln for ln in block.splitlines() if ln.startswith(("connection ", "topic "))]
    assert sum(ln.startswith("topic ") for ln in lines) >= 8, block
    conf = "\n".join(ln.replace("locpriv/v1/", f"{prefix}/v1/") for ln in lines)
    return conf + f"\naddress 127.0.0.1:{remote_port}\n"


@pytest.fixture(scope="module")
def bridged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Site B's mosquitto with shard 1/2; site A's with shard 0/2 and the documented bridge
    to B. Yields the two brokers' URLs."""
    from conftest import _require_mosquitto

    _require_mosquitto()
    work = tmp_path_factory.mktemp("bridged")
    site_b = MosquittoProcess(str(work))
    site_a = MosquittoProcess(str(work), extra_config=_documented_bridge("br", site_b.port))
    config = work / "base.toml"
    config.write_text(CONFIG)
    procs: list[Proc] = []
    try:
        site_b.start()
        site_a.start()
        procs = [
            _start(site_a.url, "br", config, "0/2", work),
            _start(site_b.url, "br", config, "1/2", work),
        ]
        for p in procs:
            _wait_serving(p)
        yield site_a.url, site_b.url
    finally:
        for p in procs:
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.popen.wait(20)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait()
        site_a.stop()
        site_b.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("site", ["A", "B"])
async def test_shards_on_bridged_sites_serve_users_of_either_site(
    bridged: tuple[str, str], site: str
) -> None:
    """Apps of one site get valid cloaks for every tile, whichever site's shard owns it: their
    updates and requests cross the bridge one way, the replies the other."""
    url = bridged[0] if site == "A" else bridged[1]
    users = _population()
    outcomes = await _cloak_everyone(url, "br", users)
    tiling = Tiling(SIDE)
    for u, where in users.items():
        a = outcomes[u]
        assert isinstance(a, Cloak), (site, u, a)
        # in metres, where the region is cut (test_two_shards_cloak_like_one_process)
        assert PROJ.geometry_to_xy(a.region).covers(shapely.Point(*PROJ.point_to_xy(*where)))
        assert a.users is not None and a.users >= PROFILE["k"]
        rect = tiling.rect(_tile_of(where)) or (0.0, 0.0, 0.0, 0.0)
        assert shapely.box(*rect).buffer(0.01).covers(PROJ.geometry_to_xy(a.region))
