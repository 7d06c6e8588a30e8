"""``locpriv conformance``: the client-side contract, run against a live deployment.

Steps, each reported PASS, FAIL or SKIP with what it saw (:class:`Step`):

* ``connect``, ``config``: the first user connects (over TLS with ``ca_file``) and reads the
  retained ``deployment_config``;
* ``vector: <name>``: every case of ``vectors/messages.json`` published by that user, at the
  deployment's origin, and the reply checked: code, dotted field, ``details``, where it is
  published (cases answered on ``errors/anonymizer`` only with ``check_error_topic``, since apps
  cannot read it under the shipped ACL);
* ``ds``: a DS query at a point (exact, nearest first) and in a region (candidates);
* ``p2``, ``p3``, ``p1``: the protocols through :class:`locpriv.client.Client`; P3 checks the
  region holds the position, ``users >= k`` and ``area_m2`` against the shoelace of its ring;
  P1 and P3 need ``k`` users (``users`` beyond the first report positions around the origin),
  else a well-formed ``cloak_infeasible`` passes;
* ``p4``: Protocol 4 (k = 3) among the users' devices (needs four users, else SKIP);
* ``acl: publish as another user (MQTT 5)``: with two users, a QoS 1 publish on the second
  user's location topic must get PUBACK reason 135; ``acl: wrong password (MQTT 5)``: CONNACK
  reason 135 (SKIP where the broker does not speak MQTT 5 or has no ACL: the embedded demo
  broker); over MQTT 3.1.1 a wrong password gets CONNACK 5 and a denied publish a plain PUBACK.

Exit status 0 when no step failed. Asyncio and MQTT: this is a driver, not a pure module.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import numpy as np
from shapely.geometry import Point, Polygon

from locpriv.client import Client
from locpriv.conformance.vectors import MessageCase, Placeholders, message_cases
from locpriv.core.geo import LocalProjection, LonLat
from locpriv.core.grouping import InfeasibleReason
from locpriv.core.poi import refine
from locpriv.core.tiles import Tiling, parse_tile, tile_id
from locpriv.errors import CloakInfeasible, GroupInfeasible, LocprivError, RemoteError
from locpriv.peer import PeerClient
from locpriv.protocols.p4.types import PeerAnswer, PeerConfig
from locpriv.transport import connect
from locpriv.transport.base import Transport
from locpriv.wire.messages import (
    DeploymentConfig,
    ErrorReply,
    Message,
    NearestQuery,
    decode,
)
from locpriv.wire.topics import DEFAULT_PREFIX, Topics

__all__ = ["Step", "format_table", "run_conformance"]

Outcome = Literal["PASS", "FAIL", "SKIP"]
QUERY = NearestQuery(category="cafe", n=3)


@dataclass
class Step:
    """One line of the table: the step's name, its outcome and what was seen."""

    name: str
    outcome: Outcome
    detail: str = ""


@dataclass
class _Run:
    broker: str
    users: list[tuple[str, str | None]]
    ca_file: str | None
    prefix: str
    timeout_s: float
    check_error_topic: bool
    steps: list[Step] = field(default_factory=list)

    def add(self, name: str, outcome: Outcome, detail: str = "") -> None:
        self.steps.append(Step(name, outcome, detail))

    def url(self, user: str) -> str:
        parts = urlsplit(self.broker)
        host = parts.hostname or "localhost"
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{user}@{host}{port}"

    def client(self, index: int = 0, **kw: Any) -> Client:
        user, password = self.users[index]
        return Client(
            self.url(user),
            user_id=user,
            prefix=self.prefix,
            password=password,
            ca_file=self.ca_file,
            timeout_s=self.timeout_s,
            **kw,
        )


def format_table(steps: list[Step]) -> str:
    """The pass/fail table, one step a line."""
    width = max((len(s.name) for s in steps), default=4)
    lines = [f"{'result':6}  {'step':{width}}  detail"]
    lines += [f"{s.outcome:6}  {s.name:{width}}  {s.detail}" for s in steps]
    failed = sum(s.outcome == "FAIL" for s in steps)
    passed = sum(s.outcome == "PASS" for s in steps)
    lines.append(f"{passed} passed, {failed} failed, {len(steps) - passed - failed} skipped")
    return "\n".join(lines)


