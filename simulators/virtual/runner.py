"""Virtual-clock runner: a scenario through the real protocol machines with simulated time.

No broker and no asyncio, but the same sans-I/O machines and wire messages as a deployment:
every message is encoded (:func:`locpriv.wire.messages.encode`), routed by topic through a
:class:`simulators.virtual.bus.VirtualBus` (MQTT filter matching, ``hop_latency_s`` per hop,
a virtual-time event queue) and decoded by its receiver. Same scenario and seed, same records
(``tests/simulators/test_sim_virtual.py`` checks it).

Nodes on the bus:

* the trusted service: :class:`locpriv.protocols.p1.TrustedCore` (anonymizer with a
  :class:`locpriv.core.cloak.cloaker.Cloaker`, P1 mediator, P2 mediator) behind a
  :class:`locpriv.service.driver.Dispatcher` with :func:`locpriv.service.driver.anonymizer_routes`;
  its
  timers (epoch preparation, temporal cloaking, DS timeouts) run from ``next_deadline`` on the
  virtual clock;
* DS: :class:`locpriv.service.ds.DSCore` over the scenario's POI index;
* the P1-P3 clients: one reply topic per query; P3 clients query DS with the region and refine;
* one :class:`locpriv.protocols.p4.machine.PeerMachine` per device (requester and responder,
  created at its first use, configured like :mod:`simulators.fleet`): broadcasts to the 3×3
  discovery cells, collection windows, thinning, further rounds when a group is infeasible,
  the DS query at the group centroid and the refinement all happen in the machine.

Location updates: every user publishes a :class:`~locpriv.wire.messages.LocationUpdate` every
``update_interval_s`` (uniform random phase; all users once at t = 0), in ticks of ``tick_s``.
A device's P4 position is set from its trajectory when it queries or may answer a request
(a vectorised pre-filter on true positions, as the fleet does, skips the devices that cannot
be in reach; each machine still applies its own responder policy).

Counters: each record's ``messages``/``bytes`` are the publishes belonging to its query (one
publish = one message, whatever the number of subscribers); ``stats.extra["wire"]`` counts
publishes by protocol and message type.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locpriv.core.cloak.cloaker import CloakConfig, Cloaker
from locpriv.core.geo import LocalProjection, LonLat
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois
from locpriv.errors import DecodeError
from locpriv.protocols.dispatch import Dispatcher, Route
from locpriv.protocols.ds import DSCore
from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe, Unsubscribe
from locpriv.protocols.ids import counter_ids
from locpriv.protocols.p2 import Mediator
from locpriv.protocols.p3 import Anonymizer
from locpriv.protocols.p4.machine import (
    PeerMachine,
)
from locpriv.protocols.trusted import TrustedCore, anonymizer_routes
from locpriv.protocols.user import Answer, ProfileBounds, UserMachine
from locpriv.transport import Received
from locpriv.wire import messages as m
from locpriv.wire.messages import REPLY_MAX_BYTES
from locpriv.wire.topics import Topics
from simulators.evaluate import QueryRecord, RunStats
from simulators.fixes import Fixes
from simulators.outcomes import score_trusted
from simulators.peers import P4Knobs, discovery_side
from simulators.scenario import BuiltScenario, Scenario
from simulators.virtual.bus import VirtualBus, VirtualTimer
from simulators.virtual.peers import Ctx, PeerNodes
from simulators.workload import QueryEvent, UserProfile

log = logging.getLogger(__name__)

F64 = NDArray[np.float64]


__all__ = ["DEFAULT_POIS", "VirtualConfig", "VirtualResult", "load_poi_index", "run_virtual"]


def load_poi_index(projection: LocalProjection, path: str | Path | None = None) -> POIIndex:
    """The POI index of ``path`` (default: the demo POIs) in ``projection``'s metres."""
    return POIIndex(load_pois(path or DEFAULT_POIS), projection)


