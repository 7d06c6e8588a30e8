"""The shipped deployment, run as shipped: deploy/mosquitto.conf and deploy/acl on a real
mosquitto with a password file and a TLS listener (certificates made here), the services started
with the command lines and credentials of deploy/systemd/*.service, apps over TLS.

What it shows: anonymous clients are refused; TLS verifies the host name; a user can read
neither locations, requests, DS queries nor another user's replies, and cannot publish in
another user's name; DS cannot read locations; Protocols 1-4 work for legitimate users; the
services' output and command lines never hold a password.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
import shapely
import yaml  # type: ignore[import-untyped]
from _deploy import (
    ANONYMIZER,
    CACHE_ROOT,
    DEPLOY,
    DS,
    ROOT,
    Deployment,
    app,
    build,
    conf_directives,
    load_credentials,
    locpriv_paths,
    read_env_file,
    read_only_install,
    service_env,
    service_ids,
    start_mosquitto,
    start_unit,
    stop_deployment,
    substitute,
    unit_command,
    unit_service,
)
from _svc_helpers import HOME, PROJ, deploy_p4_devices, wait_until
from pydantic import BaseModel

from locpriv.client import Client
from locpriv.config import ServiceConfig, load_config
from locpriv.core.geo import LonLat
from locpriv.core.noise import offset_lonlat
from locpriv.core.poi import load_pois, refine
from locpriv.errors import (
    ErrorCode,
    RateLimited,
    RequestTimeout,
    TransportError,
)
from locpriv.peer import PeerClient
from locpriv.protocols.p4.types import PeerConfig
from locpriv.transport import Received, connect
from locpriv.wire.messages import (
    CloakRequest,
    DeploymentConfig,
    ErrorReply,
    Message,
    NearestQuery,
    PrivacyProfile,
    decode,
    encode,
)
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(120)]

TOPICS = Topics()  # the shipped ACL is written for the default prefix
POIS = load_pois(DEPLOY.parent / "locpriv" / "data" / "pois.csv")
QUERY = NearestQuery(category="cafe", n=2)
PROFILE = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 5e7, "max_delay_s": 3.0}
SHIPPED = load_config(DEPLOY / "locpriv.toml")
HOME_TILE = SHIPPED.tiling().tile_of(120.0, -80.0) or ""  # alice's tile under the shipped tiles
HOME_RECT = SHIPPED.tiling().rect(HOME_TILE) or (0.0, 0.0, 0.0, 0.0)  # its square, metres


@pytest.fixture(scope="module")
def mosquitto_bins() -> None:
    from conftest import _require_mosquitto

    _require_mosquitto()
    if not os.access("/usr/bin/mosquitto_passwd", os.X_OK):
        pytest.fail("mosquitto_passwd not found (apt-get install mosquitto)")


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, mosquitto_bins: None
) -> Iterator[tuple[Deployment, dict[str, subprocess.Popen[bytes]]]]:
    dep = build(Path(tempfile.gettempdir()))
    broker = start_mosquitto(dep)
    services: dict[str, subprocess.Popen[bytes]] = {}
    try:
        paths = locpriv_paths(dep)
        for unit, user in (
            ("locpriv-ds.service", "locpriv-ds"),
            ("locpriv-anonymizer.service", "locpriv-anonymizer"),
        ):
            # the most verbose logging there is: a password must not show at any level
            services[user] = start_unit(dep, unit, user, paths, env={"LOCPRIV_LOG": "DEBUG"})
        yield dep, services
    finally:
        stop_deployment(dep, services.values(), broker)


@pytest.fixture
def dep(deployment: tuple[Deployment, dict[str, subprocess.Popen[bytes]]]) -> Deployment:
    return deployment[0]


@contextlib.asynccontextmanager
async def watching(url: str, topic_filters: list[str], **kw: Any) -> AsyncIterator[list[Received]]:
    """A connection subscribed to ``topic_filters``, collecting what arrives."""
    seen: list[Received] = []
    async with connect(url, **kw) as t:
        for f in topic_filters:
            await t.subscribe(f)

        async def pump() -> None:
            async for item in t.messages():
                seen.append(item)

        task = asyncio.create_task(pump())
        try:
            yield seen
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def populate(
    dep: Deployment, users: tuple[str, ...] = ("bob", "carol", "dave", "erin")
) -> None:
    """Other users report positions around alice's home, each in her own name."""
    rng = np.random.default_rng(5)
    for user in users:
        lon, lat = offset_lonlat(HOME[0], HOME[1], *rng.uniform(-300, 300, 2))
        async with app(dep, user) as c:
            await c.update_location(lon=lon, lat=lat)


