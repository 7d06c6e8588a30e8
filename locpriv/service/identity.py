"""The broker client ids of the services: unguessable per deployment, stable across restarts.

MQTT lets any client that connects with an existing client id take over that session: the
broker drops the older connection, and with ``clean_session=False`` the newcomer inherits its
subscriptions and queued messages; mosquitto and amqtt do so even when the two logins differ.
A service whose client id an app can guess can therefore be displaced (its requests go to the
attacker) by any ordinary login. The ids below are derived from the service's broker password,
a secret it already holds (the systemd credential), and never appear in a topic an app can read:

    ``{name}-{32 hex digits}``, the digits = PBKDF2-HMAC-SHA256 (RFC 8018) of the password,
    salt ``locpriv mqtt client id v1`` + NUL + ``name``, 200,000 iterations, 16 bytes.

``name`` is the role and shard (``locpriv-anonymizer-s0of2``), so shards and services get
different ids from one password. PBKDF2 (not a bare HMAC) because the id shows in the broker's
log: from it, guessing a weak password costs as much as against a stored PBKDF2 hash. Changing
the password changes the id (the old persistent session expires on the broker). Without a
password (an anonymous demo broker, where no login is bound to anything) the id is ``name``.
An id set in ``[mqtt] client_id``/``ds_client_id`` is used as given: it must then be kept as
secret as the password.
"""

from __future__ import annotations

import logging
from typing import Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

__all__ = ["ANONYMIZER", "DS", "ISSUER", "ITERATIONS", "service_client_id"]

ANONYMIZER: Final = "locpriv-anonymizer"
"""Role name of the anonymizer/mediator (the visible part of its client id)."""
DS: Final = "locpriv-ds"
"""Role name of the database server."""
ISSUER: Final = "locpriv-issuer"
"""Role name of the Protocol 4 token issuer."""
ITERATIONS: Final = 200_000
"""PBKDF2 iterations (about 0.1 s once per start)."""
_SALT: Final = b"locpriv mqtt client id v1\x00"

log = logging.getLogger(__name__)


def service_client_id(name: str, password: str | None, configured: str = "") -> str:
    """The client id of service ``name``: ``configured`` when set, else ``name`` and 128 bits
    derived from ``password`` (see the module docstring), else ``name`` (no password)."""
    if configured:
        if password:  # a login to protect, and an id that may be written down somewhere
            log.warning(
                "%s: the client id is set in the configuration: any login that learns it can"
                " take this service's broker session over; leave it empty to derive a secret"
                " one from the password",
                name,
            )
        return configured
    if not password:
        return name
    kdf = PBKDF2HMAC(
        algorithm=hashes.SHA256(),
        length=16,
        salt=_SALT + name.encode(),
        iterations=ITERATIONS,
    )
    return f"{name}-{kdf.derive(password.encode()).hex()}"
