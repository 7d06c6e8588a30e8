"""The reference location-based database server (DS) as an MQTT client process.

It runs :class:`~locpriv.protocols.ds.DSCore` over a POI file (CSV or GeoJSON; default: the demo
set :data:`~locpriv.core.poi.DEFAULT_POIS`) on ``topics.ds_query``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from locpriv.config import ServiceConfig
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois
from locpriv.protocols.ds import DSCore, ds_routes
from locpriv.service.driver import ServiceDriver
from locpriv.service.identity import DS, service_client_id

__all__ = ["DSService"]


class DSService(ServiceDriver):
    """DS as an MQTT client serving ``topics.ds_query``; ``**driver`` go to ServiceDriver
    (``clock=``, ``transport=``)."""

    def __init__(
        self,
        url: str,
        config: ServiceConfig | None = None,
        *,
        pois: str | Path | None = None,
        index: POIIndex | None = None,
        **driver: Any,
    ) -> None:
        config = config or ServiceConfig()
        if index is None:
            index = POIIndex(load_pois(pois or DEFAULT_POIS), config.make_projection())
        super().__init__(
            url,
            name="ds",
            machine=DSCore(index),
            routes=ds_routes(config.topics),
            config=config,
            client_id=service_client_id(DS, driver.get("password"), config.mqtt.ds_client_id),
            **driver,
        )
        self.index = index
