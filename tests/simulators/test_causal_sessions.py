"""The idealised causal session policies of the feasibility study (issue 22,
``benchmarks/study_causal_sessions.py``): what they answer is attacked like the cloaker's (the
users truly inside each of an asker's regions, intersected), their grid is the shipped session
grid, and each family does what it says."""

from __future__ import annotations

import numpy as np
import pytest

from locpriv.core.cloak.history import grid_areas, prefix_boxes, session_grid, session_region
from simulators.causal_sessions import (
    budget_rule,
    first_groups,
    replay_sessions,
    request_frames,
    schedule_rule,
)

K = 5


@pytest.fixture(scope="module")
def frames() -> list[np.ndarray]:
    return request_frames(minutes=15.0, seed=3, users=600, side_m=2000.0, askers=30)


@pytest.mark.parametrize("cell_m, margin_m", [(0.0, 0.0), (10.0, 5.0), (25.0, 5.0)])
@pytest.mark.parametrize("family", ["schedule", "budget"])
def test_every_policy_keeps_k_in_every_intersection(
    frames: list[np.ndarray], family: str, cell_m: float, margin_m: float
) -> None:
    """Whatever the rule and the edges, the intersection attack on the regions leaves every
    asker at least k users, and every request is answered."""
    if family == "schedule":
        r = replay_sessions(
            frames,
            30,
            K,
            schedule_rule(K, 15, 5),
            need=15,
            stop_m2=0.0,
            cell_m=cell_m,
            margin_m=margin_m,
        )
    else:
        r = replay_sessions(
            frames,
            30,
            K,
            budget_rule(2e5),
            stop_m2=2e5,
            cell_m=cell_m,
            margin_m=margin_m,
        )
    assert r.narrowed == 0.0
    assert r.answered == 1.0
    assert len(r.areas_m2) == 30 * len(frames)
    assert (r.areas_m2 >= 1e4).all()


def test_grid_regions_are_whole_cells(frames: list[np.ndarray]) -> None:
    """With a grid, every region is a whole number of cells (edges on grid lines)."""
    r = replay_sessions(frames, 30, K, budget_rule(2e5), stop_m2=2e5, cell_m=25.0, margin_m=5.0)
    cells = r.areas_m2 / 625.0
    assert np.allclose(cells, np.round(cells))


@pytest.mark.parametrize("cap_m2", [5e4, 1e5, 3e5])
def test_budget_regions_keep_to_their_cap_until_only_k_are_left(
    frames: list[np.ndarray], cap_m2: float
) -> None:
    """A budget region past its cap keeps only k members, and one that keeps more is within
    it; a larger cap keeps more members, and more of its regions are within it."""
    r = replay_sessions(frames, 30, K, budget_rule(cap_m2), stop_m2=cap_m2, cell_m=25.0)
    past = r.areas_m2 > cap_m2
    assert (r.kept[past] == K).all()
    assert (r.areas_m2[r.kept > K] <= cap_m2).all()
    assert (r.kept >= K).all()
    assert past.any() and (r.kept > K).any()  # both kinds occur at every cap tried
    if cap_m2 < 3e5:
        larger = replay_sessions(
            frames, 30, K, budget_rule(3 * cap_m2), stop_m2=3 * cap_m2, cell_m=25.0
        )
        assert larger.kept.mean() > r.kept.mean()


def test_a_refused_request_keeps_the_set_whole(frames: list[np.ndarray]) -> None:
    """A region past ``refuse_m2`` is not given: the request goes unanswered, no region is
    published, and the intersection attack still finds k in every session; refusing costs
    answers and never narrows."""
    plain = replay_sessions(frames, 30, K, budget_rule(1e5), stop_m2=1e5, cell_m=25.0)
    refusing = replay_sessions(
        frames, 30, K, budget_rule(1e5), stop_m2=1e5, cell_m=25.0, refuse_m2=2e5
    )
    assert plain.answered == 1.0
    assert refusing.answered < 1.0
    assert (refusing.areas_m2 < 2e5).all()
    assert refusing.narrowed == 0.0


