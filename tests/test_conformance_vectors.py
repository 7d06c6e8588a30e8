"""locpriv against its own conformance vectors, and the error contract of docs/protocol.md.

The vectors (locpriv/conformance/vectors) are computed with pyproj and exact arithmetic by
scripts/make_vectors.py; here the Python client's tile computation, the anonymizer's
``area_m2`` and the services' error replies (code, dotted field, details, where they are
published) must match them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest
from pyproj import Geod, Transformer

from locpriv.config import ServiceConfig
from locpriv.conformance.vectors import MessageCase, Placeholders, load, message_cases
from locpriv.core.geo import LocalProjection, LonLat, area_m2, region_from_wire
from locpriv.core.poi import DEFAULT_POIS, POIIndex, load_pois
from locpriv.core.tiles import Shard
from locpriv.errors import ErrorCode
from locpriv.protocols.dispatch import Dispatcher
from locpriv.protocols.ds import DSCore, ds_routes
from locpriv.protocols.effects import Send
from locpriv.protocols.trusted import anonymizer_routes, build_trusted_core, shard_tiles
from locpriv.protocols.user import UserMachine
from locpriv.wire.envelope import Received
from locpriv.wire.messages import (
    CloakReply,
    CloakRequest,
    DeploymentConfig,
    DSQuery,
    ErrorReply,
    LocationUpdate,
    NearestQuery,
    PointLocation,
    PrivacyProfile,
    QueryAnswer,
    Region,
    WithinQuery,
    encode,
)
from locpriv.wire.topics import Topics

TOPICS = Topics()
T0 = 1_700_000_000.0
TILES = load("tiles")
CONFIGS = {c["name"]: c for c in TILES["configs"]}
REPLY = TOPICS.reply("app-1")


def _anonymizer(side_m: float | None = 1000.0) -> Dispatcher:
    config = ServiceConfig.model_validate(
        {"tiles": {"side_m": side_m or 0.0}, "limits": {"requests_per_s": 1e6, "burst": 1e6}}
    )
    core = build_trusted_core(config, TOPICS.reply("mediator"))
    routes = anonymizer_routes(
        TOPICS,
        TOPICS.reply("mediator"),
        anonymizer=core.anonymizer,
        tiles=shard_tiles(config, Shard()),
    )
    return Dispatcher(
        name="anonymizer", machine=core, routes=routes, topics=TOPICS, max_payload=65536
    )


def _ds() -> Dispatcher:
    """DS's dispatcher as `locpriv serve ds` builds it (default limits, the shipped POIs)."""
    config = ServiceConfig()
    index = POIIndex(load_pois(DEFAULT_POIS), config.make_projection())
    core = DSCore(index, max_answer_pois=config.limits.ds_max_answer_pois, topics=TOPICS)
    return Dispatcher(
        name="ds", machine=core, routes=ds_routes(TOPICS), topics=TOPICS, max_payload=65536
    )


def _send(d: Dispatcher, topic: str, payload: bytes | object, now: float = T0) -> list[Send]:
    raw = payload if isinstance(payload, bytes) else encode(payload)  # type: ignore[arg-type]
    return d.handle(Received(topic, raw), now)


# ----------------------------------------------------------------------------- tiles


@pytest.mark.parametrize("case", TILES["cases"], ids=lambda c: f"{c['config']}:{c['kind']}")
def test_the_client_puts_each_vector_point_on_its_tile(case: dict[str, object]) -> None:
    cfg = CONFIGS[case["config"]]
    deployment = DeploymentConfig(
        lat0_deg=cfg["lat0_deg"], lon0_deg=cfg["lon0_deg"], tile_m=cfg["tile_m"]
    )
    user = UserMachine(TOPICS, REPLY, deployment=deployment)
    (send,) = user.location_update(
        user_id="alice", position=LonLat(case["lon"], case["lat"]), now=T0
    )
    assert send.topic == TOPICS.location("alice", tile=str(case["tile"]))
    x, y = LocalProjection(cfg["lat0_deg"], cfg["lon0_deg"]).point_to_xy(case["lon"], case["lat"])
    assert (x, y) == pytest.approx((case["x_m"], case["y_m"]), abs=1e-5)


def test_the_tile_vectors_cover_millimetres_from_borders_in_every_tiled_config() -> None:
    for name, cfg in CONFIGS.items():
        margins = [c["border_distance_m"] for c in TILES["cases"] if c["config"] == name]
        if cfg["tile_m"] is None:
            assert {c["tile"] for c in TILES["cases"] if c["config"] == name} == {"t0_0"}
            continue
        assert sum(1 for m in margins if m < 0.0011) >= 8, name


