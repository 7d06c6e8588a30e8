"""One fleet shard: a slice of the devices on one broker connection, against a real clock.

A :class:`Shard` holds the devices ``i`` with ``i % shards == shard`` and **one** broker
connection for all of them. Scenario time is wall time since the start ``t0`` (Unix seconds).
Per device the shard:

* publishes a :class:`~locpriv.wire.messages.LocationUpdate` on ``loc/{tile}/{user_id}`` every
  ``update_interval_s`` (QoS ``update_qos``, random phase; everyone once before the start),
  the tile from the deployment configuration the anonymizer keeps retained (waited for up to
  ``config_wait_s``; without it, as for a Protocol 4 run with no anonymizer, one tile);
* runs the scenario's queries at their instants: Protocols 1-3 through one
  :class:`~locpriv.protocols.user.UserMachine` for the shard (the same requester an app's
  :class:`~locpriv.client.Client` drives: requests, P3's DS hop from a fresh reply topic,
  local refinement), Protocol 4 through the shard's :class:`simulators.fleet.hub.PeerHub`
  (one peer machine per device).

Each query yields one :class:`~simulators.evaluate.QueryRecord`, scored by
:mod:`simulators.outcomes` against ground truth from the trajectories; see
:mod:`simulators.fleet.runner` for what its fields mean in a fleet run.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from locpriv.core.geo import LonLat
from locpriv.core.poi import POIIndex
from locpriv.errors import DecodeError
from locpriv.protocols.effects import Effect, Send, Subscribe, Unsubscribe
from locpriv.protocols.user import Answer, UserMachine
from locpriv.transport import Received, connect
from locpriv.transport.deadlines import DeadlineTimer
from locpriv.transport.effects import settle_outcome
from locpriv.wire import messages as m
from locpriv.wire.topics import Topics
from simulators.evaluate import QueryRecord
from simulators.fleet.hub import PeerHub
from simulators.outcomes import error_key, score_peer, score_trusted
from simulators.scenario import BuiltScenario
from simulators.workload import QueryEvent

if TYPE_CHECKING:
    from simulators.fleet.runner import FleetOptions, Progress

log = logging.getLogger(__name__)

__all__ = ["Shard"]


class Shard:
    """One broker connection carrying a slice of the fleet.

    ``progress`` is this shard's own counters (the runner sums them over shards); ``t0_wall``
    is the Unix time of scenario time 0.
    """

    def __init__(
        self,
        built: BuiltScenario,
        *,
        opts: FleetOptions,
        shard: int,
        shards: int,
        t0_wall: float,
        pois: POIIndex,
        progress: Progress,
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
        self.progress = progress
        self.records: list[QueryRecord] = []
        self.bytes = 0
        self.transport: Any = None
        self.requester = UserMachine(
            self.topics, self.topics.reply(self.client_id), bounds=opts.bounds
        )
        self.timer = DeadlineTimer(self.requester, self.effects, name="fleet requester")
        self.waiting: dict[str, asyncio.Future[Any]] = {}
        self.cost: dict[str, list[int]] = {}
        """Open P1-P3 request -> ``[messages, bytes]`` in both directions."""
        self.cloaked_at: dict[str, float] = {}
        """Open P3 request -> scenario time its cloak reply arrived."""
        self.hops: set[str] = set()
        """Fresh reply topics of the requester's P3 DS hops."""
        self.diag: dict[str, int] = {
            "peer_effect_errors": 0,
            "decode_errors": 0,
            "unsubscribe_timeouts": 0,
        }
        self.hub = PeerHub(
            built,
            opts=opts,
            topics=self.topics,
            users=self.users,
            publish=self.publish,
            diag=self.diag,
        )

    # ----------------------------------------------------------------- clock
    def now_s(self) -> float:
        """Scenario time: wall seconds since the start."""
        return time.time() - self.t0

    async def sleep_until(self, t_s: float) -> None:
        delay = t_s - self.now_s()
        if delay > 0:
            await asyncio.sleep(delay)

    # ------------------------------------------------------------- transport
    async def publish(self, topic: str, msg: m.Message, qos: int) -> int:
        """Publish ``msg`` and count it; returns its encoded size in bytes."""
        data = m.encode(msg)
        await self.transport.publish(topic, data, qos=qos)
        self.progress.messages += 1
        self.bytes += len(data)
        return len(data)

    async def dispatch(self) -> None:
        """Route every received message to the requester or the peer machines."""
        reply_to = self.requester.reply_to
        async for rc in self.transport.messages():
            self.progress.messages += 1
            self.bytes += len(rc.payload)
            if rc.topic == reply_to or rc.topic in self.hops or rc.topic == self.topics.config:
                self.receive_reply(rc)
                continue
            try:
                await self.hub.route(rc)
            except Exception:  # a broken message must not stop the shard
                self.diag["decode_errors"] += 1
                log.debug("peer message dropped", exc_info=True)

    def receive_reply(self, rc: Received) -> None:
        """A reply for the P1-P3 requester: count it against its request, feed the machine."""
        try:
            msg = m.decode(rc.payload, max_bytes=m.REPLY_MAX_BYTES)
        except DecodeError:
            self.diag["decode_errors"] += 1
            return
        rid = self.requester.request_of(getattr(msg, "correlation_id", None))
        if rid is not None:
            cost = self.cost.setdefault(rid, [0, 0])
            cost[0] += 1
            cost[1] += len(rc.payload)
            if isinstance(msg, m.CloakReply):
                self.cloaked_at[rid] = self.now_s()
        self.effects(self.requester.receive(msg, time.time()))
        self.timer.poke()

    def effects(self, effects: list[Effect], rid: str | None = None) -> None:
        """Outcomes at once; publishes and (un)subscriptions in the background."""
        rest = [e for e in effects if not self.settle(e)]
        if rest:
            asyncio.get_running_loop().create_task(self.run_effects(rest, rid))

    def settle(self, e: Effect) -> bool:
        return settle_outcome(self.waiting, e, pop=True)

    async def run_effects(self, effects: list[Effect], rid: str | None) -> None:
        """Carry out the requester's effects in order; count what it sends per request."""
        for e in effects:
            if isinstance(e, Send):
                size = await self.publish(e.topic, e.message, e.qos)
                owner = rid or self.requester.request_of(getattr(e.message, "correlation_id", None))
                if owner is not None:
                    cost = self.cost.setdefault(owner, [0, 0])
                    cost[0] += 1
                    cost[1] += size
            elif isinstance(e, Subscribe):
                self.hops.add(e.topic)
                if not self.opts.p4_reply_wildcard:
                    await self.transport.subscribe(e.topic, qos=e.qos)
            elif isinstance(e, Unsubscribe):
                self.hops.discard(e.topic)
                if not self.opts.p4_reply_wildcard:
                    self.hub.unsubs.put_nowait(e.topic)
            else:
                self.settle(e)

    # --------------------------------------------------------------- updates
    async def send_updates(self, users: list[int], t_s: float) -> None:
        xs, ys = self.traj.at(t_s)
        idx = np.asarray(users, dtype=np.int64)
        lon, lat = self.proj.to_lonlat(xs[idx], ys[idx])
        wall = time.time()
        for j, i in enumerate(users):
            uid = self.traj.user_ids[i]
            where = LonLat(float(lon[j]), float(lat[j]))
            for upd in self.requester.location_update(user_id=uid, position=where, now=wall):
                await self.publish(upd.topic, upd.message, self.opts.update_qos)
            await self.hub.set_location(i, float(lon[j]), float(lat[j]), wall)
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

    def exact(self, ev: QueryEvent, xy: tuple[float, float]) -> list[str]:
        return [p.id for p in self.pois.nearest_xy(xy[0], xy[1], ev.category, ev.n)]

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
        except Exception as exc:
            rec.error = error_key(exc)
        finally:
            self.progress.in_flight -= 1
            if not rec.ok:
                self.progress.failed += 1

    async def query_trusted(self, ev: QueryEvent, rec: QueryRecord) -> None:
        prof = self.b.workload.profiles[ev.user]
        xy = self.traj.user_at(ev.user, rec.t_request_s)
        lon, lat = self.proj.point_to_lonlat(*xy)
        requester = self.requester
        profile = requester.merge_profile(
            prof.k, prof.a_min_m2, prof.a_max_m2, prof.max_delay_s, prof.session_s
        )
        rid, effects = requester.query(
            m.NearestQuery(category=ev.category, n=ev.n),
            protocol=ev.protocol,
            user_id=self.traj.user_ids[ev.user],
            position=LonLat(lon, lat),
            profile=profile,
            now=time.time(),
            timeout_s=self.opts.request_timeout_s,
        )
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        self.cost[rid] = [0, 0]
        try:
            await self.run_effects(effects, rid)
            self.timer.poke()
            answer = await fut
        finally:
            rec.messages, rec.bytes = self.cost.pop(rid, [0, 0])
            cloaked = self.cloaked_at.pop(rid, None)
        assert isinstance(answer, Answer)
        rec.t_anon_s = cloaked if ev.protocol == 3 else None
        score_trusted(
            rec,
            answer,
            exact=self.exact(ev, xy),
            proj=self.proj,
            xy=xy,
            positions=self.traj.at(self.now_s()),
            user=ev.user,
            t_request=self.t0 + rec.t_request_s,
        )

    async def query_p4(self, ev: QueryEvent, rec: QueryRecord) -> None:
        xy = self.traj.user_at(ev.user, rec.t_request_s)
        answer = await self.hub.query(ev, rec, xy)
        score_peer(rec, answer, exact=self.exact(ev, xy), proj=self.proj, xy=xy)

    async def await_deployment(self, wait_s: float = 5.0) -> None:
        """Wait (bounded) for the retained deployment configuration; without one, one tile."""
        deadline = time.monotonic() + wait_s
        while self.requester.deployment is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if self.requester.deployment is None:
            log.info("no deployment configuration on %s: one tile", self.topics.config)
            p = self.proj
            self.requester.configure(m.DeploymentConfig(lat0_deg=p.lat0_deg, lon0_deg=p.lon0_deg))

    # -------------------------------------------------------------------- run
    async def run(self, report: Callable[[Progress], None] | None = None) -> dict[str, Any]:
        """Connect, report everyone's location, run the queries, drain; returns diagnostics."""
        transport = connect(self.opts.url, client_id=self.client_id)
        async with transport:
            self.transport = transport
            if not self.opts.p4_reply_wildcard:  # else reply/+ covers it (no duplicates)
                await transport.subscribe(self.requester.reply_to, qos=1)
            await self.hub.attach(transport)
            await transport.subscribe(self.topics.config, qos=1)
            tasks = [
                asyncio.create_task(self.dispatch()),
                asyncio.create_task(self.timer.run()),
                *self.hub.workers(),
            ]
            await self.await_deployment()
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
        return {
            "peer_stats": self.hub.stats(),
            "client_id": self.client_id,
            "users": len(self.users),
            "messages": self.progress.messages,
            "bytes": self.bytes,
            "updates": self.progress.updates,
            **self.diag,
        }