@dataclass(frozen=True)
class VirtualConfig:
    """Knobs of the virtual runner; lengths in metres, areas m², times s."""

    tick_s: float = 1.0
    k_max: int = 100
    max_delay_s_bound: float = 60.0
    hop_latency_s: float = 0.002
    """Delivery delay of every publish (one broker hop), virtual seconds."""
    ds_timeout_s: float = 5.0
    prepare_epochs: bool = False
    """Let the anonymizer pre-build each epoch's partitions at the epoch boundary (the
    service does, to keep them off the request path; on a virtual clock that only costs time,
    so requests build them lazily unless this is set)."""
    p4: P4Knobs = field(
        default_factory=lambda: P4Knobs(ds_timeout_s=5.0, max_replies=64, node_budget=20_000)
    )
    """The devices' Protocol 4 settings (the same knobs as the fleet's): by default at most 64
    candidates per group and an exact search of at most 20,000 nodes, to keep studies fast."""
    cloak: CloakConfig | None = None
    """Cloaker configuration; by default the scenario extent with 1 km margin, epoch ``tick_s``."""
    fix_reply_s: float | None = 1.0
    """How long a device takes to answer a :class:`~locpriv.wire.messages.FixWanted` with a
    location update of where it is then (a fresh fix and the hops), virtual seconds; None:
    devices ignore fix requests (apps that do not implement them)."""
    fix_scatter_m: float = 0.0
    """Per-axis scatter (m) of every P1-P3 fix a device reports (location updates, fix
    answers and the fix a request carries; :class:`~simulators.fixes.Fixes`): the attacks and
    the answers' scores use where users really are. 0: exact fixes."""
    says_accuracy: bool = True
    """With ``fix_scatter_m`` > 0: reports give their accuracy, as phones do (else none)."""


@dataclass
class VirtualResult:
    """Records of every query and run counters."""

    records: list[QueryRecord]
    stats: RunStats
    extra: dict[str, Any] = field(default_factory=dict)


def default_cloak_config(sc: Scenario, cfg: VirtualConfig, **knobs: Any) -> CloakConfig:
    """The cloaker configuration a virtual run uses unless ``cfg.cloak`` says otherwise: the
    scenario's extent with a 1 km margin (local metres), ``cfg``'s k and delay bounds, epochs
    of ``cfg.tick_s`` and users forgotten after three missed updates (at least 300 s);
    ``knobs`` set any other :class:`CloakConfig` field (e.g. ``session_risk``)."""
    w, h = sc.extent_m()
    margin = 1000.0
    return CloakConfig(
        **{
            "k_min": 1,
            "k_max": cfg.k_max,
            "max_delay_s_bound": cfg.max_delay_s_bound,
            "world": (-w / 2 - margin, -h / 2 - margin, w / 2 + margin, h / 2 + margin),
            "epoch_s": cfg.tick_s,
            "user_ttl_s": max(300.0, 3 * sc.update_interval_s),
            **knobs,
        }
    )


class _CountingMediator(Mediator):
    """The real mediator, remembering which user request each DS query serves (accounting)."""

    def __init__(self, owner: _Runner, **kw: Any) -> None:
        super().__init__(**kw)
        self.owner = owner

    def forward(self, **kw: Any) -> list[Send]:
        out = super().forward(**kw)
        cid = kw["user_correlation_id"]
        rid = self.owner.rid_of_cid(cid)
        for s in out:
            if isinstance(s.message, m.DSQuery) and rid is not None:
                self.owner.cid_rid[s.message.correlation_id] = rid
        return out


