"""Wire messages of Protocols 1-4: pydantic v2 models, one discriminated union.

Every message is a JSON object with a ``type`` discriminator and a schema version ``v``.
Models are frozen and forbid extra fields. Coordinates on the wire are WGS84 degrees
(``lat`` in [-90, 90], ``lon`` in [-180, 180], finite); distances are metres (``_m``),
areas square metres (``_m2``), durations seconds (``_s``) and instants Unix seconds (``t``).

Request/reply rides in the payload (``reply_to`` topic and ``correlation_id``) so that
MQTT 3.1.1 brokers such as amqtt work; services may add MQTT 5 properties where available.

Use :func:`decode` to turn bytes into a message (raising :class:`~locpriv.errors.DecodeError`
with a stable code and the offending field) and :func:`encode` for the reverse.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import from_json

from locpriv.errors import DecodeError, ErrorCode, RemoteError, remote_error

SCHEMA_VERSION: Final = 1
"""The wire schema version this code speaks."""
SUPPORTED_VERSIONS: Final = frozenset({SCHEMA_VERSION})
MAX_PAYLOAD_BYTES: Final = 64 * 1024
"""Default size limit of one payload in bytes; services may lower it."""
REPLY_MAX_BYTES: Final = 8 * 1024 * 1024
"""Size limit of replies (DS candidate sets may be large), bytes."""
MAX_ANSWER_POIS: Final = 10_000
"""Most POIs one ``QueryAnswer`` carries (DS answers ``bad_parameters`` beyond it)."""

Lat = Annotated[
    float, Field(ge=-90.0, le=90.0, allow_inf_nan=False, description="Latitude, WGS84 degrees")
]
Lon = Annotated[
    float, Field(ge=-180.0, le=180.0, allow_inf_nan=False, description="Longitude, WGS84 degrees")
]
Seconds = Annotated[
    float, Field(ge=0.0, allow_inf_nan=False, description="Unix time or duration, seconds")
]
Metres = Annotated[float, Field(ge=0.0, allow_inf_nan=False, description="Distance, metres")]
SquareMetres = Annotated[float, Field(ge=0.0, allow_inf_nan=False, description="Area, m²")]
Identifier = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@-]+$")]
UserId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:@-]+$",
        description="The sender; must equal the topic's last segment, which the broker binds"
        " to the authenticated username (else invalid_field)",
    ),
]
MAX_CORRELATION_ID: Final = 1024
"""Longest correlation id, characters, of a message to or from a user's own requests."""
MAX_ECHOED_ID: Final = 16384
"""Longest correlation id of a query to DS and of DS's answers (``ds_query``,
``query_answer``, ``error``), characters: a mediator's sealed token, which carries Protocol
1's region, takes ~700 for a box and up to ~6,000 for a session's 64 tiles."""
CorrelationId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CORRELATION_ID,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="Opaque id echoed in the reply",
    ),
]
EchoedId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_ECHOED_ID,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description=(
            "Opaque id echoed in the reply (up to 16384 characters: a mediator's sealed token;"
            " a user's own ids stay within 1024)"
        ),
    ),
]
ReplyTopic = Annotated[
    str,
    Field(
        min_length=1,
        max_length=256,
        pattern=r"^[A-Za-z0-9_.:@-]+(/[A-Za-z0-9_.:@-]+)*$",
        description=(
            "MQTT topic for the reply: levels of [A-Za-z0-9_.:@-], no wildcards, no empty level;"
            " services accept only {prefix}/v1/reply/{one segment} (DS's service lane,"
            " svc/ds/query: only {prefix}/v1/svc/reply/{one segment})"
        ),
    ),
]
Category = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_-]+$")]
AnswerTag = Annotated[str, Field(min_length=43, max_length=43, pattern=r"^[A-Za-z0-9_-]{43}$")]
_MAC_DOC: Final = (
    "DS -> mediator only (svc/reply): HMAC-SHA256 (base64url, no padding) under the answer key"
    " over 'locpriv/ds-answer/v1\\n' and this message encoded without mac; the mediator relays"
    " only answers whose mac checks, and never relays the mac"
)


