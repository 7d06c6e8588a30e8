"""Protocol 4 in a fleet shard: one real ``PeerMachine`` per device, one shared connection.

:class:`PeerHub` holds the peer machines (requester and responder) of a shard's devices and
executes their effects over the shard's broker connection:

* discovery-cell subscriptions are shared: the broker subscription is held while at least one
  device of the shard listens on the cell, and a request arriving on it is fanned out to those
  devices after a vectorised pre-filter on their published (perturbed) points; each machine
  still applies its own responder policy;
* per-query reply topics (peers': ``peer/cell/{cell}/r/{id}``; DS's: ``reply/{id}``) are
  received through the wildcards ``peer/cell/+/r/+`` and ``reply/+``
  (``FleetOptions.p4_reply_wildcard``) or subscribed one by one; topics are unsubscribed by one
  task, one at a time, each bounded to 2 s;
* effects are queued and executed by ``FleetOptions.publishers`` tasks (the dispatcher never
  waits on the broker), and a :class:`~locpriv.transport.deadlines.DeadlineTimer` drives the
  collection windows and DS timeouts of the devices with a query in flight.

All devices share one discovery grid (cell side from the largest ``a_max_m2``), as the peer
machine requires. Times given to the machines are wall-clock Unix seconds; positions are
metres in the scenario's projection unless said to be degrees.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from locpriv.errors import DecodeError, RequestTimeout, TransportError
from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe, Unsubscribe
from locpriv.protocols.p4.types import PeerAnswer
from locpriv.transport import Received
from locpriv.transport.deadlines import DeadlineTimer
from locpriv.wire import messages as m
from locpriv.wire.topics import Topics
from simulators.evaluate import QueryRecord
from simulators.peers import discovery_side, peer_machine, prefilter_m
from simulators.scenario import BuiltScenario
from simulators.workload import QueryEvent

if TYPE_CHECKING:
    from simulators.fleet.runner import FleetOptions

log = logging.getLogger(__name__)

__all__ = ["PeerHub", "Publish"]

Publish = Callable[[str, m.Message, int], Awaitable[int]]
"""``(topic, message, qos) -> encoded size in bytes``: the shard's counted publish."""


