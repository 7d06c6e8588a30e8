"""Protocol 1 (mediator with location anonymisation), and the trusted service's machine.

P1: the user sends her query with her exact location to the mediator; it cloaks her location
(:class:`~locpriv.protocols.p3.Anonymizer`), sends DS only the query and the region
(:class:`~locpriv.wire.messages.RegionLocation`) under a fresh correlation id - no user id, no key
attributes, no exact point - and relays DS's candidate set to the user together with the region,
its area and ``[t1, t2]`` (``candidates=True``: the client refines it with her exact location).

:class:`TrustedCore` wires the anonymizer (location updates, P3), the P1 mediator and the P2
mediator into the single machine the service runs.
"""

from __future__ import annotations

from locpriv.core.cloak.cloaker import CloakOutcome
from locpriv.errors import ErrorCode
from locpriv.protocols import Send, error_send
from locpriv.protocols.p2 import Mediator, RegionInfo
from locpriv.protocols.p3 import Anonymizer, outcome_error
from locpriv.wire.messages import (
    CloakRequest,
    ErrorReply,
    LocationUpdate,
    Message,
    QueryAnswer,
    QueryRequest,
    RegionLocation,
)

__all__ = ["P1Mediator", "TrustedCore"]


class P1Mediator:
    """Cloak with ``anonymizer``, forward the region with ``mediator`` (sans-I/O)."""

    def __init__(self, anonymizer: Anonymizer, mediator: Mediator) -> None:
        self.anonymizer = anonymizer
        self.mediator = mediator

    def receive(self, message: Message, now: float) -> list[Send]:
        """A Protocol 1 :class:`QueryRequest`."""
        if not isinstance(message, QueryRequest):
            return []
        reply_to, cid, query = message.reply_to, message.correlation_id, message.query
        mediator = self.mediator

        def then(outcome: CloakOutcome, info: RegionInfo | None, now: float) -> list[Send]:
            if info is None:
                return [outcome_error(reply_to, cid, outcome)]
            return mediator.forward(
                user_reply_to=reply_to,
                user_correlation_id=cid,
                query=query,
                location=RegionLocation(region=info.region),
                now=now,
                info=info,
            )

        def on_error(code: ErrorCode, reason: str, field: str | None) -> list[Send]:
            return [error_send(reply_to, cid, code, reason, field)]

        return self.anonymizer.cloak(
            user_id=message.user_id,
            lat=message.lat,
            lon=message.lon,
            profile=message.profile,
            now=now,
            then=then,
            on_error=on_error,
            address=(reply_to, cid),
        )


class TrustedCore:
    """The anonymizer/mediator service as one machine: P1, P2, P3 and location updates.

    ``receive`` routes by message type; a :class:`QueryRequest` goes to P1 or P2 by its
    ``protocol`` field (the driver checks it matches the topic). DS replies are
    :class:`QueryAnswer`/:class:`ErrorReply` on the mediator's reply topic.
    """

    def __init__(self, anonymizer: Anonymizer, mediator: Mediator) -> None:
        self.anonymizer = anonymizer
        self.mediator = mediator
        self.p1 = P1Mediator(anonymizer, mediator)

    def receive(self, message: Message, now: float) -> list[Send]:
        """Route one decoded message; returns the effects."""
        if isinstance(message, LocationUpdate | CloakRequest):
            return self.anonymizer.receive(message, now)
        if isinstance(message, QueryRequest):
            if message.protocol == 1:
                return self.p1.receive(message, now)
            return self.mediator.receive(message, now)
        if isinstance(message, QueryAnswer | ErrorReply):
            return self.mediator.receive(message, now)
        return []

    @property
    def pending(self) -> int:
        """Requests waiting for a cloak or for DS."""
        return self.anonymizer.pending + self.mediator.pending

    @property
    def revision(self) -> int:
        """Changes whenever :meth:`in_flight` may have."""
        return self.anonymizer.revision + self.mediator.revision

    def in_flight(self) -> list[tuple[str, str]]:
        """Requests a crash would lose: waiting cloaks, and DS queries whose token no
        restarted process could open (ephemeral key)."""
        return self.anonymizer.in_flight() + self.mediator.in_flight()

    def on_deadline(self, now: float) -> list[Send]:
        """Timers of both halves."""
        return self.anonymizer.on_deadline(now) + self.mediator.on_deadline(now)

    def next_deadline(self) -> float | None:
        """The earlier of both halves' deadlines (s), or None."""
        times = [
            t
            for t in (self.anonymizer.next_deadline(), self.mediator.next_deadline())
            if t is not None
        ]
        return min(times) if times else None

    def shutdown(self, now: float) -> list[Send]:
        """Answer everything pending with ``unavailable``."""
        return self.anonymizer.shutdown(now) + self.mediator.shutdown(now)