class WireModel(BaseModel):
    """Base of every wire model: frozen, extra fields forbidden, finite floats."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Message(WireModel):
    """Base of every top-level message: carries the schema version ``v``."""

    v: int = Field(default=SCHEMA_VERSION, description="Schema version")


# --------------------------------------------------------------------------- parts


MAX_REGION_PARTS: Final = 63
"""Most extra rings (``Region.parts``) one region carries: 64 tiles in all, whose query to DS
with its mediator's sealed token stays well within :data:`MAX_PAYLOAD_BYTES`."""
Ring = Annotated[list[tuple[Lon, Lat]], Field(min_length=3, max_length=1024)]


def _distinct_ring(ring: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(set(ring)) < 3:
        raise ValueError("a region needs at least 3 distinct vertices")
    return ring


class Region(WireModel):
    """A region in WGS84 degrees: ``ring`` is a simple polygon ``[[lon, lat], ...]``, not closed.

    At least 3 distinct vertices; the area is given separately in m² by the producer. A region
    of tiles (sessions with ``[cloak] session_tile_factor`` > 0) lists its other tiles in
    ``parts``: the region is the union of ``ring`` and every part, which do not overlap.
    """

    ring: Ring
    parts: list[Ring] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REGION_PARTS,
        description=(
            "More simple polygons, each like ring and none overlapping another or ring: the"
            " region is their union (a session's tiles); absent for a single polygon"
        ),
    )

    @field_validator("ring")
    @classmethod
    def _distinct(cls, ring: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return _distinct_ring(ring)

    @field_validator("parts")
    @classmethod
    def _distinct_parts(
        cls, parts: list[list[tuple[float, float]]] | None
    ) -> list[list[tuple[float, float]]] | None:
        for ring in parts or []:
            _distinct_ring(ring)
        return parts

    @property
    def rings(self) -> list[list[tuple[float, float]]]:
        """Every ring of the region: ``ring`` first, then ``parts``."""
        return [self.ring, *(self.parts or [])]


class PrivacyProfile(WireModel):
    """Per-request cloaking parameters; the service clamps them to operator bounds."""

    k: int = Field(ge=1, le=10_000, description="Users in the region, requester included")
    a_min_m2: SquareMetres = Field(description="Region area lower bound, m² (strict)")
    a_max_m2: SquareMetres = Field(description="Region area upper bound, m² (strict)")
    max_delay_s: Seconds = Field(default=0.0, le=3600.0, description="Temporal tolerance, s")
    session_s: Seconds = Field(
        default=0.0,
        le=86_400.0,
        description=(
            "Historical k-anonymity: successive regions keep k of the same users while requests"
            " come less than session_s apart (0: every region on its own), s"
        ),
    )

    @field_validator("a_max_m2")
    @classmethod
    def _window(cls, a_max_m2: float, info: ValidationInfo) -> float:
        # a field validator (not a model one) so that the error names ``profile.a_max_m2``
        a_min_m2 = info.data.get("a_min_m2")
        if a_min_m2 is not None and not a_min_m2 < a_max_m2:
            raise ValueError("a_max_m2 must be larger than a_min_m2")
        return a_max_m2


class POI(WireModel):
    """A point of interest held by the location-based database server."""

    id: Identifier
    category: Category
    lat: Lat
    lon: Lon
    name: str = Field(default="", max_length=256)


class NearestQuery(WireModel):
    """The ``n`` nearest POIs of ``category``."""

    kind: Literal["nearest"] = "nearest"
    category: Category
    n: int = Field(ge=1, le=100)


class WithinQuery(WireModel):
    """POIs (of ``category`` when given) within ``radius_m`` metres."""

    kind: Literal["within"] = "within"
    category: Category | None = None
    radius_m: Metres = Field(gt=0.0, le=100_000.0)


Query: TypeAlias = Annotated[NearestQuery | WithinQuery, Field(discriminator="kind")]


class PointLocation(WireModel):
    """An exact point (Protocol 2)."""

    kind: Literal["point"] = "point"
    lat: Lat
    lon: Lon


class RegionLocation(WireModel):
    """A cloaked region (Protocols 1 and 3): DS answers for every point inside it."""

    kind: Literal["region"] = "region"
    region: Region


class CentroidLocation(WireModel):
    """A group centroid (Protocol 4): DS answers for every point within ``radius_m`` of it."""

    kind: Literal["centroid"] = "centroid"
    lat: Lat
    lon: Lon
    radius_m: Metres = Field(default=0.0, le=100_000.0)


DSLocation: TypeAlias = Annotated[
    PointLocation | RegionLocation | CentroidLocation, Field(discriminator="kind")
]


# ------------------------------------------------------------------------ messages


ACCURACY: Final = (
    "The fix's accuracy radius, metres, as the device reports it (a phone's 68 % radius);"
    " sessions keep the user twice that off their regions' edges, 20 m when not given, and"
    " others' sessions do not vouch for her when twice it exceeds the anonymizer's"
    " session_margin_m (100 m by default)"
)


class LocationUpdate(Message):
    """User -> anonymizer: the user's current exact position (never retained by the broker)."""

    type: Literal["location_update"] = "location_update"
    user_id: UserId
    lat: Lat
    lon: Lon
    t: Seconds = Field(description="When the position was taken, Unix seconds")
    accuracy_m: Metres | None = Field(default=None, description=ACCURACY)


TileId = Annotated[
    str,
    Field(
        max_length=24,
        pattern=r"^t-?[0-9]{1,9}_-?[0-9]{1,9}$",
        description="A tile: t{i}_{j} (see DeploymentConfig)",
    ),
]


class LocationLeave(Message):
    """User -> anonymizer: the user has left ``tile``. Sent on that tile's location topic when
    her next update goes to another tile, so the tile's owner (another shard, maybe) forgets
    her at once rather than after ``user_ttl_s``; ``tile`` must equal the topic's tile. A leave
    for a tile the user is not in (any more) changes nothing."""

    type: Literal["location_leave"] = "location_leave"
    user_id: UserId
    tile: TileId
    t: Seconds = Field(description="When the user left, Unix seconds")


class CloakRequest(Message):
    """User -> anonymizer (Protocol 3): ask for a cloaked region around the user.

    Without ``lat``/``lon`` the anonymizer uses the user's latest location update.
    """

    type: Literal["cloak_request"] = "cloak_request"
    correlation_id: CorrelationId
    reply_to: ReplyTopic
    user_id: UserId
    lat: Lat | None = None
    lon: Lon | None = None
    accuracy_m: Metres | None = Field(default=None, description=ACCURACY)
    profile: PrivacyProfile | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> CloakRequest:
        if (self.lat is None) != (self.lon is None):
            raise ValueError("give both lat and lon, or neither")
        return self


class CloakReply(Message):
    """Anonymizer -> user: the region, its area and the interval [t1, t2] it covers."""

    type: Literal["cloak_reply"] = "cloak_reply"
    correlation_id: CorrelationId
    region: Region
    area_m2: SquareMetres
    users: int = Field(ge=1, description="Current users inside the region (achieved k)")
    t1: Seconds
    t2: Seconds


class QueryRequest(Message):
    """User -> mediator (Protocols 1 and 2): a query with the user's exact location.

    ``attributes`` are key (quasi-identifier) attributes the app may attach; the mediator
    strips them, with ``user_id``, before anything reaches DS.
    """

    type: Literal["query_request"] = "query_request"
    correlation_id: CorrelationId
    reply_to: ReplyTopic
    user_id: UserId
    protocol: Literal[1, 2]
    lat: Lat
    lon: Lon
    accuracy_m: Metres | None = Field(default=None, description=ACCURACY)
    query: Query
    profile: PrivacyProfile | None = None
    attributes: dict[Identifier, str | int | float] = Field(default_factory=dict, max_length=64)


class QueryAnswer(Message):
    """Mediator or DS -> user: the answer to a query.

    ``candidates`` is true when ``pois`` is a superset to refine locally (region and
    centroid queries); the client library refines it with the exact location.
    """

    type: Literal["query_answer"] = "query_answer"
    correlation_id: EchoedId
    pois: list[POI] = Field(max_length=MAX_ANSWER_POIS)
    candidates: bool = False
    region: Region | None = None
    area_m2: SquareMetres | None = None
    users: int | None = Field(
        default=None, ge=1, description="Protocol 1: current users inside the region (achieved k)"
    )
    t1: Seconds | None = None
    t2: Seconds | None = None
    mac: AnswerTag | None = Field(default=None, description=_MAC_DOC)


class DSQuery(Message):
    """Anyone -> DS: a query at a point, region or centroid. Carries no user identity."""

    type: Literal["ds_query"] = "ds_query"
    correlation_id: EchoedId
    reply_to: ReplyTopic
    query: Query
    location: DSLocation


MAX_TOKEN_CHARS: Final = 1024
"""Longest base64url blind-RSA value on the wire (a 4096-bit signature takes 683)."""
Base64Url = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_TOKEN_CHARS,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Bytes, base64url without padding",
    ),
]
Period = Annotated[
    int,
    Field(
        ge=0,
        le=2**40,
        description="Pseudonym period: floor(Unix time / period_s) of the issuer's keys",
    ),
]