def test_the_worked_example_of_the_docs_is_a_vector() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "protocol.md").read_text()
    proj = LocalProjection(41.3874, 2.1686)
    for lat, lon, tile in ((41.40, 2.19, "t1_1"), (41.37, 2.15, "t-2_-2")):
        x, y = proj.point_to_xy(lon, lat)
        assert f"x = {x:.4f} m, y = {y:.4f} m".replace("-", "−") in doc
        deployment = DeploymentConfig(lat0_deg=41.3874, lon0_deg=2.1686, tile_m=1000.0)
        (send,) = UserMachine(TOPICS, REPLY, deployment=deployment).location_update(
            user_id="a", position=LonLat(lon, lat), now=T0
        )
        assert send.topic == TOPICS.location("a", tile=tile)
        assert f"`{tile}`" in doc


# ----------------------------------------------------------------------------- areas


@pytest.mark.parametrize("case", load("areas")["cases"], ids=lambda c: c["name"])
def test_area_vectors_planar_in_the_projection_and_close_to_geodesic(
    case: dict[str, object],
) -> None:
    """A region with parts is read as locpriv reads it off the wire (the union of its rings,
    which share edges at most), so its area is the sum of the rings'."""
    cfg = CONFIGS[case["config"]]
    proj = LocalProjection(cfg["lat0_deg"], cfg["lon0_deg"])
    wire = Region.model_validate({k: case[k] for k in ("ring", "parts") if k in case})
    shape = region_from_wire(wire)
    assert shape.is_valid and len(wire.rings) == 1 + len(case.get("parts", []))  # type: ignore[arg-type]
    planar = proj.geometry_to_xy(shape).area
    assert planar == pytest.approx(case["area_m2"], rel=1e-9)
    assert area_m2(shape) == pytest.approx(case["geodesic_area_m2"], rel=1e-9)
    assert planar == pytest.approx(case["geodesic_area_m2"], rel=2e-5)


def test_the_vector_files_are_what_make_vectors_writes() -> None:
    """The committed vectors are scripts/make_vectors.py's output, never hand edits: a case
    added to a file and not to the script would vanish at the next regeneration."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "make_vectors.py"
    spec = importlib.util.spec_from_file_location("make_vectors", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for name in ("tiles", "areas", "messages"):
        assert json.loads(json.dumps(getattr(script, name)())) == load(name), name


def _populate(d: Dispatcher, n: int = 12) -> None:
    proj = LocalProjection(41.3874, 2.1686)
    for i in range(n):
        lon, lat = proj.point_to_lonlat(100.0 + 60.0 * (i % 4), 120.0 + 70.0 * (i // 4))
        update = LocationUpdate(user_id=f"u{i}", lat=lat, lon=lon, t=T0)
        assert _send(d, TOPICS.location(f"u{i}", tile="t0_0"), update) == []


def test_a_cloak_replys_area_is_the_shoelace_of_its_ring_in_the_projection() -> None:
    """docs/protocol.md: area_m2 is the shoelace area of the ring's vertices projected with
    the deployment's aeqd; computed here with pyproj and plain arithmetic."""
    d = _anonymizer()
    _populate(d)
    fwd = Transformer.from_crs(
        "EPSG:4326",
        "+proj=aeqd +lat_0=41.3874 +lon_0=2.1686 +ellps=WGS84 +units=m",
        always_xy=True,
    )
    geod = Geod(ellps="WGS84")
    seen = 0
    for k, a_min in ((3, 1e4), (5, 5e4), (8, 2e5), (12, 1e3)):
        req = CloakRequest(
            correlation_id=f"c{k}",
            reply_to=REPLY,
            user_id="u0",
            profile=PrivacyProfile(k=k, a_min_m2=a_min, a_max_m2=4e6),
        )
        (out,) = _send(d, TOPICS.p3_cloak("u0", tile="t0_0"), req)
        reply = out.message
        assert isinstance(reply, CloakReply), reply
        lons = [p[0] for p in reply.region.ring]
        lats = [p[1] for p in reply.region.ring]
        xs, ys = fwd.transform(lons, lats)
        n = len(xs)
        shoelace = abs(sum(xs[i] * ys[(i + 1) % n] - xs[(i + 1) % n] * ys[i] for i in range(n)))
        assert reply.area_m2 == pytest.approx(shoelace / 2, rel=1e-7)
        geodesic = abs(geod.polygon_area_perimeter(lons, lats)[0])
        assert reply.area_m2 == pytest.approx(geodesic, rel=2e-5)
        assert a_min < reply.area_m2 < 4e6
        seen += 1
    assert seen == 4


