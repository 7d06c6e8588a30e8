"""MQTT over aiomqtt 2.5 (the only module that imports aiomqtt; its 3.0 line changes the API)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import re
import socket
import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self

import aiomqtt

from locpriv.errors import ConfigError, TransportError
from locpriv.transport.base import _CLOSED, Received, _drain, _take_nowait, new_client_id

log = logging.getLogger(__name__)

_REPLY_TOPIC = re.compile(r"(/reply/)[A-Za-z0-9_.:@-]+")
"""A reply topic's last segment (a client id) in a paho log line."""
_SHORT_S = 2.0
"""A connection lost sooner than this after it was made counts towards a longer backoff ..."""
_SHORT_BACKOFF_S = 1.0
"""... of at most this many seconds (a tug of war over a client id: one retake a second)."""


class MqttTransport:
    """A reconnecting MQTT 3.1.1 connection over aiomqtt.

    Parameters (seconds): ``connect_timeout_s`` bounds the *first* connection (raises
    :class:`TransportError`); later outages are retried forever with backoff from
    ``backoff_initial_s`` doubling up to ``backoff_max_s`` (jitter 50-100 %); a connection lost
    within 2 s of being made (taken over by another client with the same id, or cut by the
    broker) counts as a failed attempt, backing off up to 1 s: a tug of war over a client id
    costs the broker about one CONNECT a second, and the service is back within 1 s of its end.
    ``publish_timeout_s`` bounds how long a publish waits for a lost connection.
    ``clean_session=False`` asks the broker for a persistent session (services use it so that
    QoS 1 requests queued while they were away are delivered on reconnect). ``will`` and
    ``birth`` are ``(topic, payload)`` published retained at QoS 1: the will by the broker when
    the connection is lost, the birth by us after every (re)connection and resubscription.
    ``tls``: verify the broker's certificate chain (against ``ca_file``, PEM, or the system's
    CAs) and its host name.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int = 1883,
        tls: bool = False,
        username: str | None = None,
        password: str | None = None,
        ca_file: str | None = None,
        client_id: str | None = None,
        will: tuple[str, bytes] | None = None,
        birth: tuple[str, bytes] | None = None,
        clean_session: bool = True,
        keepalive_s: int = 30,
        connect_timeout_s: float = 10.0,
        publish_timeout_s: float = 30.0,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        max_inflight: int = 100,
    ) -> None:
        self.client_id = client_id or new_client_id()
        self.url = f"{'mqtts' if tls else 'mqtt'}://{host}:{port}"
        self._connect_timeout_s = connect_timeout_s
        self._publish_timeout_s = publish_timeout_s
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._queue: asyncio.Queue[Received | object] = asyncio.Queue()
        self._client = _Client(
            host,
            port,
            username=username,
            password=password,
            identifier=self.client_id,
            protocol=aiomqtt.ProtocolVersion.V311,
            will=aiomqtt.Will(will[0], will[1], qos=1, retain=True) if will else None,
            clean_session=clean_session,
            keepalive=keepalive_s,
            timeout=connect_timeout_s,
            tls_context=_tls_context(ca_file) if tls else None,
            max_inflight_messages=max_inflight,
            logger=_QuietAdapter(  # type: ignore[arg-type]
                logging.getLogger("aiomqtt"), {"redact": self.client_id}
            ),
            queue_type=_forwarding_queue(self._queue),
            # request/reply traffic is many small packets: Nagle + delayed ACK would add ~40 ms
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        )
        # aiomqtt warns above 10 concurrent publishes; services run many on purpose
        self._client.pending_calls_threshold = 10_000
        self._birth = birth
        self._subs: dict[str, int] = {}
        self._connected = asyncio.Event()
        self._first = asyncio.Event()
        self._first_error: BaseException | None = None
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self.reconnects = 0
        """How many times the connection was re-established after a loss."""

    @property
    def connected(self) -> bool:
        """True while the broker connection is up."""
        return self._connected.is_set()

    @property
    def backlog(self) -> int:
        """Messages received but not yet taken from :meth:`messages`."""
        return self._queue.qsize()

    def take_nowait(self) -> Received | None:
        """The next already-received message, or None (does not wait)."""
        return _take_nowait(self._queue)

    async def __aenter__(self) -> Self:
        self._task = asyncio.get_running_loop().create_task(
            self._run(),
            name="mqtt-transport",  # the client id is a service's secret
        )
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                await self._first.wait()
        except TimeoutError:
            await self._stop()
            raise TransportError(
                f"cannot connect to {self.url}: {self._first_error or 'timeout'}"
            ) from None
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stop()

    async def _stop(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        self._queue.put_nowait(_CLOSED)

    async def _disconnect(self) -> None:
        """Leave the aiomqtt context (graceful DISCONNECT if still connected), bounded."""
        with contextlib.suppress(aiomqtt.MqttError, OSError, TimeoutError):
            async with asyncio.timeout(2.0):
                await self._client.__aexit__(None, None, None)
        # aiomqtt leaves the exception of an unexpected disconnection in a future nobody
        # awaits (asyncio then logs "exception was never retrieved"): consume it here.
        for name in ("_disconnected", "_connected"):
            fut = getattr(self._client, name, None)
            if isinstance(fut, asyncio.Future) and fut.done() and not fut.cancelled():
                fut.exception()

    def _backoff(self, attempt: int) -> float:
        cap = min(self._backoff_max_s, self._backoff_initial_s * 2.0**attempt)
        return cap * random.uniform(0.5, 1.0)  # jitter, not crypto

    async def _run(self) -> None:
        attempt = 0
        short = 0  # consecutive connections lost within SHORT_S of being made
        loop = asyncio.get_running_loop()
        while not self._closing:
            try:
                await self._client.__aenter__()
            except aiomqtt.MqttError as exc:
                self._first_error = exc
                delay = self._backoff(attempt)
                attempt += 1
                log.debug("connect to %s failed (%s); retry in %.2f s", self.url, exc, delay)
                await asyncio.sleep(delay)
                continue
            if self._first.is_set():
                self.reconnects += 1
                log.info("reconnected to %s", self.url)
            attempt = 0
            up_since = loop.time()
            try:
                for topic_filter, qos in list(self._subs.items()):
                    await self._client.subscribe(topic_filter, qos=qos)
                if self._birth is not None:
                    await self._client.publish(*self._birth, qos=1, retain=True)
                self._connected.set()
                self._first.set()
                # messages go straight to self._queue (see _forwarding_queue); this iterator
                # only ends, with MqttError, when the connection is lost
                async for _ in self._client.messages:
                    pass
            except aiomqtt.MqttError as exc:
                if not self._closing:
                    log.warning("lost connection to %s: %s", self.url, exc)
            finally:
                self._connected.clear()
                await self._disconnect()
            # a connection taken over again and again (another client with this id) or one the
            # broker keeps cutting: back off (up to _SHORT_BACKOFF_S) instead of retaking it at
            # once, without leaving the service away longer than that when it ends
            short = short + 1 if loop.time() - up_since < _SHORT_S else 0
            if not self._closing:
                delay = self._backoff(max(0, short - 1))
                await asyncio.sleep(min(delay, max(_SHORT_BACKOFF_S, self._backoff(0))))

    async def _wait_connected(self, deadline: float) -> None:
        if self._closing:
            raise TransportError("transport is closed")
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                await self._connected.wait()
        except TimeoutError:
            raise TransportError(f"broker {self.url} unavailable") from None

    async def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False
    ) -> None:
        """Publish; waits (bounded) through an outage, raises TransportError after it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._publish_timeout_s
        while True:
            if self._closing or not self._connected.is_set():
                await self._wait_connected(deadline)
            try:
                # timeout=inf: aiomqtt awaits the PUBACK without a wait_for task; a publish cut
                # by a disconnect is re-sent by paho after the reconnect and confirmed then
                async with asyncio.timeout_at(deadline):
                    await self._client.publish(
                        topic, payload, qos=qos, retain=retain, timeout=math.inf
                    )
                return
            except TimeoutError:
                raise TransportError(f"publish to {self.url} not confirmed in time") from None
            except aiomqtt.MqttError as exc:
                if loop.time() >= deadline or self._closing:
                    raise TransportError(f"publish to {self.url} failed: {exc}") from exc
                self._connected.clear()
                await asyncio.sleep(0.01)

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe now (if connected) and after every reconnect."""
        self._subs[topic_filter] = qos
        if self._connected.is_set():
            try:
                await self._client.subscribe(topic_filter, qos=qos)
            except aiomqtt.MqttError as exc:
                log.debug("subscribe deferred to reconnect: %s", exc)

    async def unsubscribe(self, topic_filter: str) -> None:
        """Forget a filter (also for future reconnects)."""
        self._subs.pop(topic_filter, None)
        if self._connected.is_set():
            with contextlib.suppress(aiomqtt.MqttError):
                await self._client.unsubscribe(topic_filter)

    def messages(self) -> AsyncIterator[Received]:
        """Every received message, across reconnects, until the transport closes."""
        return _drain(self._queue)


def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificate and host name verification (Python's defaults), against ``ca_file``."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the CA file {ca_file}: {exc}") from None
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    context.sslsocket_class = _ClosingSSLSocket
    return context


class _ClosingSSLSocket(ssl.SSLSocket):
    """Closes itself when the handshake fails (a certificate or host name that does not
    verify): paho drops such a socket without closing it, once per reconnection attempt."""

    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except BaseException:
            self.close()
            raise


class _QuietAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiomqtt and paho log a dropped connection at ERROR ("failed to receive on socket");
    this transport reconnects and logs the loss itself, so theirs is capped at WARNING. paho's
    DEBUG lines name client ids and reply topics (CONNECT, SUBSCRIBE, PUBLISH to the mediator's
    reply topic): a service's id is a secret (:mod:`locpriv.service.identity`), so
    ``extra["redact"]`` and the last segment of every ``reply/...`` topic are shown as ``***``."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        level = min(level, logging.WARNING)
        if not self.isEnabledFor(level):
            return
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = f"{msg} {args}"
        secret = (self.extra or {}).get("redact")
        if secret:
            text = text.replace(str(secret), "***")
        super().log(level, _REPLY_TOPIC.sub(r"\1***", text), **kwargs)


class _Client(aiomqtt.Client):
    """aiomqtt's client with a safe writer registration.

    paho asks for a socket writer from its own thread; the event loop adds it later. When the
    connection drops in between, the socket is closed by then and asyncio logs an ERROR
    traceback ("add_writer ... Bad file descriptor") during an ordinary disconnect. Here such
    a late registration is dropped silently: the disconnect is handled by the reconnect loop.
    """

    def _on_socket_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        fd = sock.fileno()
        loop = self._loop

        def writable() -> None:
            try:
                client.loop_write()
            except Exception as exc:  # a broken connection: let aiomqtt notice it
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def register() -> None:
            with contextlib.suppress(OSError, ValueError):
                loop.add_writer(fd, writable)

        loop.call_soon_threadsafe(register)


def _forwarding_queue(target: asyncio.Queue[Received | object]) -> type[asyncio.Queue[Any]]:
    """An aiomqtt ``queue_type`` handing each message straight to ``target`` as Received.

    Saves aiomqtt's per-message task and queue hop; aiomqtt only calls ``put_nowait`` on it.
    """

    class _Forward(asyncio.Queue[Any]):
        def put_nowait(self, item: Any) -> None:
            payload = item.payload
            if isinstance(payload, bytes | bytearray):
                data = bytes(payload)
            elif payload is None:
                data = b""
            else:
                data = str(payload).encode()
            target.put_nowait(Received(item.topic.value, data))

    return _Forward
