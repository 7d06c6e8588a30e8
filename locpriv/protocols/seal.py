"""Sealed tokens: small JSON objects compressed (zlib), encrypted and authenticated
(AES-256-GCM) into strings that fit a correlation id to DS (``s2.`` + base64url, no padding;
``s1.`` tokens, not compressed, from before 2026-12-06 still open).

The mediator seals whom to answer - the user's ``reply_to`` and correlation id, the deadline
and Protocol 1's region - into the correlation id of its query to DS. DS echoes it; whichever
mediator process receives the answer opens the token and relays it, so an answer survives a
mediator restart and any process sharing the key can relay it. DS learns nothing from the
token (it is encrypted) and cannot forge or alter one (it is authenticated).

Compression before encryption lets the token's length depend on its content: what DS can learn
from it is about the region it is sent with (which DS reads in the clear) and the user's own
reply topic and id (whose lengths showed before too); nothing an attacker chooses is sealed
beside another's secret.

The key is 32 bytes; processes that should relay each other's answers share it
(:meth:`Sealer.from_config`: a file, or a systemd credential ``credential:NAME``, hex; never the
environment or the command line, which other processes of the same user can read).

Answers that prove their origin: :class:`AnswerMac` tags DS's answers to a mediator
(``QueryAnswer``/``ErrorReply`` on ``svc/reply/...``) with HMAC-SHA256 (RFC 2104, from
``cryptography``) under a second 32-byte key, the *answer key*, which DS and the mediators
share (``[state] answer_key_file``). The tag covers the whole answer
encoded without its ``mac`` field - so the sealed token in its ``correlation_id`` too: an answer
cannot be moved to another query, altered, or made up by anyone without the key. It is a key of
its own, not derived from the token key: DS holds it, and must never be able to open tokens.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import zlib
from typing import Any, Final

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from locpriv.credentials import secret_path
from locpriv.errors import ConfigError
from locpriv.wire.messages import MAX_ECHOED_ID, ErrorReply, QueryAnswer, encode

__all__ = ["AnswerMac", "Sealer", "read_key"]
_ANSWER_DOMAIN: Final = b"locpriv/ds-answer/v1\n"
_PREFIX: Final = "s2."
_PLAIN_PREFIX: Final = "s1."
"""Tokens sealed without compression (before 2026-12-06): still opened."""
_MAX_OPENED: Final = 1 << 20
"""Most bytes a token opens to (an authenticated token is ours; a cap all the same)."""
_AAD: Final = b"locpriv/ds-token/v1"
_NONCE: Final = 12


class Sealer:
    """Seals and opens tokens under one 32-byte key. ``ephemeral``: the key was generated for
    this process only, so tokens do not survive it."""

    def __init__(self, key: bytes, *, ephemeral: bool = False) -> None:
        if len(key) != 32:
            raise ConfigError("a sealing key has 32 bytes (64 hex digits)")
        self._aead = AESGCM(key)
        self.ephemeral = ephemeral

    @classmethod
    def generate(cls) -> Sealer:
        """A sealer with a fresh random key known to this process only."""
        return cls(secrets.token_bytes(32), ephemeral=True)

    @classmethod
    def from_config(cls, key_file: str | None) -> Sealer:
        """The key from ``key_file`` (a path or ``credential:NAME``; hex, surrounding white
        space ignored), else a fresh ephemeral key."""
        key = read_key(key_file, "token")
        return cls.generate() if key is None else cls(key)

    def seal(self, obj: dict[str, Any]) -> str:
        """``obj`` (JSON-serialisable) as a token of ``[A-Za-z0-9_.-]``."""
        nonce = secrets.token_bytes(_NONCE)
        data = zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 9)
        sealed = nonce + self._aead.encrypt(nonce, data, _AAD)
        return _PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def open(self, token: str) -> dict[str, Any] | None:
        """The sealed object, or None when ``token`` was not sealed under this key (or was
        altered, or is not a token at all)."""
        packed = token.startswith(_PREFIX)
        if not (packed or token.startswith(_PLAIN_PREFIX)) or len(token) > MAX_ECHOED_ID:
            return None
        body = token[len(_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, binascii.Error):
            return None
        if len(raw) <= _NONCE:
            return None
        try:
            data = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _AAD)
        except InvalidTag:
            return None
        if packed:
            unzip = zlib.decompressobj()
            try:
                data = unzip.decompress(data, _MAX_OPENED)
            except zlib.error:
                return None
            if unzip.unconsumed_tail:
                return None
        obj = json.loads(data)
        return obj if isinstance(obj, dict) else None


def read_key(key_file: str | None, what: str) -> bytes | None:
    """A 32-byte key from ``key_file`` (a path or ``credential:NAME``, see
    :func:`locpriv.credentials.secret_path`; 64 hex digits, surrounding white space ignored),
    None without one. Raises ConfigError (never showing the key) when the file cannot be read or
    does not hold 64 hex digits."""
    if not key_file:
        return None
    path = secret_path(key_file, f"{what} key")
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the {what} key file {key_file}: {exc}") from None
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise ConfigError(f"the {what} key must be 64 hex digits") from None
    if len(key) != 32:
        raise ConfigError(f"the {what} key has 32 bytes (64 hex digits)")
    return key


DSReply = QueryAnswer | ErrorReply


class AnswerMac:
    """Tags and checks DS's answers to a mediator: HMAC-SHA256 under the 32-byte answer key
    over ``locpriv/ds-answer/v1\\n`` and the answer's compact JSON (:func:`encode`) without its
    ``mac`` field; the tag is base64url without padding (43 characters)."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ConfigError("an answer key has 32 bytes (64 hex digits)")
        self._key = key

    @classmethod
    def from_config(cls, key_file: str | None) -> AnswerMac | None:
        """The answer key from ``key_file`` (a path or ``credential:NAME``); None without one
        (answers are then neither tagged nor checked)."""
        key = read_key(key_file, "answer")
        return None if key is None else cls(key)

    def _hmac(self, message: DSReply) -> hmac.HMAC:
        h = hmac.HMAC(self._key, hashes.SHA256())
        h.update(_ANSWER_DOMAIN)
        h.update(encode(message.model_copy(update={"mac": None})))
        return h

    def sign(self, message: DSReply) -> DSReply:
        """``message`` with its ``mac``."""
        tag = base64.urlsafe_b64encode(self._hmac(message).finalize()).rstrip(b"=").decode()
        return message.model_copy(update={"mac": tag})

    def verify(self, message: DSReply) -> bool:
        """True when ``message`` carries the mac of exactly this answer (constant time)."""
        if message.mac is None:
            return False
        try:
            tag = base64.urlsafe_b64decode(message.mac + "=")
        except (ValueError, binascii.Error):
            return False
        try:
            self._hmac(message).verify(tag)
        except InvalidSignature:
            return False
        return True
