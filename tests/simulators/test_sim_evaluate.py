"""Evaluation metrics against hand-computed cases; JSON and plots are written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simulators.evaluate import (
    QueryRecord,
    RunStats,
    expected_error_uniform,
    precision_recall,
    quantiles,
    region_sessions,
    region_truth,
    summarize,
    write_json,
)
from simulators.plots import plot_run


def test_precision_recall_by_hand() -> None:
    assert precision_recall(["a", "b", "c"], ["a", "b", "d", "e"]) == (2 / 3, 2 / 4)
    assert precision_recall([], ["a"]) == (1.0, 0.0)
    assert precision_recall(["a"], []) == (0.0, 1.0)
    assert precision_recall([], []) == (1.0, 1.0)


def test_expected_error_uniform_by_hand() -> None:
    # truth at the origin, candidates at 0 m (herself), 3-4-5 triangle (5 m) and 10 m
    assert expected_error_uniform((0.0, 0.0), [[0, 0], [3, 4], [0, 10]]) == pytest.approx(5.0)
    assert expected_error_uniform((1.0, 1.0), [[1, 1]]) == 0.0
    with pytest.raises(ValueError):
        expected_error_uniform((0.0, 0.0), [])


def test_region_sessions_are_answered_regions_of_repeat_askers_in_time_order() -> None:
    """Only answered P1/P3 regions with ground truth count; users with fewer than five are not
    sessions; each session is in request order whatever the records' order."""

    def rec(
        user: int, t: float, protocol: int = 1, ok: bool = True, inside: bool = True
    ) -> QueryRecord:
        return QueryRecord(
            protocol=protocol,
            user=user,
            t_request_s=t,
            k_requested=5,
            a_min_m2=0.0,
            a_max_m2=1e9,
            ok=ok,
            area_m2=100.0 * t,
            inside=frozenset({user}) if inside else None,
        )

    records = [rec(1, t) for t in (5.0, 1.0, 4.0, 2.0, 3.0)]  # user 1: five, out of order
    records += [rec(2, t, protocol=3 if t % 2 else 1) for t in range(5)]  # P1 and P3 both count
    records += [rec(3, t) for t in range(4)] + [rec(3, 9.0, ok=False)]  # four answered: not one
    records += [rec(4, t) for t in range(4)] + [rec(4, 9.0, protocol=2)]  # P2 has no region
    records += [rec(5, t) for t in range(4)] + [rec(5, 9.0, inside=False)]  # no ground truth
    got = region_sessions(records)
    assert sorted(got) == [1, 2]
    assert [r.t_request_s for r in got[1]] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [r.protocol for r in got[2]] == [1, 3, 1, 3, 1]


def test_region_truth_counts_the_boundary_and_the_requester_once() -> None:
    """Both runners score regions with this one function: users on the edge (grid-line walkers)
    are inside, a user 1 mm out is not, and the requester enters the adversary's candidates once."""
    import numpy as np
    from shapely.geometry import box

    rec = QueryRecord(protocol=3, user=0, t_request_s=0.0, k_requested=3, a_min_m2=0, a_max_m2=1e6)
    xs = np.array([5.0, 0.0, 10.0, 10.001, 3.0])  # requester, two on the edge, one out, one in
    ys = np.array([5.0, 5.0, 10.0, 5.0, 4.0])
    n = region_truth(rec, box(0, 0, 10, 10), (5.0, 5.0), (xs, ys), 0)
    assert n == 4
    assert rec.ds_error_m == pytest.approx(0.0)
    # candidates: the requester and users 1, 2, 4 -> mean distance from (5, 5)
    want = (0 + 5 + math.hypot(5, 5) + math.hypot(2, 1)) / 4
    assert rec.adversary_error_m == pytest.approx(want)


def test_quantiles_ignore_missing_values() -> None:
    q = quantiles([1.0, None, 2.0, 3.0, float("nan")], (50,))
    assert q == {"n": 3, "mean": 2.0, "p50": 2.0}
    assert quantiles([], (99,)) == {"n": 0, "mean": None, "p99": None}


