"""Protocol 4 pseudonym tokens on real brokers (embedded amqtt and mosquitto): the issuer
service, PeerClients that fetch tokens and require them, a Sybil login over the wire, the
issuer's allowance across a restart."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from _svc_helpers import wait_until
from test_peer_e2e import A_MAX, A_MIN, LAT0, LON0, K, ds_running, stop

from locpriv.cli.serve import serve
from locpriv.config import ServiceConfig
from locpriv.core.noise import offset_lonlat
from locpriv.errors import ConfigError
from locpriv.peer import PeerClient
from locpriv.protocols.p4.tokens import TokenWallet, period_of, public_key
from locpriv.protocols.p4.types import PeerConfig
from locpriv.service.issuer import IssuerService
from locpriv.transport import Received, connect
from locpriv.wire.messages import (
    ErrorReply,
    IssueAnswer,
    IssueRequest,
    IssuerKeys,
    NearestQuery,
    PeerReply,
    PeerRequest,
    decode,
    encode,
)
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]
PERIOD_S = 3600.0


@contextlib.asynccontextmanager
async def issuer_running(url: str, topics: Topics, key_dir: Path) -> AsyncIterator[IssuerService]:
    svc = IssuerService(
        url,
        ServiceConfig(prefix=topics.prefix),
        key_dir=key_dir,
        period_s=PERIOD_S,
        per_login=2,
        client_id=f"{topics.prefix}-issuer",
    )
    task = asyncio.create_task(svc.run())
    try:
        ready = asyncio.create_task(svc.ready.wait())
        await asyncio.wait({ready, task}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        assert svc.ready.is_set()
        yield svc
    finally:
        svc.stop()
        await asyncio.gather(task, return_exceptions=True)


@contextlib.asynccontextmanager
async def certified_fleet(url: str, topics: Topics, n: int) -> AsyncIterator[list[PeerClient]]:
    rng = np.random.default_rng(5)
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for i in range(n):
            config = PeerConfig(
                k=K,
                a_min_m2=A_MIN,
                a_max_m2=A_MAX,
                window_s=1.0,
                pseudonym_ttl_s=PERIOD_S,
                require_tokens=True,
            )
            p = PeerClient(
                url,
                user_id=f"user{i}",
                login=f"user{i}",
                config=config,
                topics=topics,
                rng=np.random.default_rng(i),
            )
            clients.append(await stack.enter_async_context(p))
            lon, lat = offset_lonlat(LON0, LAT0, *rng.uniform(-400, 400, 2))
            p.set_location(lat=lat, lon=lon)
        period = period_of(time.time(), PERIOD_S)
        await wait_until(lambda: all(c.machine.wallet.token(period) for c in clients), timeout=20.0)
        await asyncio.gather(*(p.flush() for p in clients))
        yield clients


@pytest.mark.timeout(120)
async def test_certified_fleet_ignores_a_sybil_login(
    broker_url: str, topics: Topics, tmp_path: Path
) -> None:
    async with (
        ds_running(broker_url, topics),
        issuer_running(broker_url, topics, tmp_path / "keys") as issuer,
        certified_fleet(broker_url, topics, 10) as clients,
        connect(broker_url) as sybil,
    ):
        # one token per device for this period, and one for the next when the test runs in
        # the last 2-10 % of the (wall-clock) period, where devices ask for it ahead of time
        period = period_of(time.time(), PERIOD_S)
        assert all(c.machine.wallet.token(period) for c in clients)
        # the issuer counts a token when it signs it, a device when the reply arrives: a token
        # asked ahead of time in the period's last moments may be on its way (this assertion
        # alone failed once in a full test run, 20 issued against 19 received)
        await wait_until(
            lambda: issuer.core.stats["issued"] == sum(c.stats["token_issued"] for c in clients),
            timeout=5.0,
        )
        assert all(1 <= c.stats["token_issued"] <= 2 for c in clients)
        await sybil.subscribe(f"{topics.root}/peer/cell/+", qos=0)
        sent = 0

        async def answer() -> None:
            nonlocal sent
            answered: set[str] = set()
            async for item in sybil.messages():
                req = decode(item.payload)
                if not isinstance(req, PeerRequest) or req.correlation_id in answered:
                    continue
                answered.add(req.correlation_id)
                for i in range(20):  # fresh pseudonyms without tokens, just past A_min
                    lon, lat = offset_lonlat(req.lon, req.lat, 110.0 + i, 20.0 * i - 200.0)
                    rep = PeerReply(
                        correlation_id=req.correlation_id,
                        responder=TokenWallet().pseudonym(0),
                        lat=lat,
                        lon=lon,
                        t=time.time(),
                    )
                    await sybil.publish(req.reply_to, encode(rep), qos=0)
                    sent += 1

        pump = asyncio.create_task(answer())
        try:
            a = await clients[0].query(NearestQuery(category="pharmacy", n=1), timeout_s=30)
            await wait_until(lambda: sent >= 20, timeout=10.0)
        finally:
            await stop(pump)
        honest = {c.machine.pseudonym(time.time()) for c in clients[1:]}
        stats = dict(clients[0].stats)
        assert a.group_size == K and set(a.members) <= honest, (a, stats)
        # her replies were read and dropped (a loaded broker may deliver some after the window)
        await wait_until(
            lambda: clients[0].stats["reply_no_token"] + clients[0].stats["unsolicited"] >= 1,
            timeout=10.0,
        )


@pytest.mark.timeout(60)
async def test_issuer_allowance_survives_a_restart(
    broker_url: str, topics: Topics, tmp_path: Path
) -> None:
    """One login gets per_login = 2 signatures per period key, also across an issuer restart;
    the keys are published retained and the key files are private."""
    keys = tmp_path / "keys"
    period = period_of(time.time(), PERIOD_S)
    got: list[str] = []
    async with connect(broker_url) as me:
        reply = topics.reply("mallory-r")
        await me.subscribe(reply)
        await me.subscribe(topics.issuer_keys)
        inbox: asyncio.Queue[Received] = asyncio.Queue()

        async def pump() -> None:
            async for item in me.messages():
                await inbox.put(item)

        reader = asyncio.create_task(pump())
        try:
            for run in range(2):
                async with issuer_running(broker_url, topics, keys):
                    key_msg: IssuerKeys | None = None
                    # after the restart one request: a second would be dropped unanswered
                    for attempt in range(2 if run == 0 else 1):
                        w = TokenWallet()
                        cid = f"r{run}a{attempt}"
                        while key_msg is None:
                            msg = decode((await asyncio.wait_for(inbox.get(), 10)).payload)
                            key_msg = msg if isinstance(msg, IssuerKeys) else None
                        pk = public_key(next(k for k in key_msg.keys if k.period == period))
                        req = IssueRequest(
                            correlation_id=cid,
                            reply_to=reply,
                            user_id="mallory",
                            period=period,
                            blinded_msg=w.begin(period, pk, cid, reply, time.time() + 10),
                        )
                        await me.publish(topics.issue("mallory"), encode(req), qos=1)
                        while True:
                            msg = decode((await asyncio.wait_for(inbox.get(), 10)).payload)
                            if (
                                isinstance(msg, IssueAnswer | ErrorReply)
                                and msg.correlation_id == cid
                            ):
                                break
                        if isinstance(msg, IssueAnswer):
                            assert w.complete(cid, msg.blind_sig)
                            got.append("token")
                        else:
                            got.append(str(msg.code))
        finally:
            await stop(reader)
    # the allowance survived the restart: the restarted issuer refuses at once
    assert got == ["token", "token", "rate_limited"]
    for f in keys.glob("period-*.pem"):
        assert f.stat().st_mode & 0o077 == 0
    assert (keys / "counts.json").exists()


@pytest.mark.timeout(60)
async def test_serve_issuer_publishes_its_keys(amqtt_url: str, tmp_path: Path) -> None:
    """``locpriv serve issuer`` (the function behind the command) publishes the current and
    next period keys retained under the shipped prefix; it needs a key directory."""
    with pytest.raises(ConfigError, match="key-dir"):
        await serve("issuer", broker=amqtt_url, stop=asyncio.Event())
    stop_event = asyncio.Event()
    before = period_of(time.time(), 600.0)
    task = asyncio.create_task(
        serve("issuer", broker=amqtt_url, key_dir=tmp_path / "k", period_s=600.0, stop=stop_event)
    )
    try:
        async with connect(amqtt_url) as me:
            await me.subscribe(Topics().issuer_keys)
            msg = None
            async with asyncio.timeout(20):
                async for item in me.messages():
                    msg = decode(item.payload)
                    break
        assert isinstance(msg, IssuerKeys) and msg.period_s == 600.0 and msg.per_login == 2
        # the current and next period when it published, which may be just before a period
        # boundary this test crosses (a run at 21:20:00 UTC read [P - 1, P] in period P)
        after = period_of(time.time(), 600.0)
        got = [k.period for k in msg.keys]
        assert got in [[p, p + 1] for p in range(before, after + 2)], (before, after, got)
    finally:
        stop_event.set()
        await asyncio.wait_for(task, 20)
