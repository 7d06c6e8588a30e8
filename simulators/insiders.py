"""Insider attacks on Protocol 4 with the real :class:`PeerMachine` and the real issuer, no
network (issue 20): Sybil groups, and a colluding DS steering the centroid.

:class:`Bus` is a synchronous in-process broker: it routes every ``Send`` effect to the
machines subscribed to its topic (through the wire format), hands token requests to an
:class:`~locpriv.protocols.issuer.IssuerCore` and DS queries to the real POI index, and lets an
attacker answer every discovery request she sees.

* :func:`sybil_groups`: one login (``mallory``) answers each of the victim's requests with
  ``sybils`` crafted replies under fresh pseudonyms, placed to win the least-SSE group (a
  ring just wide enough for the area window around the victim's perturbed point); two of
  them carry her two genuine tokens, the rest none or a copy of hers. Counts the victim's
  outcomes: groups made only of her points, groups with honest members, failures.
* :func:`steering_errors`: a colluding DS and attacker who steer the centroid of a static
  victim and record every DS query; the Bayesian (grid posterior) estimate of the true
  position from the observed radii under a radius rule, its error in metres.

Distances are metres, times seconds; defaults are those of docs/peer.md's example
(k = 5, A 2·10⁴-10⁶ m², σ = 100 m).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric import rsa

from locpriv.core.geo import LocalProjection
from locpriv.core.noise import GaussianMechanism, offset_lonlat
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois
from locpriv.errors import GroupInfeasible
from locpriv.protocols.effects import Done, Effect, Failed, Send
from locpriv.protocols.issuer import IssuerCore
from locpriv.protocols.p4.machine import PeerMachine
from locpriv.protocols.p4.tokens import TokenWallet, b64e, period_of
from locpriv.protocols.p4.types import PeerAnswer, PeerConfig, radius_ladder
from locpriv.wire.messages import (
    DSQuery,
    IssueAnswer,
    IssueRequest,
    NearestQuery,
    PeerReply,
    PeerRequest,
    QueryAnswer,
    decode,
    encode,
)
from simulators.sync_bus import SyncBus

__all__ = [
    "Bus",
    "SybilOutcome",
    "issuer_core",
    "steering_errors",
    "sybil_groups",
]

LAT0, LON0 = 41.39, 2.17
"""Where the experiments run (the demo POI set covers Barcelona)."""
PERIOD_S = 3600.0
T0 = 1_000.0 * PERIOD_S
"""Start of the simulated period (Unix seconds)."""


def _secret(*parts: int) -> bytes:
    """A device's place-noise secret derived from the run's seed (reproducible runs)."""
    return hashlib.sha256(("locpriv-insiders/" + "/".join(map(str, parts))).encode()).digest()


@functools.cache
def _index() -> POIIndex:
    return POIIndex(load_pois(DEFAULT_POIS), LocalProjection(LAT0, LON0))


@functools.cache
def _keys(period: int) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def issuer_core(per_login: int = 2) -> IssuerCore:
    """An issuer with in-memory period keys (cached across calls: key generation is slow)."""
    return IssuerCore(_keys, period_s=PERIOD_S, per_login=per_login)


def peer_config(sigma_m: float = 100.0, **kw: object) -> PeerConfig:
    """The docs' example configuration (k = 5, A 2·10⁴-10⁶ m²) with ``sigma_m``."""
    base: dict[str, object] = {
        "k": 5,
        "a_min_m2": 20_000.0,
        "a_max_m2": 1_000_000.0,
        "mechanism": GaussianMechanism(sigma_m),
        "pseudonym_ttl_s": PERIOD_S,
    }
    base.update(kw)
    return PeerConfig(**base)  # type: ignore[arg-type]


Tap = Callable[[PeerRequest, float], list[Send]]
"""An attacker who sees a discovery request and answers with her own sends."""


