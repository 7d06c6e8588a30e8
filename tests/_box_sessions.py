"""One box per session region: the design before regions of tiles became the default
(2026-12-06). The modules that test its box-specific parts (the joint box, thin margins and
their audit, adoption, the shrinking set, the spare) pass :func:`box` to every
:class:`~locpriv.core.cloak.types.CloakConfig` they build, directly or through the
simulators' ``cloak=``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ONE_BOX: Mapping[str, Any] = {"session_tile_factor": 0.0}
"""The CloakConfig field that selects one box per session region."""


def box(cloak: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``cloak`` (CloakConfig fields) with one box per session region, unless it names
    ``session_tile_factor`` itself."""
    return {**ONE_BOX, **(cloak or {})}
