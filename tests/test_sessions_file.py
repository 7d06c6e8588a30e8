"""The sessions file: sealed, atomic, and ignored (never trusted) when it is not ours."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path

import pytest

from locpriv.config import ServiceConfig, StateSection
from locpriv.core.cloak.session_records import SessionRecord, SessionRecords
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
    f.clear()
    assert not f.path.exists()
    assert f.load() is None
    f.clear()  # a missing file is fine


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


def test_records_that_break_the_model_are_refused(tmp_path: Path) -> None:
    """Sealed under the right key but not valid (a bad field, an unknown version): ignored."""
    key = secrets.token_bytes(32)
    f = SessionsFile(tmp_path / "sessions.bin", key)
    for change in ({"k": 0}, {"members": ["x" * 300]}, {"last": "nan"}, {"speed": -1.0}):
        bad = _records().model_dump()
        if "speed" in change:
            bad["speeds"]["t3_-2"]["car-1"] = change["speed"]
        else:
            bad["tiles"]["t3_-2"][0].update(change)
        nonce = secrets.token_bytes(12)
        body = f._aead.encrypt(nonce, json.dumps(bad).encode(), b"LPS1")  # the file's sealing
        f.path.write_bytes(b"LPS1" + nonce + body)
        assert f.load() is None, change
    newer = _records().model_dump() | {"version": 2}
    nonce = secrets.token_bytes(12)
    body = f._aead.encrypt(nonce, json.dumps(newer).encode(), b"LPS1")
    f.path.write_bytes(b"LPS1" + nonce + body)
    assert f.load() is None


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