@dataclass
class Bus(SyncBus):
    """A synchronous broker between machines, the issuer, DS and an attacker's tap."""

    issuer: IssuerCore | None = None
    outcomes: dict[str, Done[PeerAnswer] | Failed] = field(default_factory=dict)
    tap: Tap | None = None
    ds_seen: list[DSQuery] = field(default_factory=list)
    _tapped: set[str] = field(default_factory=set)

    def add(self, machine: PeerMachine) -> int:
        """Connect ``machine`` (subscribed to its standing topics, keys delivered)."""
        i = self.connect(machine, [machine.topics.issuer_keys])
        if self.issuer is not None:
            keys = self.issuer.keys_message(T0)
            self.apply(i, machine.receive(decode(encode(keys)), T0), T0)
        return i

    def settle(self, outcome: Done[PeerAnswer] | Failed) -> None:
        self.outcomes[outcome.request_id] = outcome

    def route(self, send: Send, now: float) -> list[tuple[int, Effect]]:
        msg = decode(encode(send.message))
        out: list[tuple[int, Effect]] = []
        if isinstance(msg, IssueRequest):
            if self.issuer is not None and self.topics.issue_user(send.topic) == msg.user_id:
                out += [(-1, s) for s in self.issuer.receive(msg, now)]
            return out
        if isinstance(msg, DSQuery):
            self.ds_seen.append(msg)
            pois, cand = _index().answer(msg.query, msg.location)
            answer = QueryAnswer(correlation_id=msg.correlation_id, pois=pois, candidates=cand)
            return [(-1, Send(msg.reply_to, answer))]
        tapped = isinstance(msg, PeerRequest) and msg.correlation_id in self._tapped
        if isinstance(msg, PeerRequest) and self.tap is not None and not tapped:
            self._tapped.add(msg.correlation_id)  # one copy of the 9 cell publications
            out += [(-1, s) for s in self.tap(msg, now)]
        return out + self.deliver(send.topic, msg, now)

    def ask(self, who: int, now: float) -> Done[PeerAnswer] | Failed:
        """One query of machine ``who`` at ``now``, run to its outcome."""
        qid, effects = self.machines[who].start_query(NearestQuery(category="pharmacy", n=1), now)
        self.apply(who, effects, now)
        self.run_until(now + 30.0, now)
        return self.outcomes.pop(qid)


# ------------------------------------------------------------------------------- Sybils


class Mallory:
    """One login's Sybil responder: ``sybils`` replies per request in a ring around the
    requester's perturbed point; ``tokens`` of her wallets are genuine (the issuer gives one
    login ``per_login``), the others carry no token or a copy of a genuine one."""

    def __init__(self, sybils: int, wallets: list[TokenWallet]) -> None:
        self.sybils = sybils
        self.wallets = wallets

    def __call__(self, req: PeerRequest, now: float) -> list[Send]:
        period = period_of(now, PERIOD_S)
        sends: list[Send] = []
        copied = next((w.token(period) for w in self.wallets if w.token(period)), None)
        for i in range(self.sybils):
            angle = 2.0 * math.pi * i / self.sybils
            radius = 105.0 + 55.0 * ((i * 0.618) % 1.0)  # just past the A_min window
            lon, lat = offset_lonlat(
                req.lon, req.lat, radius * math.cos(angle), radius * math.sin(angle)
            )
            if i < len(self.wallets):
                w = self.wallets[i]
                rep = PeerReply(
                    correlation_id=req.correlation_id,
                    responder=w.pseudonym(period),
                    lat=lat,
                    lon=lon,
                    t=now,
                )
                sends.append(Send(req.reply_to, w.sign(rep, period)))
                continue
            fresh = TokenWallet()
            extra: dict[str, object] = {}
            if i % 2 and copied is not None:  # a genuine token under another pseudonym
                extra = {"period": period, "token": copied, "proof": b64e(b"\x00" * 64)}
            sends.append(
                Send(
                    req.reply_to,
                    PeerReply(
                        correlation_id=req.correlation_id,
                        responder=fresh.pseudonym(period),
                        lat=lat,
                        lon=lon,
                        t=now,
                        **extra,
                    ),
                )
            )
        return sends


@dataclass(frozen=True, slots=True)
class SybilOutcome:
    """The victim's outcomes over ``trials`` queries: ``sybil_only`` groups made only of the
    attacker's points, ``mixed`` groups with at least one honest member, ``failed`` queries (by
    error text's reason), ``attacker_members`` (mean per successful group) and its maximum."""

    trials: int
    sybil_only: int
    mixed: int
    failed: Counter[str]
    attacker_members: float
    max_attacker_members: int

    @property
    def sybil_only_share(self) -> float:
        """Sybil-only groups over all queries."""
        return self.sybil_only / self.trials


