"""The demo's map page: self-contained, and what headless Chromium draws at a slider position
is what the data holds then (regions, groups, users)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from simulators.evaluate import QueryRecord
from simulators.map import map_data, visible, write_map
from simulators.scenario import build, load_scenario

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _records(traj: object, rng: np.random.Generator, duration_s: float) -> list[QueryRecord]:
    """Answered P1/P3 regions (squares around a user) and P4 groups at random times."""
    out = []
    for i in range(60):
        t = float(rng.uniform(0, duration_s))
        x, y = traj.at(t)  # type: ignore[attr-defined]
        u = int(rng.integers(0, len(x)))
        h = float(rng.uniform(50, 300))
        p = int(rng.choice([1, 3, 4]))
        rec = QueryRecord(
            protocol=p, user=u, t_request_s=t - 0.2, k_requested=3, a_min_m2=1e3, a_max_m2=1e6
        )
        rec.ok = i % 7 != 0  # failed queries draw nothing
        rec.t_answer_s = t
        if p == 4:
            rec.group_xyr = (float(x[u]), float(y[u]), h)
        elif i % 5 == 0:  # a session's region of tiles: two squares
            rec.region_rings_xy = tuple(
                (
                    (x[u] + dx - h / 2, y[u] - h / 2),
                    (x[u] + dx + h / 2, y[u] - h / 2),
                    (x[u] + dx + h / 2, y[u] + h / 2),
                    (x[u] + dx - h / 2, y[u] + h / 2),
                )
                for dx in (0.0, 2 * h)
            )
        else:
            rec.region_xy = (
                (x[u] - h, y[u] - h),
                (x[u] + h, y[u] - h),
                (x[u] + h, y[u] + h),
                (x[u] - h, y[u] + h),
            )
        out.append(rec)
    return out


def _page(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    sc = load_scenario("demo").replace(users=60, duration_s=20.0)
    built = build(sc)
    records = _records(built.trajectories, np.random.default_rng(3), sc.duration_s)
    data = map_data(built.trajectories, records, duration_s=sc.duration_s, grid=(20, 200.0))
    return write_map(tmp_path / "map.html", data), data


def test_the_page_is_self_contained_and_holds_the_run(tmp_path: Path) -> None:
    page, data = _page(tmp_path)
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # no network
    assert "<script src" not in html and "<link" not in html
    embedded = json.loads(re.search(r'<script id="data"[^>]*>(.*?)</script>', html, re.S)[1])
    assert embedded == json.loads(json.dumps(data))
    assert len(embedded["regions"]) + len(embedded["groups"]) == sum(  # failed ones left out
        1 for i in range(60) if i % 7 != 0
    )
    assert len(embedded["users_x"]) == 60 and len(embedded["times"]) == 21


def _drawn(page: Path, t: float) -> tuple[dict[str, object], str]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium not found (scripts/setup.sh installs it)")
        pytest.skip("chromium not found (scripts/setup.sh installs it)")
    out = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--virtual-time-budget=3000",
            "--dump-dom",
            f"{page.as_uri()}#t={t:g}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    status = re.search(r'<p id="drawn">(.*?)</p>', out)
    assert status is not None, out[:2000]
    return json.loads(status[1].replace("&quot;", '"')), out


@pytest.mark.parametrize("t", [3.0, 10.0, 17.0])
def test_chromium_draws_the_regions_groups_and_users_of_the_slider_position(
    tmp_path: Path, t: float
) -> None:
    page, data = _page(tmp_path)
    drawn, dom = _drawn(page, t)
    regions, groups = visible(data, t)
    assert regions + groups > 0  # the position shows something
    assert drawn == {"t": t if t % 1 else int(t), "users": 60, "regions": regions, "groups": groups}
    # the SVG itself, not only the status line
    # one polygon per ring: a session's region of tiles draws each of its pieces
    shown = [r for r in data["regions"] if r["t0"] <= t < r["t1"]]  # type: ignore[attr-defined]
    assert len(re.findall(r'<polygon class="region p[13]"', dom)) == sum(
        len(r["rings"]) for r in shown
    )
    assert any(len(r["rings"]) > 1 for r in data["regions"])  # type: ignore[attr-defined]
    assert len(re.findall(r'<circle class="group"', dom)) == groups
    assert len(re.findall(r'<circle class="user"', dom)) == 60
    assert len(re.findall(r'<line class="street"', dom)) == 2 * 21
