"""Operator configuration of the services (TOML, validated by pydantic).

Example ``locpriv.toml`` (every key optional; defaults shown)::

    prefix = "locpriv"                 # topic prefix (topics live under {prefix}/v1/)

    [projection]                       # origin of the local metric projection (aeqd), degrees
    lat0_deg = 41.3874
    lon0_deg = 2.1686

    [tiles]                            # sharding: square tiles of the projection's plane
    side_m = 0.0                       # tile side, metres (e.g. 2000-10000); 0: one tile

    [cloak]                            # operator bounds and defaults of cloaking requests
    k_min = 2
    k_max = 100
    a_min_floor_m2 = 0.0
    a_max_ceiling_m2 = 1e9
    max_delay_s_bound = 60.0
    session_s_bound = 14400.0          # longest historical-k-anonymity session a request may ask
    session_margin_m = 100.0           # widest margin a session vouches for (older fix: stale)
    session_speed_m_s = 3.0            # margin: this speed x age of the member's last update ...
    session_speed_factor = 1.25        # ... or this x the fastest she was seen to move, if more
    session_spare = 1                  # worst-case regions cover k + this many members ...
    session_spare_fast_users = 1       # ... while this many users move faster than above
    session_pool_factor = 2            # a session's set starts with this many x k members ...
    session_shrink_requests = 10       # ... and narrows to k over this many answered requests
    session_candidate_factor = 32      # first members chosen among this many x k (motion-ranked)
    session_horizon_s = 1800.0         # members ranked by expected distance over this; 0: now
    session_forecast_s = 300.0         # ... trusting straight-line forecasts this long
    session_joint_box = true           # ... keeping those whose joint box stays smallest
    session_keep_bystanders = true     # members a region covers with margin stay in the set
    session_rekey_factor = 0.0         # >0: restart a session past this x the shared region
    session_slack = 2                  # >0: or k + this many members, thin margins, self-audit
    session_drift_m_s = 1.0            # thin margin: floor + this x age of the member's update
    session_floor_m = 5.0              # ... (m); also the self-audit's tolerance
    session_risk = 0.0001              # thinner margins for members who stayed put, within this
    session_requester_quantile = "draw"  # session regions keep the requester >= the margin
                                       # of another member drawn at random off their edges
                                       # (or this quantile, in [0, 1], of the others')
    session_adopt = true               # everyone the first region covers joins the set
                                       # (smaller regions, linkable restarts: see algorithms.md)
    session_fix_error_m = 20.0         # how far a fix may lie from its device, when its
                                       # report gives no accuracy_m (m): in every margin
    session_accuracy_factor = 2.0      # ... else this x the accuracy_m it gives
    session_fresh_s = 2.0              # >0: a session request first asks members whose last
                                       # report is older than this for a fresh one ...
    session_fix_wait_s = 2.0           # ... waiting at most this long for them (s) ...
    session_fix_every_s = 10.0         # ... asking any one device at most once per this (s)
    session_tile_factor = 1.01         # >1: session regions are tiles of this x sqrt(a_min)
                                       # around a fixed set (0: one box; algorithms.md)
    session_tile_spare = 2             # ... the set holds k + this many members
    session_tile_min_m = 100.0         # ... tiles never smaller, whatever a_min is asked
    default_k = 10
    default_a_min_m2 = 1e4
    default_a_max_m2 = 4e6
    default_max_delay_s = 5.0
    default_session_s = 1800.0         # >0: requests without a profile get historical
                                       # k-anonymity (sessions of tiles: algorithms.md)
    user_ttl_s = 300.0                 # forget users silent for this long
    epoch_s = 1.0                      # snapshot period of the cloaker
    world_half_m = 25000.0             # partitioned extent: a square of this half side

    [limits]
    max_queue = 1000                   # inbound requests waiting; overflow -> "overloaded"
    max_pending = 10000                # requests waiting for DS or a temporal cloak
    max_payload_bytes = 65536
    ds_timeout_s = 5.0                 # mediator -> DS; then "upstream_timeout"
    publishers = 16                    # concurrent outgoing publishes
    requests_per_s = 5.0               # per user: P1-P3 requests refilled per second ...
    burst = 20.0                       # ... up to this many at once; beyond: "rate_limited"
    max_pending_per_user = 10          # a user's unanswered requests; beyond: "rate_limited"
    updates_per_s = 2.0                # per user: location updates refilled per second ...
    update_burst = 20.0                # ... up to this many at once; beyond: dropped
    ds_max_answer_pois = 2000          # DS: a query whose estimated answer (POIs, from the
                                       # index, before the work) exceeds it: "bad_parameters"
    ds_max_wait_s = 1.0                # DS: a query that waited longer in its lane: "overloaded"
    ds_service_weight = 8              # DS: svc/ds/query (mediator) turns per public ds/query turn
    ds_public_per_s = 500.0            # DS: public ds/query messages per second (all apps) ...
    ds_public_burst = 1000.0           # ... up to this many at once; beyond: dropped, counted

    [state]                            # what lets accepted requests survive a crash
    token_key_file = ""                # 64 hex digits shared by the anonymizer processes: a
                                       # path or "credential:NAME" (systemd credential, below);
                                       # empty: a key per process
    answer_key_file = ""               # 64 hex digits shared by DS and the anonymizers (path or
                                       # "credential:NAME"): DS tags its answers, the mediator
                                       # relays only tagged ones; empty: answers not checked
    journal_file = ""                  # pending temporal cloaks, answered at the next start
    sessions_file = ""                 # sessions kept over restarts, crashes (needs token_key_file)

    [mqtt]
    client_id = ""                     # empty: "locpriv-anonymizer-<secret>", derived from the
    ds_client_id = ""                  # broker password (locpriv.service.identity); an id set
                                       # here is used as is and must be kept secret
    shared_group = ""                  # e.g. "anonymizers": $share/<group>/... (mosquitto only)
    clean_session = false              # persistent session: queued QoS 1 requests survive
    publish_timeout_s = 30.0           # how long a publish waits through a broker outage
    backoff_max_s = 5.0
    ca_file = ""                       # mqtts://: CA bundle (PEM) to verify the broker with;
                                       # empty: the system's CAs. The host name is verified.

The broker password never sits in this file or in the URL on the command line: ``locpriv
serve --password-file FILE`` or the environment variable ``LOCPRIV_BROKER_PASSWORD``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from locpriv.core.cloak.cloaker import CloakConfig, CloakParams
from locpriv.core.cloak.types import ParamError
from locpriv.core.geo import LocalProjection
from locpriv.core.tiles import Tiling
from locpriv.credentials import credential_name
from locpriv.errors import ConfigError
from locpriv.wire.messages import DeploymentConfig
from locpriv.wire.topics import Topics

__all__ = [
    "CloakSection",
    "LimitsSection",
    "MqttSection",
    "ProjectionSection",
    "ServiceConfig",
    "StateSection",
    "TilesSection",
    "load_config",
]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProjectionSection(_Section):
    """Origin of the deployment's local projection, degrees."""

    lat0_deg: float = Field(41.3874, ge=-90, le=90)
    lon0_deg: float = Field(2.1686, ge=-180, le=180)


