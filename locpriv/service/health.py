"""Liveness of a service's publishing, as a pure state machine the driver feeds.

A service that cannot publish is silent but alive, and no supervisor acts on that. The driver
reports every publish it starts and how it ended, and every re-established broker connection;
:meth:`PublishHealth.verdict` says when the service should give up and exit with a non-zero
status so that its supervisor (systemd ``Restart=on-failure``) starts a fresh process:

* the connection was re-established ``max_cut`` times while publishes were outstanding or
  failing, without one publish confirmed in between: the broker is there, yet it drops the
  connection for what we send (a poisoned connection, whose MQTT client would re-send the same
  packet after every reconnect, for ever), or
* the connection was re-established ``max_reconnects`` times within ``window_s`` seconds.

A broker that is simply down is not a failure: nothing reconnects, the transport keeps trying
with backoff and publishes wait for it. Times are monotonic seconds given by the caller.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["PublishHealth"]


@dataclass
class PublishHealth:
    """Tracks publishes and reconnections; see the module docstring."""

    max_cut: int = 3
    max_reconnects: int = 10
    window_s: float = 60.0
    outstanding: int = 0
    """Publishes started and not yet confirmed or failed."""
    failing: bool = False
    """The last publish that ended failed."""
    cut: int = 0
    """Reconnections while publishes were outstanding or failing, since the last success."""
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
            self.cut += 1

    def verdict(self, now: float) -> str | None:
        """Why the service should exit now, or None while it is healthy."""
        while self._times and self._times[0] < now - self.window_s:
            self._times.popleft()
        if self.cut >= self.max_cut:
            return (
                f"the broker dropped the connection {self.cut} times while publishes were"
                " pending and none was confirmed"
            )
        if len(self._times) >= self.max_reconnects:
            return (
                f"the broker connection was re-established {len(self._times)} times within"
                f" {self.window_s:g} s"
            )
        return None