async def run_conformance(
    broker: str,
    users: list[tuple[str, str | None]],
    *,
    ca_file: str | None = None,
    prefix: str = DEFAULT_PREFIX,
    timeout_s: float = 5.0,
    check_error_topic: bool = False,
    protocols: bool = True,
) -> list[Step]:
    """Run every step against ``broker`` as ``users`` (``(name, password)``, the first one
    sends the vectors); returns the steps (never raises for a failing deployment)."""
    if not users:
        raise ValueError("give at least one user")
    run = _Run(broker, users, ca_file, prefix, timeout_s, check_error_topic)
    topics = Topics(prefix)
    user, password = users[0]
    client_id = f"conf-{secrets.token_hex(6)}"
    try:
        transport = connect(run.url(user), client_id=client_id, password=password, ca_file=ca_file)
        async with transport as t:
            run.add("connect", "PASS", f"as {user}, client id {client_id}")
            deployment = await _read_config(t, topics, timeout_s)
            if deployment is None:
                run.add("config", "FAIL", f"no deployment_config retained on {topics.config}")
                return run.steps
            run.add("config", "PASS", deployment.model_dump_json(exclude={"v", "type"}))
            await _vectors(run, t, topics, deployment, client_id)
    except (LocprivError, OSError) as exc:
        run.add("connect", "FAIL", f"{type(exc).__name__}: {exc}")
        return run.steps
    if protocols:
        await _protocols(run, deployment)
        await _acl(run, topics, deployment)
    return run.steps


async def _read_config(t: Transport, topics: Topics, timeout_s: float) -> DeploymentConfig | None:
    await t.subscribe(topics.config)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            async for item in t.messages():
                with contextlib.suppress(LocprivError):
                    message = decode(item.payload)
                    if isinstance(message, DeploymentConfig):
                        return message
    return None


def _tiles(deployment: DeploymentConfig) -> tuple[str, str]:
    """The tile of the deployment's origin, and its east neighbour."""
    proj = LocalProjection(deployment.lat0_deg, deployment.lon0_deg)
    x, y = proj.point_to_xy(deployment.lon0_deg, deployment.lat0_deg)
    tile = Tiling(deployment.tile_m).tile_of(x, y) or "t0_0"
    ij = parse_tile(tile)
    assert ij is not None
    return tile, tile_id(ij[0] + 1, ij[1])


def _at_origin(payload: bytes, deployment: DeploymentConfig) -> bytes:
    """The vectors' position (41.3874, 2.1686) moved to the deployment's origin."""
    text = payload.decode("utf-8", "surrogatepass")
    text = text.replace("41.3874", repr(deployment.lat0_deg))
    text = text.replace("2.1686", repr(deployment.lon0_deg))
    return text.encode("utf-8", "surrogatepass")


async def _vectors(
    run: _Run, t: Transport, topics: Topics, deployment: DeploymentConfig, client_id: str
) -> None:
    user = run.users[0][0]
    reply_to = topics.reply(client_id)
    tile, wrong = _tiles(deployment)
    other = run.users[1][0] if len(run.users) > 1 else f"{user}-other"
    values = Placeholders(
        user=user, other_user=other, reply_to=reply_to, tile=tile, wrong_tile=wrong
    )
    await t.subscribe(reply_to)
    if run.check_error_topic:
        await t.subscribe(topics.errors("anonymizer"))
        await t.subscribe(topics.errors("ds"))
    for case in message_cases(values):
        name = f"vector: {case.name}"
        if case.to == "errors" and not run.check_error_topic:
            run.add(name, "SKIP", f"answered on errors/{case.service}, which apps cannot read")
            continue
        payload = _at_origin(case.payload, deployment)
        marker = f"conf{secrets.token_hex(4)}"
        payload = payload.replace(b'"c1"', f'"{marker}"'.encode())
        await t.publish(f"{topics.root}/{case.topic}", payload, qos=1)
        got = await _reply_for(t, marker, case, run.timeout_s if not case.valid else 1.5)
        run.add(name, *_judge(case, got, reply_to, topics))


