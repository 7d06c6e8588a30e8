"""Protocol 4 glue shared by the fleet and the virtual runner.

Both runners hold one real :class:`~locpriv.protocols.p4.machine.PeerMachine` per device and
hand discovery traffic only to devices that can be in reach. This module is that common part:
the device knobs (:class:`P4Knobs`), the deployment's single discovery grid
(:func:`discovery_side`), building a device (:func:`peer_machine`) and the pre-filter radius
(:func:`prefilter_m`). Distances are metres, times seconds.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from locpriv.core.cells import cell_side_for
from locpriv.core.grouping import DEFAULT_NODE_BUDGET
from locpriv.protocols.ids import IdSource, new_id
from locpriv.protocols.p4.machine import PeerMachine
from locpriv.wire.messages import PeerRequest
from locpriv.wire.topics import Topics
from simulators.scenario import BuiltScenario

__all__ = ["P4Knobs", "discovery_side", "peer_machine", "prefilter_m"]


@dataclass(frozen=True, slots=True)
class P4Knobs:
    """Device settings a runner chooses (the privacy profile comes from the workload)."""

    window_s: float = 0.5
    max_rounds: int = 2
    max_distance_m: float = 200.0
    ds_timeout_s: float = 10.0
    max_replies: int = 200
    reuse_radius_m: float = 50.0
    node_budget: int | None = DEFAULT_NODE_BUDGET
    keyed_noise: bool = True
    """The static-device defence (keyed place noise); off only to measure what it costs."""


def discovery_side(built: BuiltScenario, knobs: P4Knobs) -> int:
    """The deployment's one discovery cell side (m), from the largest ``a_max_m2``: devices on
    different grids would never hear each other."""
    a_max = max(p.a_max_m2 for p in built.workload.profiles)
    return cell_side_for(a_max, knobs.max_distance_m)


def peer_machine(
    built: BuiltScenario,
    user: int,
    *,
    knobs: P4Knobs,
    side_m: int,
    topics: Topics,
    ids: IdSource = new_id,
) -> PeerMachine:
    """Device ``user`` configured from its privacy profile; its noise and place secret are
    derived from the scenario's seed (reproducible runs)."""
    config = built.workload.profiles[user].peer_config(
        cell_side_m=side_m,
        window_s=knobs.window_s,
        max_rounds=knobs.max_rounds,
        max_distance_m=knobs.max_distance_m,
        ds_timeout_s=knobs.ds_timeout_s,
        max_replies=knobs.max_replies,
        reuse_radius_m=knobs.reuse_radius_m,
        node_budget=knobs.node_budget,
        keyed_noise=knobs.keyed_noise,
    )
    rng = np.random.default_rng([built.protocol_seed, user])
    secret = hashlib.sha256(f"locpriv-sim/{built.protocol_seed}/{user}".encode()).digest()
    return PeerMachine(config, rng=rng, topics=topics, ids=ids, secret=secret)


def prefilter_m(knobs: P4Knobs, request: PeerRequest) -> float:
    """Radius (m) around a request's perturbed point beyond which no device's perturbed point
    can answer it (with a 1 % + 5 m margin for projection error); each machine still applies
    its own policy."""
    return min(knobs.max_distance_m, request.max_distance_m or math.inf) * 1.01 + 5.0
