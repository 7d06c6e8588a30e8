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

from locpriv.cloak import CloakParams
from locpriv.errors import ErrorCode
from locpriv.messages import ErrorReply, Message, PrivacyProfile

__all__ = ["Send", "error_send", "profile_to_params"]


@dataclass(frozen=True, slots=True)
class Send:
    """Effect: publish ``message`` on ``topic`` (QoS ``qos``)."""

    topic: str
    message: Message
    qos: int = 1


def error_send(
    reply_to: str,
    correlation_id: str | None,
    code: ErrorCode,
    reason: str,
    field: str | None = None,
) -> Send:
    """An :class:`~locpriv.messages.ErrorReply` effect (reason truncated to the wire limit)."""
    return Send(
        reply_to,
        ErrorReply(correlation_id=correlation_id, code=code, reason=reason[:1024], field=field),
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
