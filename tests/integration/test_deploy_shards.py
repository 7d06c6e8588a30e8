"""The shipped shard template ``deploy/systemd/locpriv-anonymizer@.service`` run as systemd would:
two instances (``%i`` = 0, 1) with the shipped env files, password credential, ACL and
``locpriv.toml`` on a real mosquitto; users in tiles of either shard are served over TLS, each
instance's metrics port answers, and each keeps its own journal file."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _deploy import (
    DEPLOY,
    Deployment,
    app,
    build,
    locpriv_paths,
    read_env_file,
    start_mosquitto,
    start_unit,
    stop_deployment,
)
from _svc_helpers import PROJ, wait_until

from locpriv.config import load_config
from locpriv.core.noise import offset_lonlat
from locpriv.core.tiles import Shard
from locpriv.service.broker import free_port
from locpriv.wire.messages import NearestQuery
from simulators.scrape import metric, scrape

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(180)]

SHIPPED = load_config(DEPLOY / "locpriv.toml")
SHARDS = int(read_env_file(DEPLOY / "systemd" / "anonymizer.env")["LOCPRIV_SHARDS"])
PROFILE = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 3.0}


def _home_of_each_shard() -> dict[int, tuple[float, float]]:
    """A (lon, lat) in a tile of every shard, near the projection origin."""
    tiling = SHIPPED.tiling()
    homes: dict[int, tuple[float, float]] = {}
    side = SHIPPED.tiles.side_m
    for ix in range(-3, 3):
        for iy in range(-3, 3):
            x, y = (ix + 0.5) * side, (iy + 0.5) * side
            tile = tiling.tile_of(x, y) or ""
            owner = next(i for i in range(SHARDS) if Shard(i, SHARDS).owns(tile))
            homes.setdefault(owner, PROJ.point_to_lonlat(x, y))
    assert sorted(homes) == list(range(SHARDS))
    return homes


@pytest.fixture(scope="module")
def sharded() -> Iterator[tuple[Deployment, dict[str, Any]]]:
    from conftest import _require_mosquitto

    _require_mosquitto()
    dep = build(Path(tempfile.gettempdir()))
    broker = start_mosquitto(dep)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    ports = {f"920{i}": str(free_port()) for i in range(SHARDS)}
    try:
        paths = locpriv_paths(dep) | ports
        procs["ds"] = start_unit(dep, "locpriv-ds.service", "locpriv-ds", paths)
        for i in range(SHARDS):
            procs[f"s{i}"] = start_unit(
                dep,
                "locpriv-anonymizer@.service",
                "locpriv-anonymizer",
                paths,
                name=f"s{i}",
                instance=str(i),
            )
        yield dep, {"procs": procs, "metrics": [ports[f"920{i}"] for i in range(SHARDS)]}
    finally:
        stop_deployment(dep, procs.values(), broker)


def test_the_template_names_its_shard_and_metrics_port(
    sharded: tuple[Deployment, dict[str, Any]],
) -> None:
    dep, ctx = sharded
    for i in range(SHARDS):
        argv = ctx["procs"][f"s{i}"].args
        assert argv[argv.index("--shard") + 1] == f"{i}/{SHARDS}"
        assert argv[argv.index("--metrics-port") + 1] == ctx["metrics"][i]
        out = (dep.root / f"s{i}.out").read_text()
        assert f"serving anonymizer-s{i}of{SHARDS} on" in out
        assert dep.passwords["locpriv-anonymizer"] not in out + " ".join(argv)


@pytest.mark.asyncio
async def test_users_of_every_shard_are_served_and_counted(
    sharded: tuple[Deployment, dict[str, Any]],
) -> None:
    dep, ctx = sharded
    homes = _home_of_each_shard()
    rng = np.random.default_rng(3)
    users = {0: ("alice", "bob", "carol", "dave"), 1: ("erin", "fay", "gus", "mallory")}
    query = NearestQuery(category="cafe", n=2)
    for shard, names in users.items():
        home = homes[shard]
        for user in names[1:]:
            lon, lat = offset_lonlat(home[0], home[1], *rng.uniform(-300, 300, 2))
            async with app(dep, user) as c:
                await c.update_location(lon=lon, lat=lat)
        async with app(dep, names[0]) as requester:
            await requester.update_location(lon=home[0], lat=home[1])
            cloak = await requester.cloak(**PROFILE)  # type: ignore[arg-type]
            assert cloak.users is not None and cloak.users >= PROFILE["k"]
            assert PROFILE["a_min_m2"] < cloak.area_m2 < PROFILE["a_max_m2"]
            answer = await requester.query(query, protocol=2)
            assert answer.pois
    for i, port in enumerate(ctx["metrics"]):
        service = f"anonymizer-s{i}of{SHARDS}"
        located = metric(scrape(port), "locpriv_messages_total", service=service, kind="location")
        assert located is not None and located >= len(users[i]), (service, located)


@pytest.mark.asyncio
async def test_each_instance_keeps_its_own_journal(
    sharded: tuple[Deployment, dict[str, Any]],
) -> None:
    """The running instances write their journals (pending temporal cloaks) side by side, one
    file each, never the shipped name that both would overwrite."""
    dep, _ = sharded
    var = dep.root / "var-lib-locpriv"
    own = [var / f"pending-s{i}of{SHARDS}.json" for i in range(SHARDS)]
    await wait_until(lambda: all(p.exists() for p in own), timeout=10.0)
    assert not (var / "pending.json").exists()
