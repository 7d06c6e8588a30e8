"""Sealed tokens: small JSON objects encrypted and authenticated (AES-256-GCM) into strings
that fit a correlation id (``s1.`` + base64url, no padding).

The mediator seals whom to answer - the user's ``reply_to`` and correlation id, the deadline
and Protocol 1's region - into the correlation id of its query to DS. DS echoes it; whichever
mediator process receives the answer opens the token and relays it, so an answer survives a
mediator restart and any process sharing the key can relay it. DS learns nothing from the
token (it is encrypted) and cannot forge or alter one (it is authenticated).

The key is 32 bytes; processes that should relay each other's answers share it
(:meth:`Sealer.from_config`: a file or the ``LOCPRIV_TOKEN_KEY`` environment variable, hex).

Answers that prove their origin: :class:`AnswerMac` tags DS's answers to a mediator
(``QueryAnswer``/``ErrorReply`` on ``svc/reply/...``) with HMAC-SHA256 (RFC 2104, from
``cryptography``) under a second 32-byte key, the *answer key*, which DS and the mediators
share (``[state] answer_key_file`` or ``LOCPRIV_ANSWER_KEY``). The tag covers the whole answer
encoded without its ``mac`` field - so the sealed token in its ``correlation_id`` too: an answer
cannot be moved to another query, altered, or made up by anyone without the key. It is a key of
its own, not derived from the token key: DS holds it, and must never be able to open tokens.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from locpriv.errors import ConfigError
from locpriv.wire.messages import ErrorReply, QueryAnswer, encode

__all__ = ["ANSWER_KEY_ENV", "KEY_ENV", "AnswerMac", "Sealer", "read_key"]

KEY_ENV: Final = "LOCPRIV_TOKEN_KEY"
"""Environment variable holding the sealing key (64 hex digits)."""
ANSWER_KEY_ENV: Final = "LOCPRIV_ANSWER_KEY"
"""Environment variable holding the answer key DS and the mediators share (64 hex digits)."""
_ANSWER_DOMAIN: Final = b"locpriv/ds-answer/v1\n"
_PREFIX: Final = "s1."
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
        """The key from ``key_file`` (hex, surrounding white space ignored), else from
        ``LOCPRIV_TOKEN_KEY``, else a fresh ephemeral key."""
        key = read_key(key_file, KEY_ENV, "token")
        return cls.generate() if key is None else cls(key)

    def seal(self, obj: dict[str, Any]) -> str:
        """``obj`` (JSON-serialisable) as a token of ``[A-Za-z0-9_.-]``."""
        nonce = secrets.token_bytes(_NONCE)
        data = json.dumps(obj, separators=(",", ":")).encode()
        sealed = nonce + self._aead.encrypt(nonce, data, _AAD)
        return _PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def open(self, token: str) -> dict[str, Any] | None:
        """The sealed object, or None when ``token`` was not sealed under this key (or was
        altered, or is not a token at all)."""
        if not token.startswith(_PREFIX) or len(token) > 4096:
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
        obj = json.loads(data)
        return obj if isinstance(obj, dict) else None


def read_key(key_file: str | None, env: str, what: str) -> bytes | None:
    """A 32-byte key from ``key_file`` (64 hex digits, surrounding white space ignored), else
    from the environment variable ``env``, else None. Raises ConfigError (never showing the
    key) when the file cannot be read or does not hold 64 hex digits."""
    text: str | None = None
    if key_file:
        try:
            text = Path(key_file).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the {what} key file {key_file}: {exc}") from None
    elif os.environ.get(env):
        text = os.environ[env]
    if text is None:
        return None
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
        """The answer key from ``key_file``, else ``LOCPRIV_ANSWER_KEY``; None when neither
        is set (answers are then neither tagged nor checked)."""
        key = read_key(key_file, ANSWER_KEY_ENV, "answer")
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
