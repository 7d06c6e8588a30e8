"""Session regions made of tiles (``CloakConfig.session_tile_factor`` > 1): pure geometry.

A session's grid (:func:`tile_grid`) has square tiles of side ``factor * sqrt(A_min)`` (each
larger than A_min) at an offset drawn once per session, blind to every position. A region
(:func:`tile_region`) is every tile that holds a member of the session's set or comes within
her margin (where her device may be since her fix): its edges are grid lines, its area is the
number of tiles times a tile's, and it does not grow as the members walk apart, only with how
many tiles their margins touch. docs/algorithms.md, "Regions made of tiles", has the study and
the trade: each member is hidden within her own tiles, not within the whole region.

Coordinates are local metres, areas m². Tile ``(ix, iy)`` spans ``ox + ix * side`` to
``ox + (ix + 1) * side`` (and likewise in y); it is keyed ``ix * 2**32 + iy`` (exact for
indices below 2**31 in magnitude).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import shapely
from numpy.typing import NDArray

from locpriv.core.cloak.history import grid_cells
from locpriv.core.cloak.types import Box

__all__ = [
    "Grid",
    "TileRegion",
    "member_tiles",
    "point_tiles",
    "tile_box",
    "tile_grid",
    "tile_region",
    "tile_side_m",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

Grid = tuple[float, float, float]
"""A tile grid: tile side, x and y offsets (metres), as :func:`tile_grid` draws one (the same
tuple as a box session's :func:`~locpriv.core.cloak.history.session_grid`)."""

_SHIFT = np.int64(1 << 32)


def tile_side_m(a_min_m2: float, factor: float, min_m: float) -> float:
    """The side (m) of a session's tiles: ``factor * sqrt(a_min_m2)``, at least ``min_m``
    (and 1 m)."""
    return max(factor * math.sqrt(max(a_min_m2, 0.0)), min_m, 1.0)


def tile_grid(side_m: float, rng: np.random.Generator) -> Grid:
    """A grid of tiles of ``side_m`` at an offset drawn from ``rng`` (seeded per session, so
    that every region of a session shares it)."""
    ox, oy = (float(v) for v in rng.uniform(0.0, side_m, 2))
    return side_m, ox, oy


def member_tiles(xy: F64, grid: Grid, margin_m: float | F64) -> list[I64]:
    """Per row of ``xy`` (n, 2; metres), the keys of the tiles of ``grid`` that hold the point
    or come within ``margin_m`` (one value, or one per row) of it: the grid box of the point's
    margin square (:func:`~locpriv.core.cloak.history.grid_cells`, a box session's own
    rounding; 1, 2 or 4 tiles while the margin is under half a tile)."""
    mg = np.broadcast_to(np.asarray(margin_m, dtype=np.float64), (len(xy),)).tolist()
    out: list[I64] = []
    for (x, y), m in zip(np.asarray(xy, dtype=np.float64).tolist(), mg, strict=True):
        ix0, iy0, ix1, iy1 = grid_cells((x - m, y - m, x + m, y + m), grid, 0.0)
        ix, iy = np.meshgrid(np.arange(ix0, ix1), np.arange(iy0, iy1), indexing="ij")
        out.append((ix.ravel() * _SHIFT + iy.ravel()).astype(np.int64))
    return out


def tile_box(key: int, grid: Grid) -> Box:
    """The box (x0, y0, x1, y1 metres) of the tile of ``grid`` keyed ``key``."""
    step, ox, oy = grid
    iy = (key + (1 << 31)) % (1 << 32) - (1 << 31)
    ix = (key - iy) >> 32
    x0, y0 = ox + ix * step, oy + iy * step
    return x0, y0, x0 + step, y0 + step


def point_tiles(xy: F64, grid: Grid) -> I64:
    """The key of the tile of ``grid`` each row of ``xy`` (n, 2; metres) lies in."""
    step, ox, oy = grid
    t = np.floor((np.asarray(xy, dtype=np.float64) - np.array([ox, oy])) / step).astype(np.int64)
    keys: I64 = t[:, 0] * _SHIFT + t[:, 1]
    return keys


class TileRegion(NamedTuple):
    """A region of tiles: ``tiles`` (boxes x0, y0, x1, y1 m, sorted by key; empty when there
    were more than the cap and ``shape`` is their box), ``shape`` (their union, or that box),
    ``area_m2`` and ``keys`` (every tile the members' margins touch, sorted)."""

    tiles: tuple[Box, ...]
    shape: shapely.Polygon | shapely.MultiPolygon
    area_m2: float
    keys: I64


def _decode(keys: I64) -> tuple[I64, I64]:
    """Tile indices ``(ix, iy)`` of ``keys``."""
    iy = (keys + (1 << 31)) % (1 << 32) - (1 << 31)
    return (keys - iy) >> 32, iy


def tile_region(xy: F64, margin_m: float | F64, grid: Grid, max_tiles: int) -> TileRegion:
    """The region of tiles around the members at ``xy`` (m, 2; metres), each with her
    ``margin_m``. Its area is the number of tiles times a tile's (they never overlap); with
    more than ``max_tiles`` tiles (more than a wire region carries) it is instead the box of
    the grid that holds them all, no tiles listed."""
    keys = np.unique(np.concatenate(member_tiles(xy, grid, margin_m)))
    step, ox, oy = grid
    if len(keys) > max_tiles:
        ix, iy = _decode(keys)
        x0, y0 = ox + int(ix.min()) * step, oy + int(iy.min()) * step
        x1, y1 = ox + (int(ix.max()) + 1) * step, oy + (int(iy.max()) + 1) * step
        return TileRegion((), shapely.box(x0, y0, x1, y1), (x1 - x0) * (y1 - y0), keys)
    boxes = tuple(tile_box(int(c), grid) for c in keys.tolist())
    union = shapely.union_all([shapely.box(*b) for b in boxes])
    assert isinstance(union, shapely.Polygon | shapely.MultiPolygon)
    return TileRegion(boxes, union, len(boxes) * step * step, keys)
