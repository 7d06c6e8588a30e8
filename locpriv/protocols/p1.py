"""Protocol 1 (mediator with location anonymisation), and the trusted service's machine.

P1: the user sends her query with her exact location to the mediator; it cloaks her location
(:class:`~locpriv.protocols.p3.Anonymizer`), sends DS only the query and the region
(:class:`~locpriv.wire.messages.RegionLocation`) under a fresh correlation id - no user id, no key
attributes, no exact point - and relays DS's candidate set to the user together with the region,
its area and ``[t1, t2]`` (``candidates=True``: the client refines it with her exact location).

"""

from __future__ import annotations

from locpriv.core.cloak.cloaker import CloakOutcome
from locpriv.protocols.effects import Send
from locpriv.protocols.p2 import Mediator, RegionInfo
from locpriv.protocols.p3 import Anonymizer, outcome_error
from locpriv.wire.messages import (
    Message,
    QueryRequest,
    RegionLocation,
)

__all__ = ["P1Mediator"]


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

        return self.anonymizer.cloak_for(message, now, then)
