"""Answers that prove their origin, client-side sanity checks and DS's fair share (pure
machines, no network): the answer MAC, the mediator dropping forged replies, DS's cost limit
and lanes, and the requester's checks of crafted replies."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.core.geo import LocalProjection, LonLat, area_m2, region_from_wire
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois
from locpriv.errors import ConfigError, ErrorCode
from locpriv.protocols.dispatch import Dispatcher
from locpriv.protocols.ds import DSCore, ds_routes, tag_service_replies
from locpriv.protocols.effects import Done, Send
from locpriv.protocols.lanes import Lanes
from locpriv.protocols.p2 import Mediator
from locpriv.protocols.sanity import Asked, region_problem
from locpriv.protocols.seal import AnswerMac
from locpriv.protocols.user import UserMachine
from locpriv.wire.envelope import Received
from locpriv.wire.messages import (
    POI,
    CentroidLocation,
    CloakReply,
    DeploymentConfig,
    DSQuery,
    ErrorReply,
    NearestQuery,
    PointLocation,
    PrivacyProfile,
    QueryAnswer,
    QueryRequest,
    Region,
    RegionLocation,
    WithinQuery,
    encode,
)
from locpriv.wire.topics import Topics

TOPICS = Topics("test")
LAT0, LON0 = 41.3874, 2.1686
PROJ = LocalProjection(LAT0, LON0)
INDEX = POIIndex(load_pois(DEFAULT_POIS), PROJ)
KEY = bytes(range(32))
MAC = AnswerMac(KEY)
MEDIATOR_REPLY = TOPICS.svc_reply("mediator")
USER_REPLY = TOPICS.reply("c-1")
T0 = 1_700_000_000.0
ALICE = LonLat(*PROJ.point_to_lonlat(120.0, -80.0))


def _mediator(mac: AnswerMac | None = MAC) -> Mediator:
    return Mediator(ds_topic=TOPICS.svc_ds_query, reply_to=MEDIATOR_REPLY, answer_mac=mac)


def _p2(cid: str = "u1", query: NearestQuery | WithinQuery | None = None) -> QueryRequest:
    return QueryRequest(
        correlation_id=cid,
        reply_to=USER_REPLY,
        user_id="alice",
        protocol=2,
        lat=ALICE.lat,
        lon=ALICE.lon,
        query=query or NearestQuery(category="cafe", n=3),
    )


def _forward(med: Mediator, cid: str = "u1") -> DSQuery:
    (send,) = med.receive(_p2(cid), T0)
    assert send.topic == TOPICS.svc_ds_query
    assert isinstance(send.message, DSQuery)
    return send.message


# ------------------------------------------------------------------------- the MAC


def test_mac_covers_every_field_and_the_token() -> None:
    answer = MAC.sign(QueryAnswer(correlation_id="s1.tok", pois=INDEX.pois[:3]))
    assert answer.mac is not None and len(answer.mac) == 43
    assert MAC.verify(answer)
    assert MAC.verify(type(answer).model_validate_json(encode(answer)))  # survives the wire
    altered = [
        answer.model_copy(update={"pois": INDEX.pois[1:4]}),
        answer.model_copy(
            update={
                "pois": [
                    *INDEX.pois[:2],
                    INDEX.pois[2].model_copy(update={"lat": INDEX.pois[2].lat + 1e-6}),
                ]
            }
        ),
        answer.model_copy(update={"correlation_id": "s1.other"}),
        answer.model_copy(update={"candidates": True}),
        answer.model_copy(update={"mac": None}),
        answer.model_copy(update={"mac": "A" * 43}),
    ]
    assert not any(MAC.verify(a) for a in altered)
    assert not AnswerMac(bytes(32)).verify(answer)  # another key
    err = MAC.sign(ErrorReply(correlation_id="s1.tok", code=ErrorCode.OVERLOADED, reason="x"))
    assert MAC.verify(err)
    assert not MAC.verify(err.model_copy(update={"code": ErrorCode.BAD_PARAMETERS}))


def test_answer_key_from_a_file_or_a_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCPRIV_ANSWER_KEY", KEY.hex())  # ignored: never a key in the environment
    assert AnswerMac.from_config(None) is None
    path = tmp_path / "answer.key"
    path.write_text(KEY.hex() + "\n")
    signed = MAC.sign(QueryAnswer(correlation_id="c", pois=[]))
    from_file = AnswerMac.from_config(str(path))
    assert from_file is not None and from_file.verify(signed)
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds" / "answer-key").write_text(KEY.hex())
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "creds"))
    from_cred = AnswerMac.from_config("credential:answer-key")
    assert from_cred is not None and from_cred.verify(signed)
    path.write_text("00" * 16)
    with pytest.raises(ConfigError, match="answer key") as info:
        AnswerMac.from_config(str(path))
    assert "00" * 16 not in str(info.value)  # never shows the key
    path.write_text("not hex")
    with pytest.raises(ConfigError, match="64 hex digits"):
        AnswerMac.from_config(str(path))


# ------------------------------------------------------------------ the mediator


def test_mediator_relays_only_answers_ds_tagged() -> None:
    med = _mediator()
    ds = DSCore(INDEX, topics=TOPICS, answer_mac=MAC)
    query = _forward(med)
    (ds_reply,) = ds.receive(query, T0)
    assert ds_reply.topic == MEDIATOR_REPLY
    assert isinstance(ds_reply.message, QueryAnswer) and ds_reply.message.mac is not None
    # forgeries with the genuine token: untagged, tagged under another key, altered
    poi = POI(id="evil", category="cafe", lat=ALICE.lat, lon=ALICE.lon, name="Forged")
    untagged = QueryAnswer(correlation_id=query.correlation_id, pois=[poi])
    other_key = AnswerMac(bytes(32)).sign(untagged)
    altered = ds_reply.message.model_copy(update={"pois": [poi]})
    err = ErrorReply(correlation_id=query.correlation_id, code=ErrorCode.INTERNAL, reason="x")
    for forged in (untagged, other_key, altered, err):
        assert med.receive(forged, T0 + 0.01) == []
    assert med.forged == 4
    assert med.pending == 1  # the forgeries changed nothing: the query still waits for DS
    (relayed,) = med.receive(ds_reply.message, T0 + 0.02)
    assert relayed.topic == USER_REPLY
    assert isinstance(relayed.message, QueryAnswer)
    assert relayed.message.mac is None  # the tag never reaches the user
    assert relayed.message.pois == ds_reply.message.pois
    assert "evil" not in encode(relayed.message).decode()
    # a replay of the genuine answer is dropped
    assert med.receive(ds_reply.message, T0 + 0.03) == []


def test_mediator_without_a_key_relays_untagged_answers() -> None:
    med = _mediator(None)
    query = _forward(med)
    (relayed,) = med.receive(QueryAnswer(correlation_id=query.correlation_id, pois=[]), T0)
    assert relayed.topic == USER_REPLY


def test_ds_tags_only_replies_to_the_service_lane() -> None:
    ds = DSCore(INDEX, topics=TOPICS, answer_mac=MAC)
    public = DSQuery(
        correlation_id="p",
        reply_to=TOPICS.reply("app"),
        query=NearestQuery(category="cafe", n=1),
        location=PointLocation(lat=LAT0, lon=LON0),
    )
    (reply,) = ds.receive(public, T0)
    assert isinstance(reply.message, QueryAnswer) and reply.message.mac is None
    svc = public.model_copy(update={"reply_to": MEDIATOR_REPLY})
    (reply,) = ds.receive(svc, T0)
    assert isinstance(reply.message, QueryAnswer) and MAC.verify(reply.message)
    # the driver's own errors to the mediator are tagged too
    err = Send(
        MEDIATOR_REPLY, ErrorReply(correlation_id="x", code=ErrorCode.OVERLOADED, reason="r")
    )
    (tagged,) = tag_service_replies([err], TOPICS, MAC)
    assert isinstance(tagged.message, ErrorReply) and MAC.verify(tagged.message)


def test_each_lane_names_only_its_own_reply_namespace() -> None:
    ds = DSCore(INDEX, topics=TOPICS, answer_mac=MAC)
    disp = Dispatcher(
        name="ds", machine=ds, routes=ds_routes(TOPICS), topics=TOPICS, max_payload=65536
    )
    q = DSQuery(
        correlation_id="q",
        reply_to=MEDIATOR_REPLY,
        query=NearestQuery(category="cafe", n=1),
        location=PointLocation(lat=LAT0, lon=LON0),
    )
    # an app asks the public lane to answer on the mediator's topic (to get a tag): refused
    (out,) = disp.handle(Received(TOPICS.ds_query, encode(q)), T0)
    assert out.topic == TOPICS.errors("ds")
    assert isinstance(out.message, ErrorReply) and out.message.field == "reply_to"
    app = q.model_copy(update={"reply_to": TOPICS.reply("app")})
    (out,) = disp.handle(Received(TOPICS.svc_ds_query, encode(app)), T0)
    assert out.topic == TOPICS.errors("ds")
    (out,) = disp.handle(Received(TOPICS.svc_ds_query, encode(q)), T0)
    assert out.topic == MEDIATOR_REPLY and MAC.verify(out.message)  # type: ignore[arg-type]


# ---------------------------------------------------------------- DS cost limit


@pytest.mark.parametrize(
    ("location", "query", "field"),
    [
        (PointLocation(lat=LAT0, lon=LON0), WithinQuery(radius_m=100_000.0), "query.radius_m"),
        (
            CentroidLocation(lat=LAT0, lon=LON0, radius_m=50_000.0),
            NearestQuery(category="cafe", n=5),
            "location.radius_m",
        ),
        (
            RegionLocation(
                region=Region(
                    ring=[(LON0 - 0.3, LAT0 - 0.3), (LON0 + 0.3, LAT0 - 0.3), (LON0, LAT0 + 0.3)]
                )
            ),
            NearestQuery(category="cafe", n=5),
            "location.region",
        ),
    ],
)
def test_ds_refuses_costly_queries_before_the_work(
    location: PointLocation | CentroidLocation | RegionLocation,
    query: NearestQuery | WithinQuery,
    field: str,
) -> None:
    ds = DSCore(INDEX, max_answer_pois=200)
    q = DSQuery(correlation_id="c", reply_to=USER_REPLY, query=query, location=location)
    (out,) = ds.receive(q, T0)
    assert isinstance(out.message, ErrorReply)
    assert (out.message.code, out.message.field) == (ErrorCode.BAD_PARAMETERS, field)
    assert ds.too_costly == 1


@settings(max_examples=60, deadline=None)
@given(
    x=st.floats(-30_000, 30_000),
    y=st.floats(-30_000, 30_000),
    r=st.floats(1.0, 20_000.0),
    cat=st.sampled_from([None, "cafe", "atm"]),
    rho=st.floats(0.0, 5_000.0),
)
def test_estimate_bounds_within_answers(
    x: float, y: float, r: float, cat: str | None, rho: float
) -> None:
    lon, lat = PROJ.point_to_lonlat(x, y)
    query = WithinQuery(category=cat, radius_m=r)
    for location in (
        PointLocation(lat=lat, lon=lon),
        CentroidLocation(lat=lat, lon=lon, radius_m=rho),
    ):
        pois, _ = INDEX.answer(query, location)
        assert INDEX.estimate(query, location) >= len(pois)


# ---------------------------------------------------------------------- lanes


def test_lanes_weighted_round_robin_and_waiting_time() -> None:
    lanes: Lanes[int] = Lanes({"svc": 4, "pub": 1}, max_wait_s=1.0, max_len=1000)
    for i in range(100):
        assert lanes.push("pub", 1000 + i, 0.0)
    for i in range(20):
        assert lanes.push("svc", i, 0.0)
    order = [lanes.pop() for _ in range(25)]
    assert [lane for lane, _ in order[:10]].count("svc") >= 7
    assert all(item is not None for item in order)
    assert [item for lane, item in order if lane == "svc"] == list(range(20))  # FIFO
    assert lanes.served == {"svc": 20, "pub": 5}
    # public work alone is served at once (work conserving)
    assert lanes.pop() == ("pub", 1005)
    # waiting time, not length: everything older than 1 s comes out, oldest first
    lanes.push("svc", 99, 0.9)
    late = lanes.expired(1.5)
    assert [lane for lane, _ in late] == ["pub"] * 94
    assert lanes.pop() == ("svc", 99)
    assert lanes.pop() is None
    full: Lanes[int] = Lanes({"a": 1}, max_wait_s=1.0, max_len=2)
    assert full.push("a", 1, 0.0) and full.push("a", 2, 0.0) and not full.push("a", 3, 0.0)


# ------------------------------------------------------------ requester checks


PROFILE = PrivacyProfile(k=5, a_min_m2=1.0, a_max_m2=4e6)


def _user() -> UserMachine:
    return UserMachine(
        TOPICS,
        USER_REPLY,
        ids=iter(f"id{i}" for i in range(1000)).__next__,
        deployment=DeploymentConfig(lat0_deg=LAT0, lon0_deg=LON0),
    )


def _square(cx: float, cy: float, half: float) -> Region:
    ring = [
        (cx - half, cy - half),
        (cx + half, cy - half),
        (cx + half, cy + half),
        (cx - half, cy + half),
    ]
    return Region(ring=[PROJ.point_to_lonlat(x, y) for x, y in ring])


GOOD = _square(100.0, -100.0, 400.0)  # 800 m x 800 m around alice (120, -80)


def _cloak_reply(cid: str, region: Region = GOOD, **kw: float) -> CloakReply:
    fields: dict[str, float] = {
        "area_m2": area_m2(region_from_wire(region)),
        "users": 7,
        "t1": T0 - 30,
        "t2": T0,
    }
    fields.update(kw)
    return CloakReply(correlation_id=cid, region=region, **fields)  # type: ignore[arg-type]


def test_crafted_cloak_replies_are_dropped_and_the_request_waits() -> None:
    um = _user()
    rid, (send,) = um.cloak(user_id="alice", position=ALICE, profile=PROFILE, now=T0, timeout_s=5.0)
    cid = send.message.correlation_id  # type: ignore[union-attr]
    huge = Region(ring=[(LON0 - 0.45, LAT0 - 0.1), (LON0 + 0.45, LAT0 - 0.1), (LON0, LAT0 + 0.26)])
    assert 1.4e9 < area_m2(region_from_wire(huge)) < 1.6e9  # ~1,500 km²
    far = _square(5_000.0, 5_000.0, 400.0)
    tiny = _square(120.0, -80.0, 1.0)
    crafted = [
        _cloak_reply(cid, huge, area_m2=1.0, users=50),  # the triangle
        _cloak_reply(cid, huge, users=50),  # honest area, beyond a_max
        _cloak_reply(cid, far),  # does not cover her
        _cloak_reply(cid, area_m2=1.0),  # area is not the polygon's
        _cloak_reply(cid, users=2),  # fewer than k
        _cloak_reply(cid, tiny, users=50),  # 50 users in 4 m²
        _cloak_reply(cid, _square(120.0, -80.0, 2_100.0)),  # 17.6 km² > a_max
        _cloak_reply(cid, t1=T0 + 10, t2=T0),  # t1 > t2
        _cloak_reply(cid, t1=T0 + 5000, t2=T0 + 5000),  # from the future
        _cloak_reply(cid, t1=T0 - 10 * 86_400, t2=T0 - 9 * 86_400),  # stale
    ]
    for reply in crafted:
        assert um.receive(reply, T0 + 0.1) == []
    assert um.rejected == len(crafted)
    assert um.pending == 1
    (done,) = um.receive(_cloak_reply(cid), T0 + 0.2)
    assert isinstance(done, Done) and done.request_id == rid


def _p2_answer_case(
    query: NearestQuery | WithinQuery, pois: list[POI]
) -> tuple[UserMachine, list[object]]:
    um = _user()
    _rid, effects = um.query(
        query, protocol=2, user_id="alice", position=ALICE, profile=None, now=T0, timeout_s=5.0
    )
    cid = effects[-1].message.correlation_id  # type: ignore[union-attr]
    return um, um.receive(QueryAnswer(correlation_id=cid, pois=pois), T0 + 0.1)


def _poi_at(x: float, y: float, category: str = "cafe", pid: str = "p") -> POI:
    lon, lat = PROJ.point_to_lonlat(x, y)
    return POI(id=pid, category=category, lat=lat, lon=lon)


def test_crafted_answers_are_dropped() -> None:
    within = WithinQuery(category="cafe", radius_m=500.0)
    nearest = NearestQuery(category="cafe", n=2)
    bad = [
        (within, [_poi_at(120.0, 900.0)]),  # ~980 m away
        (within, [_poi_at(130.0, -80.0, category="atm")]),  # another category
        (nearest, [_poi_at(130.0, -80.0, pid=f"p{i}") for i in range(3)]),  # n + 1
    ]
    for query, pois in bad:
        um, out = _p2_answer_case(query, pois)
        assert out == [] and um.rejected == 1 and um.pending == 1
    for query, pois in ((within, [_poi_at(130.0, 300.0)]), (nearest, [_poi_at(0.0, 0.0)])):
        um, out = _p2_answer_case(query, pois)
        assert len(out) == 1 and isinstance(out[0], Done) and um.rejected == 0


def test_p1_answer_needs_a_consistent_region() -> None:
    um = _user()
    query = WithinQuery(category="cafe", radius_m=300.0)
    _rid, effects = um.query(
        query,
        protocol=1,
        user_id="alice",
        position=ALICE,
        profile=PROFILE,
        now=T0,
        timeout_s=5.0,
    )
    cid = effects[-1].message.correlation_id  # type: ignore[union-attr]
    area = area_m2(region_from_wire(GOOD))
    base = {"region": GOOD, "area_m2": area, "users": 6, "t1": T0 - 5, "t2": T0}
    near, far = _poi_at(500.0, 200.0), _poi_at(5_000.0, 5_000.0)
    assert um.receive(QueryAnswer(correlation_id=cid, pois=[near], candidates=True), T0) == []
    assert (
        um.receive(
            QueryAnswer(correlation_id=cid, pois=[far], candidates=True, **base),
            T0,  # type: ignore[arg-type]
        )
        == []
    )
    assert um.rejected == 2
    (done,) = um.receive(
        QueryAnswer(correlation_id=cid, pois=[near], candidates=True, **base),
        T0,  # type: ignore[arg-type]
    )
    assert isinstance(done, Done)
    assert math.isclose(done.value.cloak.area_m2, area)


def test_genuine_replies_of_the_real_machines_pass_the_checks() -> None:
    """Every answer DS gives at random places passes the requester's checks."""
    rng = np.random.default_rng(11)
    ds = DSCore(INDEX)
    for _ in range(40):
        x, y = rng.uniform(-8000, 8000, size=2)
        pos = LonLat(*PROJ.point_to_lonlat(float(x), float(y)))
        query = (
            WithinQuery(category="cafe", radius_m=float(rng.uniform(50, 1500)))
            if rng.random() < 0.5
            else NearestQuery(category="restaurant", n=int(rng.integers(1, 10)))
        )
        um = _user()
        _rid, effects = um.query(
            query, protocol=2, user_id="alice", position=pos, profile=None, now=T0, timeout_s=5
        )
        request = effects[-1].message
        assert isinstance(request, QueryRequest)
        ds_q = DSQuery(
            correlation_id=request.correlation_id,
            reply_to=USER_REPLY,
            query=query,
            location=PointLocation(lat=pos.lat, lon=pos.lon),
        )
        (answer,) = ds.receive(ds_q, T0)
        (done,) = um.receive(answer.message, T0 + 0.01)
        assert isinstance(done, Done)
        assert um.rejected == 0


