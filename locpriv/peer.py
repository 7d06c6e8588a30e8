"""Protocol 4 on a device: :class:`PeerClient`, a thin asyncio driver of
:class:`~locpriv.protocols.p4.machine.PeerMachine` over a :mod:`locpriv.transport`.

>>> async def main() -> None:  # doctest: +SKIP
...     async with PeerClient("mqtt://broker:1883", user_id="alice", sigma_m=100.0, k=5,
...                           a_min_m2=20_000.0, a_max_m2=1_000_000.0) as p:
...         p.set_location(lon=2.17, lat=41.39)
...         answer = await p.query(NearestQuery(category="pharmacy", n=3))
...         print(answer.pois, answer.group_size, answer.area_m2, answer.rounds)

While the client is open it also answers neighbours' requests (the responder, under
``config.responder``). Each query's peer replies arrive on a fresh topic under its discovery
cell (``peer/cell/{cell}/r/{random}``), read on the main connection: the request names that
topic to every device of the cell, so no connection may be bound to it (a client id named in a
request could be taken over by any login). DS's answer and the issuer's come on fresh
``reply/p4-{random}`` topics read on short-lived connections of their own whose client ids are
those topics' last segments (:class:`~locpriv.transport.endpoints.ReplyEndpoints`), as a broker
ACL that binds reply topics to client ids requires; only DS (or the issuer) sees them.
``password`` and ``ca_file`` (PEM, for ``mqtts``) apply to every connection.
``user_id`` never leaves the device: the MQTT client id, reply topics,
correlation ids and the requester/responder pseudonym are random. Times are Unix seconds from
``clock`` (default :func:`time.time`); noise from ``rng`` (default: seeded from OS entropy).
``secret`` (32 random bytes, e.g. ``secrets.token_bytes(32)``) keys the place noise of the
static-device defence: an app should create it once and keep it in the device's key store, so
that a place keeps one perturbed point across restarts (a new secret is a new set of points,
which an adversary could average with the old ones).

Pseudonym tokens (docs/peer.md §8): the client subscribes to the issuer's retained keys and,
with a ``login`` (default: the user name in ``url``, the account the broker authenticates),
asks the issuer for a token for each period's pseudonym on ``issue/{login}``; its requests and
replies then carry it. Once a key is known (or with ``require_tokens=True``) it counts only
replies from certified pseudonyms.

Errors from :meth:`PeerClient.query`: :class:`~locpriv.errors.GroupInfeasible` (no group after
``max_rounds``, the reason in the message), :class:`~locpriv.errors.RemoteError` (DS answered
with an error), :class:`~locpriv.errors.RequestTimeout` (DS silent, or the caller's
``timeout_s``), :class:`~locpriv.errors.TransportError` (broker gone).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import numpy as np

from locpriv.core.grouping import warm_up
from locpriv.core.noise import GaussianMechanism, Mechanism
from locpriv.errors import (
    ConfigError,
    DecodeError,
    LocalProtocolError,
    RequestTimeout,
)
from locpriv.protocols.p4.machine import PeerMachine
from locpriv.protocols.p4.types import PeerAnswer, PeerConfig
from locpriv.transport import Received, ReplyEndpoints, Transport, connect, new_client_id
from locpriv.transport.host import MachineHost
from locpriv.wire.messages import REPLY_MAX_BYTES, Query, decode
from locpriv.wire.topics import Topics

__all__ = ["PeerAnswer", "PeerClient", "PeerConfig"]

log = logging.getLogger(__name__)


class PeerClient:
    """A device speaking Protocol 4; an async context manager.

    Give either ``config`` or ``k``/``a_min_m2``/``a_max_m2`` with ``sigma_m`` (Gaussian, metres)
    or ``mechanism``; further :class:`PeerConfig` fields may be passed as keywords.
    """

    def __init__(
        self,
        url: str,
        *,
        user_id: str,
        sigma_m: float | None = None,
        k: int | None = None,
        a_min_m2: float | None = None,
        a_max_m2: float | None = None,
        mechanism: Mechanism | None = None,
        config: PeerConfig | None = None,
        topics: Topics | None = None,
        rng: np.random.Generator | None = None,
        clock: Callable[[], float] = time.time,
        transport: Transport | None = None,
        secret: bytes | None = None,
        password: str | None = None,
        ca_file: str | None = None,
        login: str | None = None,
        **options: Any,
    ) -> None:
        if config is None:
            if k is None or a_min_m2 is None or a_max_m2 is None:
                raise ConfigError("give config, or k, a_min_m2 and a_max_m2")
            if mechanism is None:
                if sigma_m is None:
                    raise ConfigError("give sigma_m or mechanism")
                mechanism = GaussianMechanism(sigma_m)
            config = PeerConfig(
                k=k, a_min_m2=a_min_m2, a_max_m2=a_max_m2, mechanism=mechanism, **options
            )
        elif sigma_m is not None or mechanism is not None or options:
            raise ConfigError("give either config or the individual parameters, not both")
        self.user_id = user_id
        self.config = config
        self.clock = clock
        self.machine = PeerMachine(
            config,
            rng=rng if rng is not None else np.random.default_rng(),
            topics=topics,
            secret=secret,
            login=login if login is not None else urlsplit(url).username,
        )

        def open_connection(cid: str) -> Transport:
            return connect(url, client_id=cid, password=password, ca_file=ca_file)

        self._open_connection = open_connection
        self._rotates = transport is None and config.rotate_connection
        """Reconnect under a fresh client id when the pseudonym changes (own transports)."""
        self._connection_pseudonym: str | None = None
        self.rotations = 0
        """Connections replaced so far (one per pseudonym period while the device is used)."""
        self._host = MachineHost(
            self.machine,
            transport or open_connection(new_client_id("p4")),
            topics=self.machine.topics,
            opener=open_connection,
            deliver=self._handle,
            clock=clock,
            name="p4",
            on_timer_error=self._timer_failed,
        )
        self._open = False

    @property
    def transport(self) -> Transport:
        """The main connection (replaced when the pseudonym changes)."""
        return self._host.transport

    @property
    def endpoints(self) -> ReplyEndpoints:
        """The connections of fresh reply topics."""
        return self._host.endpoints

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        warm_up()
        await self._host.start([(t, 1) for t in self.machine.subscriptions])
        self._open = True
        self._connection_pseudonym = self.machine.pseudonym(self.clock())
        log.debug("peer client %s open", self.user_id)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._open = False
        await self._host.stop(RequestTimeout("peer client closed"), (exc_type, exc, tb))

    # ------------------------------------------------------------------- public

    @property
    def stats(self) -> Counter[str]:
        """Counts of dropped replies, refused requests, replies sent, by reason."""
        return self.machine.stats

    def set_location(self, *, lon: float, lat: float) -> None:
        """The device's true position (degrees). Never sent anywhere as such."""
        self._host.spawn(self.machine.set_location(lon, lat, self.clock()))

    async def flush(self) -> None:
        """Wait until pending subscriptions and publications have gone out."""
        await self._host.effects.flush()

    async def query(self, query: Query, *, timeout_s: float | None = None) -> PeerAnswer:
        """Run one Protocol 4 query; the refined answer with diagnostics."""
        if not self._open:
            raise ConfigError("use PeerClient as 'async with'")
        await self._maybe_rotate()
        qid, effects = self.machine.start_query(query, self.clock())
        try:
            answer = await self._host.request(qid, effects, timeout_s)
        finally:
            self._host.spawn(self.machine.cancel(qid))  # no-op when the query has finished
        assert isinstance(answer, PeerAnswer)
        return answer

    # ------------------------------------------------------------------ driving

    def _handle(self, item: Received) -> None:
        """One message from the main connection or a fresh reply topic's."""
        now = self.clock()
        try:
            message = decode(item.payload, max_bytes=REPLY_MAX_BYTES)
        except DecodeError as exc:
            log.debug("undecodable payload (%s)", exc.code)
            self.machine.receive_invalid(item.topic, now)
            return
        try:
            effects = self.machine.receive(message, now)
        except Exception:  # a bug must not stop the device from serving others
            log.exception("peer machine failed on a %s", type(message).__name__)
            return
        self._host.spawn(effects)

    async def _maybe_rotate(self) -> None:
        """A new pseudonym gets a new connection: the broker sees a new client id, and what it
        observed under the old one (discovery cell, perturbed points) no longer links to what
        comes next - with a credential shared by the deployment's devices (docs/peer.md). Done
        only between queries, so no query loses its reply topics."""
        pseudonym = self.machine.pseudonym(self.clock())
        if not self._rotates or pseudonym == self._connection_pseudonym or self.machine.pending:
            return
        new = self._open_connection(new_client_id("p4"))
        await self._host.replace(new, [(t, 0) for t in self.machine.subscriptions])
        self._connection_pseudonym = pseudonym
        self.rotations += 1

    def _timer_failed(self, exc: Exception) -> None:
        """A deadline raised: fail the queries in flight rather than leave them hanging."""
        for qid in list(self._host.effects.futures):
            self._host.spawn(self.machine.cancel(qid))
        self._host.effects.fail_all(LocalProtocolError(f"internal error: {exc!r}"))