async def _reply_for(
    t: Transport, marker: str, case: MessageCase, timeout_s: float
) -> tuple[str, Message] | None:
    """The first reply that answers this case (by correlation id; an id-less error on the
    expected topic when the case's payload has no readable one)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            async for item in t.messages():
                try:
                    message = decode(item.payload, max_bytes=8 * 1024 * 1024)
                except LocprivError:
                    continue
                cid = getattr(message, "correlation_id", None)
                if cid == marker or (cid is None and isinstance(message, ErrorReply)):
                    return item.topic, message
    return None


def _judge(
    case: MessageCase, got: tuple[str, Message] | None, reply_to: str, topics: Topics
) -> tuple[Outcome, str]:
    if case.valid:
        if got is not None and isinstance(got[1], ErrorReply):
            e = got[1]
            if e.code in ("invalid_field", "malformed", "wrong_type", "bad_parameters"):
                return "FAIL", f"a valid message was rejected: {e.code} {e.field}: {e.reason}"
        if got is None:
            return "PASS", "accepted"
        code = getattr(got[1], "code", None)
        return "PASS", f"answered {_kind(got[1])}" + (f" {code}" if code else "")
    if got is None:
        where = reply_to if case.to == "reply" else topics.errors(case.service)
        return "FAIL", f"no reply on {where} within the timeout (expected {case.code})"
    topic, message = got
    if not isinstance(message, ErrorReply):
        return "FAIL", f"expected error {case.code}, got {_kind(message)}"
    want_topic = reply_to if case.to == "reply" else topics.errors(case.service)
    problems = []
    if (message.code, message.field) != (case.code, case.field):
        problems.append(f"got {message.code} field {message.field!r}")
    if topic != want_topic:
        problems.append(f"published on {topic}, not {want_topic}")
    details = {} if message.details is None else message.details.model_dump(exclude_none=True)
    if sorted(details) != sorted(case.details):
        problems.append(f"details {sorted(details)}, expected {sorted(case.details)}")
    if case.details_tile is not None and details.get("tile") != case.details_tile:
        problems.append(f"details.tile {details.get('tile')!r}, expected {case.details_tile!r}")
    if problems:
        return "FAIL", f"expected {case.code} {case.field!r}: " + "; ".join(problems)
    return "PASS", f"{message.code} {message.field or ''}".strip()


def _kind(message: Message) -> str:
    return str(type(message).model_fields["type"].default)


async def _step(run: _Run, name: str, body: Callable[[], Awaitable[tuple[Outcome, str]]]) -> None:
    try:
        async with asyncio.timeout(run.timeout_s * 4 + 10):
            outcome, detail = await body()
    except TimeoutError:
        outcome, detail = "FAIL", "no answer in time"
    except Exception as exc:  # a step that breaks is a failing step, not a crash
        outcome, detail = "FAIL", f"{type(exc).__name__}: {exc}"
    run.add(name, outcome, detail)


def _around(deployment: DeploymentConfig, n: int) -> list[LonLat]:
    """``n`` positions within 300 m of a centre, all in one tile (cloaks stay in a tile): the
    centre of the origin's tile (at most 400 m from the origin)."""
    rng = np.random.default_rng(24)
    proj = LocalProjection(deployment.lat0_deg, deployment.lon0_deg)
    c = 0.0 if deployment.tile_m is None else min(deployment.tile_m / 2, 400.0)
    spread = 300.0 if deployment.tile_m is None else 0.75 * c
    out = []
    for i in range(n):
        dx, dy = (0.0, 0.0) if i == 0 else rng.uniform(-spread, spread, 2)
        lon, lat = proj.point_to_lonlat(c + float(dx), c + float(dy))
        out.append(LonLat(float(lon), float(lat)))
    return out


@contextlib.asynccontextmanager
async def _population(run: _Run, where: list[LonLat]) -> AsyncIterator[Client]:
    """The first user's client; every other user has reported a position near the origin."""
    for i in range(1, len(run.users)):
        async with run.client(i) as other:
            await other.update_location(lon=where[i].lon, lat=where[i].lat)
    async with run.client(0) as me:
        await me.update_location(lon=where[0].lon, lat=where[0].lat)
        await asyncio.sleep(1.5)  # the anonymizer cloaks on per-second snapshots (epoch_s)
        yield me


