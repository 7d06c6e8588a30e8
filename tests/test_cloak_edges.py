"""Region edges attacked: does an edge sit at a function of the users' coordinates?

An observer who knows some users' positions (her own, say, just outside a region) reads every
edge of every region she sees. Before the grid placement a third or more of the shared regions'
inner edges lay exactly half-way between the nearest user inside and the nearest user outside
(uniform: 326 of 848 edges, clustered: 237 of 702, tied: 518 of 693, in
``simulators.attacks.edge_attack``'s default set-up; a blind placement gives < 1), and a
session re-placed its region at random on every request, so intersecting one session's ten
regions over users who did not move narrowed it to 41-43 % of its area. These tests attack
real outputs of the cloaker over populations, parameters and modes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from locpriv.core.cloak.cloaker import Cloaker
from locpriv.core.cloak.partition import build_partition, covering_world
from locpriv.core.cloak.types import CloakConfig, CloakParams
from simulators.attacks import edge_attack


def _as_blind(pinned: int, blind: float) -> bool:
    """``pinned`` is what a blind placement with expectation ``blind`` could give (Poisson,
    one-sided, well beyond 3 standard deviations)."""
    return pinned <= blind + 3.0 * math.sqrt(blind) + 2.0


@pytest.mark.parametrize("population", ["uniform", "clustered", "tied"])
@pytest.mark.parametrize("sessions", [False, True], ids=["shared", "sessions"])
def test_edges_sit_where_a_blind_placement_puts_them(population: str, sessions: bool) -> None:
    r = edge_attack(population, sessions=sessions, requests=200, rounds=3)
    assert r.edges >= 400
    assert _as_blind(r.pinned, r.blind), r
    assert r.midway <= 2 and r.at_member <= 2 and r.at_offset <= 2


@pytest.mark.parametrize(
    ("k", "a_min", "a_max"),
    [(3, 1e3, 2e4), (10, 2e4, 1e5), (5, 1e5, 2e5), (20, 1e4, 4e6)],
    ids=["shrunk-k3", "shrunk-k10", "a_min-binds", "loose-k20"],
)
def test_edges_blind_across_parameters(k: int, a_min: float, a_max: float) -> None:
    """Shrunk regions (the leaf exceeds A_max), A_min-bound splits and large k."""
    for population in ("uniform", "clustered"):
        r = edge_attack(population, k=k, a_min_m2=a_min, a_max_m2=a_max, requests=200)
        assert r.edges >= 100
        assert _as_blind(r.pinned, r.blind), r


def test_session_regions_stay_put_while_members_do() -> None:
    """Nothing to intersect: while nobody moves a session's regions are nested (its set only
    shrinks, on one grid), so their intersection is its last region; once the set is down to k
    the region no longer changes."""
    for population in ("uniform", "tied"):
        r = edge_attack(population, sessions=True, requests=100, rounds=6)
        assert r.intersection_area_ratio == 1.0
        late = edge_attack(population, sessions=True, requests=50, rounds=14)
        assert late.intersection_area_ratio == 1.0
        assert late.distinct_per_session <= 11.0


def test_partition_of_static_users_is_the_same_every_epoch() -> None:
    """The partition depends on the users and the cloaker's secret phase only: static users get
    identical regions in every epoch (no fresh draws to average)."""
    rng = np.random.default_rng(5)
    xy = rng.uniform(0, 5000, (1500, 2))
    ck = Cloaker(CloakConfig(world=(0.0, 0.0, 5000.0, 5000.0)), rng=np.random.default_rng(9))
    ids = [f"u{i}" for i in range(len(xy))]
    p = CloakParams(k=5, a_min_m2=1e4, a_max_m2=1e6, max_delay_s=0.0)
    seen: dict[int, object] = {}
    for epoch in range(4):
        ck.update_many(ids, xy, now=float(epoch))
        for i in range(0, 1500, 50):
            out = ck.request((epoch, i), ids[i], p, now=epoch + 0.5)
            assert out is not None and out.region is not None
            bounds = out.region.polygon.bounds
            assert seen.setdefault(i, bounds) == bounds


def test_root_edges_are_not_the_outermost_users() -> None:
    """Users outside the configured world widen it by doubling, not to their coordinates."""
    xy = np.array([[-1234.5, 10.0], [50.0, 6789.25], [10.0, 10.0], [20.0, 30.0]])
    root = covering_world(xy, 1e4, (0.0, 0.0, 1000.0, 1000.0))
    assert root[0] < -1234.5 and root[3] > 6789.25
    assert set(root).isdisjoint(set(xy.ravel().tolist()))
    free = covering_world(xy, 1e4)
    assert set(free).isdisjoint(set(xy.ravel().tolist()))
    assert free[0] <= xy[:, 0].min() and free[2] >= xy[:, 0].max()
    assert free[1] <= xy[:, 1].min() and free[3] >= xy[:, 1].max()


def test_split_positions_do_not_move_with_a_member_inside_its_cell() -> None:
    """Move one user a little (within her grid cell, keeping the counts): every leaf edge stays
    where it was: edges carry counts, not coordinates."""
    rng = np.random.default_rng(11)
    xy = rng.uniform(0, 4000, (800, 2))
    world = (0.0, 0.0, 4000.0, 4000.0)
    base = build_partition(xy[:, 0], xy[:, 1], np.zeros(800), world, k=5, a_min_m2=1e4, phase=0.3)
    moved_any = 0
    for i in range(0, 800, 40):
        leaf = base.rects[base.leaf_of[i]]
        for dx in (0.5, -0.5):
            q = xy.copy()
            q[i, 0] += dx
            if not leaf[0] < q[i, 0] < leaf[2]:
                continue
            other = build_partition(
                q[:, 0], q[:, 1], np.zeros(800), world, k=5, a_min_m2=1e4, phase=0.3
            )
            same = np.array_equal(other.rects, base.rects)
            moved_any += not same
    # a 0.5 m move changes the counts of some coarse cell only rarely
    assert moved_any <= 3
