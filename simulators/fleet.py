"""Fleet runner: simulated devices speak the real wire protocol through a real broker, real clock.

A fleet is split into *shards* (users ``i`` with ``i % shards == s``); each shard is one asyncio
task holding **one** broker connection for all its devices, and shards run in several processes
(:mod:`multiprocessing`, spawn) for load. Per device the shard:

* publishes a :class:`~locpriv.messages.LocationUpdate` on ``loc/{user_id}`` every
  ``update_interval_s`` (QoS 0, random phase; everyone once before the start);
* runs the scenario's queries at their instants (scenario time = wall time since the start):
  P1/P2 :class:`QueryRequest` to the mediator, P3 :class:`CloakRequest` to the anonymizer then a
  :class:`DSQuery` for the region and local refinement (:func:`locpriv.poi.refine`), all through
  one :class:`locpriv.rpc.Requester` (one reply topic per shard; requests carry the device's
  ``user_id``); P4 through one :class:`locpriv.protocols.p4_peer.PeerMachine` per device
  (requester and responder), whose effects the shard executes (discovery-cell subscriptions are
  shared and fanned out to the devices listening on them).

Each query yields a :class:`~simulators.evaluate.QueryRecord` with ground truth from the
trajectories (true position, users truly inside a region, exact POI answer). Message and byte
counts are those the device sends and receives (P4 includes its broadcasts and the replies it
collects); the mediator-DS hop of P1/P2 is not visible to the device. ``k_achieved`` of P1 and
P3 is the number of users truly inside the region when the answer arrives; P3's
``k_reported`` is the anonymizer's count (from reported positions; P1 and P3 answers carry it).
Anonymisation latency is the cloak reply's arrival for P3, the collection windows
(``window_s`` x rounds) for P4, and not observable for P1/P2 (end-to-end latency only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing as mp
import queue
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import shapely

from locpriv import messages as m
from locpriv.cells import cell_side_for
from locpriv.errors import (
    DecodeError,
    LocprivError,
    RemoteError,
    RequestTimeout,
    TransportError,
)
from locpriv.noise import GaussianMechanism
from locpriv.poi import POIIndex, refine
from locpriv.protocols import Send
from locpriv.protocols.p4_peer import (
    Effect,
    PeerConfig,
    PeerMachine,
    QueryDone,
    QueryFailed,
    ResponderPolicy,
    Subscribe,
    Unsubscribe,
)
from locpriv.rpc import Requester
from locpriv.topics import Topics
from locpriv.transport import Received, connect
from simulators.evaluate import QueryRecord, RunStats, expected_error_uniform, precision_recall
from simulators.scenario import BuiltScenario
from simulators.virtual import load_poi_index
from simulators.workload import QueryEvent

log = logging.getLogger(__name__)

__all__ = ["FleetOptions", "FleetResult", "Progress", "run_fleet", "run_fleet_async"]


@dataclass(frozen=True)
class FleetOptions:
    """How the fleet runs; times in seconds, distances in metres."""

    url: str
    processes: int = 1
    """Worker processes (0: run every shard in the caller's event loop)."""
    shards_per_process: int = 1
    prefix: str = "locpriv"
    request_timeout_s: float = 10.0
    start_delay_s: float = 2.0
    """Time between the initial location burst and scenario time 0."""
    drain_s: float = 5.0
    """After the scenario ends, how long to wait for answers still in flight."""
    update_qos: int = 0
    p4_window_s: float = 0.5
    p4_max_distance_m: float = 200.0
    p4_max_rounds: int = 2
    progress_every_s: float = 0.5
    log_level: int = logging.WARNING
    """Logging level of the worker processes."""
    p4_reply_wildcard: bool = True
    """Receive the devices' per-query P4 reply topics through one ``reply/+`` subscription
    instead of two subscribe/unsubscribe round trips per query (amqtt 0.12 handles that churn
    badly under load). Every shard then also sees other clients' replies and ignores them."""
    publishers: int = 64
    """Tasks per shard publishing peer-machine effects (replies, unsubscriptions)."""


@dataclass
class Progress:
    """Counters of a running fleet (summed over shards)."""

    t_s: float = 0.0
    updates: int = 0
    issued: int = 0
    answered: int = 0
    failed: int = 0
    in_flight: int = 0
    messages: int = 0

    def add(self, other: Progress) -> None:
        """Accumulate ``other`` into ``self`` (``t_s`` is the maximum)."""
        self.t_s = max(self.t_s, other.t_s)
        self.updates += other.updates
        self.issued += other.issued
        self.answered += other.answered
        self.failed += other.failed
        self.in_flight += other.in_flight
        self.messages += other.messages


@dataclass
class FleetResult:
    """Records of every query, run counters and per-shard diagnostics."""

    records: list[QueryRecord]
    stats: RunStats
    shards: list[dict[str, Any]] = field(default_factory=list)


def _size(msg: m.Message) -> int:
    return len(m.encode(msg))


class _Shard:
    """One broker connection carrying a slice of the fleet."""

    def __init__(
        self,
        built: BuiltScenario,
        *,
        opts: FleetOptions,
        shard: int,
        shards: int,
        t0_wall: float,
        pois: POIIndex,
    ) -> None:
        self.b = built
        self.sc = built.scenario
        self.opts = opts
        self.traj = built.trajectories
        self.proj = built.projection
        self.pois = pois
        self.t0 = t0_wall
        self.topics = Topics(opts.prefix)
        self.users = list(range(shard, self.traj.n_users, shards))
        self.mine = set(self.users)
        self.client_id = f"fleet{shard}-{uuid.uuid4().hex[:8]}"
        self.rng = np.random.default_rng([built.protocol_seed, shard])
        self.progress = Progress()
        self.records: list[QueryRecord] = []
        self.peers: dict[int, PeerMachine] = {}
        self.cell_members: dict[str, set[int]] = {}
        self.topic_owner: dict[str, int] = {}
        self.p4_waiting: dict[str, asyncio.Future[QueryDone | QueryFailed]] = {}
        self.p4_pending: set[int] = set()
        self.bytes = 0
        self.outbox: asyncio.Queue[tuple[int, list[Effect]]] = asyncio.Queue()
        self.p4_cost: dict[int, list[int]] = {}
        self.unsubs: asyncio.Queue[str] = asyncio.Queue()
        self.pert = np.full((self.traj.n_users, 2), np.inf)
        self.transport: Any = None
        self.requester: Requester | None = None
        self.diag: dict[str, int] = {
            "peer_effect_errors": 0,
            "decode_errors": 0,
            "unsubscribe_timeouts": 0,
        }

    # ----------------------------------------------------------------- clock
    def now_s(self) -> float:
        """Scenario time: wall seconds since the start."""
        return time.time() - self.t0

    async def sleep_until(self, t_s: float) -> None:
        delay = t_s - self.now_s()
        if delay > 0:
            await asyncio.sleep(delay)

    def lonlat(self, xy: tuple[float, float]) -> tuple[float, float]:
        return self.proj.point_to_lonlat(xy[0], xy[1])

    # ------------------------------------------------------------- transport
    async def publish(self, topic: str, msg: m.Message, qos: int) -> int:
        data = m.encode(msg)
        await self.transport.publish(topic, data, qos=qos)
        self.progress.messages += 1
        self.bytes += len(data)
        return len(data)

    def post(self, uid: int, effects: list[Effect]) -> None:
        """Queue effects for the publisher tasks (the dispatcher never waits on the broker)."""
        if effects:
            self.outbox.put_nowait((uid, effects))

    async def publisher(self) -> None:
        while True:
            uid, effects = await self.outbox.get()
            await self.apply(uid, effects)

    async def apply(self, uid: int, effects: list[Effect]) -> None:
        """Execute a peer machine's effects in order."""
        for e in effects:
            try:
                if isinstance(e, Send):
                    n = await self.publish(e.topic, e.message, e.qos)
                    if isinstance(e.message, m.PeerRequest | m.DSQuery):
                        c = self.p4_cost.setdefault(uid, [0, 0])
                        c[0] += 1
                        c[1] += n
                elif isinstance(e, Subscribe):
                    await self.subscribe(uid, e.topic, e.qos)
                elif isinstance(e, Unsubscribe):
                    await self.unsubscribe(uid, e.topic)
                else:
                    fut = self.p4_waiting.pop(e.query_id, None)
                    self.p4_pending.discard(uid)
                    if fut is not None and not fut.done():
                        fut.set_result(e)
            except TransportError as exc:
                self.diag["peer_effect_errors"] += 1
                log.debug("peer effect failed: %s", exc)

    async def subscribe(self, uid: int, topic: str, qos: int) -> None:
        if "/peer/cell/" in topic:
            members = self.cell_members.setdefault(topic, set())
            first = not members
            members.add(uid)
            if first:
                await self.transport.subscribe(topic, qos=qos)
        else:
            self.topic_owner[topic] = uid
            if not self.opts.p4_reply_wildcard:
                await self.transport.subscribe(topic, qos=qos)

    async def unsubscribe(self, uid: int, topic: str) -> None:
        if "/peer/cell/" in topic:
            members = self.cell_members.get(topic)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self.cell_members[topic]
                    self.unsubs.put_nowait(topic)
        else:
            self.topic_owner.pop(topic, None)
            if not self.opts.p4_reply_wildcard:
                self.unsubs.put_nowait(topic)

    async def unsubscriber(self) -> None:
        """Unsubscribe per-query topics one at a time, bounded: aiomqtt 2.5 can lose an
        UNSUBACK from amqtt under concurrent unsubscribes and would then wait forever."""
        while True:
            topic = await self.unsubs.get()
            try:
                async with asyncio.timeout(2.0):
                    await self.transport.unsubscribe(topic)
            except (TimeoutError, TransportError):
                self.diag["unsubscribe_timeouts"] += 1

    async def dispatch(self) -> None:
        """Route every received message to the requester or the peer machines."""
        assert self.requester is not None
        async for rc in self.transport.messages():
            self.progress.messages += 1
            self.bytes += len(rc.payload)
            if self.requester.feed(rc):
                continue
            try:
                await self.route_peer(rc)
            except Exception:  # a broken message must not stop the shard
                self.diag["decode_errors"] += 1
                log.debug("peer message dropped", exc_info=True)

    async def route_peer(self, rc: Received) -> None:
        now = time.time()
        members = self.cell_members.get(rc.topic)
        if members:
            msg = m.decode(rc.payload, expect=(m.PeerRequest,))
            assert isinstance(msg, m.PeerRequest)
            # Vectorised pre-filter on the devices' published (perturbed) points; each machine
            # still applies its own policy. A device handles the copy sent to its own cell.
            rx, ry = self.proj.point_to_xy(msg.lon, msg.lat)
            reach = min(self.opts.p4_max_distance_m, msg.max_distance_m or math.inf) * 1.01 + 5.0
            near = np.flatnonzero(np.hypot(self.pert[:, 0] - rx, self.pert[:, 1] - ry) <= reach)
            for uid in near.tolist():
                pm = self.peers.get(uid)
                if pm is not None and pm.cell_topic == rc.topic:
                    self.post(uid, pm.receive(msg, now))
                    self.track(uid, now)
            return
        owner = self.topic_owner.get(rc.topic)
        if owner is None:
            return
        c = self.p4_cost.setdefault(owner, [0, 0])
        c[0] += 1
        c[1] += len(rc.payload)
        try:
            msg = m.decode(rc.payload, max_bytes=8 * 1024 * 1024)
        except DecodeError:
            self.peers[owner].receive_invalid(rc.topic, now)
            return
        self.post(owner, self.peers[owner].receive(msg, now))

    def track(self, uid: int, now: float) -> None:
        """Remember device ``uid``'s published perturbed point (metres) for the pre-filter."""
        own = self.peers[uid].perturbed(now)
        if own is not None:
            self.pert[uid] = self.proj.point_to_xy(own[0], own[1])

    async def deadlines(self) -> None:
        """Drive the peer machines' collection windows and DS timeouts."""
        while True:
            await asyncio.sleep(0.02)
            now = time.time()
            for uid in list(self.p4_pending):
                pm = self.peers[uid]
                d = pm.next_deadline()
                if d is not None and d <= now:
                    self.post(uid, pm.on_deadline(now))

    # --------------------------------------------------------------- updates
    async def send_updates(self, users: list[int], t_s: float) -> None:
        xs, ys = self.traj.at(t_s)
        idx = np.asarray(users, dtype=np.int64)
        lon, lat = self.proj.to_lonlat(xs[idx], ys[idx])
        wall = time.time()
        for j, i in enumerate(users):
            uid = self.traj.user_ids[i]
            upd = m.LocationUpdate(user_id=uid, lat=float(lat[j]), lon=float(lon[j]), t=wall)
            await self.publish(self.topics.location(uid), upd, self.opts.update_qos)
            await self.apply(i, self.peers[i].set_location(float(lon[j]), float(lat[j]), wall))
            self.track(i, wall)
        self.progress.updates += len(users)

    async def updates(self) -> None:
        period = self.sc.update_interval_s
        n = len(self.users)
        phase = self.rng.uniform(0.0, period, size=n)
        nxt = phase.copy()
        while True:
            t = self.now_s()
            if t >= self.sc.duration_s:
                return
            due = np.flatnonzero(nxt <= t)
            if len(due):
                await self.send_updates([self.users[j] for j in due], t)
                nxt[due] += period
            await asyncio.sleep(0.05)

    # --------------------------------------------------------------- queries
    def new_record(self, ev: QueryEvent) -> QueryRecord:
        prof = self.b.workload.profiles[ev.user]
        rec = QueryRecord(
            protocol=ev.protocol,
            user=ev.user,
            t_request_s=self.now_s(),
            k_requested=prof.k,
            a_min_m2=prof.a_min_m2,
            a_max_m2=prof.a_max_m2,
        )
        self.records.append(rec)
        return rec

    def region_truth(
        self, rec: QueryRecord, region: m.Region, xy: tuple[float, float], user: int
    ) -> int:
        """Fill DS error and adversary errors for a region; returns users truly inside it."""
        ring = np.asarray(region.ring, dtype=np.float64)
        rx, ry = self.proj.to_xy(ring[:, 0], ring[:, 1])
        poly = shapely.Polygon(np.column_stack([rx, ry]))
        c = poly.centroid
        rec.ds_error_m = math.hypot(c.x - xy[0], c.y - xy[1])
        rec.adversary_centroid_error_m = rec.ds_error_m
        xs, ys = self.traj.at(self.now_s())
        inside = shapely.contains_xy(poly, xs, ys)
        n_inside = int(inside.sum())
        inside[user] = False  # the requester is added once, at her true position
        cand = np.vstack([np.column_stack([xs[inside], ys[inside]]), np.asarray([xy])])
        rec.adversary_error_m = expected_error_uniform(xy, cand)
        return n_inside

    def score(
        self, rec: QueryRecord, ev: QueryEvent, xy: tuple[float, float], got: list[str]
    ) -> None:
        exact = [p.id for p in self.pois.nearest_xy(xy[0], xy[1], ev.category, ev.n)]
        rec.precision, rec.recall = precision_recall(got, exact)

    async def run_query(self, ev: QueryEvent) -> None:
        await self.sleep_until(ev.t_s)
        rec = self.new_record(ev)
        self.progress.issued += 1
        self.progress.in_flight += 1
        try:
            if ev.protocol == 4:
                await self.query_p4(ev, rec)
            else:
                await self.query_trusted(ev, rec)
            rec.ok = True
            rec.t_answer_s = self.now_s()
            self.progress.answered += 1
        except RemoteError as exc:
            rec.error = exc.raw_code
        except RequestTimeout:
            rec.error = "timeout"
        except LocprivError as exc:
            rec.error = str(exc.code)
        finally:
            self.progress.in_flight -= 1
            if not rec.ok:
                self.progress.failed += 1

    async def query_trusted(self, ev: QueryEvent, rec: QueryRecord) -> None:
        assert self.requester is not None
        prof = self.b.workload.profiles[ev.user]
        uid = self.traj.user_ids[ev.user]
        xy = self.traj.user_at(ev.user, rec.t_request_s)
        lon, lat = self.lonlat(xy)
        q = m.NearestQuery(category=ev.category, n=ev.n)
        profile = m.PrivacyProfile(
            k=max(2, prof.k),
            a_min_m2=prof.a_min_m2,
            a_max_m2=prof.a_max_m2,
            max_delay_s=prof.max_delay_s,
        )
        t_unix = self.t0 + rec.t_request_s
        timeout = self.opts.request_timeout_s
        if ev.protocol in (1, 2):
            req = m.QueryRequest(
                correlation_id="x" * 32,
                reply_to=self.requester.reply_to,
                user_id=uid,
                protocol=ev.protocol,
                lat=lat,
                lon=lon,
                query=q,
                profile=profile if ev.protocol == 1 else None,
            )
            topic = self.topics.p1_query if ev.protocol == 1 else self.topics.p2_query
            ans = await self.requester.request(topic, req, timeout)
            assert isinstance(ans, m.QueryAnswer)
            rec.messages, rec.bytes = 2, _size(req) + _size(ans)
            pois = refine(ans.pois, q, lat, lon) if ans.candidates else ans.pois
            self.score(rec, ev, xy, [p.id for p in pois])
            if ev.protocol == 2:
                rec.ds_error_m = 0.0
                rec.adversary_error_m = 0.0
                return
            if ans.region is not None:
                rec.area_m2 = ans.area_m2
                rec.k_reported = ans.users
                rec.k_achieved = self.region_truth(rec, ans.region, xy, ev.user)
            if ans.t2 is not None:
                rec.held_s = max(0.0, ans.t2 - t_unix)
            return
        creq = m.CloakRequest(
            correlation_id="x" * 32,
            reply_to=self.requester.reply_to,
            user_id=uid,
            lat=lat,
            lon=lon,
            profile=profile,
        )
        reply = await self.requester.request(self.topics.p3_cloak, creq, timeout)
        assert isinstance(reply, m.CloakReply)
        rec.t_anon_s = self.now_s()
        rec.area_m2 = reply.area_m2
        rec.k_reported = reply.users
        rec.held_s = max(0.0, reply.t2 - t_unix)
        rec.k_achieved = self.region_truth(rec, reply.region, xy, ev.user)
        dsq = m.DSQuery(
            correlation_id="x" * 32,
            reply_to=self.requester.reply_to,
            query=q,
            location=m.RegionLocation(region=reply.region),
        )
        ans = await self.requester.request(self.topics.ds_query, dsq, timeout)
        assert isinstance(ans, m.QueryAnswer)
        rec.messages = 4
        rec.bytes = _size(creq) + _size(reply) + _size(dsq) + _size(ans)
        pois = refine(ans.pois, q, lat, lon) if ans.candidates else ans.pois
        self.score(rec, ev, xy, [p.id for p in pois])

    async def query_p4(self, ev: QueryEvent, rec: QueryRecord) -> None:
        pm = self.peers[ev.user]
        xy = self.traj.user_at(ev.user, rec.t_request_s)
        lon, lat = self.lonlat(xy)
        now = time.time()
        await self.apply(ev.user, pm.set_location(lon, lat, now))
        own = pm.perturbed(now)
        self.track(ev.user, now)
        if own is not None:
            ox, oy = self.proj.point_to_xy(own[0], own[1])
            rec.adversary_centroid_error_m = math.hypot(ox - xy[0], oy - xy[1])
        self.p4_cost[ev.user] = [0, 0]
        q = m.NearestQuery(category=ev.category, n=ev.n)
        qid, effects = pm.start_query(q, now)
        fut: asyncio.Future[QueryDone | QueryFailed] = asyncio.get_running_loop().create_future()
        self.p4_waiting[qid] = fut
        self.p4_pending.add(ev.user)
        await self.apply(ev.user, effects)
        try:
            async with asyncio.timeout(self.opts.request_timeout_s):
                done = await fut
        except TimeoutError:
            self.p4_waiting.pop(qid, None)
            await self.apply(ev.user, pm.cancel(qid))
            raise RequestTimeout("peer query timed out") from None
        rec.messages, rec.bytes = self.p4_cost.pop(ev.user, [0, 0])
        if isinstance(done, QueryFailed):
            log.debug("p4 query failed: %s", done.error)
            raise done.error
        a = done.answer
        rec.t_anon_s = rec.t_request_s + pm.config.window_s * a.rounds
        rec.k_achieved = a.group_size
        rec.k_reported = a.group_size
        rec.area_m2 = a.area_m2
        rec.held_s = 0.0
        cx, cy = self.proj.point_to_xy(a.centroid[1], a.centroid[0])
        rec.ds_error_m = math.hypot(cx - xy[0], cy - xy[1])
        rec.adversary_error_m = rec.ds_error_m
        self.score(rec, ev, xy, [p.id for p in a.pois])

    # -------------------------------------------------------------------- run
    def make_peers(self) -> None:
        opts = self.opts
        # One discovery grid per deployment: devices with different grids never hear each other.
        a_max = max(p.a_max_m2 for p in self.b.workload.profiles)
        side = cell_side_for(a_max, opts.p4_max_distance_m)
        for i in self.users:
            prof = self.b.workload.profiles[i]
            cfg = PeerConfig(
                k=max(2, prof.k),
                a_min_m2=prof.a_min_m2,
                a_max_m2=prof.a_max_m2,
                mechanism=GaussianMechanism(max(prof.sigma_m, 1e-6)),
                window_s=opts.p4_window_s,
                max_rounds=opts.p4_max_rounds,
                max_distance_m=opts.p4_max_distance_m,
                cell_side_m=side,
                ds_timeout_s=opts.request_timeout_s,
                responder=ResponderPolicy(max_distance_m=opts.p4_max_distance_m),
            )
            self.peers[i] = PeerMachine(
                cfg, rng=np.random.default_rng([self.b.protocol_seed, i]), topics=self.topics
            )

    async def run(self, report: Callable[[Progress], None] | None = None) -> dict[str, Any]:
        self.make_peers()
        transport = connect(self.opts.url, client_id=self.client_id)
        async with transport:
            self.transport = transport
            self.requester = Requester(transport, self.topics.reply(self.client_id))
            await self.requester.start()
            if self.opts.p4_reply_wildcard:
                await transport.subscribe(f"{self.topics.root}/reply/+", qos=1)
            tasks = [
                asyncio.create_task(self.dispatch()),
                asyncio.create_task(self.deadlines()),
                asyncio.create_task(self.unsubscriber()),
                *(asyncio.create_task(self.publisher()) for _ in range(self.opts.publishers)),
            ]
            await self.send_updates(self.users, 0.0)  # everyone reports before t = 0
            await self.sleep_until(0.0)
            upd = asyncio.create_task(self.updates())
            mine = [e for e in self.b.workload.events if e.user in self.mine]
            queries = [asyncio.create_task(self.run_query(e)) for e in mine]
            end = self.sc.duration_s
            while self.now_s() < end + self.opts.drain_s:
                await asyncio.sleep(self.opts.progress_every_s)
                self.progress.t_s = min(self.now_s(), end)
                if report is not None:
                    report(self.progress)
                if self.now_s() >= end and all(q.done() for q in queries):
                    break
            upd.cancel()
            for q in queries:
                q.cancel()
            for t in tasks:
                t.cancel()
            await asyncio.gather(upd, *queries, *tasks, return_exceptions=True)
            for rec in self.records:
                if not rec.ok and rec.error is None:
                    rec.error = "unfinished"
        self.progress.t_s = self.sc.duration_s
        peer_stats: Counter[str] = Counter()
        for pm in self.peers.values():
            peer_stats.update(pm.stats)
        return {
            "peer_stats": dict(sorted(peer_stats.items())),
            "client_id": self.client_id,
            "users": len(self.users),
            "messages": self.progress.messages,
            "bytes": self.bytes,
            "updates": self.progress.updates,
            **self.diag,
        }


async def run_fleet_async(
    built: BuiltScenario,
    opts: FleetOptions,
    *,
    shards: int = 1,
    shard_ids: list[int] | None = None,
    t0_wall: float | None = None,
    pois: POIIndex | None = None,
    report: Callable[[Progress], None] | None = None,
) -> FleetResult:
    """Run shards of the fleet in this event loop (all ``shards`` unless ``shard_ids`` given)."""
    idx = pois if pois is not None else load_poi_index(built.projection)
    t0 = t0_wall if t0_wall is not None else time.time() + opts.start_delay_s
    ids = shard_ids if shard_ids is not None else list(range(shards))
    runners = [_Shard(built, opts=opts, shard=s, shards=shards, t0_wall=t0, pois=idx) for s in ids]
    total = Progress()

    def agg(_: Progress) -> None:
        if report is None:
            return
        p = Progress()
        for r in runners:
            p.add(r.progress)
        report(p)

    diags = await asyncio.gather(*(r.run(agg) for r in runners))
    records = [rec for r in runners for rec in r.records]
    for r in runners:
        total.add(r.progress)
    stats = RunStats(
        duration_s=built.scenario.duration_s,
        users=built.trajectories.n_users,
        location_updates=total.updates,
        messages=total.messages,
        bytes=sum(int(d["bytes"]) for d in diags),
        extra={"runner": "fleet", "url_scheme": opts.url.split(":", 1)[0], "shards": len(ids)},
    )
    return FleetResult(records, stats, list(diags))


def _worker(job: tuple[BuiltScenario, FleetOptions, int, list[int], float], out: Any) -> None:
    """Process entry point: run some shards, stream progress, send the result."""
    built, opts, shards, shard_ids, t0_wall = job
    # A spawned worker is a program of its own: log like the parent asked, MQTT stacks quieter.
    logging.basicConfig(
        level=opts.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for name in ("aiomqtt", "paho", "amqtt", "transitions"):
        logging.getLogger(name).setLevel(max(logging.ERROR, opts.log_level))

    def report(p: Progress) -> None:
        with contextlib.suppress(Exception):
            out.put(("progress", shard_ids[0], p))

    try:
        res = asyncio.run(
            run_fleet_async(
                built, opts, shards=shards, shard_ids=shard_ids, t0_wall=t0_wall, report=report
            )
        )
        out.put(("result", shard_ids[0], res))
    except BaseException as exc:  # report, then let the process die
        out.put(("error", shard_ids[0], repr(exc)))
        raise


def run_fleet(
    built: BuiltScenario,
    opts: FleetOptions,
    *,
    report: Callable[[Progress], None] | None = None,
) -> FleetResult:
    """Run the fleet in ``opts.processes`` worker processes (blocking; call from a thread when an
    event loop must keep running, for example one hosting the broker and services)."""
    if opts.processes <= 0:
        return asyncio.run(run_fleet_async(built, opts, report=report))
    ctx = mp.get_context("spawn")
    out: Any = ctx.Queue()
    shards = opts.processes * opts.shards_per_process
    t0 = time.time() + opts.start_delay_s + 3.0  # spawn + import time
    procs = []
    for p in range(opts.processes):
        ids = list(range(p * opts.shards_per_process, (p + 1) * opts.shards_per_process))
        proc = ctx.Process(
            target=_worker, args=((built, opts, shards, ids, t0), out), name=f"fleet-{p}"
        )
        proc.start()
        procs.append(proc)
    latest: dict[int, Progress] = {}
    results: list[FleetResult] = []
    errors: list[str] = []
    deadline = t0 + built.scenario.duration_s + opts.drain_s + 60.0
    while len(results) + len(errors) < len(procs) and time.time() < deadline:
        try:
            kind, key, payload = out.get(timeout=0.5)
        except queue.Empty:
            if not any(p.is_alive() for p in procs) and out.empty():
                break
            continue
        if kind == "progress":
            latest[key] = payload
            if report is not None:
                agg = Progress()
                for pr in latest.values():
                    agg.add(pr)
                report(agg)
        elif kind == "result":
            results.append(payload)
        else:
            errors.append(str(payload))
    for proc in procs:
        proc.join(timeout=10.0)
        if proc.is_alive():
            proc.terminate()
    if errors:
        raise RuntimeError(f"fleet worker failed: {errors[0]}")
    if len(results) < len(procs):
        raise RuntimeError("fleet worker(s) ended without a result")
    records = [r for res in results for r in res.records]
    stats = RunStats(
        duration_s=built.scenario.duration_s,
        users=built.trajectories.n_users,
        location_updates=sum(r.stats.location_updates for r in results),
        messages=sum(r.stats.messages for r in results),
        bytes=sum(r.stats.bytes for r in results),
        extra={"runner": "fleet", "processes": len(procs), "shards": shards},
    )
    return FleetResult(records, stats, [d for r in results for d in r.shards])