def sybil_groups(
    honest: int,
    *,
    tokens: bool,
    trials: int = 40,
    sybils: int = 40,
    spread_m: float = 600.0,
    seed: int = 0,
    sigma_m: float = 100.0,
) -> SybilOutcome:
    """The victim's groups with ``honest`` neighbours (uniform within ``spread_m`` of her) and
    one attacker login answering every request with ``sybils`` crafted replies. ``tokens``:
    devices hold issuer tokens and require them (``require_tokens=True``); else none does
    (the deployment before issue 20)."""
    rng = np.random.default_rng(seed)
    issuer = issuer_core() if tokens else None
    bus = Bus(issuer=issuer)
    cfg = peer_config(sigma_m, require_tokens=tokens, max_rounds=2)
    n = honest + 1
    for i in range(n):
        m = PeerMachine(
            cfg, rng=np.random.default_rng([seed, i]), login=f"user{i}", secret=_secret(seed, i)
        )
        bus.add(m)
    wallets: list[TokenWallet] = []
    period = period_of(T0, PERIOD_S)
    if issuer is not None:
        for _ in range(issuer.per_login + 2):  # she asks more often than she is allowed
            w = TokenWallet()
            cid = f"m{len(wallets)}"
            blinded = w.begin(period, _keys(period).public_key(), cid, "x", T0 + 5.0)
            req = IssueRequest(
                correlation_id=cid,
                reply_to=bus.topics.reply(cid),
                user_id="mallory",
                period=period,
                blinded_msg=blinded,
            )
            for s in issuer.receive(req, T0):
                if isinstance(s.message, IssueAnswer) and w.complete(cid, s.message.blind_sig):
                    wallets.append(w)
    bus.tap = Mallory(sybils, wallets)
    sybil_only = mixed = 0
    members: list[int] = []
    failed: Counter[str] = Counter()
    now = T0 + 1.0
    for _ in range(trials):
        for i in range(n):
            dx, dy = (0.0, 0.0) if i == 0 else rng.uniform(-spread_m, spread_m, 2)
            lon, lat = offset_lonlat(LON0, LAT0, float(dx), float(dy))
            bus.apply(i, bus.machines[i].set_location(lon, lat, now), now)
        out = bus.ask(0, now)
        honest_ids = {m.pseudonym(now) for m in bus.machines[1:]}
        now += 12.0
        if isinstance(out, Failed):
            reason = (
                out.error.reason_code or "group_infeasible"
                if isinstance(out.error, GroupInfeasible)
                else type(out.error).__name__
            )
            failed[reason] += 1
            continue
        mine = sum(1 for p in out.value.members if p not in honest_ids)
        members.append(mine)
        if mine == len(out.value.members):
            sybil_only += 1
        else:
            mixed += 1
    return SybilOutcome(
        trials=trials,
        sybil_only=sybil_only,
        mixed=mixed,
        failed=failed,
        attacker_members=float(np.mean(members)) if members else 0.0,
        max_attacker_members=max(members, default=0),
    )


# ----------------------------------------------------------------------------- steering


def _ladder(d: np.ndarray, base: float) -> np.ndarray:
    """:func:`radius_ladder` over an array (exact powers of two of ``base``)."""
    out = np.full(d.shape, base)
    while True:
        short = (out < d) & (out < 100_000.0)
        if not short.any():
            capped: np.ndarray = np.minimum(out, 100_000.0)
            return capped
        out = np.where(short, out * 2.0, out)


def _posterior_mean(
    prior_xy: tuple[float, float], sigma: float, grid: np.ndarray, keep: np.ndarray
) -> tuple[float, float]:
    w = np.exp(
        -0.5 * ((grid[:, 0] - prior_xy[0]) ** 2 + (grid[:, 1] - prior_xy[1]) ** 2) / sigma**2
    )
    w = w * keep
    if w.sum() <= 0.0:
        return prior_xy
    return float((w * grid[:, 0]).sum() / w.sum()), float((w * grid[:, 1]).sum() / w.sum())


