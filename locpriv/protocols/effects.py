"""What sans-I/O machines ask their drivers to do: the effects, in one vocabulary.

Every machine (trusted services, DS, the P1-P3 user side, the P4 device) takes decoded
messages and the time ``now`` and returns a list of effects; its driver carries them out in
order:

* :class:`Send` - publish a message (the topic is checked where it is built: a name a broker
  could reject as malformed raises ``ValueError``);
* :class:`Subscribe` / :class:`Unsubscribe` - start or stop receiving a topic (the driver waits
  for the broker's acknowledgement of a subscription before the effects that follow);
* :class:`Done` / :class:`Failed` - a request the driver started has finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from locpriv.errors import ErrorCode, LocprivError
from locpriv.wire.messages import ErrorDetails, ErrorReply, Message
from locpriv.wire.topics import is_topic_name

__all__ = ["Done", "Effect", "Failed", "Send", "Subscribe", "Unsubscribe", "error_send"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Send:
    """Publish ``message`` on ``topic`` at QoS ``qos``."""

    topic: str
    message: Message
    qos: int = 1

    def __post_init__(self) -> None:
        if not is_topic_name(self.topic):
            raise ValueError(f"refusing to publish on a malformed topic {self.topic[:80]!r}")


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Start receiving ``topic`` at QoS ``qos``."""

    topic: str
    qos: int = 1


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """Stop receiving ``topic``."""

    topic: str


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """Request ``request_id`` finished with ``value``."""

    request_id: str
    value: T


@dataclass(frozen=True, slots=True)
class Failed:
    """Request ``request_id`` failed with ``error`` (a :mod:`locpriv.errors` exception)."""

    request_id: str
    error: LocprivError


Effect: TypeAlias = Send | Subscribe | Unsubscribe | Done[Any] | Failed


def _printable(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, every non-printable character as ``?``."""
    cut = text[:limit]
    return cut if cut.isprintable() else "".join(c if c.isprintable() else "?" for c in cut)


def error_send(
    reply_to: str,
    correlation_id: str | None,
    code: ErrorCode,
    reason: str,
    field: str | None = None,
    *,
    details: ErrorDetails | None = None,
) -> Send:
    """An :class:`~locpriv.wire.messages.ErrorReply` effect that always validates: ``reason``
    and ``field`` (which may echo attacker-chosen keys) are cut to the wire limits and made
    printable; ``details`` is what a client acts on (the right tile, the profile bounds)."""
    return Send(
        reply_to,
        ErrorReply(
            correlation_id=correlation_id,
            code=code,
            reason=_printable(reason, 1024),
            field=None if field is None else _printable(field, 256),
            details=details,
        ),
    )
