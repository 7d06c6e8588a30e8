"""Pure parts of crash safety: sealed DS tokens, the pending-request journal, publish health."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from locpriv.errors import ConfigError, ErrorCode
from locpriv.protocols.p2 import Mediator
from locpriv.protocols.seal import Sealer
from locpriv.service.health import PublishHealth
from locpriv.service.journal import Journal
from locpriv.wire.messages import (
    DSQuery,
    ErrorReply,
    NearestQuery,
    QueryAnswer,
    QueryRequest,
)
from locpriv.wire.topics import Topics

TOPICS = Topics("test")
USER = TOPICS.reply("c-9")


def _mediator(sealer: Sealer) -> Mediator:
    return Mediator(
        ds_topic=TOPICS.ds_query, reply_to=TOPICS.reply("med"), ds_timeout_s=5.0, sealer=sealer
    )


def _request(cid: str = "u-1") -> QueryRequest:
    return QueryRequest(
        correlation_id=cid,
        reply_to=USER,
        user_id="alice",
        protocol=2,
        lat=41.39,
        lon=2.17,
        query=NearestQuery(category="cafe", n=1),
    )


def _forward(med: Mediator, now: float) -> DSQuery:
    (send,) = med.receive(_request(), now)
    assert isinstance(send.message, DSQuery)
    return send.message


def test_token_hides_and_authenticates() -> None:
    sealer = Sealer(secrets.token_bytes(32))
    token = sealer.seal({"r": USER, "c": "u-1"})
    assert "c-9" not in token and "u-1" not in token
    assert sealer.open(token) == {"r": USER, "c": "u-1"}
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert sealer.open(flipped) is None
    assert Sealer(secrets.token_bytes(32)).open(token) is None
    assert sealer.open("plain-id") is None and sealer.open("s1.%%%") is None


def test_restarted_mediator_with_the_key_relays_once() -> None:
    key = secrets.token_bytes(32)
    ds_query = _forward(_mediator(Sealer(key)), 100.0)
    restarted = _mediator(Sealer(key))  # nothing in memory
    answer = QueryAnswer(correlation_id=ds_query.correlation_id, pois=[])
    (relay,) = restarted.receive(answer, 101.0)
    assert relay.topic == USER and relay.message.correlation_id == "u-1"  # type: ignore[union-attr]
    assert restarted.receive(answer, 101.5) == []  # a duplicate DS answer is not relayed twice
    # an answer after the deadline is dropped: the first process answered upstream_timeout
    assert _mediator(Sealer(key)).receive(answer, 106.0) == []
    # another key cannot open it
    assert _mediator(Sealer.generate()).receive(answer, 101.0) == []


def test_timeout_then_late_answer_gives_one_reply() -> None:
    med = _mediator(Sealer.generate())
    ds_query = _forward(med, 0.0)
    (timeout,) = med.on_deadline(5.0)
    assert isinstance(timeout.message, ErrorReply)
    assert timeout.message.code == ErrorCode.UPSTREAM_TIMEOUT
    assert med.receive(QueryAnswer(correlation_id=ds_query.correlation_id, pois=[]), 5.1) == []


def test_in_flight_lists_requests_only_without_a_shared_key() -> None:
    shared, ephemeral = _mediator(Sealer(secrets.token_bytes(32))), _mediator(Sealer.generate())
    _forward(shared, 0.0)
    _forward(ephemeral, 0.0)
    assert shared.in_flight() == []
    assert ephemeral.in_flight() == [(USER, "u-1")]


def test_key_from_a_file_or_a_credential_never_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = secrets.token_hex(32)
    path = tmp_path / "k"
    path.write_text(key + "\n")
    token = Sealer.from_config(str(path)).seal({"a": 1})
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "token-key").write_text(key + "\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    assert Sealer.from_config("credential:token-key").open(token) == {"a": 1}
    # the variable the key could once be given in is ignored: the environment is no place for it
    monkeypatch.setenv("LOCPRIV_TOKEN_KEY", key)
    assert Sealer.from_config(None).ephemeral
    path.write_text("not hex")
    with pytest.raises(ConfigError, match="64 hex digits"):
        Sealer.from_config(str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        Sealer.from_config(str(tmp_path / "missing"))


def test_journal_round_trip_and_corruption(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "sub" / "pending.json")
    assert journal.load() == []
    journal.save([(USER, "a"), (USER, "b")])
    assert journal.load() == [(USER, "a"), (USER, "b")]
    journal.path.write_text('[[1, 2], ["x"], {"a": 1}, ["t", "c"]')
    assert journal.load() == []  # not JSON
    journal.path.write_text('[[1, 2], ["x"], {"a": 1}, ["t", "c"]]')
    assert journal.load() == [("t", "c")]
    journal.clear()
    journal.clear()
    assert not journal.path.exists()
    assert [p.name for p in journal.path.parent.iterdir()] == []  # no temporary file left


def test_publish_health() -> None:
    h = PublishHealth(max_cut=3, stall_s=0.0, storm_reconnects=10, window_s=60.0)
    h.reconnected(0.0)  # an outage with nothing pending is no failure
    assert h.verdict(0.0) is None
    h.started()
    for t in (1.0, 2.0):
        h.reconnected(t)
    assert h.verdict(2.0) is None
    h.finished(ok=True)  # a confirmed publish clears the count
    h.started()
    h.finished(ok=False)
    for t in (3.0, 4.0, 5.0):
        h.reconnected(t)
    assert h.verdict(5.0) is not None and "dropped the connection 3 times" in (h.verdict(5.0) or "")
    # ... and only after stall_s without a confirmed publish (not a brief tug of war)
    slow = PublishHealth(max_cut=3)  # stall_s = 30 s
    slow.started()
    for t in (3.0, 4.0, 5.0):
        slow.reconnected(t)
    assert slow.verdict(5.0) is None and slow.verdict(32.9) is None
    assert slow.verdict(33.0) is not None
    # reconnections alone (a session taken over by another client) warn, never fail
    flapping = PublishHealth(storm_reconnects=4, window_s=10.0)
    for t in (0.0, 1.0, 2.0):
        flapping.reconnected(t)
    assert flapping.storm(2.0) is None
    for t in (3.0, 3.5, 4.0, 4.5, 5.0):
        flapping.reconnected(t)
    assert "client id" in (flapping.storm(5.0) or "") and flapping.recent(5.0) == 8
    assert flapping.verdict(5.0) is None
    assert flapping.storm(30.0) is None and flapping.recent(30.0) == 0  # the window slid
