"""Sealed tokens: small JSON objects encrypted and authenticated (AES-256-GCM) into strings
that fit a correlation id (``s1.`` + base64url, no padding).

The mediator seals whom to answer - the user's ``reply_to`` and correlation id, the deadline
and Protocol 1's region - into the correlation id of its query to DS. DS echoes it; whichever
mediator process receives the answer opens the token and relays it, so an answer survives a
mediator restart and any process sharing the key can relay it. DS learns nothing from the
token (it is encrypted) and cannot forge or alter one (it is authenticated).

The key is 32 bytes; processes that should relay each other's answers share it
(:meth:`Sealer.from_config`: a file or the ``LOCPRIV_TOKEN_KEY`` environment variable, hex).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from locpriv.errors import ConfigError

__all__ = ["KEY_ENV", "Sealer"]

KEY_ENV: Final = "LOCPRIV_TOKEN_KEY"
"""Environment variable holding the sealing key (64 hex digits)."""
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
        text: str | None = None
        if key_file:
            try:
                text = Path(key_file).read_text(encoding="ascii")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read the token key file {key_file}: {exc}") from None
        elif os.environ.get(KEY_ENV):
            text = os.environ[KEY_ENV]
        if text is None:
            return cls.generate()
        try:
            key = bytes.fromhex(text.strip())
        except ValueError:
            raise ConfigError("the token key must be 64 hex digits") from None
        return cls(key)

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
