"""Tiles of the plane and their rendezvous assignment to shards (pure)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from locpriv.core.tiles import Shard, Tiling, parse_tile, shard_of, tile_id
from locpriv.wire.topics import WORLD_TILE, Topics


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.floats(10.0, 1e5))
def test_a_point_lies_in_the_rect_of_its_tile(x: float, y: float, side: float) -> None:
    tiling = Tiling(side)
    tile = tiling.tile_of(x, y)
    assert tile is not None
    Topics().location("u", tile=tile)  # a valid topic segment
    x0, y0, x1, y1 = tiling.rect(tile) or (math.nan,) * 4
    assert x0 <= x < x1 and y0 <= y < y1


def test_tile_ids_round_trip_and_negative_indices() -> None:
    assert tile_id(-3, 4) == "t-3_4"
    assert parse_tile("t-3_4") == (-3, 4)
    for bad in ("t3", "x1_2", "t1_2_3", "t_1", "t1.0_2", WORLD_TILE + "x"):
        assert parse_tile(bad) is None
    assert Tiling(1000.0).tile_of(-0.5, 999.9) == "t-1_0"
    assert Tiling().tile_of(1e7, -1e7) == WORLD_TILE
    assert Tiling(1000.0).tile_of(math.inf, 0.0) is None
    with pytest.raises(ValueError):
        Tiling(0.0)


def test_covering_lists_every_tile_meeting_the_extent() -> None:
    tiles = list(Tiling(5000.0).covering((-25_000, -25_000, 25_000, 25_000)))
    assert len(tiles) == 100 == len(set(tiles))
    assert list(Tiling(5000.0).covering((0, 0, 5000, 1))) == ["t0_0"]
    assert list(Tiling().covering((-1, -1, 1, 1))) == [WORLD_TILE]


def test_rendezvous_is_balanced_and_moves_few_tiles() -> None:
    tiles = [tile_id(i, j) for i in range(-20, 20) for j in range(-20, 20)]  # 1600
    for n in (2, 3, 4, 8):
        counts = Counter(shard_of(t, n) for t in tiles)
        assert set(counts) == set(range(n))
        assert max(counts.values()) / (len(tiles) / n) < 1.2  # within 20 % of even
    for n in (2, 4, 7, 16):
        before = {t: shard_of(t, n) for t in tiles}
        after = {t: shard_of(t, n + 1) for t in tiles}
        moved = [t for t in tiles if before[t] != after[t]]
        # only the tiles the new shard wins move: about 1/(n+1) of them, all to shard n
        assert all(after[t] == n for t in moved)
        assert abs(len(moved) / len(tiles) - 1 / (n + 1)) < 0.05


def test_shards_partition_the_tiles() -> None:
    tiles = [tile_id(i, j) for i in range(10) for j in range(10)]
    owners = [[s for s in range(3) if Shard(s, 3).owns(t)] for t in tiles]
    assert all(len(o) == 1 for o in owners)
    assert all(Shard().owns(t) for t in tiles)
    assert Shard.parse("1/4") == Shard(1, 4) and str(Shard(1, 4)) == "1/4"
    for bad in ("4/4", "1", "a/2", "-1/2", "0/0"):
        with pytest.raises(ValueError):
            Shard.parse(bad)
