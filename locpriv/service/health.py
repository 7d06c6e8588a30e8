"""Liveness of a service's publishing, as a pure state machine the driver feeds.

A service that cannot publish is silent but alive, and no supervisor acts on that. The driver
reports every publish it starts and how it ended, and every re-established broker connection;
:meth:`PublishHealth.verdict` says when the service should give up and exit with a non-zero
status so that its supervisor (systemd ``Restart=on-failure``) starts a fresh process:

the connection was re-established ``max_cut`` times while publishes were outstanding or
failing, without one publish confirmed in between, for ``stall_s`` seconds or more: the broker
is there, yet it drops the connection for what we send (a poisoned connection, whose MQTT
client would re-send the same packet after every reconnect, for ever). The time bound keeps a
tug of war over the service's client id, where publishes may go unconfirmed for a while, from
ending the process.

Frequent reconnections alone are *not* a failure: another client connecting with the service's
client id takes its session over (MQTT), and a service that exited on that would exit in a loop,
forgetting every accepted request each time, for as long as the other client goes on.
:meth:`PublishHealth.storm` reports ``storm_reconnects`` or more reconnections within
``window_s`` seconds instead (a log line and a metric; the service keeps serving). A broker
that is simply down is no failure either: the transport retries with backoff and publishes
wait for it. Times are monotonic seconds given by the caller.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["PublishHealth"]


@dataclass
class PublishHealth:
    """Tracks publishes and reconnections; see the module docstring."""

    max_cut: int = 3
    stall_s: float = 30.0
    storm_reconnects: int = 10
    window_s: float = 60.0
    outstanding: int = 0
    """Publishes started and not yet confirmed or failed."""
    failing: bool = False
    """The last publish that ended failed."""
    cut: int = 0
    """Reconnections while publishes were outstanding or failing, since the last success."""
    cut_since: float = 0.0
    """When the first of those reconnections happened."""
    _times: deque[float] = field(default_factory=deque)

    def started(self) -> None:
        """A publish begins."""
        self.outstanding += 1

    def finished(self, ok: bool) -> None:
        """A publish was confirmed (``ok``) or failed."""
        self.outstanding = max(0, self.outstanding - 1)
        self.failing = not ok
        if ok:
            self.cut = 0

    def reconnected(self, now: float) -> None:
        """The broker connection was re-established at ``now``."""
        self._times.append(now)
        if self.outstanding or self.failing:
            if self.cut == 0:
                self.cut_since = now
            self.cut += 1

    def recent(self, now: float) -> int:
        """Reconnections within the last ``window_s`` seconds."""
        while self._times and self._times[0] < now - self.window_s:
            self._times.popleft()
        return len(self._times)

    def storm(self, now: float) -> str | None:
        """A warning while reconnections come ``storm_reconnects`` or more per window."""
        count = self.recent(now)
        if count >= self.storm_reconnects:
            return (
                f"the broker connection was re-established {count} times within"
                f" {self.window_s:g} s: another client may be connecting with this service's"
                ' client id (docs/operations.md, "Service identities")'
            )
        return None

    def verdict(self, now: float) -> str | None:
        """Why the service should exit now, or None while it is healthy."""
        if self.cut >= self.max_cut and now - self.cut_since >= self.stall_s:
            return (
                f"the broker dropped the connection {self.cut} times in"
                f" {now - self.cut_since:.0f} s while publishes were pending and none was"
                " confirmed"
            )
        return None
