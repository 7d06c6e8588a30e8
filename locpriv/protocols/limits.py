"""Abuse limits as pure state: token buckets and per-user admission of requests (sans-I/O).

:class:`TokenBucket` is shared by the P4 responder and the trusted services.
:class:`UserLimits` admits a user's request when her bucket has a token (``requests_per_s``
refilled up to ``burst``) and she has fewer than ``max_pending_per_user`` requests waiting for
an answer; it learns that a request was answered from the replies the machine sends
(:meth:`UserLimits.settle`). A user's location updates (and leaves) pass a bucket of their own
(``updates_per_s`` up to ``update_burst``, :meth:`UserLimits.admit_update`): beyond it they are
dropped without a reply, so a flood of updates never becomes a flood of error messages.
Times are the driver's ``now``, seconds.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from locpriv.protocols.effects import Send

__all__ = ["RequestLimits", "TokenBucket", "UserLimits"]


@dataclass(slots=True)
class TokenBucket:
    """A token bucket: ``rate_per_s`` tokens per second up to ``burst``; starts full."""

    rate_per_s: float
    burst: float
    tokens: float = -1.0
    last: float = 0.0

    def take(self, now: float) -> bool:
        """Take one token at ``now`` (s); False when empty."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def full(self, now: float) -> bool:
        """True when the bucket holds ``burst`` tokens at ``now`` (it may be forgotten)."""
        self._refill(now)
        return self.tokens >= self.burst

    def _refill(self, now: float) -> None:
        if self.tokens < 0.0:
            self.tokens, self.last = self.burst, now
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.last) * self.rate_per_s)
        self.last = max(self.last, now)


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """Per-user limits: ``requests_per_s`` sustained, ``burst`` at once, at most
    ``max_pending_per_user`` unanswered; location updates ``updates_per_s`` sustained,
    ``update_burst`` at once; buckets of at most ``max_users`` users are kept."""

    requests_per_s: float = 5.0
    burst: float = 20.0
    max_pending_per_user: int = 10
    max_users: int = 100_000
    updates_per_s: float = 2.0
    update_burst: float = 20.0


class UserLimits:
    """Admission of requests by user (see the module docstring)."""

    def __init__(self, limits: RequestLimits) -> None:
        self.limits = limits
        self._buckets: dict[str, TokenBucket] = {}
        self._update_buckets: dict[str, TokenBucket] = {}
        self._pending: Counter[str] = Counter()
        self._owners: dict[tuple[str, str], list[str]] = {}
        self.updates_dropped = 0
        """Location updates and leaves refused since the start."""

    def pending(self, user: str) -> int:
        """Requests of ``user`` admitted and not yet answered."""
        return self._pending[user]

    def admit(self, user: str, now: float) -> str | None:
        """Why ``user``'s request at ``now`` is refused (a human reason), or None: admitted
        (a token is taken)."""
        lim = self.limits
        if self._pending[user] >= lim.max_pending_per_user:
            return f"more than {lim.max_pending_per_user} requests pending; wait for answers"
        bucket = self._buckets.get(user)
        if bucket is None:
            _evict(self._buckets, lim.max_users, now)
            bucket = self._buckets[user] = TokenBucket(lim.requests_per_s, lim.burst)
        if not bucket.take(now):
            return f"more than {lim.requests_per_s:g} requests/s (burst {lim.burst:g}); retry later"
        return None

    def admit_update(self, user: str, now: float) -> bool:
        """Whether a location update or leave of ``user`` at ``now`` passes her bucket."""
        lim = self.limits
        bucket = self._update_buckets.get(user)
        if bucket is None:
            _evict(self._update_buckets, lim.max_users, now)
            bucket = self._update_buckets[user] = TokenBucket(lim.updates_per_s, lim.update_burst)
        if bucket.take(now):
            return True
        self.updates_dropped += 1
        return False

    def opened(self, user: str, reply_to: str, correlation_id: str) -> None:
        """An admitted request will be answered on ``reply_to`` with ``correlation_id``."""
        self._pending[user] += 1
        self._owners.setdefault((reply_to, correlation_id), []).append(user)

    def settle(self, effects: Iterable[Send]) -> None:
        """Count the answers among ``effects`` (replies echo the request's correlation id)."""
        for e in effects:
            cid = getattr(e.message, "correlation_id", None)
            if cid is None:
                continue
            owners = self._owners.get((e.topic, cid))
            if not owners:
                continue
            user = owners.pop(0)
            if not owners:
                del self._owners[(e.topic, cid)]
            self._pending[user] -= 1
            if self._pending[user] <= 0:
                del self._pending[user]


def _evict(buckets: dict[str, TokenBucket], max_users: int, now: float) -> None:
    """Keep fewer than ``max_users`` buckets: forget full ones, then the oldest, down to 90 %
    of the cap, so that the O(n) sweep runs once per ``max_users / 10`` new users, not for
    each one (a forgotten bucket starts full again: forgetting only ever favours a user)."""
    if len(buckets) < max_users:
        return
    for user in [u for u, b in buckets.items() if b.full(now)]:
        del buckets[user]
    excess = len(buckets) - (max_users - max(1, max_users // 10))
    for user in list(itertools.islice(buckets, max(0, excess))):
        del buckets[user]
