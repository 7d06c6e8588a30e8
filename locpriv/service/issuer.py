"""The Protocol 4 token issuer as an MQTT client process (``locpriv serve issuer``).

Runs :class:`~locpriv.protocols.issuer.IssuerCore` on ``issue/+``. Its state lives in a key
directory (``--key-dir``, created 0700): ``period-{e}.pem``, one RSA-2048 private key per
pseudonym period (PKCS#8 PEM, 0600, created when first needed; keys older than the previous
period are deleted), and ``counts.json``, the signatures issued per period and login (so a
restart hands out no fresh allowance). The public keys of the current and next periods are
published retained on ``issuer/key`` at start, after every reconnection and at every period
boundary. Only the issuer's broker account may write ``issuer/key`` and read ``issue/+``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from locpriv.config import ServiceConfig
from locpriv.errors import ConfigError
from locpriv.files import atomic_path
from locpriv.protocols.issuer import Counts, IssuerCore, issuer_routes
from locpriv.protocols.p4.tokens import period_of
from locpriv.service.driver import ServiceDriver
from locpriv.service.identity import ISSUER, service_client_id
from locpriv.wire.messages import encode

__all__ = ["IssuerService", "KeyDirectory"]

log = logging.getLogger(__name__)

KEY_BITS = 2048
"""RSA modulus of the period keys, bits (RFC 9474's and Privacy Pass's size)."""


class KeyDirectory:
    """One RSA key per period in ``path`` (see the module docstring); keys are cached."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the issuer key directory {self.path}: {exc}"
            ) from None
        self._cache: dict[int, rsa.RSAPrivateKey] = {}

    def key_for(self, period: int) -> rsa.RSAPrivateKey:
        """The private key of ``period``, created (and written 0600) when missing."""
        key = self._cache.get(period)
        if key is not None:
            return key
        file = self.path / f"period-{period}.pem"
        if file.exists():
            loaded = serialization.load_pem_private_key(file.read_bytes(), password=None)
            if not isinstance(loaded, rsa.RSAPrivateKey):
                raise ConfigError(f"{file} is not an RSA private key")
            key = loaded
        else:
            key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            with atomic_path(file, fsync=True) as tmp:  # mkstemp: mode 0600
                Path(tmp).write_bytes(pem)
            log.info("issuer: new key for period %d", period)
        self._cache[period] = key
        return key

    def prune(self, current: int) -> None:
        """Forget and delete the keys of periods before ``current - 1``."""
        for file in self.path.glob("period-*.pem"):
            try:
                period = int(file.stem.removeprefix("period-"))
            except ValueError:
                continue
            if period < current - 1:
                file.unlink(missing_ok=True)
                self._cache.pop(period, None)

    @property
    def counts_file(self) -> Path:
        """Where the counts are kept."""
        return self.path / "counts.json"

    def load_counts(self) -> Counts:
        """The counts saved by the previous run (empty when none or unreadable)."""
        try:
            raw: Any = json.loads(self.counts_file.read_text(encoding="utf-8"))
            return {int(p): {str(u): int(n) for u, n in per.items()} for p, per in raw.items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            raise ConfigError(f"cannot read {self.counts_file}: {exc}") from None

    def save_counts(self, counts: Counts) -> None:
        """Write ``counts`` atomically."""
        text = json.dumps({str(p): c for p, c in counts.items()})
        with atomic_path(self.counts_file, fsync=True) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")


class IssuerService(ServiceDriver):
    """The issuer on ``issue/+``; ``**driver`` go to ServiceDriver (``clock=``, ``transport=``,
    ``password=``)."""

    def __init__(
        self,
        url: str,
        config: ServiceConfig | None = None,
        *,
        key_dir: str | Path,
        period_s: float = 3600.0,
        per_login: int = 2,
        client_id: str = "",
        **driver: Any,
    ) -> None:
        config = config or ServiceConfig()
        self.keys = KeyDirectory(key_dir)
        self.core = IssuerCore(
            self.keys.key_for,
            period_s=period_s,
            per_login=per_login,
            counts=self.keys.load_counts(),
            on_count=self.keys.save_counts,
        )
        super().__init__(
            url,
            name="issuer",
            machine=self.core,
            routes=issuer_routes(config.topics),
            config=config,
            client_id=service_client_id(ISSUER, driver.get("password"), client_id),
            **driver,
        )
        self._refresh_keys()

    def _refresh_keys(self) -> None:
        now = self.clock()
        self.keys.prune(period_of(now, self.core.period_s))
        message = self.core.keys_message(now)
        self.retained = [(self.topics.issuer_keys, encode(message))]

    async def _roll(self) -> None:
        """At every period boundary: the new current and next keys, published retained."""
        while True:
            period_s = self.core.period_s
            now = self.clock()
            await asyncio.sleep(max(0.01, (period_of(now, period_s) + 1) * period_s - now))
            self._refresh_keys()
            if self._transport is not None and self.connected:
                await self._publish_retained(self._transport)

    async def run(self) -> None:
        """Serve until :meth:`stop`, rolling the keys at period boundaries."""
        roller = asyncio.create_task(self._roll(), name="issuer-keys")
        try:
            await super().run()
        finally:
            roller.cancel()
