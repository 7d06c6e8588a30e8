"""Write the conformance test vectors (locpriv/conformance/vectors/*.json).

Independent of locpriv's own geometry code: tiles and areas are computed here with pyproj
directly and exact rational arithmetic for the tile rule, so that the vectors check locpriv as
much as any other client. Run ``python scripts/make_vectors.py`` and commit the files; the
vectors are deterministic (fixed seed).
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

from pyproj import Geod, Transformer

OUT = Path(__file__).resolve().parents[1] / "locpriv" / "conformance" / "vectors"
GEOD = Geod(ellps="WGS84")

CONFIGS: list[dict[str, Any]] = [
    {"name": "barcelona-1km", "lat0_deg": 41.3874, "lon0_deg": 2.1686, "tile_m": 1000.0},
    {"name": "barcelona-2km", "lat0_deg": 41.3874, "lon0_deg": 2.1686, "tile_m": 2000.0},
    {"name": "buenos-aires-5km", "lat0_deg": -34.6037, "lon0_deg": -58.3816, "tile_m": 5000.0},
    {"name": "reykjavik-250m", "lat0_deg": 64.1466, "lon0_deg": -21.9426, "tile_m": 250.0},
    {"name": "fiji-antimeridian-3km", "lat0_deg": -17.7134, "lon0_deg": 179.9, "tile_m": 3000.0},
    {"name": "no-tiles", "lat0_deg": 41.3874, "lon0_deg": 2.1686, "tile_m": None},
]


def _proj(cfg: dict[str, Any]) -> tuple[Transformer, Transformer]:
    crs = f"+proj=aeqd +lat_0={cfg['lat0_deg']!r} +lon_0={cfg['lon0_deg']!r} +ellps=WGS84 +units=m"
    fwd = Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    inv = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    return fwd, inv


def _cell(v: float, side: float) -> int:
    """The i with i*side <= v < (i+1)*side, exactly (rationals)."""
    return math.floor(Fraction(v) / Fraction(side))


def _wrap(lon: float) -> float:
    return lon - 360.0 if lon > 180.0 else lon + 360.0 if lon < -180.0 else lon


def tiles() -> dict[str, Any]:
    rng = random.Random(24)
    cases = []
    for cfg in CONFIGS:
        fwd, inv = _proj(cfg)
        side = cfg["tile_m"]
        targets: list[tuple[str, float, float]] = [("origin", 0.0, 0.0)]
        for _ in range(6):
            targets.append(("random", rng.uniform(-20e3, 20e3), rng.uniform(-20e3, 20e3)))
        if side:
            for _ in range(4):
                i, j = rng.randint(-8, 8), rng.randint(-8, 8)
                inside = rng.uniform(0.2, 0.8) * side
                for d in (-0.001, 0.001):  # 1 mm either side of a border
                    targets.append(("border-x-1mm", i * side + d, j * side + inside))
                    targets.append(("border-y-1mm", i * side + inside, j * side + d))
                targets.append(("corner+1mm", i * side + 0.001, j * side + 0.001))
                targets.append(("corner-1mm", i * side - 0.001, j * side - 0.001))
        for kind, tx, ty in targets:
            lon, lat = inv.transform(tx, ty)
            lon, lat = _wrap(float(lon)), float(lat)
            x, y = fwd.transform(lon, lat)  # the point as stored, projected again
            x, y = float(x), float(y)
            if side:
                i, j = _cell(x, side), _cell(y, side)
                tile = f"t{i}_{j}"
                margin = min(x - i * side, (i + 1) * side - x, y - j * side, (j + 1) * side - y)
            else:
                tile, margin = "t0_0", None
            cases.append(
                {
                    "config": cfg["name"],
                    "kind": kind,
                    "lat": lat,
                    "lon": lon,
                    "x_m": round(x, 6),
                    "y_m": round(y, 6),
                    "tile": tile,
                    "border_distance_m": None if margin is None else round(margin, 6),
                }
            )
    return {
        "description": (
            "Points to tiles. For each deployment_config (lat0_deg, lon0_deg, tile_m), project"
            " (lon, lat) with the ellipsoidal azimuthal equidistant projection (PROJ: +proj=aeqd"
            " +lat_0=<lat0_deg> +lon_0=<lon0_deg> +ellps=WGS84 +units=m) to x east, y north"
            " (x_m, y_m, to 1e-6 m); the tile is t{i}_{j} with i*tile_m <= x < (i+1)*tile_m and"
            " j*tile_m <= y < (j+1)*tile_m. tile_m null: every point is in t0_0."
            " border_distance_m: how far the point lies from its tile's nearest border (points"
            " 1 mm from a border need a projection accurate to well below a millimetre)."
        ),
        "configs": CONFIGS,
        "cases": cases,
    }


def _shoelace(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    s = sum(xs[k] * ys[(k + 1) % n] - xs[(k + 1) % n] * ys[k] for k in range(n))
    return abs(s) / 2.0


def areas() -> dict[str, Any]:
    rng = random.Random(2424)
    cfg = CONFIGS[0]
    fwd, inv = _proj(cfg)
    cases = []
    shapes: list[tuple[str, list[tuple[float, float]]]] = [
        ("square 100 m", [(0, 0), (100, 0), (100, 100), (0, 100)]),
        ("rectangle 2 km x 500 m", [(-1000, 300), (1000, 300), (1000, 800), (-1000, 800)]),
        ("rectangle far from origin", [(15e3, -18e3), (17e3, -18e3), (17e3, -15e3), (15e3, -15e3)]),
        ("triangle", [(0, 0), (3000, 500), (800, 2600)]),
    ]
    for n in (5, 8, 12):  # random convex polygons
        cx, cy, r = rng.uniform(-10e3, 10e3), rng.uniform(-10e3, 10e3), rng.uniform(50, 2000)
        angles = sorted(rng.uniform(0, 2 * math.pi) for _ in range(n))
        shapes.append(
            (f"convex {n}-gon", [(cx + r * math.cos(a), cy + r * math.sin(a)) for a in angles])
        )

    def lonlat(pts: list[tuple[float, float]]) -> list[list[float]]:
        return [[float(v) for v in inv.transform(px, py)] for px, py in pts]

    def planar_geodesic(ring: list[list[float]]) -> tuple[float, float]:
        xs, ys = fwd.transform([p[0] for p in ring], [p[1] for p in ring])
        planar = _shoelace([float(v) for v in xs], [float(v) for v in ys])
        geodesic, _ = GEOD.polygon_area_perimeter([p[0] for p in ring], [p[1] for p in ring])
        return planar, abs(float(geodesic))

    for name, pts in shapes:
        ring = lonlat(pts)
        planar, geodesic = planar_geodesic(ring)
        cases.append(
            {
                "config": cfg["name"],
                "name": name,
                "ring": ring,
                "area_m2": round(planar, 6),
                "geodesic_area_m2": round(geodesic, 6),
            }
        )

    def tile(i: int, j: int, side: float = 101.0, x0: float = 37.0, y0: float = -12.0) -> Any:
        x, y = x0 + i * side, y0 + j * side
        return [(x, y), (x + side, y), (x + side, y + side), (x, y + side)]

    tiled = [  # regions of session tiles: a ring and parts that share edges or stand apart
        ("tiles: two sharing an edge", [tile(0, 0), tile(1, 0)]),
        ("tiles: an L of three", [tile(0, 0), tile(1, 0), tile(1, 1)]),
        ("tiles: three apart", [tile(0, 0), tile(3, 1), tile(-2, 4)]),
    ]
    for name, rings_xy in tiled:
        rings = [lonlat(r) for r in rings_xy]
        sums = [planar_geodesic(r) for r in rings]
        cases.append(
            {
                "config": cfg["name"],
                "name": name,
                "ring": rings[0],
                "parts": rings[1:],
                "area_m2": round(sum(p for p, _ in sums), 6),
                "geodesic_area_m2": round(sum(g for _, g in sums), 6),
            }
        )
    return {
        "description": (
            "Regions to area_m2. area_m2 is what cloak_reply and Protocol 1 query_answer carry:"
            " project every vertex [lon, lat] of the ring with the deployment's azimuthal"
            " equidistant projection (see tiles.json) and take the shoelace area"
            " |sum(x_i*y_(i+1) - x_(i+1)*y_i)| / 2 of the projected polygon (m², to 1e-6)."
            " geodesic_area_m2 is the ellipsoidal (WGS84) area of the same ring, for comparison"
            " (within about 1e-5 relative inside 25 km of the origin). A region with parts"
            " (session tiles: rings that never overlap, though they may share edges) has the"
            " sum of its rings' areas, ring and parts alike."
        ),
        "configs": [cfg],
        "cases": cases,
    }


LAT, LON = 41.3874, 2.1686
"""The position of the message vectors (the origin of barcelona-1km: tile t0_0 there)."""
_CR = {"type": "cloak_request", "reply_to": "{reply_to}", "correlation_id": "c1"}
_PROFILE = {"k": 3, "a_min_m2": 10000, "a_max_m2": 4000000}


def _cloak(**extra: Any) -> dict[str, Any]:
    return {**_CR, "user_id": "{user}", **extra}


_DS_AT = {"kind": "centroid", "lat": LAT, "lon": LON, "radius_m": 500.0}


def _square(lon: float, lat: float) -> list[list[float]]:
    """A ring of about 100 m x 100 m from its south-west corner (degrees, 4 decimals)."""
    e, n = round(lon + 0.0012, 4), round(lat + 0.0009, 4)
    return [[lon, lat], [e, lat], [e, n], [lon, n]]


_TILES = [_square(LON, LAT), _square(2.1698, LAT), _square(2.1722, 41.3892)]
"""Three tiles of a region: two sharing an edge, one apart."""


def _ds_region(rings: list[list[list[float]]], empty_parts: bool = False) -> dict[str, Any]:
    """A DS query over a region of ``rings`` (the first is ``ring``, the rest ``parts``)."""
    region: dict[str, Any] = {"ring": rings[0]}
    if len(rings) > 1 or empty_parts:
        region["parts"] = rings[1:]
    query = {"kind": "within", "category": "cafe", "radius_m": 200.0}
    return _ds(location={"kind": "region", "region": region}, query=query)


def _ds(**extra: Any) -> dict[str, Any]:
    """A DS query (public lane) around the vectors' position."""
    query = {"kind": "nearest", "category": "cafe", "n": 3}
    return {**_CR, "type": "ds_query", "location": _DS_AT, "query": query, **extra}


