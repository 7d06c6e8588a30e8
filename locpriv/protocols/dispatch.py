"""Raw messages to a sans-I/O machine: route by topic, decode, check, reject (no I/O).

:class:`Dispatcher` is shared by every driver of a service machine: the asyncio
:class:`~locpriv.service.driver.ServiceDriver`, the amqtt broker plugin and the virtual-clock
simulator. It never raises: a message that cannot be decoded, or fails a check, gets an
:class:`~locpriv.wire.messages.ErrorReply` on its ``reply_to`` when a valid reply topic can be
read from the raw payload (:func:`salvage_reply`), else on ``errors/{service}``; a machine that
raises is answered ``internal`` and logged (without coordinates or ids).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

from pydantic_core import from_json

from locpriv.errors import DecodeError, ErrorCode
from locpriv.protocols.effects import Send, error_send
from locpriv.wire.envelope import Received
from locpriv.wire.messages import MAX_CORRELATION_ID, ErrorDetails, Message, decode
from locpriv.wire.topics import Topics, matches

__all__ = ["Check", "Dispatcher", "Machine", "Rejection", "Route", "salvage_reply"]

log = logging.getLogger(__name__)

_CORRELATION = re.compile(rf"^[A-Za-z0-9_.:-]{{1,{MAX_CORRELATION_ID}}}$")
_SALVAGE_MAX_BYTES: Final = 4 * 1024 * 1024
_SCAN_MAX_BYTES: Final = 2048
"""How much of a payload that is not JSON :func:`salvage_reply` scans for its members: enough
for both (``reply_to`` ≤ 256, ``correlation_id`` ≤ 1024 characters), little enough that a
hostile payload costs about a millisecond."""
_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]:,]')


class Rejection(NamedTuple):
    """Why a route's check rejects a message: the error reply's code, reason, field, details."""

    code: ErrorCode
    reason: str
    field: str | None = None
    details: ErrorDetails | None = None


Check = Callable[[Received, Message], Rejection | None]
"""A route's extra check of a decoded message: a :class:`Rejection` to reject it."""


class Machine(Protocol):
    """What a driver needs from a sans-I/O machine.

    ``in_flight()`` lists ``(reply_to, correlation_id)`` of the accepted requests the machine
    holds that no other party will answer after a crash (the driver journals them; see
    :class:`locpriv.service.journal.Journal`); ``revision`` changes whenever that list may have.
    """

    @property
    def revision(self) -> int: ...

    def receive(self, message: Message, now: float) -> list[Send]: ...

    def on_deadline(self, now: float) -> list[Send]: ...

    def next_deadline(self) -> float | None: ...

    def shutdown(self, now: float) -> list[Send]: ...

    def in_flight(self) -> list[tuple[str, str]]: ...


@dataclass(frozen=True, slots=True)
class Route:
    """A subscription: messages on ``topic_filter`` must be one of ``expect``.

    ``answer_errors``: answer rejected messages (on ``reply_to`` or the error topic) or only
    log them (DS replies). ``max_bytes`` overrides the payload limit (DS replies are larger).
    ``overload_errors``: also answer queue overflow and shutdown (requests; not location
    updates, which are dropped and counted). ``check`` may reject a decoded message with
    ``(code, reason, field)``. ``subscriptions``: the filters a driver subscribes to for this
    route when narrower than ``topic_filter`` (a shard's tiles); empty: ``topic_filter``.
    ``admit(user, now)``: a rate limit by the topic's last segment (the user, which the
    broker's ACL binds to the login), asked before anything is decoded or checked; a message
    it refuses is dropped and counted in ``stats["dropped"]``.
    """

    topic_filter: str
    expect: tuple[type[Message], ...]
    answer_errors: bool = True
    shareable: bool = True
    overload_errors: bool = True
    max_bytes: int | None = None
    check: Check | None = None
    subscriptions: tuple[str, ...] = ()
    admit: Callable[[str, float], bool] | None = None
    label: str = ""
    """Short name of what arrives here (``location``, ``p1``, ``ds``, ...), for metrics."""
    reply_ok: Callable[[str], bool] | None = None
    """Which ``reply_to`` topics this route's requests may name (None: the public reply
    namespace, :meth:`Topics.is_reply`; DS's service lane: :meth:`Topics.is_svc_reply`)."""

    @property
    def filters(self) -> tuple[str, ...]:
        """What a driver subscribes to for this route."""
        return self.subscriptions or (self.topic_filter,)


def salvage_reply(
    payload: bytes, topics: Topics, reply_ok: Callable[[str], bool] | None = None
) -> tuple[str | None, str | None]:
    """``(reply_to, correlation_id)`` read from a rejected raw payload when they are usable:
    ``reply_to`` only if it is one of ``topics``' reply topics (:meth:`Topics.is_reply`, or
    ``reply_ok`` when given: a route's own namespace).

    A payload that is not JSON (truncated, invalid UTF-8 or a bad number after the address, too
    deeply nested) is scanned for its top-level ``reply_to`` and ``correlation_id`` string
    members (:func:`_scan_members`), so that its sender still gets the error."""
    if len(payload) > _SALVAGE_MAX_BYTES:
        return None, None
    try:
        obj: Any = from_json(payload, allow_inf_nan=True)
    except ValueError:
        obj = _scan_members(payload[:_SCAN_MAX_BYTES])
    if not isinstance(obj, dict):
        return None, None
    reply_to = obj.get("reply_to")
    cid = obj.get("correlation_id")
    ok_topic = isinstance(reply_to, str) and (reply_ok or topics.is_reply)(reply_to)
    ok_cid = isinstance(cid, str) and _CORRELATION.fullmatch(cid) is not None
    return (reply_to if ok_topic else None), (cid if ok_cid else None)


