"""Protocol 4 tokens on the shipped deployment (mosquitto 2.0, password file, ACL, TLS) plus
the issuer's ACL lines as docs/peer.md §8 gives them: certified devices query; another login
cannot ask in alice's name nor publish issuer keys."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import re
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import pytest
from _deploy import PASSWD_BIN, ROOT, Deployment, build, start_mosquitto, stop_deployment
from _svc_helpers import wait_until

from locpriv.config import ServiceConfig
from locpriv.core.noise import offset_lonlat
from locpriv.peer import PeerClient
from locpriv.protocols.p4.tokens import TokenWallet, b64e, period_of
from locpriv.protocols.p4.types import PeerConfig
from locpriv.service.driver import ServiceDriver
from locpriv.service.ds import DSService
from locpriv.service.issuer import IssuerService
from locpriv.transport import Received, connect
from locpriv.wire.messages import (
    IssueAnswer,
    IssueRequest,
    IssuerKey,
    IssuerKeys,
    NearestQuery,
    PeerReply,
    PeerRequest,
    decode,
    encode,
)
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(120)]

TOPICS = Topics()
ISSUER = "locpriv-issuer"
PERIOD_S = 3600.0


def issuer_acl() -> str:
    """The ACL block of docs/peer.md §8 (so the documented lines are the tested ones)."""
    text = (ROOT / "docs" / "peer.md").read_text(encoding="utf-8")
    block = re.search(r"```\n(# Protocol 4 tokens:.*?)```", text, re.S)
    assert block is not None, "docs/peer.md lost the issuer's ACL lines"
    return block.group(1)


def with_issuer(dep: Deployment) -> str:
    """Add the documented lines (``pattern`` lines before the first ``user`` section, as the
    shipped file requires) and the issuer's account; returns its password."""
    acl = dep.root / "locpriv.acl"
    lines = issuer_acl().splitlines()
    first_user = next(i for i, line in enumerate(lines) if line.startswith("user "))
    shipped = acl.read_text()
    head, sep, tail = shipped.partition("\n# --- the trusted anonymizer")
    acl.write_text(
        head
        + "\n"
        + "\n".join(lines[:first_user])
        + "\n"
        + sep
        + tail
        + "\n"
        + "\n".join(lines[first_user:])
        + "\n"
    )
    password = "issuer-" + b64e(os.urandom(12))
    subprocess.run(
        [PASSWD_BIN, str(dep.root / "locpriv.passwd"), ISSUER],
        input=f"{password}\n{password}\n",
        text=True,
        check=True,
        capture_output=True,
    )
    if os.geteuid() == 0:
        owner = pwd.getpwnam("mosquitto")
        for path in [dep.root, *dep.root.rglob("*")]:
            os.chown(path, owner.pw_uid, owner.pw_gid)
    return password


def p4_services(
    dep: Deployment, issuer_password: str, tmp_path: Path
) -> tuple[IssuerService, DSService]:
    """The issuer (keys under ``tmp_path``) and DS of the shipped deployment, each under its
    own service login."""
    config = ServiceConfig()
    issuer = IssuerService(
        dep.plain_url(ISSUER),
        config,
        key_dir=tmp_path / "keys",
        period_s=PERIOD_S,
        password=issuer_password,
    )
    ds = DSService(dep.plain_url("locpriv-ds"), config, password=dep.passwords["locpriv-ds"])
    return issuer, ds


def certified_peers(k: int, window_s: float) -> PeerConfig:
    """Devices that count only certified replies, one pseudonym a token period."""
    return PeerConfig(
        k=k,
        a_min_m2=20_000.0,
        a_max_m2=5_000_000.0,
        window_s=window_s,
        pseudonym_ttl_s=PERIOD_S,
        require_tokens=True,
    )


