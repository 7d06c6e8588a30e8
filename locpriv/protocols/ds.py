"""The location-based database server (DS) as a sans-I/O machine.

DS answers :class:`~locpriv.wire.messages.DSQuery` messages: nearest-n POIs of a category, or
POIs within a radius, at a point (exact), over a region (candidate superset) or around a
centroid with ``radius_m`` (candidate superset covering the disk); see
:mod:`locpriv.core.poi`. It never learns who asks: queries carry no identity.
"""

from __future__ import annotations

from locpriv.core.poi import POIIndex
from locpriv.errors import ErrorCode
from locpriv.protocols.dispatch import Route
from locpriv.protocols.effects import Send, error_send
from locpriv.wire.messages import MAX_ANSWER_POIS, DSQuery, Message, QueryAnswer
from locpriv.wire.topics import Topics

__all__ = ["DSCore", "ds_routes"]


class DSCore:
    """DS as a sans-I/O machine: a :class:`DSQuery` in, a :class:`QueryAnswer` out."""

    revision = 0
    """DS holds no request between messages."""

    def __init__(self, index: POIIndex) -> None:
        self.index = index

    def in_flight(self) -> list[tuple[str, str]]:
        """Nothing: DS answers every query at once."""
        return []

    def receive(self, message: Message, now: float) -> list[Send]:
        """Answer one query (``now`` unused: DS is stateless)."""
        if not isinstance(message, DSQuery):
            return []
        pois, candidates = self.index.answer(message.query, message.location)
        if len(pois) > MAX_ANSWER_POIS:
            # never truncate: a cut candidate set would no longer contain the exact answer
            return [
                error_send(
                    message.reply_to,
                    message.correlation_id,
                    ErrorCode.BAD_PARAMETERS,
                    f"the query matches {len(pois)} POIs, more than {MAX_ANSWER_POIS}; "
                    "use a smaller region or radius",
                    "location" if candidates else "query",
                )
            ]
        answer = QueryAnswer(
            correlation_id=message.correlation_id, pois=pois, candidates=candidates
        )
        return [Send(message.reply_to, answer)]

    def on_deadline(self, now: float) -> list[Send]:
        """DS has no timers."""
        return []

    def next_deadline(self) -> float | None:
        """DS has no timers."""
        return None

    def shutdown(self, now: float) -> list[Send]:
        """Nothing is pending inside DS."""
        return []


def ds_routes(topics: Topics) -> list[Route]:
    """DS's one subscription: ``ds/query``."""
    return [Route(topics.ds_query, (DSQuery,), label="ds")]
