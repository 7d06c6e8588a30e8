"""One fleet shard: a slice of the devices on one broker connection, against a real clock.

A :class:`Shard` holds the devices ``i`` with ``i % shards == shard`` and **one** broker
connection for all of them. Scenario time is wall time since the start ``t0`` (Unix seconds).
Per device the shard:

* publishes a :class:`~locpriv.wire.messages.LocationUpdate` on ``loc/{user_id}`` every
  ``update_interval_s`` (QoS ``update_qos``, random phase; everyone once before the start);
* runs the scenario's queries at their instants: P1/P2 :class:`QueryRequest` to the mediator,
  P3 :class:`CloakRequest` to the anonymizer then a :class:`DSQuery` for the region and local
  refinement (:func:`locpriv.core.poi.refine`), all through one
  :class:`locpriv.service.rpc.Requester` (one
  reply topic per shard; requests carry the device's ``user_id``); P4 through the shard's
  :class:`simulators.shard_peers.PeerHub` (one peer machine per device).

Each query yields one :class:`~simulators.evaluate.QueryRecord`, scored against ground truth
from the trajectories (true position, users truly inside a region, exact POI answer); see
:mod:`simulators.fleet` for what its fields mean in a fleet run.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from locpriv.core.geo import region_from_wire
from locpriv.core.poi import POIIndex, refine
from locpriv.errors import LocprivError, RemoteError, RequestTimeout
from locpriv.service.rpc import Requester
from locpriv.transport import connect
from locpriv.wire import messages as m
from locpriv.wire.topics import Topics
from simulators.evaluate import QueryRecord, precision_recall, region_truth
from simulators.scenario import BuiltScenario
from simulators.shard_peers import PeerHub
from simulators.workload import QueryEvent

if TYPE_CHECKING:
    from simulators.fleet import FleetOptions, Progress

log = logging.getLogger(__name__)

__all__ = ["Shard"]


def _size(msg: m.Message) -> int:
    return len(m.encode(msg))


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
        self.requester: Requester | None = None
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

    def lonlat(self, xy: tuple[float, float]) -> tuple[float, float]:
        return self.proj.point_to_lonlat(xy[0], xy[1])

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
        assert self.requester is not None
        async for rc in self.transport.messages():
            self.progress.messages += 1
            self.bytes += len(rc.payload)
            if self.requester.feed(rc):
                continue
            try:
                await self.hub.route(rc)
            except Exception:  # a broken message must not stop the shard
                self.diag["decode_errors"] += 1
                log.debug("peer message dropped", exc_info=True)

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

    def region_truth(
        self, rec: QueryRecord, region: m.Region, xy: tuple[float, float], user: int
    ) -> int:
        """Fill DS error and adversary errors for a region; returns users truly inside it."""
        poly = self.proj.geometry_to_xy(region_from_wire(region))
        return region_truth(rec, poly, xy, self.traj.at(self.now_s()), user)

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
            topic = (self.topics.p1_query if ev.protocol == 1 else self.topics.p2_query)(uid)
            ans = await self.requester.request(topic, req, timeout)
            assert isinstance(ans, m.QueryAnswer)
            rec.messages, rec.bytes = 2, _size(req) + _size(ans)
            pois = refine(ans.pois, q, lon=lon, lat=lat) if ans.candidates else ans.pois
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
        reply = await self.requester.request(self.topics.p3_cloak(uid), creq, timeout)
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
        pois = refine(ans.pois, q, lon=lon, lat=lat) if ans.candidates else ans.pois
        self.score(rec, ev, xy, [p.id for p in pois])

    async def query_p4(self, ev: QueryEvent, rec: QueryRecord) -> None:
        xy = self.traj.user_at(ev.user, rec.t_request_s)
        got = await self.hub.query(ev, rec, xy)
        self.score(rec, ev, xy, got)

    # -------------------------------------------------------------------- run
    async def run(self, report: Callable[[Progress], None] | None = None) -> dict[str, Any]:
        """Connect, report everyone's location, run the queries, drain; returns diagnostics."""
        transport = connect(self.opts.url, client_id=self.client_id)
        async with transport:
            self.transport = transport
            self.requester = Requester(transport, self.topics.reply(self.client_id))
            await self.requester.start()
            await self.hub.attach(transport)
            tasks = [asyncio.create_task(self.dispatch()), *self.hub.workers()]
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
