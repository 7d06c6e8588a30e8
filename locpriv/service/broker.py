"""An embedded amqtt 0.12 broker in-process (MQTT 3.1.1), for demos, tests and plugin hosting.

>>> async def main() -> None:  # doctest: +SKIP
...     async with EmbeddedBroker() as broker:
...         print(broker.url)  # mqtt://127.0.0.1:<free port>

Known limits of amqtt 0.12 (shape the rest of locpriv): MQTT 3.1.1 only (MQTT 5 clients are
rejected), ``$share`` subscriptions are not delivered, plugin event handlers run without being
awaited and their exceptions are swallowed unless logging is at DEBUG.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import time
from types import TracebackType
from typing import Any, Self

from locpriv.errors import TransportError
from locpriv.service.amqtt_compat import guard_subscription_walk

__all__ = ["MOSQUITTO_BIN", "EmbeddedBroker", "MosquittoProcess", "free_port"]

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host`` (races are possible; retry on bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class EmbeddedBroker:
    """amqtt broker on ``host:port`` (``port=0``: a free port) as an async context manager.

    ``plugins`` maps dotted plugin class paths to their config dicts (amqtt's ``plugins``
    section); by default only anonymous authentication is enabled. ``config`` (a full amqtt
    config dict) overrides everything else except the listener address.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        plugins: dict[str, dict[str, Any]] | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._plugins = plugins
        self._config = config
        self._broker: Any = None

    @property
    def url(self) -> str:
        """``mqtt://host:port`` once started."""
        if self._broker is None:
            raise TransportError("embedded broker not started")
        return f"mqtt://{self.host}:{self.port}"

    @property
    def amqtt(self) -> Any:
        """The underlying :class:`amqtt.broker.Broker` (for plugin tests)."""
        return self._broker

    def _build_config(self, port: int) -> dict[str, Any]:
        config: dict[str, Any] = dict(self._config or {})
        config["listeners"] = {"default": {"type": "tcp", "bind": f"{self.host}:{port}"}}
        if "plugins" not in config:
            plugins: dict[str, dict[str, Any]] = {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True},
            }
            plugins.update(self._plugins or {})
            config["plugins"] = plugins
        return config

    async def start(self) -> None:
        """Start listening; with ``port=0`` picks a free port (retrying a bind race)."""
        try:
            from amqtt.broker import Broker
        except ImportError as exc:  # pragma: no cover - optional extra
            raise TransportError(
                "the embedded broker needs amqtt: pip install locpriv[broker]"
            ) from exc
        attempts = 5 if self.port == 0 else 1
        last: Exception | None = None
        for _ in range(attempts):
            port = self.port or free_port(self.host)
            broker = Broker(self._build_config(port))
            guard_subscription_walk(broker)  # amqtt 0.12 defect (amqtt_compat)
            try:
                await broker.start()
            except Exception as exc:  # amqtt raises BrokerError wrapping OSError
                last = exc
                continue
            self._broker = broker
            self.port = port
            log.info("embedded amqtt broker listening on %s", self.url)
            return
        raise TransportError(f"embedded broker could not start: {last}")

    async def stop(self) -> None:
        """Shut the broker down (idempotent)."""
        broker, self._broker = self._broker, None
        if broker is not None:
            with contextlib.suppress(Exception):
                await broker.shutdown()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


MOSQUITTO_BIN = "/usr/sbin/mosquitto"
"""Where Debian installs mosquitto."""


class MosquittoProcess:
    """A private mosquitto 2.0 on ``127.0.0.1:port`` for tests, benchmarks and demos.

    Writes a config into ``workdir`` (anonymous, no persistence, generous queues), starts the
    binary and waits until it accepts TCP connections. :meth:`stop` and :meth:`start` may be
    called repeatedly; the port stays the same so that clients can reconnect to ``url``.
    """

    def __init__(
        self,
        workdir: str,
        *,
        port: int = 0,
        binary: str = MOSQUITTO_BIN,
        extra_config: str = "",
    ) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.workdir = workdir
        self.conf_path = os.path.join(workdir, f"mosquitto-{self.port}.conf")
        self.log_path = os.path.join(workdir, f"mosquitto-{self.port}.log")
        with open(self.conf_path, "w", encoding="utf-8") as fh:
            fh.write(
                f"listener {self.port} 127.0.0.1\n"
                "allow_anonymous true\n"
                "persistence false\n"
                "max_queued_messages 100000\n"
                "max_inflight_messages 0\n"
                "set_tcp_nodelay true\n"
                "log_dest stderr\n"
                "log_type error\nlog_type warning\nlog_type notice\n"
                f"{extra_config}"
            )
        self._proc: Any = None

    @property
    def url(self) -> str:
        """``mqtt://127.0.0.1:port``."""
        return f"mqtt://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 10.0) -> None:
        """Start mosquitto and block until it accepts connections (or raise TransportError)."""
        if self.running:
            return
        with open(self.log_path, "ab") as log_file:
            self._proc = subprocess.Popen(
                [self.binary, "-c", self.conf_path],
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                    err = fh.read()[-2000:]
                raise TransportError(f"mosquitto exited with {self._proc.returncode}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise TransportError(f"mosquitto did not accept connections on {self.port}")

    def stop(self) -> None:
        """Terminate mosquitto (SIGTERM, then SIGKILL after 5 s); idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5.0)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
