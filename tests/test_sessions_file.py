"""The sessions file: sealed, atomic, and ignored (never trusted) when it is not ours."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path

import pytest

from locpriv.config import ServiceConfig, StateSection
from locpriv.core.cloak.session_records import AuditRecord, SessionRecord, SessionRecords
from locpriv.errors import ConfigError
from locpriv.service.anonymizer import AnonymizerService
from locpriv.service.sessions_file import SessionsFile


def _records() -> SessionRecords:
    r = SessionRecord(
        user="alice-7f3a",
        members=["alice-7f3a", "bob-91c2", "carol-0d4e", "dave-55aa", "erin-e1f0"],
        k=3,
        session_s=600.0,
        last=1_790_000_000.5,
        seed=12345678901234,
        count=4,
        pool=6,
    )
    speeds = {"t3_-2": {"car-1": 11.5}}
    return SessionRecords(saved_at=1_790_000_010.0, tiles={"t3_-2": [r]}, speeds=speeds)


def test_round_trip_sealed_and_private(tmp_path: Path) -> None:
    key = secrets.token_bytes(32)
    f = SessionsFile(tmp_path / "state" / "sessions.bin", key)
    f.save(_records())
    raw = f.path.read_bytes()
    for name in ("alice-7f3a", "bob-91c2", "t3_-2", "600", "car-1"):
        assert name.encode() not in raw  # nothing readable without the key
    assert os.stat(f.path).st_mode & 0o777 == 0o600
    assert SessionsFile(f.path, key).load() == _records()
    f.save(_records())  # a fresh nonce per write
    assert f.path.read_bytes() != raw
    f.path.unlink()
    assert f.load() is None  # no file: no sessions


@pytest.mark.parametrize(
    "spoil",
    ["other key", "flipped byte", "truncated", "empty", "not ours", "plain json"],
)
def test_a_file_that_is_not_ours_is_ignored_and_logged(
    tmp_path: Path, spoil: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = secrets.token_bytes(32)
    f = SessionsFile(tmp_path / "sessions.bin", key)
    f.save(_records())
    raw = bytearray(f.path.read_bytes())
    if spoil == "other key":
        SessionsFile(f.path, secrets.token_bytes(32)).save(_records())
    elif spoil == "flipped byte":
        raw[len(raw) // 2] ^= 1
        f.path.write_bytes(bytes(raw))
    elif spoil == "truncated":
        f.path.write_bytes(bytes(raw[:20]))
    elif spoil == "empty":
        f.path.write_bytes(b"")
    elif spoil == "not ours":
        f.path.write_bytes(os.urandom(200))
    else:
        f.path.write_text(_records().model_dump_json())
    with caplog.at_level(logging.ERROR, logger="locpriv.service.sessions_file"):
        assert f.load() is None
    assert "ignored" in caplog.text
    assert "alice" not in caplog.text


def _sealed(f: SessionsFile, payload: object) -> bytes:
    """A one-frame file holding ``payload`` as JSON, sealed as :class:`SessionsFile` seals
    (magic, generation, length, nonce, AES-GCM over the magic, generation and index)."""
    gen = secrets.token_bytes(16)
    nonce = secrets.token_bytes(12)
    aad = b"LPS2" + gen + (0).to_bytes(8, "big")
    body = nonce + f._aead.encrypt(nonce, json.dumps(payload).encode(), aad)
    return b"LPS2" + gen + len(body).to_bytes(4, "big") + body


def test_records_that_break_the_model_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Sealed under the right key but not valid (a bad field, an unknown version): ignored."""
    key = secrets.token_bytes(32)
    f = SessionsFile(tmp_path / "sessions.bin", key)
    f.path.write_bytes(_sealed(f, _records().model_dump()))
    assert f.load() == _records()  # the helper seals as the file does
    bad_audit = {"t": 1.0, "box": [0, 0, 1, 1], "fixes": {"bob-91c2": [1.0, 2.0, "nan"]}}
    changes: list[dict[str, object]] = [
        {"k": 0},
        {"members": ["x" * 300]},
        {"last": "nan"},
        {"speed": -1.0},
        {"audits": [bad_audit]},
        {"audits": [{"t": 1.0, "box": [0, 0, 1], "fixes": {}}]},
    ]
    for change in changes:
        bad = _records().model_dump()
        if "speed" in change:
            bad["speeds"]["t3_-2"]["car-1"] = change["speed"]
        else:
            bad["tiles"]["t3_-2"][0].update(change)
        f.path.write_bytes(_sealed(f, bad))
        with caplog.at_level(logging.ERROR, logger="locpriv.service.sessions_file"):
            assert f.load() is None, change
        assert "holds no valid sessions" in caplog.text
        caplog.clear()
    f.path.write_bytes(_sealed(f, _records().model_dump() | {"version": 2}))
    assert f.load() is None