# ---------------------------------------------------------------------------- configuration


def test_the_shipped_files_are_run_with_paths_and_ports_changed_only(dep: Deployment) -> None:
    shipped = (DEPLOY / "mosquitto.conf").read_text()
    ran = conf_directives(dep.conf.read_text())
    # every shipped directive, in order, with only the paths and listener ports substituted
    assert ran == [
        *conf_directives(substitute(shipped, dep.substitutions)),
        ("log_dest", f"file {dep.log}"),
    ]
    assert all(k.startswith(("/", "listener ")) for k in dep.substitutions)
    assert (dep.root / "locpriv.acl").read_text() == (DEPLOY / "acl").read_text()
    for unit in ("locpriv-anonymizer.service", "locpriv-ds.service"):
        (exec_start,) = unit_service(unit)["ExecStart"]
        assert "--password-file ${CREDENTIALS_DIRECTORY}/broker-password" in exec_start
        assert unit_service(unit)["LoadCredential"][0].startswith("broker-password:")
    for env_file in ("anonymizer.env", "ds.env"):
        broker = read_env_file(DEPLOY / "systemd" / env_file)["LOCPRIV_BROKER"]
        assert urlsplit(broker).username and urlsplit(broker).password is None


def test_the_shipped_service_config_shows_every_key() -> None:
    """deploy/locpriv.toml says it lists every key with its default: a key added to
    ServiceConfig and not to the file would be a setting operators never see."""

    def keys(model: type[BaseModel], data: dict[str, Any], path: str = "") -> list[str]:
        missing = []
        for name, field in model.model_fields.items():
            sub = field.annotation
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                missing += keys(sub, data.get(name, {}), f"{path}{name}.")
            elif name not in data:
                missing.append(path + name)
        return missing

    shipped = tomllib.loads((DEPLOY / "locpriv.toml").read_text())
    assert keys(ServiceConfig, shipped) == []


# ------------------------------------------------------------------------- authentication


@pytest.mark.asyncio
async def test_anonymous_and_wrong_password_clients_are_refused(dep: Deployment) -> None:
    for url, kw in [
        (dep.plain_url(None), {}),
        (dep.app_url(None), {"ca_file": str(dep.ca_file)}),
        (dep.app_url("alice"), {"ca_file": str(dep.ca_file), "password": "not-hers"}),
    ]:
        with pytest.raises(TransportError):
            async with connect(url, connect_timeout_s=2.0, **kw):
                pass
    assert "not authorised" in dep.log.read_text()


@pytest.mark.asyncio
async def test_tls_verifies_the_certificate_and_the_host_name(dep: Deployment) -> None:
    password = dep.passwords["alice"]
    async with connect(dep.app_url("alice"), password=password, ca_file=str(dep.ca_file)):
        pass
    # the certificate names localhost, not 127.0.0.1; and the system's CAs do not know ours
    for url, ca in [
        (dep.app_url("alice", "127.0.0.1"), str(dep.ca_file)),
        (dep.app_url("alice"), None),
    ]:
        with pytest.raises(TransportError):
            async with connect(url, password=password, ca_file=ca, connect_timeout_s=2.0):
                pass


# ------------------------------------------------------------------------------- the ACL


@pytest.mark.asyncio
async def test_a_user_reads_no_location_request_ds_query_or_other_reply(dep: Deployment) -> None:
    await populate(dep)
    filters = [
        TOPICS.location_filter,
        TOPICS.p1_query_filter,
        TOPICS.p2_query_filter,
        TOPICS.p3_cloak_filter,
        TOPICS.ds_query,
        f"{TOPICS.root}/#",
        "#",
    ]
    mallory = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
    async with app(dep, "alice") as alice:
        filters.append(TOPICS.reply(alice.client_id))
        async with watching(dep.app_url("mallory"), filters, **mallory) as seen:
            await alice.update_location(lon=HOME[0], lat=HOME[1])
            p2 = await alice.query(QUERY, protocol=2)
            p3 = await alice.query(QUERY, protocol=3, **PROFILE)
            await asyncio.sleep(0.5)
    assert p2.pois and p3.pois  # the traffic happened
    # a denied subscription is acknowledged all the same; nothing but status reaches mallory,
    # and the retained config (readable by every app) shows that her "#" did subscribe
    assert TOPICS.config in {m.topic for m in seen}
    assert {m.topic for m in seen} <= {
        TOPICS.status("anonymizer"),
        TOPICS.status("ds"),
        TOPICS.config,
    }


