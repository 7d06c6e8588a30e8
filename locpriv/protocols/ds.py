"""The location-based database server (DS) as a sans-I/O machine.

DS answers :class:`~locpriv.wire.messages.DSQuery` messages: nearest-n POIs of a category, or
POIs within a radius, at a point (exact), over a region (candidate superset) or around a
centroid with ``radius_m`` (candidate superset covering the disk); see
:mod:`locpriv.core.poi`. It never learns who asks: queries carry no identity.

Two lanes (:func:`ds_routes`): the mediator's queries arrive on ``svc/ds/query`` and must name a
``svc/reply/...`` topic; everyone else's on the public ``ds/query`` and must name a
``reply/...`` topic. With an :class:`~locpriv.protocols.seal.AnswerMac`, every answer or error
addressed to a ``svc/reply/...`` topic - so only answers to the service lane - carries DS's
``mac`` (:func:`tag_service_replies`), which the mediator checks before relaying anything.

Cost limit: before any work, :meth:`~locpriv.core.poi.POIIndex.estimate` bounds how many POIs
the answer would hold; beyond ``max_answer_pois`` the query is answered ``bad_parameters`` with
the field that makes it costly (``query.radius_m``, ``location.radius_m`` or
``location.region``), so a flood of "everything within 100 km" costs DS a table look-up each.
"""

from __future__ import annotations

from collections.abc import Iterable

from locpriv.core.poi import POIIndex
from locpriv.errors import ErrorCode
from locpriv.protocols.dispatch import Route
from locpriv.protocols.effects import Send, error_send
from locpriv.protocols.seal import AnswerMac
from locpriv.wire.messages import (
    MAX_ANSWER_POIS,
    CentroidLocation,
    DSQuery,
    ErrorReply,
    Message,
    QueryAnswer,
    RegionLocation,
    WithinQuery,
)
from locpriv.wire.topics import Topics

__all__ = ["DSCore", "costly_field", "ds_routes", "tag_service_replies"]


def costly_field(query: DSQuery) -> str:
    """The dotted field that makes ``query`` costly: what to shrink."""
    loc = query.location
    if isinstance(loc, CentroidLocation) and loc.radius_m > 0.0:
        return "location.radius_m"
    if isinstance(query.query, WithinQuery):
        return "query.radius_m"
    if isinstance(loc, RegionLocation):
        return "location.region"
    return "query.n"


def tag_service_replies(
    effects: Iterable[Send], topics: Topics, answer_mac: AnswerMac | None
) -> list[Send]:
    """``effects`` with DS's ``mac`` on every answer or error to a ``svc/reply/...`` topic
    (not yet tagged); others unchanged. Without ``answer_mac`` nothing is tagged."""
    out = list(effects)
    if answer_mac is None:
        return out
    for i, e in enumerate(out):
        msg = e.message
        if (
            isinstance(msg, QueryAnswer | ErrorReply)
            and msg.mac is None
            and topics.is_svc_reply(e.topic)
        ):
            out[i] = Send(e.topic, answer_mac.sign(msg), e.qos)
    return out


class DSCore:
    """DS as a sans-I/O machine: a :class:`DSQuery` in, a :class:`QueryAnswer` out.

    ``max_answer_pois``: the largest answer DS computes (estimated first, see the module
    docstring); ``topics`` and ``answer_mac``: tag answers to the service lane.
    """

    revision = 0
    """DS holds no request between messages."""

    def __init__(
        self,
        index: POIIndex,
        *,
        max_answer_pois: int = MAX_ANSWER_POIS,
        topics: Topics | None = None,
        answer_mac: AnswerMac | None = None,
    ) -> None:
        self.index = index
        self.max_answer_pois = min(max_answer_pois, MAX_ANSWER_POIS)
        self.topics = topics or Topics()
        self.answer_mac = answer_mac
        self.too_costly = 0
        """Queries refused by the cost estimate, before any work."""

    def in_flight(self) -> list[tuple[str, str]]:
        """Nothing: DS answers every query at once."""
        return []

    def receive(self, message: Message, now: float) -> list[Send]:
        """Answer one query (``now`` unused: DS is stateless)."""
        if not isinstance(message, DSQuery):
            return []
        return tag_service_replies(self._answer(message), self.topics, self.answer_mac)

    def _answer(self, message: DSQuery) -> list[Send]:
        limit = self.max_answer_pois
        estimate = self.index.estimate(message.query, message.location)
        if estimate > limit:
            self.too_costly += 1
            return [self._too_costly(message, f"about {estimate}")]
        pois, candidates = self.index.answer(message.query, message.location)
        if len(pois) > limit:
            # never truncate: a cut candidate set would no longer contain the exact answer
            return [self._too_costly(message, str(len(pois)))]
        answer = QueryAnswer(
            correlation_id=message.correlation_id, pois=pois, candidates=candidates
        )
        return [Send(message.reply_to, answer)]

    def _too_costly(self, message: DSQuery, matched: str) -> Send:
        field = costly_field(message)
        return error_send(
            message.reply_to,
            message.correlation_id,
            ErrorCode.BAD_PARAMETERS,
            f"too costly: the query matches {matched} POIs, more than {self.max_answer_pois};"
            f" reduce {field}",
            field,
        )

    def on_deadline(self, now: float) -> list[Send]:
        """DS has no timers."""
        return []

    def next_deadline(self) -> float | None:
        """DS has no timers."""
        return None

    def shutdown(self, now: float) -> list[Send]:
        """Nothing is pending inside DS."""
        return []


SERVICE_LANE = "svc_ds"
"""Label of the mediator's lane (``svc/ds/query``)."""
PUBLIC_LANE = "ds"
"""Label of the public lane (``ds/query``)."""


def ds_routes(topics: Topics) -> list[Route]:
    """DS's two lanes: the service lane ``svc/ds/query`` (replies only to ``svc/reply/...``)
    and the public ``ds/query`` (replies only to ``reply/...``)."""
    return [
        Route(
            topics.svc_ds_query,
            (DSQuery,),
            label=SERVICE_LANE,
            reply_ok=topics.is_svc_reply,
        ),
        Route(topics.ds_query, (DSQuery,), label=PUBLIC_LANE),
    ]
