"""Insiders on the shipped deployment: one ordinary login (mallory) against the services' broker
sessions. deploy/mosquitto.conf, deploy/acl, deploy/locpriv.toml and the systemd units run as
shipped (tests/integration/_deploy.py); mallory has her password and the CA, nothing else.

What it shows (issue 20, "Service identities no app can take"):
* the services' client ids are none of the ids mallory can learn or guess (the shipped files,
  the docs, every topic she can read), and they never show in the services' output;
* connecting with every one of those ids, as fast as she can, displaces neither service, and
  alice keeps >= 95 % of her answers with p99 under 10x its quiet value;
* with a leaked id (read from the broker's log, as an operator error would leak it), repeated
  takeovers make the services reconnect and serve again: no process exits, a request accepted
  before the takeovers is answered after them, the storm is an ERROR log line;
* mallory reads nothing of the services' traffic (``reply/<service id>``, ``svc/#``, ``#``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import numpy as np
import pytest
from _deploy import (
    DEPLOY,
    ROOT,
    Deployment,
    app,
    build,
    locpriv_paths,
    service_ids,
    start_mosquitto,
    start_unit,
    stop_deployment,
)
from _svc_helpers import HOME

from locpriv.core.noise import offset_lonlat
from locpriv.errors import LocprivError
from locpriv.service.identity import ANONYMIZER, DS, service_client_id
from locpriv.transport import Received, connect
from locpriv.wire.messages import NearestQuery
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(240)]

TOPICS = Topics()
QUERY = NearestQuery(category="cafe", n=2)
PROFILE: dict[str, Any] = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 3.0}
QUIET_S = 8.0
ATTACK_S = 15.0


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[Deployment, dict[str, subprocess.Popen[bytes]]]]:
    from conftest import _require_mosquitto

    _require_mosquitto()
    dep = build(Path(tempfile.gettempdir()))
    broker = start_mosquitto(dep)
    services: dict[str, subprocess.Popen[bytes]] = {}
    try:
        paths = locpriv_paths(dep)
        for unit, user in (
            ("locpriv-ds.service", "locpriv-ds"),
            ("locpriv-anonymizer.service", "locpriv-anonymizer"),
        ):
            services[user] = start_unit(dep, unit, user, paths)  # default log level
        yield dep, services
    finally:
        stop_deployment(dep, services.values(), broker)


@pytest.fixture
def dep(deployment: tuple[Deployment, dict[str, subprocess.Popen[bytes]]]) -> Deployment:
    return deployment[0]


def _tls(dep: Deployment) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(dep.ca_file))


async def _connect_as(dep: Deployment, client_id: str, *, clean: bool, hold_s: float = 0.0) -> bool:
    """mallory CONNECTs once over TLS with ``client_id`` (no reconnection), holds the session
    ``hold_s`` seconds and leaves; True when the broker accepted the connection."""
    client = aiomqtt.Client(
        "localhost",
        dep.tls_port,
        username="mallory",
        password=dep.passwords["mallory"],
        identifier=client_id,
        clean_session=clean,
        tls_context=_tls(dep),
        timeout=3.0,
    )
    try:
        async with client:
            await asyncio.sleep(hold_s)
    except aiomqtt.MqttError:
        return False
    return True


def _guessable_ids(seen_topics: set[str]) -> set[str]:
    """Every client id mallory could learn or guess: role names, shard suffixes, the shipped
    files' and docs' strings, every topic segment she could read."""
    words: set[str] = {ANONYMIZER, DS, "anonymizer", "ds", "locpriv", "locpriv-issuer"}
    texts = [p.read_text() for p in (ROOT / "docs").glob("*.md")]
    texts += [p.read_text() for p in DEPLOY.rglob("*") if p.is_file()]
    for text in texts:
        words |= set(re.findall(r"locpriv-[A-Za-z0-9_.:@-]+", text))

    def strings(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for v in node.values():
                yield from strings(v)
        elif isinstance(node, str) and node:
            yield node

    words |= set(strings(tomllib.loads((DEPLOY / "locpriv.toml").read_text())))
    for topic in seen_topics:
        words |= set(topic.split("/"))
    for base in list(words):
        for n in (2, 3, 4):
            words |= {f"{base}-s{i}of{n}" for i in range(n)}
        words |= {f"{base}-anon", f"{base}-ds"}
    return {w.strip("`'\".,:;()") for w in words} - {""}


async def _populate(dep: Deployment, users: tuple[str, ...]) -> None:
    rng = np.random.default_rng(5)
    for user in users:  # east and south of alice: inside her tile of the shipped tiling
        dx, dy = rng.uniform(0, 300), rng.uniform(-300, 0)
        lon, lat = offset_lonlat(HOME[0], HOME[1], dx, dy)
        async with app(dep, user) as c:
            await c.update_location(lon=lon, lat=lat)


async def _alice_runs(
    dep: Deployment, seconds: float, user: str = "alice"
) -> tuple[int, list[float]]:
    """alice asks P2 (mediator and DS) and P3 (anonymizer) in turn, 4 a second, for ``seconds``;
    returns how many she asked and the latencies (s) of those answered."""
    asked, latencies = 0, []
    async with app(dep, user) as alice:
        await alice.update_location(lon=HOME[0], lat=HOME[1])
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            asked += 1
            try:
                if asked % 2:
                    await alice.query(QUERY, protocol=2)
                else:
                    await alice.cloak(**PROFILE)
                latencies.append(time.monotonic() - t0)
            except LocprivError:
                pass
            await asyncio.sleep(max(0.0, 0.25 - (time.monotonic() - t0)))
    return asked, latencies


async def _wait_online(dep: Deployment, names: tuple[str, ...], timeout_s: float) -> None:
    """Until every service in ``names`` shows ``online`` on its retained status topic."""
    status: dict[str, bytes] = {}
    auth = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
    async with connect(dep.app_url("mallory"), **auth) as t:
        await t.subscribe(f"{TOPICS.root}/status/+")
        async with asyncio.timeout(timeout_s):
            async for m in t.messages():
                status[m.topic.rsplit("/", 1)[1]] = m.payload
                if all(status.get(n) == b"online" for n in names):
                    return


def _p99(values: list[float]) -> float:
    return float(np.percentile(values, 99))


def _took_over(dep: Deployment, client_id: str) -> bool:
    """mosquitto logged that a CONNECT with ``client_id`` closed an older connection."""
    return f"Client {client_id} already connected" in dep.log.read_text()


# ------------------------------------------------------------------------------ the ids


@pytest.mark.asyncio
async def test_service_ids_are_derived_secret_and_never_shown(
    deployment: tuple[Deployment, dict[str, subprocess.Popen[bytes]]],
) -> None:
    dep, services = deployment
    ids = service_ids(dep)
    assert ids[ANONYMIZER] == service_client_id(ANONYMIZER, dep.passwords[ANONYMIZER])
    assert ids[DS] == service_client_id(DS, dep.passwords[DS])
    seen: set[str] = set()
    auth = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
    async with connect(dep.app_url("mallory"), **auth) as t:
        await t.subscribe("#")
        await _populate(dep, ("bob", "carol"))
        await _alice_runs(dep, 1.0)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                async for m in t.messages():
                    seen.add(m.topic)
    guesses = _guessable_ids(seen)
    assert len(guesses) > 50
    assert not set(ids.values()) & guesses
    # nothing the services print at their default level names their ids
    for user in services:
        for suffix in (".out", ".err"):
            text = (dep.root / f"{user}{suffix}").read_text()
            assert not any(cid in text for cid in ids.values()), (user, suffix)


@pytest.mark.asyncio
async def test_connecting_with_every_guessable_id_displaces_no_service(dep: Deployment) -> None:
    await _populate(dep, ("bob", "carol", "dave"))
    quiet_asked, quiet = await _alice_runs(dep, QUIET_S)
    guesses = sorted(_guessable_ids({TOPICS.status("anonymizer"), TOPICS.status("ds")}))
    stop = asyncio.Event()
    tries = 0

    async def attack() -> None:
        nonlocal tries
        while not stop.is_set():
            for cid in guesses:
                if stop.is_set():
                    return
                tries += 1
                # clean sessions wipe a session, persistent ones inherit it; both tried
                await _connect_as(dep, cid, clean=tries % 2 == 0, hold_s=0.05)

    attacker = asyncio.create_task(attack())
    try:
        asked, answered = await _alice_runs(dep, ATTACK_S)
    finally:
        stop.set()
        await attacker
    ids = service_ids(dep)
    assert not any(_took_over(dep, cid) for cid in ids.values())
    for user in (ANONYMIZER, DS):
        assert "lost connection" not in (dep.root / f"{user}.err").read_text()
    share = len(answered) / asked
    print(
        f"guessed-id attack: {tries} CONNECTs with {len(guesses)} ids in {ATTACK_S:g} s;"
        f" alice {len(answered)}/{asked} answered ({share:.1%}); p99 quiet"
        f" {_p99(quiet) * 1e3:.1f} ms ({len(quiet)}/{quiet_asked}), attacked"
        f" {_p99(answered) * 1e3:.1f} ms"
    )
    assert tries > 100
    assert share >= 0.95
    assert _p99(answered) < 10 * _p99(quiet)


@pytest.mark.asyncio
async def test_reads_of_the_services_traffic_give_nothing(dep: Deployment) -> None:
    ids = service_ids(dep)
    filters = [
        *(TOPICS.reply(cid) for cid in ids.values()),
        *(TOPICS.svc_reply(cid) for cid in ids.values()),
        f"{TOPICS.root}/svc/#",
        TOPICS.svc_ds_query,
        f"{TOPICS.root}/#",
        "#",
        "$SYS/#",
    ]
    seen: list[Received] = []
    auth = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
    async with connect(dep.app_url("mallory"), **auth) as t:
        for f in filters:
            await t.subscribe(f)
        await _populate(dep, ("bob", "carol", "dave"))
        async with app(dep, "alice") as alice:
            await alice.update_location(lon=HOME[0], lat=HOME[1])
            for protocol in (1, 2):  # both through the mediator and DS
                answer = await alice.query(QUERY, protocol=protocol, **PROFILE)  # type: ignore[arg-type]
                assert answer.pois
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                async for m in t.messages():
                    seen.append(m)
    assert {m.topic for m in seen} <= {
        TOPICS.config,
        TOPICS.status("anonymizer"),
        TOPICS.status("ds"),
    }


# ------------------------------------------------------------------- a leaked id (takeover)


@pytest.mark.asyncio
async def test_takeovers_with_a_leaked_id_neither_stop_the_services_nor_lose_requests(
    deployment: tuple[Deployment, dict[str, subprocess.Popen[bytes]]],
) -> None:
    dep, services = deployment
    ids = service_ids(dep)  # leaked: read from the broker's log
    rounds = 12  # the old watchdog exited at 10 reconnections in 60 s
    await _populate(dep, ("bob", "carol", "dave", "erin"))
    async with app(dep, "alice", timeout_s=60.0) as alice:
        await alice.update_location(lon=HOME[0], lat=HOME[1])
        # accepted, then pending: k=6 needs one more user than alice and the four above
        pending = asyncio.create_task(
            alice.cloak(k=6, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=45.0)
        )
        await asyncio.sleep(1.0)
        assert not pending.done()
        started = time.monotonic()
        gus = asyncio.create_task(_alice_runs(dep, 12.0, user="gus"))  # meanwhile, gus asks
        for i in range(rounds):
            for cid in ids.values():
                assert await _connect_as(dep, cid, clean=i % 2 == 1, hold_s=0.2)
            await asyncio.sleep(0.8)
        asked, answered = await gus
        print(
            f"leaked-id takeovers: {rounds} of each service in {time.monotonic() - started:.1f}"
            f" s; gus {len(answered)}/{asked} answered meanwhile"
        )
        assert all(_took_over(dep, cid) for cid in ids.values())
        for user, proc in services.items():
            assert proc.poll() is None, f"{user} exited"
        await _populate(dep, ("fay",))  # the sixth user: the pending cloak is answered
        cloak = await asyncio.wait_for(pending, 30.0)
        assert cloak.users is not None and cloak.users >= 6
    # both come back (after at most backoff_max_s) and serve through the mediator and DS
    await _wait_online(dep, ("anonymizer", "ds"), timeout_s=15.0)
    asked, answered = await _alice_runs(dep, 3.0)
    assert len(answered) == asked
    for user, proc in services.items():
        assert proc.poll() is None, f"{user} exited"
        err = (dep.root / f"{user}.err").read_text()
        assert "re-established" in err and "client id" in err  # the storm, logged