@pytest.mark.asyncio
async def test_ds_cannot_read_locations(dep: Deployment) -> None:
    ds = {"password": dep.passwords["locpriv-ds"]}
    anon = {"password": dep.passwords["locpriv-anonymizer"]}
    loc = [TOPICS.location_filter]
    async with (
        watching(dep.plain_url("locpriv-ds"), loc, **ds) as seen,
        watching(dep.plain_url("locpriv-anonymizer"), loc, **anon) as control,
    ):
        async with app(dep, "alice") as alice:
            await alice.update_location(lon=HOME[0], lat=HOME[1])
        # the same subscription under the anonymizer's login gets it: the update was there
        await wait_until(lambda: len(control) == 1, timeout=5.0)
    assert seen == []


@pytest.mark.asyncio
async def test_no_one_acts_in_another_users_name(dep: Deployment) -> None:
    await populate(dep)
    async with app(dep, "alice") as alice, app(dep, "mallory") as mallory:
        await alice.update_location(lon=HOME[0], lat=HOME[1])
        # mallory moves "alice" 40 km away on alice's topic: the broker drops it (acknowledged)
        far_lon, far_lat = offset_lonlat(HOME[0], HOME[1], 40_000.0, 0.0)
        await mallory._transport.publish(
            TOPICS.location("alice", tile=HOME_TILE),
            f'{{"type":"location_update","user_id":"alice","lat":{far_lat},"lon":{far_lon},"t":1}}'.encode(),
        )
        # ... nor does her request on alice's topic get alice's region (nothing comes back) ...
        profile = PrivacyProfile(**PROFILE)
        theft = await _raw_request(
            dep,
            "mallory",
            TOPICS.p3_cloak("alice", tile=HOME_TILE),
            3.0,
            user_id="alice",
            profile=profile,
        )
        assert theft is None
        # ... and on her own topic, naming alice, she is told no
        mine = TOPICS.p3_cloak("mallory", tile=HOME_TILE)
        reply = await _raw_request(dep, "mallory", mine, 8.0, user_id="alice")
        assert isinstance(reply, ErrorReply)
        assert reply.code == ErrorCode.INVALID_FIELD and reply.field == "user_id"
        # alice is still where she is, and only she gets her region
        cloak = await alice.cloak(**PROFILE)
        assert cloak.region.covers(shapely.Point(*HOME))
        assert cloak.users is not None and cloak.users >= 3


async def _raw_request(
    dep: Deployment, user: str, topic: str, wait_s: float, **fields: Any
) -> Message | None:
    """``user``, logged in as herself, publishes a cloak request on ``topic`` with ``fields``
    (as a modified app would) and returns the reply, or None after ``wait_s`` seconds."""
    client_id = f"raw-{user}"
    reply_to = TOPICS.reply(client_id)
    request = CloakRequest(correlation_id="raw", reply_to=reply_to, **fields)
    auth = {"password": dep.passwords[user], "ca_file": str(dep.ca_file)}
    async with connect(dep.app_url(user), client_id=client_id, **auth) as t:
        await t.subscribe(reply_to)
        await t.publish(topic, encode(request))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                async for item in t.messages():
                    return decode(item.payload)
    return None


@pytest.mark.asyncio
async def test_requests_beyond_a_users_rate_are_refused(dep: Deployment) -> None:
    async with app(dep, "gus") as gus:
        await gus.update_location(lon=HOME[0], lat=HOME[1])
        outcomes = await asyncio.gather(
            *(gus.cloak(k=2, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=0) for _ in range(30)),
            return_exceptions=True,
        )
    limited = [o for o in outcomes if isinstance(o, RateLimited)]
    assert limited and all(o.code == ErrorCode.RATE_LIMITED for o in limited)
    assert not any(isinstance(o, RequestTimeout) for o in outcomes)