def _rec(**kw: object) -> QueryRecord:
    base: dict[str, object] = {
        "protocol": 3,
        "user": 0,
        "t_request_s": 10.0,
        "k_requested": 5,
        "a_min_m2": 100.0,
        "a_max_m2": 1000.0,
    }
    base.update(kw)
    return QueryRecord(**base)  # type: ignore[arg-type]


def test_summary_by_hand() -> None:
    recs = [
        _rec(
            ok=True,
            t_anon_s=10.1,
            t_answer_s=10.2,
            k_achieved=5,
            area_m2=500.0,
            held_s=0.0,
            precision=1.0,
            recall=1.0,
            ds_error_m=30.0,
            adversary_error_m=40.0,
            messages=4,
            bytes=1000,
        ),
        _rec(
            ok=True,
            t_anon_s=10.3,
            t_answer_s=10.4,
            k_achieved=10,
            area_m2=1000.0,
            held_s=2.0,
            precision=0.5,
            recall=0.5,
            ds_error_m=10.0,
            adversary_error_m=20.0,
            messages=4,
            bytes=3000,
        ),
        _rec(ok=False, error="cloak_timeout", messages=2, bytes=500),
        _rec(
            protocol=2,
            ok=True,
            t_answer_s=10.05,
            precision=1.0,
            recall=1.0,
            ds_error_m=0.0,
            adversary_error_m=0.0,
            messages=2,
            bytes=300,
        ),
    ]
    s = summarize(recs, RunStats(duration_s=10.0, users=7))
    p3 = s["protocols"]["p3"]
    assert p3["queries"] == 3 and p3["answered"] == 2
    assert p3["success_rate"] == pytest.approx(2 / 3)
    assert p3["errors"] == {"cloak_timeout": 1}
    assert p3["queries_per_s"] == pytest.approx(0.3)
    assert p3["anon_latency_s"]["p50"] == pytest.approx(0.2)
    assert p3["e2e_latency_s"]["mean"] == pytest.approx(0.3)
    assert p3["k_ratio"] == {"mean": 1.5, "min": 1.0, "below_1": 0.0}
    # area 1000 equals A_max: counted as a violation (the window is strict)
    assert p3["area_m2"]["above_a_max"] == 0.5 and p3["area_m2"]["below_a_min"] == 0.0
    assert p3["temporal_delay_s"]["mean"] == 1.0
    assert p3["precision"] == 0.75 and p3["recall"] == 0.75
    assert p3["ds_error_m"]["mean"] == 20.0 and p3["adversary_error_m"]["mean"] == 30.0
    assert p3["messages_per_query"] == pytest.approx(10 / 3)
    assert p3["bytes_per_query"] == pytest.approx(1500.0)
    assert s["protocols"]["p2"]["k_ratio"]["mean"] is None
    assert s["all"]["queries"] == 4 and s["all"]["success_rate"] == 0.75


def test_json_and_plots_are_written(tmp_path: Path) -> None:
    recs = [
        _rec(
            ok=True,
            t_anon_s=10.1,
            t_answer_s=10.2,
            k_achieved=6,
            area_m2=400.0,
            adversary_error_m=12.0,
            adversary_centroid_error_m=20.0,
            precision=1.0,
            recall=1.0,
        ),
        _rec(
            protocol=4,
            ok=True,
            t_anon_s=10.5,
            t_answer_s=10.6,
            k_achieved=5,
            area_m2=300.0,
            adversary_error_m=50.0,
            precision=1.0,
            recall=1.0,
        ),
    ]
    s = summarize(recs, RunStats(duration_s=1.0, users=2, extra={"nan": math.nan}))
    write_json(s, tmp_path / "s.json")
    loaded = json.loads((tmp_path / "s.json").read_text())
    assert loaded["run"]["extra"]["nan"] is None and "p4" in loaded["protocols"]
    paths = plot_run(recs, tmp_path / "plots")
    names = {p.name for p in paths}
    assert {"latency.png", "cloak_area.png", "adversary_error.png", "utility.png"} <= names
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