class PeerRequest(Message):
    """Device -> neighbours (Protocol 4): "send me your perturbed location".

    ``lat``/``lon`` are the requester's *perturbed* position; ``requester`` is a rotating
    pseudonym (``k`` + an Ed25519 public key). ``period`` and ``token``: the issuer's blind
    signature over (period, pseudonym) that certifies it; ``proof``: the pseudonym key's
    signature over this message, so a token cannot be replayed (docs/peer.md, §8).
    """

    type: Literal["peer_request"] = "peer_request"
    correlation_id: CorrelationId
    reply_to: ReplyTopic
    requester: Identifier
    lat: Lat
    lon: Lon
    t: Seconds
    max_distance_m: Metres | None = Field(default=None, le=100_000.0)
    period: Period | None = None
    token: Base64Url | None = None
    proof: Base64Url | None = None


class PeerReply(Message):
    """Neighbour -> device (Protocol 4): the responder's perturbed location; ``period``,
    ``token`` and ``proof`` certify its pseudonym ``responder`` as in :class:`PeerRequest`."""

    type: Literal["peer_reply"] = "peer_reply"
    correlation_id: CorrelationId
    responder: Identifier
    lat: Lat
    lon: Lon
    t: Seconds
    period: Period | None = None
    token: Base64Url | None = None
    proof: Base64Url | None = None


