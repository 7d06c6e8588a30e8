"""Protocol 4 answer and configuration (pure data, no machine).

What :class:`~locpriv.protocols.p4.machine.PeerMachine` returns and how it is parametrised:
responder policy, the DS radius ladder (:class:`TokenBucket` lives in
:mod:`locpriv.protocols.limits`, re-exported here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from locpriv.core.cells import cell_side_for
from locpriv.core.geo import LonLat
from locpriv.core.grouping import DEFAULT_NODE_BUDGET, AreaMode
from locpriv.core.noise import GaussianMechanism, Mechanism
from locpriv.errors import ConfigError
from locpriv.protocols.limits import TokenBucket
from locpriv.wire.messages import POI

__all__ = [
    "MAX_RADIUS_M",
    "PeerAnswer",
    "PeerConfig",
    "ResponderPolicy",
    "TokenBucket",
    "query_radius",
    "radius_ladder",
]

MAX_RADIUS_M = 100_000.0
"""Largest ``radius_m`` the wire accepts, metres."""


@dataclass(frozen=True, slots=True)
class PeerAnswer:
    """The refined answer of a Protocol 4 query, with diagnostics.

    ``pois``: exact answer at the true location. ``group_size``: k (requester included).
    ``area_m2``/``sse_m2``: the group's area and within-group SSE (local metres). ``rounds``:
    broadcasts made. ``centroid``: the :class:`~locpriv.core.geo.LonLat` sent to DS with
    ``radius_m`` metres.
    ``replies``: usable replies collected. ``dropped``: replies dropped, by reason.
    ``candidates``: POIs DS returned. ``exact``: the group is proven SSE-optimal. ``ds_s``:
    seconds from sending the DS query to receiving its answer.
    """

    pois: tuple[POI, ...]
    group_size: int
    area_m2: float
    sse_m2: float
    rounds: int
    centroid: LonLat
    radius_m: float
    replies: int
    dropped: dict[str, int]
    candidates: int
    exact: bool
    ds_s: float = 0.0
    covered: bool = True
    """The true position lies inside the disc sent to DS; when False (documented, rare: the
    device's noise exceeded ``radius_cover_m``) ``pois`` are the best of the candidates but may
    miss a closer POI outside the disc."""
    members: tuple[str, ...] = ()
    """Pseudonyms of the responders in the group (local diagnostics; never sent)."""


# ---------------------------------------------------------------------------- config


@dataclass(frozen=True, slots=True)
class ResponderPolicy:
    """When the device answers neighbours' requests.

    ``enabled=False`` opts out. Requests from further than ``max_distance_m`` metres (between
    perturbed points; ``None``: the deployment's cell side) are ignored; so are requests beyond
    the per-requester bucket (``per_requester_rate_per_s``, ``per_requester_burst``) or the
    overall bucket. Nothing is sent back when a request is refused.
    """

    enabled: bool = True
    max_distance_m: float | None = None
    per_requester_rate_per_s: float = 0.2
    per_requester_burst: float = 5.0
    overall_rate_per_s: float = 20.0
    overall_burst: float = 60.0
    max_requesters: int = 4096


@dataclass(frozen=True, slots=True)
class PeerConfig:
    """Protocol 4 parameters. One noise ``mechanism`` (one σ) per deployment: every device
    must use the same one, or the noise level becomes a fingerprint and the devices with the
    smallest σ the weakest members of every group.

    Static-device defence: with ``keyed_noise`` (default) a place's perturbed point is a keyed
    function of the device's secret and the place (see :class:`~locpriv.core.noise.
    PerturbedPoint`), so months of broadcasts from one place give one point; ``rekey_s`` changes
    the key every period. Without it, fresh draws are reused for ``reuse_ttl_s`` and capped at
    ``max_draws_per_place``. Keyed mode holds the point while the device's fixes stay within
    ``hold_factor`` × the scatter it observes (at least ``reuse_radius_m``, at most
    ``max_hold_m``) of where it dwells, and places of one ``noise_region_m`` square share one
    keyed draw (docs/peer.md).

    What the broker sees: with ``rotate_connection`` (default) the device reconnects under a
    fresh MQTT client id whenever its pseudonym changes (every ``pseudonym_ttl_s``), so the
    broker cannot follow it across periods by client id (nor by user name, when the deployment's
    devices share a P4 credential).

    Tokens (docs/peer.md §8): ``require_tokens`` None (default) drops replies and requests
    whose pseudonym carries no valid issuer token as soon as the device has received the
    issuer's key (and from then on); True always (deployments with an issuer: no reply counts
    before the key arrives); False never checks. ``pseudonym_ttl_s`` must equal the issuer's
    period.

    DS radius (§5): a function of the group only, never of the true position:
    ``query_radius_m`` (default ``√(A_max/π) + 3σ``) doubled until it covers every group
    member plus ``radius_cover_m`` (default ``4σ + 2·reuse_radius_m``).

    Areas in m², distances in metres, times in seconds. ``cell_side_m`` must be the same on
    every device of a deployment (default :func:`locpriv.core.cells.cell_side_for` of ``a_max_m2``
    and ``max_distance_m``).
    """

    k: int
    a_min_m2: float
    a_max_m2: float
    mechanism: Mechanism = field(default_factory=lambda: GaussianMechanism(100.0))
    area: AreaMode = AreaMode.HULL
    window_s: float = 0.5
    max_rounds: int = 3
    max_distance_m: float | None = None
    cell_side_m: int | None = None
    ds_timeout_s: float = 5.0
    query_radius_m: float | None = None
    radius_margin_m: float = 5.0
    radius_cover_m: float | None = None
    require_tokens: bool | None = None
    reuse_enabled: bool = True
    keyed_noise: bool = True
    rekey_s: float | None = None
    reuse_radius_m: float = 50.0
    reuse_ttl_s: float = 3600.0
    max_draws_per_place: int | None = 24
    noise_region_m: float = 2000.0
    hold_factor: float = 3.5
    max_hold_m: float = 250.0
    pseudonym_ttl_s: float = 3600.0
    rotate_connection: bool = True
    stale_s: float = 60.0
    max_replies: int = 2000
    max_candidates: int = 200
    node_budget: int | None = DEFAULT_NODE_BUDGET
    responder: ResponderPolicy = field(default_factory=ResponderPolicy)

    def __post_init__(self) -> None:
        if self.k < 2:
            raise ConfigError("k must be >= 2")
        if not 0.0 <= self.a_min_m2 < self.a_max_m2:
            raise ConfigError("need 0 <= a_min_m2 < a_max_m2")
        if self.window_s <= 0.0 or self.max_rounds < 1 or self.ds_timeout_s <= 0.0:
            raise ConfigError("window_s and ds_timeout_s must be > 0, max_rounds >= 1")
        if not self.reuse_radius_m > 0.0 or not self.noise_region_m >= self.reuse_radius_m:
            raise ConfigError("need reuse_radius_m > 0 and noise_region_m >= reuse_radius_m")
        if not (self.hold_factor > 0.0 and self.max_hold_m >= self.reuse_radius_m):
            raise ConfigError("need hold_factor > 0 and max_hold_m >= reuse_radius_m")
        if self.max_candidates < self.k - 1:
            raise ConfigError("max_candidates must be >= k - 1")
        if self.k == 2 and AreaMode(self.area) is AreaMode.HULL:
            raise ConfigError("two points span no hull area: use k >= 3 or area='bbox'")

    @property
    def side_m(self) -> int:
        """Discovery cell side in metres."""
        return self.cell_side_m or cell_side_for(self.a_max_m2, self.max_distance_m)

    @property
    def reach_m(self) -> float:
        """Largest distance (m) between perturbed points at which replies count."""
        return float(self.max_distance_m if self.max_distance_m is not None else self.side_m)

    @property
    def radius_base_m(self) -> float:
        """First step of the DS radius ladder: ``√(A_max/π) + 3·σ`` unless configured."""
        if self.query_radius_m is not None:
            return self.query_radius_m
        return math.sqrt(self.a_max_m2 / math.pi) + 3.0 * self.mechanism.scale_m

    @property
    def cover_m(self) -> float:
        """How far (m) beyond its perturbed point the disc sent to DS reaches: ``4σ`` (the
        noise exceeds it with probability e⁻⁸ ≈ 3e-4 for the Gaussian, 0.8 % for planar
        Laplace of the same σ) plus two place widths (keyed noise moves the point to the
        place's centre) plus ``radius_margin_m``, unless ``radius_cover_m`` is set."""
        if self.radius_cover_m is not None:
            return self.radius_cover_m
        return 4.0 * self.mechanism.scale_m + 2.0 * self.reuse_radius_m + self.radius_margin_m


def query_radius(extent_m: float, config: PeerConfig) -> float:
    """The DS radius for a group whose members lie within ``extent_m`` metres of its centroid:
    the ladder step covering ``extent_m + config.cover_m``. A function of the group (which its
    members and DS may know) and of the configuration, never of the true position, so neither
    the radius nor anything that follows it says how far the true position is from the
    centroid (the distance oracle of issue 20)."""
    return radius_ladder(extent_m + config.cover_m, config.radius_base_m)


def radius_ladder(distance_m: float, base_m: float) -> float:
    """Smallest ``base_m·2^j`` (j ≥ 0) that is ≥ ``distance_m``, capped at 100 km."""
    r = max(base_m, 1.0)
    while r < distance_m and r < MAX_RADIUS_M:
        r *= 2.0
    return min(r, MAX_RADIUS_M)