class PeerHub:
    """The peer machines of one shard's devices and the subscriptions they share.

    ``diag`` is the shard's counter dict; the hub increments ``peer_effect_errors`` and
    ``unsubscribe_timeouts`` in it.
    """

    def __init__(
        self,
        built: BuiltScenario,
        *,
        opts: FleetOptions,
        topics: Topics,
        users: list[int],
        publish: Publish,
        diag: dict[str, int],
    ) -> None:
        self.opts = opts
        self.topics = topics
        self.proj = built.projection
        self.publish = publish
        self.diag = diag
        self.transport: Any = None
        knobs = opts.p4
        side = discovery_side(built, knobs)
        self.knobs = knobs
        self.peers = {
            i: peer_machine(built, i, knobs=knobs, side_m=side, topics=topics) for i in users
        }
        self.cell_members: dict[str, set[int]] = {}
        """Discovery topic -> devices listening on it; present only while non-empty."""
        self.topic_owner: dict[str, int] = {}
        """Per-query reply topic -> the requesting device."""
        self.waiting: dict[str, asyncio.Future[Done[PeerAnswer] | Failed]] = {}
        self.pending: set[int] = set()
        """Devices with a query in flight (the deadline timer's work list)."""
        self.timer = DeadlineTimer(self, self.post_many, name="fleet peers")
        self.outbox: asyncio.Queue[tuple[int, list[Effect]]] = asyncio.Queue()
        self.cost: dict[int, list[int]] = {}
        """Device -> ``[messages, bytes]`` of its current query, both directions."""
        self.unsubs: asyncio.Queue[str] = asyncio.Queue()
        self.pert = np.full((built.trajectories.n_users, 2), np.inf)
        """Each device's published perturbed point (m); ``inf`` until it has one (always for
        other shards' devices)."""

    async def attach(self, transport: Any) -> None:
        """Use the shard's connected ``transport``; subscribe the reply wildcard if configured."""
        self.transport = transport
        if self.opts.p4_reply_wildcard:
            await transport.subscribe(f"{self.topics.root}/reply/+", qos=1)
            await transport.subscribe(f"{self.topics.root}/peer/cell/+/r/+", qos=1)

    def workers(self) -> list[asyncio.Task[None]]:
        """Start the deadline timer, the unsubscriber and the publisher tasks."""
        return [
            asyncio.create_task(self.timer.run()),
            asyncio.create_task(self.unsubscriber()),
            *(asyncio.create_task(self.publisher()) for _ in range(self.opts.publishers)),
        ]

    def stats(self) -> dict[str, int]:
        """The machines' drop/refusal counters summed over the devices, sorted by reason."""
        total: Counter[str] = Counter()
        for pm in self.peers.values():
            total.update(pm.stats)
        return dict(sorted(total.items()))

    # ---------------------------------------------------------------- effects
    def post(self, uid: int, effects: list[Effect]) -> None:
        """Queue effects for the publisher tasks (the dispatcher never waits on the broker)."""
        if effects:
            self.outbox.put_nowait((uid, effects))
        self.timer.poke()

    def post_many(self, batch: list[tuple[int, list[Effect]]]) -> None:
        for uid, effects in batch:
            self.post(uid, effects)

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
                        c = self.cost.setdefault(uid, [0, 0])
                        c[0] += 1
                        c[1] += n
                elif isinstance(e, Subscribe):
                    await self.subscribe(uid, e.topic, e.qos)
                elif isinstance(e, Unsubscribe):
                    await self.unsubscribe(uid, e.topic)
                else:
                    fut = self.waiting.pop(e.request_id, None)
                    self.pending.discard(uid)
                    if fut is not None and not fut.done():
                        fut.set_result(e)
            except TransportError as exc:
                self.diag["peer_effect_errors"] += 1
                log.debug("peer effect failed: %s", exc)

    def _is_cell(self, topic: str) -> bool:
        """A discovery cell topic (shared by the shard's devices), not a per-query one."""
        return "/peer/cell/" in topic and self.topics.peer_reply_cell(topic) is None

    async def subscribe(self, uid: int, topic: str, qos: int) -> None:
        if self._is_cell(topic):
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
        if self._is_cell(topic):
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

    # ---------------------------------------------------------------- inputs
    async def route(self, rc: Received) -> None:
        """Hand a received message to the machines it concerns; others' replies are ignored."""
        now = time.time()
        members = self.cell_members.get(rc.topic)
        if members:
            msg = m.decode(rc.payload, expect=(m.PeerRequest,))
            assert isinstance(msg, m.PeerRequest)
            # Vectorised pre-filter on the devices' published (perturbed) points; each machine
            # still applies its own policy. A device handles the copy sent to its own cell.
            rx, ry = self.proj.point_to_xy(msg.lon, msg.lat)
            reach = prefilter_m(self.knobs, msg)
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
        c = self.cost.setdefault(owner, [0, 0])
        c[0] += 1
        c[1] += len(rc.payload)
        try:
            msg = m.decode(rc.payload, max_bytes=8 * 1024 * 1024)
        except DecodeError:
            self.peers[owner].receive_invalid(rc.topic, now)
            return
        self.post(owner, self.peers[owner].receive(msg, now))

    async def set_location(self, uid: int, lon: float, lat: float, now: float) -> None:
        """Device ``uid`` is at ``(lon, lat)`` (degrees) at ``now``; may move its cell."""
        await self.apply(uid, self.peers[uid].set_location(lon, lat, now))
        self.track(uid, now)

    def track(self, uid: int, now: float) -> None:
        """Remember device ``uid``'s published perturbed point (metres) for the pre-filter."""
        own = self.peers[uid].perturbed(now)
        if own is not None:
            self.pert[uid] = self.proj.point_to_xy(own[0], own[1])

    def next_deadline(self) -> float | None:
        """The earliest deadline (Unix s) among the devices with a query in flight."""
        due = [d for d in (self.peers[u].next_deadline() for u in self.pending) if d is not None]
        return min(due, default=None)

    def on_deadline(self, now: float) -> list[tuple[int, list[Effect]]]:
        """Collection windows and DS timeouts that are due, as ``(device, effects)``."""
        out: list[tuple[int, list[Effect]]] = []
        for uid in list(self.pending):
            pm = self.peers[uid]
            d = pm.next_deadline()
            if d is not None and d <= now:
                out.append((uid, pm.on_deadline(now)))
        return out

    # ----------------------------------------------------------------- query
    async def query(self, ev: QueryEvent, rec: QueryRecord, xy: tuple[float, float]) -> PeerAnswer:
        """Run ``ev`` from device ``ev.user`` at its true position ``xy``.

        Fills ``rec``'s cost (the requester's messages and bytes, also when the query fails;
        not on timeout), anonymisation time (``window_s`` x rounds after the request) and the
        error of a peer who sees the device's perturbed point; the caller scores the answer.
        Raises :class:`RequestTimeout` after ``request_timeout_s`` or the query's own error.
        """
        pm = self.peers[ev.user]
        lon, lat = self.proj.point_to_lonlat(xy[0], xy[1])
        now = time.time()
        await self.apply(ev.user, pm.set_location(lon, lat, now))
        own = pm.perturbed(now)
        self.track(ev.user, now)
        if own is not None:
            ox, oy = self.proj.point_to_xy(*own)
            rec.adversary_centroid_error_m = math.hypot(ox - xy[0], oy - xy[1])
        self.cost[ev.user] = [0, 0]
        q = m.NearestQuery(category=ev.category, n=ev.n)
        qid, effects = pm.start_query(q, now)
        fut: asyncio.Future[Done[PeerAnswer] | Failed] = asyncio.get_running_loop().create_future()
        self.waiting[qid] = fut
        self.pending.add(ev.user)
        await self.apply(ev.user, effects)
        self.timer.poke()
        try:
            async with asyncio.timeout(self.opts.request_timeout_s):
                done = await fut
        except TimeoutError:
            self.waiting.pop(qid, None)
            await self.apply(ev.user, pm.cancel(qid))
            raise RequestTimeout("peer query timed out") from None
        rec.messages, rec.bytes = self.cost.pop(ev.user, [0, 0])
        if isinstance(done, Failed):
            log.debug("p4 query failed: %s", done.error)
            raise done.error
        rec.t_anon_s = rec.t_request_s + pm.config.window_s * done.value.rounds
        return done.value