def _later() -> SessionRecords:
    """Alice's session after one more request (a member fewer, an audit pending) and a new
    session of Fay's, in the same tile; another fast user."""
    alice = _records().tiles["t3_-2"][0]
    audit = AuditRecord(
        t=1_790_000_070.0,
        box=(0.0, 0.0, 400.0, 300.0),
        fixes={"bob-91c2": (5.0, 6.0, 1_790_000_060.0)},
    )
    alice2 = alice.model_copy(update={"members": alice.members[:4], "count": 5, "audits": [audit]})
    fay = alice.model_copy(
        update={"user": "fay-0001", "members": ["fay-0001", *alice.members[1:4]]}
    )
    return SessionRecords(
        saved_at=1_790_000_075.0, tiles={"t3_-2": [alice2, fay]}, speeds={"t3_-2": {"bus-2": 9.0}}
    )


def test_frames_appended_apply_in_order(tmp_path: Path) -> None:
    key = secrets.token_bytes(32)
    f = SessionsFile(tmp_path / "sessions.bin", key)
    assert not f.append(_later())  # no whole file written yet: nothing appended
    assert not f.path.exists()
    f.save(_records())
    base = f.path.stat().st_size
    assert f.base_bytes == base and f.appended_bytes == 0
    assert f.append(_later())
    assert f.appended_bytes == f.path.stat().st_size - base > 0
    assert os.stat(f.path).st_mode & 0o777 == 0o600
    got = SessionsFile(f.path, key).load()
    assert got is not None and got.saved_at == _later().saved_at
    by_user = {r.user: r for r in got.tiles["t3_-2"]}
    assert by_user == {r.user: r for r in _later().tiles["t3_-2"]}  # the later records win
    assert got.speeds == {"t3_-2": {"car-1": 11.5, "bus-2": 9.0}}
    f.save(_records())  # a whole write starts a fresh file
    assert SessionsFile(f.path, key).load() == _records()


@pytest.mark.parametrize("spoil", ["torn", "flipped", "swapped", "foreign"])
def test_a_frame_cut_short_altered_or_moved_ends_the_file(
    tmp_path: Path, spoil: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What comes before the first bad frame is read; nothing after it (a crash during an
    append leaves a torn last frame, whose answers were never published)."""
    key = secrets.token_bytes(32)
    f = SessionsFile(tmp_path / "sessions.bin", key)
    f.save(_records())
    base = f.path.read_bytes()
    assert f.append(_later())
    one = f.path.read_bytes()
    assert f.append(_records())
    two = f.path.read_bytes()
    b, c = one[len(base) :], two[len(one) :]
    if spoil == "torn":
        f.path.write_bytes(one[:-5])
    elif spoil == "flipped":
        f.path.write_bytes(base + b[:40] + bytes([b[40] ^ 1]) + b[41:] + c)
    elif spoil == "swapped":
        f.path.write_bytes(base + c + b)
    else:  # a frame of another file, sealed under the same key
        g = SessionsFile(tmp_path / "other.bin", key)
        g.save(_records())
        g.append(_later())
        f.path.write_bytes(base + g.path.read_bytes()[len(g.path.read_bytes()) - len(b) :])
    with caplog.at_level(logging.WARNING, logger="locpriv.service.sessions_file"):
        assert SessionsFile(f.path, key).load() == _records()
    assert ("cut short" if spoil == "torn" else "altered") in caplog.text
    assert "alice" not in caplog.text


def test_a_sessions_file_without_a_token_key_stops_the_anonymizer(tmp_path: Path) -> None:
    config = ServiceConfig(state=StateSection(sessions_file=str(tmp_path / "s.bin")))
    with pytest.raises(ConfigError, match=r"sessions_file needs \[state\] token_key_file"):
        AnonymizerService("mqtt://127.0.0.1:1", config)
    key = tmp_path / "token.key"
    key.write_text(secrets.token_hex(32))
    ok = ServiceConfig(
        state=StateSection(sessions_file=str(tmp_path / "s.bin"), token_key_file=str(key))
    )
    svc = AnonymizerService("mqtt://127.0.0.1:1", ok)
    assert svc.sessions_file is not None and svc.sessions_file.path == tmp_path / "s.bin"
