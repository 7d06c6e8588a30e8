"""The anonymizer's sessions kept over a restart or a crash, in one encrypted file.

Before it publishes answers made after one of its historical k-anonymity sessions changed, and
at a clean stop, the anonymizer writes its live sessions
(:mod:`locpriv.core.cloak.session_records`: members' ids, and the fixes of members whose
self-audit is pending) to ``[state] sessions_file``; the next start reads them back and goes
on with the same sets, so that an observer who links a user's requests across a restart or a
crash (SIGKILL, OOM, power loss) still finds k users in every region. Without it the next
process starts unrelated sets, and the intersection across the restart falls below k for most
sessions (tests/test_session_restart.py). Since the file is written before the answers go
out, and a set only shrinks, the set it holds is never larger than the one the last published
answer was made from (every member of it lies in every region an observer has seen); a crash
between the write and the publication loses those answers (their clients time out and ask
again), never the set.

A write appends the sessions changed since the last one, as one frame (:class:`SessionsFile`),
so its cost follows the requests answered, not the sessions alive; once the frames outgrow the
last whole write (or 1 MiB) the file is written whole again, atomically
(``benchmarks/bench_sessions_file.py`` measures both).

The file says who was near whom, so it is sealed: AES-256-GCM (``cryptography``) under a key
derived with HKDF-SHA256 from the token key (``info`` names this file's purpose, so it is no
key the tokens use), a fresh 12-byte nonce per frame, fsynced, mode 0600. A file that is
missing, too large, altered, sealed under another key or not valid is ignored (logged, never
its content) and the service starts with no sessions.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import ValidationError

from locpriv.core.cloak.session_records import SessionRecord, SessionRecords
from locpriv.files import atomic_path

__all__ = ["MAX_BYTES", "SessionsFile"]

log = logging.getLogger(__name__)

_MAGIC: Final = b"LPS2"
_INFO: Final = b"locpriv/sessions-file/v2"
_GENERATION: Final = 16
_NONCE: Final = 12
_LENGTH: Final = 4
MAX_BYTES = 512 * 1024 * 1024
"""A larger file is not read (a hostile or corrupt file cannot exhaust memory)."""


class SessionsFile:
    """Sessions sealed in the file at ``path`` under a key derived from ``token_key``.

    Layout: ``LPS2``, a random 16-byte generation drawn at each full write, then frames, each
    a 4-byte big-endian length, a 12-byte nonce and the AES-256-GCM sealed JSON of a
    :class:`SessionRecords`, authenticated with the magic, the generation and the frame's index
    (so frames cannot be reordered, dropped from the middle unnoticed, or taken from another
    file). Frame 0 holds every session (:meth:`save`); each later frame the sessions changed
    since the frame before (:meth:`append`), a later record of a session replacing an earlier
    one. A frame cut short by a crash during its write ends the file (its answers were never
    published); one that fails its tag ends it too, logged.
    """

    def __init__(self, path: str | Path, token_key: bytes) -> None:
        if len(token_key) != 32:
            raise ValueError("the token key has 32 bytes")
        self.path = Path(path)
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(token_key)
        self._aead = AESGCM(key)
        self._generation: bytes | None = None
        """Of the file this object last wrote whole (None: the next write must be whole)."""
        self._frames = 0
        self.base_bytes = 0
        """Size of the last whole write, bytes."""
        self.appended_bytes = 0
        """Bytes appended since (:meth:`append`)."""

    def _frame(self, generation: bytes, index: int, records: SessionRecords) -> bytes:
        nonce = secrets.token_bytes(_NONCE)
        aad = _MAGIC + generation + index.to_bytes(8, "big")
        body = nonce + self._aead.encrypt(nonce, records.model_dump_json().encode(), aad)
        return len(body).to_bytes(_LENGTH, "big") + body

    def save(self, records: SessionRecords) -> None:
        """Replace the file by every session, ``records``, sealed (atomic, fsynced, mode 0600;
        raises OSError)."""
        self._generation = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        generation = secrets.token_bytes(_GENERATION)
        data = _MAGIC + generation + self._frame(generation, 0, records)
        with atomic_path(self.path, fsync=True) as tmp:
            Path(tmp).write_bytes(data)
        self._generation, self._frames = generation, 1
        self.base_bytes, self.appended_bytes = len(data), 0

    def append(self, records: SessionRecords) -> bool:
        """Add the sessions changed since the last write, ``records``, as one sealed frame
        (fsynced; raises OSError). False, writing nothing, when this object has written no
        whole file since it was made or since a write failed: :meth:`save` first."""
        generation = self._generation
        if generation is None:
            return False
        frame = self._frame(generation, self._frames, records)
        self._generation = None  # a failure below may leave a torn frame: next, a whole write
        with open(self.path, "ab") as fh:
            fh.write(frame)
            fh.flush()
            os.fsync(fh.fileno())
        self._generation = generation
        self._frames += 1
        self.appended_bytes += len(frame)
        return True

    def load(self) -> SessionRecords | None:
        """The sessions of the file, every frame applied in order, or None (logged) when there
        is no usable file."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.error("cannot read the sessions file %s: %s", self.path, exc)
            return None
        if size > MAX_BYTES:
            log.error("sessions file %s is over %d bytes; ignored", self.path, MAX_BYTES)
            return None
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            log.error("cannot read the sessions file %s: %s", self.path, exc)
            return None
        head = len(_MAGIC) + _GENERATION
        if len(raw) <= head or not raw.startswith(_MAGIC):
            log.error("sessions file %s is not a sessions file; ignored", self.path)
            return None
        generation = raw[len(_MAGIC) : head]
        parts: list[SessionRecords] = []
        pos, index = head, 0
        while pos < len(raw):
            n = int.from_bytes(raw[pos : pos + _LENGTH], "big")
            body = raw[pos + _LENGTH : pos + _LENGTH + n]
            if pos + _LENGTH > len(raw) or len(body) < n or n <= _NONCE:
                if parts:
                    log.warning(
                        "sessions file %s: its last write was cut short (frame %d); ignored",
                        self.path,
                        index,
                    )
                break
            part = self._open(generation, index, body)
            if part is None:
                break
            parts.append(part)
            pos, index = pos + _LENGTH + n, index + 1
        if not parts:
            log.error("sessions file %s holds no valid sessions; ignored", self.path)
            return None
        try:
            return _merge(parts)
        except ValidationError as exc:  # together over the bounds
            log.error(
                "sessions file %s: %d errors once merged; ignored", self.path, exc.error_count()
            )
            return None

    def _open(self, generation: bytes, index: int, body: bytes) -> SessionRecords | None:
        aad = _MAGIC + generation + index.to_bytes(8, "big")
        try:
            data = self._aead.decrypt(body[:_NONCE], body[_NONCE:], aad)
        except InvalidTag:
            log.error(
                "sessions file %s was altered or sealed under another token key (frame %d);"
                " ignored from there",
                self.path,
                index,
            )
            return None
        try:
            return SessionRecords.model_validate_json(data)
        except ValidationError as exc:
            log.error(
                "sessions file %s: frame %d holds no valid sessions (%d errors); ignored from"
                " there",
                self.path,
                index,
                exc.error_count(),
            )
            return None


def _merge(parts: list[SessionRecords]) -> SessionRecords:
    """The frames in order, one pass: a later record of a tile's user replaces an earlier
    one, later speeds go over earlier ones."""
    if len(parts) == 1:
        return parts[0]
    tiles: dict[str, dict[str, SessionRecord]] = {}
    speeds: dict[str, dict[str, float]] = {}
    for part in parts:
        for t, rs in part.tiles.items():
            tiles.setdefault(t, {}).update({r.user: r for r in rs})
        for t, v in part.speeds.items():
            speeds.setdefault(t, {}).update(v)
    return SessionRecords(
        saved_at=parts[-1].saved_at,
        tiles={t: list(by_user.values()) for t, by_user in tiles.items()},
        speeds=speeds,
    )