class TilesSection(_Section):
    """Square tiles of the local projection's plane (metres); ``side_m = 0``: one tile.

    Cloaks use the users of the requester's tile only; ``locpriv serve anonymizer --shard I/N``
    serves the tiles rendezvous hashing gives shard I (docs/operations.md, "Sharding")."""

    side_m: float = Field(0.0, ge=0, le=1e6)


class CloakSection(_Section):
    """Bounds (requests outside are ``bad_parameters``) and defaults of cloaking."""

    k_min: int = Field(2, ge=1)
    k_max: int = Field(100, ge=1)
    a_min_floor_m2: float = Field(0.0, ge=0)
    a_max_ceiling_m2: float = Field(1e9, gt=0)
    max_delay_s_bound: float = Field(60.0, ge=0)
    session_s_bound: float = Field(4 * 3600.0, ge=0)
    session_margin_m: float = Field(100.0, ge=0)
    session_speed_m_s: float = Field(3.0, ge=0, le=1000)
    session_speed_factor: float = Field(1.25, ge=0, le=100)
    session_spare: int = Field(1, ge=0, le=1000)
    session_spare_fast_users: int = Field(1, ge=0, le=1_000_000_000)
    session_pool_factor: int = Field(2, ge=1, le=100)
    session_shrink_requests: int = Field(10, ge=1, le=10_000)
    session_candidate_factor: int = Field(32, ge=1, le=100)
    session_horizon_s: float = Field(1800.0, ge=0, le=86_400)
    session_forecast_s: float = Field(300.0, ge=0, le=86_400)
    session_joint_box: bool = True
    session_keep_bystanders: bool = True
    session_rekey_factor: float = Field(0.0, ge=0, le=1e6)
    session_slack: int = Field(2, ge=0, le=1000)
    session_drift_m_s: float = Field(1.0, ge=0, le=1000)
    session_floor_m: float = Field(5.0, ge=0, le=10_000)
    session_risk: float = Field(1e-4, gt=0, lt=1)
    session_requester_quantile: (
        Annotated[float, Field(ge=0, le=1, strict=True)] | Literal["draw"]
    ) = "draw"
    session_adopt: bool = True
    session_fix_error_m: float = Field(20.0, ge=0, le=10_000)
    session_accuracy_factor: float = Field(2.0, ge=0, le=100)
    session_fresh_s: float = Field(2.0, ge=0, le=86_400)
    session_fix_wait_s: float = Field(2.0, ge=0, le=60)
    session_tile_factor: float = Field(1.01, ge=0, le=100)
    session_tile_spare: int = Field(2, ge=0, le=1000)
    session_tile_min_m: float = Field(100.0, ge=0, le=100_000)
    session_fix_every_s: float = Field(10.0, ge=0, le=86_400)
    default_k: int = Field(10, ge=1)
    default_a_min_m2: float = Field(1e4, ge=0)
    default_a_max_m2: float = Field(4e6, gt=0)
    default_max_delay_s: float = Field(5.0, ge=0)
    default_session_s: float = Field(1800.0, ge=0)
    user_ttl_s: float = Field(300.0, gt=0)
    epoch_s: float = Field(1.0, gt=0)
    world_half_m: float = Field(25_000.0, gt=0)
    max_partitions: int = Field(64, ge=1)


