"""Insider attacks on real brokers, run as an ordinary client (issue 20, part B).

* a forger who reads the mediator's DS queries (the worst case: the deployment's ACL keeps
  ``svc/ds/query`` from apps) races DS with plausible answers under the genuine tokens: none
  reaches a user, every one is counted;
* injected inconsistent ``cloak_reply``/``query_answer`` on a client's reply topic are dropped
  and the genuine reply still lands;
* one login floods DS's public lane with valid "everything within 100 km" and cheap queries at a
  high bounded rate: alice (P2 through the mediator) keeps >= 95 % of her answers with a p99
  under 10x her quiet p99, measured in the same test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _svc_helpers import PROJ, make_config, running, seed_population

from locpriv.client import Client
from locpriv.config import ServiceConfig, StateSection
from locpriv.core.geo import area_m2, region_from_wire
from locpriv.errors import ErrorCode, LocprivError
from locpriv.protocols.seal import AnswerMac
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.ds import DSService
from locpriv.transport import connect
from locpriv.wire.messages import (
    POI,
    CloakReply,
    CloakRequest,
    DeploymentConfig,
    DSQuery,
    ErrorReply,
    NearestQuery,
    PointLocation,
    QueryAnswer,
    QueryRequest,
    Region,
    RegionLocation,
    WithinQuery,
    decode,
    encode,
)
from locpriv.wire.topics import Topics
from simulators.scrape import metric, scrape

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]
ALICE_XY = (210.0, -140.0)
ALICE_LON, ALICE_LAT = PROJ.point_to_lonlat(*ALICE_XY)
CAFE3 = NearestQuery(category="cafe", n=3)
RATE_PER_S = {"mosquitto": 400, "amqtt": 100}
"""The flood: valid DS queries per second from one login, half of them "everything within
100 km", half the nearest cafe. The embedded amqtt broker runs in this test's own event loop,
beside alice: there, from ~200/s on, it is that broker's FIFO, not DS, that delays her
(measured on the shared 2-core machine, services in their own processes: 100/s 1.5-2.2x,
200/s 9.9x; mosquitto at 400/s 3.1-3.6x)."""


def _keyed(topics: Topics, tmp_path: Path, **limits: float) -> ServiceConfig:
    """The test config with an answer key file shared by DS and the anonymizer."""
    key = tmp_path / "answer.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o600)
    return make_config(topics, **limits).model_copy(
        update={"state": StateSection(answer_key_file=str(key))}
    )


@contextlib.asynccontextmanager
async def _forger(url: str, topics: Topics) -> AsyncIterator[list[int]]:
    """An ordinary client reading the mediator's DS queries and answering each at once with
    three plausible forgeries (untagged, a random tag, tagged under a key of her own)."""
    sent = [0]
    own = AnswerMac(os.urandom(32))
    async with connect(url) as t:
        await t.subscribe(topics.svc_ds_query)

        async def forge() -> None:
            async for m in t.messages():
                q = decode(m.payload)
                if not isinstance(q, DSQuery):
                    continue
                loc = q.location
                if isinstance(loc, RegionLocation):
                    c = region_from_wire(loc.region).centroid
                    lon, lat = c.x, c.y
                else:
                    assert isinstance(loc, PointLocation)
                    lon, lat = loc.lon, loc.lat
                poi = POI(id="forged", category="cafe", lat=lat, lon=lon, name="Evil Cafe")
                fake = QueryAnswer(
                    correlation_id=q.correlation_id,
                    pois=[poi],
                    candidates=isinstance(loc, RegionLocation),
                )
                for forged in (fake, fake.model_copy(update={"mac": "x" * 43}), own.sign(fake)):
                    await t.publish(q.reply_to, encode(forged))
                    sent[0] += 1

        task = asyncio.create_task(forge())
        try:
            yield sent
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.mark.asyncio
async def test_forged_ds_answers_never_reach_a_user(
    broker_url: str, topics: Topics, tmp_path: Path
) -> None:
    config = _keyed(topics, tmp_path)
    anonymizer = AnonymizerService(broker_url, config, metrics_port=0)
    ds = DSService(broker_url, config)
    async with running(anonymizer, ds), _forger(broker_url, topics) as forged:
        await seed_population(broker_url, topics)
        async with Client(broker_url, user_id="alice", prefix=topics.prefix) as alice:
            await alice.update_location(lat=ALICE_LAT, lon=ALICE_LON)
            exact = [p.id for p in await alice.ds_query(CAFE3, lat=ALICE_LAT, lon=ALICE_LON)]
            answers = []
            for _ in range(6):
                answers.append(await alice.query(CAFE3, protocol=2))
                answers.append(
                    await alice.query(
                        CAFE3, protocol=1, k=5, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=3
                    )
                )
        await asyncio.sleep(0.3)  # forgeries still in flight
        assert anonymizer.metrics_port
        samples = await asyncio.to_thread(scrape, anonymizer.metrics_port)
        exported = metric(samples, "locpriv_forged_answers_total", service="anonymizer")
    assert all([p.id for p in a.pois] == exact for a in answers)
    assert not any(p.id == "forged" for a in answers for p in a.pois)
    assert forged[0] == 3 * len(answers)
    assert anonymizer.machine.forged_answers == forged[0]  # type: ignore[attr-defined]
    assert exported == forged[0]


# ------------------------------------------------------------ injected replies


def _triangle() -> Region:
    lon0, lat0 = PROJ.point_to_lonlat(0.0, 0.0)
    return Region(ring=[(lon0 - 0.45, lat0 - 0.1), (lon0 + 0.45, lat0 - 0.1), (lon0, lat0 + 0.26)])


def _square(half: float) -> Region:
    x, y = ALICE_XY
    ring = [(x - half, y - half), (x + half, y - half), (x + half, y + half), (x - half, y + half)]
    return Region(ring=[PROJ.point_to_lonlat(a, b) for a, b in ring])


def _poi(x: float, y: float, pid: str, category: str = "cafe") -> POI:
    lon, lat = PROJ.point_to_lonlat(x, y)
    return POI(id=pid, category=category, lat=lat, lon=lon)


def _crafted(msg: CloakRequest | QueryRequest) -> tuple[list[bytes], bytes]:
    """Inconsistent replies to ``msg``, and the consistent one an honest service would send."""
    cid, now = msg.correlation_id, time.time()
    good = _square(300.0)
    area = area_m2(region_from_wire(good))
    tri = _triangle()
    region = {"region": good, "area_m2": area, "users": 8, "t1": now - 5, "t2": now}
    lie = {"region": tri, "area_m2": 1.0, "users": 50, "t1": now - 5, "t2": now}
    if isinstance(msg, CloakRequest):
        bad = [
            CloakReply(correlation_id=cid, **lie),  # type: ignore[arg-type]
            CloakReply(correlation_id=cid, **{**region, "users": 2}),  # type: ignore[arg-type]
            CloakReply(correlation_id=cid, **{**region, "region": _square(20.0)}),  # type: ignore[arg-type]
        ]
        return [encode(b) for b in bad], encode(CloakReply(correlation_id=cid, **region))  # type: ignore[arg-type]
    near = _poi(ALICE_XY[0] + 50, ALICE_XY[1], "near")
    if msg.protocol == 1:
        bad_answers = [
            QueryAnswer(correlation_id=cid, pois=[near], candidates=True, **lie),  # type: ignore[arg-type]
            QueryAnswer(correlation_id=cid, pois=[near], candidates=True),
            QueryAnswer(
                correlation_id=cid,
                pois=[_poi(9_000, 9_000, "far")],
                candidates=True,
                **region,  # type: ignore[arg-type]
            ),
        ]
        genuine = QueryAnswer(correlation_id=cid, pois=[near], candidates=True, **region)  # type: ignore[arg-type]
    else:
        bad_answers = [
            QueryAnswer(correlation_id=cid, pois=[_poi(9_000, 9_000, "far")]),
            QueryAnswer(correlation_id=cid, pois=[_poi(ALICE_XY[0], ALICE_XY[1], "atm", "atm")]),
        ]
        genuine = QueryAnswer(correlation_id=cid, pois=[near])
    return [encode(b) for b in bad_answers], encode(genuine)


@pytest.mark.asyncio
async def test_injected_inconsistent_replies_are_rejected(broker_url: str, topics: Topics) -> None:
    """No service runs: an attacker reads alice's requests (worst case) and answers each with
    crafted replies first, then plays the honest service."""
    within = WithinQuery(category="cafe", radius_m=400.0)
    injected = [0]
    async with connect(broker_url) as evil:
        config = DeploymentConfig(lat0_deg=PROJ.lat0_deg, lon0_deg=PROJ.lon0_deg)
        await evil.publish(topics.config, encode(config), qos=1, retain=True)
        for head in ("p1/query", "p2/query", "p3/cloak"):
            await evil.subscribe(f"{topics.root}/{head}/+/+")

        async def attack() -> None:
            async for m in evil.messages():
                msg = decode(m.payload)
                if not isinstance(msg, CloakRequest | QueryRequest):
                    continue
                bad, genuine = _crafted(msg)
                for payload in bad:
                    await evil.publish(msg.reply_to, payload)
                    injected[0] += 1
                await asyncio.sleep(0.2)
                await evil.publish(msg.reply_to, genuine)

        task = asyncio.create_task(attack())
        try:
            async with Client(broker_url, user_id="alice", prefix=topics.prefix) as alice:
                await alice.update_location(lat=ALICE_LAT, lon=ALICE_LON)
                cloak = await alice.cloak(k=5, a_min_m2=1e4, a_max_m2=5e7)
                assert 3.5e5 < cloak.area_m2 < 3.7e5 and cloak.users == 8
                p1 = await alice.query(within, protocol=1, k=5, a_min_m2=1e4, a_max_m2=5e7)
                assert [p.id for p in p1.pois] == ["near"]
                p2 = await alice.query(within, protocol=2)
                assert [p.id for p in p2.pois] == ["near"]
                assert alice.rejected_replies == injected[0] == 3 + 3 + 2
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


# ------------------------------------------------------------------- the flood


async def _p2_latencies(alice: Client, n: int, gap_s: float) -> tuple[list[float], int]:
    """``n`` P2 queries ``gap_s`` apart: the latencies (s) of those answered, and failures."""
    lat: list[float] = []
    failed = 0
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            await alice.query(CAFE3, protocol=2)
        except LocprivError:
            failed += 1
        else:
            lat.append(time.perf_counter() - t0)
        await asyncio.sleep(gap_s)
    return lat, failed


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


@contextlib.asynccontextmanager
async def _serve(url: str, what: str, config: Path) -> AsyncIterator[None]:
    """``locpriv serve WHAT`` as its own process (as deployed), ready at its banner."""
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "locpriv", "-q", "serve", what),
        *("--broker", url, "--config", str(config)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            while b"serving" not in (line := await proc.stdout.readline()):
                assert line, f"locpriv serve {what} ended"
        yield
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(15):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _flood_config(tmp_path: Path, topics: Topics) -> Path:
    key = tmp_path / "answer.key"
    key.write_text(os.urandom(32).hex())
    path = tmp_path / "locpriv.toml"
    path.write_text(
        f'prefix = "{topics.prefix}"\n[cloak]\nepoch_s = 0.2\n'
        "[limits]\nrequests_per_s = 50.0\nburst = 50.0\n"  # alice's own limit
        f'[mqtt]\nclient_id = "{topics.prefix}-anon"\nds_client_id = "{topics.prefix}-ds"\n'
        f'[state]\nanswer_key_file = "{key}"\n'
    )
    return path


@pytest.mark.asyncio
async def test_alice_keeps_her_share_under_a_ds_flood(
    broker_url: str, topics: Topics, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The anonymizer, DS and the flooder run in processes of their own, as deployed."""
    config = _flood_config(tmp_path, topics)
    rate = RATE_PER_S["mosquitto" if "mosquitto" in request.node.name else "amqtt"]
    async with (
        _serve(broker_url, "ds", config),
        _serve(broker_url, "anonymizer", config),
    ):
        await seed_population(broker_url, topics)
        async with Client(broker_url, user_id="alice", prefix=topics.prefix) as alice:
            await alice.update_location(lat=ALICE_LAT, lon=ALICE_LON)
            await _p2_latencies(alice, 5, 0.0)  # warm
            quiet, quiet_failed = await _p2_latencies(alice, 40, 0.02)
            assert quiet_failed == 0
            flooder = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "simulators.flood", broker_url, topics.prefix),
                *("--rate", str(rate), "--seconds", "10", "--kind", "both"),
                cwd=ROOT,
                stdout=asyncio.subprocess.PIPE,
            )
            await asyncio.sleep(2.0)  # the flood is on
            loud, loud_failed = await _p2_latencies(alice, 60, 0.1)
            out, _ = await flooder.communicate()
    counts = json.loads(out.decode().strip().splitlines()[-1])
    total = len(loud) + loud_failed
    ratio = _p99(loud) / _p99(quiet)
    print(
        f"flood {counts}; quiet p99 {_p99(quiet) * 1e3:.1f} ms, flood p99 "
        f"{_p99(loud) * 1e3:.1f} ms ({ratio:.1f}x), answered {len(loud)}/{total}"
    )
    assert counts["sent"] >= 0.8 * rate * 10  # the flood really ran at its rate
    assert counts.get("bad_parameters", 0) > 0  # the costly half was refused, not computed
    assert len(loud) >= 0.95 * total
    assert ratio < 10.0


