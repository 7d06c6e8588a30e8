"""Following people through a requester's regions (simulators/tracking.py): the tracker on
hand-made regions, then the attack on the cloaker's outputs over densities and fix ages.

An adversary who knew where everyone inside a requester's first region was follows each
through her later regions. One-shot regions, each centred on its requester, let her follow
the requester; a session's regions (tiles or one box) must not, and a session's tiles may
place the others inside the first region to a tile no more often than the bound below."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import shapely

from simulators.attacks import repeated_cloaks_attack
from simulators.tracking import RULES, RegionTracker, TrackingFigures, tracking_figures


def _square(cx: float, cy: float, half: float = 50.0) -> shapely.Polygon:
    return shapely.box(cx - half, cy - half, cx + half, cy + half)


def test_a_region_that_moves_with_its_user_is_followed_to_its_centre() -> None:
    xy = np.array([[0.0, 0.0], [500.0, 0.0]])
    t = RegionTracker.first(0, np.array([0]), xy)
    step = np.array([[40.0, 10.0], [0.0, 0.0]])
    for _ in range(5):
        xy = xy + step
        t.follow(_square(*xy[0]), xy)
    track, prior = t.errors()
    assert track.shape == (len(RULES), 1) and track[RULES.index("centroid"), 0] < 1e-9
    assert prior[0] == pytest.approx(math.hypot(200.0, 50.0))
    f = tracking_figures([t], side_m=100.0)
    assert f.tracked == 1 and f.within_side == 1.0 and f.prior_within_side == 0.0
    assert f.requester_error_m_median < 1e-9 < f.requester_prior_error_m_median


def test_each_estimate_moves_into_the_part_nearest_it() -> None:
    xy = np.array([[0.0, 0.0], [1000.0, 0.0], [0.0, 900.0]])
    t = RegionTracker.first(0, np.array([0, 1]), xy)
    region = shapely.MultiPolygon([_square(60.0, 0.0), _square(1000.0, 80.0)])
    t.follow(region, xy)
    centroid = t.est[RULES.index("centroid")]
    assert np.allclose(centroid, [[60.0, 0.0], [1000.0, 80.0]])
    nearest = t.est[RULES.index("nearest")]
    assert np.allclose(nearest, [[10.0, 0.0], [1000.0, 30.0]])
    assert np.allclose(t.est[RULES.index("midway")], (centroid + nearest) / 2.0)
    assert list(t.rows) == [0, 1] and t.follows == 1


def test_the_requester_is_tracked_even_when_her_fix_left_her_outside() -> None:
    xy = np.array([[0.0, 0.0], [10.0, 0.0], [20.0, 0.0]])
    t = RegionTracker.first(2, np.array([0, 1]), xy)
    assert list(t.rows) == [0, 1, 2]
    unseen = tracking_figures([t], 100.0)  # no later region yet: nothing to report
    assert unseen.tracked == 0 and math.isnan(unseen.error_m_median)
    t.follow(_square(20.0, 0.0), xy)
    f = tracking_figures([t], 100.0)
    # every rule locates all three within 100 m; "nearest" keeps each where it was: exact
    assert f.tracked == 3 and f.rule == "nearest" and f.within_side == 1.0
    assert f.error_m_median == 0.0 and f.requester_error_m_median == 0.0


CONDITIONS = [(1000, 0.0), (1000, 30.0), (4000, 0.0), (4000, 30.0)]
"""Walkers over 4 km × 4 km (sparse and dense) with fixes at every request and every 30 s."""


def _tracking(users: int, update_s: float, **design: Any) -> TrackingFigures:
    if update_s and design.get("session_s"):
        design["fix_reply_s"] = 1.0
    r = repeated_cloaks_attack(
        users=users, update_s=update_s, askers=30, minutes=30.0, seed=0, track=True, **design
    )
    assert r.tracking is not None and r.tracking.tracked >= 100
    return r.tracking


@pytest.mark.parametrize(("users", "update_s"), CONDITIONS)
def test_a_session_of_tiles_hides_the_requesters_track_where_one_shot_regions_show_it(
    users: int, update_s: float
) -> None:
    one_shot = _tracking(users, update_s, session_s=0.0)
    box = _tracking(users, update_s, session_s=1800.0, cloak={"session_tile_factor": 0.0})
    tiles = _tracking(users, update_s, session_s=1800.0)
    prior = tiles.requester_prior_error_m_median
    # the tracker works: one-shot regions, centred on the requester, give her away
    assert one_shot.requester_error_m_median < 0.4 * prior
    # a session's regions leave her about where the prior does, tiles as one box
    for session in (box, tiles):
        assert session.requester_error_m_median > 1.5 * one_shot.requester_error_m_median
        assert session.requester_error_m_median > 0.45 * prior
    # the others inside her first region: a tile locates one (within √A_min) at most this
    # often after 30 min (the cost of tiles: one box is near the prior, 4-8 %)
    assert tiles.within_side <= 0.3
    assert box.within_side <= 0.1