@pytest.fixture(scope="module")
def deployment() -> Iterator[tuple[Deployment, str]]:
    from conftest import _require_mosquitto

    _require_mosquitto()
    if not os.access(PASSWD_BIN, os.X_OK):
        pytest.fail("mosquitto_passwd not found (apt-get install mosquitto)")
    dep = build(Path(tempfile.gettempdir()))
    password = with_issuer(dep)
    broker = start_mosquitto(dep)
    try:
        yield dep, password
    finally:
        stop_deployment(dep, [], broker)


@contextlib.asynccontextmanager
async def serving(service: ServiceDriver) -> AsyncIterator[None]:
    task = asyncio.create_task(service.run())
    try:
        ready = asyncio.create_task(service.ready.wait())
        await asyncio.wait({ready, task}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        yield
    finally:
        service.stop()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.asyncio
async def test_tokens_on_the_shipped_deployment(
    deployment: tuple[Deployment, str], tmp_path: Path
) -> None:
    dep, issuer_password = deployment
    issuer, ds = p4_services(dep, issuer_password, tmp_path)
    rng = np.random.default_rng(3)
    users = ("alice", "bob", "carol", "dave", "erin")
    peer_config = certified_peers(3, window_s=0.5)
    period = period_of(time.time(), PERIOD_S)
    async with serving(ds), serving(issuer), contextlib.AsyncExitStack() as stack:
        peers = []
        for i, user in enumerate(users):
            p = PeerClient(
                dep.app_url(user),
                user_id=user,
                config=peer_config,
                rng=np.random.default_rng(i),
                secret=bytes([i]) * 32,  # fixed place noise: the same points every run
                password=dep.passwords[user],
                ca_file=str(dep.ca_file),
            )
            peers.append(await stack.enter_async_context(p))
            lon, lat = offset_lonlat(2.17, 41.39, *rng.uniform(-300, 300, 2))
            p.set_location(lon=lon, lat=lat)
        await wait_until(lambda: all(p.machine.wallet.token(period) for p in peers), timeout=20)
        assert issuer.core.counts[period] == dict.fromkeys(users, 1)
        await asyncio.gather(*(p.flush() for p in peers))
        answer = await peers[0].query(NearestQuery(category="cafe", n=1), timeout_s=20)
        assert answer.group_size == 3

        # mallory: asking in alice's name and publishing keys are refused by the broker
        async with connect(
            dep.app_url("mallory"), password=dep.passwords["mallory"], ca_file=str(dep.ca_file)
        ) as mallory:
            pk = issuer.keys.key_for(period).public_key()
            w = TokenWallet()
            blinded = w.begin(period, pk, "m1", TOPICS.reply("m1"), time.time() + 5)
            forged = IssueRequest(
                correlation_id="m1",
                reply_to=TOPICS.reply("m1"),
                user_id="alice",
                period=period,
                blinded_msg=blinded,
            )
            await mallory.publish(TOPICS.issue("alice"), encode(forged), qos=1)
            fake = IssuerKeys(
                period_s=PERIOD_S,
                per_login=1000,
                keys=[IssuerKey(period=period, n=b64e(b"\xff" * 256), e=3)],
            )
            await mallory.publish(TOPICS.issuer_keys, encode(fake), qos=1, retain=True)
        await asyncio.sleep(0.5)
        assert issuer.core.counts[period]["alice"] == 1
        assert "mallory" not in issuer.core.counts[period]
        seen: list[Received] = []
        async with connect(
            dep.app_url("bob"), password=dep.passwords["bob"], ca_file=str(dep.ca_file)
        ) as bob:
            await bob.subscribe(TOPICS.issuer_keys)
            async with asyncio.timeout(10):
                async for item in bob.messages():
                    seen.append(item)
                    break
        keys = decode(seen[0].payload)
        assert isinstance(keys, IssuerKeys) and keys.per_login == issuer.core.per_login


@pytest.mark.asyncio
async def test_one_login_over_the_wire_holds_at_most_two_members(
    deployment: tuple[Deployment, str], tmp_path: Path
) -> None:
    """mallory, an ordinary login, takes every token the issuer gives her (2; a third request
    is refused) and answers alice's requests with 30 replies under fresh pseudonyms, 2 of them
    certified: alice's group of k = 5 holds at most 2 of her points, the rest are honest."""
    dep, issuer_password = deployment
    issuer, ds = p4_services(dep, issuer_password, tmp_path)
    peer_config = certified_peers(5, window_s=1.0)
    users = ("alice", "bob", "carol", "dave", "erin", "fay", "gus")
    rng = np.random.default_rng(4)
    period = period_of(time.time(), PERIOD_S)
    mine: list[TokenWallet] = []
    async with (
        serving(ds),
        serving(issuer),
        connect(
            dep.app_url("mallory"), password=dep.passwords["mallory"], ca_file=str(dep.ca_file)
        ) as mallory,
        contextlib.AsyncExitStack() as stack,
    ):
        # her tokens: as many as she can get (the ACL lets her read reply/<her client id>)
        mallory_cid = mallory.client_id
        await mallory.subscribe(TOPICS.reply(mallory_cid))
        pk = issuer.keys.key_for(period).public_key()
        answers = []
        for i in range(3):
            w = TokenWallet()
            cid = f"m{i}"
            req = IssueRequest(
                correlation_id=cid,
                reply_to=TOPICS.reply(mallory_cid),
                user_id="mallory",
                period=period,
                blinded_msg=w.begin(period, pk, cid, TOPICS.reply(mallory_cid), time.time() + 9),
            )
            await mallory.publish(TOPICS.issue("mallory"), encode(req), qos=1)
            async with asyncio.timeout(10):
                async for item in mallory.messages():
                    msg = decode(item.payload)
                    break
            answers.append(type(msg).__name__)
            if isinstance(msg, IssueAnswer) and w.complete(cid, msg.blind_sig):
                mine.append(w)
        assert answers == ["IssueAnswer", "IssueAnswer", "ErrorReply"] and len(mine) == 2

        peers = []
        for i, user in enumerate(users):
            p = PeerClient(
                dep.app_url(user),
                user_id=user,
                config=peer_config,
                rng=np.random.default_rng(10 + i),
                secret=bytes([10 + i]) * 32,  # fixed place noise: the same points every run
                password=dep.passwords[user],
                ca_file=str(dep.ca_file),
            )
            peers.append(await stack.enter_async_context(p))
            lon, lat = offset_lonlat(2.17, 41.39, *rng.uniform(-400, 400, 2))
            p.set_location(lon=lon, lat=lat)
        await wait_until(lambda: all(p.machine.wallet.token(period) for p in peers), timeout=20)
        await asyncio.gather(*(p.flush() for p in peers))
        await mallory.subscribe(f"{TOPICS.root}/peer/cell/+", qos=0)

        async def flood() -> None:
            done: set[str] = set()
            async for item in mallory.messages():
                req = decode(item.payload)
                if not isinstance(req, PeerRequest) or req.correlation_id in done:
                    continue
                done.add(req.correlation_id)
                for i in range(30):
                    angle = 2 * np.pi * i / 30
                    lon, lat = offset_lonlat(
                        req.lon, req.lat, 110 * np.cos(angle), 110 * np.sin(angle)
                    )
                    w = mine[i] if i < 2 else TokenWallet()
                    rep = PeerReply(
                        correlation_id=req.correlation_id,
                        responder=w.pseudonym(period),
                        lat=lat,
                        lon=lon,
                        t=time.time(),
                    )
                    await mallory.publish(req.reply_to, encode(w.sign(rep, period)), qos=0)

        flooding = asyncio.create_task(flood())
        try:
            answer = await peers[0].query(NearestQuery(category="cafe", n=1), timeout_s=20)
        finally:
            flooding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flooding
        hers = {w.pseudonym(period) for w in mine}
        assert answer.group_size == 5
        assert len(set(answer.members) & hers) <= 2
        honest = {p.machine.pseudonym(time.time()) for p in peers[1:]}
        assert len(set(answer.members) & honest) >= 2
        stats = peers[0].stats
        await wait_until(lambda: stats["reply_no_token"] + stats["unsolicited"] >= 1, timeout=10)
