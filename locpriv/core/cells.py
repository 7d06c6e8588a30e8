"""Spatial cells for Protocol 4 neighbour discovery: a global equal-height grid in metres.

Rows are bands of latitude at least ``side_m`` metres high (using the smallest meridian scale,
110 574 m/° at the equator). Row ``r`` is
cut into ``n_r`` equal columns, with ``n_r`` chosen at the row's poleward edge so every cell is
at least ``side_m`` metres wide everywhere inside it. Hence (:func:`CellGrid.block`): every point
within ``side_m`` metres of ``p`` lies in the 3×3 block of cells around ``p``'s cell (the cell
of ``p``, the cells left and right of it, and the three cells of the rows above and below
containing ``p``'s longitude and their left and right neighbours). Near the poles rows have few
columns and the block holds fewer than 9 distinct cells.

Cell ids are topic segments ``g{side_m}_{row}_{col}``, e.g. ``g1600_6123_5012``.

Discovery (documented in docs/peer.md): a device subscribes to the topic of the cell of its
*perturbed* point (the broker and neighbours learn that cell, nothing finer); a requester
publishes its request to the 3×3 block around its perturbed point. Choose ``side_m`` ≥ the
largest distance at which replies are wanted (see :func:`cell_side_for`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from locpriv.core.geo import metres_per_degree

M_PER_DEG_LAT_MIN: Final = 110_570.0
"""A lower bound of metres per degree of latitude on WGS84 (110 574 m at the equator)."""
_LADDER: Final[tuple[int, ...]] = tuple(100 * 2**i for i in range(12))  # 100 m .. 204.8 km


def cell_side_for(a_max_m2: float, max_distance_m: float | None = None) -> int:
    """A cell side in metres for a deployment: the smallest ladder step (100·2^i m) that is at
    least ``√a_max_m2`` and at least ``max_distance_m``.

    A group spanning less than ``a_max_m2`` and compact (minimum SSE) has its points within
    about ``√a_max_m2`` of each other, so 3×3 blocks of that side find them. Using a ladder
    lets deployments with nearby ``a_max_m2`` share one grid.
    """
    need = max(math.sqrt(max(a_max_m2, 0.0)), max_distance_m or 0.0)
    for step in _LADDER:
        if step >= need:
            return step
    raise ValueError(f"no cell side for a_max_m2={a_max_m2}, max_distance_m={max_distance_m}")


@dataclass(frozen=True, slots=True)
class CellGrid:
    """The grid of one deployment; ``side_m`` metres (integer so ids are stable)."""

    side_m: int

    def __post_init__(self) -> None:
        if self.side_m < 10:
            raise ValueError("side_m must be >= 10 metres")

    @property
    def n_rows(self) -> int:
        """Number of latitude bands."""
        return max(1, math.floor(180.0 * M_PER_DEG_LAT_MIN / self.side_m))

    @property
    def _dlat(self) -> float:
        return 180.0 / self.n_rows

    def row_of(self, lat_deg: float) -> int:
        """Row index of a latitude (degrees)."""
        return min(self.n_rows - 1, max(0, math.floor((lat_deg + 90.0) / self._dlat)))

    def n_cols(self, row: int) -> int:
        """Columns in ``row``: each at least ``side_m`` wide at the poleward edge."""
        south = -90.0 + row * self._dlat
        edge = max(abs(south), abs(south + self._dlat))
        m_lon = metres_per_degree(min(edge, 90.0))[0]
        return max(1, math.floor(360.0 * m_lon / self.side_m))

    def col_of(self, row: int, lon_deg: float) -> int:
        """Column index of a longitude in ``row``."""
        n = self.n_cols(row)
        return math.floor(((lon_deg + 180.0) % 360.0) / (360.0 / n)) % n

    def cell_id(self, row: int, col: int) -> str:
        """Topic-segment id of a cell."""
        return f"g{self.side_m}_{row}_{col}"

    def cell_of(self, lon_deg: float, lat_deg: float) -> str:
        """Id of the cell containing ``(lon, lat)``."""
        row = self.row_of(lat_deg)
        return self.cell_id(row, self.col_of(row, lon_deg))

    def center_of(self, lon_deg: float, lat_deg: float) -> tuple[float, float]:
        """Centre ``(lon, lat)`` in degrees of the cell containing ``(lon, lat)``."""
        row = self.row_of(lat_deg)
        n = self.n_cols(row)
        col = self.col_of(row, lon_deg)
        lon = -180.0 + (col + 0.5) * 360.0 / n
        return lon, -90.0 + (row + 0.5) * self._dlat

    def block(self, lon_deg: float, lat_deg: float) -> list[str]:
        """Ids of the 3×3 block around the cell of ``(lon, lat)``, own cell first, no repeats.

        Invariant: covers every point within ``side_m`` metres of ``(lon, lat)``.
        """
        row0 = self.row_of(lat_deg)
        out: list[str] = []
        for dr in (0, -1, 1):
            row = row0 + dr
            if not 0 <= row < self.n_rows:
                continue
            n = self.n_cols(row)
            col = self.col_of(row, lon_deg)
            for dc in (0, -1, 1):
                cid = self.cell_id(row, (col + dc) % n)
                if cid not in out:
                    out.append(cid)
        return out


__all__ = ["M_PER_DEG_LAT_MIN", "CellGrid", "cell_side_for"]