class IssueRequest(Message):
    """Device -> issuer on ``issue/{user_id}`` (Protocol 4 pseudonym tokens): a blinded
    message (RFC 9474) to sign with the key of ``period``. The issuer sees the login and the
    period, never the pseudonym (blinded)."""

    type: Literal["issue_request"] = "issue_request"
    correlation_id: CorrelationId
    reply_to: ReplyTopic
    user_id: UserId
    period: Period
    blinded_msg: Base64Url


class IssueAnswer(Message):
    """Issuer -> device: the blind signature of an :class:`IssueRequest`."""

    type: Literal["issue_answer"] = "issue_answer"
    correlation_id: CorrelationId
    period: Period
    blind_sig: Base64Url


class IssuerKey(WireModel):
    """One period's RSA public key: modulus ``n`` (big-endian, base64url) and exponent ``e``."""

    period: Period
    n: Base64Url
    e: int = Field(ge=3, le=2**32)


class IssuerKeys(Message):
    """Issuer -> everyone, retained on ``issuer/key``: the public keys of the current and
    next pseudonym periods (``period_s`` seconds each), the RFC 9474 variant, and how many
    tokens one login gets per period (``per_login``)."""

    type: Literal["issuer_keys"] = "issuer_keys"
    variant: Literal["RSABSSA-SHA384-PSS-Deterministic"] = "RSABSSA-SHA384-PSS-Deterministic"
    period_s: float = Field(
        gt=0.0, le=1.0e7, allow_inf_nan=False, description="Pseudonym period, seconds"
    )
    per_login: int = Field(ge=1, le=1000, description="Tokens one login gets per period")
    keys: list[IssuerKey] = Field(min_length=1, max_length=4)