# ------------------------------------------------ DS's lanes under a burst


@pytest.mark.asyncio
async def test_ds_serves_the_service_lane_first_and_sheds_by_waiting_time(
    mosquitto_url: str, topics: Topics, tmp_path: Path
) -> None:
    """900 public queries and 30 mediator queries among them wait in DS's persistent session
    while it is away, then arrive at once: every query gets exactly one reply, every mediator
    query an answer tagged by DS, and public ones that waited over 0.5 s get ``overloaded``.
    mosquitto only: amqtt 0.12 delivers nothing queued for an offline persistent session."""
    broker_url = mosquitto_url
    # a mediator query waits at most one public query's work, but the bound must exceed the
    # longest stall of this process's loop (once, 0.3 s was passed on a CI machine while this
    # test decoded runs of replies in DS's loop; it now collects them and decodes afterwards)
    config = _keyed(topics, tmp_path, ds_max_wait_s=0.5, max_queue=100_000)
    key = AnswerMac.from_config(config.state.answer_key_file)
    assert key is not None
    async with running(DSService(broker_url, config)):
        pass  # DS's persistent session now queues its queries while it is away
    app, svc = topics.reply("burst"), topics.svc_reply("mediator")
    here = PointLocation(lat=ALICE_LAT, lon=ALICE_LON)
    got: dict[str, list[object]] = {}
    async with connect(broker_url) as t:
        await t.subscribe(app)
        await t.subscribe(svc)
        # public queries that return every cafe (1,486 POIs, under the cost limit): the backlog
        # then takes DS well over the bound (a quiet 2-core machine answers about 470 a second,
        # 1.9 s for all; with nearest-3 queries it answered all 900 within 0.3 s, shedding none).
        # Not more: mosquitto queues at most 1,000 messages for an offline session
        heavy = WithinQuery(category="cafe", radius_m=30_000.0)
        for i in range(900):
            q = DSQuery(correlation_id=f"p{i}", reply_to=app, query=heavy, location=here)
            await t.publish(topics.ds_query, encode(q))
            if i % 30 == 15:
                s = DSQuery(correlation_id=f"s{i}", reply_to=svc, query=CAFE3, location=here)
                await t.publish(topics.svc_ds_query, encode(s))
        ds = DSService(broker_url, config)
        # DS shares this event loop: the replies (hundreds of POIs each) are only collected
        # here and decoded afterwards, or decoding a run of them blocks DS's loop past the
        # bound (a slow CI machine shed a mediator query that way)
        payloads: list[bytes] = []
        async with running(ds), asyncio.timeout(30):
            async for m in t.messages():
                payloads.append(m.payload)
                if len(payloads) == 930:
                    break
            await asyncio.sleep(0.2)  # no second reply to anything
            while (late := t.take_nowait()) is not None:
                payloads.append(late.payload)
    for payload in payloads:
        reply = decode(payload, max_bytes=1 << 24)
        got.setdefault(getattr(reply, "correlation_id", None) or "", []).append(reply)
    assert len(got) == 930 and all(len(v) == 1 for v in got.values())
    service = [v[0] for k, v in got.items() if k.startswith("s")]
    assert len(service) == 30
    bad = [r for r in service if not (isinstance(r, QueryAnswer) and key.verify(r))]
    assert not bad, bad[:3]
    public = [v[0] for k, v in got.items() if k.startswith("p")]
    shed = [r for r in public if isinstance(r, ErrorReply)]
    assert all(r.code == ErrorCode.OVERLOADED and r.mac is None for r in shed)
    assert all(isinstance(r, QueryAnswer) and r.mac is None for r in public if r not in shed)
    assert ds.stats["waited"] == len(shed) > 0
    print(f"public: {len(public) - len(shed)} answered, {len(shed)} overloaded by waiting time")


