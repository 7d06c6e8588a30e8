"""Points of interest: loading, an rtree index answering point/region/centroid queries, refining.

Pure (no I/O besides the loaders). Distances inside :class:`POIIndex` are planar metres in the
deployment's :class:`~locpriv.core.geo.LocalProjection`; :func:`refine` uses geodesic metres on
WGS84.
The two differ by at most about 1e-5 relative inside a city, so every candidate radius is
inflated by ``SAFETY_REL`` (relative) plus ``SAFETY_ABS_M`` metres: candidate sets stay
supersets of the exact geodesic answer.

Candidate sets (Casper-style privacy-aware query processing) for a region ``R``:

* ``nearest n`` - let ``d_n(c)`` be the distance from a point ``c`` to its n-th nearest POI. It
  is 1-Lipschitz, so for every ``p`` in ``R``: ``d_n(p) <= d_n(c) + max_{w in R} |w - c|``, and the
  max is reached at a vertex of ``R``. Taking ``r`` as the minimum of that bound over the vertices
  and the centroid of ``R``, every one of the n nearest POIs of any ``p`` in ``R`` lies within
  ``d_n(p) <= r`` of ``p`` and hence within ``r`` of ``R``: the candidates are all POIs of the
  category within ``r`` of ``R`` (all of them when the category has fewer than n).
* ``within radius`` - the POIs within ``radius_m`` of ``R`` (the union over p in R, exactly).
* a centroid ``c`` with ``radius_m = rho`` is the disk ``R = D(c, rho)``: nearest candidates are
  the POIs within ``d_n(c) + 2 rho`` of ``c``, within-candidates those within ``radius + rho``.

``tests/test_poi.py`` checks with hypothesis that for random points of random regions the exact
answer is a subset of the candidates.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import shapely
from numpy.typing import NDArray
from rtree import index as rtree_index
from shapely.geometry import MultiPolygon, Polygon

from locpriv.core.geo import LocalProjection, RegionShape, distance_m, region_from_wire
from locpriv.errors import ConfigError, DataError
from locpriv.wire.messages import (
    POI,
    CentroidLocation,
    DSLocation,
    NearestQuery,
    PointLocation,
    Query,
    RegionLocation,
    WithinQuery,
)

DEFAULT_POIS: Final = Path(__file__).resolve().parents[1] / "data" / "pois.csv"
"""The generated demo POI set shipped with locpriv (5,000 POIs, 6 categories, 20 km x 20 km
around Barcelona; ``scripts/make_pois.py``)."""

__all__ = [
    "DEFAULT_POIS",
    "SAFETY_ABS_M",
    "SAFETY_REL",
    "POIIndex",
    "load_pois",
    "refine",
]

SAFETY_REL: Final = 1e-4
"""Relative inflation of candidate radii (projection vs geodesic distances)."""
SAFETY_ABS_M: Final = 1.0
"""Absolute inflation of candidate radii, metres."""

F64 = NDArray[np.float64]
_ALL: Final = "\x00all"


def _inflate(r_m: float) -> float:
    return r_m * (1.0 + SAFETY_REL) + SAFETY_ABS_M


class _Layer:
    """POIs of one category (or all): coordinates in metres and an rtree over them."""

    def __init__(self, rows: NDArray[np.int64], x: F64, y: F64) -> None:
        self.rows = rows
        self.x = x
        self.y = y
        self.points = shapely.points(x, y)
        props = rtree_index.Property()
        props.dimension = 2
        self.tree = (
            rtree_index.Index(
                (
                    (int(i), (float(x[i]), float(y[i]), float(x[i]), float(y[i])), None)
                    for i in range(len(rows))
                ),
                properties=props,
            )
            if len(rows)
            else None
        )
        self._grid(x, y)

    def _grid(self, x: F64, y: F64) -> None:
        """2-D prefix sums of POI counts over square cells (at most 256 a side): any box's
        count is bounded from above in O(1) (:meth:`count_box`)."""
        if len(x) == 0:
            self.origin, self.cell, self.sums = (0.0, 0.0), 1.0, np.zeros((2, 2), np.int64)
            return
        x0, y0 = float(x.min()), float(y.min())
        extent = max(float(x.max()) - x0, float(y.max()) - y0, 1.0)
        self.cell = max(extent / 255.0, 1.0)
        side = int(extent // self.cell) + 1
        i = np.minimum(((x - x0) // self.cell).astype(np.int64), side - 1)
        j = np.minimum(((y - y0) // self.cell).astype(np.int64), side - 1)
        counts = np.zeros((side, side), np.int64)
        np.add.at(counts, (i, j), 1)
        self.sums = np.zeros((side + 1, side + 1), np.int64)
        self.sums[1:, 1:] = counts.cumsum(0).cumsum(1)
        self.origin = (x0, y0)

    def count_box(self, x0: float, y0: float, x1: float, y1: float) -> int:
        """An upper bound of the POIs in the box ``[x0, x1] x [y0, y1]`` (metres): those of
        the grid cells it touches; O(1)."""
        side = self.sums.shape[0] - 1
        ox, oy = self.origin

        def cell(v: float, o: float) -> int:
            return int(min(max(math.floor((v - o) / self.cell), -1), side))

        i0, i1 = max(cell(x0, ox), 0), min(cell(x1, ox), side - 1)
        j0, j1 = max(cell(y0, oy), 0), min(cell(y1, oy), side - 1)
        if i0 > i1 or j0 > j1:
            return 0
        s = self.sums
        return int(s[i1 + 1, j1 + 1] - s[i0, j1 + 1] - s[i1 + 1, j0] + s[i0, j0])

    def __len__(self) -> int:
        return len(self.rows)

    def nearest(self, px: float, py: float, n: int) -> NDArray[np.int64]:
        """Local indices of the ``n`` nearest (ties by index), sorted by distance."""
        if self.tree is None or n <= 0:
            return np.empty(0, np.int64)
        cand = np.fromiter(self.tree.nearest((px, py, px, py), n), np.int64)
        d = np.hypot(self.x[cand] - px, self.y[cand] - py)
        order = np.lexsort((cand, d))
        return cand[order][:n]

    def kth_distance(self, px: float, py: float, n: int) -> float:
        """Distance (m) to the n-th nearest; inf when fewer than n POIs."""
        if len(self) < n:
            return math.inf
        near = self.nearest(px, py, n)
        return float(np.hypot(self.x[near[-1]] - px, self.y[near[-1]] - py))

    def within_geom(self, geom: shapely.Geometry, r_m: float) -> NDArray[np.int64]:
        """Local indices of POIs within ``r_m`` metres of ``geom`` (metres)."""
        if self.tree is None:
            return np.empty(0, np.int64)
        x0, y0, x1, y1 = geom.bounds
        box = (x0 - r_m, y0 - r_m, x1 + r_m, y1 + r_m)
        cand = np.fromiter(self.tree.intersection(box), np.int64)
        if cand.size == 0:
            return cand
        keep = shapely.distance(geom, self.points[cand]) <= r_m
        return np.sort(cand[keep])


class POIIndex:
    """An rtree over POIs projected with ``projection`` (local metres), per category.

    Answers :meth:`answer` for point (exact), region and centroid (candidate supersets) queries.
    """

    def __init__(self, pois: Sequence[POI], projection: LocalProjection) -> None:
        self.pois: list[POI] = list(pois)
        self.projection = projection
        lon = np.array([p.lon for p in self.pois], dtype=np.float64)
        lat = np.array([p.lat for p in self.pois], dtype=np.float64)
        x, y = projection.to_xy(lon, lat) if self.pois else (lon, lat)
        self._layers: dict[str, _Layer] = {}
        cats = np.array([p.category for p in self.pois], dtype=object)
        all_rows = np.arange(len(self.pois), dtype=np.int64)
        self._layers[_ALL] = _Layer(all_rows, x, y)
        for cat in sorted(set(cats.tolist())):
            rows = all_rows[cats == cat]
            self._layers[cat] = _Layer(rows, x[rows], y[rows])

    @property
    def categories(self) -> list[str]:
        """The categories present."""
        return sorted(k for k in self._layers if k != _ALL)

    def __len__(self) -> int:
        return len(self.pois)

    def _layer(self, category: str | None) -> _Layer | None:
        return self._layers.get(_ALL if category is None else category)

    def _take(self, layer: _Layer, local: NDArray[np.int64]) -> list[POI]:
        return [self.pois[int(i)] for i in layer.rows[local]]

    # ---------------------------------------------------------------- queries (metres)

    def nearest_xy(self, x: float, y: float, category: str, n: int) -> list[POI]:
        """Exact ``n`` nearest POIs of ``category`` to ``(x, y)`` metres, nearest first."""
        layer = self._layer(category)
        if layer is None:
            return []
        return self._take(layer, layer.nearest(x, y, n))

    def within_xy(self, x: float, y: float, radius_m: float, category: str | None) -> list[POI]:
        """Exact POIs within ``radius_m`` of ``(x, y)``, nearest first."""
        layer = self._layer(category)
        if layer is None:
            return []
        local = layer.within_geom(shapely.Point(x, y), radius_m)
        d = np.hypot(layer.x[local] - x, layer.y[local] - y)
        return self._take(layer, local[np.lexsort((local, d))])

    def region_candidates(self, region_xy: RegionShape, query: Query) -> list[POI]:
        """Candidates containing the exact answer for every point of ``region_xy`` (metres): one
        polygon, or a region of tiles (the union of each tile's candidates, in index order)."""
        layer = self._layer(query.category)
        if layer is None or len(layer) == 0:
            return []
        if isinstance(query, NearestQuery) and len(layer) <= query.n:
            return self._take(layer, np.arange(len(layer), dtype=np.int64))
        parts = list(region_xy.geoms) if isinstance(region_xy, MultiPolygon) else [region_xy]
        found = [self._polygon_candidates(layer, p, query) for p in parts]
        local = found[0] if len(found) == 1 else np.unique(np.concatenate(found))
        return self._take(layer, local)

    def _polygon_candidates(
        self, layer: _Layer, polygon: Polygon, query: Query
    ) -> NDArray[np.int64]:
        """Rows of ``layer`` that answer ``query`` for some point of ``polygon`` (metres)."""
        if isinstance(query, WithinQuery):
            return layer.within_geom(polygon, _inflate(query.radius_m))
        coords = np.asarray(polygon.exterior.coords)[:-1]
        centres = np.vstack([coords, np.asarray(polygon.centroid.coords)])
        best = math.inf
        for cx, cy in centres:
            reach = float(np.max(np.hypot(coords[:, 0] - cx, coords[:, 1] - cy)))
            best = min(best, layer.kth_distance(float(cx), float(cy), query.n) + reach)
        return layer.within_geom(polygon, _inflate(best))

    def centroid_candidates(self, x: float, y: float, rho_m: float, query: Query) -> list[POI]:
        """Candidates for every point within ``rho_m`` metres of ``(x, y)``."""
        layer = self._layer(query.category)
        if layer is None or len(layer) == 0:
            return []
        if isinstance(query, WithinQuery):
            r = query.radius_m + rho_m
        elif len(layer) <= query.n:
            return self._take(layer, np.arange(len(layer), dtype=np.int64))
        else:
            r = layer.kth_distance(x, y, query.n) + 2.0 * rho_m
        return self._take(layer, layer.within_geom(shapely.Point(x, y), _inflate(r)))

    # ------------------------------------------------------------------- wire level

    def estimate(self, query: Query, location: DSLocation) -> int:
        """About how many POIs :meth:`answer` would return, from the index alone and before the
        work: the POIs of the category in the bounding box of the location (a region's ring, a
        centroid's disk) widened by the query's reach (``radius_m``, or for ``nearest`` over an
        area the n-th nearest distance from the box's centre plus twice its half diagonal).
        An upper bound for ``within`` queries and point queries (counted by grid cells,
        :meth:`_Layer.count_box`); O(1) but for a region's vertices."""
        layer = self._layer(query.category)
        if layer is None or layer.tree is None:
            return 0
        proj = self.projection
        if isinstance(location, RegionLocation):
            lon, lat = zip(*(v for r in location.region.rings for v in r), strict=True)
            xs, ys = proj.to_xy(np.asarray(lon), np.asarray(lat))
            x0, y0, x1, y1 = float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())
        else:
            x, y = proj.point_to_xy(location.lon, location.lat)
            rho = location.radius_m if isinstance(location, CentroidLocation) else 0.0
            if isinstance(query, NearestQuery) and rho <= 0.0:
                return min(query.n, len(layer))
            x0, y0, x1, y1 = x - rho, y - rho, x + rho, y + rho
        if isinstance(query, WithinQuery):
            reach = _inflate(query.radius_m)
        elif len(layer) <= query.n:
            return len(layer)
        else:
            half = 0.5 * math.hypot(x1 - x0, y1 - y0)
            centre = (0.5 * (x0 + x1), 0.5 * (y0 + y1))
            reach = _inflate(layer.kth_distance(*centre, query.n) + 2.0 * half)
        return layer.count_box(x0 - reach, y0 - reach, x1 + reach, y1 + reach)

    def answer(self, query: Query, location: DSLocation) -> tuple[list[POI], bool]:
        """``(pois, candidates)`` for a wire query; ``candidates`` is True for supersets."""
        proj = self.projection
        if isinstance(location, PointLocation):
            x, y = proj.point_to_xy(location.lon, location.lat)
            if isinstance(query, NearestQuery):
                return self.nearest_xy(x, y, query.category, query.n), False
            return self.within_xy(x, y, query.radius_m, query.category), False
        if isinstance(location, RegionLocation):
            shape = proj.geometry_to_xy(region_from_wire(location.region))
            assert isinstance(shape, Polygon | MultiPolygon)
            if not shape.is_valid:  # a self-crossing ring, or parts that overlap
                shape = shapely.convex_hull(shape)
                assert isinstance(shape, Polygon)
            return self.region_candidates(shape, query), True
        assert isinstance(location, CentroidLocation)
        x, y = proj.point_to_xy(location.lon, location.lat)
        if location.radius_m <= 0.0:
            if isinstance(query, NearestQuery):
                return self.nearest_xy(x, y, query.category, query.n), False
            return self.within_xy(x, y, query.radius_m, query.category), False
        return self.centroid_candidates(x, y, location.radius_m, query), True


