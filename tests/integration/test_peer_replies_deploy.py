"""Protocol 4 reply topics against an insider on the shipped deployment (mosquitto 2.0, password
file, ACL, TLS, the issuer's lines of docs/peer.md §8): mallory, one ordinary login, reads every
discovery cell (``peer/cell/#``, which the ACL grants every login) and, for every peer request
she sees,

* CONNECTs with every string of the request that could be a client id (each segment of
  ``reply_to``, the correlation id, the requester's pseudonym), holding each session and
  subscribing it to ``reply/<that id>``: the takeover of the requester's
  reply connection that the ACL line ``pattern read reply/%c`` invited when ``reply_to`` was
  ``reply/<the connection's client id>``;
* publishes into ``reply_to`` forged replies (fresh uncertified pseudonyms around the request's
  point), undecodable payloads, and replays of the honest replies she reads (into the same
  query's topic and into the other queries' topics).

alice's queries (six honest certified neighbours, k = 4) all succeed, with the exact refined
answer and only honest members; none of mallory's CONNECTs displaces a session (mosquitto logs
"Client <id> already connected" when one does), her takeover sessions receive no reply, and
alice counts the forged replies as dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from pathlib import Path

import aiomqtt
import numpy as np
import pytest
from _deploy import Deployment
from _svc_helpers import wait_until
from test_peer_e2e import POIS
from test_peer_tokens_deploy import (
    PERIOD_S,
    certified_peers,
    deployment,
    p4_services,
    serving,
)

from locpriv.core.noise import offset_lonlat
from locpriv.core.poi import refine
from locpriv.errors import DecodeError
from locpriv.peer import PeerClient
from locpriv.protocols.p4.tokens import TokenWallet, period_of
from locpriv.transport import Transport, connect
from locpriv.wire.messages import NearestQuery, PeerReply, PeerRequest, decode, encode
from locpriv.wire.topics import Topics

pytestmark = [pytest.mark.integration, pytest.mark.mosquitto, pytest.mark.timeout(180)]

__all__ = ["deployment"]  # the module-scoped shipped deployment with the issuer's lines

TOPICS = Topics()
HOME = (2.17, 41.39)
QUERIES = 4
HOLD_S = 2.5


class Mallory:
    """The insider: one listener on ``peer/cell/#`` and a takeover session per candidate id."""

    def __init__(self, dep: Deployment, listener: Transport) -> None:
        self.dep = dep
        self.listener = listener
        self.tls = ssl.create_default_context(cafile=str(dep.ca_file))
        self.tried: set[str] = set()
        self.accepted = 0
        self.stolen = 0
        """Messages her takeover sessions received on ``reply/<id>`` (alice's replies, when
        ``reply_to`` was ``reply/<the id of alice's reply connection>``)."""
        self.forged = 0
        self.replayed = 0
        self.replayed_keys: set[tuple[str, str]] = set()
        self.requests: dict[str, PeerRequest] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self) -> None:
        async for item in self.listener.messages():
            try:
                msg = decode(item.payload)
            except DecodeError:
                continue
            if isinstance(msg, PeerRequest) and msg.correlation_id not in self.requests:
                self.requests[msg.correlation_id] = msg
                ids = {*msg.reply_to.split("/"), msg.correlation_id, msg.requester}
                for cid in ids - self.tried:
                    self.tried.add(cid)
                    self.spawn(self.take_over(cid))
                self.spawn(self.flood(msg))
            elif isinstance(msg, PeerReply) and msg.token is not None:
                key = (msg.correlation_id, msg.responder)
                if key not in self.replayed_keys:  # each honest reply once (she reads her own)
                    self.replayed_keys.add(key)
                    self.spawn(self.replay(msg, item.topic))

    async def take_over(self, client_id: str) -> None:
        """CONNECT as ``client_id`` and read ``reply/<client_id>``, which the ACL binds to it
        (``reply_to`` itself she reads anyway, on her ``peer/cell/#`` listener)."""
        client = aiomqtt.Client(
            "localhost",
            self.dep.tls_port,
            username="mallory",
            password=self.dep.passwords["mallory"],
            identifier=client_id,
            clean_session=True,
            tls_context=self.tls,
            timeout=3.0,
        )
        with contextlib.suppress(aiomqtt.MqttError):
            async with client:
                self.accepted += 1
                with contextlib.suppress(ValueError):  # what the id itself lets her read
                    await client.subscribe(TOPICS.reply(client_id), qos=1)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(HOLD_S):
                        async for _ in client.messages:
                            self.stolen += 1

    async def flood(self, req: PeerRequest) -> None:
        """Forged uncertified replies around the request's point and undecodable payloads."""
        for i in range(20):
            angle = 2 * np.pi * i / 20
            lon, lat = offset_lonlat(req.lon, req.lat, 120 * np.cos(angle), 120 * np.sin(angle))
            rep = PeerReply(
                correlation_id=req.correlation_id,
                responder=TokenWallet().pseudonym(0),
                lat=lat,
                lon=lon,
                t=time.time(),
            )
            await self.listener.publish(req.reply_to, encode(rep), qos=0)
            self.forged += 1
        for junk in (b"", b"{", b"\xff" * 64, b'{"type":"peer_reply"}'):
            await self.listener.publish(req.reply_to, junk, qos=0)

    async def replay(self, rep: PeerReply, topic: str) -> None:
        """An honest reply back into its own topic (a duplicate) and into every other query's
        topic (another correlation id)."""
        targets = {topic} | {r.reply_to for r in self.requests.values()}
        for target in targets:
            await self.listener.publish(target, encode(rep), qos=0)
            self.replayed += 1

    def displaced(self) -> list[str]:
        """The ids of her CONNECTs that closed an older session (mosquitto's log)."""
        log = self.dep.log.read_text(errors="replace")
        return [cid for cid in self.tried if f"Client {cid} already connected" in log]