class ProfileBounds(WireModel):
    """The operator's bounds of a privacy profile (``bad_parameters`` details): a profile is
    accepted when ``k_min <= k <= k_max``, ``a_min_floor_m2 <= a_min_m2``, ``a_min_m2 <
    world_area_m2``, ``a_max_m2 <= a_max_ceiling_m2``, ``max_delay_s <= max_delay_s_max`` and
    ``session_s <= session_s_max``."""

    k_min: int = Field(ge=1)
    k_max: int = Field(ge=1)
    a_min_floor_m2: SquareMetres
    a_max_ceiling_m2: SquareMetres
    world_area_m2: SquareMetres = Field(description="a_min_m2 must be below it, m²")
    max_delay_s_max: Seconds
    session_s_max: Seconds


class ErrorDetails(WireModel):
    """Machine-readable facts of an error that a client acts on (all optional).

    ``tile``: the tile that holds the request's position (``invalid_field``, ``field:
    "tile"``): publish again on that tile's topic. ``bounds``: the operator's profile bounds
    (``bad_parameters``, ``field: "profile.<name>"``): clamp the profile and ask again."""

    tile: TileId | None = None
    bounds: ProfileBounds | None = None


class ErrorReply(Message):
    """Any service -> requester, or to the service's error topic: a rejected message.
    ``field`` is the offending field as a dotted path (``profile.k``, ``query.n``,
    ``location.region.ring.1.1``) or ``tile`` for the topic's tile segment; ``details``
    carries what a client needs to act on some errors (see :class:`ErrorDetails`)."""

    type: Literal["error"] = "error"
    correlation_id: EchoedId | None = None
    code: ErrorCode
    reason: str = Field(max_length=1024)
    field: str | None = Field(default=None, max_length=256)
    details: ErrorDetails | None = None
    mac: AnswerTag | None = Field(default=None, description=_MAC_DOC)

    def exception(self) -> RemoteError:
        """The exception a client raises for this reply (:func:`locpriv.errors.remote_error`),
        with ``details`` as a plain dict."""
        details = None if self.details is None else self.details.model_dump(exclude_none=True)
        return remote_error(self.code, self.reason, self.field, details)


class DeploymentConfig(Message):
    """Services -> everyone, retained on ``{prefix}/v1/config``: what a client needs to put
    its requests on the right topics. ``tile_m`` is the side of the square tiles of the local
    azimuthal-equidistant projection centred on (``lat0_deg``, ``lon0_deg``); a position's
    tile is ``t{i}_{j}`` with ``i*tile_m <= x < (i+1)*tile_m`` and ``j*tile_m <= y <
    (j+1)*tile_m`` in its projected metres (x east, y north): ``floor(x / tile_m)``, corrected
    by one where the division rounds across an integer. Without ``tile_m`` every position is
    in tile ``t0_0``."""

    type: Literal["deployment_config"] = "deployment_config"
    lat0_deg: Lat = Field(description="Projection origin, latitude, WGS84 degrees")
    lon0_deg: Lon = Field(description="Projection origin, longitude, WGS84 degrees")
    tile_m: float | None = Field(
        default=None, gt=0.0, le=1.0e7, allow_inf_nan=False, description="Tile side, metres"
    )


