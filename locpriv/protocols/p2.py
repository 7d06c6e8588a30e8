"""Protocol 2 (and the forwarding half of Protocol 1): the mediator between users and DS.

The mediator strips everything that identifies the user - ``user_id``, key ``attributes``, her
correlation id and reply topic - and sends DS only the query and a location (P2: her exact
point; P1: the cloaked region) with the mediator's own reply topic. The DS query's correlation
id is a *sealed token* (:class:`locpriv.protocols.seal.Sealer`: encrypted and authenticated)
holding whom
to answer, the deadline and Protocol 1's region, so DS's answer (or error) can be relayed to the
user under her correlation id by this process, by a restarted one, or by any process sharing
the key - nothing the relay needs lives only in memory. A DS that does not answer within
``ds_timeout_s`` seconds yields ``upstream_timeout`` (from the in-memory timer of the process
that forwarded the query; a DS answer after the deadline is dropped, so the user never gets
two replies); more than ``max_pending`` outstanding DS requests yield ``overloaded``.

Answers that prove their origin: with an :class:`~locpriv.protocols.seal.AnswerMac` (the answer
key DS shares) the mediator relays a DS reply only when its ``mac`` is DS's tag over exactly
that reply - its sealed token included - and before anything else is looked at: a forged,
altered or untagged reply changes no state, is never relayed, and is counted in
:attr:`Mediator.forged`. A genuine reply replayed is dropped as already answered (the token is
unique per query, and remembered until its deadline, after which it no longer opens). The
``mac`` never reaches the user.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass
from typing import Any

from locpriv.errors import ErrorCode
from locpriv.protocols.effects import Send, error_send
from locpriv.protocols.seal import AnswerMac, Sealer
from locpriv.wire.messages import (
    DSLocation,
    DSQuery,
    ErrorReply,
    Message,
    PointLocation,
    Query,
    QueryAnswer,
    QueryRequest,
    Region,
)

__all__ = ["Mediator", "RegionInfo"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RegionInfo:
    """What Protocol 1 adds to the user's answer: the region (WGS84), its area (m²), [t1, t2]
    and the number of current users inside it."""

    region: Region
    area_m2: float
    t1: float
    t2: float
    users: int

    def to_json(self) -> list[Any]:
        """Compact JSON form for a sealed token."""
        out: list[Any] = [self.region.ring, self.area_m2, self.t1, self.t2, self.users]
        return out if self.region.parts is None else [*out, self.region.parts]

    @classmethod
    def from_json(cls, data: Any) -> RegionInfo:
        """Inverse of :meth:`to_json` (raises on malformed data)."""
        ring, area_m2, t1, t2, users, *more = data
        parts = [[tuple(p) for p in r] for r in more[0]] if more else None
        return cls(Region(ring=[tuple(p) for p in ring], parts=parts), area_m2, t1, t2, users)


@dataclass(slots=True)
class _Pending:
    reply_to: str
    correlation_id: str
    deadline: float
    info: RegionInfo | None


class Mediator:
    """Forwards anonymous queries to DS and relays the answers (sans-I/O).

    ``reply_to`` is the mediator's own reply topic; ``ds_topic`` where DS listens; ``sealer``
    seals the DS correlation ids (default: an ephemeral key of this process); ``answer_mac``
    checks DS's replies (None: relayed unchecked - a deployment without an answer key).
    """

    def __init__(
        self,
        *,
        ds_topic: str,
        reply_to: str,
        ds_timeout_s: float = 5.0,
        max_pending: int = 10_000,
        sealer: Sealer | None = None,
        answer_mac: AnswerMac | None = None,
    ) -> None:
        self.ds_topic = ds_topic
        self.answer_mac = answer_mac
        self.forged = 0
        """DS replies dropped because their ``mac`` did not check (forged, altered, untagged)."""
        self.reply_to = reply_to
        self.ds_timeout_s = ds_timeout_s
        self.max_pending = max_pending
        self.sealer = sealer or Sealer.generate()
        self._pending: dict[str, _Pending] = {}
        self._heap: list[tuple[float, str]] = []
        self._relayed: dict[str, float] = {}
        """Tokens already answered, until their deadline (DS may deliver an answer twice)."""
        self.revision = 0

    @property
    def pending(self) -> int:
        """DS requests outstanding."""
        return len(self._pending)

    def in_flight(self) -> list[tuple[str, str]]:
        """Requests only this process could answer after a crash: none when the sealing key
        is shared (a restarted mediator relays DS's answer), else every pending one."""
        if not self.sealer.ephemeral:
            return []
        return [(p.reply_to, p.correlation_id) for p in self._pending.values()]

    def forward(
        self,
        *,
        user_reply_to: str,
        user_correlation_id: str,
        query: Query,
        location: DSLocation,
        now: float,
        info: RegionInfo | None = None,
    ) -> list[Send]:
        """Send ``query`` at ``location`` to DS under a fresh id; remember whom to answer."""
        if len(self._pending) >= self.max_pending:
            return [
                error_send(
                    user_reply_to,
                    user_correlation_id,
                    ErrorCode.OVERLOADED,
                    "too many queries waiting for the database server; retry later",
                )
            ]
        deadline = now + self.ds_timeout_s
        cid = self.sealer.seal(
            {
                "r": user_reply_to,
                "c": user_correlation_id,
                "d": deadline,
                "i": info.to_json() if info is not None else None,
            }
        )
        self._pending[cid] = _Pending(user_reply_to, user_correlation_id, deadline, info)
        self.revision += 1
        heapq.heappush(self._heap, (deadline, cid))
        ds_query = DSQuery(
            correlation_id=cid, reply_to=self.reply_to, query=query, location=location
        )
        return [Send(self.ds_topic, ds_query)]

    def receive(self, message: Message, now: float) -> list[Send]:
        """A Protocol 2 :class:`QueryRequest`, or DS's :class:`QueryAnswer`/:class:`ErrorReply`."""
        if isinstance(message, QueryRequest):
            return self.forward(
                user_reply_to=message.reply_to,
                user_correlation_id=message.correlation_id,
                query=message.query,
                location=PointLocation(lat=message.lat, lon=message.lon),
                now=now,
            )
        if isinstance(message, QueryAnswer | ErrorReply):
            return self._relay(message, now)
        return []

    def _unseal(self, cid: str, now: float) -> _Pending | None:
        """Whom to answer for DS correlation id ``cid``: from memory, or from the sealed token
        (an answer to a query this process did not send, or sent before a restart)."""
        pend = self._pending.pop(cid, None)
        if pend is not None:
            self.revision += 1
            return pend
        if cid in self._relayed:
            return None
        obj = self.sealer.open(cid)
        if obj is None:
            return None
        try:
            deadline = float(obj["d"])
            info = RegionInfo.from_json(obj["i"]) if obj.get("i") is not None else None
            pend = _Pending(str(obj["r"]), str(obj["c"]), deadline, info)
        except (KeyError, TypeError, ValueError):  # sealed by us, so only a version skew
            log.warning("DS reply with an unreadable sealed token dropped")
            return None
        return pend if now <= deadline else None

    def _relay(self, message: QueryAnswer | ErrorReply, now: float) -> list[Send]:
        mac = self.answer_mac
        if mac is not None and not mac.verify(message):
            self.forged += 1
            if self.forged == 1 or self.forged % 1000 == 0:
                log.warning("DS reply without a valid mac dropped (%d so far)", self.forged)
            return []
        cid = message.correlation_id
        pend = None if cid is None else self._unseal(cid, now)
        if cid is None or pend is None:
            log.debug("DS reply for an unknown, answered or expired request dropped")
            return []
        self._relayed[cid] = pend.deadline
        heapq.heappush(self._heap, (pend.deadline, cid))
        if isinstance(message, ErrorReply):
            return [
                error_send(
                    pend.reply_to,
                    pend.correlation_id,
                    message.code,
                    f"database server: {message.reason}",
                    message.field,
                )
            ]
        info = pend.info
        answer = QueryAnswer(
            correlation_id=pend.correlation_id,
            pois=message.pois,
            candidates=message.candidates or info is not None,
            region=info.region if info else None,
            area_m2=info.area_m2 if info else None,
            users=info.users if info else None,
            t1=info.t1 if info else None,
            t2=info.t2 if info else None,
        )
        return [Send(pend.reply_to, answer)]

    def on_deadline(self, now: float) -> list[Send]:
        """Answer ``upstream_timeout`` for DS requests older than ``ds_timeout_s``."""
        out: list[Send] = []
        while self._heap and self._heap[0][0] <= now:
            _, cid = heapq.heappop(self._heap)
            self._relayed.pop(cid, None)
            pend = self._pending.pop(cid, None)
            if pend is not None:
                self.revision += 1
                out.append(
                    error_send(
                        pend.reply_to,
                        pend.correlation_id,
                        ErrorCode.UPSTREAM_TIMEOUT,
                        f"the database server did not answer within {self.ds_timeout_s:g} s",
                    )
                )
        return out

    def next_deadline(self) -> float | None:
        """When :meth:`on_deadline` has work next (s), or None."""
        while (
            self._heap
            and self._heap[0][1] not in self._pending
            and self._heap[0][1] not in self._relayed
        ):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def shutdown(self, now: float) -> list[Send]:
        """Answer every outstanding request with ``unavailable``."""
        out = [
            error_send(
                p.reply_to, p.correlation_id, ErrorCode.UNAVAILABLE, "the mediator is shutting down"
            )
            for p in self._pending.values()
        ]
        self._pending.clear()
        self._relayed.clear()
        self._heap.clear()
        self.revision += 1
        return out