class _Runner(PeerNodes):
    def __init__(self, built: BuiltScenario, cfg: VirtualConfig, pois: POIIndex) -> None:
        self.b = built
        self.sc = built.scenario
        self.cfg = cfg
        self.traj = built.trajectories
        self.proj = built.projection
        self.pois = pois
        self.rng = np.random.default_rng(built.protocol_seed)
        self.topics = Topics()
        self.bus = VirtualBus(cfg.hop_latency_s)
        self.cloak_cfg = cfg.cloak or default_cloak_config(self.sc, cfg)
        self.records: list[QueryRecord] = []
        self.ctx: dict[int, Ctx] = {}
        self.cid_rid: dict[str, int] = {}
        self.updates = 0
        # ---- trusted service (P1-P3) and DS
        core_reply = self.topics.reply("sim-anonymizer")
        self.mediator = _CountingMediator(
            self,
            ds_topic=self.topics.ds_query,
            reply_to=core_reply,
            ds_timeout_s=cfg.ds_timeout_s,
            max_pending=1_000_000,
        )
        # seeded: the cloaker's secret grid phase and session grids are random
        self.cloaker = Cloaker(self.cloak_cfg, rng=np.random.default_rng([built.protocol_seed, 7]))
        anonymizer = Anonymizer(
            self.cloaker,
            self.proj,
            prepare_epochs=cfg.prepare_epochs,
            topics=self.topics,
        )
        self.core = TrustedCore(anonymizer, self.mediator)
        self.core_dispatch = Dispatcher(
            name="anonymizer",
            machine=self.core,
            routes=anonymizer_routes(self.topics, core_reply, anonymizer=anonymizer),
            topics=self.topics,
            max_payload=REPLY_MAX_BYTES,
        )
        self.core_timer = VirtualTimer(self.bus, self.core, self.send_all)
        for route in self.core_dispatch.routes:
            self.bus.subscribe(route.topic_filter, self.on_core)
        self.ds_dispatch = Dispatcher(
            name="ds",
            machine=DSCore(pois),
            routes=[Route(self.topics.ds_query, (m.DSQuery,))],
            topics=self.topics,
            max_payload=65536,
        )
        self.bus.subscribe(self.topics.ds_query, self.on_ds)
        # ---- P1-P3 users: one requester machine, as an app's Client drives it
        cc = self.cloak_cfg
        self.requester = UserMachine(
            self.topics,
            self.topics.reply("sim-users"),
            bounds=ProfileBounds(k_min=cc.k_min, k_max=cc.k_max, max_delay_s=cc.max_delay_s_bound),
            ids=counter_ids("u"),
            deployment=m.DeploymentConfig(lat0_deg=self.proj.lat0_deg, lon0_deg=self.proj.lon0_deg),
        )
        self.request_rid: dict[str, int] = {}
        """Requester request id -> index of the query (record)."""
        self.requester_timer = VirtualTimer(self.bus, self.requester, self.apply_requester)
        self.bus.subscribe(self.requester.reply_to, self.on_requester)
        # ---- P4 devices
        profiles = built.workload.profiles
        self.p4_side = discovery_side(built, cfg.p4)
        self.peers: dict[int, PeerMachine] = {}
        self.peer_handlers: dict[int, Any] = {}
        self.peer_timers: dict[int, VirtualTimer[Effect]] = {}
        self.peer_set: dict[int, tuple[float, float, float]] = {}
        self.qid_rid: dict[str, int] = {}
        self.pert = np.full((self.traj.n_users, 2), np.inf)
        sigmas = np.array([p.sigma_m for p in profiles], dtype=np.float64)
        # true positions farther than 4 sigma from a perturbed point cannot perturb into range
        self.reach_j = 4.0 * sigmas
        self.upd_xy = np.zeros((self.traj.n_users, 2))
        self.fixes = Fixes(
            cfg.fix_scatter_m,
            np.random.default_rng([built.scenario.seed, 11]),
            says_accuracy=cfg.says_accuracy,
        )
        self.cell_cache: tuple[bytes, float, m.PeerRequest, NDArray[np.int64]] | None = None
        self.bus.subscribe(self.topics.root + "/peer/cell/+", self.on_cell)
        # ---- devices answer the anonymizer's fix requests
        self.index_of_user = {u: i for i, u in enumerate(self.traj.user_ids)}
        self.fix_replies = 0
        if cfg.fix_reply_s is not None:
            self.bus.subscribe(self.topics.fix_wanted_filter, self.on_fix_wanted)

    # ------------------------------------------------------------------ helpers
    def lonlat(self, xy: tuple[float, float]) -> tuple[float, float]:
        return self.proj.point_to_lonlat(xy[0], xy[1])

    def exact(self, ev: QueryEvent, xy: tuple[float, float]) -> list[str]:
        return [p.id for p in self.pois.nearest_xy(xy[0], xy[1], ev.category, ev.n)]

    def rid_of_cid(self, cid: str | None) -> int | None:
        if cid is None:
            return None
        request = self.requester.request_of(cid)
        if request is not None:
            return self.request_rid.get(request)
        return self.cid_rid.get(cid)

    def send(self, s: Send, now: float, tag: int | None) -> None:
        cid = getattr(s.message, "correlation_id", None)
        rid = self.rid_of_cid(cid)
        if rid is None:
            rid = tag
        label = "updates" if isinstance(s.message, m.LocationUpdate) else "other"
        if rid is not None:
            ctx = self.ctx[rid]
            label = f"p{ctx.event.protocol}"
            if cid is not None:
                self.cid_rid.setdefault(cid, rid)
        size = self.bus.publish(s.topic, s.message, now, tag=rid, label=label)
        if rid is not None:
            rec = self.ctx[rid].record
            rec.messages += 1
            rec.bytes += size

    # ------------------------------------------------------------ trusted side
    def on_core(self, topic: str, payload: bytes, tag: object, now: float) -> None:
        for s in self.core_dispatch.handle(Received(topic, payload), now):
            self.send(s, now, tag if isinstance(tag, int) else None)
        self.core_timer.arm()

    def send_all(self, sends: list[Send], now: float) -> None:
        for s in sends:
            self.send(s, now, None)

    def on_ds(self, topic: str, payload: bytes, tag: object, now: float) -> None:
        for s in self.ds_dispatch.handle(Received(topic, payload), now):
            self.send(s, now, tag if isinstance(tag, int) else None)

    def on_fix_wanted(self, topic: str, payload: bytes, tag: object, now: float) -> None:
        """A device asked for a fresh report sends one ``fix_reply_s`` later, from where it
        is then."""
        i = self.index_of_user.get(topic.rsplit("/", 1)[-1])
        delay = self.cfg.fix_reply_s
        if i is None or delay is None:
            return
        idx = np.array([i], dtype=np.int64)

        def reply(t: float) -> None:
            self.fix_replies += 1
            self.publish_updates(idx, t, t)

        self.bus.call_at(now + delay, reply)

    # ------------------------------------------------------------ P1-P3 users
    def on_requester(self, topic: str, payload: bytes, tag: object, now: float) -> None:
        """A reply for the P1-P3 requester (its reply topic or a P3 DS-hop topic)."""
        try:
            msg = m.decode(payload, max_bytes=REPLY_MAX_BYTES)
        except DecodeError:
            return
        request = self.requester.request_of(getattr(msg, "correlation_id", None))
        if request is not None and isinstance(msg, m.CloakReply):
            self.ctx[self.request_rid[request]].record.t_anon_s = now
        self.apply_requester(self.requester.receive(msg, now), now)

    def apply_requester(self, effects: list[Effect], now: float) -> None:
        for e in effects:
            if isinstance(e, Send):
                self.send(e, now, None)
            elif isinstance(e, Subscribe):
                self.bus.subscribe(e.topic, self.on_requester)
            elif isinstance(e, Unsubscribe):
                self.bus.unsubscribe(e.topic, self.on_requester)
            elif isinstance(e, Done | Failed):
                self.requester_done(e, now)
        self.requester_timer.arm()

    def requester_done(self, e: Done[Any] | Failed, now: float) -> None:
        ctx = self.finished(self.request_rid, e)
        if ctx is None or not isinstance(e, Done):
            return
        rec, answer = ctx.record, e.value
        assert isinstance(answer, Answer)
        if ctx.event.protocol == 2:
            rec.t_anon_s = rec.t_request_s
        elif ctx.event.protocol == 1:
            rec.t_anon_s = now
        score_trusted(
            rec,
            answer,
            exact=self.exact(ctx.event, ctx.xy),
            proj=self.proj,
            xy=ctx.xy,
            positions=self.traj.at(now),
            user=ctx.event.user,
            t_request=rec.t_request_s,
            reported_xy=ctx.fix_xy,
        )
        rec.t_answer_s = now
        rec.ok = True

    # -------------------------------------------------------------- queries
    def query(self, ev: QueryEvent, rid: int, now: float) -> None:
        prof: UserProfile = self.b.workload.profiles[ev.user]
        xy = self.traj.user_at(ev.user, now)
        rec = QueryRecord(
            protocol=ev.protocol,
            user=ev.user,
            t_request_s=now,
            k_requested=prof.k,
            a_min_m2=prof.a_min_m2,
            a_max_m2=prof.a_max_m2,
        )
        rec.messages, rec.bytes = 0, 0
        self.records.append(rec)
        ctx = Ctx(rid, rec, ev, xy, self.lonlat(xy))
        self.ctx[rid] = ctx
        ctx.query = m.NearestQuery(category=ev.category, n=ev.n)
        if ev.protocol == 4:
            self.p4_start(ctx, prof, now)
            return
        requester = self.requester
        fix, said = self.fixes.report(np.asarray([xy], dtype=np.float64))
        accuracy = None if np.isnan(said[0]) else float(said[0])
        ctx.fix_xy = (float(fix[0, 0]), float(fix[0, 1]))
        request, effects = requester.query(
            ctx.query,
            protocol=ev.protocol,
            user_id=self.traj.user_ids[ev.user],
            position=LonLat(*self.lonlat((float(fix[0, 0]), float(fix[0, 1])))),
            profile=requester.merge_profile(
                prof.k, prof.a_min_m2, prof.a_max_m2, prof.max_delay_s, prof.session_s
            ),
            now=now,
            timeout_s=self.cfg.ds_timeout_s + self.cfg.max_delay_s_bound,
            accuracy_m=accuracy,
        )
        self.request_rid[request] = rid
        self.apply_requester(effects, now)

    # -------------------------------------------------------------------- loop
    def publish_updates(self, idx: NDArray[np.int64], t_pos: float, now: float) -> None:
        xs, ys = self.traj.at(t_pos)
        self.upd_xy[idx, 0] = xs[idx]
        self.upd_xy[idx, 1] = ys[idx]
        # fixes as the devices report them, saying their accuracy (0: exact) as phones do
        fix, said = self.fixes.report(np.column_stack([xs[idx], ys[idx]]))
        lon, lat = self.proj.to_lonlat(fix[:, 0], fix[:, 1])
        ids = self.traj.user_ids
        for j, i in enumerate(idx.tolist()):
            uid = ids[i]
            where = LonLat(float(lon[j]), float(lat[j]))
            accuracy = None if np.isnan(said[j]) else float(said[j])
            updates = self.requester.location_update(
                user_id=uid, position=where, now=now, accuracy_m=accuracy
            )
            for u in updates:
                self.bus.publish(u.topic, u.message, now, label="updates")
        self.updates += len(idx)

    def run(self) -> VirtualResult:
        sc, traj = self.sc, self.traj
        n = traj.n_users
        period = sc.update_interval_s
        phase = self.rng.uniform(0.0, period, size=n)
        next_update = phase.copy()
        events = self.b.workload.events
        self.p4_rounds: Counter[int] = Counter()
        for rid, ev in enumerate(events):
            self.bus.call_at(ev.t_s, functools.partial(self.query, ev, rid))
        # Everyone reports once at t = 0 so that the anonymizer knows the population.
        self.publish_updates(np.arange(n), 0.0, 0.0)
        t = 0.0
        tick = self.cfg.tick_s
        while t < sc.duration_s:
            t_next = min(t + tick, sc.duration_s)
            due = np.flatnonzero(next_update < t_next)
            if len(due):
                self.bus.run_until(t)
                self.publish_updates(due, t_next, t)
                next_update[due] += period
            self.bus.run_until(t_next - 1e-9)
            t = t_next
        # drain: answers in flight and pending timers finish (bounded)
        self.bus.run_until(sc.duration_s + self.cfg.max_delay_s_bound + self.cfg.ds_timeout_s)
        for rec in self.records:
            if not rec.ok and rec.error is None:
                rec.error = "unfinished"
        msgs = sum(self.bus.messages.values())
        nbytes = sum(self.bus.bytes.values())
        wire: dict[str, dict[str, int]] = {}
        for (label, kind), c in sorted(self.bus.messages.items()):
            wire.setdefault(label, {})[kind] = c
        stats = RunStats(
            duration_s=sc.duration_s,
            users=n,
            location_updates=self.updates,
            messages=msgs,
            bytes=nbytes,
            extra={"runner": "virtual", "scenario": sc.name, "seed": sc.seed},
        )
        extra = {
            "wire": wire,
            "wire_bytes": dict(self.bus.bytes),
            "p4_rounds": dict(sorted(self.p4_rounds.items())),
            "delivered": self.bus.delivered,
            "peer_stats": dict(sum((pm.stats for pm in self.peers.values()), Counter())),
            # what historical k-anonymity's sessions did (Cloaker.session_counts)
            "sessions": dict(self.cloaker.session_counts),
            "fix_replies": self.fix_replies,
        }
        return VirtualResult(self.records, stats, extra)


def run_virtual(
    built: BuiltScenario,
    *,
    config: VirtualConfig | None = None,
    pois: POIIndex | None = None,
) -> VirtualResult:
    """Run ``built`` on the virtual clock; deterministic for a given scenario and config."""
    idx = pois if pois is not None else load_poi_index(built.projection)
    return _Runner(built, config or VirtualConfig(), idx).run()