def _case(name: str, topic: str, payload: Any, expect: dict[str, Any], **kw: Any) -> dict[str, Any]:
    key = "payload_text" if isinstance(payload, str) else "payload"
    return {"name": name, "topic": topic, key: payload, "expect": expect, **kw}


def _err(code: str, field: str | None, to: str = "reply", **kw: Any) -> dict[str, Any]:
    return {"code": code, "field": field, "to": to, **kw}


def messages() -> dict[str, Any]:
    p3 = "p3/cloak/{tile}/{user}"
    loc = {"type": "location_update", "user_id": "{user}", "lat": LAT, "lon": LON, "t": 1.0}
    broken_head = '{"reply_to":"{reply_to}","correlation_id":"c1","type":"cloak_request",'
    cases = [
        _case("valid location update", "loc/{tile}/{user}", loc, {"valid": True}),
        _case(
            "valid cloak request",
            p3,
            _cloak(lat=LAT, lon=LON, profile=_PROFILE),
            {"valid": True},
        ),
        _case(
            "profile window a_min_m2 >= a_max_m2",
            p3,
            _cloak(profile={"k": 3, "a_min_m2": 5000, "a_max_m2": 5000}),
            _err("invalid_field", "profile.a_max_m2"),
        ),
        _case(
            "profile k outside the schema",
            p3,
            _cloak(profile={**_PROFILE, "k": 0}),
            _err("invalid_field", "profile.k"),
        ),
        _case(
            "profile k above the operator's k_max (default 100)",
            p3,
            _cloak(profile={**_PROFILE, "k": 101}),
            _err("bad_parameters", "profile.k", details=["bounds"]),
        ),
        _case(
            "profile a_max_m2 above the operator's ceiling (default 1e9)",
            p3,
            _cloak(profile={**_PROFILE, "a_max_m2": 2e9}),
            _err("bad_parameters", "profile.a_max_m2", details=["bounds"]),
        ),
        _case(
            "profile max_delay_s above the operator's bound (default 60)",
            p3,
            _cloak(profile={**_PROFILE, "max_delay_s": 61}),
            _err("bad_parameters", "profile.max_delay_s", details=["bounds"]),
        ),
        _case(
            "malformed tile segment",
            "p3/cloak/tX/{user}",
            _cloak(lat=LAT, lon=LON),
            _err("invalid_field", "tile"),
        ),
        _case(
            "position in another tile than the topic's",
            "p3/cloak/{wrong_tile}/{user}",
            _cloak(lat=LAT, lon=LON),
            _err("invalid_field", "tile", details=["tile"], details_tile="{tile}"),
        ),
        _case(
            "user_id differs from the topic's user",
            p3,
            {**_CR, "user_id": "{other_user}"},
            _err("invalid_field", "user_id"),
        ),
        _case("unknown field", p3, _cloak(colour="red"), _err("invalid_field", "colour")),
        _case(
            "latitude out of range",
            p3,
            _cloak(lat=91, lon=LON),
            _err("invalid_field", "lat"),
        ),
        _case(
            "missing correlation_id, usable reply_to",
            p3,
            {"type": "cloak_request", "reply_to": "{reply_to}", "user_id": "{user}"},
            _err("invalid_field", "correlation_id"),
        ),
        _case(
            "unsupported version",
            p3,
            _cloak(v=2),
            _err("unsupported_version", "v"),
        ),
        _case("unknown type", p3, {**_CR, "type": "teleport"}, _err("unknown_type", "type")),
        _case(
            "wrong type for the topic",
            p3,
            {
                "type": "query_request",
                "reply_to": "{reply_to}",
                "correlation_id": "c1",
                "user_id": "{user}",
                "protocol": 2,
                "lat": LAT,
                "lon": LON,
                "query": {"kind": "nearest", "category": "cafe", "n": 1},
            },
            _err("wrong_type", "type"),
        ),
        _case(
            "protocol field differs from the topic",
            "p2/query/{tile}/{user}",
            {
                "type": "query_request",
                "reply_to": "{reply_to}",
                "correlation_id": "c1",
                "user_id": "{user}",
                "protocol": 1,
                "lat": LAT,
                "lon": LON,
                "query": {"kind": "nearest", "category": "cafe", "n": 1},
            },
            _err("invalid_field", "protocol"),
        ),
        _case(
            "query n out of range",
            "p2/query/{tile}/{user}",
            {
                "type": "query_request",
                "reply_to": "{reply_to}",
                "correlation_id": "c1",
                "user_id": "{user}",
                "protocol": 2,
                "lat": LAT,
                "lon": LON,
                "query": {"kind": "nearest", "category": "cafe", "n": 0},
            },
            _err("invalid_field", "query.n"),
        ),
        _case(
            "Protocol 1 profile k above the operator's k_max",
            "p1/query/{tile}/{user}",
            {
                "type": "query_request",
                "reply_to": "{reply_to}",
                "correlation_id": "c1",
                "user_id": "{user}",
                "protocol": 1,
                "lat": LAT,
                "lon": LON,
                "query": {"kind": "nearest", "category": "cafe", "n": 1},
                "profile": {**_PROFILE, "k": 101},
            },
            _err("bad_parameters", "profile.k", details=["bounds"]),
        ),
        _case(
            "truncated JSON after a usable reply_to",
            p3,
            broken_head + '"user_id":"{user}","profile":{"k":',
            _err("malformed", None),
        ),
        _case(
            "number out of range after a usable reply_to",
            p3,
            broken_head + '"user_id":"{user}","lat":1' + "0" * 5000 + "}",
            _err("malformed", None),
        ),
        _case(
            "nesting too deep after a usable reply_to",
            p3,
            broken_head + '"user_id":"{user}","x":' + "[" * 300 + "]" * 300 + "}",
            _err("malformed", None),
        ),
        _case(
            "reply_to outside the reply namespace",
            p3,
            {**_cloak(), "reply_to": "locpriv/v1/p3/cloak/t0_0/victim"},
            _err("invalid_field", "reply_to", to="errors"),
        ),
        _case(
            "no reply_to at all",
            p3,
            {"type": "cloak_request"},
            _err("invalid_field", "correlation_id", to="errors"),
        ),
        # the database server: public ds/query (Protocol 3's second hop, Protocol 4)
        _case("DS: valid query", "ds/query", _ds(), {"valid": True}, service="ds"),
        _case(
            "DS: unknown field",
            "ds/query",
            _ds(colour="red"),
            _err("invalid_field", "colour"),
            service="ds",
        ),
        _case(
            "DS: negative radius",
            "ds/query",
            _ds(location={**_DS_AT, "radius_m": -5}),
            _err("invalid_field", "location.radius_m"),
            service="ds",
        ),
        _case(
            "DS: query n out of range",
            "ds/query",
            _ds(query={"kind": "nearest", "category": "cafe", "n": 0}),
            _err("invalid_field", "query.n"),
            service="ds",
        ),
        _case(
            "DS: a cloak request on ds/query",
            "ds/query",
            _cloak(),
            _err("wrong_type", "type"),
            service="ds",
        ),
        _case(
            "DS: reply_to in the services' namespace",
            "ds/query",
            _ds(reply_to="locpriv/v1/svc/reply/anyone"),
            _err("invalid_field", "reply_to", to="errors"),
            service="ds",
        ),
        # regions of tiles (ring + parts) and the long ids a mediator's sealed token needs
        _case(
            "DS: a region of tiles",
            "ds/query",
            _ds_region(_TILES),
            {"valid": True},
            service="ds",
        ),
        _case(
            "DS: a region of tiles with a degenerate part",
            "ds/query",
            _ds_region([_TILES[0], [[2.1698, 41.3874], [2.171, 41.3874], [2.1698, 41.3874]]]),
            _err("invalid_field", "location.region.parts"),
            service="ds",
        ),
        _case(
            "DS: a region with an empty parts list",
            "ds/query",
            _ds_region(_TILES[:1], empty_parts=True),
            _err("invalid_field", "location.region.parts"),
            service="ds",
        ),
        _case(
            "DS: a correlation id as long as a mediator's sealed token for 64 tiles",
            "ds/query",
            _ds(correlation_id="s2." + "A" * 6000),
            {"valid": True},
            service="ds",
        ),
        _case(
            "DS: a correlation id past 16384 characters",
            "ds/query",
            _ds(correlation_id="A" * 16385),
            _err("invalid_field", "correlation_id"),
            service="ds",
        ),
    ]
    return {
        "description": (
            "Messages to the services and the codes they get: service names the one that"
            " reads the topic (anonymizer when absent; ds for ds/query). topic is relative to"
            " {prefix}/v1/. Placeholders in topics and payloads: {user} (the sender's user"
            " name), {other_user} (another one), {reply_to} (the sender's reply topic),"
            " {tile} (the tile of lat 41.3874, lon 2.1686 in the deployment under test:"
            " t0_0 for barcelona-1km of tiles.json and without tiles), {wrong_tile} (a"
            " well-formed tile the anonymizer serves that is not {tile}). payload is a JSON"
            " object; payload_text a raw UTF-8 text (broken JSON). expect.valid: accepted"
            " (no error reply); else expect.code and expect.field (null: no field) of the"
            " error reply, expect.to where it is published (reply: the request's reply_to;"
            " errors: {prefix}/v1/errors/<service>, which apps cannot read), expect.details:"
            " keys the error's details object holds, expect.details_tile: the value of"
            " details.tile. Operator bounds are the defaults of `locpriv serve`"
            " (docs/protocol.md)."
        ),
        "position": {"lat": LAT, "lon": LON},
        "cases": cases,
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in (("tiles", tiles()), ("areas", areas()), ("messages", messages())):
        (OUT / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {OUT / name}.json: {len(data['cases'])} cases")


if __name__ == "__main__":
    main()
