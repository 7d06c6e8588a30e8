"""Scenarios through the real protocol machines on a virtual clock (see :mod:`.runner`)."""

from simulators.virtual.runner import (
    VirtualConfig,
    VirtualResult,
    load_poi_index,
    run_virtual,
)

__all__ = ["VirtualConfig", "VirtualResult", "load_poi_index", "run_virtual"]