# -------------------------------------------------------------------------- messages


def _values(user: str = "alice") -> Placeholders:
    return Placeholders(user=user, other_user="bob", reply_to=REPLY, tile="t0_0", wrong_tile="t1_0")


@pytest.mark.parametrize("case", message_cases(_values()), ids=lambda c: c.name)
def test_every_message_vector_gets_its_code_field_and_destination(case: object) -> None:
    assert isinstance(case, MessageCase)
    if case.service == "ds":
        d = _ds()
    else:
        d = _anonymizer()
        _populate(d)
    out = _send(d, TOPICS.root + "/" + case.topic, case.payload)
    errors = [s for s in out if isinstance(s.message, ErrorReply)]
    if case.valid:
        assert errors == []
        return
    (err,) = errors
    assert isinstance(err.message, ErrorReply)
    assert (err.message.code, err.message.field) == (case.code, case.field)
    expected_topic = REPLY if case.to == "reply" else TOPICS.errors(case.service)
    assert err.topic == expected_topic
    details = err.message.details
    got = () if details is None else tuple(sorted(details.model_dump(exclude_none=True)))
    assert got == tuple(sorted(case.details))
    if case.details_tile is not None:
        assert details is not None and details.tile == case.details_tile


def test_bad_parameters_names_each_profile_field_and_carries_the_operators_bounds() -> None:
    d = _anonymizer()
    _populate(d)
    profile = {"k": 3, "a_min_m2": 1e4, "a_max_m2": 4e6}
    for change, field in (
        ({"k": 101}, "k"),
        ({"a_max_m2": 2e9}, "a_max_m2"),
        ({"a_min_m2": 1e7, "a_max_m2": 1e8}, "a_min_m2"),  # above one 1 km tile's area
        ({"max_delay_s": 61.0}, "max_delay_s"),
        ({"session_s": 5 * 3600.0}, "session_s"),
    ):
        req = CloakRequest(
            correlation_id="c",
            reply_to=REPLY,
            user_id="u0",
            profile=PrivacyProfile.model_validate({**profile, **change}),
        )
        (out,) = _send(d, TOPICS.p3_cloak("u0", tile="t0_0"), req)
        err = out.message
        assert isinstance(err, ErrorReply)
        assert (err.code, err.field) == (ErrorCode.BAD_PARAMETERS, f"profile.{field}")
        assert err.details is not None and err.details.bounds is not None
        b = err.details.bounds
        assert (b.k_min, b.k_max, b.max_delay_s_max, b.session_s_max) == (2, 100, 60.0, 14400.0)
        assert (b.a_min_floor_m2, b.a_max_ceiling_m2, b.world_area_m2) == (0.0, 1e9, 1e6)
        # the client acts on them: the clamped profile is accepted
        clamped = PrivacyProfile(
            k=min(max(req.profile.k, b.k_min), b.k_max),  # type: ignore[union-attr]
            a_min_m2=min(req.profile.a_min_m2, b.world_area_m2 / 2),  # type: ignore[union-attr]
            a_max_m2=min(req.profile.a_max_m2, b.a_max_ceiling_m2),  # type: ignore[union-attr]
            max_delay_s=min(req.profile.max_delay_s, b.max_delay_s_max),  # type: ignore[union-attr]
            session_s=min(req.profile.session_s, b.session_s_max),  # type: ignore[union-attr]
        )
        retry = req.model_copy(update={"profile": clamped})
        (out,) = _send(d, TOPICS.p3_cloak("u0", tile="t0_0"), retry)
        assert not isinstance(out.message, ErrorReply) or out.message.code not in (
            ErrorCode.BAD_PARAMETERS,
            ErrorCode.INVALID_FIELD,
        )


def test_the_right_tile_in_details_is_where_a_retry_succeeds() -> None:
    d = _anonymizer()
    _populate(d)
    proj = LocalProjection(41.3874, 2.1686)
    rng = random.Random(7)
    for _ in range(20):
        x, y = rng.uniform(-2500, 2500), rng.uniform(-2500, 2500)
        lon, lat = proj.point_to_lonlat(x, y)
        update = LocationUpdate(user_id="walker", lat=lat, lon=lon, t=T0)
        out = _send(d, TOPICS.location("walker", tile="t7_7"), update)
        (err,) = [s.message for s in out]
        assert isinstance(err, ErrorReply) and err.field == "tile"
        assert (
            err.details is not None
            and err.details.tile == f"t{math.floor(x / 1000)}_{math.floor(y / 1000)}"
        )
        assert _send(d, TOPICS.location("walker", tile=err.details.tile), update) == []