@pytest.mark.asyncio
async def test_public_lane_rate_drops_only_public_queries(topics: Topics, tmp_path: Path) -> None:
    """200 public queries at once against a public lane of 20/s (burst 20), 10 mediator
    queries among them: the excess public ones are dropped unread and counted, every mediator
    query is answered (in-process bus: this is DS's own bookkeeping, not a broker's)."""
    url = f"memory://{uuid.uuid4().hex}"
    config = _keyed(topics, tmp_path, ds_public_per_s=20.0, ds_public_burst=20.0)
    ds = DSService(url, config)
    app, svc = topics.reply("burst"), topics.svc_reply("mediator")
    here = PointLocation(lat=ALICE_LAT, lon=ALICE_LON)
    got: dict[str, object] = {}
    async with running(ds), connect(url) as t:
        await t.subscribe(app)
        await t.subscribe(svc)
        start = time.monotonic()
        for i in range(200):
            q = DSQuery(correlation_id=f"p{i}", reply_to=app, query=CAFE3, location=here)
            await t.publish(topics.ds_query, encode(q))
            if i % 20 == 10:
                s = DSQuery(correlation_id=f"s{i}", reply_to=svc, query=CAFE3, location=here)
                await t.publish(topics.svc_ds_query, encode(s))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                async for m in t.messages():
                    reply = decode(m.payload, max_bytes=1 << 24)
                    got[getattr(reply, "correlation_id", "") or ""] = reply
        elapsed = time.monotonic() - start
    service = [r for k, r in got.items() if k.startswith("s")]
    public = [r for k, r in got.items() if k.startswith("p")]
    assert len(service) == 10 and all(isinstance(r, QueryAnswer) for r in service)
    assert 20 <= len(public) <= 20 + 20 * elapsed + 1
    assert ds.stats["lane_rate"] == 200 - len(public)