async def _protocols(run: _Run, deployment: DeploymentConfig) -> None:
    where = _around(deployment, len(run.users))
    here = where[0]
    k = max(2, len(run.users))
    proj = LocalProjection(deployment.lat0_deg, deployment.lon0_deg)
    try:
        async with _population(run, where) as me:
            exact: list[Any] = []

            async def ds() -> tuple[Outcome, str]:
                pois = await me.ds_query(QUERY, lon=here.lon, lat=here.lat)
                exact[:] = refine(pois, QUERY, lon=here.lon, lat=here.lat)
                if not pois or [p.id for p in pois] != [p.id for p in exact]:
                    return "FAIL", f"not nearest first: {[p.id for p in pois]}"
                return "PASS", f"{len(pois)} POIs nearest first"

            async def p2() -> tuple[Outcome, str]:
                answer = await me.query(QUERY, protocol=2)
                ok = [p.id for p in answer.pois] == [p.id for p in exact]
                return ("PASS" if ok else "FAIL"), f"{[p.id for p in answer.pois]}"

            async def p3() -> tuple[Outcome, str]:
                try:
                    cloak = await me.cloak(k=k, a_min_m2=1.0e4, a_max_m2=4.0e6)
                except CloakInfeasible as exc:
                    ok = isinstance(exc, RemoteError) and len(run.users) < 2
                    return ("PASS" if ok else "FAIL"), f"cloak_infeasible: {exc}"
                ring = list(cloak.region.exterior.coords)[:-1]
                return _check_region(proj, here, k, ring, cloak)

            async def p1() -> tuple[Outcome, str]:
                try:
                    answer = await me.query(QUERY, protocol=1, k=k, a_min_m2=1.0e4, a_max_m2=4.0e6)
                except CloakInfeasible as exc:
                    ok = len(run.users) < 2
                    return ("PASS" if ok else "FAIL"), f"cloak_infeasible: {exc}"
                ok = [p.id for p in answer.pois] == [p.id for p in exact]
                return ("PASS" if ok else "FAIL"), f"{[p.id for p in answer.pois]}"

            await _step(run, "ds", ds)
            await _step(run, "p2", p2)
            await _step(run, "p3", p3)
            await _step(run, "p1", p1)
    except (LocprivError, OSError) as exc:
        run.add("protocols", "FAIL", f"{type(exc).__name__}: {exc}")
        return
    await _p4(run, where)


def _check_region(
    proj: LocalProjection, here: LonLat, k: int, ring: Any, cloak: Any
) -> tuple[Outcome, str]:
    if ring is None:
        return "FAIL", "no region in the reply"
    xy = [proj.point_to_xy(lon, lat) for lon, lat in ring]
    n = len(xy)
    shoelace = (
        abs(sum(xy[i][0] * xy[(i + 1) % n][1] - xy[(i + 1) % n][0] * xy[i][1] for i in range(n)))
        / 2.0
    )
    problems = []
    if not math.isclose(cloak.area_m2, shoelace, rel_tol=1e-6):
        problems.append(f"area_m2 {cloak.area_m2:.1f} != shoelace {shoelace:.1f}")
    if cloak.users is None or cloak.users < k:
        problems.append(f"users {cloak.users} < k {k}")
    if not Polygon(ring).buffer(1e-7).contains(Point(here.lon, here.lat)):
        problems.append("the region does not hold the position")
    if problems:
        return "FAIL", "; ".join(problems)
    return "PASS", f"area_m2 {cloak.area_m2:.0f} (shoelace ok), users {cloak.users}"


_P4_ATTEMPTS = 3
"""Protocol 4 tries, each with fresh devices. Every device draws a random noise secret, so the
four perturbed points are random: about 0.5 % of secret sets (18 of 4,000 in
tests/test_p4_thin_groups.py) put them nearly on one line, and every group of three then spans
<= A_min (``area_too_small``, a correct answer). Fresh devices draw afresh, so three such draws
in a row are about 1e-7 likely; any other failure fails at once."""

_CHANCE_GEOMETRY = frozenset(
    {InfeasibleReason.AREA_TOO_SMALL, InfeasibleReason.WINDOW_UNSATISFIABLE}
)


