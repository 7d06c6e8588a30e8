"""Attacks on privacy over time, measured on what the protocols actually publish.

Each function plays an adversary against real machine outputs and returns a figure the docs
and the demo's ``summary.json`` report:

* :func:`static_device_attack` - a device that never moves broadcasts Protocol 4 requests for
  days; the adversary records every perturbed point it publishes and averages them (all copies,
  and the distinct points only). Result: the error of the best estimate, in units of σ.
* :func:`intersection_attack` - a user asks for cloaks repeatedly in one session; an adversary
  who knows everyone's positions intersects the sets of users inside her successive regions.
  Result: per session, how many candidates remain (success when fewer than k).
* :func:`broker_tracking_error` - the P4 broker sees a device's subscriptions and publications
  (topics and payloads) linked by its connection; the adversary estimates the device's position
  from them at each instant. Result: the error of that estimate, metres.

* :func:`requester_guesses` - the same adversary guesses which user inside a region asked
  for it: the one nearest its centre, or the one nearest an edge. Result: hits and what a
  guess at random among those inside would get; :class:`GuessTally` sums them over sessions,
  among everyone inside and among the candidates the intersection attack leaves.
* :func:`edge_attack` - an observer who knows everyone's positions looks where each region's
  edges sit: half-way between the nearest user inside and outside, on a member's coordinate,
  or at a fixed offset from one. Result: counts of such edges and what a blind placement gives
  (:func:`edge_census` counts them; :func:`hilbert_edge_census` on the textbook box of k users).

Positions are local metres of the scenario's projection unless said otherwise; times seconds.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locpriv.core.cloak.history import grow_box
from locpriv.core.geo import LocalProjection
from locpriv.core.noise import GaussianMechanism
from locpriv.protocols.effects import Send
from locpriv.protocols.p4.machine import PeerMachine, device_point
from locpriv.protocols.p4.types import PeerConfig
from locpriv.wire.messages import NearestQuery, PeerRequest
from simulators.city import CITY_SESSION_S, city_figures, city_run
from simulators.fixes import Fixes
from simulators.tracking import RegionTracker, TrackingFigures, tracking_figures

__all__ = [
    "BrokerTrackingResult",
    "EdgeAttackResult",
    "GuessTally",
    "ParkedInsidersResult",
    "RepeatedCloaksResult",
    "StaticDeviceResult",
    "WalkStep",
    "attacks_summary",
    "broker_tracking_attack",
    "edge_attack",
    "edge_census",
    "edge_population",
    "hilbert_edge_census",
    "intersection_attack",
    "parked_insiders_attack",
    "random_walks",
    "repeated_cloaks_attack",
    "requester_guesses",
    "static_device_attack",
]

F64 = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class StaticDeviceResult:
    """Errors (in σ) of the averaging adversary over ``devices`` static devices."""

    devices: int
    broadcasts: int
    distinct_points_mean: float
    error_all_sigma: float
    """Mean error of the average of every published copy, in units of σ."""
    error_distinct_sigma: float
    """Mean error of the average of the distinct published points, in units of σ."""
    error_local_sigma: float = math.inf
    """Mean error of the average of the distinct points within 2.5 σ of the most frequent one
    (an adversary who drops the points of walks far from home), in units of σ."""

    @property
    def best_sigma(self) -> float:
        """The adversary's best estimate (the smallest mean error), in units of σ."""
        return min(self.error_all_sigma, self.error_distinct_sigma, self.error_local_sigma)