def steering_errors(
    sigma_m: float,
    *,
    honest: int = 0,
    victims: int = 10,
    queries: int = 50,
    rule: str = "machine",
    seed: int = 0,
) -> list[float]:
    """Error (m) of the attacker's estimate of each static victim's true position after
    ``queries`` steered queries.

    The attacker answers every request with ``k-1`` Sybils (tokens off: she has as many as she
    wants) whose mean puts the centroid where she chooses: at distance ``r₀ − margin ± u`` from
    her current estimate, ``u`` shrinking with her uncertainty (a bisection on the ladder
    step). DS colludes and reports each query's centroid and radius. Her estimate is the
    posterior mean over a grid around the victim's perturbed point (prior N(p, σ²)), keeping
    the hypotheses ``h`` for which the rule predicts the radius observed: ``rule="machine"``
    observes the real :class:`PeerMachine` and predicts with
    :func:`~locpriv.protocols.p4.types.query_radius` of the group's extent (asserted equal to
    what the machine sent); ``rule="legacy"`` is the ladder of |centroid − true| + margin used
    before issue 20, evaluated on the same steered centroids (the control: that rule leaks).
    ``honest`` neighbours within 600 m may join the groups (the attacker's steering is then
    imprecise but she still sees the centroid).
    """
    rng = np.random.default_rng(seed)
    cfg = peer_config(sigma_m, require_tokens=False, max_rounds=1)
    proj = LocalProjection(LAT0, LON0)
    errors: list[float] = []
    span = 4.0 * sigma_m
    step = sigma_m / 25.0
    axis = np.arange(-span, span + step / 2, step)
    for v in range(victims):
        bus = Bus()
        victim = PeerMachine(cfg, rng=np.random.default_rng([seed, v]), secret=_secret(seed, v))
        bus.add(victim)
        for h in range(honest):
            rng_h = np.random.default_rng([seed, v, h + 1])
            bus.add(PeerMachine(cfg, rng=rng_h, secret=_secret(seed, v, h + 1)))
        tx, ty = rng.uniform(-2000.0, 2000.0, 2)
        tlon, tlat = offset_lonlat(LON0, LAT0, float(tx), float(ty))
        now = T0 + 1.0
        bus.apply(0, victim.set_location(tlon, tlat, now), now)
        for h in range(honest):
            dx, dy = rng.uniform(-600.0, 600.0, 2)
            lon, lat = offset_lonlat(tlon, tlat, float(dx), float(dy))
            bus.apply(h + 1, bus.machines[h + 1].set_location(lon, lat, now), now)
        own = victim.perturbed(now)
        assert own is not None
        px, py = proj.point_to_xy(*own)
        gx, gy = np.meshgrid(px + axis, py + axis)
        grid = np.column_stack((gx.ravel(), gy.ravel()))
        keep = np.ones(len(grid))
        est = (px, py)
        base = cfg.radius_base_m
        reach = base - cfg.radius_margin_m
        target: list[tuple[float, float]] = []
        observed_radii: list[float] = []

        def tap(
            req: PeerRequest, t: float, target: list[tuple[float, float]] = target
        ) -> list[Send]:
            cx, cy = target[-1]
            k = cfg.k
            ox, oy = proj.point_to_xy(req.lon, req.lat)
            sx, sy = (k * cx - ox) / (k - 1), (k * cy - oy) / (k - 1)
            sends = []
            for i, (dx, dy) in enumerate(((60.0, 0.0), (-60.0, 0.0), (0.0, 60.0), (0.0, -60.0))):
                lon, lat = proj.point_to_lonlat(sx + dx, sy + dy)
                rep = PeerReply(
                    correlation_id=req.correlation_id,
                    responder=f"s{i}x{t:.0f}",
                    lat=lat,
                    lon=lon,
                    t=t,
                )
                sends.append(Send(req.reply_to, rep))
            return sends

        bus.tap = tap
        for j in range(queries):
            spread = float(
                np.sqrt(np.average(((grid - est) ** 2).sum(axis=1), weights=keep + 1e-300))
            )
            angle = j * 2.399963  # golden angle
            dist = reach + float(rng.uniform(-1.0, 1.0)) * max(spread, step)
            cx = est[0] + dist * math.cos(angle)
            cy = est[1] + dist * math.sin(angle)
            target.append((cx, cy))
            if rule == "legacy":
                true_xy = proj.point_to_xy(tlon, tlat)
                d_true = math.hypot(true_xy[0] - cx, true_xy[1] - cy)
                observed = radius_ladder(d_true + cfg.radius_margin_m, base)
                d_grid = np.hypot(grid[:, 0] - cx, grid[:, 1] - cy) + cfg.radius_margin_m
                narrowed = keep * (_ladder(d_grid, base) == observed)
                if narrowed.sum() > 0:  # else the grid's resolution is exhausted
                    keep = narrowed
            else:
                # the real device, steered: DS sees the centroid and the radius. The device's
                # rule predicts the same radius for every hypothesis h (it depends on the
                # group's points only), so none is excluded: the observation is kept for the
                # record and the paired test checks it does not depend on the true position
                seen = len(bus.ds_seen)
                bus.ask(0, now)
                now += 20.0
                if len(bus.ds_seen) > seen:
                    observed_radii.append(bus.ds_seen[-1].location.radius_m)  # type: ignore[union-attr]
            est = _posterior_mean((px, py), sigma_m, grid, keep)
        true_xy = proj.point_to_xy(tlon, tlat)
        errors.append(math.hypot(est[0] - true_xy[0], est[1] - true_xy[1]))
    return errors
