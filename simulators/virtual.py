"""Virtual-clock runner: a scenario through the pure cores with simulated time (deterministic).

No broker and no asyncio: the runner drives :class:`locpriv.cloak.Cloaker` (Protocols 1 and 3),
:class:`locpriv.poi.POIIndex` and :func:`locpriv.poi.refine` (the database server and the
client-side refinement), and :func:`locpriv.grouping.select_group` with
:class:`locpriv.noise.GaussianMechanism` (Protocol 4) directly, with virtual time in seconds.
Same scenario and seed, same records (``tests/simulators/test_virtual.py`` checks it).

Time advances in ticks of ``tick_s`` (default 1 s, the cloaker's epoch): at each tick the users
whose periodic location update fell in the tick are absorbed with one ``update_many``, then the
tick's queries are served at their own instants, then ``on_deadline`` resolves temporal cloaking.
Every user updates every ``update_interval_s`` with a uniform random phase.

Per protocol (what the records measure):

* P1 -- the mediator updates the user's position, cloaks it (k, A_min, A_max, Δt), asks DS for
  the region's candidates and refines them with the exact location. 4 wire messages.
* P2 -- the mediator forwards the exact point without identity; DS answers exactly. 4 messages.
* P3 -- the anonymizer returns the cloak; the user asks DS for the region's candidates and
  refines locally. 4 messages.
* P4 -- the device perturbs its location (Gaussian, its profile's σ; a static device reuses its
  draw while within ``reuse_radius_m``), receives the perturbed points of the neighbours within
  ``p4_max_distance_m`` (up to ``p4_max_replies`` nearest), selects a k-group
  (:func:`locpriv.grouping.select_group`) and queries DS at the group centroid. With
  ``p4_centroid_radius`` (default, as :class:`locpriv.protocols.p4_peer.PeerMachine` does) the
  query carries a radius from the same ladder covering the true point and the candidates are
  refined (exact answer); otherwise DS answers at the centroid and the device uses that as is.

Wire sizes are those of the real encoded messages (:func:`locpriv.messages.encode`).
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

import locpriv
from locpriv import messages as m
from locpriv.cloak import CloakConfig, Cloaker, CloakOutcome, CloakParams, CloakRegion
from locpriv.geo import LocalProjection, region_to_wire
from locpriv.grouping import Group, select_group
from locpriv.poi import POIIndex, load_pois, refine
from locpriv.protocols.p4_peer import radius_ladder
from simulators.evaluate import QueryRecord, RunStats, expected_error_uniform, precision_recall
from simulators.scenario import BuiltScenario
from simulators.workload import QueryEvent, UserProfile

log = logging.getLogger(__name__)

F64 = NDArray[np.float64]

DEFAULT_POIS = Path(locpriv.__file__).resolve().parent / "data" / "pois.csv"
"""The demo POIs shipped with locpriv (Barcelona, 20 km x 20 km)."""

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
    p4_max_replies: int = 64
    p4_reuse_radius_m: float = 50.0
    p4_max_distance_m: float = 200.0
    """Responders farther than this (between perturbed points) stay silent, metres."""
    p4_centroid_radius: bool = True
    p4_node_budget: int = 20_000
    cloak: CloakConfig | None = None
    """Cloaker configuration; by default the scenario extent with 1 km margin, epoch ``tick_s``."""


@dataclass
class VirtualResult:
    """Records of every query and run counters."""

    records: list[QueryRecord]
    stats: RunStats
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Ctx:
    record: QueryRecord
    event: QueryEvent
    xy: tuple[float, float]


def _size(msg: m.Message) -> int:
    return len(m.encode(msg))


class _Runner:
    def __init__(self, built: BuiltScenario, cfg: VirtualConfig, pois: POIIndex) -> None:
        self.b = built
        self.sc = built.scenario
        self.cfg = cfg
        self.traj = built.trajectories
        self.proj = built.projection
        self.pois = pois
        self.rng = np.random.default_rng(built.protocol_seed)
        w, h = self.sc.extent_m()
        margin = 1000.0
        self.cloak_cfg = cfg.cloak or CloakConfig(
            k_min=1,
            k_max=cfg.k_max,
            max_delay_s_bound=cfg.max_delay_s_bound,
            world=(-w / 2 - margin, -h / 2 - margin, w / 2 + margin, h / 2 + margin),
            epoch_s=cfg.tick_s,
            user_ttl_s=max(300.0, 3 * self.sc.update_interval_s),
        )
        self.cloaker = Cloaker(self.cloak_cfg)
        self.records: list[QueryRecord] = []
        self.pending: dict[int, _Ctx] = {}
        self.ids = itertools.count()
        self.updates = 0
        self.msgs = 0
        self.bytes = 0
        # P4 perturbation reuse per user: (origin x, origin y, perturbed x, perturbed y)
        self.p4_draw: dict[int, tuple[float, float, float, float]] = {}
        self.reply_topic = "locpriv/v1/reply/sim"
        # true positions farther than this from a perturbed point cannot perturb into range
        self.reach_m = 4.0 * max((p.sigma_m for p in built.workload.profiles), default=0.0)
        sample = m.LocationUpdate(user_id="u000000", lat=41.38741234, lon=2.16861234, t=1.7e9)
        self.update_bytes = _size(sample)

    # ------------------------------------------------------------------ helpers
    def lonlat(self, xy: tuple[float, float]) -> tuple[float, float]:
        return self.proj.point_to_lonlat(xy[0], xy[1])

    def exact(self, ev: QueryEvent, xy: tuple[float, float]) -> list[str]:
        return [p.id for p in self.pois.nearest_xy(xy[0], xy[1], ev.category, ev.n)]

    def finish_answer(
        self,
        ctx: _Ctx,
        answer: list[m.POI],
        now: float,
        ds_location: m.DSLocation,
        candidates: bool,
    ) -> None:
        r, ev = ctx.record, ctx.event
        q = m.NearestQuery(category=ev.category, n=ev.n)
        ds_q = m.DSQuery(
            correlation_id="c1", reply_to=self.reply_topic, query=q, location=ds_location
        )
        ans = m.QueryAnswer(correlation_id="c1", pois=answer, candidates=candidates)
        lon, lat = self.lonlat(ctx.xy)
        final = refine(answer, q, lat, lon) if candidates else answer
        r.precision, r.recall = precision_recall([p.id for p in final], self.exact(ev, ctx.xy))
        r.messages += 2
        r.bytes += _size(ds_q) + _size(ans)
        if ev.protocol in (1, 2):  # the mediator relays the refined answer
            r.messages += 1
            r.bytes += _size(m.QueryAnswer(correlation_id="c1", pois=final))
        r.t_answer_s = now
        r.ok = True

    def region_done(self, ctx: _Ctx, region: CloakRegion, now: float) -> None:
        r = ctx.record
        r.t_anon_s = now
        r.k_reported = region.users
        r.area_m2 = region.area_m2
        r.held_s = max(0.0, now - r.t_request_s)
        poly_ll = self.proj.geometry_to_lonlat(region.polygon)
        wire_region = region_to_wire(poly_ll)
        x0, y0, x1, y1 = region.polygon.bounds
        c = region.polygon.centroid
        r.ds_error_m = math.hypot(c.x - ctx.xy[0], c.y - ctx.xy[1])
        r.adversary_centroid_error_m = r.ds_error_m
        xs, ys = self.traj.at(now)
        inside = (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)
        r.k_achieved = int(inside.sum())
        inside[ctx.event.user] = False  # the requester is added once, at her true position
        cand = np.column_stack([xs[inside], ys[inside]])
        cand = np.vstack([cand, np.asarray([ctx.xy])])  # the requester is always a candidate
        r.adversary_error_m = expected_error_uniform(ctx.xy, cand)
        if ctx.event.protocol == 3:
            reply = m.CloakReply(
                correlation_id="c1",
                region=wire_region,
                area_m2=region.area_m2,
                users=region.users,
                t1=region.t1,
                t2=max(region.t1, region.t2),
            )
            r.messages += 1
            r.bytes += _size(reply)
        loc = m.RegionLocation(region=wire_region)
        q = m.NearestQuery(category=ctx.event.category, n=ctx.event.n)
        pois = self.pois.region_candidates(region.polygon, q)
        self.finish_answer(ctx, pois, now, loc, True)

    def outcome(self, out: CloakOutcome, now: float) -> None:
        ctx = self.pending.pop(int(out.request_id))  # type: ignore[call-overload]
        if out.region is not None:
            self.region_done(ctx, out.region, now)
        else:
            ctx.record.error = str(out.error.code) if out.error is not None else "unknown"
            ctx.record.t_anon_s = None

    # -------------------------------------------------------------- protocols
    def query(self, ev: QueryEvent) -> None:
        prof: UserProfile = self.b.workload.profiles[ev.user]
        xy = self.traj.user_at(ev.user, ev.t_s)
        uid = self.traj.user_ids[ev.user]
        rec = QueryRecord(
            protocol=ev.protocol,
            user=ev.user,
            t_request_s=ev.t_s,
            k_requested=prof.k,
            a_min_m2=prof.a_min_m2,
            a_max_m2=prof.a_max_m2,
        )
        self.records.append(rec)
        ctx = _Ctx(rec, ev, xy)
        lon, lat = self.lonlat(xy)
        q = m.NearestQuery(category=ev.category, n=ev.n)
        profile = m.PrivacyProfile(
            k=prof.k,
            a_min_m2=prof.a_min_m2,
            a_max_m2=prof.a_max_m2,
            max_delay_s=min(prof.max_delay_s, self.cloak_cfg.max_delay_s_bound),
        )
        if ev.protocol == 2:
            req = m.QueryRequest(
                correlation_id="c1",
                reply_to=self.reply_topic,
                user_id=uid,
                protocol=2,
                lat=lat,
                lon=lon,
                query=q,
            )
            rec.messages, rec.bytes = 1, _size(req)
            rec.t_anon_s = ev.t_s
            rec.ds_error_m = 0.0
            rec.adversary_error_m = 0.0
            pois = self.pois.nearest_xy(xy[0], xy[1], ev.category, ev.n)
            self.finish_answer(ctx, pois, ev.t_s, m.PointLocation(lat=lat, lon=lon), False)
            return
        if ev.protocol == 4:
            self.p4(ctx, prof)
            return
        if ev.protocol == 1:
            req1: m.Message = m.QueryRequest(
                correlation_id="c1",
                reply_to=self.reply_topic,
                user_id=uid,
                protocol=1,
                lat=lat,
                lon=lon,
                query=q,
                profile=profile,
            )
        else:
            req1 = m.CloakRequest(
                correlation_id="c1",
                reply_to=self.reply_topic,
                user_id=uid,
                lat=lat,
                lon=lon,
                profile=profile,
            )
        rec.messages, rec.bytes = 1, _size(req1)
        for out in self.cloaker.update(uid, xy[0], xy[1], ev.t_s):
            self.outcome(out, ev.t_s)
        rid = next(self.ids)
        self.pending[rid] = ctx
        params = CloakParams(
            k=max(self.cloak_cfg.k_min, min(prof.k, self.cloak_cfg.k_max)),
            a_min_m2=prof.a_min_m2,
            a_max_m2=prof.a_max_m2,
            max_delay_s=profile.max_delay_s,
        )
        res = self.cloaker.request(rid, uid, params, ev.t_s)
        if res is not None:
            self.outcome(res, ev.t_s)

    def perturbed(self, i: int, xy: tuple[float, float], sigma: float) -> tuple[float, float]:
        """User ``i``'s published perturbed point; reused while within the reuse radius."""
        d = self.p4_draw.get(i)
        if d is not None and math.hypot(xy[0] - d[0], xy[1] - d[1]) <= self.cfg.p4_reuse_radius_m:
            return d[2], d[3]
        e = self.rng.normal(0.0, sigma, size=2)
        p = (xy[0] + float(e[0]), xy[1] + float(e[1]))
        self.p4_draw[i] = (xy[0], xy[1], p[0], p[1])
        return p

    def p4(self, ctx: _Ctx, prof: UserProfile) -> None:
        rec, ev = ctx.record, ctx.event
        own = self.perturbed(ev.user, ctx.xy, prof.sigma_m)
        side = self.cfg.p4_max_distance_m
        xs, ys = self.traj.at(ev.t_s)
        near = np.flatnonzero(np.hypot(xs - own[0], ys - own[1]) <= side + self.reach_m)
        near = near[near != ev.user]
        profiles = self.b.workload.profiles
        pts = np.array(
            [
                self.perturbed(int(j), (float(xs[j]), float(ys[j])), profiles[j].sigma_m)
                for j in near
            ]
        ).reshape(-1, 2)
        if len(pts):
            keep = np.hypot(pts[:, 0] - own[0], pts[:, 1] - own[1]) <= side
            pts = pts[keep]
            order = np.argsort(np.hypot(pts[:, 0] - own[0], pts[:, 1] - own[1]), kind="stable")
            pts = pts[order[: self.cfg.p4_max_replies]]
        lon, lat = self.lonlat(own)
        preq = m.PeerRequest(
            correlation_id="c1",
            reply_to=self.reply_topic,
            requester="p1",
            lat=lat,
            lon=lon,
            t=1.7e9,
        )
        prep = m.PeerReply(correlation_id="c1", responder="p2", lat=lat, lon=lon, t=1.7e9)
        rec.messages = 1 + len(pts)
        rec.bytes = _size(preq) + len(pts) * _size(prep)
        rec.adversary_centroid_error_m = math.hypot(own[0] - ctx.xy[0], own[1] - ctx.xy[1])
        k = max(2, prof.k)
        res = select_group(
            own, pts, k, prof.a_min_m2, prof.a_max_m2, node_budget=self.cfg.p4_node_budget
        )
        if not isinstance(res, Group):
            rec.error = f"group_infeasible:{res.reason.value}"
            return
        rec.t_anon_s = ev.t_s
        rec.k_achieved = len(res.indices) + 1
        rec.k_reported = rec.k_achieved
        rec.area_m2 = res.area_m2
        rec.held_s = 0.0
        cx, cy = res.centroid_xy
        rec.ds_error_m = math.hypot(cx - ctx.xy[0], cy - ctx.xy[1])
        rec.adversary_error_m = rec.ds_error_m
        clon, clat = self.lonlat((cx, cy))
        q = m.NearestQuery(category=ev.category, n=ev.n)
        if self.cfg.p4_centroid_radius:
            # as the device does: a radius from a fixed ladder that covers the true point
            base = math.sqrt(prof.a_max_m2 / math.pi) + 3.0 * prof.sigma_m
            rho = radius_ladder(rec.ds_error_m + 5.0, base)
            loc = m.CentroidLocation(lat=clat, lon=clon, radius_m=rho)
            pois = self.pois.centroid_candidates(cx, cy, rho, q)
            self.finish_answer(ctx, pois, ev.t_s, loc, True)
        else:
            loc = m.CentroidLocation(lat=clat, lon=clon)
            pois = self.pois.nearest_xy(cx, cy, ev.category, ev.n)
            self.finish_answer(ctx, pois, ev.t_s, loc, False)

    # -------------------------------------------------------------------- loop
    def run(self) -> VirtualResult:
        sc, traj = self.sc, self.traj
        n = traj.n_users
        period = sc.update_interval_s
        phase = self.rng.uniform(0.0, period, size=n)
        next_update = phase.copy()
        events = self.b.workload.events
        ei = 0
        tick = self.cfg.tick_s
        # Everyone reports once at t = 0 so that the cloaker knows the population.
        xs, ys = traj.at(0.0)
        self.cloaker.update_many(list(traj.user_ids), np.column_stack([xs, ys]), 0.0)
        self.updates += n
        t = 0.0
        while t < sc.duration_s:
            t_next = min(t + tick, sc.duration_s)
            due = np.flatnonzero(next_update < t_next)
            if len(due):
                xs, ys = traj.at(t_next)
                ids = [traj.user_ids[i] for i in due]
                for out in self.cloaker.update_many(ids, np.column_stack([xs[due], ys[due]]), t):
                    self.outcome(out, t)
                next_update[due] += period
                self.updates += len(due)
            while ei < len(events) and events[ei].t_s < t_next:
                self.query(events[ei])
                ei += 1
            for out in self.cloaker.on_deadline(t_next):
                self.outcome(out, t_next)
            t = t_next
        for ctx in self.pending.values():
            ctx.record.error = "unfinished"
        self.msgs = self.updates + sum(r.messages for r in self.records)
        self.bytes = self.updates * self.update_bytes + sum(r.bytes for r in self.records)
        stats = RunStats(
            duration_s=sc.duration_s,
            users=n,
            location_updates=self.updates,
            messages=self.msgs,
            bytes=self.bytes,
            extra={"runner": "virtual", "scenario": sc.name, "seed": sc.seed},
        )
        return VirtualResult(self.records, stats)


def run_virtual(
    built: BuiltScenario,
    *,
    config: VirtualConfig | None = None,
    pois: POIIndex | None = None,
) -> VirtualResult:
    """Run ``built`` on the virtual clock; deterministic for a given scenario and config."""
    idx = pois if pois is not None else load_poi_index(built.projection)
    return _Runner(built, config or VirtualConfig(), idx).run()
