"""POI index: exact point answers and candidate-set supersets for regions and centroids."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.core.geo import LocalProjection, region_to_wire
from locpriv.core.poi import POIIndex, load_pois, refine
from locpriv.errors import DataError
from locpriv.wire.messages import (
    POI,
    CentroidLocation,
    NearestQuery,
    PointLocation,
    RegionLocation,
    WithinQuery,
)

LAT0, LON0 = 41.3874, 2.1686
PROJ = LocalProjection(LAT0, LON0)
CATS = ("cafe", "atm", "fuel")


def _make_pois(n: int, seed: int) -> list[POI]:
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-6000, 6000, size=(n, 2))
    lon, lat = PROJ.to_lonlat(xy[:, 0], xy[:, 1])
    return [
        POI(id=f"p{i}", category=CATS[i % 3], lat=float(lat[i]), lon=float(lon[i]))
        for i in range(n)
    ]


POIS = _make_pois(600, 7)
INDEX = POIIndex(POIS, PROJ)

queries = st.one_of(
    st.builds(NearestQuery, category=st.sampled_from(CATS), n=st.integers(1, 8)),
    st.builds(
        WithinQuery,
        category=st.one_of(st.none(), st.sampled_from(CATS)),
        radius_m=st.floats(50.0, 1500.0),
    ),
)


@st.composite
def regions(draw: st.DrawFn) -> shapely.Polygon:
    """A random convex polygon (3-8 vertices) of 50 m - 3 km extent, in metres."""
    cx = draw(st.floats(-5000, 5000))
    cy = draw(st.floats(-5000, 5000))
    size = draw(st.floats(50, 3000))
    n = draw(st.integers(3, 8))
    angles = sorted(draw(st.lists(st.floats(0, 2 * math.pi), min_size=n, max_size=n)))
    radii = draw(st.lists(st.floats(0.3, 1.0), min_size=n, max_size=n))
    pts = [
        (cx + size * r * math.cos(a), cy + size * r * math.sin(a))
        for a, r in zip(angles, radii, strict=True)
    ]
    hull = shapely.convex_hull(shapely.MultiPoint(pts))
    if not isinstance(hull, shapely.Polygon) or hull.area < 1.0:
        hull = shapely.box(cx, cy, cx + size, cy + size)
    return hull


def _points_inside(
    poly: shapely.Polygon, rng: np.random.Generator, n: int
) -> list[tuple[float, float]]:
    x0, y0, x1, y1 = poly.bounds
    out = [tuple(c) for c in np.asarray(poly.exterior.coords)[:-1]]  # vertices are the worst case
    while len(out) < n:
        x, y = rng.uniform(x0, x1), rng.uniform(y0, y1)
        if poly.contains(shapely.Point(x, y)):
            out.append((x, y))
    return out


def _ids(pois: list[POI]) -> set[str]:
    return {p.id for p in pois}


@settings(max_examples=60, deadline=None)
@given(region=regions(), query=queries, seed=st.integers(0, 2**31))
def test_region_candidates_contain_exact_answer_everywhere(
    region: shapely.Polygon, query: NearestQuery | WithinQuery, seed: int
) -> None:
    wire = region_to_wire(PROJ.geometry_to_lonlat(region))
    cands, is_superset = INDEX.answer(query, RegionLocation(region=wire))
    assert is_superset
    cand_ids = _ids(cands)
    for x, y in _points_inside(region, np.random.default_rng(seed), 12):
        lon, lat = PROJ.point_to_lonlat(x, y)
        exact = refine(POIS, query, lon=lon, lat=lat)  # geodesic truth over all POIs
        assert _ids(exact) <= cand_ids
        assert refine(cands, query, lon=lon, lat=lat) == exact


@settings(max_examples=40, deadline=None)
@given(
    x=st.floats(-5000, 5000),
    y=st.floats(-5000, 5000),
    rho=st.floats(1.0, 2000.0),
    query=queries,
    seed=st.integers(0, 2**31),
)
def test_centroid_candidates_cover_the_disk(
    x: float, y: float, rho: float, query: NearestQuery | WithinQuery, seed: int
) -> None:
    lon0, lat0 = PROJ.point_to_lonlat(x, y)
    cands, is_superset = INDEX.answer(query, CentroidLocation(lat=lat0, lon=lon0, radius_m=rho))
    assert is_superset
    rng = np.random.default_rng(seed)
    for _ in range(10):
        a, r = rng.uniform(0, 2 * math.pi), rho * math.sqrt(rng.uniform())
        lon, lat = PROJ.point_to_lonlat(x + r * math.cos(a), y + r * math.sin(a))
        assert refine(cands, query, lon=lon, lat=lat) == refine(POIS, query, lon=lon, lat=lat)


@settings(max_examples=40, deadline=None)
@given(x=st.floats(-5000, 5000), y=st.floats(-5000, 5000), query=queries)
def test_point_answer_is_exact(x: float, y: float, query: NearestQuery | WithinQuery) -> None:
    lon, lat = PROJ.point_to_lonlat(x, y)
    pois, is_superset = INDEX.answer(query, PointLocation(lat=lat, lon=lon))
    assert not is_superset
    exact = refine(POIS, query, lon=lon, lat=lat)
    if isinstance(query, NearestQuery):
        assert len(pois) == query.n
    # planar (projection) and geodesic distances differ by < 1 cm here: only POIs that close
    # to the query radius, or tied for the n-th place, may differ
    for p in POIS:
        if p.id in _ids(pois) ^ _ids(exact):
            d = math.dist(PROJ.point_to_xy(p.lon, p.lat), (x, y))
            edge = (
                query.radius_m
                if isinstance(query, WithinQuery)
                else max(math.dist(PROJ.point_to_xy(q.lon, q.lat), (x, y)) for q in exact)
            )
            assert abs(d - edge) < 0.05


def test_small_category_returns_everything() -> None:
    index = POIIndex(POIS[:4], PROJ)  # categories with 1-2 POIs each
    wire = region_to_wire(PROJ.geometry_to_lonlat(shapely.box(0, 0, 100, 100)))
    cands, _ = index.answer(NearestQuery(category="cafe", n=5), RegionLocation(region=wire))
    assert _ids(cands) == {p.id for p in POIS[:4] if p.category == "cafe"}
    assert index.answer(NearestQuery(category="none", n=1), RegionLocation(region=wire)) == (
        [],
        True,
    )


def test_load_csv_geojson_and_bad_rows(tmp_path: Path) -> None:
    shipped = load_pois(Path(__file__).parents[1] / "locpriv" / "data" / "pois.csv")
    assert len(shipped) == 5000
    assert len({p.category for p in shipped}) == 6
    assert all(abs(p.lat - LAT0) < 0.1 and abs(p.lon - LON0) < 0.13 for p in shipped)
    gj = tmp_path / "p.geojson"
    gj.write_text(
        '{"type":"FeatureCollection","features":[{"type":"Feature","geometry":'
        '{"type":"Point","coordinates":[2.17,41.39]},"properties":{"id":"a","category":"cafe"}}]}'
    )
    assert load_pois(gj) == [POI(id="a", category="cafe", lat=41.39, lon=2.17)]
    bad = tmp_path / "bad.csv"
    bad.write_text("id,category,lat,lon\nx,cafe,91,2\n")
    with pytest.raises(DataError, match=r"bad\.csv:2"):
        load_pois(bad)
