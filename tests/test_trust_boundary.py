"""The trust boundary in the pure machines: identity from the topic, per-user abuse limits."""

from __future__ import annotations

import pytest

from locpriv.config import ServiceConfig
from locpriv.errors import ErrorCode
from locpriv.protocols.dispatch import Dispatcher
from locpriv.protocols.effects import Send
from locpriv.protocols.limits import RequestLimits, TokenBucket, UserLimits
from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core
from locpriv.transport.base import Received
from locpriv.wire.messages import (
    CloakReply,
    CloakRequest,
    ErrorReply,
    LocationUpdate,
    NearestQuery,
    PrivacyProfile,
    QueryRequest,
    encode,
)
from locpriv.wire.topics import Topics

TOPICS = Topics("tb")
MEDIATOR = TOPICS.reply("mediator")
T0 = 1_700_000_000.0
LAT, LON = 41.3874, 2.1686
PROFILE = PrivacyProfile(k=3, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=10.0)


def _dispatcher(**limits: float) -> Dispatcher:
    config = ServiceConfig.model_validate({"prefix": "tb", "limits": limits})
    core = build_trusted_core(config, MEDIATOR)
    return Dispatcher(
        name="anonymizer",
        machine=core,
        routes=anonymizer_routes(TOPICS, MEDIATOR, anonymizer=core.anonymizer, limits=core.limits),
        topics=TOPICS,
        max_payload=65536,
    )


def _cloak(user: str, cid: str, **extra: object) -> CloakRequest:
    return CloakRequest(
        correlation_id=cid, reply_to=TOPICS.reply(f"c-{user}"), user_id=user, **extra
    )


def _send(d: Dispatcher, topic: str, message: object, now: float = T0) -> list[Send]:
    return d.handle(Received(topic, encode(message)), now)  # type: ignore[arg-type]


def _update(user: str, dx: float = 0.0) -> LocationUpdate:
    return LocationUpdate(user_id=user, lat=LAT + dx, lon=LON + dx, t=T0)


def test_every_user_topic_rejects_a_payload_naming_someone_else() -> None:
    d = _dispatcher()
    query = NearestQuery(category="cafe", n=1)
    claims = {
        TOPICS.location("mallory"): _update("alice"),
        TOPICS.p3_cloak("mallory"): _cloak("alice", "c1"),
        TOPICS.p1_query("mallory"): QueryRequest(
            correlation_id="q1",
            reply_to=TOPICS.reply("m"),
            user_id="alice",
            protocol=1,
            lat=LAT,
            lon=LON,
            query=query,
        ),
        TOPICS.p2_query("mallory"): QueryRequest(
            correlation_id="q2",
            reply_to=TOPICS.reply("m"),
            user_id="alice",
            protocol=2,
            lat=LAT,
            lon=LON,
            query=query,
        ),
    }
    for topic, message in claims.items():
        (effect,) = _send(d, topic, message)
        assert isinstance(effect.message, ErrorReply), topic
        assert effect.message.code == ErrorCode.INVALID_FIELD
        assert effect.message.field == "user_id"
    # nothing reached the machine: alice is unknown to the anonymizer
    (answer,) = _send(d, TOPICS.p3_cloak("alice"), _cloak("alice", "c2"))
    assert isinstance(answer.message, ErrorReply)
    assert answer.message.code == ErrorCode.UNKNOWN_USER


def test_the_topics_user_is_the_one_served() -> None:
    d = _dispatcher()
    for i in range(5):
        assert _send(d, TOPICS.location(f"u{i}"), _update(f"u{i}", i * 1e-4)) == []
    (reply,) = _send(d, TOPICS.p3_cloak("u0"), _cloak("u0", "c", profile=PROFILE))
    assert isinstance(reply.message, CloakReply) and reply.topic == TOPICS.reply("c-u0")


def test_a_wrong_protocol_on_a_query_topic_is_still_refused() -> None:
    d = _dispatcher()
    q = QueryRequest(
        correlation_id="q",
        reply_to=TOPICS.reply("a"),
        user_id="al",
        protocol=2,
        lat=LAT,
        lon=LON,
        query=NearestQuery(category="cafe", n=1),
    )
    (effect,) = _send(d, TOPICS.p1_query("al"), q)
    assert isinstance(effect.message, ErrorReply) and effect.message.field == "protocol"