def test_a_region_may_miss_a_moving_user_by_what_she_can_have_moved() -> None:
    """Genuine regions hold her position as of her last update: a few metres off is fine when
    the snapshot is seconds old, a kilometre is not."""
    um = _user()
    _rid, (send,) = um.cloak(
        user_id="alice", position=ALICE, profile=PROFILE, now=T0, timeout_s=5.0
    )
    cid = send.message.correlation_id  # type: ignore[union-attr]
    # a 400 m square whose west edge passes 5 m east of alice (120, -80)
    beside = _square(325.0, -80.0, 200.0)
    away = _square(1_400.0, -80.0, 200.0)
    assert um.receive(_cloak_reply(cid, away, t1=T0 - 1.0, t2=T0 - 0.5), T0 + 0.1) == []
    assert um.receive(_cloak_reply(cid, beside, t1=T0, t2=T0), T0) == []  # 5 m off, no time
    assert um.rejected == 2
    (done,) = um.receive(_cloak_reply(cid, beside, t1=T0 - 1.0, t2=T0 - 0.5), T0 + 0.1)
    assert isinstance(done, Done)


def test_plain_ds_answers_are_checked_too() -> None:
    um = _user()
    query = WithinQuery(category="cafe", radius_m=300.0)
    far = QueryAnswer(correlation_id="d", pois=[_poi_at(5_000.0, 0.0)])
    near = QueryAnswer(correlation_id="d", pois=[_poi_at(200.0, -80.0)])
    assert um.refuse_plain(far, query, ALICE)
    assert not um.refuse_plain(near, query, ALICE)
    assert um.rejected == 1