class LimitsSection(_Section):
    """Queue bounds, sizes (bytes), timeouts (seconds) and per-user request limits
    (``requests_per_s`` refilled up to ``burst``; at most ``max_pending_per_user``
    unanswered requests), beyond which a request is answered ``rate_limited``; location
    updates beyond ``updates_per_s`` (refilled up to ``update_burst``) are dropped."""

    max_queue: int = Field(1000, ge=1)
    max_pending: int = Field(10_000, ge=1)
    max_payload_bytes: int = Field(64 * 1024, ge=256)
    ds_timeout_s: float = Field(5.0, gt=0)
    publishers: int = Field(16, ge=1, le=1024)
    requests_per_s: float = Field(5.0, gt=0)
    burst: float = Field(20.0, ge=1)
    max_pending_per_user: int = Field(10, ge=1)
    updates_per_s: float = Field(2.0, gt=0)
    update_burst: float = Field(20.0, ge=1)
    ds_max_answer_pois: int = Field(2000, ge=1, le=10_000)
    ds_max_wait_s: float = Field(1.0, gt=0)
    ds_service_weight: int = Field(8, ge=1, le=1000)
    ds_public_per_s: float = Field(500.0, gt=0)
    ds_public_burst: float = Field(1000.0, ge=1)


class StateSection(_Section):
    """Files that let accepted requests survive a crash (paths; empty: not used).

    ``token_key_file``: the key sealing the mediator's DS correlation ids (64 hex digits), so
    that a restarted or another anonymizer relays DS's answers. ``answer_key_file``: the key DS
    tags its answers to the mediator with and the mediator checks them with (64 hex digits); DS
    and every anonymizer process hold it, DS never holds the token key. Each key file is a path
    or ``credential:NAME``: the file NAME in ``$CREDENTIALS_DIRECTORY``, where systemd puts the
    copies a unit's ``LoadCredential=`` lines give that unit only (locpriv.credentials); a
    service not given that credential refuses to start. ``journal_file``: pending temporal
    cloaks, answered ``unavailable`` by the next run. None ever holds a position or a user id.
    ``sessions_file``: the anonymizer's historical k-anonymity sessions, written before it
    publishes answers made after a session changed (and at a clean stop) and read at the next
    start, after a crash too, so that sessions go on with the same sets: members' ids and the
    fixes of those still to be audited, encrypted under a key derived from the token key (it
    needs ``token_key_file``).
    """

    token_key_file: str = ""
    answer_key_file: str = ""
    journal_file: str = ""
    sessions_file: str = ""

    @field_validator("token_key_file", "answer_key_file")
    @classmethod
    def _credential_name(cls, value: str) -> str:
        credential_name(value)  # a bad credential name fails at load, not at first use
        return value


class MqttSection(_Section):
    """Broker session settings of the services."""

    client_id: str = Field("", pattern=r"^[A-Za-z0-9_.:@+-]{0,128}$")
    """The anonymizer's client id; empty: derived from the broker password, unguessable
    (:func:`locpriv.service.identity.service_client_id`). A set id must be kept secret: any
    login that connects with it takes the service's broker session over."""
    ds_client_id: str = Field("", pattern=r"^[A-Za-z0-9_.:@+-]{0,128}$")
    """DS's client id; empty: derived like ``client_id``."""
    shared_group: str = Field("", pattern=r"^[A-Za-z0-9_.:@+-]{0,128}$")
    clean_session: bool = False
    publish_timeout_s: float = Field(30.0, gt=0)
    backoff_max_s: float = Field(5.0, gt=0)
    ca_file: str = ""


