"""How often Protocol 4's keyed noise leaves a small neighbourhood without a group: devices
standing still, one random place secret each, the requester's group chosen from their
perturbed points (``device_point`` and ``select_group``, what the machine runs). The figures
docs/peer.md quotes and the conformance step's retry rest on this measurement; the seeds are
fixed, so the counts are the same every run.

    .venv/bin/python -m pytest -q -s tests/test_p4_thin_groups.py   (prints the counts)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from locpriv.conformance.live import _P4_CONFIG, _around
from locpriv.core.geo import LonLat
from locpriv.core.grouping import InfeasibleReason
from locpriv.protocols.p4.types import PeerConfig
from locpriv.wire.messages import DeploymentConfig
from tests.integration._svc_helpers import LAT0, LON0, deploy_p4_devices, p4_thin_reason

DRAWS = 4000


def _thin(where: list[LonLat], config: PeerConfig, seed: int) -> tuple[int, set[str]]:
    """Of ``DRAWS`` sets of fresh device secrets, how many leave the first device no group,
    and the reasons given."""
    keys = np.random.default_rng(seed)
    thin, reasons = 0, set()
    for _ in range(DRAWS):
        reason = p4_thin_reason(where, config, [keys.bytes(32) for _ in where])
        if reason is not None:
            thin += 1
            reasons.add(reason)
    return thin, reasons


def _conformance_layout() -> list[LonLat]:
    return _around(DeploymentConfig(lat0_deg=LAT0, lon0_deg=LON0, tile_m=None), 4)


def _deploy_layout() -> list[LonLat]:
    """tests/integration/test_deploy.py's P4 test: its five devices."""
    return [LonLat(*p) for p in deploy_p4_devices()]


@pytest.mark.parametrize(
    ("layout", "config", "most"),
    [
        (_conformance_layout, _P4_CONFIG, 0.015),
        (_deploy_layout, PeerConfig(k=3, a_min_m2=20_000.0, a_max_m2=5_000_000.0), 0.008),
    ],
    ids=["conformance", "deploy"],
)
def test_a_still_neighbourhood_is_sometimes_too_thin_for_a_group(
    layout: Callable[[], list[LonLat]], config: PeerConfig, most: float
) -> None:
    """Thin groups happen (so a test that needs a group must fix its secrets, and the
    conformance step retries with fresh devices) and are rare (below ``most``); the only
    reason is the area floor (the points are spread far below A_max)."""
    thin, reasons = _thin(layout(), config, seed=2026)
    print(f"{thin} of {DRAWS} secret sets thin ({thin / DRAWS:.2%})")
    assert 0 < thin < most * DRAWS
    assert reasons == {InfeasibleReason.AREA_TOO_SMALL.value}
