"""Fixed square tiles of a deployment's plane and their stable assignment to shards (pure).

The local projection's plane (metres, :class:`~locpriv.core.geo.LocalProjection`) is cut into
squares of side ``side_m``; tile ``(ix, iy)`` covers ``[ix·side, (ix+1)·side) ×
[iy·side, (iy+1)·side)`` and is named ``t{ix}_{iy}`` (negative indices allowed), a valid topic
segment. Without a side (``side_m=None``) the world is one tile, :data:`WORLD_TILE`.

Shards: :func:`shard_of` assigns a tile to one of ``n`` shards by rendezvous (highest random
weight) hashing over a keyed BLAKE2b of the tile id and the shard index, so every process agrees
without coordination, the shards get about ``1/n`` of the tiles each, and going from ``n`` to
``n + 1`` shards moves only the ~``1/(n+1)`` of the tiles the new shard wins.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from locpriv.wire.topics import WORLD_TILE

__all__ = ["WORLD_TILE", "Shard", "Tiling", "parse_tile", "shard_of", "tile_id"]

_TILE = re.compile(r"^t(-?\d{1,9})_(-?\d{1,9})$")


def tile_id(ix: int, iy: int) -> str:
    """The topic segment of tile ``(ix, iy)``."""
    return f"t{ix}_{iy}"


def parse_tile(tile: str) -> tuple[int, int] | None:
    """``(ix, iy)`` of a tile id, or None when ``tile`` is not one."""
    m = _TILE.fullmatch(tile)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True, slots=True)
class Tiling:
    """Square tiles of side ``side_m`` metres (None: the whole plane is :data:`WORLD_TILE`)."""

    side_m: float | None = None

    def __post_init__(self) -> None:
        if self.side_m is not None and not (math.isfinite(self.side_m) and self.side_m > 0):
            raise ValueError("tile side must be a positive finite number of metres")

    def index_of(self, x_m: float, y_m: float) -> tuple[int, int] | None:
        """Tile indices of a point in local metres; None for a non-finite point."""
        if not (math.isfinite(x_m) and math.isfinite(y_m)):
            return None
        if self.side_m is None:
            return 0, 0
        return _cell(x_m, self.side_m), _cell(y_m, self.side_m)

    def tile_of(self, x_m: float, y_m: float) -> str | None:
        """The id of the tile holding a point (local metres); None for a non-finite point."""
        ij = self.index_of(x_m, y_m)
        return None if ij is None else tile_id(*ij)

    def rect(self, tile: str) -> tuple[float, float, float, float] | None:
        """``(xmin, ymin, xmax, ymax)`` of a tile in metres; None without tiles or for a bad id."""
        ij = parse_tile(tile)
        if ij is None or self.side_m is None:
            return None
        s = self.side_m
        return ij[0] * s, ij[1] * s, (ij[0] + 1) * s, (ij[1] + 1) * s

    def covering(self, extent: tuple[float, float, float, float]) -> Iterator[str]:
        """Ids of every tile meeting ``extent = (xmin, ymin, xmax, ymax)`` (metres)."""
        if self.side_m is None:
            yield WORLD_TILE
            return
        s = self.side_m
        x0, y0, x1, y1 = extent
        for ix in range(math.floor(x0 / s), math.ceil(x1 / s)):
            for iy in range(math.floor(y0 / s), math.ceil(y1 / s)):
                yield tile_id(ix, iy)


def _cell(v: float, side: float) -> int:
    """The ``i`` with ``i*side <= v < (i+1)*side`` (the products as :meth:`Tiling.rect`
    computes them): ``floor(v / side)``, corrected by one where the division rounded across an
    integer (e.g. ``v = -5e-324`` divides to ``-0.0``)."""
    i = math.floor(v / side)
    if v < i * side:
        return i - 1
    if v >= (i + 1) * side:
        return i + 1
    return i


def _weight(tile: str, shard: int) -> bytes:
    return hashlib.blake2b(f"{tile}/{shard}".encode(), digest_size=8, key=b"locpriv-hrw").digest()


def shard_of(tile: str, shards: int) -> int:
    """The shard (``0 … shards-1``) owning ``tile``: rendezvous hashing, stable everywhere."""
    if shards < 1:
        raise ValueError("shards must be >= 1")
    if shards == 1:
        return 0
    return max(range(shards), key=lambda i: _weight(tile, i))


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count`` (``--shard I/N``); ``Shard(0, 1)`` owns every tile."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not (self.count >= 1 and 0 <= self.index < self.count):
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= I < N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` -> ``Shard(I, N)``; raises ValueError."""
        head, sep, tail = text.partition("/")
        if not sep or not head.isdigit() or not tail.isdigit():
            raise ValueError(f"--shard {text!r}: expected I/N, e.g. 0/2")
        return cls(int(head), int(tail))

    def owns(self, tile: str) -> bool:
        """True when this shard serves ``tile``."""
        return self.count == 1 or shard_of(tile, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
