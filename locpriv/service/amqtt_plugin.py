"""The trusted anonymizer/mediator inside an amqtt 0.12 broker, as a broker plugin.

amqtt broker config (YAML; deploy/amqtt-broker-auth.yaml, docs/operations.md)::

    plugins:
      amqtt.plugins.authentication.FileAuthPlugin:
        password_file: /etc/locpriv/amqtt.passwd  # argon2 hashes (pwdlib)
      locpriv.service.amqtt_acl.LoginACLPlugin:   # deploy/acl's rules, per login
        prefix: locpriv
      locpriv.service.amqtt_plugin.AnonymizerPlugin:
        config_file: /etc/locpriv/locpriv.toml   # optional ServiceConfig TOML
        prefix: locpriv                          # optional, overrides the file
        require_login: true                      # default; false only for anonymous demos

The plugin sees every message the broker lets a client publish (``on_broker_message_broadcast``,
after the topic plugins allowed it; amqtt's ``message_received`` fires even for refused ones)
and holds the topic to the session's login itself: a location or request whose topic names a
user other than the session's username, or an answer on its DS reply topic from any login but
``ds_user``, is dropped and counted (``dropped_login``) and never reaches the core. With
``require_login: false`` (deploy/amqtt-broker.yaml, anonymous, a demo) nothing is bound: anyone
is anyone. It runs the same
sans-I/O :class:`~locpriv.protocols.p1.TrustedCore` and
:class:`~locpriv.service.driver.Dispatcher` as the standalone service, and publishes replies with
``context.broadcast_message``; it keeps the deployment configuration retained on
``{prefix}/v1/config`` (clients compute their tile from it) and serves every tile.
Protocol 3 and location updates need nothing else; Protocols 1 and
2 need a DS connected to the broker (``locpriv serve ds``): DS answers on the plugin's reply
topic ``reply/{client_id}``, which the plugin sees like any other message. That client id is
``[mqtt] client_id`` when set, else ``locpriv-anonymizer-<128 random bits>`` drawn at each start
(the plugin holds no password; its pending requests do not outlive the broker anyway).

amqtt runs plugin handlers as unawaited tasks and swallows their exceptions unless logging is at
DEBUG, so every handler here catches and logs its own errors. Handlers do all state changes
synchronously before their first ``await``, so messages are processed in arrival order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from amqtt.broker import BrokerContext
from amqtt.plugins.base import BasePlugin

from locpriv.config import ServiceConfig, load_config
from locpriv.core.cloak.partition import warm_up as cloak_warm_up
from locpriv.core.tiles import Shard
from locpriv.protocols.dispatch import Dispatcher
from locpriv.protocols.effects import Send
from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core, shard_tiles
from locpriv.service.identity import ANONYMIZER, DS
from locpriv.transport import Received
from locpriv.transport.deadlines import Clock, DeadlineTimer
from locpriv.wire.messages import encode

__all__ = ["AnonymizerPlugin"]

log = logging.getLogger(__name__)


class AnonymizerPlugin(BasePlugin[BrokerContext]):  # type: ignore[misc]
    """Runs Protocols 1-3 and location tracking inside the broker. ``clock`` (Unix seconds)
    may be replaced on the class or an instance (tests)."""

    clock: Clock = staticmethod(time.time)

    @dataclass
    class Config:
        """Plugin options (all optional): a ServiceConfig TOML file and overrides."""

        config_file: str | None = None
        prefix: str | None = None
        lat0_deg: float | None = None
        lon0_deg: float | None = None
        client_id: str | None = None
        require_login: bool = True
        ds_user: str = DS

    def __init__(self, context: BrokerContext) -> None:
        super().__init__(context)
        opts: AnonymizerPlugin.Config = self.config
        config = load_config(opts.config_file)
        update: dict[str, Any] = {}
        if opts.prefix:
            update["prefix"] = opts.prefix
        if opts.lat0_deg is not None or opts.lon0_deg is not None:
            update["projection"] = config.projection.model_copy(
                update={
                    k: v
                    for k, v in (("lat0_deg", opts.lat0_deg), ("lon0_deg", opts.lon0_deg))
                    if v is not None
                }
            )
        if opts.client_id:
            update["mqtt"] = config.mqtt.model_copy(update={"client_id": opts.client_id})
        self.service_config: ServiceConfig = config.model_copy(update=update)
        topics = self.service_config.topics  # validates the prefix
        self.client_id = self.service_config.mqtt.client_id or (
            f"{ANONYMIZER}-{secrets.token_hex(16)}"
        )
        reply_to = topics.svc_reply(self.client_id)
        self.reply_to = reply_to
        self.require_login = opts.require_login
        self.ds_user = opts.ds_user
        self.stats: dict[str, int] = {"dropped_login": 0}
        self._dropped_logged = -1e9
        self.core = build_trusted_core(self.service_config, reply_to)
        self.dispatcher = Dispatcher(
            name="anonymizer",
            machine=self.core,
            routes=anonymizer_routes(
                topics,
                reply_to,
                anonymizer=self.core.anonymizer,
                tiles=shard_tiles(self.service_config, Shard()),
                limits=self.core.limits,
            ),
            topics=topics,
            max_payload=self.service_config.limits.max_payload_bytes,
        )
        self._deadlines = DeadlineTimer(
            self.core, self._spawn_publish, clock=self.clock, name="locpriv plugin"
        )
        self._timer: asyncio.Task[None] | None = None
        self._publishing: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ events

    async def on_broker_post_start(self) -> None:
        """Retain the deployment configuration for clients, compile the cloaking kernels, then
        start the deadline timer (temporal cloaking, DS timeouts, user expiry)."""
        config = self.service_config
        await self.context.retain_message(
            config.topics.config, encode(config.deployment_config()), qos=1
        )
        await asyncio.to_thread(cloak_warm_up)
        self._timer = asyncio.create_task(self._deadlines.run(), name="locpriv-plugin-timer")
        log.info("locpriv anonymizer plugin active (prefix %s)", self.service_config.prefix)

    async def on_broker_pre_shutdown(self) -> None:
        """Answer every pending request ``unavailable`` while clients are still connected."""
        try:
            await self._publish(self.core.shutdown(self.clock()))
        except Exception:
            log.exception("locpriv plugin: shutdown failed")

    def login_holds(self, topic: str, username: str | None) -> bool:
        """True when a message on ``topic`` from a session of login ``username`` may reach the
        core: the topic's user segment is the login; DS's answers come from ``ds_user``."""
        if not self.require_login:
            return True
        if topic == self.reply_to:
            return username == self.ds_user
        user = self.service_config.topics.user_of(topic)
        return user is not None and user == username

    async def on_broker_message_broadcast(self, *, client_id: str, message: Any) -> None:
        """Every message the broker let a client publish; ours are handled, the rest ignored."""
        try:
            topic = getattr(message, "topic", None)
            data = getattr(message, "data", None)
            if not topic or data is None or self.dispatcher.route(topic) is None:
                return
            session = self.context.get_session(client_id)
            if not self.login_holds(topic, getattr(session, "username", None)):
                self.stats["dropped_login"] += 1
                now = time.monotonic()
                if now - self._dropped_logged >= 10.0:  # at most one line per 10 s
                    self._dropped_logged = now
                    log.warning(
                        "locpriv plugin: %d messages on topics not of their login, dropped",
                        self.stats["dropped_login"],
                    )
                return
            effects = self.dispatcher.handle(Received(topic, bytes(data)), self.clock())
            self._deadlines.poke()
            await self._publish(effects)
        except Exception:
            log.exception("locpriv plugin: handler failed")

    async def close(self) -> None:
        """Stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None

    # --------------------------------------------------------------- internals

    async def _publish(self, effects: list[Send]) -> None:
        for effect in effects:
            await self.context.broadcast_message(
                effect.topic, encode(effect.message), qos=effect.qos
            )

    def _spawn_publish(self, effects: list[Send]) -> None:
        """Effects of a deadline: published by a task of their own (the timer never waits)."""
        task = asyncio.create_task(self._publish_logged(effects))
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    async def _publish_logged(self, effects: list[Send]) -> None:
        try:
            await self._publish(effects)
        except Exception:
            log.exception("locpriv plugin: deadline handling failed")
