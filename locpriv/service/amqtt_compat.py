"""Workarounds for amqtt 0.12 defects, applied to every amqtt broker locpriv runs: the
embedded one (:class:`~locpriv.service.broker.EmbeddedBroker`) and the shipped ``amqtt -c``
deployment (through :class:`~locpriv.service.amqtt_acl.LoginACLPlugin`, which it loads).

**Subscription walk.** amqtt walks its subscription table, awaiting between topics, whenever a
client connects (``Broker._handle_client_session``): a SUBSCRIBE or UNSUBSCRIBE by any other
client meanwhile raised "dictionary changed size during iteration" and dropped the connecting
client (seen in CI: a P4 peer's query timed out). :func:`guard_subscription_walk` makes plain
iteration over the table walk a snapshot of its keys. The table is assigned only in
``Broker.__init__`` (``.clear()`` keeps the instance); ``.items()`` and lookups are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class SnapshotIterDict(dict[str, Any]):
    """A dict whose plain iteration walks a snapshot of its keys."""

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().__iter__()))


def guard_subscription_walk(broker: Any) -> None:
    """Make ``broker``'s subscription table safe to walk with awaits inside (idempotent)."""
    table = getattr(broker, "_subscriptions", None)
    if isinstance(table, dict) and not isinstance(table, SnapshotIterDict):
        broker._subscriptions = SnapshotIterDict(table)