@pytest.mark.asyncio
async def test_shared_subscriptions_follow_the_plain_read_rule(dep: Deployment) -> None:
    """A `$share` subscription is delivered under its topic's read rule: the anonymizer's
    user needs no `$share` line (shared_group works as shipped)."""
    anon = {"password": dep.passwords["locpriv-anonymizer"], "client_id": "probe-share"}
    flt = f"$share/anonymizers/{TOPICS.p3_cloak_filter}"
    async with watching(dep.plain_url("locpriv-anonymizer"), [flt], **anon) as seen:
        async with app(dep, "alice") as alice:
            await alice.update_location(lon=HOME[0], lat=HOME[1])
            with contextlib.suppress(Exception):
                await alice.cloak(**PROFILE, timeout_s=2.0)
        await asyncio.sleep(0.3)
    assert [m.topic for m in seen] == [TOPICS.p3_cloak("alice", tile=HOME_TILE)]


@pytest.mark.asyncio
async def test_the_tile_segment_is_free_the_user_segment_bound(dep: Deployment) -> None:
    """mosquitto 2.0 takes `+` in `pattern` lines: `loc/+/%u` lets a user publish in any tile
    in her own name and in nobody else's."""
    assert HOME_TILE.startswith("t") and SHIPPED.tiles.side_m > 0  # tiles as shipped
    anon = {"password": dep.passwords["locpriv-anonymizer"], "client_id": "probe-tiles"}
    lon, lat = HOME
    body = '{{"type":"location_update","user_id":"{u}","lat":{lat},"lon":{lon},"t":1}}'
    async with watching(
        dep.plain_url("locpriv-anonymizer"), [TOPICS.location_filter], **anon
    ) as seen:
        auth = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
        async with connect(dep.app_url("mallory"), **auth) as t:
            for user in ("alice", "mallory"):
                for tile in (HOME_TILE, "t7_-3"):
                    payload = body.format(u=user, lat=lat, lon=lon).encode()
                    await t.publish(TOPICS.location(user, tile=tile), payload)
        await asyncio.sleep(0.5)
    assert sorted(m.topic for m in seen) == sorted(
        TOPICS.location("mallory", tile=tile) for tile in (HOME_TILE, "t7_-3")
    )


@pytest.mark.asyncio
async def test_apps_read_the_deployment_config_and_cannot_forge_it(dep: Deployment) -> None:
    forged = DeploymentConfig(lat0_deg=0.0, lon0_deg=0.0, tile_m=1.0)
    auth = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
    async with connect(dep.app_url("mallory"), **auth) as t:
        await t.publish(TOPICS.config, encode(forged), retain=True)  # acknowledged, dropped
    async with app(dep, "alice") as alice:
        assert alice.machine.deployment == SHIPPED.deployment_config()
        await alice.update_location(lon=HOME[0], lat=HOME[1])
        assert alice.machine.tile_at(LonLat(*HOME)) == HOME_TILE


# ---------------------------------------------------------------------- the protocols work


@pytest.mark.asyncio
async def test_p1_p2_p3_work_for_a_legitimate_user(dep: Deployment) -> None:
    await populate(dep)
    lon, lat = HOME
    exact = refine(POIS, QUERY, lon=lon, lat=lat)
    async with app(dep, "alice") as alice:
        await alice.update_location(lon=lon, lat=lat)
        for protocol in (1, 2, 3):
            answer = await alice.query(QUERY, protocol=protocol, **PROFILE)  # type: ignore[arg-type]
            assert [p.id for p in answer.pois] == [p.id for p in exact], protocol
        # P3's DS hop came back on one short-lived connection of its own, now closed
        assert alice.endpoints.opened == 1
        await wait_until(lambda: alice.endpoints.active == 0, timeout=5.0)


