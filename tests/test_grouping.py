"""Protocol 4 group selection: equals brute force, the area window always holds, reasons."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shapely.geometry import MultiPoint

from locpriv.core.grouping import (
    AreaMode,
    Group,
    Infeasible,
    InfeasibleReason,
    group_area_m2,
    select_group,
    sse_m2,
)


def _area_ref(points: np.ndarray, mode: str) -> float:
    if mode == "bbox":
        span = points.max(axis=0) - points.min(axis=0)
        return float(span[0] * span[1])
    return float(MultiPoint([tuple(p) for p in points]).convex_hull.area)


def brute_force(
    own: np.ndarray, *, cand: np.ndarray, k: int, a_min: float, a_max: float, mode: str
) -> tuple[float, tuple[int, ...]] | None:
    best: tuple[float, tuple[int, ...]] | None = None
    for combo in itertools.combinations(range(len(cand)), k - 1):
        pts = np.vstack((own, cand[list(combo)]))
        area = _area_ref(pts, mode)
        if not a_min < area < a_max:
            continue
        s = sse_m2(pts)
        if best is None or s < best[0]:
            best = (s, combo)
    return best


@settings(max_examples=250, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(0, 12),
    k=st.integers(2, 6),
    a_min=st.floats(0.0, 60_000.0),
    width=st.floats(1_000.0, 300_000.0),
    mode=st.sampled_from(["hull", "bbox"]),
)
def test_equals_brute_force(
    *, seed: int, m: int, k: int, a_min: float, width: float, mode: str
) -> None:
    rng = np.random.default_rng(seed)
    own = rng.uniform(-300, 300, 2)
    cand = rng.uniform(-600, 600, (m, 2))
    a_max = a_min + width
    ref = brute_force(own, cand=cand, k=k, a_min=a_min, a_max=a_max, mode=mode)
    got = select_group(tuple(own), cand, k, a_min, a_max, area=mode, node_budget=None)
    if ref is None:
        assert isinstance(got, Infeasible)
        return
    assert isinstance(got, Group), got
    assert got.exact
    assert math.isclose(got.sse_m2, ref[0], rel_tol=1e-9, abs_tol=1e-6)
    pts = np.vstack((own, cand[list(got.indices)]))
    assert a_min < _area_ref(pts, mode) < a_max  # the window holds, measured independently
    assert math.isclose(got.area_m2, _area_ref(pts, mode), rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(got.sse_m2, sse_m2(pts), rel_tol=1e-9, abs_tol=1e-6)
    np.testing.assert_allclose(got.centroid_xy, pts.mean(axis=0))
    assert len(got.indices) == k - 1 == len(set(got.indices))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), budget=st.integers(1, 300))
def test_heuristic_window_always_holds(seed: int, budget: int) -> None:
    rng = np.random.default_rng(seed)
    cand = rng.uniform(-1000, 1000, (200, 2))
    got = select_group((0.0, 0.0), cand, 6, 40_000.0, 250_000.0, node_budget=budget)
    if isinstance(got, Group):
        pts = np.vstack(([0.0, 0.0], cand[list(got.indices)]))
        assert 40_000.0 < _area_ref(pts, "hull") < 250_000.0
        exact = select_group((0.0, 0.0), cand, 6, 40_000.0, 250_000.0, node_budget=None)
        assert isinstance(exact, Group)
        assert got.sse_m2 >= exact.sse_m2 * (1 - 1e-12)
    else:
        assert got.reason is InfeasibleReason.SEARCH_BUDGET


def test_area_helpers_match_shapely() -> None:
    rng = np.random.default_rng(9)
    pts = rng.normal(size=(9, 2)) * 100
    assert math.isclose(group_area_m2(pts), _area_ref(pts, "hull"), rel_tol=1e-12)
    assert math.isclose(group_area_m2(pts, AreaMode.BBOX), _area_ref(pts, "bbox"), rel_tol=1e-12)
    assert group_area_m2(pts[:2]) == 0.0


def test_infeasibility_reasons() -> None:
    own = (0.0, 0.0)
    few = select_group(own, [[10.0, 0.0]], 4, 10.0, 1e6)
    assert isinstance(few, Infeasible) and few.reason is InfeasibleReason.TOO_FEW_REPLIES
    tight = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    small = select_group(own, tight, 3, 100.0, 1e6)
    assert isinstance(small, Infeasible) and small.reason is InfeasibleReason.AREA_TOO_SMALL
    wide = [[1000.0, 0.0], [0.0, 1000.0], [1000.0, 1000.0]]
    large = select_group(own, wide, 3, 1.0, 100.0)
    assert isinstance(large, Infeasible) and large.reason is InfeasibleReason.AREA_TOO_LARGE
    both = select_group(own, tight + wide, 3, 5.0, 100.0)
    assert isinstance(both, Infeasible)
    assert both.reason is InfeasibleReason.WINDOW_UNSATISFIABLE


def test_parameters_are_validated() -> None:
    with pytest.raises(ValueError):
        select_group((0.0, 0.0), [[1.0, 1.0]], 1, 0.0, 1.0)
    with pytest.raises(ValueError):
        select_group((0.0, 0.0), [[1.0, 1.0]], 2, 5.0, 5.0)
