"""`locpriv demo` end to end: embedded broker, services, a fleet worker process, outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def test_demo_reaches_the_cli_through_its_entry_point() -> None:
    """The library does not import the simulators; ``demo`` comes from the ``locpriv.commands``
    entry point of the installed distribution. A broken registration fails here."""
    out = subprocess.run(
        [sys.executable, "-m", "locpriv", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--users" in out and "--scenario" in out


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(180)
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo-out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "locpriv",
            "-q",
            "demo",
            "--users",
            "50",
            "--seconds",
            "5",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "p50 ms" in proc.stdout and "wrote" in proc.stdout  # the summary table
    # what it measured: service latency per protocol (temporal waits excluded) and CPU
    assert "measured service latency p50/p99 ms" in proc.stdout
    assert "CPU: broker + services" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["users"] == 50 and summary["run"]["users"] == 50
    assert summary["all"]["queries"] > 0 and summary["all"]["answered"] > 0
    cpu = summary["services"]["cpu"]
    assert 0.0 < cpu["broker_services_cores"] <= 1.5 and cpu["wall_s"] > 0
    waits = summary["service_latency_s"]
    assert waits["all"]["p50"] is not None
    assert waits["all"]["p50"] <= summary["all"]["e2e_latency_s"]["p50"] + 1e-9
    assert summary["run"]["location_updates"] >= 50
    for name in (
        "latency",
        "cloak_area",
        "k_ratio",
        "adversary_error",
        "utility",
        "cost",
        "positions",
        "attacks",
    ):
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    # the map: one self-contained page holding the run's users, regions and groups
    html = (out / "map.html").read_text()
    assert '<script id="data"' in html and "<script src" not in html and "<link" not in html
    assert '"regions":[{' in html or '"groups":[{' in html
    attacks = summary["attacks"]
    assert "intersection" in attacks  # of the run's own repeated requesters (none here)
    # the three attacks over time, without and with their defences
    assert attacks["static_device"]["after_error_sigma"] >= 0.5
    assert attacks["static_device"]["before_error_sigma"] < 0.5
    assert attacks["repeated_cloaks"]["after_success_rate"] < 0.05
    assert attacks["repeated_cloaks"]["before_success_rate"] > 0.5
    assert attacks["broker_tracking"]["after_linked_hours"] <= 1.5
    # among cyclists with fixes every 30 s: pedestrians' margins, then margins by seen speed
    assert attacks["fast_neighbours"]["before_success_rate"] > 0.5
    assert attacks["fast_neighbours"]["after_success_rate"] <= 0.01
    # walkers reporting every 30 s: devices that answer fix requests cost smaller regions,
    # and the sessions keep k
    stale = attacks["stale_fixes"]
    assert stale["after_area_m2_median"] < stale["before_area_m2_median"]  # 0.81-0.97x, seeds 0-2
    assert stale["after_success_rate"] <= 0.01 and stale["before_success_rate"] <= 0.01
    # fixes scattered by 5 m: margins that ignore it are narrowed, margins that hold each
    # report's accuracy are not
    scattered = attacks["scattered_fixes"]
    assert scattered["before_success_rate"] > 0.2 and scattered["after_success_rate"] <= 0.01
    # who asked, guessed as the candidate nearest an edge: near a guess at random (measured
    # 0.99-1.13x with sessions on seeds 0-3; 40 askers leave about 10 % of noise)
    assert 0.0 <= attacks["requester_guess"]["after_edge_over_chance"] <= 1.5
    # region edges: every edge of a box of k users sits on a member's coordinate; the
    # cloaker's edges sit there, midway or at an offset no more often than a blind placement's
    # (expected 0.7 of 4,131 inner edges on the demo's seed 7; 0 measured)
    edges = attacks["region_edges"]
    assert edges["before_pinned_share"] == 1.0
    pinned = edges["after_pinned_share"] * edges["after_edges"]
    assert (
        edges["after_edges"] > 1000
        and pinned <= edges["blind_pinned_share"] * edges["after_edges"] + 3
    )
    # what 30-minute sessions cost over the one-shot median: regions of tiles (shipped since
    # 2026-12-06; 1.73x over the benchmark's default walkers with 100 askers) under the goal's
    # 5x and under one box round the same set (4.35x on the demo's seed 7, 4.38x in the
    # benchmark), both keeping k
    cost = attacks["session_cost"]
    assert 0.5 < cost["after_area_ratio"] <= 5.0 and cost["after_answered_rate"] >= 0.95
    assert cost["after_area_ratio"] < cost["box_area_ratio"] <= 6.0
    assert cost["box_success_rate"] <= 0.01
    # the same in the city (the quick city on its seed 23, sparser than the city at size, where
    # one-shot regions are large and a tile per member costs less: 0.50x with exact fixes;
    # one box paid 2.30x; bench_privacy's city at size: 1.46x with tiles, 3.69x with one box):
    # sessions keep k, one-shot cloaks do not, and scatter costs area
    city = attacks["city_session_cost"]
    assert city["before_success_rate"] > 0.5 and city["before_area_ratio"] == 1.0
    assert city["after_success_rate"] <= 0.01 and city["scattered_success_rate"] <= 0.01
    assert 0.2 < city["after_area_ratio"] <= city["scattered_area_ratio"] <= 5.0
    assert city["after_answered_rate"] >= 0.95 and city["scattered_answered_rate"] >= 0.95
    assert "attacks over time" in proc.stdout and "city sessions (800 people)" in proc.stdout
    assert "region edges on, midway between" in proc.stdout and "30-min sessions" in proc.stdout
