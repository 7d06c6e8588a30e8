"""Weighted fair scheduling between request lanes, with a bound on waiting time (sans-I/O).

DS takes the mediator's queries (``svc/ds/query``) and everyone else's (``ds/query``) in two
lanes. :class:`Lanes` serves them by weighted round robin: in each round a lane gets up to its
``weight`` turns while it has work, an empty lane gives its turns away (work conserving), so an
app flood of the public lane delays a service query by at most one public query's work, and a
service surge still leaves the public lane ``1 / (weights + 1)`` of the turns. A lane is FIFO;
an item that has waited longer than ``max_wait_s`` is taken out by :meth:`Lanes.expired` (the
driver answers it ``overloaded``): the bound is on waiting *time*, not only on length, so a
backlog of slow work never turns into answers nobody waits for any more. Times are the
driver's monotonic ``now``, seconds.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

__all__ = ["Lanes"]

T = TypeVar("T")


class Lanes(Generic[T]):
    """FIFO lanes in priority order (``weights``: lane -> turns per round, the first lane
    first), each holding at most ``max_len`` items, each item at most ``max_wait_s``."""

    def __init__(self, weights: dict[str, int], *, max_wait_s: float, max_len: int) -> None:
        if not weights or min(weights.values()) < 1:
            raise ValueError("lanes need at least one lane, every weight >= 1")
        self.weights = dict(weights)
        self.max_wait_s = max_wait_s
        self.max_len = max_len
        self._queues: dict[str, deque[tuple[float, T]]] = {name: deque() for name in weights}
        self._order = list(weights)
        self._turn = 0
        self._left = self.weights[self._order[0]]
        self.served: dict[str, int] = dict.fromkeys(weights, 0)
        """Items handed out by :meth:`pop`, by lane."""

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def size(self, lane: str) -> int:
        """Items waiting in ``lane``."""
        return len(self._queues[lane])

    def push(self, lane: str, item: T, now: float) -> bool:
        """Queue ``item`` at the end of ``lane``; False (not queued) when the lane is full."""
        queue = self._queues[lane]
        if len(queue) >= self.max_len:
            return False
        queue.append((now, item))
        return True

    def oldest_wait(self, lane: str, now: float) -> float:
        """How long the head of ``lane`` has waited (s); 0 when empty."""
        queue = self._queues[lane]
        return now - queue[0][0] if queue else 0.0

    def expired(self, now: float) -> list[tuple[str, T]]:
        """Take out every item that has waited more than ``max_wait_s``, oldest first."""
        out: list[tuple[str, T]] = []
        limit = now - self.max_wait_s
        for name, queue in self._queues.items():
            while queue and queue[0][0] < limit:
                out.append((name, queue.popleft()[1]))
        return out

    def pop(self) -> tuple[str, T] | None:
        """The next item by weighted round robin, or None when every lane is empty."""
        for _ in range(len(self._order) + 1):
            name = self._order[self._turn]
            queue = self._queues[name]
            if queue and self._left > 0:
                self._left -= 1
                self.served[name] += 1
                return name, queue.popleft()[1]
            self._turn = (self._turn + 1) % len(self._order)
            self._left = self.weights[self._order[self._turn]]
        return None

    def drain(self) -> list[tuple[str, T]]:
        """Take out everything (shutdown), lane by lane."""
        out = [(name, item) for name, queue in self._queues.items() for _, item in queue]
        for queue in self._queues.values():
            queue.clear()
        return out
