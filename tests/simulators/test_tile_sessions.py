"""Sessions whose regions are unions of tiles (simulators/tile_sessions.py, the study of
issue 22's third goal): the outputs attacked, over densities, speeds, k, margins and
populations - every session keeps k after the intersection attack, the area stays flat as
members scatter, the requester is not told apart from the other members, and tile edges say
nothing of where anyone stands."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from simulators.attacks import edge_census, edge_population
from simulators.causal_sessions import first_groups, request_frames
from simulators.city import city_session_frames
from simulators.tile_sessions import (
    Asker,
    askers_at,
    member_tiles,
    play_session,
    point_tiles,
    replay_askers,
    tile_box,
)

TILE = 101.0


@pytest.mark.parametrize(
    ("users", "speed", "k", "margin"),
    [
        (1000, 1.4, 5, 3.0),
        (2000, 1.4, 5, 14.0),
        (4000, 0.7, 5, 3.0),
        (2000, 3.0, 10, 42.0),
    ],
)
def test_every_session_keeps_k_and_the_area_stays_flat(
    users: int, speed: float, k: int, margin: float
) -> None:
    frames = request_frames(minutes=40, seed=3, users=users, askers=30, speed_m_s=speed)
    r = replay_askers(askers_at(frames, 30, k), tile_m=TILE, margin_m=margin, group=2 * k, seed=1)
    assert r.answered == 1.0
    assert r.narrowed == 0.0
    assert r.candidates >= k
    per = r.areas_m2.reshape(30, len(frames))
    # at most four tiles a member (margins under half a tile)
    assert per.max() <= 4 * k * TILE * TILE
    assert per.min() >= TILE * TILE
    # members scatter (a box around them would grow ~linearly with time): the union does not
    early, late = np.median(per[:, 2:10]), np.median(per[:, -8:])
    assert late <= 1.15 * early
    assert np.median(r.member_areas_m2) <= (4 if margin > 0 else 1) * TILE * TILE


def test_every_member_and_the_requester_lie_in_every_region() -> None:
    frames = request_frames(minutes=20, seed=5, askers=20)
    rng = np.random.default_rng(2)
    for me in range(20):
        s = play_session(frames, me, 5, rng, tile_m=TILE, margin_m=3.0, spare=2, group=10)
        assert s.members[0] == me and len(set(s.members.tolist())) == 7
        for j, xy in enumerate(frames):
            held = point_tiles(xy[s.members], s.grid)
            assert np.isin(held, s.union(j)).all()
            # no tile without a member in it or within the margin of one
            near = np.unique(np.concatenate(member_tiles(xy[s.members], s.grid, 3.0)))
            assert np.array_equal(near, s.union(j))


def _centre_ranks(sets: list[np.ndarray], xy: np.ndarray) -> np.ndarray:
    """Per set (row 0 the requester), her rank by distance from the members' centre (0 the
    farthest): what an observer who knows where each member stands reads off a region."""
    ranks = []
    for members in sets:
        d = np.hypot(*(xy[members] - xy[members].mean(axis=0)).T)
        ranks.append(int(np.argsort(np.argsort(-d, kind="stable"), kind="stable")[0]))
    return np.bincount(ranks, minlength=len(sets[0]))


@pytest.mark.parametrize("users", [1000, 2000, 4000])
def test_the_requester_is_not_told_apart_from_the_other_members(users: int) -> None:
    """What could tell an observer, who sees the tiles and knows where each member stands,
    which member asked: how far she stands from the members' centre at the first region (a
    set grown around her puts her in the middle, and the same statistic finds her there), her
    offset in her tile. Both are distributed as every other member's."""
    frames = request_frames(minutes=10, seed=7, users=users, askers=200)
    rng = np.random.default_rng(4)
    sessions = [
        play_session(frames, me, 5, rng, tile_m=TILE, margin_m=0.0, group=10) for me in range(200)
    ]
    counts = _centre_ranks([s.members for s in sessions], frames[0])
    assert stats.chisquare(counts).pvalue > 1e-3  # the farthest member is she 1 time in 5
    grown = []  # the same groups, her k - 1 nearest instead of a random draw
    group = first_groups(frames[0], 10)
    for me in range(200):
        others = np.flatnonzero(group == group[me])
        others = others[others != me]
        near = others[np.argsort(np.hypot(*(frames[0][others] - frames[0][me]).T))[:4]]
        grown.append(np.concatenate([[me], near]))
    assert stats.chisquare(_centre_ranks(grown, frames[0])).pvalue < 1e-6
    mine: list[float] = []
    theirs: list[float] = []
    for s in sessions:
        frac = (frames[-1][s.members] - np.asarray(s.grid[1:])) / TILE % 1.0
        mine.extend(frac[0].tolist())
        theirs.extend(frac[1:].ravel().tolist())
    assert stats.ks_2samp(mine, theirs).pvalue > 1e-3
    assert stats.kstest(mine, "uniform").pvalue > 1e-3


