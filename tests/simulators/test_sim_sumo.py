"""SUMO road-network mobility: a tiny grid, a few vehicles, a few seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sumo")

from simulators.sumo import parse_fcd, sumo_grid


@pytest.mark.timeout(120)
def test_sumo_grid_vehicles_move_on_roads_deterministically(tmp_path: Path) -> None:
    kw = {"duration_s": 60.0, "dt_s": 1.0, "blocks": 3, "block_m": 100.0, "seed": 5}
    tr = sumo_grid(6, workdir=tmp_path / "a", **kw)  # type: ignore[arg-type]
    again = sumo_grid(6, workdir=tmp_path / "b", **kw)  # type: ignore[arg-type]
    assert tr.n_users == 6 and tr.x_m.shape == (6, 61)
    assert np.array_equal(tr.x_m, again.x_m) and np.array_equal(tr.y_m, again.y_m)
    # centred on the network: a 300 m x 300 m grid spans about [-150, 150]
    x0, y0, x1, y1 = tr.bounds_m()
    assert x0 >= -160 and x1 <= 160 and y0 >= -160 and y1 <= 160
    speeds = tr.speeds_mps()
    assert speeds.max() <= 1.5 + 1e-6  # walking-speed vehicle type
    assert speeds.mean() > 0.3  # they do drive
    # on roads: each sample is close to a grid line (lanes are offset from the centre line)
    half = 150.0
    dx = np.abs(np.mod(tr.x_m + half + 50, 100) - 50)
    dy = np.abs(np.mod(tr.y_m + half + 50, 100) - 50)
    assert np.all(np.minimum(dx, dy) < 15)
    tracks, _ = parse_fcd(tmp_path / "a" / "fcd.xml")
    assert len(tracks) >= 6