# ------------------------------------------------------------------------ client side


def refine(pois: Iterable[POI], query: Query, *, lon: float, lat: float) -> list[POI]:
    """The exact answer at ``(lon, lat)`` degrees from a candidate set (geodesic metres).

    ``nearest``: the ``n`` nearest of the category (ties broken by id), nearest first.
    ``within``: those of the category (if given) within ``radius_m``, nearest first.
    """
    if query.category is None:
        pool = list(pois)
    else:
        pool = [p for p in pois if p.category == query.category]
    if not pool:
        return []
    d = distance_m(lon, lat, [p.lon for p in pool], [p.lat for p in pool])
    order = sorted(range(len(pool)), key=lambda i: (float(d[i]), pool[i].id))
    if isinstance(query, NearestQuery):
        return [pool[i] for i in order[: query.n]]
    return [pool[i] for i in order if float(d[i]) <= query.radius_m]


# ---------------------------------------------------------------------------- loaders


def _poi(row: dict[str, Any], where: str) -> POI:
    try:
        return POI(
            id=str(row["id"]),
            category=str(row["category"]),
            lat=float(row["lat"]),
            lon=float(row["lon"]),
            name=str(row.get("name") or ""),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise DataError(f"{where}: bad POI record ({exc.__class__.__name__}: {exc})") from None


def load_pois(path: str | Path) -> list[POI]:
    """POIs from CSV (columns id, category, lat, lon[, name]) or GeoJSON (Point features
    with properties id, category[, name]). Raises DataError naming the bad row."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"POI file {p} does not exist")
    if p.suffix.lower() in (".geojson", ".json"):
        data = json.loads(p.read_text(encoding="utf-8"))
        out: list[POI] = []
        for i, feat in enumerate(data.get("features", [])):
            geom = feat.get("geometry") or {}
            if geom.get("type") != "Point":
                raise DataError(f"{p}: feature {i} is not a Point")
            props = dict(feat.get("properties") or {})
            props.setdefault("id", feat.get("id", str(i)))
            props["lon"], props["lat"] = geom["coordinates"][:2]
            out.append(_poi(props, f"{p}: feature {i}"))
        return out
    with p.open(newline="", encoding="utf-8") as fh:
        return [_poi(row, f"{p}:{n + 2}") for n, row in enumerate(csv.DictReader(fh))]