class FixWanted(Message):
    """Anonymizer -> one device, on ``{prefix}/v1/fix/{user_id}``: send a fresh
    :class:`LocationUpdate` now. Asked of the members of a historical-k-anonymity session
    whose last report is old, before the anonymizer answers a request of that session (a fresh
    report keeps a member off the region's edges by metres instead of tens of metres:
    docs/algorithms.md). ``within_s``: how long the anonymizer waits for it; a report after
    that is still welcome, as any update is. Only the anonymizer's account writes the topic."""

    type: Literal["fix_wanted"] = "fix_wanted"
    within_s: float = Field(ge=0.0, le=60.0, allow_inf_nan=False, description="Seconds")


AnyMessage: TypeAlias = Annotated[
    LocationUpdate
    | LocationLeave
    | CloakRequest
    | CloakReply
    | QueryRequest
    | QueryAnswer
    | DSQuery
    | PeerRequest
    | PeerReply
    | ErrorReply
    | DeploymentConfig
    | IssueRequest
    | IssueAnswer
    | IssuerKeys
    | FixWanted,
    Field(discriminator="type"),
]
"""The discriminated union of every wire message."""

MESSAGE_TYPES: Final[dict[str, type[Message]]] = {
    m.model_fields["type"].default: m
    for m in (
        LocationUpdate,
        LocationLeave,
        CloakRequest,
        CloakReply,
        QueryRequest,
        QueryAnswer,
        DSQuery,
        PeerRequest,
        PeerReply,
        ErrorReply,
        DeploymentConfig,
        IssueRequest,
        IssueAnswer,
        IssuerKeys,
        FixWanted,
    )
}

_ADAPTER: Final[TypeAdapter[Message]] = TypeAdapter(AnyMessage)


def encode(message: Message) -> bytes:
    """Serialise a message to compact UTF-8 JSON bytes."""
    return message.model_dump_json(exclude_none=True).encode()


def _field_path(loc: tuple[int | str, ...]) -> str:
    # pydantic puts the discriminator value first in union locations: drop it.
    parts = [str(p) for p in loc]
    if parts and parts[0] in MESSAGE_TYPES:
        parts = parts[1:]
    # likewise the tag of nested unions (query.<kind>.n, location.<kind>.lat)
    out: list[str] = []
    skipped = False
    for part in parts:
        if not skipped and out and part in _NESTED_UNIONS.get(out[-1], ()):
            skipped = True
            continue
        skipped = False
        out.append(part)
    return ".".join(out)


_NESTED_UNIONS: Final = {
    "query": frozenset({"nearest", "within"}),
    "location": frozenset({"point", "region", "centroid"}),
}


