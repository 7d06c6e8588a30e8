"""Wire messages: round trips and rejection of bad input with the field named."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from pydantic import ValidationError
from strategies import messages

from locpriv.errors import DecodeError, ErrorCode
from locpriv.wire import messages as m

VALID_UPDATE: dict[str, Any] = {
    "type": "location_update",
    "user_id": "u1",
    "lat": 41.0,
    "lon": 2.1,
    "t": 10.0,
}


@settings(max_examples=300)
@given(messages)
def test_round_trip(msg: m.Message) -> None:
    assert m.decode(m.encode(msg)) == msg


@given(messages)
def test_every_type_has_version_and_is_frozen(msg: m.Message) -> None:
    assert msg.v == m.SCHEMA_VERSION
    with pytest.raises(ValidationError):
        msg.v = 2  # type: ignore[misc]


def test_union_covers_every_message_type() -> None:
    assert set(m.MESSAGE_TYPES) == {
        "location_update",
        "location_leave",
        "cloak_request",
        "cloak_reply",
        "query_request",
        "query_answer",
        "ds_query",
        "peer_request",
        "peer_reply",
        "error",
        "deployment_config",
        "issue_request",
        "issue_answer",
        "issuer_keys",
        "fix_wanted",
    }


def _reject(obj: Any) -> DecodeError:
    payload = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    with pytest.raises(DecodeError) as info:
        m.decode(payload)
    return info.value


@pytest.mark.parametrize("payload", [b"{", b"", b"\xff\xfe", b"null", b"[1,2]", b'"x"', b"3"])
def test_malformed(payload: bytes) -> None:
    assert _reject(payload).code is ErrorCode.MALFORMED


def test_too_large() -> None:
    big = json.dumps({**VALID_UPDATE, "user_id": "u" * 100}).encode()
    with pytest.raises(DecodeError) as info:
        m.decode(big, max_bytes=50)
    assert info.value.code is ErrorCode.TOO_LARGE


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"lat": 90.0001}, "lat"),
        ({"lat": -91}, "lat"),
        ({"lon": 180.5}, "lon"),
        ({"lon": -181}, "lon"),
        ({"lat": "41.0"}, "lat"),
        ({"lat": None}, "lat"),
        ({"t": -1}, "t"),
        ({"user_id": ""}, "user_id"),
        ({"user_id": 7}, "user_id"),
        ({"extra": 1}, "extra"),
        ({"accuracy_m": "far"}, "accuracy_m"),
    ],
)
def test_invalid_field_is_named(change: dict[str, Any], field: str) -> None:
    err = _reject({**VALID_UPDATE, **change})
    assert err.code is ErrorCode.INVALID_FIELD
    assert err.field == field
    assert field in str(err)


@pytest.mark.parametrize("missing", ["user_id", "lat", "lon", "t"])
def test_missing_field_is_named(missing: str) -> None:
    obj = {k: v for k, v in VALID_UPDATE.items() if k != missing}
    err = _reject(obj)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, missing)


@pytest.mark.parametrize("bad", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_coordinates(bad: bytes) -> None:
    payload = json.dumps({**VALID_UPDATE, "lat": 0.0}).encode().replace(b"0.0", bad, 1)
    err = _reject(payload)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "lat")


def test_nested_field_paths() -> None:
    query = {
        "type": "ds_query",
        "correlation_id": "c1",
        "reply_to": "r/1",
        "query": {"kind": "nearest", "category": "cafe", "n": 0},
        "location": {"kind": "point", "lat": 1, "lon": 2},
    }
    assert _reject(query).field == "query.n"
    query["query"] = {"kind": "nearest", "category": "cafe", "n": 1}
    query["location"] = {"kind": "region", "region": {"ring": [[0, 0], [1, 200]]}}
    assert _reject(query).field == "location.region.ring.1.1"


def test_unknown_type_and_version() -> None:
    assert _reject({**VALID_UPDATE, "type": "teleport"}).code is ErrorCode.UNKNOWN_TYPE
    err = _reject({**VALID_UPDATE, "v": 99})
    assert (err.code, err.field) == (ErrorCode.UNSUPPORTED_VERSION, "v")
    err = _reject({k: v for k, v in VALID_UPDATE.items() if k != "type"})
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "type")


def test_wrong_type_for_topic() -> None:
    with pytest.raises(DecodeError) as info:
        m.decode(json.dumps(VALID_UPDATE), expect=(m.CloakRequest,))
    assert info.value.code is ErrorCode.WRONG_TYPE


def test_profile_and_request_cross_field_rules() -> None:
    with pytest.raises(ValidationError, match="a_min_m2"):
        m.PrivacyProfile(k=3, a_min_m2=10, a_max_m2=5)
    with pytest.raises(ValidationError, match="both lat and lon"):
        m.CloakRequest(correlation_id="c", reply_to="r", user_id="u", lat=1.0)


def test_reply_topic_rejects_wildcards() -> None:
    for bad in ("a/#", "a/+/b", "$SYS/x"):
        with pytest.raises(ValidationError):
            m.DSQuery(
                correlation_id="c",
                reply_to=bad,
                query=m.NearestQuery(category="cafe", n=1),
                location=m.PointLocation(lat=0, lon=0),
            )


def test_encoding_is_compact_json_without_nulls() -> None:
    raw = m.encode(m.LocationUpdate(user_id="u", lat=1, lon=2, t=3))
    obj = json.loads(raw)
    assert obj == {
        "v": 1,
        "type": "location_update",
        "user_id": "u",
        "lat": 1.0,
        "lon": 2.0,
        "t": 3.0,
    }
