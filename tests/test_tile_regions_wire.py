"""A session's region of tiles on the wire: the anonymizer sends it tile by tile
(``Region.parts``), DS answers every point of every tile, the user's checks accept it, and a
peer that reads only ``ring`` cannot mistake one tile for the region."""

from __future__ import annotations

import base64
import json
import math
import secrets

import numpy as np
import pytest
import shapely
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import ValidationError
from shapely.geometry import Point, Polygon

from locpriv.core.cloak.cloaker import CloakConfig, Cloaker, CloakParams
from locpriv.core.geo import LocalProjection, LonLat, area_m2, region_from_wire, region_to_wire
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois, refine
from locpriv.errors import DecodeError
from locpriv.protocols.ds import DSCore
from locpriv.protocols.p2 import Mediator, RegionInfo
from locpriv.protocols.p3 import Anonymizer
from locpriv.protocols.sanity import Asked, region_problem
from locpriv.protocols.seal import Sealer
from locpriv.protocols.trusted import TrustedCore
from locpriv.wire.messages import (
    MAX_ECHOED_ID,
    MAX_REGION_PARTS,
    DSQuery,
    LocationUpdate,
    NearestQuery,
    PrivacyProfile,
    QueryAnswer,
    QueryRequest,
    Region,
    RegionLocation,
    WireModel,
    WithinQuery,
    decode,
    encode,
)
from locpriv.wire.topics import Topics

TOPICS = Topics("test")
PROJ = LocalProjection(41.3874, 2.1686)
INDEX = POIIndex(load_pois(DEFAULT_POIS), PROJ)
T0 = 1_700_000_000.0
PROFILE = PrivacyProfile(k=4, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=0.0, session_s=600.0)


def _core() -> TrustedCore:
    config = CloakConfig(
        world=(-20_000.0, -20_000.0, 20_000.0, 20_000.0),
        epoch_s=1.0,
        session_tile_factor=1.01,
        default=CloakParams(k=4, a_min_m2=1e4, a_max_m2=5e7, max_delay_s=0.0),
    )
    mediator = Mediator(
        ds_topic=TOPICS.ds_query, reply_to=TOPICS.reply("mediator"), ds_timeout_s=5.0
    )
    return TrustedCore(Anonymizer(Cloaker(config), PROJ), mediator)


def _populate(core: TrustedCore, now: float, xy: np.ndarray) -> None:
    for i, (x, y) in enumerate(xy):
        lon, lat = PROJ.point_to_lonlat(float(x), float(y))
        core.receive(LocationUpdate(user_id=f"u:{i}", lat=lat, lon=lon, t=now), now)


@pytest.mark.parametrize("spread_m", [600.0, 2500.0])
@pytest.mark.parametrize(
    "query", [NearestQuery(category="cafe", n=3), WithinQuery(category="cafe", radius_m=150.0)]
)
def test_p1_region_of_tiles_goes_to_ds_and_answers_every_tile(
    spread_m: float, query: NearestQuery | WithinQuery
) -> None:
    """Protocol 1 with a session in an anonymizer of tiles: DS gets the region as tiles (no
    identity, no exact point), its candidates hold the exact answer at the user's position and
    at points all over every tile (corners included), and the user's checks accept the region
    and its area (the sum of the tiles')."""
    rng = np.random.default_rng(int(spread_m))
    xy = rng.uniform(-spread_m, spread_m, size=(60, 2))
    core, ds = _core(), DSCore(INDEX)
    _populate(core, T0, xy)
    _populate(core, T0 + 1.0, xy)
    lon, lat = PROJ.point_to_lonlat(float(xy[0, 0]), float(xy[0, 1]))
    ask = QueryRequest(
        correlation_id="cid-1",
        reply_to=TOPICS.reply("c-1"),
        user_id="u:0",
        protocol=1,
        lat=lat,
        lon=lon,
        query=query,
        profile=PROFILE,
    )
    now = T0 + 1.5
    sends = core.receive(ask, now)
    assert len(sends) == 1
    forward = sends[0].message
    assert isinstance(forward, DSQuery) and isinstance(forward.location, RegionLocation)
    assert "u:0" not in encode(forward).decode()  # ":" is in no sealed token
    wire = forward.location.region
    assert wire.parts, "a session of tiles sends its tiles"
    region = region_from_wire(wire)
    assert region.is_valid and region.covers(shapely.Point(lon, lat))
    (reply,) = ds.receive(decode(encode(forward)), now)
    (answer,) = core.receive(reply.message, now)
    msg = answer.message
    assert isinstance(msg, QueryAnswer) and msg.candidates and msg.region == wire
    assert msg.area_m2 is not None
    assert math.isclose(msg.area_m2, area_m2(region), rel_tol=1e-4)
    asked = Asked(position=LonLat(lon, lat), query=query, profile=PROFILE, sent=now)
    problem = region_problem(asked, region, msg.area_m2, msg.users, msg.t1, msg.t2, now, PROJ)
    assert problem is None, problem
    for ring in wire.rings:
        tile = shapely.Polygon(ring)
        x0, y0, x1, y1 = tile.bounds
        for fx, fy in [(0, 0), (1, 1), (0, 1), (1, 0), (0.5, 0.5), (0.1, 0.9)]:
            px, py = x0 + fx * (x1 - x0), y0 + fy * (y1 - y0)
            exact = refine(INDEX.pois, query, lon=px, lat=py)
            assert refine(msg.pois, query, lon=px, lat=py) == exact


