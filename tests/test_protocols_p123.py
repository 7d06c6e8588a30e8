"""Protocol machines P1-P3 and DS wired together without a network (time passed in)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import shapely

from locpriv.config import load_config
from locpriv.core.cloak.cloaker import CloakConfig, Cloaker, CloakParams
from locpriv.core.geo import LocalProjection, region_from_wire
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois, refine
from locpriv.errors import ConfigError, ErrorCode
from locpriv.protocols.ds import DSCore
from locpriv.protocols.effects import Send
from locpriv.protocols.p2 import Mediator
from locpriv.protocols.p3 import Anonymizer
from locpriv.protocols.trusted import TrustedCore
from locpriv.wire.messages import (
    MAX_ANSWER_POIS,
    POI,
    CloakReply,
    CloakRequest,
    DSQuery,
    ErrorReply,
    LocationUpdate,
    NearestQuery,
    PointLocation,
    PrivacyProfile,
    QueryAnswer,
    QueryRequest,
    RegionLocation,
    WithinQuery,
    encode,
)
from locpriv.wire.topics import Topics

TOPICS = Topics("test")
PROJ = LocalProjection(41.3874, 2.1686)
MEDIATOR_REPLY = TOPICS.reply("mediator")
USER_REPLY = TOPICS.reply("c-123")
T0 = 1_700_000_000.0
PROFILE = PrivacyProfile(k=4, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=2.0)
QUERY = NearestQuery(category="cafe", n=3)
INDEX = POIIndex(load_pois(DEFAULT_POIS), PROJ)


def _core(ds_timeout_s: float = 5.0, max_pending: int = 100) -> TrustedCore:
    config = CloakConfig(
        world=(-20_000.0, -20_000.0, 20_000.0, 20_000.0),
        epoch_s=1.0,
        default=CloakParams(k=4, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=2.0),
    )
    mediator = Mediator(
        ds_topic=TOPICS.ds_query,
        reply_to=MEDIATOR_REPLY,
        ds_timeout_s=ds_timeout_s,
        max_pending=max_pending,
    )
    return TrustedCore(Anonymizer(Cloaker(config), PROJ), mediator)


def _populate(core: TrustedCore, now: float, n: int = 30) -> None:
    rng = np.random.default_rng(3)
    xy = rng.uniform(-1000, 1000, size=(n, 2))
    for i, (x, y) in enumerate(xy):
        lon, lat = PROJ.point_to_lonlat(float(x), float(y))
        assert core.receive(LocationUpdate(user_id=f"u{i}", lat=lat, lon=lon, t=now), now) == []


ALICE_LON, ALICE_LAT = PROJ.point_to_lonlat(37.0, -58.0)


def _query(protocol: int, cid: str = "user-cid-1") -> QueryRequest:
    return QueryRequest(
        correlation_id=cid,
        reply_to=USER_REPLY,
        user_id="alice",
        protocol=protocol,
        lat=ALICE_LAT,
        lon=ALICE_LON,
        query=QUERY,
        profile=PROFILE if protocol == 1 else None,
        attributes={"zip": "08001", "age": 42},
    )


def _one(effects: list[Send]) -> Send:
    assert len(effects) == 1, effects
    return effects[0]


def _assert_anonymous(send: Send) -> DSQuery:
    assert send.topic == TOPICS.ds_query
    msg = send.message
    assert isinstance(msg, DSQuery)
    text = encode(msg).decode()
    for secret in ("alice", "user_id", "08001", "attributes", "user-cid-1", USER_REPLY):
        assert secret not in text
    assert msg.reply_to == MEDIATOR_REPLY
    return msg


def test_p2_forwards_exact_point_without_identity_and_relays() -> None:
    core = _core()
    ds = DSCore(INDEX)
    forward = _assert_anonymous(_one(core.receive(_query(2), T0)))
    assert forward.location == PointLocation(lat=ALICE_LAT, lon=ALICE_LON)
    ds_reply = _one(ds.receive(forward, T0))
    assert ds_reply.topic == MEDIATOR_REPLY
    answer = _one(core.receive(ds_reply.message, T0 + 0.1))
    assert answer.topic == USER_REPLY
    assert isinstance(answer.message, QueryAnswer)
    assert answer.message.correlation_id == "user-cid-1"
    assert not answer.message.candidates
    assert answer.message.pois == refine(INDEX.pois, QUERY, lon=ALICE_LON, lat=ALICE_LAT)
    # a second DS reply with the same id is stale: dropped
    assert core.receive(ds_reply.message, T0 + 0.2) == []


def test_p1_sends_only_a_region_and_answer_refines_to_exact() -> None:
    core = _core()
    ds = DSCore(INDEX)
    _populate(core, T0)
    _populate(core, T0 + 1.0)  # alice and everyone in the next epoch's snapshot
    core.receive(LocationUpdate(user_id="alice", lat=ALICE_LAT, lon=ALICE_LON, t=T0), T0 + 1.0)
    now = T0 + 2.0
    _populate(core, now)
    forward = _assert_anonymous(_one(core.receive(_query(1), now)))
    assert isinstance(forward.location, RegionLocation)
    text = encode(forward).decode()
    assert repr(ALICE_LAT) not in text and repr(ALICE_LON) not in text
    region = region_from_wire(forward.location.region)
    assert region.covers(shapely.Point(ALICE_LON, ALICE_LAT))
    answer = _one(core.receive(_one(ds.receive(forward, now)).message, now))
    msg = answer.message
    assert isinstance(msg, QueryAnswer) and msg.candidates
    assert msg.region == forward.location.region
    assert msg.area_m2 is not None and 1e4 < msg.area_m2 < 5e7
    assert msg.t1 is not None and msg.t2 is not None and msg.t1 <= msg.t2 <= now
    exact = refine(INDEX.pois, QUERY, lon=ALICE_LON, lat=ALICE_LAT)
    assert refine(msg.pois, QUERY, lon=ALICE_LON, lat=ALICE_LAT) == exact


def test_p3_replies_region_with_k_users_and_never_contacts_ds() -> None:
    core = _core()
    _populate(core, T0)
    _populate(core, T0 + 1.0)
    request = CloakRequest(
        correlation_id="c1",
        reply_to=USER_REPLY,
        user_id="u0",
        profile=PROFILE,
    )
    send = _one(core.receive(request, T0 + 1.5))
    assert send.topic == USER_REPLY
    reply = send.message
    assert isinstance(reply, CloakReply) and reply.correlation_id == "c1"
    assert reply.users >= 4 and 1e4 < reply.area_m2 < 5e7 and reply.t1 <= reply.t2


def test_p3_temporal_cloak_completes_at_next_epoch_or_times_out() -> None:
    core = _core()
    _populate(core, T0)
    first = CloakRequest(correlation_id="u", reply_to=USER_REPLY, user_id="u0", profile=PROFILE)
    assert isinstance(_one(core.receive(first, T0 + 0.1)).message, CloakReply)  # snapshot taken
    # bob is new: not in this epoch's snapshot, so his request waits for the next epoch
    req = CloakRequest(
        correlation_id="b1",
        reply_to=USER_REPLY,
        user_id="bob",
        lat=ALICE_LAT,
        lon=ALICE_LON,
        profile=PROFILE,
    )
    assert core.receive(req, T0 + 0.5) == []
    assert core.pending == 1
    deadline = core.next_deadline()
    assert deadline is not None and deadline <= T0 + 1.0 + 1e-9
    out = core.on_deadline(T0 + 1.0)
    replies = [s.message for s in out if isinstance(s.message, CloakReply)]
    assert [r.correlation_id for r in replies] == ["b1"]
    # k beyond the population: pending until max_delay_s, then cloak_timeout
    big = CloakRequest(
        correlation_id="b2",
        reply_to=USER_REPLY,
        user_id="bob",
        profile=PrivacyProfile(k=90, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=2.0),
    )
    assert core.receive(big, T0 + 1.2) == []
    out = core.on_deadline(T0 + 3.3)
    errors = [s.message for s in out if isinstance(s.message, ErrorReply)]
    assert [(e.correlation_id, e.code) for e in errors] == [("b2", ErrorCode.CLOAK_TIMEOUT)]


@pytest.mark.parametrize(
    ("request_", "code", "field"),
    [
        (
            CloakRequest(correlation_id="x", reply_to=USER_REPLY, user_id="nobody"),
            ErrorCode.UNKNOWN_USER,
            None,
        ),
        (
            CloakRequest(
                correlation_id="x",
                reply_to=USER_REPLY,
                user_id="u1",
                profile=PrivacyProfile(k=1000, a_min_m2=1, a_max_m2=2),
            ),
            ErrorCode.BAD_PARAMETERS,
            "profile.k",
        ),
    ],
)
def test_p3_errors(request_: CloakRequest, code: ErrorCode, field: str | None) -> None:
    core = _core()
    _populate(core, T0)
    err = _one(core.receive(request_, T0 + 1.5)).message
    assert isinstance(err, ErrorReply)
    assert (err.correlation_id, err.code, err.field) == ("x", code, field)
    assert "u1" not in err.reason and "nobody" not in err.reason


def test_mediator_timeout_overload_and_shutdown() -> None:
    core = _core(ds_timeout_s=5.0, max_pending=2)
    core.receive(_query(2, "a"), T0)
    core.receive(_query(2, "b"), T0 + 1)
    over = _one(core.receive(_query(2, "c"), T0 + 2)).message
    assert isinstance(over, ErrorReply) and over.code == ErrorCode.OVERLOADED
    assert core.next_deadline() == T0 + 5.0
    timed_out = _one(core.on_deadline(T0 + 5.0)).message
    assert isinstance(timed_out, ErrorReply)
    assert (timed_out.correlation_id, timed_out.code) == ("a", ErrorCode.UPSTREAM_TIMEOUT)
    gone = _one(core.shutdown(T0 + 5.5)).message
    assert isinstance(gone, ErrorReply)
    assert (gone.correlation_id, gone.code) == ("b", ErrorCode.UNAVAILABLE)
    assert core.pending == 0


def test_ds_error_is_relayed_under_the_users_id() -> None:
    core = _core()
    forward = _one(core.receive(_query(2), T0)).message
    assert isinstance(forward, DSQuery)
    ds_error = ErrorReply(
        correlation_id=forward.correlation_id, code=ErrorCode.INTERNAL, reason="boom"
    )
    relayed = _one(core.receive(ds_error, T0)).message
    assert isinstance(relayed, ErrorReply)
    assert relayed.correlation_id == "user-cid-1" and relayed.code == ErrorCode.INTERNAL


def test_operator_config_feeds_the_machines(tmp_path: Path) -> None:
    shipped = load_config(Path(__file__).parents[1] / "deploy" / "locpriv.toml")
    assert shipped.limits.publishers == 64 and shipped.topics.prefix == "locpriv"
    cfg = shipped.cloak_config()
    assert cfg.world == (-25_000.0, -25_000.0, 25_000.0, 25_000.0)
    assert cfg.default == CloakParams(
        k=10, a_min_m2=1e4, a_max_m2=4e6, max_delay_s=5.0, session_s=1800.0
    )
    assert cfg.session_tile_factor == 1.01 == CloakConfig().session_tile_factor
    bad = tmp_path / "bad.toml"
    bad.write_text("[cloak]\nk_min = 0\n")
    with pytest.raises(ConfigError, match=r"cloak\.k_min"):
        load_config(bad)
    bad.write_text('prefix = "a/#"\n')
    with pytest.raises(ConfigError, match="prefix"):
        load_config(bad)
    bad.write_text("[limits\n")
    with pytest.raises(ConfigError, match="TOML"):
        load_config(bad)


def test_ds_refuses_rather_than_truncates_huge_answers() -> None:
    rng = np.random.default_rng(5)
    xy = rng.uniform(-500, 500, size=(MAX_ANSWER_POIS + 50, 2))
    lon, lat = PROJ.to_lonlat(xy[:, 0], xy[:, 1])
    pois = [
        POI(id=f"d{i}", category="atm", lat=float(lat[i]), lon=float(lon[i]))
        for i in range(len(xy))
    ]
    ds = DSCore(POIIndex(pois, PROJ))
    query = DSQuery(
        correlation_id="big",
        reply_to=USER_REPLY,
        query=WithinQuery(radius_m=2000.0),
        location=PointLocation(lat=41.3874, lon=2.1686),
    )
    err = _one(ds.receive(query, T0)).message
    assert isinstance(err, ErrorReply)
    assert (err.correlation_id, err.code) == ("big", ErrorCode.BAD_PARAMETERS)
    assert err.field == "query.radius_m"  # the dotted field to shrink
    small = query.model_copy(update={"query": WithinQuery(radius_m=5.0)})
    answer = _one(ds.receive(small, T0)).message
    assert isinstance(answer, QueryAnswer) and len(answer.pois) < MAX_ANSWER_POIS


def test_anonymizer_prepares_each_epoch_at_its_boundary() -> None:
    core = _core()
    assert core.next_deadline() is None  # nobody known: nothing to prepare
    _populate(core, T0 + 0.3)
    assert core.next_deadline() == 0.0  # never prepared: at once
    assert core.on_deadline(T0 + 0.4) == []
    assert core.next_deadline() == pytest.approx(T0 + 1.0)
    # a request in the prepared epoch is served from the pre-built snapshot
    request = CloakRequest(correlation_id="p", reply_to=USER_REPLY, user_id="u1", profile=PROFILE)
    assert isinstance(_one(core.receive(request, T0 + 0.5)).message, CloakReply)