@pytest.mark.asyncio
async def test_p4_works_for_legitimate_devices(dep: Deployment) -> None:
    where = deploy_p4_devices()
    config = PeerConfig(k=3, a_min_m2=20_000.0, a_max_m2=5_000_000.0, window_s=0.5)
    async with contextlib.AsyncExitStack() as stack:
        peers = []
        for i, user in enumerate(("alice", "bob", "carol", "dave", "erin")):
            p = PeerClient(
                dep.app_url(user),
                user_id=user,
                config=config,
                rng=np.random.default_rng(i),
                # fixed place noise: random secrets leave every group of three thinner than
                # A_min in about 0.5 % of runs (tests/test_p4_thin_groups.py), a correct refusal
                secret=bytes([30 + i]) * 32,
                password=dep.passwords[user],
                ca_file=str(dep.ca_file),
            )
            peers.append(await stack.enter_async_context(p))
            p.set_location(lon=where[i][0], lat=where[i][1])
        await asyncio.gather(*(p.flush() for p in peers))
        await asyncio.sleep(0.3)
        answer = await peers[0].query(QUERY, timeout_s=20)
    assert list(answer.pois) == refine(POIS, QUERY, lon=where[0][0], lat=where[0][1])
    assert answer.group_size == 3


# ---------------------------------------------------------------------------------- secrets


def test_no_password_in_service_output_or_command_lines(
    deployment: tuple[Deployment, dict[str, subprocess.Popen[bytes]]],
) -> None:
    dep, services = deployment
    ids = service_ids(dep)  # derived from the passwords, as secret (docs/operations.md)
    assert set(ids) == set(services)
    for user, proc in services.items():
        assert proc.poll() is None, f"{user} died"
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert dep.passwords[user].encode() not in cmdline
        for suffix in (".out", ".err"):
            text = (dep.root / f"{user}{suffix}").read_bytes()
            assert dep.passwords[user].encode() not in text
            leaks = [ln for ln in text.splitlines() if any(c.encode() in ln for c in ids.values())]
            assert not leaks, (user, suffix, leaks[:3])
        assert b"serving" in (dep.root / f"{user}.out").read_bytes()
        assert b"DEBUG" in (dep.root / f"{user}.err").read_bytes()  # the logs were there


