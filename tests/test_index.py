"""Moving-user state (UserTable) and the candidate spatial indexes agree with brute force."""

from __future__ import annotations

import numpy as np
import pytest

from locpriv.core.cloak.users import UserTable


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


def test_user_table_batch_and_single_updates_keep_the_same_state() -> None:
    """A batch applies its rows in order, as the same reports one ``update()`` at a time
    would: positions, previous reports, settle points and seen speeds alike."""
    rng = np.random.default_rng(5)
    ids = [f"u{i}" for i in range(40)]
    one, many = UserTable(capacity=4), UserTable(capacity=4)
    pos = rng.uniform(0.0, 500.0, (40, 2))
    now = 0.0
    for _ in range(60):
        now += float(rng.choice([1.0, 10.0, 30.0, 45.0]))
        pos += rng.normal(0.0, float(rng.choice([1.0, 20.0, 200.0])), pos.shape)
        rows = rng.integers(0, 40, size=25)  # repeats included
        many.update_many([ids[i] for i in rows], pos[rows], now)
        for i in rows:
            one.update(ids[i], float(pos[i, 0]), float(pos[i, 1]), now)
    assert one.ids == many.ids
    for name in (
        "x",
        "y",
        "t",
        "px",
        "py",
        "pt",
        "ox",
        "oy",
        "ot",
        "sx",
        "sy",
        "still_t",
        "vmax",
        "at",
    ):
        assert np.array_equal(getattr(one, name), getattr(many, name)), name
    assert many.vmax.max() > 3.0  # the 200 m jumps were read as speeds


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
