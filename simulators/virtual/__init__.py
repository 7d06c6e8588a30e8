"""Scenarios through the real protocol machines on a virtual clock (see :mod:`.runner`)."""

from simulators.virtual.runner import (
    VirtualConfig,
    VirtualResult,
    default_cloak_config,
    load_poi_index,
    run_virtual,
)

__all__ = [
    "VirtualConfig",
    "VirtualResult",
    "default_cloak_config",
    "load_poi_index",
    "run_virtual",
]