@pytest.mark.parametrize(
    ("how", "broker"),
    [
        ("env", "mqtt://locpriv-ds@127.0.0.1:{port}"),  # wrong password from the environment
        ("url", "mqtt://locpriv-ds:{secret}@127.0.0.1:{port}"),  # in the URL (discouraged)
        ("url", "mqtt://locpriv-ds:{secret}@127.0.0.1:notaport"),  # a bad URL
        ("file", "mqtt://locpriv-ds@127.0.0.1:{port}"),  # from a file, service starts
    ],
)
def test_services_never_print_the_password(dep: Deployment, how: str, broker: str) -> None:
    secret = dep.passwords["locpriv-ds"] if how == "file" else "Sup3r-s3cret-Pw"
    env = service_env({"LOCPRIV_LOG": "DEBUG"})
    args = ["locpriv", "serve", "ds", "--broker", broker.format(port=dep.plain_port, secret=secret)]
    if how == "env":
        env["LOCPRIV_BROKER_PASSWORD"] = secret
    if how == "file":
        pw = dep.root / "ds-test.password"
        pw.write_text(secret + "\n")
        args += ["--password-file", str(pw)]
    exe = Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "locpriv"
    argv = [
        str(exe) if exe.exists() else str(Path(sys.executable).parent / "locpriv"),
        *args[1:],
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if how == "file":
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert b"serving ds on mqtt://locpriv-ds@127.0.0.1" in line
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = out + err
    assert secret.encode() not in output
    if how == "file":
        assert proc.returncode == 0
    else:
        assert proc.returncode != 0 and b"error" in output
    if how == "url" and "notaport" not in broker:
        assert b"process list" in err  # the operator is told to move the password out


# ------------------------------------------------------- service users and credentials

UNITS = (
    "locpriv-anonymizer.service",
    "locpriv-anonymizer@.service",
    "locpriv-ds.service",
    "locpriv-amqtt.service",
)
ANON_KEYS = {"broker-password", "token-key", "answer-key"}
SECRET_FILES = {  # credential id -> the root-only file it is copied from
    "token-key": "/etc/locpriv/token.key",
    "answer-key": "/etc/locpriv/answer.key",
    "tls-key": "/etc/locpriv/certs/server.key",
    "amqtt-passwd": "/etc/locpriv/amqtt.passwd",
}


def test_each_unit_runs_as_its_own_user_with_only_its_own_credentials() -> None:
    creds = {unit: load_credentials(unit) for unit in UNITS}
    assert set(creds["locpriv-anonymizer.service"]) == ANON_KEYS
    assert set(creds["locpriv-anonymizer@.service"]) == ANON_KEYS
    assert set(creds["locpriv-ds.service"]) == {"broker-password", "answer-key"}
    assert set(creds["locpriv-amqtt.service"]) == {*SECRET_FILES}
    anon_password = creds["locpriv-anonymizer.service"]["broker-password"]
    assert anon_password == "/etc/locpriv/anonymizer.password"
    assert creds["locpriv-ds.service"]["broker-password"] == "/etc/locpriv/ds.password"
    for unit, given in creds.items():
        for cred_id, source in given.items():
            assert SECRET_FILES.get(cred_id, source) == source, (unit, cred_id)
    # DS gets no copy of the token key, under any name
    assert "/etc/locpriv/token.key" not in creds["locpriv-ds.service"].values()
    # one system user per role: no unit can read another's state or credentials directory
    users = {unit: unit_service(unit)["User"] for unit in UNITS}
    groups = {unit: unit_service(unit)["Group"] for unit in UNITS}
    assert users["locpriv-anonymizer.service"] == users["locpriv-anonymizer@.service"]
    roles = ("locpriv-anonymizer.service", "locpriv-ds.service", "locpriv-amqtt.service")
    assert len({users[u][0] for u in roles}) == 3 and len({groups[u][0] for u in roles}) == 3
    assert all(u[0] not in ("root", "locpriv", "0") for u in users.values())
    assert not any("DynamicUser" in unit_service(u) for u in UNITS)
    state = {u: unit_service(u).get("StateDirectory", []) for u in UNITS}
    assert state["locpriv-anonymizer.service"] == ["locpriv"]
    assert state["locpriv-anonymizer@.service"] == ["locpriv"]
    assert state["locpriv-ds.service"] == ["locpriv-ds"]
    for unit in UNITS:
        settings = unit_service(unit)
        for option in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
            assert settings[option] == ["true"], (unit, option)
        assert settings["ProtectSystem"] == ["strict"], unit
        if "StateDirectoryMode" in settings:
            assert settings["StateDirectoryMode"] == ["0700"], unit
        # numba's cache (code the service loads) in a directory of the unit's own, 0700, one
        # per user: the install is read-only and no home is visible
        (cache,) = settings["CacheDirectory"]
        assert settings["CacheDirectoryMode"] == ["0700"], unit
        assert settings["Environment"] == [f"NUMBA_CACHE_DIR=/var/cache/{cache}"], unit
    caches = {u: unit_service(u)["CacheDirectory"][0] for u in UNITS}
    assert caches["locpriv-anonymizer.service"] == caches["locpriv-anonymizer@.service"]
    assert len({caches[u] for u in roles}) == 3
    # the key files of the one locpriv.toml are credentials: which unit gets them is the units'
    # LoadCredential lines, so the configuration cannot point DS at a token key it could read
    shipped = load_config(DEPLOY / "locpriv.toml")
    assert shipped.state.token_key_file == "credential:token-key"
    assert shipped.state.answer_key_file == "credential:answer-key"
    assert shipped.state.journal_file.startswith("/var/lib/locpriv/")  # the anonymizer's state
    assert shipped.state.sessions_file.startswith("/var/lib/locpriv/")  # its sessions, sealed
    pois = read_env_file(DEPLOY / "systemd" / "ds.env")["LOCPRIV_POIS"]
    assert pois.startswith("/var/lib/locpriv-ds/")  # DS's own state directory
    # the broker-plugin YAML reads its TLS key and logins from the unit's credentials only
    auth = yaml.safe_load((DEPLOY / "amqtt-broker-auth.yaml").read_text())
    run = "/run/credentials/locpriv-amqtt.service/"
    assert auth["listeners"]["tls"]["keyfile"] == run + "tls-key"
    file_auth = auth["plugins"]["amqtt.plugins.authentication.FileAuthPlugin"]
    assert file_auth["password_file"] == run + "amqtt-passwd"


def test_the_services_run_with_the_install_read_only(
    deployment: tuple[Deployment, dict[str, subprocess.Popen[bytes]]],
) -> None:
    """As under the units' ProtectSystem=strict and ProtectHome=true: the checkout, venv and
    interpreter are read-only in each service's mount namespace and its home is not writable,
    and the services still start and serve; numba caches their kernels in the unit's own
    CacheDirectory (without it, the first numba kernel stops the program at import)."""
    if not read_only_install():
        pytest.skip("no mount namespace here (unshare needs root or user namespaces)")
    _, services = deployment
    for user, unit in ((ANONYMIZER, "locpriv-anonymizer.service"), (DS, "locpriv-ds.service")):
        proc = services[user]
        assert proc.poll() is None, user
        mounts = Path(f"/proc/{proc.pid}/mountinfo").read_text().splitlines()
        here = [m.split() for m in mounts if m.split()[4] == str(ROOT)]
        assert here and "ro" in here[-1][5].split(","), (user, here)
        env = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert f"NUMBA_CACHE_DIR={CACHE_ROOT}".encode() in env, (user, unit)
        assert not any(e.startswith(b"XDG_CACHE_HOME=") for e in env), user
    assert list(CACHE_ROOT.rglob("cloak_*/partition*.nbi"))  # the anonymizer's kernels
    assert not list(ROOT.glob(".no-home*"))


def test_no_secret_is_in_a_unit_its_environment_files_or_the_command_line() -> None:
    """Secrets reach the services as credential files only: the units' ExecStart, Environment
    and EnvironmentFile name no secret value, only ``${CREDENTIALS_DIRECTORY}`` paths."""
    for unit in UNITS:
        settings = unit_service(unit)
        # EnvironmentFile= (checked below), and one Environment= line: where numba caches
        assert all(v.startswith("NUMBA_CACHE_DIR=") for v in settings.get("Environment", []))
        assert "SetCredential" not in settings, unit  # a secret written in the unit itself
        (exec_start,) = settings["ExecStart"]
        assert "password-file ${CREDENTIALS_DIRECTORY}/broker-password" in exec_start or (
            unit == "locpriv-amqtt.service"
        )
        assert not re.search(r"[0-9a-fA-F]{32}", exec_start)
        for word in ("--password ", "token", "answer", "key"):
            assert word not in exec_start, (unit, word)
    for env_file in (DEPLOY / "systemd").glob("*.env"):
        for key, value in read_env_file(env_file).items():
            assert not re.search(r"PASSWORD|KEY|SECRET|TOKEN", key), (env_file.name, key)
            assert urlsplit(value).password is None and not re.search(r"[0-9a-fA-F]{32}", value)


def test_running_services_hold_only_their_own_credentials(
    deployment: tuple[Deployment, dict[str, subprocess.Popen[bytes]]],
) -> None:
    dep, services = deployment
    etc = dep.root / "etc-locpriv"
    token_key = (etc / "token.key").read_text().strip()
    answer_key = (etc / "answer.key").read_text().strip()
    for user, unit in (
        ("locpriv-anonymizer", "locpriv-anonymizer.service"),
        ("locpriv-ds", "locpriv-ds.service"),
    ):
        proc = services[user]
        assert proc.poll() is None, f"{user} died"
        environ = dict(
            item.split("=", 1)
            for item in Path(f"/proc/{proc.pid}/environ").read_text().split("\0")
            if "=" in item
        )
        creds = Path(environ["CREDENTIALS_DIRECTORY"])
        assert sorted(p.name for p in creds.iterdir()) == sorted(load_credentials(unit))
        for path in creds.iterdir():
            assert path.stat().st_mode & 0o077 == 0, path
        secrets_here = [dep.passwords[user], token_key, answer_key]
        blob = "\0".join(f"{k}={v}" for k, v in environ.items())
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_text()
        for secret in secrets_here:
            assert secret not in blob and secret not in cmdline, user
        for suffix in (".out", ".err"):
            out = (dep.root / f"{user}{suffix}").read_text(errors="replace")
            assert not any(secret in out for secret in secrets_here), (user, suffix)
        if unit == "locpriv-ds.service":
            assert not (creds / "token-key").exists()
            assert (creds / "answer-key").read_text().strip() == answer_key
            # DS, in its own environment and with the configuration it was given, has no way
            # to the token key: the config names a credential DS was not handed
            argv = cmdline.split("\0")
            config = argv[argv.index("--config") + 1]
            probe = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys\n"
                    "from locpriv.config import load_config\n"
                    "from locpriv.protocols.seal import Sealer\n"
                    "Sealer.from_config(load_config(sys.argv[1]).state.token_key_file)\n",
                    config,
                ],
                env=environ,
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert probe.returncode != 0
            assert "'token-key', which this service was not given" in probe.stderr
            assert token_key not in probe.stdout + probe.stderr
        else:
            assert (creds / "token-key").read_text().strip() == token_key


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """systemd's own check of the shipped units (unknown keys, bad values, missing binaries),
    with only the venv path moved to this one."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (scripts/setup.sh installs it)")
    venv_bin = str(Path(sys.executable).parent) + "/"
    for unit in UNITS:
        text = (DEPLOY / "systemd" / unit).read_text()
        (tmp_path / unit).write_text(text.replace("/opt/locpriv/venv/bin/", venv_bin))
    (tmp_path / "locpriv-anonymizer@0.service").symlink_to(tmp_path / "locpriv-anonymizer@.service")
    names = [*(u for u in UNITS if "@." not in u), "locpriv-anonymizer@0.service"]
    out = subprocess.run(
        [tool, "verify", *(f"./{n}" for n in names)],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    problems = [
        line
        for line in (out.stdout + out.stderr).splitlines()
        if any(unit in line for unit in (*UNITS, "locpriv-anonymizer@0.service"))
    ]
    assert out.returncode == 0 and not problems, out.stdout + out.stderr


# ------------------------------------------------------------------------ the amqtt unit


@pytest.mark.asyncio
async def test_amqtt_unit_with_the_shipped_broker_config_serves_p3(tmp_path: Path) -> None:
    from locpriv.service.broker import free_port

    port = free_port()
    config = yaml.safe_load((DEPLOY / "amqtt-broker.yaml").read_text())
    # anonymous: nothing binds a topic to a login, so only this host may connect
    assert config["listeners"]["default"]["bind"] == "127.0.0.1:1883"
    text = (DEPLOY / "amqtt-broker.yaml").read_text().replace("1883", str(port))
    text = text.replace("/etc/locpriv/locpriv.toml", str(tmp_path / "locpriv.toml"))
    # the shipped service config (tiles, limits, state files), only its paths moved
    (tmp_path / "token.key").write_text(secrets.token_hex(32) + "\n")
    (tmp_path / "answer.key").write_text(secrets.token_hex(32) + "\n")
    shipped = (DEPLOY / "locpriv.toml").read_text()
    moved = {
        "/etc/locpriv/": f"{tmp_path}/",
        "/var/lib/locpriv/": f"{tmp_path}/",
        "/opt/locpriv/venv/bin/": str(Path(sys.executable).parent) + "/",
        # the unit runs the password-file config (tests/integration/test_deploy_amqtt.py);
        # this is the anonymous demo file under the same command
        "/etc/locpriv/amqtt-broker-auth.yaml": str(tmp_path / "amqtt-broker.yaml"),
    }
    (tmp_path / "locpriv.toml").write_text(substitute(shipped, moved))
    (tmp_path / "amqtt-broker.yaml").write_text(text)
    # the unit's credentials as systemd hands them (the demo YAML reads no TLS key or logins)
    argv, unit_env = unit_command(
        "locpriv-amqtt.service",
        moved,
        {"tls-key": "unused by the demo", "amqtt-passwd": ""},
        tmp_path / "creds",
    )
    proc = subprocess.Popen(
        argv, env=service_env(unit_env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        url = f"mqtt://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                async with connect(url, connect_timeout_s=1.0):
                    break
            except TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                await asyncio.sleep(0.2)
        rng = np.random.default_rng(2)
        for i in range(4):  # east and south of HOME: inside her tile of the shipped tiling
            dx, dy = rng.uniform(0, 300), rng.uniform(-300, 0)
            lon, lat = offset_lonlat(HOME[0], HOME[1], dx, dy)
            async with Client(url, user_id=f"n{i}") as c:
                await c.update_location(lon=lon, lat=lat)
        async with Client(url, user_id="alice", timeout_s=15) as alice:
            await alice.update_location(lon=HOME[0], lat=HOME[1])
            # the protocol's temporal cloaking (max_delay_s) waits for the updates to land
            cloak = await alice.cloak(**PROFILE)
            assert cloak.region.covers(shapely.Point(*HOME))
            assert cloak.users is not None and cloak.users >= PROFILE["k"]
            assert shapely.box(*HOME_RECT).buffer(0.01).covers(PROJ.geometry_to_xy(cloak.region))
    finally:
        proc.terminate()
        proc.wait(15)
