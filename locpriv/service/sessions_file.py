"""The anonymizer's sessions kept over a clean restart, in one encrypted file.

At a clean shutdown (SIGTERM, SIGINT, ``stop()``) the anonymizer writes its live historical
k-anonymity sessions (:mod:`locpriv.core.cloak.session_records`: members' ids, no position) to
``[state] sessions_file``; the next start reads them back, deletes the file and goes on with
the same sets, so that an observer who links a user's requests across the restart still finds
k users in every region. Without it a restart starts unrelated sets, and the intersection
across the restart falls below k for most sessions (tests/test_session_restart.py).

The file says who was near whom, so it is sealed: AES-256-GCM (``cryptography``) under a key
derived with HKDF-SHA256 from the token key (``info`` names this file's purpose, so it is no
key the tokens use), a fresh 12-byte nonce per write, written atomically with mode 0600. A file
that is missing, too large, altered, sealed under another key or not valid is ignored (logged,
never its content) and the service starts with no sessions.

A crash (SIGKILL, power loss) writes nothing: sessions live then are lost as before, and the
file is deleted at start so that an older one is never read twice.
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import ValidationError

from locpriv.core.cloak.session_records import SessionRecords
from locpriv.files import atomic_path

__all__ = ["MAX_BYTES", "SessionsFile"]

log = logging.getLogger(__name__)

_MAGIC: Final = b"LPS1"
_INFO: Final = b"locpriv/sessions-file/v1"
_NONCE: Final = 12
MAX_BYTES = 512 * 1024 * 1024
"""A larger file is not read (a hostile or corrupt file cannot exhaust memory)."""


class SessionsFile:
    """Sessions sealed in the file at ``path`` under a key derived from ``token_key``."""

    def __init__(self, path: str | Path, token_key: bytes) -> None:
        if len(token_key) != 32:
            raise ValueError("the token key has 32 bytes")
        self.path = Path(path)
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(token_key)
        self._aead = AESGCM(key)

    def save(self, records: SessionRecords) -> None:
        """Replace the file by ``records``, sealed (atomic, fsynced; raises OSError)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._aead.encrypt(nonce, records.model_dump_json().encode(), _MAGIC)
        with atomic_path(self.path, fsync=True) as tmp:
            Path(tmp).write_bytes(_MAGIC + nonce + sealed)

    def load(self) -> SessionRecords | None:
        """The sealed records, or None (logged) when there is no usable file."""
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
        head = len(_MAGIC) + _NONCE
        if len(raw) <= head or not raw.startswith(_MAGIC):
            log.error("sessions file %s is not a sessions file; ignored", self.path)
            return None
        try:
            data = self._aead.decrypt(raw[len(_MAGIC) : head], raw[head:], _MAGIC)
        except InvalidTag:
            log.error(
                "sessions file %s was altered or sealed under another token key; ignored",
                self.path,
            )
            return None
        try:
            return SessionRecords.model_validate_json(data)
        except ValidationError as exc:
            n = exc.error_count()
            log.error("sessions file %s holds no valid sessions (%d errors); ignored", self.path, n)
            return None

    def clear(self) -> None:
        """Delete the file (a missing one is fine; raises OSError otherwise)."""
        self.path.unlink(missing_ok=True)
