"""The trusted anonymizer/mediator (Protocols 1, 2, 3) as an MQTT client process.

With ``shard=Shard(I, N)`` (``locpriv serve anonymizer --shard I/N``) the process serves the
tiles rendezvous hashing gives shard I (:func:`~locpriv.protocols.trusted.shard_tiles`) and
subscribes to their topics only; its client id (:mod:`locpriv.service.identity`: secret,
derived from the broker password), reply topic and status topic get the suffix ``-s{I}of{N}``,
and so does its ``[state] journal_file`` (``pending.json`` -> ``pending-s{I}of{N}.json``):
shards on one host never overwrite each other's journal. The journal is the anonymizer's alone
(DS, sharing the configuration file, has none). Every process publishes the retained
deployment configuration on ``{prefix}/v1/config`` after each (re)connection, from which
clients compute their tile.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from locpriv.config import ServiceConfig
from locpriv.core.cloak.partition import warm_up as cloak_warm_up
from locpriv.core.tiles import Shard
from locpriv.errors import ConfigError
from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core, shard_tiles
from locpriv.service.driver import ServiceDriver
from locpriv.service.identity import ANONYMIZER, service_client_id
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
        journal = config.state.journal_file
        if suffix and journal:
            path = Path(journal)
            journal = str(path.with_name(path.stem + suffix + path.suffix))
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
            **driver,
        )
