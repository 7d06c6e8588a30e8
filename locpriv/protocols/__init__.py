"""Sans-I/O protocol machines of the trusted services (Protocols 1-3; Protocol 4 in p4_peer).

A machine takes decoded messages and the current time ``now`` (Unix seconds, supplied by the
driver) and returns *effects*; it never touches the network or the clock:

* :class:`p3_anonymizer.Anonymizer` - location updates into the cloaker, Protocol 3 replies;
* :class:`p2_mediator.Mediator` - forwarding queries to DS without identity, relaying answers,
  DS timeouts;
* :class:`p1_mediator.P1Mediator` - cloak, then forward the region (uses both above);
* :class:`p1_mediator.TrustedCore` - the three wired together, as the service runs them.

Every machine has ``receive(message, now) -> list[Send]``, ``on_deadline(now)``,
``next_deadline()`` and ``shutdown(now)`` (answers everything pending with ``unavailable``).
"""

from __future__ import annotations

from dataclasses import dataclass

from locpriv.core.cloak.cloaker import CloakParams
from locpriv.errors import ErrorCode
from locpriv.wire.messages import ErrorReply, Message, PrivacyProfile
from locpriv.wire.topics import is_topic_name

__all__ = ["Send", "error_send", "profile_to_params"]


@dataclass(frozen=True, slots=True)
class Send:
    """Effect: publish ``message`` on ``topic`` (QoS ``qos``).

    The topic is checked here, where every published topic is built: a name a broker could
    reject as malformed (control characters, wildcards, non-ASCII) raises ``ValueError``.
    """

    topic: str
    message: Message
    qos: int = 1

    def __post_init__(self) -> None:
        if not is_topic_name(self.topic):
            raise ValueError(f"refusing to publish on a malformed topic {self.topic[:80]!r}")


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
) -> Send:
    """An :class:`~locpriv.wire.messages.ErrorReply` effect that always validates: ``reason`` and
    ``field`` (which may echo attacker-chosen keys) are cut to the wire limits and made
    printable."""
    return Send(
        reply_to,
        ErrorReply(
            correlation_id=correlation_id,
            code=code,
            reason=_printable(reason, 1024),
            field=None if field is None else _printable(field, 256),
        ),
    )


def profile_to_params(profile: PrivacyProfile | None) -> CloakParams | None:
    """Wire privacy profile to cloaking parameters (None: the operator's default)."""
    if profile is None:
        return None
    return CloakParams(
        k=profile.k,
        a_min_m2=profile.a_min_m2,
        a_max_m2=profile.a_max_m2,
        max_delay_s=profile.max_delay_s,
    )