def test_mac_is_the_documented_hmac_sha256() -> None:
    """docs/protocol.md's definition, computed with the standard library: another DS
    implementation can tag answers from the text alone."""
    import base64
    import hashlib
    import hmac

    answer = QueryAnswer(correlation_id="s1.tok", pois=INDEX.pois[:2], candidates=True)
    body = answer.model_dump_json(exclude_none=True).encode()
    tag = hmac.new(KEY, b"locpriv/ds-answer/v1\n" + body, hashlib.sha256).digest()
    assert MAC.sign(answer).mac == base64.urlsafe_b64encode(tag).rstrip(b"=").decode()


def test_a_region_below_a_min_is_refused() -> None:
    small = region_from_wire(_square(120.0, -80.0, 20.0))  # 1,600 m²
    asked = Asked(ALICE, None, PrivacyProfile(k=2, a_min_m2=1e4, a_max_m2=4e6), T0)
    area = area_m2(small)
    problem = region_problem(asked, small, area, 3, T0 - 1, T0, T0, PROJ)
    assert problem is not None and "outside the asked" in problem
    loose = Asked(ALICE, None, PrivacyProfile(k=2, a_min_m2=1e3, a_max_m2=4e6), T0)
    assert region_problem(loose, small, area, 3, T0 - 1, T0, T0, PROJ) is None