def decode(
    payload: bytes | str,
    *,
    expect: tuple[type[Message], ...] | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
) -> Message:
    """Parse and validate one wire message.

    Raises :class:`~locpriv.errors.DecodeError` whose ``code`` is one of ``too_large``,
    ``malformed``, ``unsupported_version``, ``unknown_type``, ``invalid_field`` or
    ``wrong_type`` (when ``expect`` is given and the type is not in it), and whose
    ``field`` names the offending field.
    """
    raw = payload.encode() if isinstance(payload, str) else payload
    if len(raw) > max_bytes:
        raise DecodeError(ErrorCode.TOO_LARGE, f"payload of {len(raw)} bytes exceeds {max_bytes}")
    if b"NaN" not in raw and b"Infinity" not in raw:
        # the common case, one parse: a valid message of a supported version
        try:
            valid: Message | None = _ADAPTER.validate_json(raw, strict=True)
        except ValidationError:
            valid = None
        if valid is not None and valid.v in SUPPORTED_VERSIONS:
            return _expected(valid, expect)
    # otherwise parse again step by step, to say precisely what is wrong. The parser is
    # pydantic-core's: nesting deeper than its recursion limit and numbers out of range are
    # ValueErrors, never a RecursionError or a crash.
    try:
        obj: Any = from_json(raw, allow_inf_nan=True)
    except ValueError as exc:
        raise DecodeError(ErrorCode.MALFORMED, f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise DecodeError(ErrorCode.MALFORMED, "a message must be a JSON object")
    version = obj.get("v", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise DecodeError(ErrorCode.INVALID_FIELD, "must be an integer", field="v")
    if version not in SUPPORTED_VERSIONS:
        raise DecodeError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"schema version {str(version)[:20]} is not supported"
            f" (speaks {sorted(SUPPORTED_VERSIONS)})",
            field="v",
        )
    kind = obj.get("type")
    if kind is None:
        raise DecodeError(ErrorCode.INVALID_FIELD, "missing message type", field="type")
    if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
        raise DecodeError(
            ErrorCode.UNKNOWN_TYPE, f"unknown message type {str(kind)[:64]!r}", field="type"
        )
    _reject_non_finite(obj, ())
    try:
        message = _ADAPTER.validate_json(raw, strict=True)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise DecodeError(
            ErrorCode.INVALID_FIELD, err["msg"], field=_field_path(err["loc"])
        ) from None
    return _expected(message, expect)


def _expected(message: Message, expect: tuple[type[Message], ...] | None) -> Message:
    """``message``, or ``wrong_type`` when ``expect`` is given and it is not one of them."""
    if expect is not None and not isinstance(message, expect):
        names = ", ".join(sorted(m.model_fields["type"].default for m in expect))
        kind = type(message).model_fields["type"].default
        raise DecodeError(
            ErrorCode.WRONG_TYPE, f"{kind!r} is not accepted here (expects {names})", field="type"
        )
    return message


def _reject_non_finite(obj: Any, path: tuple[str, ...]) -> None:
    """The lenient parse admits NaN, Infinity and overflowing floats; the wire does not."""
    if isinstance(obj, float) and not math.isfinite(obj):
        raise DecodeError(ErrorCode.INVALID_FIELD, "must be a finite number", field=".".join(path))
    if isinstance(obj, dict):
        for key, value in obj.items():
            _reject_non_finite(value, (*path, str(key)))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            _reject_non_finite(value, (*path, str(i)))


def json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema of every message type, keyed by file stem (``message`` is the union)."""
    schemas: dict[str, dict[str, Any]] = {"message": _ADAPTER.json_schema()}
    for name, model in MESSAGE_TYPES.items():
        schemas[name] = model.model_json_schema()
    return schemas


__all__ = [
    "MAX_PAYLOAD_BYTES",
    "MAX_REGION_PARTS",
    "MAX_TOKEN_CHARS",
    "MESSAGE_TYPES",
    "POI",
    "REPLY_MAX_BYTES",
    "SCHEMA_VERSION",
    "AnyMessage",
    "CentroidLocation",
    "CloakReply",
    "CloakRequest",
    "DSLocation",
    "DSQuery",
    "DeploymentConfig",
    "ErrorDetails",
    "ErrorReply",
    "FixWanted",
    "IssueAnswer",
    "IssueRequest",
    "IssuerKey",
    "IssuerKeys",
    "LocationLeave",
    "LocationUpdate",
    "Message",
    "NearestQuery",
    "PeerReply",
    "PeerRequest",
    "PointLocation",
    "PrivacyProfile",
    "ProfileBounds",
    "Query",
    "QueryAnswer",
    "QueryRequest",
    "Region",
    "RegionLocation",
    "WireModel",
    "WithinQuery",
    "decode",
    "encode",
]
