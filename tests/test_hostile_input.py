"""Hostile payloads: decoding never raises past DecodeError, error replies always validate,
and no topic built from input can be malformed (issue: hostile input and crash safety)."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.errors import DecodeError, ErrorCode
from locpriv.protocols.dispatch import salvage_reply
from locpriv.protocols.effects import Send, error_send
from locpriv.wire import messages as m
from locpriv.wire.topics import Topics, is_topic_name

TOPICS = Topics("city")
REPLY = TOPICS.reply("c-1")


def _cloak(**extra: object) -> dict[str, object]:
    body: dict[str, object] = {
        "type": "cloak_request",
        "correlation_id": "c1",
        "reply_to": REPLY,
        "user_id": "bob",
    }
    body.update(extra)
    return body


HOSTILE: list[tuple[str, bytes, ErrorCode]] = [
    ("deep array", b"[" * 3000 + b"]" * 3000, ErrorCode.MALFORMED),
    ("deep object", b'{"a":' * 3000 + b"1" + b"}" * 3000, ErrorCode.MALFORMED),
    (
        "deep inside a message",
        json.dumps(_cloak()).encode()[:-1] + b',"x":' + b"[" * 2000 + b"]" * 2000 + b"}",
        ErrorCode.MALFORMED,
    ),
    (
        "4400-digit integer",
        b'{"type":"location_update","user_id":"a","lat":' + b"1" * 4400 + b',"lon":1,"t":1}',
        ErrorCode.MALFORMED,
    ),
    (
        "4200-digit version",
        b'{"v":' + b"9" * 4200 + b',"type":"location_update"}',
        ErrorCode.UNSUPPORTED_VERSION,
    ),
    (
        "float overflow",
        b'{"type":"location_update","user_id":"a","lat":1e999,"lon":1,"t":1}',
        ErrorCode.INVALID_FIELD,
    ),
    (
        "300-character extra key",
        json.dumps(_cloak(**{"k" * 300: 1})).encode(),
        ErrorCode.INVALID_FIELD,
    ),
    (
        "lone surrogate escape",
        json.dumps(_cloak(user_id="\ud800")).encode(),
        ErrorCode.MALFORMED,
    ),
    ("raw control character", b'{"type":"cloak\x01_request"}', ErrorCode.MALFORMED),
    ("long type", json.dumps({"type": "x" * 60_000}).encode(), ErrorCode.UNKNOWN_TYPE),
]


@pytest.mark.parametrize(("name", "payload", "code"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_payloads_are_decode_errors(name: str, payload: bytes, code: ErrorCode) -> None:
    with pytest.raises(DecodeError) as info:
        m.decode(payload)
    assert info.value.code == code
    # whatever the decoder says can be sent back on the wire
    send = error_send(REPLY, "c1", info.value.code, info.value.reason, info.value.field)
    assert m.decode(m.encode(send.message)) == send.message
    assert salvage_reply(payload, TOPICS) in ((None, None), (REPLY, "c1"), (None, "c1"))


@settings(max_examples=300)
@given(st.binary(max_size=512))
def test_random_bytes_never_raise_anything_else(payload: bytes) -> None:
    with contextlib.suppress(DecodeError):
        m.decode(payload)
    salvage_reply(payload, TOPICS)


@settings(max_examples=300)
@given(st.text(max_size=300), st.text(max_size=2000))
def test_error_replies_always_validate(field: str, reason: str) -> None:
    send = error_send(REPLY, None, ErrorCode.INVALID_FIELD, reason, field)
    reply = m.decode(m.encode(send.message))
    assert isinstance(reply, m.ErrorReply)
    assert reply.field is not None and len(reply.field) <= 256


BAD_REPLY_TO = [
    "city/v1/reply/a\x01b",
    "city/v1/reply/a\x85b",
    "city/v1/reply/\ufffe",
    "city/v1/reply/\uffff",
    "city/v1/reply/\U0010ffff",
    "city/v1/reply/\ud800",
    "city/v1/reply/a/b",
    "city/v1/reply/",
    "city/v1/reply/+",
    "city/v1/loc/alice",
    "city/v1/ds/query",
    "city/v1/p1/query",
    "city/v1/status/anonymizer",
    "other/v1/reply/x",
]


@pytest.mark.parametrize("topic", BAD_REPLY_TO)
def test_only_one_segment_under_the_reply_namespace_is_a_reply_topic(topic: str) -> None:
    assert not TOPICS.is_reply(topic)
    raw = json.dumps(_cloak(reply_to=topic)).encode("utf-8", "surrogatepass")
    assert salvage_reply(raw, TOPICS)[0] is None


def test_reply_topic_accepted() -> None:
    assert TOPICS.is_reply(REPLY)
    assert salvage_reply(json.dumps(_cloak()).encode(), TOPICS) == (REPLY, "c1")


@pytest.mark.parametrize("topic", ["a\x00b", "a/+/b", "#", "a//b", "caf\u00e9", "a\ud800", ""])
def test_no_effect_can_name_a_malformed_topic(topic: str) -> None:
    assert not is_topic_name(topic)
    with pytest.raises(ValueError, match="malformed topic"):
        Send(topic, m.ErrorReply(code=ErrorCode.INTERNAL, reason="x"))


@pytest.mark.parametrize("topic", ["city/v1/reply/a\x01b", "city/v1/reply/\ufffe", "x/#"])
def test_wire_rejects_reply_to_outside_the_strict_charset(topic: str) -> None:
    with pytest.raises(DecodeError) as info:
        m.decode(json.dumps(_cloak(reply_to=topic)).encode())
    assert info.value.code == ErrorCode.INVALID_FIELD and info.value.field == "reply_to"