def test_region_info_carries_the_tiles_through_a_sealed_token() -> None:
    """Protocol 1's region rides in the mediator's sealed token: its tiles come back."""
    tiles = shapely.MultiPolygon(
        [
            shapely.box(2.1686, 41.3874, 2.1698, 41.3883),
            shapely.box(2.1698, 41.3874, 2.171, 41.3883),
        ]
    )
    info = RegionInfo(region_to_wire(tiles), 2e4, T0, T0 + 1, 5)
    back = RegionInfo.from_json(info.to_json())
    assert back == info and back.region.parts
    plain = RegionInfo(region_to_wire(tiles.geoms[0]), 1e4, T0, T0 + 1, 5)
    assert RegionInfo.from_json(plain.to_json()) == plain and len(plain.to_json()) == 5


def test_a_peer_that_reads_only_ring_refuses_parts() -> None:
    """A region with parts under a model without the field (a peer from before it) is an
    invalid field, never a smaller region; and parts must each be a polygon."""
    tiles = shapely.MultiPolygon(
        [
            shapely.box(2.1686, 41.3874, 2.1698, 41.3883),
            shapely.box(2.1722, 41.3892, 2.1734, 41.3901),
        ]
    )
    payload = encode(
        DSQuery(
            correlation_id="c",
            reply_to=TOPICS.reply("x"),
            query=NearestQuery(category="cafe", n=1),
            location=RegionLocation(region=region_to_wire(tiles)),
        )
    )

    class OldRegion(WireModel):  # the region of a peer that predates parts
        ring: list[tuple[float, float]]

    region = json.loads(payload)["location"]["region"]
    with pytest.raises(ValidationError, match="parts"):
        OldRegion.model_validate(region)
    assert b'"parts"' in payload
    bad = payload.replace(b'"parts":[[', b'"parts":[[[0.0,0.0],[0.0,0.0],[1.0,1.0]],[', 1)
    with pytest.raises(DecodeError) as err:
        decode(bad)
    assert err.value.field == "location.region.parts"


def test_ds_estimate_counts_every_tile() -> None:
    """DS's cheap estimate before the work spans every ring, not only the first."""
    a = shapely.box(-2000, -2000, -1900, -1900)
    b = shapely.box(1900, 1900, 2000, 2000)
    near = region_to_wire(PROJ.geometry_to_lonlat(a))
    both = region_to_wire(PROJ.geometry_to_lonlat(shapely.MultiPolygon([a, b])))
    q = WithinQuery(category="cafe", radius_m=500.0)
    assert INDEX.estimate(q, RegionLocation(region=both)) >= INDEX.estimate(
        q, RegionLocation(region=near)
    )
    pois, _ = INDEX.answer(q, RegionLocation(region=both))
    one, _ = INDEX.answer(q, RegionLocation(region=near))
    assert {p.id for p in one} <= {p.id for p in pois}


def test_a_token_sealing_64_tiles_fits_an_echoed_id_and_old_tokens_open() -> None:
    """The mediator's sealed token for a region of 64 tiles (the most a region carries) fits a
    query's correlation id; a token sealed before compression (``s1.``) still opens; a token
    altered or cut does not."""
    side = 101.0
    tiles = shapely.MultiPolygon(
        [
            shapely.box(i * side * 2, j * side * 2, i * side * 2 + side, j * side * 2 + side)
            for i in range(8)
            for j in range(8)
        ]
    )
    info = RegionInfo(region_to_wire(PROJ.geometry_to_lonlat(tiles)), 64 * side**2, T0, T0, 9)
    assert len(info.region.rings) == MAX_REGION_PARTS + 1
    sealer = Sealer.generate()
    obj = {"r": "locpriv/v1/reply/" + "x" * 200, "c": "c" * 1024, "d": T0, "i": info.to_json()}
    token = sealer.seal(obj)
    assert len(token) <= MAX_ECHOED_ID
    assert sealer.open(token) == json.loads(json.dumps(obj))
    assert sealer.open(token[:-8]) is None
    assert Sealer.generate().open(token) is None
    key = secrets.token_bytes(32)
    nonce = secrets.token_bytes(12)
    plain = AESGCM(key).encrypt(nonce, b'{"a":1}', b"locpriv/ds-token/v1")
    legacy = "s1." + base64.urlsafe_b64encode(nonce + plain).rstrip(b"=").decode()
    assert Sealer(key).open(legacy) == {"a": 1}


def test_a_self_crossing_part_is_refused_or_hulled_never_a_crash() -> None:
    """A hostile region whose parts cross themselves (a bow tie): DS answers it over its
    convex hull, as it does one such ring, and the user's checks refuse it as a region."""
    bow = [(2.1686, 41.3874), (2.1698, 41.3883), (2.1698, 41.3874), (2.1686, 41.3883)]
    square = [(2.17, 41.39), (2.171, 41.39), (2.171, 41.391), (2.17, 41.391)]
    wire = Region(ring=square, parts=[bow, bow])
    q = WithinQuery(category="cafe", radius_m=100.0)
    ds = DSCore(INDEX)
    query = DSQuery(
        correlation_id="c",
        reply_to=TOPICS.reply("x"),
        query=q,
        location=RegionLocation(region=wire),
    )
    (reply,) = ds.receive(query, T0)
    assert isinstance(reply.message, QueryAnswer) and reply.message.candidates
    hull = PROJ.geometry_to_xy(
        shapely.convex_hull(shapely.MultiPolygon([Polygon(square), Polygon(bow)]))
    )
    got = {p.id for p in reply.message.pois}
    for poi in INDEX.pois:
        if (
            poi.category == "cafe"
            and hull.distance(Point(*PROJ.point_to_xy(poi.lon, poi.lat))) < 99
        ):
            assert poi.id in got
    asked = Asked(position=LonLat(2.1705, 41.3905), query=q, profile=None, sent=T0)
    problem = region_problem(asked, region_from_wire(wire), 2e4, 5, T0, T0, T0, PROJ)
    assert problem is not None and "valid" in problem