@pytest.mark.asyncio
async def test_an_insider_cannot_take_over_or_spoil_p4_replies(
    deployment: tuple[Deployment, str], tmp_path: Path
) -> None:
    dep, issuer_password = deployment
    issuer, ds = p4_services(dep, issuer_password, tmp_path)
    peer_config = certified_peers(4, window_s=1.0)
    users = ("alice", "bob", "carol", "dave", "erin", "fay", "gus")
    rng = np.random.default_rng(8)
    period = period_of(time.time(), PERIOD_S)
    auth = {"password": dep.passwords["mallory"], "ca_file": str(dep.ca_file)}
    async with (
        serving(ds),
        serving(issuer),
        connect(dep.app_url("mallory"), **auth) as listener,
        contextlib.AsyncExitStack() as stack,
    ):
        peers, where = [], []
        for i, user in enumerate(users):
            p = PeerClient(
                dep.app_url(user),
                user_id=user,
                config=peer_config,
                rng=np.random.default_rng(20 + i),
                password=dep.passwords[user],
                ca_file=str(dep.ca_file),
            )
            peers.append(await stack.enter_async_context(p))
            lon, lat = offset_lonlat(*HOME, *rng.uniform(-400, 400, 2))
            p.set_location(lon=lon, lat=lat)
            where.append((lon, lat))
        await wait_until(lambda: all(p.machine.wallet.token(period) for p in peers), timeout=20)
        await asyncio.gather(*(p.flush() for p in peers))
        await listener.subscribe(f"{TOPICS.root}/peer/cell/#", qos=0)
        mallory = Mallory(dep, listener)
        attack = asyncio.create_task(mallory.run())
        alice, honest = peers[0], {p.machine.pseudonym(time.time()) for p in peers[1:]}
        answers = []
        try:
            for j in range(QUERIES):
                query = NearestQuery(category="cafe", n=1 + j % 2)
                a = await alice.query(query, timeout_s=20)
                answers.append(a)
                assert list(a.pois) == refine(POIS, query, lon=where[0][0], lat=where[0][1])
                assert a.group_size == 4 and set(a.members) <= honest
                await asyncio.sleep(HOLD_S / 2)  # let her takeovers land and hold
            await wait_until(lambda: not mallory.tasks, timeout=HOLD_S + 10)
        finally:
            attack.cancel()
            for task in [attack, *mallory.tasks]:
                task.cancel()
            await asyncio.gather(attack, *mallory.tasks, return_exceptions=True)

        # she saw every request and tried everything she could read from them
        assert len(mallory.requests) >= QUERIES
        assert mallory.accepted >= QUERIES and mallory.forged >= 20 * QUERIES
        assert mallory.displaced() == []
        assert mallory.stolen == 0
        assert alice.transport.reconnects == 0  # type: ignore[attr-defined]
        assert alice.stats["reply_no_token"] >= 20 * QUERIES
        assert alice.stats["invalid"] >= 1
        assert len(answers) == QUERIES


@pytest.mark.asyncio
async def test_an_app_cannot_publish_into_a_reply_topic(deployment: tuple[Deployment, str]) -> None:
    """Only the services write ``reply/+`` now (P4 peers answer under ``peer/cell/``): mallory's
    publication into bob's reply topic is dropped by the broker, while the same message into a
    P4 reply topic bob subscribed to reaches him (the control)."""
    dep, _ = deployment
    creds = {
        u: {"password": dep.passwords[u], "ca_file": str(dep.ca_file)} for u in ("bob", "mallory")
    }
    control = TOPICS.peer_reply("g1600_1_2", "control")
    rep = PeerReply(
        correlation_id="c1", responder=TokenWallet().pseudonym(0), lat=41.39, lon=2.17, t=1.0
    )
    async with (
        connect(dep.app_url("bob"), **creds["bob"]) as bob,
        connect(dep.app_url("mallory"), **creds["mallory"]) as mallory,
    ):
        await bob.subscribe(TOPICS.reply(bob.client_id), qos=1)
        await bob.subscribe(control, qos=1)
        await mallory.publish(TOPICS.reply(bob.client_id), encode(rep), qos=1)
        await mallory.publish(control, encode(rep), qos=1)
        got: list[str] = []
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                async for item in bob.messages():
                    got.append(item.topic)
        assert got == [control]
