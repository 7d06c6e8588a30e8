"""Cells for Protocol 4 discovery: ids, ladder and the 3×3 covering invariant."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.core.cells import CellGrid, cell_side_for
from locpriv.core.geo import WGS84, distance_m
from locpriv.wire.topics import Topics


def test_cell_side_ladder() -> None:
    assert cell_side_for(1_000_000.0) == 1600  # √A = 1000 m -> 1600
    assert cell_side_for(10_000.0) == 100
    assert cell_side_for(10_000.0, max_distance_m=250.0) == 400


def test_cell_ids_are_topic_segments() -> None:
    grid = CellGrid(800)
    cid = grid.cell_of(11.575, 48.137)
    assert cid.startswith("g800_")
    assert Topics().peer_cell(cid).endswith(cid)
    block = grid.block(11.575, 48.137)
    assert block[0] == cid
    assert len(block) == 9 == len(set(block))


def test_cells_are_at_least_side_wide() -> None:
    grid = CellGrid(500)
    for lat in (0.0, 30.0, 60.0, 79.9):
        row = grid.row_of(lat)
        south = -90.0 + row * 180.0 / grid.n_rows
        north = south + 180.0 / grid.n_rows
        assert distance_m(0.0, south, 0.0, north) >= 500.0
        edge = north if lat >= 0 else south
        width_deg = 360.0 / grid.n_cols(row)
        assert distance_m(0.0, edge, width_deg, edge) >= 499.9


@settings(max_examples=300, deadline=None)
@given(
    lat=st.floats(-80.0, 80.0),
    lon=st.floats(-180.0, 179.999),
    az=st.floats(-180.0, 180.0),
    frac=st.floats(0.0, 0.99),
    side=st.sampled_from([100, 400, 1600, 6400]),
)
def test_block_covers_every_point_within_side(
    lat: float, lon: float, az: float, frac: float, side: int
) -> None:
    grid = CellGrid(side)
    lon2, lat2, _ = WGS84.fwd(lon, lat, az, frac * side)
    assert grid.cell_of(float(lon2), float(lat2)) in grid.block(lon, lat)


def test_wraps_at_antimeridian() -> None:
    grid = CellGrid(1600)
    assert grid.cell_of(179.9999, 10.0) in grid.block(-179.9999, 10.0)
    assert math.isfinite(grid.center_of(179.99, 10.0)[0])