def test_regions_under_a_min_without_a_grid_grow_to_it(frames: list[np.ndarray]) -> None:
    """Without a grid, a members' box under ``a_min_m2`` is counted at ``a_min_m2`` and grown
    to it, so it covers the users such a region would (a large ``a_min`` keeps more)."""
    small = replay_sessions(frames, 30, K, budget_rule(0.0), a_min_m2=1e3)
    large = replay_sessions(frames, 30, K, budget_rule(0.0), a_min_m2=2e5)
    assert (large.areas_m2 >= 2e5 - 1e-6).all()
    assert large.narrowed == small.narrowed == 0.0
    assert large.answered == small.answered == 1.0


def test_schedule_shrinks_to_k() -> None:
    """The shipped rule: the pool first, k from the ``shrink``-th request on."""
    keep = schedule_rule(5, 15, 10)
    counts = [keep(j, np.zeros(1)) for j in range(12)]
    assert counts[0] == 15
    assert counts[10] == counts[11] == 5
    assert counts == sorted(counts, reverse=True)


def test_prefix_areas_are_the_session_regions_of_each_prefix() -> None:
    """The study's regions are the cloaker's: for every prefix of an order, ``grid_areas`` of
    its ``prefix_boxes`` gives the area of the region ``session_region`` builds for those
    members, on the same session grid."""
    rng = np.random.default_rng(7)
    xy = rng.uniform(0.0, 800.0, (40, 2))
    margins = rng.uniform(0.0, 30.0, 40)
    score = rng.random(40)
    score[0] = -1.0
    order = np.argsort(score, kind="stable")
    seed = 1234
    grid = session_grid(1e4, np.random.default_rng(seed))
    got = grid_areas(prefix_boxes(xy, order, margins), grid, 1e4)
    for m in (1, 2, 5, 17, 40):
        poly, chosen, _ = session_region(
            xy, 0, m, 1e4, 1e9, np.random.default_rng(seed), margin_m=margins, score=score
        )
        assert poly is not None
        assert sorted(chosen.tolist()) == sorted(order[:m].tolist())
        assert got[m - 1] == pytest.approx(poly.area, rel=1e-9)


def test_a_growing_cap_keeps_more_as_the_session_ages() -> None:
    """A cap that grows with the session's age admits, at request ``j``, every prefix whose
    region is within ``cap + grow * j``."""
    keep = budget_rule(1e5, 1e4)
    areas = np.array([5e4, 9e4, 1.05e5, 1.2e5, 2e5])
    assert [keep(j, areas) for j in (0, 1, 2, 5, 10)] == [2, 3, 4, 4, 5]


@pytest.mark.parametrize("group", [5, 10])
def test_a_first_region_of_her_group_is_not_centred_on_her(
    frames: list[np.ndarray], group: int
) -> None:
    """With ``first_group`` each asker's first region is her group's box (its members are
    exactly what the region keeps; groups of ``group`` to ``2 * group - 1``, chosen whoever
    asks): it keeps k in every intersection like the greedy start, and the requester's place in
    it is spread (some askers in the outer fifths of its width), where the greedy first region
    grown from her keeps her within a step of its middle."""
    r = replay_sessions(
        frames, 30, K, budget_rule(2e5), stop_m2=2e5, cell_m=25.0, margin_m=3.0, first_group=group
    )
    assert r.narrowed == 0.0
    assert r.answered == 1.0
    labels = first_groups(frames[0], group)
    sizes = np.bincount(labels)
    assert sizes.min() >= group and sizes.max() <= 2 * group - 1
    first = r.kept[:: len(frames)]  # every request answered: one row per request, asker by asker
    assert first.tolist() == [int(sizes[labels[me]]) for me in range(30)]
    offsets = []
    for me in range(30):
        pts = frames[0][labels == labels[me]]
        lo, hi = pts[:, 0].min(), pts[:, 0].max()
        offsets.append((frames[0][me, 0] - lo) / (hi - lo))
    outer = np.mean((np.array(offsets) < 0.2) | (np.array(offsets) > 0.8))
    assert outer > 0.2
