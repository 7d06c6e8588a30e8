"""Geometry against known areas and distances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from shapely.geometry import Polygon, box

from locpriv.core import geo


def test_one_km_square_at_41n() -> None:
    """A 1 km × 1 km square at 41° N drawn in degrees has a geodesic area of 1 km²."""
    m_lon, m_lat = geo.metres_per_degree(41.0)
    # textbook values at 41° N on WGS84: 84,137 m per degree of longitude, 111,052 m of latitude
    assert m_lon == pytest.approx(84_137, rel=2e-4)
    assert m_lat == pytest.approx(111_052, rel=2e-4)
    sq = box(2.0, 41.0 - 500 / m_lat, 2.0 + 1000 / m_lon, 41.0 + 500 / m_lat)
    assert geo.area_m2(sq) == pytest.approx(1e6, rel=1e-3)
    proj = geo.LocalProjection(41.0, 2.0)
    assert geo.planar_area_m2(proj.geometry_to_xy(sq)) == pytest.approx(1e6, rel=1e-3)


def test_square_in_metres_round_trips_to_exact_area() -> None:
    proj = geo.LocalProjection(41.0, 2.0)
    sq = box(-500, -500, 500, 500)
    assert geo.area_m2(proj.geometry_to_lonlat(sq)) == pytest.approx(1e6, rel=1e-6)


def test_known_distances() -> None:
    # one minute of arc of latitude at the equator is 1842.9 m on WGS84
    assert geo.distance_m(0, 0, 0, 1 / 60) == pytest.approx(1842.9, abs=0.1)
    # Barcelona (41.3874, 2.1686) to Madrid (40.4168, -3.7038): 505 km on WGS84
    assert float(geo.distance_m(2.1686, 41.3874, -3.7038, 40.4168)) == pytest.approx(
        505_000, rel=3e-3
    )
    assert float(geo.haversine_m(2.1686, 41.3874, -3.7038, 40.4168)) == pytest.approx(
        float(geo.distance_m(2.1686, 41.3874, -3.7038, 40.4168)), rel=5e-3
    )


def test_vectorised_shapes() -> None:
    lon = np.linspace(2.0, 2.2, 12).reshape(3, 4)
    d = geo.distance_m(lon, 41.0, 2.0, 41.0)
    assert d.shape == (3, 4)
    assert d[0, 0] == 0.0
    assert np.all(np.diff(d.ravel()) > 0)
    proj = geo.LocalProjection(41.0, 2.0)
    x, _ = proj.to_xy(lon.ravel(), np.full(12, 41.0))
    assert x.shape == (12,)


def test_projection_error_bound_over_50_km_region() -> None:
    """Local distances match geodesics within 1e-5 relative over a 50 km × 50 km region."""
    proj = geo.LocalProjection(41.3874, 2.1686)
    rng = np.random.default_rng(0)
    xy = rng.uniform(-25_000, 25_000, size=(2000, 2))
    lon, lat = proj.to_lonlat(xy[:, 0], xy[:, 1])
    planar = np.hypot(*(xy[1:] - xy[:-1]).T)
    geodesic = geo.distance_m(lon[:-1], lat[:-1], lon[1:], lat[1:])
    rel = np.abs(planar - geodesic) / geodesic
    assert rel.max() < 1e-5
    corner = box(20_000, 20_000, 25_000, 25_000)
    assert geo.area_m2(proj.geometry_to_lonlat(corner)) == pytest.approx(25e6, rel=2e-5)


@given(
    st.floats(-60, 60),
    st.floats(-170, 170),
    st.floats(-20_000, 20_000),
    st.floats(-20_000, 20_000),
)
def test_projection_round_trip(lat0: float, lon0: float, x: float, y: float) -> None:
    proj = geo.LocalProjection(lat0, lon0)
    lon, lat = proj.point_to_lonlat(x, y)
    # PROJ's aeqd snaps points within ~1e-10 rad (0.6 mm) of the origin onto it
    assert proj.point_to_xy(lon, lat) == pytest.approx((x, y), abs=1e-3)


def test_rectangle_area_and_wire_region() -> None:
    assert geo.rect_area_m2(0, 0, 200, 50) == 10_000
    assert geo.rect_area_m2(0, 0, -1, 5) == 0
    poly = Polygon([(2.0, 41.0), (2.01, 41.0), (2.01, 41.01), (2.0, 41.01)])
    region = geo.region_to_wire(poly)
    assert len(region.ring) == 4
    assert geo.region_from_wire(region).equals(poly)


def test_projection_rejects_bad_origin() -> None:
    with pytest.raises(ValueError, match="origin"):
        geo.LocalProjection(91.0, 0.0)
    assert math.isfinite(geo.LocalProjection(0.0, 0.0).point_to_xy(0.0, 0.0)[0])