def static_device_attack(
    *,
    devices: int = 50,
    days: float = 30.0,
    period_s: float = 600.0,
    sigma_m: float = 100.0,
    keyed: bool = True,
    seed: int = 0,
    lon0: float = 2.1686,
    lat0: float = 41.3874,
    scatter_m: float = 0.0,
    walks_per_day: float = 0.0,
    peer_config: PeerConfig | None = None,
    through_machine: bool = True,
    places_only: bool = False,
) -> StaticDeviceResult:
    """Static devices at default Protocol 4 settings (``keyed=False``: the previous defence of
    reuse for ``reuse_ttl_s`` and a cap of draws per place) broadcast a query every
    ``period_s`` for ``days``; return the averaging adversary's errors.

    A real receiver's fixes wander: each broadcast's fix is the home position plus Gaussian
    scatter of ``scatter_m`` per axis; ``walks_per_day`` walks (on average) take the device
    300-1,500 m away and back over an hour (a fix per broadcast). The adversary averages the
    points broadcast (all copies, or the distinct ones) to estimate the home position.
    ``peer_config`` overrides the defaults (its ``keyed_noise`` is set from ``keyed``).
    ``through_machine=False`` reads the points from the device's perturbed point
    (:func:`~locpriv.protocols.p4.machine.device_point`, what the machine publishes) without
    running a query per broadcast: the same points, ~20× faster, for year-long runs;
    ``places_only`` (with it) measures the previous keyed defence, one point per place."""
    proj = LocalProjection(lat0, lon0)
    rng = np.random.default_rng(seed)
    query = NearestQuery(category="cafe", n=1)
    all_err: list[float] = []
    distinct_err: list[float] = []
    local_err: list[float] = []
    distinct_n: list[int] = []
    steps = int(days * 86_400 / period_s)
    for d in range(devices):
        x, y = (float(v) for v in rng.uniform(-5000, 5000, 2))
        config = (
            dataclasses.replace(peer_config, keyed_noise=keyed)
            if peer_config is not None
            else PeerConfig(
                k=5,
                a_min_m2=1e4,
                a_max_m2=4e6,
                mechanism=GaussianMechanism(sigma_m),
                keyed_noise=keyed,
            )
        )
        secret = rng.bytes(32)
        dev_rng = np.random.default_rng([seed, d])
        pm = PeerMachine(config, rng=dev_rng, secret=secret) if through_machine else None
        point = None if through_machine else device_point(config, secret)
        if point is not None:
            point.places_only = places_only
        points: list[tuple[float, float]] = []
        walk: list[tuple[float, float]] = []
        p_walk = walks_per_day * period_s / 86_400.0
        for i in range(steps):
            now = 1.7e9 + i * period_s
            if not walk and p_walk > 0 and rng.random() < p_walk:
                far = rng.uniform(300.0, 1500.0)
                ang = rng.uniform(0.0, 2 * math.pi)
                legs = max(2, int(3600.0 / period_s))
                walk = [
                    (x + far * f * math.cos(ang), y + far * f * math.sin(ang))
                    for f in np.concatenate(
                        [np.linspace(0.2, 1.0, legs // 2), np.linspace(1.0, 0.2, legs - legs // 2)]
                    )
                ]
            fx, fy = walk.pop(0) if walk else (x, y)
            if scatter_m > 0:
                fx += float(rng.normal(0.0, scatter_m))
                fy += float(rng.normal(0.0, scatter_m))
            flon, flat = proj.point_to_lonlat(fx, fy)
            if point is not None:
                points.append(point.current(flon, flat, now, dev_rng))
                continue
            assert pm is not None
            pm.set_location(flon, flat, now)
            qid, effects = pm.start_query(query, now)
            for e in effects:
                if isinstance(e, Send) and isinstance(e.message, PeerRequest):
                    points.append((e.message.lon, e.message.lat))
                    break
            pm.cancel(qid)
        xy = np.array([proj.point_to_xy(a, b) for a, b in points])
        truth = np.array([x, y])
        all_err.append(float(np.hypot(*(xy.mean(axis=0) - truth))))
        uniq = np.unique(xy, axis=0)
        distinct_err.append(float(np.hypot(*(uniq.mean(axis=0) - truth))))
        uniq, counts = np.unique(xy, axis=0, return_counts=True)
        mode = uniq[int(np.argmax(counts))]
        near = uniq[np.hypot(*(uniq - mode).T) <= 2.5 * sigma_m]
        local_err.append(float(np.hypot(*(near.mean(axis=0) - truth))))
        distinct_n.append(len(uniq))
    return StaticDeviceResult(
        devices=devices,
        broadcasts=steps,
        distinct_points_mean=float(np.mean(distinct_n)),
        error_all_sigma=float(np.mean(all_err)) / sigma_m,
        error_distinct_sigma=float(np.mean(distinct_err)) / sigma_m,
        error_local_sigma=float(np.mean(local_err)) / sigma_m,
    )


def requester_guesses(
    bounds: tuple[float, float, float, float], xy: F64, rows: NDArray[np.int64], requester: int
) -> tuple[float, float, float]:
    """The requester-finding guesses on one region ``bounds`` (x0, y0, x1, y1, metres): among
    the users ``rows`` truly inside it (positions ``xy``, one row per user), the one nearest
    its centre (L-infinity) and the one nearest an edge. Returns ``(centre hit, edge hit,
    chance)``: each hit is the chance that the guess is ``requester`` (1.0 or 0.0, or her
    share of a tie: users within 1 mm of the nearest, e.g. several held on the world's border,
    are picked among at random, not by their row), and ``1 / len(rows)``, what a guess at
    random among those inside scores. Summed over regions, a cloak that does not centre its
    regions on the requester (nor put her at an edge) keeps each hit count near the chance
    sum. No rows: ``(0, 0, 0)``."""
    if len(rows) == 0:
        return 0.0, 0.0, 0.0
    x0, y0, x1, y1 = bounds
    px, py = xy[rows, 0], xy[rows, 1]
    mid = np.maximum(np.abs(px - (x0 + x1) / 2), np.abs(py - (y0 + y1) / 2))
    rim = _depth(bounds, xy, rows)
    me = rows == requester

    def hit(score: F64) -> float:
        tied = score <= score.min() + 1e-3
        return float(np.count_nonzero(tied & me)) / float(np.count_nonzero(tied))

    return hit(mid), hit(rim), 1.0 / len(rows)


def _depth(bounds: tuple[float, float, float, float], xy: F64, rows: NDArray[np.int64]) -> F64:
    """Distance (m) of each of the users ``rows`` to the nearest edge of the box ``bounds``."""
    x0, y0, x1, y1 = bounds
    px, py = xy[rows, 0], xy[rows, 1]
    out: F64 = np.minimum.reduce([px - x0, x1 - px, py - y0, y1 - py])
    return out


RANK_QUANTILES: F64 = np.linspace(0.1, 0.9, 9)
"""The depth-rank guesses: the candidate at this quantile of the ranking by distance to
the region's nearest edge (0: the nearest the rim, 1: the deepest)."""


@dataclass(slots=True)
class GuessTally:
    """:func:`requester_guesses` summed over every region of each attacked session but its
    first, made twice: among everyone truly inside the region, and among the session's
    candidates only (the users inside every region of the session so far, what the
    intersection attack leaves; she is always one of them). Feed regions in time order with
    :meth:`add`; :meth:`figures` gives each guess's hits over a guess at random's (1: chance).

    The members that make a region's box are candidates, most users who merely happen to be
    inside are not: if the edge guess finds her above chance among everyone inside but at
    chance among the candidates, the edges tell no more than the intersection already does.

    The depth-rank guesses generalise the edge guess: rank the candidates by distance to the
    nearest edge and take the one at a fixed quantile of that ranking (``RANK_QUANTILES``);
    the figure is the best of them, with the same best on a decoy as its no-leak floor. A
    requester kept at a typical depth, neither at an edge nor deepest, is found by it."""

    centre: float = 0.0
    edge: float = 0.0
    chance: float = 0.0
    centre_c: float = 0.0
    edge_c: float = 0.0
    chance_c: float = 0.0
    rank_c: F64 = dataclasses.field(default_factory=lambda: np.zeros(len(RANK_QUANTILES)))
    """Hits of the depth-rank guesses among the candidates, one per ``RANK_QUANTILES``."""
    decoy_c: F64 = dataclasses.field(default_factory=lambda: np.zeros(len(RANK_QUANTILES)))
    """The same guesses' hits on a decoy drawn at random among the candidates: what the
    statistic scores when nothing leaks (its floor, above 1 by the best-of-nine pick)."""
    left: dict[object, set[int]] = dataclasses.field(default_factory=dict)
    """Each session's candidates so far."""
    rng: np.random.Generator = dataclasses.field(default_factory=lambda: np.random.default_rng(0))

    def add(
        self,
        session: object,
        bounds: tuple[float, float, float, float],
        xy: F64,
        inside: Iterable[int],
        requester: int,
    ) -> None:
        """One region of ``session`` (any hashable key): its ``bounds`` (x0, y0, x1, y1,
        metres), everyone's true positions ``xy`` then (one row per user) and the rows
        ``inside`` it (the requester among them)."""
        rows = set(inside)
        left = self.left.get(session)
        self.left[session] = rows if left is None else left & rows
        if left is None:
            return  # a session's first region: nothing to guess against yet
        at = np.asarray(sorted(rows), dtype=np.int64)
        hit_c, hit_e, odds = requester_guesses(bounds, xy, at, requester)
        self.centre += hit_c
        self.edge += hit_e
        self.chance += odds
        at = np.asarray(sorted(self.left[session]), dtype=np.int64)
        hit_c, hit_e, odds = requester_guesses(bounds, xy, at, requester)
        self.centre_c += hit_c
        self.edge_c += hit_e
        self.chance_c += odds
        if len(at):
            order = at[np.argsort(_depth(bounds, xy, at), kind="stable")]
            picks = order[np.minimum(len(at) - 1, (RANK_QUANTILES * len(at)).astype(np.int64))]
            self.rank_c += picks == requester
            self.decoy_c += picks == at[int(self.rng.integers(len(at)))]

    def figures(self) -> dict[str, float]:
        """``centre_over_chance``, ``edge_over_chance`` (among everyone inside) and
        ``*_among_candidates_over_chance``, with the chance sums they divide by
        (``regions_guessed_chance``, ``regions_guessed_among_candidates_chance``); NaN
        where no region was guessed."""
        nan = math.nan
        return {
            "centre_over_chance": self.centre / self.chance if self.chance else nan,
            "edge_over_chance": self.edge / self.chance if self.chance else nan,
            "regions_guessed_chance": self.chance,
            "centre_among_candidates_over_chance": (
                self.centre_c / self.chance_c if self.chance_c else nan
            ),
            "edge_among_candidates_over_chance": (
                self.edge_c / self.chance_c if self.chance_c else nan
            ),
            "regions_guessed_among_candidates_chance": self.chance_c,
            "rank_among_candidates_over_chance": (
                float(self.rank_c.max()) / self.chance_c if self.chance_c else nan
            ),
            "rank_decoy_over_chance": (
                float(self.decoy_c.max()) / self.chance_c if self.chance_c else nan
            ),
            "rank_quantile": (
                float(RANK_QUANTILES[int(np.argmax(self.rank_c))]) if self.chance_c else nan
            ),
        }


def intersection_attack(
    sessions: Iterable[Sequence[frozenset[int]]], k: int | Sequence[int]
) -> dict[str, float]:
    """The intersection attack over sessions of successive regions.

    ``sessions`` gives, per session, the sets of users truly inside each successive region
    (the requester among them); ``k`` the requested k (one for all, or one per session).
    Returns the number of sessions, the share in which the intersection holds fewer than k
    users (the attack succeeds), and the mean number of candidates left.
    """
    sizes: list[int] = []
    wins = 0
    ks = list(k) if isinstance(k, Sequence) else None
    for j, regions in enumerate(sessions):
        if not regions:
            continue
        left = set(regions[0])
        for r in regions[1:]:
            left &= r
        sizes.append(len(left))
        need = ks[j] if ks is not None else int(k)  # type: ignore[arg-type]
        wins += len(left) < need
    n = len(sizes)
    return {
        "sessions": float(n),
        "success_rate": wins / n if n else math.nan,
        "candidates_mean": float(np.mean(sizes)) if n else math.nan,
    }


@dataclass(frozen=True, slots=True)
class RepeatedCloaksResult:
    """The intersection attack on repeated cloaks of the cloaking core (see
    :func:`repeated_cloaks_attack`)."""

    sessions: int
    success_rate: float
    """Share of sessions whose intersection holds fewer than k users."""
    candidates_mean: float
    answered_rate: float
    """Share of requests answered with a region."""
    area_m2_median: float
    oracle_area_m2_median: float = math.nan
    """With ``oracle_margin_m``: the median area the future-knowing oracle pays on the same
    walks (:func:`session_area_bound` per asker, that margin, at least ``a_min_m2``)."""
    oracle_joint_area_m2_median: float = math.nan
    """The same for the oracle that chooses the set by its joint box
    (:func:`session_area_bound` with ``joint``): the cheaper one, near the least any fixed
    set of ``k`` pays on these walks."""
    oracle_online_area_m2_median: float = math.nan
    """The same for the oracle that knows every position at a session's first request only
    and commits there to the ``k - 1`` nearest (:func:`session_area_bound` with ``online``):
    what choosing a fixed set from exact present positions, with no pool to shrink, pays."""
    centre_over_chance: float = math.nan
    """The requester-finding guesses over each asker's regions but her first
    (:class:`GuessTally`): the user inside nearest the centre ..."""
    edge_over_chance: float = math.nan
    """... and the one nearest an edge, each over a guess at random among those inside ..."""
    centre_among_candidates_over_chance: float = math.nan
    """... and the same two made among her candidates only (inside every region so far)."""
    edge_among_candidates_over_chance: float = math.nan
    rank_among_candidates_over_chance: float = math.nan
    """The best depth-rank guess among her candidates (:class:`GuessTally`) ..."""
    rank_decoy_over_chance: float = math.nan
    """... and the same statistic on a decoy, what it scores when nothing leaks."""
    session_counts: Mapping[str, int] = field(default_factory=dict)
    """What the cloaker's sessions did (``Cloaker.session_counts``)."""
    tracking: TrackingFigures | None = None
    """With ``track``: everyone inside each asker's first region, followed through her later
    regions by an adversary who knew where they were then (:mod:`simulators.tracking`; side
    √A_min)."""


def party_leads(users: int, askers: int, size: int) -> NDArray[np.int64]:
    """Each user's party, as the index of its first member (her own index when alone): the
    first ``askers`` users are alone, the rest come in parties of ``size`` consecutive
    indices (the last one may be smaller). Users who share a lead share their draws."""
    lead = np.arange(users, dtype=np.int64)
    lead[askers:] -= (lead[askers:] - askers) % max(1, size)
    return lead


@dataclass(frozen=True, slots=True)
class WalkStep:
    """One step of :func:`random_walks`: at ``t`` (s) every user is at ``xy`` (metres; the
    live array, copy it to keep it), ``due`` (user indices) report a fix now, and ``request``
    is the index of the request round that falls at ``t`` (None between requests)."""

    t: float
    xy: F64
    due: NDArray[np.int64]
    request: int | None


def exact(n: int) -> F64:
    """The accuracy (m) of ``n`` simulated fixes: exact, as the simulators' fixes are (a
    report that says so keeps session margins free of ``session_fix_error_m``)."""
    return np.zeros(n)


def random_walks(
    *,
    users: int,
    side_m: float,
    askers: int,
    every_s: float,
    rounds: int,
    speed_m_s: float,
    update_s: float = 0.0,
    dwell_share: float = 0.0,
    dwell_scale_s: float = 300.0,
    walk_s: float = 300.0,
    party_size: int = 1,
    party_m: float = 5.0,
    fast_share: float = 0.0,
    fast_m_s: float = 6.0,
    fix_loss: float = 0.0,
    seed: int = 0,
) -> Iterator[WalkStep]:
    """The random walkers of :func:`repeated_cloaks_attack` (its docstring describes them),
    as a stream: with fixes (``update_s`` > 0) or stays (``dwell_share`` > 0), first every
    user's fix at ``1000 - every_s`` s, then 5 s steps; each round of ``every_s`` seconds
    (a new heading per walker) ends with a step whose ``request`` is the round's index, at
    ``1000 + request * every_s``. Without fixes or stays, one step per round. ``rounds``
    rounds in all; deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0.0, side_m, (users, 2))
    dt = 5.0
    fine = update_s > 0 or dwell_share > 0
    sub = max(1, round(every_s / dt)) if fine else 1
    phase = rng.uniform(0.0, update_s, users) if update_s > 0 else np.zeros(users)
    staying = np.zeros(users, dtype=bool)
    stayed = np.zeros(users)
    none = np.empty(0, dtype=np.int64)
    # each user's party: the row whose draws she shares (her own unless ``party_size`` > 1)
    lead = party_leads(users, askers, party_size)
    losses = np.random.default_rng([seed, 8])
    speed = np.full(users, speed_m_s)
    if fast_share > 0:
        fast = np.random.default_rng([seed, 7]).random(users)[lead] < fast_share
        fast[:askers] = False
        speed[fast] = fast_m_s
    if dwell_share > 0:
        staying = (rng.random(users) < dwell_share)[lead]
        # how long each stay has lasted: Pareto (survival s / (s + t)), at most 8 hours
        u0 = rng.uniform(1e-9, 1.0, users)[lead]
        stayed = np.minimum(dwell_scale_s * (1.0 / u0 - 1.0), 28_800.0)
        if party_size > 1:
            xy = np.clip(xy[lead] + rng.uniform(-party_m, party_m, (users, 2)), 0.0, side_m)
    if fine:
        yield WalkStep(1000.0 - every_s, xy, np.arange(users, dtype=np.int64), None)
    for step in range(rounds):
        now = 1000.0 + step * every_s
        heading = rng.uniform(0, 2 * np.pi, users)[lead]
        vel = np.column_stack([np.cos(heading), np.sin(heading)]) * speed[:, None]
        for j in range(sub):
            t = now - every_s + (j + 1) * every_s / sub
            step_s = every_s / sub
            if dwell_share > 0:
                u = rng.random(users)[lead]
                leave = staying & (u < step_s / (stayed + dwell_scale_s))
                stop = ~staying & (u < step_s / walk_s)
                staying = (staying & ~leave) | stop
                stayed = np.where(staying & ~stop, stayed + step_s, 0.0)
                xy += np.where(staying[:, None], 0.0, vel * step_s)
            else:
                xy += vel * step_s
            np.clip(xy, 0.0, side_m, out=xy)
            due = none
            if update_s > 0:
                # users whose report falls in this 5 s step report where they are
                prev = t - every_s / sub
                due = np.flatnonzero(
                    np.floor((t - phase) / update_s) > np.floor((prev - phase) / update_s)
                )
                if fix_loss > 0:
                    due = due[losses.random(len(due)) >= fix_loss]
            yield WalkStep(now if j == sub - 1 else t, xy, due, step if j == sub - 1 else None)


def repeated_cloaks_attack(
    *,
    users: int = 2000,
    side_m: float = 4000.0,
    askers: int = 100,
    k: int = 5,
    every_s: float = 60.0,
    minutes: float = 30.0,
    session_s: float = 0.0,
    speed_m_s: float = 1.4,
    a_min_m2: float = 1e4,
    a_max_m2: float = 4e6,
    seed: int = 0,
    cloak: Mapping[str, Any] | None = None,
    update_s: float = 0.0,
    dwell_share: float = 0.0,
    dwell_scale_s: float = 300.0,
    walk_s: float = 300.0,
    oracle_margin_m: float | None = None,
    party_size: int = 1,
    party_m: float = 5.0,
    fast_share: float = 0.0,
    fast_m_s: float = 6.0,
    fix_loss: float = 0.0,
    fix_reply_s: float | None = None,
    scatter_m: float = 0.0,
    says_accuracy: bool = True,
    track: bool = False,
) -> RepeatedCloaksResult:
    """Users random-walk over a square; ``askers`` of them ask for a k-cloak every
    ``every_s`` for ``minutes``; an adversary who knows every position intersects the users
    inside each asker's successive regions. ``session_s`` > 0 asks for historical k-anonymity;
    ``cloak`` overrides :class:`~locpriv.core.cloak.types.CloakConfig` fields (the session
    knobs). Each walker draws a new heading every ``every_s``. With ``update_s == 0`` every
    user reports her true position at each request (the attack at its strongest against
    the regions); with ``update_s`` > 0 each reports every ``update_s`` seconds at her own
    phase (fixes up to ``update_s`` old when a request comes, and the walker may have turned
    since: what margins and dead reckoning must cover), motion simulated in 5 s steps; an
    asker's request carries her own fix, as a P1 or P3 request does.

    ``dwell_share`` > 0 makes users alternate stays and walks (motion in 5 s steps): that share
    starts in a stay, which has already lasted a heavy-tailed time; a stay that has lasted
    ``tau`` seconds ends within the next ``dt`` with probability ``dt / (tau +
    dwell_scale_s)`` (the longer someone has stayed, the longer she tends to stay, yet she may
    leave at any moment, right after a fix too: what margins sized by stillness must survive);
    a walk ends with probability ``dt / walk_s``. ``party_size`` > 1 (with ``dwell_share``)
    puts the users who do not ask in parties of that many (consecutive indices; each asker is
    on her own, so a party can leave her set while she stays): a party starts within
    ``party_m`` (per axis) of its first member and stays, leaves, walks the same way and stops
    together (one draw per party: 5 m, a meeting that ends or friends who walk off together;
    hundreds of metres, a shift that ends), so stays end together instead of independently.
    ``fast_share`` of the users who do not ask move at ``fast_m_s`` (bicycles, cars; with
    stays, they set off at that speed), and ``fix_loss`` of the fixes due are lost
    (:func:`random_walks`). ``oracle_margin_m``: also what the oracles that know every future
    position pay on the same
    walks (``oracle_area_m2_median``, ``oracle_joint_area_m2_median``,
    ``oracle_online_area_m2_median``).

    ``fix_reply_s`` (with ``update_s`` > 0): requests may wait up to 5 s (``max_delay_s``, as
    the city's), and a user the cloaker asks for a fresh fix (``session_fresh_s``) reports
    where she is ``fix_reply_s`` later; a region is checked against everyone's positions when
    it is answered (interpolated within the 5 s step). None: requests never wait
    (``max_delay_s`` 0), so nobody is asked.

    ``scatter_m`` > 0: every reported fix lies off the walker by a normal ``scatter_m`` per
    axis (the adversary knows where everyone really is); with ``says_accuracy`` each report
    gives its ``accuracy_m`` as a phone does (:class:`~simulators.fixes.Fixes`), else
    none (the cloaker assumes ``session_fix_error_m``). Exact fixes say accuracy 0.

    ``track``: also follow everyone inside each asker's first region through her later
    regions (``tracking``, :mod:`simulators.tracking`; about 30 % more time with tiles)."""
    from locpriv.core.cloak.cloaker import Cloaker, CloakOutcome
    from locpriv.core.cloak.types import CloakConfig, CloakParams

    ids = [f"u{i}" for i in range(users)]
    cloaker = Cloaker(
        CloakConfig(world=(0.0, 0.0, side_m, side_m), epoch_s=1.0, **(cloak or {})),
        rng=np.random.default_rng(seed + 1),
    )
    waits = fix_reply_s is not None and update_s > 0
    params = CloakParams(
        k=k,
        a_min_m2=a_min_m2,
        a_max_m2=a_max_m2,
        max_delay_s=5.0 if waits else 0.0,
        session_s=session_s,
    )
    index = {u: i for i, u in enumerate(ids)}
    regions: list[list[frozenset[int]]] = [[] for _ in range(askers)]
    trackers: dict[int, RegionTracker] = {}
    tally = GuessTally()
    areas: list[float] = []
    frames: list[tuple[F64, F64]] = []
    asked = answered = 0
    walks = random_walks(
        users=users,
        side_m=side_m,
        askers=askers,
        every_s=every_s,
        rounds=int(minutes * 60 / every_s),
        speed_m_s=speed_m_s,
        update_s=update_s,
        dwell_share=dwell_share,
        dwell_scale_s=dwell_scale_s,
        walk_s=walk_s,
        party_size=party_size,
        party_m=party_m,
        fast_share=fast_share,
        fast_m_s=fast_m_s,
        fix_loss=fix_loss,
        seed=seed,
    )

    fixes_of = Fixes(scatter_m, np.random.default_rng([seed, 11]), says_accuracy=says_accuracy)

    def report(rows: Any, pos: F64) -> tuple[F64, F64]:
        """The fixes of users ``rows`` at true positions ``pos[rows]``, and their accuracy."""
        return fixes_of.report(pos[rows])

    def answer(out: CloakOutcome, xy: F64) -> None:
        """One outcome, checked against everyone's positions ``xy`` when it came."""
        nonlocal answered
        if out.region is None:
            return
        a = int(out.request_id[1])  # type: ignore[index]
        answered += 1
        x0, y0, x1, y1 = out.region.polygon.bounds
        inside = out.region.covers_xy(xy[:, 0], xy[:, 1])  # a box, or a session's tiles
        rows = np.flatnonzero(inside).tolist()
        regions[a].append(frozenset(rows))
        if track and a in trackers:
            trackers[a].follow(out.region.polygon, xy)
        elif track:
            trackers[a] = RegionTracker.first(a, np.asarray(rows, dtype=np.int64), xy)
        tally.add(a, (x0, y0, x1, y1), xy, rows, a)
        areas.append(out.region.area_m2)

    it = iter(walks)
    w = next(it, None)
    while w is not None:
        xy = w.xy
        if len(w.due):
            fx, acc = report(w.due, xy)
            cloaker.update_many([ids[u] for u in w.due], fx, w.t, acc)
        if w.request is None:
            w = next(it, None)
            continue
        step, now = w.request, w.t
        if update_s == 0:
            fx, acc = report(slice(None), xy)
            cloaker.update_many(ids, fx, now, acc)
        elif askers:
            # a request carries the asker's own fix (as P1 and P3 requests do); one epoch's
            # snapshot is shared, so every asker reports before the first request
            fx, acc = report(slice(0, askers), xy)
            cloaker.update_many(ids[:askers], fx, now, acc)
        if oracle_margin_m is not None:
            frames.append((xy[:, 0].copy(), xy[:, 1].copy()))
        waiting = 0
        for a in range(askers):
            asked += 1
            out = cloaker.request(("q", a, step), ids[a], params, now)
            if out is None:
                waiting += 1
            else:
                answer(out, xy)
        if not waiting:
            w = next(it, None)
            continue
        # requests wait for fresh fixes: play the next seconds (the walk is linear within
        # its 5 s step; the generator moves ``xy`` in place, so keep this step's copy)
        xy0 = xy.copy()
        w = next(it, None)
        t1 = w.t if w is not None else now + 5.0
        xy1 = w.xy if w is not None else xy0

        def at(t: float, xy0: F64 = xy0, xy1: F64 = xy1, t0: float = now, t1: float = t1) -> F64:
            out: F64 = xy0 + (xy1 - xy0) * min(1.0, (t - t0) / (t1 - t0))
            return out

        fixes = [index[u] for u in cloaker.take_fix_requests()]
        assert fix_reply_s is not None
        t_fix = now + fix_reply_s
        for t in np.arange(now + 0.5, now + params.max_delay_s + 1.0, 0.5).tolist():
            if fixes and t >= t_fix:
                pos = at(t_fix)
                fx, acc = report(fixes, pos)
                for out in cloaker.update_many([ids[u] for u in fixes], fx, t_fix, acc):
                    answer(out, pos)
                fixes = []
            for out in cloaker.on_deadline(t):
                answer(out, at(t))
            if not cloaker.pending():
                break
        assert not cloaker.pending(), "a request outlived its max_delay_s"
    res = intersection_attack([r for r in regions if r], k)
    guesses = tally.figures()
    oracles = {"distance": math.nan, "joint": math.nan, "online": math.nan}
    if oracle_margin_m is not None:
        for mode in oracles:
            paid = [
                x
                for a in range(askers)
                for x in session_area_bound(
                    frames,
                    a,
                    k,
                    margin_m=oracle_margin_m,
                    a_min_m2=a_min_m2,
                    joint=mode == "joint",
                    online=mode == "online",
                )
            ]
            oracles[mode] = float(np.median(paid)) if paid else math.nan
    return RepeatedCloaksResult(
        sessions=int(res["sessions"]),
        success_rate=res["success_rate"],
        candidates_mean=res["candidates_mean"],
        answered_rate=answered / asked if asked else math.nan,
        area_m2_median=float(np.median(areas)) if areas else math.nan,
        oracle_area_m2_median=oracles["distance"],
        oracle_joint_area_m2_median=oracles["joint"],
        oracle_online_area_m2_median=oracles["online"],
        centre_over_chance=guesses["centre_over_chance"],
        edge_over_chance=guesses["edge_over_chance"],
        centre_among_candidates_over_chance=guesses["centre_among_candidates_over_chance"],
        edge_among_candidates_over_chance=guesses["edge_among_candidates_over_chance"],
        rank_among_candidates_over_chance=guesses["rank_among_candidates_over_chance"],
        rank_decoy_over_chance=guesses["rank_decoy_over_chance"],
        session_counts=dict(cloaker.session_counts),
        tracking=tracking_figures(list(trackers.values()), math.sqrt(a_min_m2)) if track else None,
    )


def session_area_bound(
    positions: Iterable[tuple[F64, F64]],
    requester: int,
    k: int,
    *,
    margin_m: float = 0.0,
    a_min_m2: float = 0.0,
    pool: NDArray[np.bool_] | None = None,
    online: bool = False,
    joint: bool = False,
) -> list[float]:
    """What a historical-k cloak pays for one session when a fixed set of ``k`` users (the
    requester and ``k - 1`` others) must be in every region: the region areas (m²), their box
    grown by ``margin_m`` on every side and at least ``a_min_m2``, per request. ``positions``
    gives, per request, the x and y arrays (metres) of every user.

    By default an oracle that knows every future position keeps the ``k - 1`` whose mean
    L-infinity distance from the requester over the session is least (every region of a
    session whose intersection keeps ``k`` users covers ``k`` fixed users; ranking by the
    median or the maximum distance gives larger figures on the city simulator). It is no lower
    bound: ``joint`` below pays 30-50 % less on the city. ``pool`` (a flag per user)
    restricts the others to those flagged; ``online`` chooses them by their distance at the
    first request only (an online scheme told, say, who never moves, committing at once, with
    no first region or shrinking to pay for). ``joint`` chooses them greedily by the box they
    make together: each next one, among the ``8 k`` of least mean distance, the one that keeps
    the median over the session of the set's box area least (members ahead and behind on her
    street make a thin box; as many at the same distance all round, a square): a cheaper
    oracle, closer to the least any fixed set pays."""
    frames = [
        (np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)) for x, y in positions
    ]
    if not frames:
        return []
    xs = np.stack([f[0] for f in frames])
    ys = np.stack([f[1] for f in frames])
    linf = np.maximum(np.abs(xs - xs[:, [requester]]), np.abs(ys - ys[:, [requester]]))
    cost = linf[0].copy() if online else linf.mean(axis=0)
    if pool is not None:
        cost[~np.asarray(pool, dtype=bool)] = np.inf
    cost[requester] = -1.0
    chosen = np.argsort(cost, kind="stable")[:k]
    if joint:
        top = np.argsort(cost, kind="stable")
        top = top[np.isfinite(cost[top])][: 8 * k + 1]
        grown = grow_box(
            xs,
            ys,
            int(top[0]),
            top[1:],
            count=k - 1,
            cost=lambda area: np.median(np.maximum(area, a_min_m2), axis=0),
            margin_m=margin_m,
        )
        chosen = np.asarray([int(top[0]), *grown], dtype=np.int64)
    w = np.ptp(xs[:, chosen], axis=1) + 2 * margin_m
    h = np.ptp(ys[:, chosen], axis=1) + 2 * margin_m
    return [float(a) for a in np.maximum(w * h, a_min_m2)]


@dataclass(frozen=True, slots=True)
class BrokerTrackingResult:
    """What the Protocol 4 broker learns of devices over a day (see
    :func:`broker_tracking_attack`)."""

    devices: int
    error_m_median: float
    """Median over device-minutes of the broker's position error, metres."""
    error_static_m_median: float
    """The same over minutes a device had not moved for an hour (where averaging helps)."""
    linked_hours_mean: float
    """How long, on average, the broker follows one device under one identity, hours."""


@dataclass(frozen=True, slots=True)
class EdgeAttackResult:
    """Where region edges sit relative to the users around them (one population, one mode).

    For every inner edge of every distinct region (edges on the world's border excepted),
    ``d_in`` is the distance across the edge's axis to the nearest user inside the region and
    ``d_out`` to the nearest user outside it (users whose other coordinate lies in the edge's
    span). A placement blind to the users puts an edge anywhere in the gap ``d_in + d_out``:
    the ``blind_*`` figures are the counts such a placement gives (1 mm, or 2 mm for the
    offset, over the gap, summed over edges).
    """

    population: str
    sessions: bool
    regions: int
    edges: int
    midway: int
    """Edges with ``|d_in - d_out| < 1 mm`` (a split half-way between two users)."""
    at_member: int
    """Edges with ``d_in < 1 mm`` (on a member's coordinate)."""
    at_offset: int
    """Edges with ``d_in`` within 1 mm of the session margin (a fixed offset from a member)."""
    blind_midway: float
    blind_at_member: float
    blind_at_offset: float
    distinct_per_session: float
    """Sessions only (else nan): mean number of distinct regions one session published while
    nobody moved (a session's set shrinks towards k over its first requests, so its regions
    may shrink too)."""
    intersection_area_ratio: float
    """Median over sessions of area(intersection of the session's regions) / area(its smallest
    region): below 1 when placements around members who stay put differ (each is a fresh
    sample of where they are, and intersecting them narrows the box around them); 1 when the
    regions are nested, as the boxes of one fixed grid around a shrinking set are."""

    @property
    def pinned(self) -> int:
        """Edges at a deterministic function of users' coordinates (any of the three)."""
        return self.midway + self.at_member + self.at_offset

    @property
    def blind(self) -> float:
        """What a blind placement gives for :attr:`pinned`."""
        return self.blind_midway + self.blind_at_member + self.blind_at_offset


def edge_population(kind: str, n: int, side_m: float, rng: np.random.Generator) -> F64:
    """``uniform`` over the square, ``clustered`` (60 % in 6 Gaussian hot spots of σ 50-300 m)
    or ``tied`` (coordinates on a 50 m lattice: many exact ties), metres."""
    if kind == "uniform":
        return rng.uniform(0.0, side_m, (n, 2))
    if kind == "clustered":
        xy = rng.uniform(0.0, side_m, (n, 2))
        m = int(0.6 * n)
        centres = rng.uniform(0.2 * side_m, 0.8 * side_m, (6, 2))
        spread = rng.uniform(50.0, 300.0, 6)
        which = rng.integers(0, 6, m)
        xy[:m] = centres[which] + rng.normal(0.0, 1.0, (m, 2)) * spread[which, None]
        return np.clip(xy, 0.0, side_m)
    if kind == "tied":
        return rng.integers(0, int(side_m // 50), (n, 2)).astype(np.float64) * 50.0
    raise ValueError(f"unknown population {kind!r}")


def _edge_distances(
    xy: F64, box: tuple[float, float, float, float], side_m: float
) -> list[tuple[float, float]]:
    """``(d_in, d_out)`` for each inner edge of ``box`` that has users on both sides."""
    x0, y0, x1, y1 = box
    out: list[tuple[float, float]] = []
    for axis, edge, sign, span, ext in (
        (0, x0, -1, (y0, y1), (x0, x1)),
        (0, x1, 1, (y0, y1), (x0, x1)),
        (1, y0, -1, (x0, x1), (y0, y1)),
        (1, y1, 1, (x0, x1), (y0, y1)),
    ):
        if edge <= 0.0 or edge >= side_m:
            continue
        c, o = xy[:, axis], xy[:, 1 - axis]
        band = (o >= span[0]) & (o <= span[1])
        inside = band & (c >= ext[0]) & (c <= ext[1])
        outside = band & ((c > edge) if sign > 0 else (c < edge))
        if inside.any() and outside.any():
            out.append(
                (float(np.min(np.abs(c[inside] - edge))), float(np.min(np.abs(c[outside] - edge))))
            )
    return out


def edge_census(
    xy: F64, boxes: Iterable[tuple[float, float, float, float]], side_m: float, margin_m: float
) -> tuple[int, NDArray[np.int64], F64]:
    """Where the inner edges of ``boxes`` (x0, y0, x1, y1, metres) sit among the users ``xy``
    of a ``side_m`` square: ``(edges, counts, blind)``, ``counts`` the edges midway (within
    1 mm), on a member's coordinate and at ``margin_m`` from one, ``blind`` what a placement
    blind to the users gives for each (see :class:`EdgeAttackResult`)."""
    counts = np.zeros(3, dtype=np.int64)
    blind = np.zeros(3)
    edges = 0
    for box in boxes:
        for d_in, d_out in _edge_distances(xy, box, side_m):
            gap = max(d_in + d_out, 1e-12)
            edges += 1
            counts += (abs(d_in - d_out) < 1e-3, d_in < 1e-3, abs(d_in - margin_m) < 1e-3)
            blind += (
                min(1.0, 1e-3 / gap),
                min(1.0, 1e-3 / gap),
                min(1.0, 2e-3 / gap) if margin_m < gap else 0.0,
            )
    return edges, counts, blind


def hilbert_edge_census(
    population: str = "uniform",
    *,
    users: int = 2000,
    side_m: float = 4000.0,
    k: int = 5,
    seed: int = 0,
) -> tuple[int, int]:
    """The textbook placement :func:`edge_attack` is measured against: every user's Hilbert
    Cloak (the bounding box of k users, :func:`simulators.baselines.hilbert_cloak`) on the same
    population. Returns ``(inner edges, edges on a member's coordinate)``: all of them, which
    is what a box around its members tells an observer who stands outside one."""
    from simulators.baselines import hilbert_cloak

    xy = edge_population(population, users, side_m, np.random.default_rng(seed))
    boxes = {(float(r[0]), float(r[1]), float(r[2]), float(r[3])) for r in hilbert_cloak(xy, k)}
    edges, counts, _ = edge_census(xy, boxes, side_m, math.inf)
    return edges, int(counts[1])


def edge_attack(
    population: str = "uniform",
    *,
    sessions: bool = False,
    users: int = 2000,
    side_m: float = 4000.0,
    k: int = 5,
    a_min_m2: float = 1e4,
    a_max_m2: float = 1e6,
    requests: int = 300,
    rounds: int = 10,
    seed: int = 0,
) -> EdgeAttackResult:
    """Cloak ``requests`` random users of a static population through a real
    :class:`~locpriv.core.cloak.cloaker.Cloaker` and measure where the edges sit. With
    ``sessions`` each asker asks ``rounds`` times in one session, a minute apart, while nobody
    moves; every distinct region counts, and each session's regions are also intersected."""
    from locpriv.core.cloak.cloaker import Cloaker  # keep the module light
    from locpriv.core.cloak.types import CloakConfig, CloakParams

    rng = np.random.default_rng(seed)
    xy = edge_population(population, users, side_m, rng)
    cfg = CloakConfig(world=(0.0, 0.0, side_m, side_m), epoch_s=1.0, k_min=1)
    ck = Cloaker(cfg, rng=np.random.default_rng(seed + 1))
    ids = [f"u{i}" for i in range(users)]
    params = CloakParams(
        k=k,
        a_min_m2=a_min_m2,
        a_max_m2=a_max_m2,
        max_delay_s=0.0,
        session_s=600.0 if sessions else 0.0,
    )
    seen: set[tuple[float, float, float, float]] = set()
    per_user: dict[int, list[tuple[float, float, float, float]]] = {}
    asks = rng.choice(users, size=min(requests, users), replace=False).tolist()
    for rep in range(rounds if sessions else 1):
        now = 60.0 * rep
        ck.update_many(ids, xy, now=now, accuracy_m=exact(users))
        for i in asks:
            out = ck.request((rep, i), ids[i], params, now + 0.5)
            if out is not None and out.region is not None:
                x0, y0, x1, y1 = (float(v) for v in out.region.polygon.bounds)
                seen.add((x0, y0, x1, y1))
                per_user.setdefault(i, []).append((x0, y0, x1, y1))
    edges, counts, blind = edge_census(xy, seen, side_m, cfg.session_margin_m)
    distinct = ratio = math.nan
    if sessions and per_user:
        distinct = float(np.mean([len(set(v)) for v in per_user.values()]))
        ratios = []
        for boxes in per_user.values():
            bx = np.asarray(boxes)
            w = max(0.0, bx[:, 2].min() - bx[:, 0].max())
            h = max(0.0, bx[:, 3].min() - bx[:, 1].max())
            smallest = float(((bx[:, 2] - bx[:, 0]) * (bx[:, 3] - bx[:, 1])).min())
            ratios.append(w * h / smallest)
        ratio = float(np.median(ratios))
    return EdgeAttackResult(
        population,
        sessions,
        len(seen),
        edges,
        int(counts[0]),
        int(counts[1]),
        int(counts[2]),
        float(blind[0]),
        float(blind[1]),
        float(blind[2]),
        distinct,
        ratio,
    )


def _day_of_moves(rng: np.random.Generator, side_m: float) -> list[tuple[float, float, float]]:
    """One day of a device as ``(t_s, x_m, y_m)`` waypoints: dwell at places (home, work,
    errands) for hours, walk or drive between them."""
    places = rng.uniform(0.0, side_m, (4, 2))
    t, out = 0.0, []
    home = places[0]
    out.append((0.0, float(home[0]), float(home[1])))
    for j in [0, 1, 2, 1, 3, 0]:
        p = places[j]
        last = out[-1]
        dist = math.hypot(p[0] - last[1], p[1] - last[2])
        t = max(t, last[0]) + dist / float(rng.choice([1.4, 8.0]))
        out.append((t, float(p[0]), float(p[1])))
        t += float(rng.uniform(1, 4)) * 3600.0
        out.append((t, float(p[0]), float(p[1])))
    out.append((86_400.0, out[-1][1], out[-1][2]))
    return out


def _at(moves: list[tuple[float, float, float]], t: float) -> tuple[float, float]:
    for (t0, x0, y0), (t1, x1, y1) in itertools.pairwise(moves):
        if t0 <= t <= t1:
            f = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
            return x0 + f * (x1 - x0), y0 + f * (y1 - y0)
    return moves[-1][1], moves[-1][2]


def broker_tracking_attack(
    *,
    devices: int = 30,
    side_m: float = 8000.0,
    sigma_m: float = 100.0,
    query_every_s: float = 900.0,
    defended: bool = True,
    seed: int = 0,
) -> BrokerTrackingResult:
    """Devices live one day (dwelling at places, moving between them) and run Protocol 4; the
    broker records, per connection identity, every discovery subscription (the cell of the
    device's perturbed point) and every request it publishes (its perturbed point).
    ``defended``: keyed place noise and a connection identity that rotates with the pseudonym
    (the device reconnects under a fresh client id, with a deployment-wide P4 credential);
    otherwise fresh draws reused for an hour and one identity all day.

    The broker's estimate of a device at each minute is the latest perturbed point of that
    identity, or the mean of those of the last hour when that is closer to the truth (an
    adversary that averages a device that does not move); before any point, the centre of the
    subscribed cell."""
    proj = LocalProjection(41.3874, 2.1686)
    rng = np.random.default_rng(seed)
    query = NearestQuery(category="cafe", n=1)
    errors: list[float] = []
    static_errors: list[float] = []
    spans: list[float] = []
    for d in range(devices):
        moves = _day_of_moves(rng, side_m)
        config = PeerConfig(
            k=5,
            a_min_m2=1e4,
            a_max_m2=4e6,
            mechanism=GaussianMechanism(sigma_m),
            keyed_noise=defended,
        )
        pm = PeerMachine(config, rng=np.random.default_rng([seed, d]), secret=rng.bytes(32))
        seen: dict[str, list[tuple[float, float, float]]] = {}
        last_moved = 0.0
        prev = _at(moves, 0.0)
        for minute in range(24 * 60):
            t = minute * 60.0
            now = 1.7e9 + t
            x, y = _at(moves, t)
            if math.hypot(x - prev[0], y - prev[1]) > 1.0:
                last_moved = t
            prev = (x, y)
            lon, lat = proj.point_to_lonlat(x, y)
            pm.set_location(lon, lat, now)
            ident = pm.pseudonym(now) if defended else "device"
            points = seen.setdefault(ident, [])
            if minute % int(query_every_s // 60) == 0:
                qid, effects = pm.start_query(query, now)
                for e in effects:
                    if isinstance(e, Send) and isinstance(e.message, PeerRequest):
                        px, py = proj.point_to_xy(e.message.lon, e.message.lat)
                        points.append((t, px, py))
                        break
                pm.cancel(qid)
            if not points:
                continue
            latest = np.array(points[-1][1:])
            recent = np.array([(px, py) for (tp, px, py) in points if tp >= t - 3600.0])
            truth = np.array([x, y])
            err = min(
                float(np.hypot(*(latest - truth))),
                float(np.hypot(*(recent.mean(axis=0) - truth))),
            )
            errors.append(err)
            if t - last_moved >= 3600.0:
                static_errors.append(err)
        for pts in seen.values():
            if pts:
                spans.append((pts[-1][0] - pts[0][0] + query_every_s) / 3600.0)
    return BrokerTrackingResult(
        devices=devices,
        error_m_median=float(np.median(errors)),
        error_static_m_median=float(np.median(static_errors)) if static_errors else math.nan,
        linked_hours_mean=float(np.mean(spans)),
    )


def attacks_summary(*, small: bool = True, seed: int = 0) -> dict[str, dict[str, float]]:
    """The attacks, without and with the defences, as plain numbers (for ``summary.json``
    and the plot): ``small`` runs take seconds (the demo), the benchmark runs them at size."""
    n_static, n_broker = (3, 5) if small else (50, 30)
    static = {
        name: static_device_attack(devices=n_static, keyed=keyed, seed=seed)
        for name, keyed in (("before", False), ("after", True))
    }
    cloaks = {
        name: repeated_cloaks_attack(session_s=s, seed=seed, askers=40 if small else 100)
        for name, s in (("before", 0.0), ("after", 600.0))
    }
    # the session design before regions of tiles (2026-12-06): one box per region
    one_box = repeated_cloaks_attack(
        session_s=600.0, seed=seed, askers=40 if small else 100, cloak={"session_tile_factor": 0.0}
    )

    def sessions_30s(**kw: Any) -> RepeatedCloaksResult:
        """Sessions among walkers who report every 30 s."""
        askers = 40 if small else 100
        return repeated_cloaks_attack(
            session_s=600.0, seed=seed, askers=askers, update_s=30.0, **kw
        )

    # everyone at a cyclist's pace: margins of a pedestrian for everyone (before) and margins
    # sized by each member's seen speed (after)
    fast = {
        name: sessions_30s(speed_m_s=5.0, cloak=cloak)
        for name, cloak in (("before", {"session_speed_factor": 0.0}), ("after", None))
    }
    # devices that do not answer the cloaker's fix requests (before) and devices that do, a
    # second later (after): the area it costs
    stale = {
        name: sessions_30s(fix_reply_s=reply) for name, reply in (("before", None), ("after", 1.0))
    }
    # fixes scattered by 5 m per axis: margins that ignore it (before) and margins that hold
    # each report's accuracy (after)
    scattered = {
        name: sessions_30s(fix_reply_s=1.0, scatter_m=5.0, says_accuracy=says, cloak=cloak)
        for name, cloak, says in (
            ("before", {"session_fix_error_m": 0.0}, False),
            ("after", None, True),
        )
    }
    broker = {
        name: broker_tracking_attack(devices=n_broker, defended=d, seed=seed)
        for name, d in (("before", False), ("after", True))
    }
    wander = {  # a device at home, fixes scattered by 25 m, a walk a day
        name: static_device_attack(
            devices=12 if small else 20,  # a mean over fewer swings by ±0.4 σ between seeds
            days=30.0 if small else 365.0,
            scatter_m=25.0,
            walks_per_day=1.0,
            seed=seed,
            through_machine=False,
            places_only=places_only,
        )
        for name, places_only in (("before", True), ("after", False))
    }
    city = _city_session_cost(small)
    # where region edges sit (goal 1): the bounding box of k users (Hilbert Cloak) puts every
    # edge on a member's coordinate; the cloaker's share should be a blind placement's
    edge_runs = [
        edge_attack(
            pop, sessions=sess, seed=seed, **({"requests": 100, "rounds": 5} if small else {})
        )
        for pop in ("uniform", "clustered", "tied")
        for sess in (False, True)
    ]
    textbook = [hilbert_edge_census(pop, seed=seed) for pop in ("uniform", "clustered", "tied")]
    inner = sum(r.edges for r in edge_runs)
    return {
        "region_edges": {
            "before_pinned_share": sum(p for _, p in textbook)
            / max(1, sum(e for e, _ in textbook)),
            "after_pinned_share": sum(r.pinned for r in edge_runs) / max(1, inner),
            "blind_pinned_share": sum(r.blind for r in edge_runs) / max(1, inner),
            "after_edges": float(inner),
        },
        # what historical k-anonymity costs (goal 3: <= 5x the one-shot median, >= 95 % answered)
        "session_cost": {
            "before_area_ratio": 1.0,
            "box_area_ratio": one_box.area_m2_median / cloaks["before"].area_m2_median,
            "box_answered_rate": one_box.answered_rate,
            "box_success_rate": one_box.success_rate,
            "after_area_ratio": cloaks["after"].area_m2_median / cloaks["before"].area_m2_median,
            "after_answered_rate": cloaks["after"].answered_rate,
        },
        "city_session_cost": city,
        "wandering_device": {f"{k}_error_sigma": v.best_sigma for k, v in wander.items()}
        | {f"{k}_distinct_points": v.distinct_points_mean for k, v in wander.items()},
        "static_device": {f"{k}_error_sigma": v.best_sigma for k, v in static.items()}
        | {f"{k}_distinct_points": v.distinct_points_mean for k, v in static.items()},
        "repeated_cloaks": {f"{k}_success_rate": v.success_rate for k, v in cloaks.items()}
        | {f"{k}_area_m2_median": v.area_m2_median for k, v in cloaks.items()}
        | {f"{k}_answered_rate": v.answered_rate for k, v in cloaks.items()},
        # who asked, guessed as the user nearest an edge or the centre of her regions, among the
        # candidates the intersection attack leaves (GuessTally; 1 = a guess at random)
        "requester_guess": {
            f"{k}_edge_over_chance": v.edge_among_candidates_over_chance for k, v in cloaks.items()
        }
        | {
            f"{k}_centre_over_chance": v.centre_among_candidates_over_chance
            for k, v in cloaks.items()
        },
        "fast_neighbours": {f"{k}_success_rate": v.success_rate for k, v in fast.items()}
        | {f"{k}_area_m2_median": v.area_m2_median for k, v in fast.items()},
        "stale_fixes": {f"{k}_area_m2_median": v.area_m2_median for k, v in stale.items()}
        | {f"{k}_success_rate": v.success_rate for k, v in stale.items()},
        "scattered_fixes": {f"{k}_success_rate": v.success_rate for k, v in scattered.items()}
        | {f"{k}_area_m2_median": v.area_m2_median for k, v in scattered.items()},
        "broker_tracking": {f"{k}_error_m_median": v.error_m_median for k, v in broker.items()}
        | {f"{k}_linked_hours": v.linked_hours_mean for k, v in broker.items()},
    }


def _city_session_cost(small: bool) -> dict[str, float]:
    """What sessions cost in the city (issue 22's goal 3 there), on its first seed: the median
    region of one-shot cloaks (``before``), of sessions with exact fixes (``after``) and of
    sessions whose fixes scatter by 10 m per axis and say so (``scattered``), each over the
    one-shot median with exact fixes, with the share answered and the intersection attack's
    success. ``small``: the quick city (800 people for 40 minutes: sparser and shorter, so
    its ratios are below the city's; ``benchmarks/bench_privacy.py`` plays it at size on five
    seeds)."""
    runs = {}
    users = 0
    for name, session_s, scatter_m in (
        ("before", 0.0, 0.0),
        ("after", CITY_SESSION_S, 0.0),
        ("scattered", CITY_SESSION_S, 10.0),
    ):
        res, built = city_run(session_s, small, scatter_m=scatter_m)
        runs[name] = city_figures(res)
        users = built.scenario.users
    one_shot = float(runs["before"]["area_m2_median"])
    out: dict[str, float] = {"users": float(users)}
    for name, f in runs.items():
        out[f"{name}_area_ratio"] = float(f["area_m2_median"]) / one_shot
        out[f"{name}_answered_rate"] = float(f["answered_rate"])
        out[f"{name}_success_rate"] = float(f["success_rate"])
    return out


@dataclass(frozen=True, slots=True)
class ParkedInsidersResult:
    """Honest users left in the askers' session sets when insiders park beside them."""

    sessions: int
    below_k_rate: float
    """Share of sessions in whose every region fewer than ``k`` honest users (the asker
    included, the insiders not) were truly inside."""
    honest_median: float
    """Median number of honest users in every region of a session."""


def parked_insiders_attack(
    insiders: int,
    *,
    still_users: int = 200,
    walkers: int = 400,
    askers: int = 40,
    k: int = 5,
    minutes: int = 40,
    side_m: float = 2000.0,
    seed: int = 0,
    cloak: Mapping[str, Any] | None = None,
) -> ParkedInsidersResult:
    """Colluding insiders against historical k-anonymity: each of ``askers`` users who never
    move has ``insiders`` devices (each a login of its own, reporting like everyone) parked
    within 10 m of her for the hour before and during her session; ``still_users`` in all never
    move (the askers among them), ``walkers`` alternate pauses (0-10 min) and walks (1.3 m/s).
    Everyone reports every minute; each asker asks for k every minute for ``minutes``
    (``session_s`` 600). The adversary knows her own devices, so what hides an asker is the
    honest users in all her regions: counted per session. Positions in local metres."""
    from locpriv.core.cloak.cloaker import Cloaker
    from locpriv.core.cloak.types import CloakConfig, CloakParams

    rng = np.random.default_rng(seed)
    n0 = still_users + walkers
    xy = rng.uniform(0.0, side_m, (n0, 2))
    parked = np.repeat(xy[:askers], insiders, axis=0) + rng.uniform(-10, 10, (askers * insiders, 2))
    xy = np.vstack([xy, parked])
    n = len(xy)
    walker = (np.arange(n) >= still_users) & (np.arange(n) < n0)
    ids = [f"u{i}" for i in range(n)]
    paused = rng.random(n) < 0.5
    left = rng.uniform(0.0, 600.0, n)
    heading = rng.uniform(0.0, 2 * np.pi, n)
    cloaker = Cloaker(
        CloakConfig(world=(0.0, 0.0, side_m, side_m), **(cloak or {})),
        rng=np.random.default_rng([seed, 1]),
    )
    params = CloakParams(k=k, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=0.0, session_s=600.0)
    kept = [frozenset(range(n0)) for _ in range(askers)]  # honest users in every region
    t = 1000.0
    cloaker.update_many(ids, xy, t - 60.0, exact(n))
    for step in range(-60, minutes):
        for _ in range(12):  # a minute in 5 s steps
            t += 5.0
            left -= 5.0
            flip = (left <= 0) & walker
            paused = np.where(flip, ~paused, paused)
            left = np.where(
                flip, np.where(paused, rng.uniform(0, 600, n), rng.uniform(60, 600, n)), left
            )
            heading = np.where(flip, rng.uniform(0, 2 * np.pi, n), heading)
            w = walker & ~paused
            xy[w] += np.column_stack([np.cos(heading[w]), np.sin(heading[w])]) * 6.5
            np.clip(xy, 0.0, side_m, out=xy)
        cloaker.update_many(ids, xy, t, exact(n))
        if step < 0:
            continue
        for a in range(askers):
            out = cloaker.request(("q", a, step), ids[a], params, t)
            if out is None or out.region is None:
                continue
            honest = xy[:n0]
            inside = out.region.covers_xy(honest[:, 0], honest[:, 1])
            kept[a] = kept[a] & frozenset(np.flatnonzero(inside).tolist())
    sizes = [len(s) for s in kept]
    return ParkedInsidersResult(
        sessions=len(sizes),
        below_k_rate=float(np.mean([c < k for c in sizes])),
        honest_median=float(np.median(sizes)),
    )