@pytest.mark.parametrize(
    "segment", ["tX", "t01_0", "t-0_0", "t1", "t1_2_3", "T1_2", "t1_99999999999"]
)
def test_a_malformed_tile_segment_is_invalid_field_tile(segment: str) -> None:
    d = _anonymizer()
    req = CloakRequest(correlation_id="c", reply_to=REPLY, user_id="alice")
    (out,) = _send(d, f"{TOPICS.root}/p3/cloak/{segment}/alice", req)
    assert isinstance(out.message, ErrorReply) and out.topic == REPLY
    assert (out.message.code, out.message.field) == (ErrorCode.INVALID_FIELD, "tile")


def test_a_cloak_before_any_position_is_unknown_user_on_any_tile() -> None:
    d = _anonymizer()
    _populate(d)
    for tile in ("t0_0", "t1_0", "t-3_2"):
        req = CloakRequest(correlation_id="c", reply_to=REPLY, user_id="newcomer")
        (out,) = _send(d, TOPICS.p3_cloak("newcomer", tile=tile), req)
        assert isinstance(out.message, ErrorReply) and out.topic == REPLY
        assert out.message.code == ErrorCode.UNKNOWN_USER


def test_broken_payloads_reach_a_usable_reply_to_and_never_a_nested_one() -> None:
    d = _anonymizer()
    head = f'{{"reply_to":"{REPLY}","correlation_id":"c9","type":"cloak_request",'.encode()
    for tail in (
        b'"user_id":"alice","lat":4',
        b'"user_id":"al\xffice"}',
        b'"user_id":"alice","x":"\\ud800"}',
        b'"x":"a\x01b"}',
    ):
        (out,) = _send(d, TOPICS.p3_cloak("alice", tile="t0_0"), head + tail)
        assert isinstance(out.message, ErrorReply), tail
        assert (out.topic, out.message.correlation_id) == (REPLY, "c9"), tail
    nested = b'{"profile":{"reply_to":"' + REPLY.encode() + b'"},"type":"cloak_request",'
    (out,) = _send(d, TOPICS.p3_cloak("alice", tile="t0_0"), nested)
    assert out.topic == TOPICS.errors("anonymizer")
    twice = head + b'"reply_to":"locpriv/v1/reply/other",'
    (out,) = _send(d, TOPICS.p3_cloak("alice", tile="t0_0"), twice)
    assert out.topic == TOPICS.errors("anonymizer")
    escaped = b'{"reply_to":"locpriv\\/v1\\/reply\\/x","type":'
    (out,) = _send(d, TOPICS.p3_cloak("alice", tile="t0_0"), escaped)
    assert out.topic == TOPICS.errors("anonymizer")


def test_error_details_round_trip_through_the_client_exception() -> None:
    d = _anonymizer()
    update = LocationUpdate(user_id="al", lat=41.3874, lon=2.1686, t=T0)
    (out,) = _send(d, TOPICS.location("al", tile="t5_5"), update)
    assert isinstance(out.message, ErrorReply)
    exc = out.message.exception()
    assert exc.field == "tile" and exc.details == {"tile": "t0_0"}
    assert json.loads(encode(out.message))["details"] == {"tile": "t0_0"}


# ------------------------------------------------------------------------ POI order


def test_exact_answers_are_nearest_first_and_candidates_refine_to_them() -> None:
    config = ServiceConfig()
    index = POIIndex(load_pois(DEFAULT_POIS), config.make_projection())
    ds = Dispatcher(
        name="ds",
        machine=DSCore(index),
        routes=ds_routes(TOPICS),
        topics=TOPICS,
        max_payload=65536,
    )
    proj = config.make_projection()
    geod = Geod(ellps="WGS84")
    for i, query in enumerate(
        (NearestQuery(category="cafe", n=7), WithinQuery(category="atm", radius_m=800.0))
    ):
        q = DSQuery(
            correlation_id=f"d{i}",
            reply_to=REPLY,
            query=query,
            location=PointLocation(lat=41.39, lon=2.17),
        )
        (out,) = ds.handle(Received(TOPICS.ds_query, encode(q)), T0)
        answer = out.message
        assert isinstance(answer, QueryAnswer) and not answer.candidates
        assert len(answer.pois) >= 3
        x0, y0 = proj.point_to_xy(2.17, 41.39)
        dist = [math.dist((x0, y0), proj.point_to_xy(p.lon, p.lat)) for p in answer.pois]
        assert dist == sorted(dist)
        geo = [geod.inv(2.17, 41.39, p.lon, p.lat)[2] for p in answer.pois]
        assert geo == sorted(geo)
