"""Protocol 4 nodes of the virtual-clock runner: one real ``PeerMachine`` per device.

Mixed into :class:`simulators.virtual._Runner`; see :mod:`simulators.virtual` for the model.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from locpriv.core.geo import LocalProjection
from locpriv.errors import DecodeError
from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe, Unsubscribe
from locpriv.protocols.ids import counter_ids
from locpriv.protocols.p4.machine import PeerMachine
from locpriv.protocols.p4.types import PeerAnswer
from locpriv.wire import messages as m
from locpriv.wire.messages import REPLY_MAX_BYTES
from locpriv.wire.topics import Topics
from simulators.evaluate import QueryRecord
from simulators.outcomes import error_key, score_peer
from simulators.peers import peer_machine, prefilter_m
from simulators.scenario import BuiltScenario
from simulators.virtual.bus import VirtualBus, VirtualTimer
from simulators.workload import QueryEvent, UserProfile

if TYPE_CHECKING:
    from simulators.virtual.runner import VirtualConfig

__all__ = ["Ctx", "PeerNodes"]


@dataclass
class Ctx:
    rid: int
    record: QueryRecord
    event: QueryEvent
    xy: tuple[float, float]
    lonlat: tuple[float, float]
    fix_xy: tuple[float, float] | None = None
    """The fix a P1-P3 request reported (metres; None: not sent yet)."""
    reply_topic: str = ""
    query: m.NearestQuery | None = None
    qid: str = ""


class PeerNodes:
    """The devices' peer machines on the bus (requester and responder)."""

    b: BuiltScenario
    cfg: VirtualConfig
    proj: LocalProjection
    topics: Topics
    bus: VirtualBus
    ctx: dict[int, Ctx]
    records: list[QueryRecord]
    p4_side: int
    peers: dict[int, PeerMachine]
    peer_handlers: dict[int, Any]
    peer_timers: dict[int, VirtualTimer[Effect]]
    peer_set: dict[int, tuple[float, float, float]]
    qid_rid: dict[str, int]
    pert: NDArray[np.float64]
    reach_j: NDArray[np.float64]
    upd_xy: NDArray[np.float64]
    cell_cache: tuple[bytes, float, m.PeerRequest, NDArray[np.int64]] | None
    p4_rounds: Counter[int]

    def send(self, s: Send, now: float, tag: int | None) -> None:
        raise NotImplementedError

    def exact(self, ev: QueryEvent, xy: tuple[float, float]) -> list[str]:
        raise NotImplementedError

    # ------------------------------------------------------------------- P4
    def peer(self, i: int) -> PeerMachine:
        pm = self.peers.get(i)
        if pm is None:
            pm = peer_machine(
                self.b,
                i,
                knobs=self.cfg.p4,
                side_m=self.p4_side,
                topics=self.topics,
                ids=counter_ids(f"d{i}x"),
            )
            self.peers[i] = pm

            def handle(topic: str, payload: bytes, tag: object, now: float) -> None:
                self.on_peer_reply(i, topic, payload, tag, now)

            self.peer_handlers[i] = handle
        return pm

    def locate(self, i: int, x: float, y: float, now: float) -> None:
        """Device ``i``'s true position (metres) into its machine; track its published point."""
        last = self.peer_set.get(i)
        if last is not None and (last[0] == now or (last[1] == x and last[2] == y)):
            return  # not moved: the machine refreshes its perturbed point itself
        pm = self.peer(i)
        self.peer_set[i] = (now, x, y)
        lon, lat = self.proj.point_to_lonlat(x, y)
        self.apply(i, pm.set_location(lon, lat, now), now, None)
        own = pm.perturbed(now)
        if own is not None:
            self.pert[i] = self.proj.point_to_xy(own[0], own[1])

    def p4_start(self, ctx: Ctx, prof: UserProfile, now: float) -> None:
        i = ctx.event.user
        self.locate(i, ctx.xy[0], ctx.xy[1], now)
        pm = self.peers[i]
        ox, oy = self.pert[i]
        ctx.record.adversary_centroid_error_m = math.hypot(ox - ctx.xy[0], oy - ctx.xy[1])
        assert ctx.query is not None
        qid, effects = pm.start_query(ctx.query, now)
        ctx.qid = qid
        self.qid_rid[qid] = ctx.rid
        self.apply(i, effects, now, ctx.rid)

    def apply(self, i: int, effects: list[Effect], now: float, tag: int | None) -> None:
        pm = self.peers[i]
        for e in effects:
            if isinstance(e, Send):
                t = tag
                if t is None:  # a later round or the DS query: the device's open query
                    open_q = [r for q, r in self.qid_rid.items() if self.ctx[r].event.user == i]
                    t = open_q[0] if len(open_q) == 1 else None
                    if t is None and open_q:  # several: the machine's correlation map
                        cid = getattr(e.message, "correlation_id", None)
                        t = self.qid_rid.get(pm.query_of(cid or "") or "")
                self.send(e, now, t)
            elif isinstance(e, Subscribe):
                if e.topic != pm.cell_topic:  # cells are routed by on_cell
                    self.bus.subscribe(e.topic, self.peer_handlers[i])
            elif isinstance(e, Unsubscribe):
                self.bus.unsubscribe(e.topic, self.peer_handlers[i])
            elif isinstance(e, Done | Failed):
                self.p4_done(e, now)
        timer = self.peer_timers.get(i)
        if timer is None:
            timer = self.peer_timers[i] = VirtualTimer(
                self.bus, pm, functools.partial(self.apply_due, i)
            )
        timer.arm()

    def apply_due(self, i: int, effects: list[Effect], now: float) -> None:
        self.apply(i, effects, now, None)

    def on_cell(self, topic: str, payload: bytes, tag: object, now: float) -> None:
        """Discovery traffic: the devices listening on ``topic`` (pre-filtered) receive it."""
        cached = self.cell_cache
        if cached is not None and cached[0] == payload and cached[1] == now:
            msg, close = cached[2], cached[3]  # the same broadcast on the next cell of the block
        else:
            decoded = m.decode(payload, expect=(m.PeerRequest,))
            assert isinstance(decoded, m.PeerRequest)
            msg = decoded
            rx, ry = self.proj.point_to_xy(msg.lon, msg.lat)
            reach = prefilter_m(self.cfg.p4, msg)
            # devices know where they were at their last location update (as they report it)
            xs, ys = self.upd_xy[:, 0], self.upd_xy[:, 1]
            near = np.flatnonzero(np.hypot(xs - rx, ys - ry) <= reach + self.reach_j)
            for j in near.tolist():
                self.locate(j, float(xs[j]), float(ys[j]), now)
            close = near[np.hypot(self.pert[near, 0] - rx, self.pert[near, 1] - ry) <= reach]
            self.cell_cache = (payload, now, msg, close)
        t = tag if isinstance(tag, int) else None
        for j in close.tolist():
            pm = self.peers[j]
            if pm.cell_topic == topic:
                self.apply(j, pm.receive(msg, now), now, t)

    def on_peer_reply(self, i: int, topic: str, payload: bytes, tag: object, now: float) -> None:
        pm = self.peers[i]
        try:
            msg = m.decode(payload, max_bytes=REPLY_MAX_BYTES)
        except DecodeError:
            pm.receive_invalid(topic, now)
            return
        self.apply(i, pm.receive(msg, now), now, None)

    def finished(self, rids: dict[str, int], e: Done[Any] | Failed) -> Ctx | None:
        """The context of a finished request (its id popped from ``rids``), or None when the
        request is unknown or failed (the failure is then recorded)."""
        rid = rids.pop(e.request_id, None)
        if rid is None:
            return None
        ctx = self.ctx[rid]
        if isinstance(e, Failed):
            ctx.record.error = error_key(e.error)
            return None
        return ctx

    def p4_done(self, e: Done[PeerAnswer] | Failed, now: float) -> None:
        ctx = self.finished(self.qid_rid, e)
        if ctx is None or not isinstance(e, Done):
            return
        rec, a = ctx.record, e.value
        rec.t_anon_s = now - a.ds_s
        score_peer(rec, a, exact=self.exact(ctx.event, ctx.xy), proj=self.proj, xy=ctx.xy)
        rec.t_answer_s = now
        rec.ok = True
        self.p4_rounds[a.rounds] += 1
