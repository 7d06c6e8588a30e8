"""A synchronous in-process broker between Protocol 4 machines (sans-I/O runs and tests).

:class:`SyncBus` carries out a machine's effects at once and in order, with everything they
cause: ``Subscribe``/``Unsubscribe`` change that machine's topic filters, ``Done``/``Failed`` are
handed to :meth:`SyncBus.settle`, and each ``Send`` goes through the wire format and is routed by
:meth:`SyncBus.route` (by default to every machine with a matching filter). Subclasses add the
services the machines talk to (DS, the token issuer, an attacker's tap) by overriding
:meth:`~SyncBus.route`. Times are the caller's ``now`` (seconds); nothing here waits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from locpriv.protocols.effects import Done, Effect, Failed, Send, Subscribe, Unsubscribe
from locpriv.protocols.p4.machine import PeerMachine
from locpriv.protocols.p4.types import PeerAnswer
from locpriv.wire.messages import Message, decode, encode
from locpriv.wire.topics import Topics, matches


@dataclass
class SyncBus:
    """Machines (index ``i`` in :attr:`machines`) and their topic filters (:attr:`subs`)."""

    topics: Topics = field(default_factory=Topics)
    machines: list[PeerMachine] = field(default_factory=list)
    subs: list[set[str]] = field(default_factory=list)

    def connect(self, machine: PeerMachine, filters: Iterable[str] = ()) -> int:
        """Attach ``machine`` subscribed to ``filters``; its index."""
        self.machines.append(machine)
        self.subs.append(set(filters))
        return len(self.machines) - 1

    def apply(self, who: int, effects: list[Effect], now: float) -> None:
        """Carry out ``effects`` of machine ``who`` and everything they cause."""
        work: deque[tuple[int, Effect]] = deque((who, e) for e in effects)
        while work:
            i, e = work.popleft()
            if isinstance(e, Subscribe):
                self.subs[i].add(e.topic)
            elif isinstance(e, Unsubscribe):
                self.subs[i].discard(e.topic)
            elif isinstance(e, Done | Failed):
                self.settle(e)
            elif isinstance(e, Send):
                work.extend(self.route(e, now))

    def run_until(self, t_end: float, start: float) -> float:
        """Serve the machines' deadlines from ``start`` up to ``t_end`` (seconds); the time of
        the last one served (``start`` if none)."""
        now = start
        while True:
            due = [d for m in self.machines if (d := m.next_deadline()) is not None]
            if not due or min(due) > t_end:
                return now
            now = min(due)
            for i, m in enumerate(self.machines):
                d = m.next_deadline()
                if d is not None and d <= now:
                    self.apply(i, m.on_deadline(now), now)

    def settle(self, outcome: Done[PeerAnswer] | Failed) -> None:
        """A machine's request ended with ``outcome``; subclasses record it."""
        raise NotImplementedError

    def route(self, send: Send, now: float) -> list[tuple[int, Effect]]:
        """The effects ``send`` causes, each with the index of the machine it is for (-1: a
        service's own sends, routed in turn). By default: delivered to the subscribers."""
        return self.deliver(send.topic, decode(encode(send.message)), now)

    def deliver(self, topic: str, msg: Message, now: float) -> list[tuple[int, Effect]]:
        """``msg`` received by every machine with a filter matching ``topic``, in order."""
        out: list[tuple[int, Effect]] = []
        for j, subs in enumerate(self.subs):
            if any(matches(f, topic) for f in subs):
                out += [(j, x) for x in self.machines[j].receive(msg, now)]
        return out
