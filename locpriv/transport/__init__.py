"""One transport adapter: MQTT over aiomqtt 2.5, or an in-process bus with MQTT topic matching.

Everything in locpriv that talks to a broker goes through :func:`connect`; aiomqtt is imported
in :mod:`locpriv.transport.mqtt` only (its 3.0 line changes the API).

* ``mqtt://host:port`` / ``mqtts://host:port`` (optionally ``user@``; a password is better
  given as ``password=`` than in the URL, which ends up in logs and process lists) ->
  :class:`MqttTransport`. ``mqtts`` verifies the broker's certificate and host name against
  ``ca_file`` (PEM; default: the system's CAs). MQTT 3.1.1 (amqtt rejects MQTT 5).
  It reconnects with capped,
  jittered exponential backoff when the broker goes away and resubscribes to every filter it
  had. :meth:`MqttTransport.publish` during an outage waits up to ``publish_timeout_s`` for the
  connection to come back, then raises :class:`~locpriv.errors.TransportError`; it never drops a
  message silently. Delivery is at least once for QoS 1 (a publish interrupted by a disconnect
  is retried after the reconnect, so the receiver may see it twice).
* ``memory://name`` -> :class:`MemoryTransport` on the process-wide :class:`MemoryBus` ``name``:
  same topic matching (``+``, ``#``, ``$share/group/...`` delivered to one member per group,
  retained messages), no network; for tests and simulators.

Both are async context managers; :meth:`messages` yields :class:`Received` until the transport
closes. Errors: :class:`~locpriv.errors.TransportError` (broker unreachable, publish on a closed
transport or after the outage budget).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from locpriv.errors import ConfigError
from locpriv.transport.base import Received, Transport, new_client_id
from locpriv.transport.endpoints import ReplyEndpoints
from locpriv.transport.memory import MemoryBus, MemoryTransport
from locpriv.transport.mqtt import MqttTransport

__all__ = [
    "MemoryBus",
    "MemoryTransport",
    "MqttTransport",
    "Received",
    "ReplyEndpoints",
    "Transport",
    "connect",
    "new_client_id",
    "redact_url",
]


def connect(
    url: str,
    *,
    client_id: str | None = None,
    will: tuple[str, bytes] | None = None,
    password: str | None = None,
    ca_file: str | None = None,
    **kw: Any,
) -> MqttTransport | MemoryTransport:
    """A transport for ``url`` (not yet connected: use it as an async context manager).

    ``password`` overrides one in the URL; ``ca_file`` (PEM) verifies an ``mqtts`` broker
    instead of the system's CAs (ignored for other schemes).

    ``will`` is ``(topic, payload)`` published retained at QoS 1 by the broker if the connection
    is lost without a clean disconnect. Extra keywords go to :class:`MqttTransport` (for
    ``memory://`` URLs they are ignored except ``birth`` and ``max_queue``).
    """
    parts = urlsplit(url)
    if parts.scheme == "memory":
        name = parts.netloc or parts.path.lstrip("/") or "default"
        return MemoryTransport(
            MemoryBus.named(name),
            client_id=client_id,
            will=will,
            birth=kw.get("birth"),
            max_queue=kw.get("max_queue", 0),
        )
    if parts.scheme not in ("mqtt", "mqtts", "tcp"):
        raise ConfigError(f"unsupported broker URL scheme {parts.scheme!r} (mqtt, mqtts, memory)")
    if not parts.hostname:
        raise ConfigError(f"broker URL {redact_url(url)!r} has no host")
    tls = parts.scheme == "mqtts"
    try:
        port = parts.port or (8883 if tls else 1883)
    except ValueError:
        raise ConfigError(f"bad port in broker URL {redact_url(url)!r}") from None
    return MqttTransport(
        host=parts.hostname,
        port=port,
        tls=tls,
        username=unquote(parts.username) if parts.username else None,
        password=password or (unquote(parts.password) if parts.password else None),
        ca_file=ca_file or None,
        client_id=client_id,
        will=will,
        **kw,
    )


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs, banners and error messages)."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return parts._replace(netloc=f"{user}:***@{host}").geturl()