class ServiceConfig(_Section):
    """Everything an anonymizer/mediator or DS process needs besides the broker URL."""

    prefix: str = "locpriv"
    projection: ProjectionSection = ProjectionSection()
    tiles: TilesSection = TilesSection()
    cloak: CloakSection = CloakSection()
    limits: LimitsSection = LimitsSection()
    mqtt: MqttSection = MqttSection()
    state: StateSection = StateSection()

    @property
    def topics(self) -> Topics:
        """Topic names under :attr:`prefix`."""
        return Topics(self.prefix)

    def make_projection(self) -> LocalProjection:
        """The deployment's local projection (metres)."""
        return LocalProjection(self.projection.lat0_deg, self.projection.lon0_deg)

    def tiling(self) -> Tiling:
        """The deployment's tiles (one tile when ``[tiles] side_m`` is 0)."""
        return Tiling(self.tiles.side_m or None)

    def deployment_config(self) -> DeploymentConfig:
        """The retained message telling clients the projection and the tile side."""
        return DeploymentConfig(
            lat0_deg=self.projection.lat0_deg,
            lon0_deg=self.projection.lon0_deg,
            tile_m=self.tiles.side_m or None,
        )

    def check_tiles(self) -> None:
        """Raise ConfigError when a tile cannot hold the default profile's ``a_min_m2``."""
        side = self.tiles.side_m
        if side and side * side <= self.cloak.default_a_min_m2:
            raise ConfigError(
                f"[tiles] side_m = {side:g} m: a tile must be larger than default_a_min_m2"
            )

    def cloak_config(self) -> CloakConfig:
        """The cloaking core's configuration (raises ConfigError if inconsistent; a default
        outside the bounds names its key, e.g. ``cloak.default_session_s``)."""
        try:
            return self._cloak_config()
        except ParamError as exc:
            raise ConfigError(f"cloak.default_{exc.param}: {exc}") from None

    def _cloak_config(self) -> CloakConfig:
        c = self.cloak
        h = c.world_half_m
        return CloakConfig(
            k_min=c.k_min,
            k_max=c.k_max,
            a_min_floor_m2=c.a_min_floor_m2,
            a_max_ceiling_m2=c.a_max_ceiling_m2,
            max_delay_s_bound=c.max_delay_s_bound,
            session_s_bound=c.session_s_bound,
            session_margin_m=c.session_margin_m,
            session_speed_m_s=c.session_speed_m_s,
            session_speed_factor=c.session_speed_factor,
            session_spare=c.session_spare,
            session_spare_fast_users=c.session_spare_fast_users,
            session_pool_factor=c.session_pool_factor,
            session_shrink_requests=c.session_shrink_requests,
            session_candidate_factor=c.session_candidate_factor,
            session_horizon_s=c.session_horizon_s,
            session_forecast_s=c.session_forecast_s,
            session_joint_box=c.session_joint_box,
            session_keep_bystanders=c.session_keep_bystanders,
            session_rekey_factor=c.session_rekey_factor,
            session_slack=c.session_slack,
            session_drift_m_s=c.session_drift_m_s,
            session_floor_m=c.session_floor_m,
            session_risk=c.session_risk,
            session_requester_quantile=c.session_requester_quantile,
            session_adopt=c.session_adopt,
            session_fix_error_m=c.session_fix_error_m,
            session_accuracy_factor=c.session_accuracy_factor,
            session_fresh_s=c.session_fresh_s,
            session_fix_wait_s=c.session_fix_wait_s,
            session_fix_every_s=c.session_fix_every_s,
            session_tile_factor=c.session_tile_factor,
            session_tile_spare=c.session_tile_spare,
            session_tile_min_m=c.session_tile_min_m,
            default=CloakParams(
                k=c.default_k,
                a_min_m2=c.default_a_min_m2,
                a_max_m2=c.default_a_max_m2,
                max_delay_s=c.default_max_delay_s,
                session_s=c.default_session_s,
            ),
            user_ttl_s=c.user_ttl_s,
            world=(-h, -h, h, h),
            epoch_s=c.epoch_s,
            max_pending=self.limits.max_pending,
            max_partitions=c.max_partitions,
        )


def load_config(path: str | Path | None) -> ServiceConfig:
    """Read and validate a TOML file (None: all defaults). Raises ConfigError naming the key."""
    if path is None:
        return ServiceConfig()
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    try:
        config = ServiceConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ConfigError(f"{p}: {where}: {err['msg']}") from None
    try:
        Topics(config.prefix)
        config.cloak_config()
        config.check_tiles()
    except ValueError as exc:
        raise ConfigError(f"{p}: {exc}") from None
    return config
