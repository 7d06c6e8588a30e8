"""The one deadline driver: runs a machine's timers on an asyncio loop.

Every sans-I/O machine with timers exposes ``next_deadline()`` (an instant in the machine's
clock, seconds, or None) and ``on_deadline(now) -> effects``. :class:`DeadlineTimer` sleeps
until the next deadline, calls ``on_deadline`` and hands the effects to ``emit``; whoever feeds
the machine a message calls :meth:`DeadlineTimer.poke` afterwards, which wakes the timer only
when the deadline moved earlier than the instant it sleeps until. A machine that raises is
logged and the timer goes on (``on_error`` is told). The service driver, the amqtt plugin, the
app client, the peer client and the fleet simulator all drive their machines with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["Clock", "DeadlineTimer", "HasDeadlines"]

log = logging.getLogger(__name__)

E = TypeVar("E")

Clock = Callable[[], float]
"""The machines' clock: Unix seconds by default (:func:`time.time`)."""


class HasDeadlines(Protocol[E]):
    """What the timer needs from a machine."""

    def next_deadline(self) -> float | None: ...

    def on_deadline(self, now: float) -> list[E]: ...


class DeadlineTimer(Generic[E]):
    """Runs ``machine.on_deadline`` whenever its next deadline has passed, until cancelled.

    ``max_sleep_s`` bounds each sleep (for machines whose deadlines can move without a poke).
    """

    def __init__(
        self,
        machine: HasDeadlines[E],
        emit: Callable[[list[E]], None],
        *,
        clock: Clock = time.time,
        max_sleep_s: float | None = None,
        on_error: Callable[[Exception], None] | None = None,
        name: str = "machine",
    ) -> None:
        self.machine = machine
        self.emit = emit
        self.clock = clock
        self.max_sleep_s = max_sleep_s
        self.on_error = on_error
        self.name = name
        self._wake = asyncio.Event()
        self._until = -math.inf
        """The instant (machine clock) the timer sleeps until; -inf while awake."""

    def poke(self) -> None:
        """The machine was fed: wake the timer if its deadline is now earlier than the sleep."""
        due = self.machine.next_deadline()
        if due is not None and due < self._until:
            self._wake.set()

    async def run(self) -> None:
        """Serve the machine's deadlines until cancelled."""
        while True:
            due = self.machine.next_deadline()
            timeout = None if due is None else max(0.0, due - self.clock())
            if self.max_sleep_s is not None:
                timeout = self.max_sleep_s if timeout is None else min(timeout, self.max_sleep_s)
            self._until = math.inf if timeout is None else self.clock() + timeout
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._until = -math.inf
            self._wake.clear()
            now = self.clock()
            due = self.machine.next_deadline()
            if due is not None and due <= now:
                try:
                    effects = self.machine.on_deadline(now)
                except Exception as exc:  # a bug in one timer must not stop the others
                    log.exception("%s failed at a deadline", self.name)
                    if self.on_error is not None:
                        self.on_error(exc)
                    await asyncio.sleep(0.1)  # a timer that keeps failing must not spin
                    continue
                self.emit(effects)
            await asyncio.sleep(0)
