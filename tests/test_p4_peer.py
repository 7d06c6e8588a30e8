"""Protocol 4 peer machines wired together without a network (sans-I/O), with the real POI index
as DS: end to end, Lemma 1, collusion, averaging attack, Sybil and garbage replies, policy."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import locpriv
from locpriv.core.geo import LocalProjection
from locpriv.core.grouping import Group, select_group
from locpriv.core.noise import GaussianMechanism, offset_lonlat, perturb
from locpriv.core.poi import POIIndex, load_pois, refine
from locpriv.errors import GroupInfeasible, RemoteError, RequestTimeout
from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe
from locpriv.protocols.p4.machine import PeerMachine
from locpriv.protocols.p4.types import (
    PeerAnswer,
    PeerConfig,
    ResponderPolicy,
    TokenBucket,
    radius_ladder,
)
from locpriv.wire.messages import (
    DSQuery,
    ErrorReply,
    Message,
    NearestQuery,
    PeerReply,
    PeerRequest,
    QueryAnswer,
    decode,
    encode,
)
from locpriv.wire.topics import Topics, matches
from simulators.sync_bus import SyncBus

LAT0, LON0 = 41.39, 2.17  # the demo POI set covers Barcelona
SIGMA = 60.0
POIS = load_pois(Path(locpriv.__file__).parent / "data" / "pois.csv")
PROJ = LocalProjection(LAT0, LON0)
INDEX = POIIndex(POIS, PROJ)


@dataclass
class Net(SyncBus):
    """A synchronous in-process broker: routes Send effects by topic filter; DS is the POI index."""

    outcomes: list[Done[PeerAnswer] | Failed] = field(default_factory=list)
    ds_mode: str = "answer"  # answer | error | silent
    ds_seen: list[DSQuery] = field(default_factory=list)
    peer_reply_tos: set[str] = field(default_factory=set)

    def add(self, machine: PeerMachine, lon: float, lat: float, now: float = 0.0) -> int:
        i = self.connect(machine)
        self.apply(i, machine.set_location(lon, lat, now), now)
        return i

    def settle(self, outcome: Done[PeerAnswer] | Failed) -> None:
        self.outcomes.append(outcome)

    def route(self, send: Send, now: float) -> list[tuple[int, Effect]]:
        msg = decode(encode(send.message))  # through the wire format
        if isinstance(msg, PeerRequest):
            self.peer_reply_tos.add(msg.reply_to)
        if send.topic == self.topics.ds_query:
            assert isinstance(msg, DSQuery)
            self.ds_seen.append(msg)
            reply = self._ds(msg)
            return [] if reply is None else [(-1, Send(msg.reply_to, reply))]
        return self.deliver(send.topic, msg, now)

    def _ds(self, q: DSQuery) -> Message | None:
        if self.ds_mode == "silent":
            return None
        if self.ds_mode == "error":
            return ErrorReply(correlation_id=q.correlation_id, code="overloaded", reason="busy")
        pois, cand = INDEX.answer(q.query, q.location)
        return QueryAnswer(correlation_id=q.correlation_id, pois=pois, candidates=cand)

    def deliver_to(self, topic: str, msg: Message, now: float) -> None:
        for j, subs in enumerate(self.subs):
            if any(matches(f, topic) for f in subs):
                self.apply(j, self.machines[j].receive(decode(encode(msg)), now), now)


def config(**kw: object) -> PeerConfig:
    base: dict[str, object] = {
        "k": 5,
        "a_min_m2": 20_000.0,
        "a_max_m2": 1_000_000.0,
        "mechanism": GaussianMechanism(SIGMA),
        "window_s": 0.5,
        "max_rounds": 2,
    }
    base.update(kw)
    return PeerConfig(**base)  # type: ignore[arg-type]


def fleet(
    n: int, seed: int, spread_m: float = 400.0, **kw: object
) -> tuple[Net, list[tuple[float, float]]]:
    rng = np.random.default_rng(seed)
    net = Net()
    where = []
    for i in range(n):
        dx, dy = rng.uniform(-spread_m, spread_m, 2)
        lon, lat = offset_lonlat(LON0, LAT0, dx, dy)
        net.add(PeerMachine(config(**kw), rng=np.random.default_rng(seed * 1000 + i)), lon, lat)
        where.append((lon, lat))
    return net, where


def ask(net: Net, who: int, query: NearestQuery, now: float = 1.0) -> Done[PeerAnswer] | Failed:
    qid, effects = net.machines[who].start_query(query, now)
    net.apply(who, effects, now)
    net.run_until(now + 60.0, now)
    out = [o for o in net.outcomes if o.request_id == qid]
    assert len(out) == 1
    return out[0]


def test_end_to_end_answer_is_exact_and_anonymous() -> None:
    net, where = fleet(20, seed=1)
    q = NearestQuery(category="pharmacy", n=3)
    out = ask(net, 0, q)
    assert isinstance(out, Done), out
    a: PeerAnswer = out.value
    lon, lat = where[0]
    assert list(a.pois) == refine(POIS, q, lon=lon, lat=lat)  # the exact answer at the true point
    assert a.group_size == 5 and a.rounds == 1 and a.replies == 19
    assert 20_000.0 < a.area_m2 < 1_000_000.0 and a.sse_m2 > 0.0
    assert a.candidates >= 3
    (ds,) = net.ds_seen
    assert ds.location.kind == "centroid"
    assert (ds.location.lon, ds.location.lat) == a.centroid
    # the DS query carries no identifier and its reply topic is not the peers' one
    raw = encode(ds).decode()
    assert net.machines[0].pseudonym(1.0) not in raw
    assert net.peer_reply_tos and ds.reply_to not in net.peer_reply_tos
    # the radius covers the true point and is a step of the fixed ladder
    d = float(np.hypot(*np.subtract(PROJ.point_to_xy(lon, lat), PROJ.point_to_xy(*a.centroid))))
    assert d <= a.radius_m
    base = net.machines[0].config.radius_base_m
    assert math.log2(a.radius_m / base) == pytest.approx(round(math.log2(a.radius_m / base)))
    assert not net.machines[0].pending


def test_group_is_the_optimal_one_among_replies() -> None:
    net, _ = fleet(12, seed=2)
    out = ask(net, 3, NearestQuery(category="cafe", n=1))
    assert isinstance(out, Done)
    others = [m.perturbed(1.0) for j, m in enumerate(net.machines) if j != 3]
    own = net.machines[3].perturbed(1.0)
    assert own is not None
    proj = net.machines[3]._projection_for(*own)
    xy = np.array([proj.point_to_xy(*p) for p in others if p is not None])
    ref = select_group(proj.point_to_xy(*own), xy, 5, 20_000.0, 1_000_000.0, node_budget=None)
    assert isinstance(ref, Group)
    assert out.value.sse_m2 == pytest.approx(ref.sse_m2, rel=1e-9)


def test_infeasible_after_rounds_names_reason() -> None:
    net, _ = fleet(3, seed=3)
    out = ask(net, 0, NearestQuery(category="atm", n=1))
    assert isinstance(out, Failed)
    assert isinstance(out.error, GroupInfeasible)
    assert out.error.reason_code == "too_few_replies"
    assert "too_few_replies" in str(out.error) and "2 rounds" in str(out.error)
    assert net.machines[0].stats["round_too_few_replies"] == 2
    assert not net.subs[0] - {net.machines[0].cell_topic}  # reply topics released


def test_window_unsatisfiable_reason() -> None:
    net, _ = fleet(10, seed=4, spread_m=30.0, a_min_m2=500_000.0, a_max_m2=1_000_000.0)
    out = ask(net, 0, NearestQuery(category="atm", n=1))
    assert isinstance(out, Failed)
    assert "area_too_small" in str(out.error)


def test_ds_error_and_timeout() -> None:
    net, _ = fleet(8, seed=5)
    net.ds_mode = "error"
    out = ask(net, 0, NearestQuery(category="atm", n=1))
    assert isinstance(out, Failed) and isinstance(out.error, RemoteError)
    assert out.error.code == "overloaded"
    net.ds_mode = "silent"
    out = ask(net, 1, NearestQuery(category="atm", n=1), now=100.0)
    assert isinstance(out, Failed) and isinstance(out.error, RequestTimeout)


def test_lemma1_centroid_error_is_sigma_over_sqrt_k() -> None:
    """Over 2,000 groups the perturbed centroid misses the true centroid by σ/√k per axis."""
    rng = np.random.default_rng(11)
    k, trials = 5, 2000
    mech = GaussianMechanism(SIGMA)
    errs = np.empty((trials, 2))
    for t in range(trials):
        true = rng.uniform(-500, 500, (k, 2))
        pert = []
        for x, y in true:
            lon, lat = PROJ.point_to_lonlat(x, y)
            plon, plat = perturb(lon, lat, mech, rng)  # wire degrees
            pert.append(PROJ.point_to_xy(plon, plat))
        errs[t] = np.mean(pert, axis=0) - true.mean(axis=0)
    std = errs.std(axis=0, ddof=1)
    assert np.all(np.abs(std / (SIGMA / math.sqrt(k)) - 1) < 0.05), std


def test_collusion_of_k_minus_1() -> None:
    """k-1 colluders (with DS's centroid) estimate U = k·c - Σ their points.

    With their *true* points the error is U's noise plus theirs: σ·√k per axis. They also know
    the perturbed points they sent, which leaves only U's own noise: σ per axis — exactly what
    U's broadcast perturbed point already tells every neighbour, and no better.
    """
    rng = np.random.default_rng(12)
    k, trials = 5, 2000
    e_true = np.empty((trials, 2))
    e_pert = np.empty((trials, 2))
    for t in range(trials):
        true = rng.uniform(-500, 500, (k, 2))
        noise = GaussianMechanism(SIGMA).sample_m(rng, k)
        c = (true + noise).mean(axis=0)
        e_true[t] = k * c - true[1:].sum(axis=0) - true[0]
        e_pert[t] = k * c - (true[1:] + noise[1:]).sum(axis=0) - true[0]
    assert np.all(np.abs(e_true.std(axis=0) / (SIGMA * math.sqrt(k)) - 1) < 0.05)
    assert np.all(np.abs(e_pert.std(axis=0) / SIGMA - 1) < 0.05)


def _averaging_error(reuse: bool, devices: int = 100, requests: int = 100) -> float:
    errs = []
    policy = ResponderPolicy(per_requester_rate_per_s=100.0, overall_rate_per_s=100.0)
    topics = Topics()
    for d in range(devices):
        m = PeerMachine(
            config(reuse_enabled=reuse, responder=policy), rng=np.random.default_rng(500 + d)
        )
        m.set_location(LON0, LAT0, 0.0)
        pts = []
        for r in range(requests):
            now = 10.0 * r  # one request every 10 s, within the reuse ttl
            req = PeerRequest(
                correlation_id=f"c{r}",
                reply_to=topics.peer_reply(m.grid.cell_of(LON0, LAT0), "observer"),
                requester="observer",
                lat=LAT0,
                lon=LON0,
                t=now,
            )
            (send,) = [e for e in m.receive(req, now) if isinstance(e, Send)]
            assert isinstance(send.message, PeerReply)
            pts.append(PROJ.point_to_xy(send.message.lon, send.message.lat))
        errs.append(float(np.hypot(*np.mean(pts, axis=0))))  # true point is PROJ's origin
    return float(np.mean(errs))


def test_averaging_attack_is_defeated_by_reuse() -> None:
    on = _averaging_error(True)
    off = _averaging_error(False)
    # mean radial error: on ≈ σ·√(π/2) ≈ 1.25σ, off ≈ that / √100
    assert on >= SIGMA / 2, on
    assert off <= SIGMA / 5, off
    assert off == pytest.approx(SIGMA * math.sqrt(math.pi / 2) / 10, rel=0.25)


def test_sybil_and_garbage_replies_are_dropped_and_counted() -> None:
    net, _ = fleet(10, seed=6)
    me = net.machines[0]
    qid, effects = me.start_query(NearestQuery(category="atm", n=1), 1.0)
    net.apply(0, effects, 1.0)
    q = me._queries[qid]
    cid = next(iter(q.cids))
    own = me.perturbed(1.0)
    assert own is not None
    honest = dict(q.replies)
    assert len(honest) == 9
    near = offset_lonlat(own[0], own[1], 150.0, 90.0)
    far = offset_lonlat(own[0], own[1], 50_000.0, 0.0)
    sybil: list[PeerReply] = []
    sybil += [
        PeerReply(correlation_id=cid, responder=f"s{i}", lat=far[1], lon=far[0] + i * 1e-4, t=1.0)
        for i in range(300)
    ]
    sybil += [
        PeerReply(correlation_id=cid, responder="s-dup", lat=near[1], lon=near[0], t=1.0)
        for _ in range(50)
    ]
    sybil += [
        PeerReply(correlation_id=cid, responder=f"d{i}", lat=near[1], lon=near[0], t=1.0)
        for i in range(50)
    ]
    sybil += [PeerReply(correlation_id="nope", responder="x", lat=near[1], lon=near[0], t=1.0)]
    sybil += [
        PeerReply(correlation_id=cid, responder="old", lat=near[1] + 1e-4, lon=near[0], t=0.0)
    ]
    # a tight cluster of many distinct ids and points next to U (cannot form a group alone)
    sybil += [
        PeerReply(correlation_id=cid, responder=f"c{i}", lat=own[1] + i * 1e-8, lon=own[0], t=1.0)
        for i in range(1, 400)
    ]
    for r in sybil:
        net.deliver_to(q.peer_topic, r, 1.0 if r.responder != "old" else 200.0)
    for _ in range(20):
        me.receive_invalid(q.peer_topic, 1.0)
    dropped = q.dropped
    assert dropped["far"] == 300
    assert dropped["duplicate_responder"] == 49
    assert dropped["duplicate_point"] == 50
    assert dropped["stale"] == 1
    assert dropped["invalid"] == 20
    assert me.stats["unsolicited"] >= 1
    net.run_until(60.0, 1.0)
    (out,) = [o for o in net.outcomes if o.request_id == qid]
    assert isinstance(out, Done), out
    assert out.value.rounds == 1
    assert out.value.dropped["thinned"] > 300  # the cluster was thinned, honest points kept
    assert out.value.dropped["far"] == 300


def test_responder_policy() -> None:
    topics = Topics()
    m = PeerMachine(
        config(
            responder=ResponderPolicy(
                per_requester_burst=2,
                per_requester_rate_per_s=0.01,
                overall_burst=3,
                overall_rate_per_s=0.01,
            )
        ),
        rng=np.random.default_rng(7),
    )
    assert (
        m.receive(
            PeerRequest(
                correlation_id="a",
                reply_to=topics.peer_reply(m.grid.cell_of(LON0, LAT0), "r"),
                requester="r",
                lat=LAT0,
                lon=LON0,
                t=0.0,
            ),
            0.0,
        )
        == []
    )
    assert m.stats["no_location"] == 1
    m.set_location(LON0, LAT0, 0.0)

    def req(who: str, cid: str, lon: float = LON0, reply_to: str | None = None) -> list[Effect]:
        r = PeerRequest(
            correlation_id=cid,
            reply_to=reply_to or topics.peer_reply(m.grid.cell_of(lon, LAT0), who),
            requester=who,
            lat=LAT0,
            lon=lon,
            t=0.0,
        )
        return [e for e in m.receive(r, 1.0) if isinstance(e, Send)]

    assert len(req("a", "1")) == 1
    assert len(req("a", "2")) == 1
    assert req("a", "3") == []  # per-requester bucket empty
    assert m.stats["rate_limited_requester"] == 1
    assert len(req("b", "4")) == 1
    assert req("c", "5") == []  # overall bucket empty
    assert m.stats["rate_limited_overall"] == 1
    assert req("d", "6", lon=LON0 + 1.0) == []
    assert m.stats["too_far"] == 1
    assert req("e", "7", reply_to="locpriv/v1/ds/query") == []
    assert m.stats["bad_reply_to"] == 1
    off = PeerMachine(
        config(responder=ResponderPolicy(enabled=False)), rng=np.random.default_rng(8)
    )
    off.set_location(LON0, LAT0, 0.0)
    r = PeerRequest(
        correlation_id="z",
        reply_to=topics.peer_reply(off.grid.cell_of(LON0, LAT0), "r"),
        requester="r",
        lat=LAT0,
        lon=LON0,
        t=0.0,
    )
    assert off.receive(r, 0.0) == [] and off.stats["opted_out"] == 1


def test_requests_name_a_reply_topic_under_their_own_cell() -> None:
    """A query's peer reply topic is ``peer/cell/<cell of the request's point>/r/<random>``,
    fresh per query, subscribed before the broadcast and unsubscribed when the window closes;
    it names no connection (the DS answer alone comes on a ``reply/`` topic)."""
    topics = Topics()
    m = PeerMachine(config(), rng=np.random.default_rng(11))
    m.set_location(LON0, LAT0, 0.0)
    seen: list[str] = []
    for j in range(3):
        _, effects = m.start_query(NearestQuery(category="cafe", n=1), float(j))
        subs = [e.topic for e in effects if isinstance(e, Subscribe)]
        sends = [e for e in effects if isinstance(e, Send)]
        reply_to = {e.message.reply_to for e in sends if isinstance(e.message, PeerRequest)}
        assert len(reply_to) == 1 and len(sends) == 9
        (topic,) = reply_to
        req = sends[0].message
        assert isinstance(req, PeerRequest)
        assert topics.peer_reply_cell(topic) == m.grid.cell_of(req.lon, req.lat)
        assert not topics.is_reply(topic) and topic in subs
        assert sends[0].topic == topics.peer_cell(m.grid.cell_of(req.lon, req.lat))
        assert not matches(f"{topics.root}/peer/cell/+", topic)
        seen.append(topic)
        (ds_topic,) = [t for t in subs if t not in (topic, m.cell_topic)]
        assert topics.is_reply(ds_topic)
    assert len(set(seen)) == 3


@pytest.mark.parametrize(
    "make",
    [
        lambda t, cell, other: t.reply("p4-x"),  # the old form: a connection's client id
        lambda t, cell, other: t.peer_reply(other, "x"),  # another cell
        lambda t, cell, other: t.peer_cell(cell),  # the discovery topic itself
        lambda t, cell, other: f"{t.peer_cell(cell)}/r/x/y",
        lambda t, cell, other: f"{t.peer_cell(cell)}/q/x",
        lambda t, cell, other: f"{t.peer_cell(cell)}/r",
        lambda t, cell, other: Topics("other").peer_reply(cell, "x"),  # another deployment
        lambda t, cell, other: t.ds_query,
        lambda t, cell, other: t.issuer_keys,
        lambda t, cell, other: f"x/{t.peer_reply(cell, 'x')}",
    ],
)
def test_responder_answers_only_into_the_requests_cell(make: object) -> None:
    """Sans-I/O: a request whose ``reply_to`` is not ``peer/cell/<the cell of its point>/r/<id>``
    gets no reply (``bad_reply_to``), whatever else it asks; the right form gets one, on it."""
    topics = Topics()
    m = PeerMachine(config(), rng=np.random.default_rng(12))
    m.set_location(LON0, LAT0, 0.0)
    cell = m.grid.cell_of(LON0, LAT0)
    other = m.grid.block(LON0, LAT0)[1]
    assert other != cell

    def request(reply_to: str, cid: str) -> PeerRequest:
        return PeerRequest(
            correlation_id=cid, reply_to=reply_to, requester="r", lat=LAT0, lon=LON0, t=1.0
        )

    bad = make(topics, cell, other)  # type: ignore[operator]
    assert m.receive(request(bad, "bad"), 1.0) == []
    assert m.stats["bad_reply_to"] == 1 and m.stats["replied"] == 0
    good = topics.peer_reply(cell, "x")
    (send,) = [e for e in m.receive(request(good, "good"), 1.0) if isinstance(e, Send)]
    assert send.topic == good and isinstance(send.message, PeerReply)
    assert m.stats["replied"] == 1


def test_peer_reply_topic_validator() -> None:
    t = Topics("a/b")
    assert t.peer_reply_cell(t.peer_reply("g1_2_3", "r0")) == "g1_2_3"
    for bad in (t.peer_cell("g1_2_3"), t.reply("x"), f"{t.root}/peer/cell//r/x", "", t.root):
        assert t.peer_reply_cell(bad) is None
    with pytest.raises(ValueError):
        t.peer_reply("g1", "a/b")
    with pytest.raises(ValueError):
        t.peer_reply("g+", "x")


def test_reply_is_the_reused_perturbed_point_and_never_the_true_one() -> None:
    net, where = fleet(6, seed=9)
    out = ask(net, 0, NearestQuery(category="atm", n=1))
    assert isinstance(out, Done)
    q_own = net.machines[0].perturbed(1.0)
    assert q_own is not None and q_own != where[0]
    assert net.machines[0].point.fresh_draws == 1


def test_config_validation() -> None:
    from locpriv.errors import ConfigError

    with pytest.raises(ConfigError, match="hull"):
        config(k=2)
    assert config(k=2, area="bbox").k == 2
    with pytest.raises(ConfigError):
        config(window_s=0.0)
    with pytest.raises(ConfigError):
        config(max_candidates=2)
    assert config().side_m == 1600  # √(1e6 m²) = 1000 m -> 1600 m cells
    assert config().radius_base_m == pytest.approx(math.sqrt(1e6 / math.pi) + 3 * SIGMA)


def test_token_bucket_refills() -> None:
    b = TokenBucket(1.0, 2.0)
    assert b.take(0.0) and b.take(0.0) and not b.take(0.0)
    assert b.take(1.0) and not b.take(1.0)


def test_radius_ladder() -> None:
    assert radius_ladder(10.0, 100.0) == 100.0
    assert radius_ladder(150.0, 100.0) == 200.0
    assert radius_ladder(1e9, 100.0) == 100_000.0
