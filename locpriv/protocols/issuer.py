"""The Protocol 4 token issuer as a sans-I/O machine (docs/peer.md §8).

An authenticated login publishes an :class:`~locpriv.wire.messages.IssueRequest` on
``issue/{login}`` (the broker's ACL binds the last segment to the login; the payload's
``user_id`` must equal it): a blinded message (RFC 9474) for the key of ``period``. The issuer
answers an :class:`~locpriv.wire.messages.IssueAnswer` with the blind signature when

* ``period`` is the current or the next pseudonym period (a period's key signs nothing before
  or after), and
* the login has had fewer than ``per_login`` signatures under that period's key,

else an ``ErrorReply`` (``rate_limited`` or ``bad_parameters``, field ``period``). What it learns:
the login, the period and how many tokens the login took - never the pseudonym (the message is
blinded), and nothing that links the signature it returns to the request (RFC 9474 §7.3).

Keys come from ``key_for(period)`` (the service keeps one RSA key per period in a key
directory); the counts from ``counts`` and, after each signature, go to ``on_count`` (the
service persists them, so a restart does not hand out a fresh allowance).
"""

from __future__ import annotations

from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric import rsa

from locpriv.core.blind_rsa import BlindRSAError, blind_sign
from locpriv.errors import ErrorCode
from locpriv.protocols.dispatch import Check, Rejection, Route
from locpriv.protocols.effects import Send, error_send
from locpriv.protocols.p4.tokens import b64d, b64e, issuer_key, period_of
from locpriv.wire.envelope import Received
from locpriv.wire.messages import IssueAnswer, IssueRequest, IssuerKeys, Message
from locpriv.wire.topics import Topics

__all__ = ["Counts", "IssuerCore", "issuer_routes"]

Counts = dict[int, dict[str, int]]
"""Signatures issued per period and login."""


class IssuerCore:
    """Blind-signs at most ``per_login`` token requests per login and period key.

    ``period_s``: the pseudonym period (s), equal to the devices' ``pseudonym_ttl_s``.
    """

    revision = 0
    """The issuer holds no request between messages."""

    def __init__(
        self,
        key_for: Callable[[int], rsa.RSAPrivateKey],
        *,
        period_s: float,
        per_login: int = 2,
        counts: Counts | None = None,
        on_count: Callable[[Counts], None] | None = None,
    ) -> None:
        if period_s <= 0.0 or per_login < 1:
            raise ValueError("period_s must be > 0 and per_login >= 1")
        self.key_for = key_for
        self.period_s = period_s
        self.per_login = per_login
        self.counts: Counts = counts if counts is not None else {}
        self.on_count = on_count
        self.stats: dict[str, int] = {
            "issued": 0,
            "rate_limited": 0,
            "bad_period": 0,
            "dropped": 0,
        }
        self._told: set[tuple[int, str]] = set()
        """(period, login) already answered ``rate_limited``: her further requests in that
        period are dropped unanswered, so a flood costs a look-up each, not a reply each."""

    def keys_message(self, now: float) -> IssuerKeys:
        """The public keys of the current and next periods (retained on ``issuer/key``)."""
        cur = period_of(now, self.period_s)
        keys = [issuer_key(p, self.key_for(p).public_key()) for p in (cur, cur + 1)]
        return IssuerKeys(period_s=self.period_s, per_login=self.per_login, keys=keys)

    def receive(self, message: Message, now: float) -> list[Send]:
        """Answer one :class:`IssueRequest` (its ``user_id`` already checked against the
        topic)."""
        if not isinstance(message, IssueRequest):
            return []
        cur = period_of(now, self.period_s)
        if message.period not in (cur, cur + 1):
            self.stats["bad_period"] += 1
            return [self._error(message, ErrorCode.BAD_PARAMETERS, "period is not current or next")]
        per = self.counts.setdefault(message.period, {})
        used = per.get(message.user_id, 0)
        if used >= self.per_login:
            if (message.period, message.user_id) in self._told:
                self.stats["dropped"] += 1
                return []
            self._told.add((message.period, message.user_id))
            self.stats["rate_limited"] += 1
            return [
                self._error(
                    message,
                    ErrorCode.RATE_LIMITED,
                    f"at most {self.per_login} tokens per login and period",
                )
            ]
        try:
            blind_sig = blind_sign(self.key_for(message.period), b64d(message.blinded_msg))
        except (BlindRSAError, ValueError):
            return [
                error_send(
                    message.reply_to,
                    message.correlation_id,
                    ErrorCode.INVALID_FIELD,
                    "not a blinded message for this period's key",
                    "blinded_msg",
                )
            ]
        per[message.user_id] = used + 1
        for old in [p for p in self.counts if p < cur]:
            del self.counts[old]
        self._told = {(p, u) for p, u in self._told if p >= cur}
        if self.on_count is not None:
            self.on_count(self.counts)
        self.stats["issued"] += 1
        answer = IssueAnswer(
            correlation_id=message.correlation_id, period=message.period, blind_sig=b64e(blind_sig)
        )
        return [Send(message.reply_to, answer)]

    @staticmethod
    def _error(message: IssueRequest, code: ErrorCode, reason: str) -> Send:
        return error_send(message.reply_to, message.correlation_id, code, reason, "period")

    def in_flight(self) -> list[tuple[str, str]]:
        """Nothing: every request is answered at once."""
        return []

    def on_deadline(self, now: float) -> list[Send]:
        """No timers."""
        return []

    def next_deadline(self) -> float | None:
        """No timers."""
        return None

    def shutdown(self, now: float) -> list[Send]:
        """Nothing pending."""
        return []


def _check_login(topics: Topics) -> Check:
    """The payload's ``user_id`` must be the topic's login (which the ACL binds)."""

    def check(received: Received, message: Message) -> Rejection | None:
        user = topics.issue_user(received.topic)
        if user is None or getattr(message, "user_id", None) != user:
            return Rejection(ErrorCode.INVALID_FIELD, "user_id does not match the topic", "user_id")
        return None

    return check


def issuer_routes(topics: Topics) -> list[Route]:
    """The issuer's one subscription: ``issue/+``."""
    return [Route(topics.issue_filter, (IssueRequest,), check=_check_login(topics), label="issue")]
