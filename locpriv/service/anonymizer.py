"""The trusted anonymizer/mediator (Protocols 1, 2, 3) as an MQTT client process."""

from __future__ import annotations

from typing import Any

from locpriv.config import ServiceConfig
from locpriv.core.cloak.partition import warm_up as cloak_warm_up
from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core
from locpriv.service.driver import ServiceDriver

__all__ = ["AnonymizerService"]


class AnonymizerService(ServiceDriver):
    """The trusted anonymizer/mediator (Protocols 1, 2, 3) as an MQTT client; ``**driver``
    go to ServiceDriver (``clock=``, ``transport=``)."""

    def __init__(self, url: str, config: ServiceConfig | None = None, **driver: Any) -> None:
        config = config or ServiceConfig()
        client_id = config.mqtt.client_id
        reply_to = config.topics.reply(client_id)
        super().__init__(
            url,
            name="anonymizer",
            machine=build_trusted_core(config, reply_to),
            routes=anonymizer_routes(config.topics, reply_to),
            config=config,
            client_id=client_id,
            warm_up=cloak_warm_up,
            **driver,
        )
