"""Mobility models: shapes, bounds, streets, determinism, trace round trip, static mix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from locpriv.core.geo import LocalProjection
from simulators.mobility import (
    Trajectories,
    combine,
    load_trace,
    manhattan_grid,
    random_waypoint,
    static_users,
    time_grid,
    write_trace,
)

PROJ = LocalProjection(41.3874, 2.1686)


def test_time_grid_ends_exactly_at_duration() -> None:
    t = time_grid(10.0, 3.0)
    assert t.tolist() == [0.0, 3.0, 6.0, 9.0, 10.0]


def test_random_waypoint_stays_in_area_and_moves_at_configured_speeds() -> None:
    tr = random_waypoint(
        50,
        duration_s=300,
        dt_s=1,
        width_m=1000,
        height_m=600,
        rng=np.random.default_rng(1),
        speed_mps=(1.0, 2.0),
        pause_s=(0.0, 0.0),
    )
    assert tr.x_m.shape == (50, 301)
    x0, y0, x1, y1 = tr.bounds_m()
    assert x0 >= -500 and x1 <= 500 and y0 >= -300 and y1 <= 300
    step = np.hypot(np.diff(tr.x_m, axis=1), np.diff(tr.y_m, axis=1))
    assert step.max() <= 2.0 + 1e-9  # never faster than speed_max over 1 s
    assert 0.9 <= tr.speeds_mps().mean() <= 2.0  # no pauses: mostly moving


def test_same_seed_same_trajectories_other_seed_differs() -> None:
    def make(seed: int) -> Trajectories:
        return manhattan_grid(
            20, duration_s=120, dt_s=2, blocks=5, block_m=100, rng=np.random.default_rng(seed)
        )

    a, b, c = make(3), make(3), make(4)
    assert np.array_equal(a.x_m, b.x_m) and np.array_equal(a.y_m, b.y_m)
    assert not np.array_equal(a.x_m, c.x_m)


def test_manhattan_users_are_always_on_a_street() -> None:
    block = 100.0
    tr = manhattan_grid(
        30, duration_s=600, dt_s=1, blocks=6, block_m=block, rng=np.random.default_rng(7)
    )
    half = 6 * block / 2
    # a point is on a street when one of its coordinates is on the grid lattice
    on_x = np.isclose(np.mod(tr.x_m + half, block), 0, atol=1e-6) | np.isclose(
        np.mod(tr.x_m + half, block), block, atol=1e-6
    )
    on_y = np.isclose(np.mod(tr.y_m + half, block), 0, atol=1e-6) | np.isclose(
        np.mod(tr.y_m + half, block), block, atol=1e-6
    )
    assert np.all(on_x | on_y)
    assert tr.bounds_m() >= (-half, -half, -half, -half)
    assert tr.speeds_mps().max() <= 1.6 + 1e-9


def test_interpolation_between_samples_and_holding_outside() -> None:
    t = np.array([0.0, 10.0])
    tr = Trajectories(
        ("a",), t, np.array([[0.0, 10.0]]), np.array([[0.0, -20.0]]), np.zeros(1, bool)
    )
    assert tr.user_at(0, 5.0) == (5.0, -10.0)
    x, y = tr.at(2.5)
    assert (x[0], y[0]) == (2.5, -5.0)
    assert tr.user_at(0, 99.0) == (10.0, -20.0)
    assert tr.at(-1.0)[0][0] == 0.0


def test_static_mix_keeps_static_users_still_and_ids_unique() -> None:
    rng = np.random.default_rng(0)
    roam = random_waypoint(5, duration_s=60, dt_s=5, width_m=100, height_m=100, rng=rng)
    still = static_users(3, t_s=roam.t_s, width_m=100, height_m=100, rng=rng, block_m=20.0)
    mix = combine(roam, still)
    assert mix.n_users == 8 and mix.static.tolist() == [False] * 5 + [True] * 3
    assert np.all(np.ptp(mix.x_m[5:], axis=1) == 0) and np.all(np.ptp(mix.y_m[5:], axis=1) == 0)
    # each static user stands on a street of the 20 m grid
    on = np.isclose(np.mod(still.x_m[:, 0] + 50, 20), 0) | np.isclose(
        np.mod(still.y_m[:, 0] + 50, 20), 0
    )
    assert on.all()
    with pytest.raises(ValueError, match="unique"):
        combine(roam, roam)


def test_trace_round_trip(tmp_path: Path) -> None:
    tr = manhattan_grid(
        4, duration_s=40, dt_s=10, blocks=3, block_m=100, rng=np.random.default_rng(2)
    )
    path = tmp_path / "trace.csv"
    write_trace(tr, PROJ, path, t0_s=1.7e9)
    back = load_trace(path, PROJ, dt_s=10)
    assert back.user_ids == tr.user_ids
    assert np.allclose(back.t_s, tr.t_s)
    assert np.allclose(back.x_m, tr.x_m, atol=0.01) and np.allclose(back.y_m, tr.y_m, atol=0.01)


def test_trace_holds_users_before_first_and_after_last_fix(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "user_id,t,lat,lon\nb,100,41.3874,2.1686\na,110,41.3874,2.1686\na,120,41.3883,2.1686\n"
    )
    tr = load_trace(path, PROJ, dt_s=5)
    assert tr.user_ids == ("a", "b") and tr.duration_s == 20
    a = tr.user_ids.index("a")
    assert tr.user_at(a, 0.0) == pytest.approx((0.0, 0.0), abs=1e-6)  # held at first fix
    assert tr.user_at(a, 20.0)[1] == pytest.approx(100.0, rel=2e-3)  # 0.0009 deg ~ 100 m north
    assert tr.static.tolist() == [False, True]


def test_trace_rejects_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("user,t,lat\nu,1,2\n")
    with pytest.raises(ValueError, match="lacks column"):
        load_trace(path, PROJ, dt_s=1)
