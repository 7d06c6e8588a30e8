"""Moving-user state (UserTable) and the candidate spatial indexes agree with brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from locpriv.index import GridIndex, KDTreeIndex, RtreeIndex, SpatialIndex, UserTable


def test_user_table_update_remove_and_slot_reuse() -> None:
    tab = UserTable(capacity=2)
    s_a = tab.update("a", 1.0, 2.0, 10.0)
    tab.update("b", 3.0, 4.0, 11.0)
    assert len(tab) == 2
    assert "a" in tab
    assert (tab.x[s_a], tab.y[s_a], tab.t[s_a]) == (1.0, 2.0, 10.0)
    assert tab.update("a", 5.0, 6.0, 12.0) == s_a  # same slot on re-update
    gen_a = tab.gen[s_a]
    assert tab.remove("a")
    assert not tab.remove("a")
    assert "a" not in tab
    s_c = tab.update("c", 0.0, 0.0, 13.0)
    assert s_c == s_a  # freed slot reused, generation bumped
    assert tab.gen[s_c] == gen_a + 1
    for i in range(100):  # growth beyond capacity keeps earlier rows
        tab.update(f"u{i}", float(i), float(-i), 14.0)
    assert len(tab) == 102
    s_b = tab.ids["b"]
    assert (tab.x[s_b], tab.y[s_b]) == (3.0, 4.0)
    assert sorted(tab.active_slots().tolist()) == sorted(tab.ids.values())


def test_user_table_update_many_is_vectorised_update() -> None:
    tab = UserTable()
    ids = [f"u{i}" for i in range(50)] + ["u3"]  # duplicate: last row wins
    xy = np.arange(102, dtype=np.float64).reshape(51, 2)
    slots = tab.update_many(ids, xy, now=7.0)
    assert len(tab) == 50
    assert slots[3] == slots[50]
    assert tab.x[tab.ids["u3"]] == 100.0
    assert tab.y[tab.ids["u10"]] == 21.0
    assert np.all(tab.t[slots] == 7.0)
    with pytest.raises(ValueError, match="shape"):
        tab.update_many(["a"], np.zeros((2, 2)), now=1.0)


def test_user_table_expire_forgets_silent_users() -> None:
    tab = UserTable()
    tab.update("old", 0.0, 0.0, 0.0)
    tab.update("new", 0.0, 0.0, 50.0)
    assert tab.oldest_update() == 0.0
    assert tab.expire(now=60.0, ttl_s=30.0) == 1
    assert "old" not in tab
    assert "new" in tab
    assert tab.oldest_update() == 50.0
    assert tab.expire(now=60.0, ttl_s=30.0) == 0
    tab.remove("new")
    assert tab.oldest_update() is None


def _brute_knn(pts: dict[int, tuple[float, float]], x: float, y: float, k: int) -> list[float]:
    d = sorted(math.hypot(px - x, py - y) for px, py in pts.values())
    return d[:k]


@pytest.mark.parametrize("kind", ["rtree", "grid", "kdtree"])
def test_indexes_match_brute_force_after_moves(kind: str) -> None:
    rng = np.random.default_rng(3)
    tab = UserTable()
    idx: SpatialIndex
    kd: KDTreeIndex | None = None
    if kind == "rtree":
        idx = RtreeIndex()
    elif kind == "grid":
        idx = GridIndex(cell_m=250.0)
    else:
        kd = KDTreeIndex(tab)
        idx = kd
    pts: dict[int, tuple[float, float]] = {}
    for step in range(3000):
        uid = f"u{rng.integers(400)}"
        if step % 10 == 9 and uid in tab:
            slot = tab.ids[uid]
            tab.remove(uid)
            idx.delete(slot)
            del pts[slot]
            continue
        x, y = (float(v) for v in rng.uniform(0, 5000, 2))
        slot = tab.update(uid, x, y, float(step))
        idx.move(slot, x, y)
        pts[slot] = (x, y)
    for _ in range(30):
        qx, qy = (float(v) for v in rng.uniform(0, 5000, 2))
        k = int(rng.integers(1, 20))
        got = idx.nearest(qx, qy, k)
        assert len(got) == k
        got_d = sorted(math.hypot(pts[s][0] - qx, pts[s][1] - qy) for s in got)
        assert np.allclose(got_d, _brute_knn(pts, qx, qy, k))
        x0, y0 = qx - 400, qy - 300
        want = sum(x0 <= px <= qx and y0 <= py <= qy for px, py in pts.values())
        assert idx.count_in(x0, y0, qx, qy) == want


def test_kdtree_index_with_max_age_answers_from_snapshot() -> None:
    tab = UserTable()
    kd = KDTreeIndex(tab, max_age=1.0)
    tab.update("a", 0.0, 0.0, 0.0)
    kd.tick(0.0)
    assert kd.count_in(-1, -1, 1, 1) == 1
    tab.update("b", 0.5, 0.5, 0.1)
    kd.move(tab.ids["b"], 0.5, 0.5)
    kd.tick(0.5)
    assert kd.count_in(-1, -1, 1, 1) == 1  # same epoch: the snapshot is reused
    kd.tick(1.0)
    assert kd.count_in(-1, -1, 1, 1) == 2


def test_grid_index_rejects_bad_cell() -> None:
    with pytest.raises(ValueError, match="cell_m"):
        GridIndex(0.0)