_P4_CONFIG = PeerConfig(k=3, a_min_m2=1_000.0, a_max_m2=5_000_000.0, window_s=0.5)


def _fresh_secret(attempt: int, device: int) -> bytes:
    """A device's place-noise secret: 32 random bytes, whatever the attempt and device."""
    return secrets.token_bytes(32)


async def _p4(
    run: _Run,
    where: list[LonLat],
    config: PeerConfig = _P4_CONFIG,
    secret_for: Callable[[int, int], bytes] = _fresh_secret,
) -> None:
    """The ``p4`` step: device ``i`` of attempt ``a`` keys its noise by ``secret_for(a, i)``
    (fresh random secrets; a test passes fixed ones to replay a thin draw)."""
    if len(run.users) < 4:
        run.add("p4", "SKIP", "needs four users (devices: the requester and three neighbours)")
        return

    async def attempt(seed: int) -> PeerAnswer:
        async with contextlib.AsyncExitStack() as stack:
            peers = []
            for i, (user, password) in enumerate(run.users):
                p = PeerClient(
                    run.url(user),
                    user_id=user,
                    config=config,
                    rng=np.random.default_rng([seed, i]),
                    secret=secret_for(seed, i),
                    password=password,
                    ca_file=run.ca_file,
                    topics=Topics(run.prefix),
                )
                peers.append(await stack.enter_async_context(p))
                p.set_location(lon=where[i].lon, lat=where[i].lat)
            await asyncio.gather(*(p.flush() for p in peers))
            await asyncio.sleep(0.3)
            return await peers[0].query(QUERY, timeout_s=run.timeout_s * 3)

    async def body() -> tuple[Outcome, str]:
        for seed in range(_P4_ATTEMPTS):
            try:
                answer = await attempt(seed)
                break
            except GroupInfeasible as exc:
                if exc.reason_code not in _CHANCE_GEOMETRY:
                    raise
                if seed + 1 == _P4_ATTEMPTS:
                    return "FAIL", f"GroupInfeasible: {exc} (in each of {_P4_ATTEMPTS} attempts)"
        exact = refine(answer.pois, QUERY, lon=where[0].lon, lat=where[0].lat)
        ok = list(answer.pois) == exact and answer.group_size >= 3
        tries = "" if seed == 0 else f" (attempt {seed + 1}: earlier noise drew a thin group)"
        detail = f"group of {answer.group_size}, {len(answer.pois)} POIs{tries}"
        return ("PASS" if ok else "FAIL"), detail

    await _step(run, "p4", body)


