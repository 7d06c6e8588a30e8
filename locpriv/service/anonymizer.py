"""The trusted anonymizer/mediator (Protocols 1, 2, 3) as an MQTT client process.

With ``shard=Shard(I, N)`` (``locpriv serve anonymizer --shard I/N``) the process serves the
tiles rendezvous hashing gives shard I (:func:`~locpriv.protocols.trusted.shard_tiles`) and
subscribes to their topics only; its client id (:mod:`locpriv.service.identity`: secret,
derived from the broker password), reply topic and status topic get the suffix ``-s{I}of{N}``,
and so do its ``[state] journal_file`` (``pending.json`` -> ``pending-s{I}of{N}.json``) and
``sessions_file``: shards on one host never overwrite each other's files. Both are the
anonymizer's alone (DS, sharing the configuration file, has neither). With a ``sessions_file``
the live sessions are written before every answer made after one of them changed, and at a
clean stop, and the next start goes on with them, after a crash too
(:mod:`locpriv.service.sessions_file`). Every process publishes the retained
deployment configuration on ``{prefix}/v1/config`` after each (re)connection, from which
clients compute their tile.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from locpriv.config import ServiceConfig
from locpriv.core.cloak.partition import warm_up as cloak_warm_up
from locpriv.core.tiles import Shard
from locpriv.errors import ConfigError
from locpriv.protocols.seal import read_key
from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core, shard_tiles
from locpriv.service.driver import ServiceDriver
from locpriv.service.identity import ANONYMIZER, service_client_id
from locpriv.service.sessions_file import SessionsFile
from locpriv.wire.messages import encode

__all__ = ["AnonymizerService"]

log = logging.getLogger(__name__)


class AnonymizerService(ServiceDriver):
    """The trusted anonymizer/mediator (Protocols 1, 2, 3) as an MQTT client; ``**driver``
    go to ServiceDriver (``clock=``, ``transport=``, ``metrics_port=``)."""

    def __init__(
        self,
        url: str,
        config: ServiceConfig | None = None,
        *,
        shard: Shard | None = None,
        **driver: Any,
    ) -> None:
        config = config or ServiceConfig()
        shard = shard or Shard()
        suffix = f"-s{shard.index}of{shard.count}" if shard.count > 1 else ""
        if shard.count > 1 and not config.tiles.side_m:
            raise ConfigError("--shard needs tiles: set [tiles] side_m in the configuration")
        journal = _per_shard(config.state.journal_file, suffix)
        self.shard = shard
        self.tiles = shard_tiles(config, shard)
        """The tiles this process serves (None: every tile, no tiles configured)."""
        configured = config.mqtt.client_id
        client_id = service_client_id(
            ANONYMIZER + suffix, driver.get("password"), configured + suffix if configured else ""
        )
        reply_to = config.topics.svc_reply(client_id)
        self.reply_to = reply_to
        """Where DS answers this mediator (named by the secret client id)."""
        machine = build_trusted_core(config, reply_to)
        if machine.mediator.answer_mac is None:
            log.warning(
                "anonymizer: no answer key ([state] answer_key_file):"
                " DS answers are relayed without checking who wrote them"
            )
        routes = anonymizer_routes(
            config.topics,
            reply_to,
            anonymizer=machine.anonymizer,
            tiles=self.tiles,
            subscribe_tiles=shard.count > 1,
            limits=machine.limits,
        )
        self.sessions_file: SessionsFile | None = None
        """Sessions kept over a restart or a crash (``[state] sessions_file``), or None."""
        if config.state.sessions_file:
            key = read_key(config.state.token_key_file or None, "token")
            if key is None:
                raise ConfigError(
                    "[state] sessions_file needs [state] token_key_file: the file is sealed "
                    "under a key derived from it"
                )
            path = _per_shard(config.state.sessions_file, suffix)
            self.sessions_file = SessionsFile(path, key)
        super().__init__(
            url,
            name="anonymizer",
            machine=machine,
            routes=routes,
            config=config,
            client_id=client_id,
            warm_up=cloak_warm_up,
            status_name="anonymizer" + suffix,
            retained=[(config.topics.config, encode(config.deployment_config()))],
            journal_file=journal,
            on_start=self._restore_sessions if self.sessions_file else None,
            on_stop=self._save_sessions if self.sessions_file else None,
            before_emit=self._persist_sessions if self.sessions_file else None,
            **driver,
        )
        self.trusted = machine
        self._saved: int | None = None
        """:attr:`TrustedCore.sessions_revision` when the sessions file was last written
        (None: write it whole next)."""
        self._save_failed_at = -math.inf

    def _restore_sessions(self, now: float) -> None:
        """Go on with the sessions the previous run wrote (before its last answers, or at its
        clean stop). The file stays until the next write: a crash before then finds the same
        sessions again."""
        assert self.sessions_file is not None
        records = self.sessions_file.load()
        if records is not None:
            got = self.trusted.restore_sessions(records, now)
            fast = sum(len(v) for v in records.speeds.values())
            log.warning(
                "anonymizer: went on with %d sessions saved by the last run (and the speeds "
                "of %d fast users)",
                got,
                fast,
            )
        self._persist_sessions(now)  # whole again: the next crash finds this run's sessions

    def _persist_sessions(self, now: float) -> None:
        """Before answers go out: write the sessions changed since the last write (the whole
        set of them when the appended frames outgrow the last whole write, 1 MiB at least),
        so that a crash after an answer never loses the set it was made from (a set only
        shrinks, so the file never holds a set larger than what was answered). A failed write
        is logged (at most once a minute) and retried, whole, before the next answers; the
        answers go out all the same."""
        file = self.sessions_file
        assert file is not None
        revision = self.trusted.sessions_revision
        saved = self._saved
        if revision == saved:
            return
        try:
            grown = file.appended_bytes > max(file.base_bytes, 1 << 20)
            if saved is None or grown or not file.append(self.trusted.export_sessions(now, saved)):
                file.save(self.trusted.export_sessions(now))
        except OSError as exc:
            self._saved = None
            if time.monotonic() - self._save_failed_at >= 60.0:
                self._save_failed_at = time.monotonic()
                log.error("anonymizer: cannot write the sessions file: %s", exc)
            return
        self._saved = revision

    def _save_sessions(self, now: float) -> None:
        """At a clean stop: every session, whole."""
        assert self.sessions_file is not None
        records = self.trusted.export_sessions(now)
        self.sessions_file.save(records)
        count = sum(len(r) for r in records.tiles.values())
        log.info("anonymizer: saved %d sessions for the next start", count)


def _per_shard(path: str, suffix: str) -> str:
    """``path`` with the shard's suffix before its extension (``pending.json`` ->
    ``pending-s0of2.json``), so that shards on one host never share a file."""
    if not suffix or not path:
        return path
    p = Path(path)
    return str(p.with_name(p.stem + suffix + p.suffix))