@pytest.mark.parametrize("population", ["uniform", "clustered", "tied"])
def test_tile_edges_sit_where_a_blind_placement_puts_them(population: str) -> None:
    rng = np.random.default_rng(11)
    xy = edge_population(population, 2000, 4000.0, rng)
    frames = [xy, xy.copy(), xy.copy()]  # nobody moves: each session's tiles three times
    boxes: set[tuple[float, float, float, float]] = set()
    for me in rng.choice(2000, 150, replace=False).tolist():
        s = play_session(frames, me, 5, rng, tile_m=TILE, margin_m=3.0, group=10)
        for j in range(len(frames)):
            boxes.update(tile_box(int(t), s.grid) for t in s.union(j))
    edges, counts, blind = edge_census(xy, boxes, 4000.0, 3.0)
    assert edges > 500
    # midway, on a member's coordinate, at the margin from one: no more than blind + noise
    for c, b in zip(counts.tolist(), blind.tolist(), strict=True):
        assert c <= b + 3 * np.sqrt(b) + 2


def test_the_replay_is_deterministic_and_checks_its_arguments() -> None:
    frames = request_frames(minutes=5, seed=1, askers=10)
    a = replay_askers(askers_at(frames, 10, 5), seed=9)
    b = replay_askers(askers_at(frames, 10, 5), seed=9)
    assert np.array_equal(a.areas_m2, b.areas_m2)
    with pytest.raises(ValueError, match="margin_m"):
        replay_askers(askers_at(frames, 10, 5), margin_m=120.0)
    with pytest.raises(ValueError, match="a_min_m2"):
        replay_askers(askers_at(frames, 10, 5), tile_m=100.0)
    with pytest.raises(ValueError, match="k \\+ spare"):
        replay_askers(askers_at(frames, 10, 5), spare=6, group=10)
    unanswered = replay_askers(askers_at(frames, 10, 5), a_max_m2=4 * TILE * TILE)
    assert unanswered.answered < 1.0 and len(unanswered.areas_m2) < 10 * len(frames)


def test_city_askers_keep_their_own_k_with_tiles() -> None:
    """The city's askers (k of 3, 5 or 10 each, people who stay put among those who walk),
    read at their own request times: every session keeps its own k, the area stays within a
    few tiles a member."""
    askers = [Asker(u, frames, k) for u, k, frames in city_session_frames(23, quick=True)]
    assert len(askers) > 10 and {a.k for a in askers} <= {3, 5, 10}
    assert all(f.shape == (800, 2) for a in askers for f in a.frames)
    r = replay_askers(askers, tile_m=TILE, margin_m=14.0, spare=1, seed=2)
    assert r.answered == 1.0 and r.narrowed == 0.0
    assert r.areas_m2.max() <= 4 * (10 + 1) * TILE * TILE


def test_scattered_fixes_are_held_by_margins_and_judged_on_true_positions() -> None:
    """Tiles round scattered fixes: a narrow margin lets true positions fall out (members
    missed, sessions narrowed, which the attack on true positions sees); a margin of a few
    times the scatter holds nearly all, and spares hold k."""
    frames = request_frames(minutes=30, seed=2, askers=40)
    exact = replay_askers(askers_at(frames, 40, 5), margin_m=3.0, seed=1)
    assert exact.missed == 0.0
    loose = replay_askers(askers_at(frames, 40, 5), margin_m=3.0, scatter_m=20.0, seed=1)
    assert loose.missed > 0.05 and loose.narrowed > 0.5
    wide = replay_askers(askers_at(frames, 40, 5), margin_m=40.0, scatter_m=10.0, spare=4, seed=1)
    assert wide.missed < loose.missed / 10
    assert wide.narrowed <= 0.05


@pytest.mark.parametrize(("users", "k"), [(1000, 5), (4000, 5), (2000, 10)])
def test_devices_parked_in_her_group_take_a_place_only_by_the_draw(users: int, k: int) -> None:
    """The adversary's devices parked beside the requester join her group; the set is drawn at
    random from it, so one device displaces an honest member only when drawn (about
    (k - 1) / (group - 1) of sessions, where a set grown round her takes it nearly always),
    and a spare for each device leaves every session k honest users."""
    frames = request_frames(minutes=5, seed=4, users=users, askers=200)
    one = replay_askers(askers_at(frames, 200, k), insiders=1, seed=3)
    group = max(10, 2 * k)  # groups of group to 2 group - 1 users
    assert (k - 1) / (2 * group - 2) - 0.05 < one.infiltrated < (k - 1) / (group - 1) + 0.05
    assert replay_askers(askers_at(frames, 200, k), insiders=1, spare=1, seed=3).infiltrated == 0
    two = replay_askers(askers_at(frames, 200, k), insiders=2, spare=1, seed=3)
    assert 0 < two.infiltrated < one.infiltrated
    assert replay_askers(askers_at(frames, 200, k), seed=3).infiltrated == 0