_NOT_V5 = (1, 132)
"""CONNACK codes of a broker refusing MQTT 5: 3.1.1's "unacceptable protocol version", 5's
"unsupported protocol version"."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (128 if n else 0))
        if not n:
            return bytes(out)


def _mqtt_str(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def _packet(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + _varint(len(body)) + body


async def _read_packet(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    kind = (await reader.readexactly(1))[0]
    length, shift = 0, 0
    while True:
        byte = (await reader.readexactly(1))[0]
        length += (byte & 127) << shift
        shift += 7
        if not byte & 128:
            break
    return kind, await reader.readexactly(length)


async def _mqtt5(
    run: _Run, user: str, password: str | None, publish: tuple[str, bytes] | None, level: int = 5
) -> tuple[int, int | None]:
    """A minimal MQTT 5 session on a socket of its own: CONNECT (and a QoS 1 PUBLISH),
    returning the CONNACK reason code and the PUBACK one (None without a publish). The
    library clients drop PUBACK reason codes, which this step is about. ``level`` 4 speaks
    MQTT 3.1.1 (no properties, no PUBACK reason: 0)."""
    props = _varint(0) if level == 5 else b""
    parts = urlsplit(run.broker)
    tls = ssl.create_default_context(cafile=run.ca_file) if parts.scheme == "mqtts" else None
    host = parts.hostname or "localhost"
    port = parts.port or (8883 if tls else 1883)
    reader, writer = await asyncio.open_connection(
        host, port, ssl=tls, server_hostname=host if tls else None
    )
    try:
        flags = 0x02 | 0x80 | (0x40 if password is not None else 0)
        body = _mqtt_str("MQTT") + bytes([level, flags]) + (30).to_bytes(2, "big") + props
        body += _mqtt_str(f"conf-{secrets.token_hex(6)}") + _mqtt_str(user)
        if password is not None:
            body += _mqtt_str(password)
        writer.write(_packet(0x10, body))
        await writer.drain()
        kind, ack = await _read_packet(reader)
        if kind >> 4 != 2 or len(ack) < 2:
            raise OSError(f"expected CONNACK, got packet type {kind >> 4}")
        if ack[1] != 0 or publish is None:
            return ack[1], None
        topic, payload = publish
        writer.write(
            _packet(0x32, _mqtt_str(topic) + (1).to_bytes(2, "big") + _varint(0) + payload)
        )
        await writer.drain()
        while True:
            kind, ack = await _read_packet(reader)
            if kind >> 4 == 4:  # PUBACK: packet id, then the reason code (absent: success)
                return 0, ack[2] if len(ack) > 2 else 0
        return 0, None
    finally:
        with contextlib.suppress(OSError):
            writer.write(bytes([0xE0, 0]))
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


async def _acl(run: _Run, topics: Topics, deployment: DeploymentConfig) -> None:
    """MQTT 5: a publish in another user's name gets PUBACK 135 from a broker with an ACL, a
    wrong password CONNACK 135."""
    name = "acl: publish as another user (MQTT 5)"
    if len(run.users) < 2:
        run.add(name, "SKIP", "needs two users")
        return
    (user, password), (other, _) = run.users[0], run.users[1]
    tile, _ = _tiles(deployment)
    payload = json.dumps(
        {
            "type": "location_update",
            "user_id": other,
            "lat": deployment.lat0_deg,
            "lon": deployment.lon0_deg,
            "t": time.time(),
        }
    ).encode()
    try:
        async with asyncio.timeout(run.timeout_s):
            connack, puback = await _mqtt5(
                run, user, password, (topics.location(other, tile=tile), payload)
            )
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        run.add(name, "SKIP", f"no MQTT 5 session ({type(exc).__name__}: {exc})")
        run.add("acl: wrong password (MQTT 5)", "SKIP", "no MQTT 5 session")
        return
    if connack in _NOT_V5:
        run.add(name, "SKIP", f"the broker does not speak MQTT 5 (CONNACK {connack})")
        run.add("acl: wrong password (MQTT 5)", "SKIP", "the broker does not speak MQTT 5")
        return
    if connack != 0:
        run.add(name, "FAIL", f"CONNACK reason {connack} for a valid login")
    elif puback == 0:
        run.add(name, "SKIP", "the broker accepted it: no ACL binds topics to logins here")
    else:
        run.add(name, "PASS" if puback == 135 else "FAIL", f"PUBACK reason {puback}")
    name = "acl: wrong password (MQTT 5)"
    try:
        async with asyncio.timeout(run.timeout_s):
            connack, _ = await _mqtt5(run, user, f"wrong-{secrets.token_hex(8)}", None)
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        run.add(name, "FAIL", f"{type(exc).__name__}: {exc}")
        return
    if connack == 0:
        run.add(name, "SKIP", "the broker accepted a wrong password: no authentication here")
        return
    run.add(name, "PASS" if connack == 135 else "FAIL", f"CONNACK reason {connack}")
    # the same over MQTT 3.1.1: CONNACK 5; a denied publish is acknowledged like any other
    name = "acl: wrong password (MQTT 3.1.1)"
    try:
        async with asyncio.timeout(run.timeout_s):
            connack, _ = await _mqtt5(run, user, f"wrong-{secrets.token_hex(8)}", None, 4)
            run.add(name, "PASS" if connack == 5 else "FAIL", f"CONNACK return code {connack}")
            name = "acl: publish as another user (MQTT 3.1.1)"
            where = (topics.location(other, tile=tile), payload)
            connack, puback = await _mqtt5(run, user, password, where, 4)
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        run.add(name, "FAIL", f"{type(exc).__name__}: {exc}")
        return
    ok = connack == 0 and puback == 0
    run.add(name, "PASS" if ok else "FAIL", "acknowledged as if accepted (dropped by the ACL)")
