"""Protocol 4 insiders (issue 20), without a network: pseudonym tokens (issuer, wallet,
verifier), Sybil groups measured with the real PeerMachine, and the DS radius as a distance
oracle attacked by a colluding DS that steers the centroid."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import messages

from locpriv.core.geo import LocalProjection
from locpriv.core.noise import offset_lonlat
from locpriv.errors import ErrorCode
from locpriv.protocols.dispatch import Dispatcher
from locpriv.protocols.effects import Done, Send
from locpriv.protocols.issuer import issuer_routes
from locpriv.protocols.p4.machine import PeerMachine
from locpriv.protocols.p4.tokens import (
    TokenVerifier,
    TokenWallet,
    b64d,
    b64e,
    issuer_key,
    period_of,
    token_input,
)
from locpriv.wire.envelope import Received
from locpriv.wire.messages import (
    DSQuery,
    ErrorReply,
    IssueAnswer,
    IssueRequest,
    NearestQuery,
    PeerReply,
    PeerRequest,
    encode,
)
from locpriv.wire.topics import Topics
from simulators.insiders import (
    LAT0,
    LON0,
    PERIOD_S,
    T0,
    Bus,
    issuer_core,
    peer_config,
    steering_errors,
    sybil_groups,
)

TOPICS = Topics()
PERIOD = period_of(T0, PERIOD_S)


def _request(
    core_key: rsa.RSAPrivateKey,
    wallet: TokenWallet,
    period: int,
    user: str = "alice",
    cid: str = "c1",
) -> IssueRequest:
    blinded = wallet.begin(period, core_key.public_key(), cid, TOPICS.reply(cid), T0 + 5)
    return IssueRequest(
        correlation_id=cid,
        reply_to=TOPICS.reply(cid),
        user_id=user,
        period=period,
        blinded_msg=blinded,
    )


# ------------------------------------------------------------------------------- issuer


def test_issuer_signs_at_most_per_login_and_period() -> None:
    core = issuer_core(per_login=2)
    core.counts.clear()
    answers = []
    for i in range(4):  # the fourth is dropped unanswered (she was told at the third)
        w = TokenWallet()
        sends = core.receive(_request(core.key_for(PERIOD), w, PERIOD, cid=f"c{i}"), T0)
        if not sends:
            continue
        (send,) = sends
        answers.append(send.message)
        if isinstance(send.message, IssueAnswer):
            assert w.complete(f"c{i}", send.message.blind_sig)
            assert w.token(PERIOD) is not None
    assert [type(a).__name__ for a in answers] == ["IssueAnswer"] * 2 + ["ErrorReply"]
    assert isinstance(answers[2], ErrorReply) and answers[2].code == ErrorCode.RATE_LIMITED
    # the next period is a separate allowance, another login too
    (nxt,) = core.receive(_request(core.key_for(PERIOD + 1), TokenWallet(), PERIOD + 1), T0)
    assert isinstance(nxt.message, IssueAnswer)
    (bob,) = core.receive(_request(core.key_for(PERIOD), TokenWallet(), PERIOD, "bob"), T0)
    assert isinstance(bob.message, IssueAnswer)
    # past and far-future periods are refused: no stockpiling for a later period
    for p in (PERIOD - 1, PERIOD + 2):
        (bad,) = core.receive(_request(core.key_for(PERIOD), TokenWallet(), p, "carol"), T0)
        assert isinstance(bad.message, ErrorReply) and bad.message.field == "period"
    assert core.counts[PERIOD] == {"alice": 2, "bob": 1}


def test_a_flood_beyond_the_allowance_gets_one_answer() -> None:
    """A login past her allowance is told once per period; her next 500 requests are dropped
    unanswered (a look-up each: no signature, no reply to amplify), and bob is still served."""
    core = issuer_core(per_login=1)
    core.counts.clear()
    key = core.key_for(PERIOD)
    (first,) = core.receive(_request(key, TokenWallet(), PERIOD, "mallory", "m0"), T0)
    assert isinstance(first.message, IssueAnswer)
    replies = [
        core.receive(_request(key, TokenWallet(), PERIOD, "mallory", f"m{i}"), T0)
        for i in range(1, 502)
    ]
    answered = [r for r in replies if r]
    assert len(answered) == 1 and isinstance(answered[0][0].message, ErrorReply)
    assert answered[0][0].message.code == ErrorCode.RATE_LIMITED
    assert core.stats["dropped"] == 500 and core.stats["issued"] == 1
    (bob,) = core.receive(_request(key, TokenWallet(), PERIOD, "bob", "b0"), T0)
    assert isinstance(bob.message, IssueAnswer)
    # the next period is a fresh allowance and a fresh answer
    nxt = core.key_for(PERIOD + 1)
    (again,) = core.receive(_request(nxt, TokenWallet(), PERIOD + 1, "mallory", "n0"), T0)
    assert isinstance(again.message, IssueAnswer)


def test_issuer_sees_no_pseudonym_and_rejects_garbage() -> None:
    core = issuer_core()
    w = TokenWallet()
    req = _request(core.key_for(PERIOD), w, PERIOD, user="dave")
    raw = b64d(req.blinded_msg)
    assert w.pseudonym(PERIOD).encode() not in encode(req)
    assert token_input(PERIOD, w.pseudonym(PERIOD)) not in raw
    again = _request(core.key_for(PERIOD), w, PERIOD, user="dave", cid="c2")
    assert again.blinded_msg != req.blinded_msg  # a fresh blind each time
    junk = req.model_copy(update={"blinded_msg": b64e(b"\xff" * 256), "user_id": "erin"})
    (send,) = core.receive(junk, T0)
    assert isinstance(send.message, ErrorReply) and send.message.field == "blinded_msg"
    assert core.counts.get(PERIOD, {}).get("erin") is None  # a refusal costs no allowance


def test_issue_topic_binds_the_login() -> None:
    core = issuer_core()
    disp = Dispatcher(
        name="issuer", machine=core, routes=issuer_routes(TOPICS), topics=TOPICS, max_payload=65536
    )
    req = _request(core.key_for(PERIOD), TokenWallet(), PERIOD, user="frank")
    (out,) = disp.handle(Received(TOPICS.issue("mallory"), encode(req)), T0)
    assert isinstance(out.message, ErrorReply) and out.message.field == "user_id"
    (ok,) = disp.handle(Received(TOPICS.issue("frank"), encode(req)), T0)
    assert isinstance(ok.message, IssueAnswer)


def test_keys_message_carries_current_and_next_period() -> None:
    core = issuer_core()
    msg = core.keys_message(T0 + 10)
    assert [k.period for k in msg.keys] == [PERIOD, PERIOD + 1]
    v = TokenVerifier(PERIOD_S)
    assert not v.required
    assert v.update(msg, T0) is None and v.required  # auto: required once a key is seen
    small = msg.model_copy(
        update={"keys": [msg.keys[0].model_copy(update={"n": b64e(b"\x01" * 64)})]}
    )
    assert TokenVerifier(PERIOD_S).update(small, T0) == "issuer_key_invalid"
    assert TokenVerifier(60.0).update(msg, T0) == "issuer_period_mismatch"
    assert issuer_key(PERIOD, core.key_for(PERIOD).public_key()) == msg.keys[0]


# ------------------------------------------------------------------------- the devices


def _fleet(n: int, **kw: object) -> Bus:
    bus = Bus(issuer=issuer_core())
    cfg = peer_config(**kw)
    for i in range(n):
        m = PeerMachine(cfg, rng=np.random.default_rng(i), login=f"dev{i}")
        bus.add(m)
        dx, dy = np.random.default_rng(100 + i).uniform(-400, 400, 2)
        lon, lat = offset_lonlat(LON0, LAT0, float(dx), float(dy))
        bus.apply(i, m.set_location(lon, lat, T0 + 1), T0 + 1)
    return bus


def test_devices_get_tokens_and_query_with_them() -> None:
    bus = _fleet(12, require_tokens=True)
    for m in bus.machines:
        assert m.wallet.token(PERIOD) is not None
        assert m.stats["token_issued"] == 1
    out = bus.ask(0, T0 + 2)
    assert isinstance(out, Done), out
    assert out.value.group_size == 5 and len(out.value.members) == 4
    assert sum(m.stats["replied"] for m in bus.machines) == 11
    assert bus.machines[0].stats["reply_no_token"] == 0


def test_tokens_for_the_next_period_arrive_before_it_starts() -> None:
    bus = _fleet(3, require_tokens=True)
    end = (PERIOD + 1) * PERIOD_S
    bus.run_until(end - 1.0, T0 + 2)
    for m in bus.machines:
        assert m.wallet.token(PERIOD + 1) is not None  # prefetched in the last 2-10 %
        assert m.next_deadline() is not None and m.next_deadline() <= end  # type: ignore[operator]
    old = bus.machines[0].pseudonym(end - 1.0)
    assert bus.machines[0].pseudonym(end + 1.0) != old  # rotation on the period boundary


def test_uncertified_forged_and_replayed_replies_are_dropped() -> None:
    bus = _fleet(6, require_tokens=True)
    victim = bus.machines[0]
    seen: list[PeerRequest] = []

    def tap(req: PeerRequest, t: float) -> list[Send]:
        seen.append(req)
        return []

    bus.tap = tap
    assert bus.issuer is not None
    honest = TokenWallet()  # a certified device that has not answered this query
    (issued,) = bus.issuer.receive(
        _request(bus.issuer.key_for(PERIOD), honest, PERIOD, user="zed"), T0
    )
    assert isinstance(issued.message, IssueAnswer)
    assert honest.complete("c1", issued.message.blind_sig)
    now = T0 + 2
    qid, effects = victim.start_query(NearestQuery(category="cafe", n=1), now)
    bus.apply(0, effects, now)
    req = seen[0]
    q = victim._queries[qid]
    near = offset_lonlat(req.lon, req.lat, 150.0, 0.0)
    copied = honest.token(PERIOD)
    assert copied is not None
    fresh = TokenWallet()
    base = {"correlation_id": req.correlation_id, "lat": near[1], "lon": near[0], "t": now}
    # no token
    victim.receive(PeerReply(responder=fresh.pseudonym(PERIOD), **base), now)  # type: ignore[arg-type]
    # a genuine token under another pseudonym, with a valid proof of that pseudonym's key
    stolen = PeerReply(responder=fresh.pseudonym(PERIOD), period=PERIOD, token=copied, **base)  # type: ignore[arg-type]
    victim.receive(fresh.sign_as(stolen), now)
    # an honest device's signed reply replayed with another point
    real = honest.sign(
        PeerReply(responder=honest.pseudonym(PERIOD), **base),  # type: ignore[arg-type]
        PERIOD,
    )
    moved = real.model_copy(update={"lat": near[1] + 1e-3})
    victim.receive(moved, now)
    # a valid token of another period
    victim.receive(real.model_copy(update={"period": PERIOD + 5}), now)
    assert q.dropped["no_token"] == 1
    assert q.dropped["bad_token"] == 1
    assert q.dropped["bad_proof"] == 1
    assert q.dropped["token_period"] == 1
    assert honest.pseudonym(PERIOD) not in q.replies  # the replay did not take its slot
    victim.receive(real, now)
    assert honest.pseudonym(PERIOD) in q.replies


def test_responders_ignore_uncertified_requests() -> None:
    bus = _fleet(4, require_tokens=True)
    target = bus.machines[1]
    own = target.perturbed(T0 + 2)
    assert own is not None
    req = PeerRequest(
        correlation_id="x1",
        reply_to=TOPICS.peer_reply(target.grid.cell_of(own.lon, own.lat), "x"),
        requester=TokenWallet().pseudonym(PERIOD),
        lat=own.lat,
        lon=own.lon,
        t=T0 + 2,
    )
    assert target.receive(req, T0 + 2) == []
    assert target.stats["request_no_token"] == 1


# ------------------------------------------------------------------------ Sybil groups


@pytest.mark.parametrize("honest", [0, 1, 2, 5, 20, 50])
def test_one_login_never_makes_a_group_alone(honest: int) -> None:
    """One login, 40 crafted replies per request under fresh pseudonyms (two with her two
    genuine tokens, the rest with none or a copied one): with tokens required no group is
    hers alone, she holds at most per_login = 2 of its k-1 = 4 members, and with fewer than
    k-1 certified neighbours the query fails with too_few_replies (never a Sybil group).
    With two or more, a query may still fail on the area window, never end in her group."""
    with_tokens = sybil_groups(honest, tokens=True, trials=20, seed=honest)
    assert with_tokens.sybil_only == 0
    assert with_tokens.max_attacker_members <= 2
    if honest < 2:
        assert with_tokens.failed["too_few_replies"] == with_tokens.trials
    else:
        # every query either holds honest members or fails for a geometric reason of its own
        # (two honest points and her two can be too close for A_min): never a Sybil group
        assert with_tokens.mixed + sum(with_tokens.failed.values()) == with_tokens.trials
        window = {"area_too_small", "area_too_large", "window_unsatisfiable"}
        assert set(with_tokens.failed) <= window
        assert with_tokens.mixed >= with_tokens.trials // 2


def test_without_tokens_the_same_attacker_owns_the_groups() -> None:
    """The control: the same attack on devices that do not require tokens."""
    assert sybil_groups(0, tokens=False, trials=10, seed=7).sybil_only_share == 1.0
    assert sybil_groups(5, tokens=False, trials=10, seed=7).sybil_only_share >= 0.5


# ------------------------------------------------------------- the DS radius as an oracle


@pytest.mark.parametrize("sigma", [50.0, 100.0, 200.0])
@pytest.mark.parametrize("honest", [0, 20])
def test_steered_queries_do_not_locate_the_victim(sigma: float, honest: int) -> None:
    """A colluding DS and Sybils steer the centroid over 50 queries of a static victim and
    estimate her position from every radius DS sees: the error stays that of one noise draw
    (median ≥ σ/2), where the ladder of |centroid − true| used before located her to < 0.1 σ."""
    errors = steering_errors(sigma, honest=honest, victims=8, queries=50, seed=int(sigma) + honest)
    assert float(np.median(errors)) >= sigma / 2.0
    legacy = steering_errors(sigma, honest=honest, victims=4, queries=50, rule="legacy", seed=3)
    assert float(np.median(legacy)) < 0.1 * sigma


def test_what_ds_sees_does_not_depend_on_the_true_position() -> None:
    """Two devices with one secret at two true positions of one place publish one perturbed
    point; the same 50 steered Sybil replies give both the same DS queries (centroid, radius),
    rounds and outcomes."""
    cfg = peer_config(100.0, require_tokens=False, max_rounds=1)
    proj = LocalProjection(LAT0, LON0)
    secret = b"s" * 32
    views = []
    base = offset_lonlat(LON0, LAT0, 321.0, -123.0)
    for shift in (0.0, 4.0):
        bus = Bus()
        m = PeerMachine(cfg, rng=np.random.default_rng(0), secret=secret)
        bus.add(m)
        lon, lat = offset_lonlat(*base, shift, shift / 2)
        bus.apply(0, m.set_location(lon, lat, T0), T0)
        own = m.perturbed(T0)
        rng = np.random.default_rng(42)

        def tap(req: PeerRequest, t: float, rng: np.random.Generator = rng) -> list[Send]:
            ox, oy = proj.point_to_xy(req.lon, req.lat)
            cx, cy = ox + rng.uniform(-900, 900), oy + rng.uniform(-900, 900)
            sx, sy = (5 * cx - ox) / 4, (5 * cy - oy) / 4
            out = []
            for i, (dx, dy) in enumerate(((60, 0), (-60, 0), (0, 60), (0, -60))):
                lo, la = proj.point_to_lonlat(sx + dx, sy + dy)
                rep = PeerReply(
                    correlation_id=req.correlation_id, responder=f"s{i}", lat=la, lon=lo, t=t
                )
                out.append(Send(req.reply_to, rep))
            return out

        bus.tap = tap
        outcomes = []
        for j in range(50):
            out = bus.ask(0, T0 + 1 + 20 * j)
            outcomes.append(out.value.rounds if isinstance(out, Done) else str(out.error))
        view = [(d.location.lat, d.location.lon, d.location.radius_m) for d in bus.ds_seen]  # type: ignore[union-attr]
        views.append((own, view, outcomes))
    assert views[0][0] == views[1][0], "the two positions must share a place for this test"
    assert views[0][1] == views[1][1] and len(views[0][1]) >= 45
    assert views[0][2] == views[1][2]


def test_radius_is_a_function_of_the_group_and_covers_the_device() -> None:
    bus = _fleet(20, require_tokens=False)
    covered = 0
    for j in range(20):
        out = bus.ask(j % 20, T0 + 2 + 20 * j)
        assert isinstance(out, Done), out
        a = out.value
        covered += a.covered
        ds: DSQuery = bus.ds_seen[-1]
        assert ds.location.radius_m == a.radius_m  # type: ignore[union-attr]
        base = bus.machines[0].config.radius_base_m
        assert math.log2(a.radius_m / base) == pytest.approx(round(math.log2(a.radius_m / base)))
    assert covered == 20


def test_issue_topics() -> None:
    t = Topics("acme/x")
    assert t.issue("alice") == "acme/x/v1/issue/alice"
    assert t.issue_user("acme/x/v1/issue/alice") == "alice"
    assert t.issue_user("acme/x/v1/issue/alice/more") is None
    assert t.issue_user("acme/x/v1/loc/t0_0/alice") is None
    assert t.issuer_keys == "acme/x/v1/issuer/key"
    with pytest.raises(ValueError):
        t.issue("a/b")


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(max_size=300) | messages.map(encode), user=st.sampled_from(["a", "b"]))
def test_hostile_payloads_never_crash_the_issuer(payload: bytes, user: str) -> None:
    """Whatever a login publishes on its issue topic, the issuer answers an error or a
    signature (never raises) and signs nothing beyond the allowance."""
    core = _HOSTILE
    disp = Dispatcher(
        name="issuer", machine=core, routes=issuer_routes(TOPICS), topics=TOPICS, max_payload=65536
    )
    for send in disp.handle(Received(TOPICS.issue(user), payload), T0):
        assert isinstance(send.message, IssueAnswer | ErrorReply)
    assert all(n <= core.per_login for per in core.counts.values() for n in per.values())


_HOSTILE = issuer_core()


def test_a_replaced_issuer_key_makes_devices_fetch_again() -> None:
    """The issuer lost its key directory: new keys for the same periods; devices drop the
    tokens that no longer verify and get new ones."""
    bus = _fleet(2, require_tokens=True)
    m = bus.machines[0]
    old = m.wallet.token(PERIOD)
    assert old is not None and bus.issuer is not None
    fresh = {PERIOD: rsa.generate_private_key(public_exponent=65537, key_size=2048)}
    fresh[PERIOD + 1] = fresh[PERIOD]
    bus.issuer.key_for = fresh.__getitem__
    keys = bus.issuer.keys_message(T0 + 3)
    bus.apply(0, m.receive(keys, T0 + 3), T0 + 3)
    assert m.stats["issuer_key_replaced"] == 2
    new = m.wallet.token(PERIOD)
    assert new is not None and new != old
    reply = m.wallet.sign(
        PeerReply(correlation_id="c", responder=m.pseudonym(T0 + 3), lat=LAT0, lon=LON0, t=T0 + 3),
        PERIOD,
    )
    assert m.verifier.check(reply, T0 + 3) is None
