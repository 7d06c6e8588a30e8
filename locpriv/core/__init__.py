"""Pure cores: geometry, cells, cloaking, P4 group selection, noise, POIs (no asyncio, no I/O)."""