def _scan_members(raw: bytes) -> dict[str, str] | None:
    """Top-level members ``"reply_to"`` and ``"correlation_id"`` of a broken JSON object whose
    values are plain strings (no escapes: neither may hold one), from the tokens before the
    first nested object or array (or the end of ``raw``). None unless ``raw`` starts as an
    object; a member given twice is dropped."""
    wanted = (b'"reply_to"', b'"correlation_id"')
    found: dict[str, str] = {}
    twice: set[str] = set()
    prev: list[bytes] = []  # the last three top-level tokens: key, ':', value
    pos = 0
    for i, m in enumerate(_TOKEN.finditer(raw)):
        gap = raw[pos : m.start()]
        pos = m.end()
        tok = m.group()
        if i == 0:
            if tok != b"{" or gap.strip():
                return None
            continue
        if tok in (b"{", b"[", b"}", b"]"):
            break  # nested values (or the end): the address comes first, or not at all
        prev = [*prev[-2:], tok]
        if tok.startswith(b'"') and len(prev) == 3 and prev[1] == b":" and prev[0] in wanted:
            key = prev[0][1:-1].decode()
            if key in found:
                twice.add(key)
            if b"\\" not in tok and not gap.strip():
                found[key] = tok[1:-1].decode("ascii", "replace")
    if pos == 0:
        return None
    return {k: v for k, v in found.items() if k not in twice}


class Dispatcher:
    """Routes raw messages to a machine: decode, check, reject with an error reply (sans-I/O).

    Shared by :class:`ServiceDriver` and the amqtt plugin. ``stats`` counts ``rejected``.
    """

    def __init__(
        self,
        *,
        name: str,
        machine: Machine,
        routes: list[Route],
        topics: Topics,
        max_payload: int,
        stats: dict[str, int] | None = None,
    ) -> None:
        self.name = name
        self.machine = machine
        self.routes = routes
        self.topics = topics
        self.max_payload = max_payload
        self.stats = stats if stats is not None else {"rejected": 0}
        self.stats.setdefault("rejected", 0)
        self.stats.setdefault("dropped", 0)
        self._route_cache: dict[str, Route | None] = {}

    def route(self, topic: str) -> Route | None:
        """The first route whose filter matches ``topic`` (memoised per topic)."""
        try:
            return self._route_cache[topic]
        except KeyError:
            pass
        found = next((r for r in self.routes if matches(r.topic_filter, topic)), None)
        if len(self._route_cache) >= 100_000:
            self._route_cache.clear()
        self._route_cache[topic] = found
        return found

    def reject(
        self,
        received: Received,
        code: ErrorCode,
        reason: str,
        field: str | None = None,
        details: ErrorDetails | None = None,
    ) -> Send:
        """An error reply to the raw message's ``reply_to`` if readable, else the error topic."""
        self.stats["rejected"] += 1
        route = self.route(received.topic)
        reply_ok = route.reply_ok if route is not None else None
        reply_to, cid = salvage_reply(received.payload, self.topics, reply_ok)
        target = reply_to or self.topics.errors(self.name)
        return error_send(target, cid, code, reason, field, details=details)

    def _bad_reply_to(self, route: Route, message: Message) -> list[Send]:
        """A request whose ``reply_to`` lies outside the reply namespace: answered on the
        error topic, never on the topic it named."""
        self.stats["rejected"] += 1
        if not route.answer_errors:
            return []
        cid = getattr(message, "correlation_id", None)
        reason = f"reply_to must be {self.topics.reply_prefix}<one segment of [A-Za-z0-9_.:@-]>"
        return [
            error_send(
                self.topics.errors(self.name),
                cid,
                ErrorCode.INVALID_FIELD,
                reason,
                "reply_to",
            )
        ]

    def handle(self, received: Received, now: float) -> list[Send]:
        """Decode ``received`` for its route and run the machine; never raises."""
        route = self.route(received.topic)
        if route is None:
            return []
        if route.admit is not None:
            # the last segment, whatever the rest: the one the ACL binds, even on a bad tile
            user = received.topic.rpartition("/")[2]
            if not route.admit(user, now):
                self.stats["dropped"] += 1
                return []
        try:
            limit = route.max_bytes or self.max_payload
            message = decode(received.payload, expect=route.expect, max_bytes=limit)
        except DecodeError as exc:
            if route.answer_errors:
                return [self.reject(received, exc.code, exc.reason, exc.field)]
            log.info("%s: rejected message on a no-reply topic: %s", self.name, exc.code)
            return []
        reply_to = getattr(message, "reply_to", None)
        reply_ok = route.reply_ok or self.topics.is_reply
        if isinstance(reply_to, str) and not reply_ok(reply_to):
            return self._bad_reply_to(route, message)
        if route.check is not None:
            problem = route.check(received, message)
            if problem is not None:
                return [self.reject(received, *problem)] if route.answer_errors else []
        try:
            return self.machine.receive(message, now)
        except Exception:
            log.exception("%s: machine failed on a %s", self.name, type(message).__name__)
            if route.answer_errors:
                return [self.reject(received, ErrorCode.INTERNAL, "internal error; see the log")]
            return []