def test_token_bucket_limits_a_user_not_the_others() -> None:
    d = _dispatcher(requests_per_s=1.0, burst=3.0)
    codes = []
    for i in range(5):
        (e,) = _send(d, TOPICS.p3_cloak("al"), _cloak("al", f"c{i}"))
        codes.append(e.message.code if isinstance(e.message, ErrorReply) else None)
    assert codes == [ErrorCode.UNKNOWN_USER] * 3 + [ErrorCode.RATE_LIMITED] * 2
    (other,) = _send(d, TOPICS.p3_cloak("bo"), _cloak("bo", "b"))
    assert isinstance(other.message, ErrorReply) and other.message.code == ErrorCode.UNKNOWN_USER
    # a second later one token is back
    (later,) = _send(d, TOPICS.p3_cloak("al"), _cloak("al", "late"), now=T0 + 1.0)
    assert isinstance(later.message, ErrorReply)
    assert later.message.code == ErrorCode.UNKNOWN_USER


def test_pending_requests_per_user_are_bounded_and_released_by_answers() -> None:
    d = _dispatcher(max_pending_per_user=2, burst=100.0)
    assert _send(d, TOPICS.location("al"), _update("al")) == []
    # k = 3 with one user known: temporal cloaking waits
    waiting = [
        _send(d, TOPICS.p3_cloak("al"), _cloak("al", f"w{i}", profile=PROFILE)) for i in range(2)
    ]
    assert waiting == [[], []]
    (refused,) = _send(d, TOPICS.p3_cloak("al"), _cloak("al", "w2", profile=PROFILE))
    assert isinstance(refused.message, ErrorReply)
    assert refused.message.code == ErrorCode.RATE_LIMITED
    # two more users arrive: both waiting cloaks are answered, and al may ask again
    answered = _send(d, TOPICS.location("bo"), _update("bo", 1e-4))
    answered += _send(d, TOPICS.location("cy"), _update("cy", -1e-4))
    answered += d.machine.on_deadline(T0 + 1.5)
    assert sorted(e.message.correlation_id for e in answered) == ["w0", "w1"]  # type: ignore[union-attr]
    assert _send(d, TOPICS.p3_cloak("al"), _cloak("al", "w3", profile=PROFILE), now=T0 + 1.5)


def test_a_flood_of_location_updates_is_dropped_unread() -> None:
    """Updates beyond the user's bucket are dropped before decoding, valid or not, with no
    reply (a flood never becomes a flood of errors): her table position stays the last
    admitted one; other users are not affected; a second later her bucket has refilled."""
    d = _dispatcher(updates_per_s=1.0, update_burst=5.0)
    anonymizer = d.machine.anonymizer  # type: ignore[attr-defined]
    out = [_send(d, TOPICS.location("al"), _update("al", i * 1e-5)) for i in range(12)]
    assert out == [[]] * 12
    assert d.stats["dropped"] == 7 and d.machine.limits.updates_dropped == 7  # type: ignore[attr-defined]
    table = anonymizer.cloakers.cloaker(anonymizer.cloakers.tile_of("al")).table
    x_kept, _ = anonymizer.projection.point_to_xy(LON + 4e-5, LAT + 4e-5)
    assert table.x[table.ids["al"]] == pytest.approx(x_kept)  # the 5th, not the 12th
    # garbage on her topic costs her bucket too, and is not even decoded once it is empty
    rejected = d.stats["rejected"]
    assert d.handle(Received(TOPICS.location("al"), b"[[[["), T0) == []
    assert d.stats["rejected"] == rejected and d.stats["dropped"] == 8
    # another user is not affected, and a second later al's next update is admitted again
    assert _send(d, TOPICS.location("bo"), _update("bo")) == []
    assert anonymizer.cloakers.tile_of("bo") is not None
    assert _send(d, TOPICS.location("al"), _update("al"), now=T0 + 1.0) == []
    assert d.stats["dropped"] == 8
    assert table.x[table.ids["al"]] == pytest.approx(anonymizer.projection.point_to_xy(LON, LAT)[0])


def test_user_limits_forget_idle_users_beyond_the_cap() -> None:
    lim = UserLimits(RequestLimits(requests_per_s=1.0, burst=2.0, max_users=3))
    for i in range(10):
        assert lim.admit(f"u{i}", float(i)) is None
    assert len(lim._buckets) <= 3


def test_token_bucket_refills_up_to_burst() -> None:
    b = TokenBucket(2.0, 2.0)
    assert b.take(0.0) and b.take(0.0) and not b.take(0.0)
    assert b.take(0.5) and not b.take(0.5)
    assert b.full(10.0)


@pytest.mark.parametrize("bad", ["a/b", "+", "#", ""])
def test_user_topics_refuse_wildcards_and_levels(bad: str) -> None:
    with pytest.raises(ValueError, match="segment"):
        TOPICS.p1_query(bad)
