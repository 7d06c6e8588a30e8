"""The classic cloaks of simulators/baselines.py and the comparison of simulators/cloak_compare.py:
every region holds its requester and k users, Hilbert Cloak is reciprocal, the quadtree cloak
is not, and the attacks the comparison reports."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from locpriv.core.cloak.partition import cloak_once
from locpriv.core.cloak.types import CloakParams
from locpriv.errors import CloakInfeasible
from simulators.baselines import hilbert_cloak, hilbert_index, quadtree_cloak, users_inside
from simulators.cloak_compare import locpriv_cloak, population, region_metrics

WORLD = (0.0, 0.0, 5000.0, 5000.0)


def _population(kind: str, n: int, seed: int) -> NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.uniform(0.0, 5000.0, (n, 2))
    centres = np.array([[1200.0, 1500.0], [3500.0, 3000.0]])
    xy = centres[rng.integers(0, 2, n)] + rng.normal(size=(n, 2)) * 80.0
    bg = rng.random(n) < 0.2
    xy[bg] = rng.uniform(0.0, 5000.0, (int(bg.sum()), 2))
    out: NDArray[np.float64] = np.clip(xy, 0.0, 5000.0)
    return out


@pytest.mark.parametrize("kind", ["uniform", "hotspots"])
@pytest.mark.parametrize("k", [2, 5, 20])
@pytest.mark.parametrize("cloak", [quadtree_cloak, hilbert_cloak])
def test_every_region_holds_the_requester_and_k_users(kind: str, k: int, cloak: object) -> None:
    xy = _population(kind, 1003, seed=k)
    rects = cloak(xy, k, bounds=WORLD)  # type: ignore[operator]
    assert rects.shape == (len(xy), 4)
    inside = users_inside(xy, rects)
    for u, members in enumerate(inside):
        assert u in members
        assert len(members) >= k


def test_hilbert_cloak_is_reciprocal_and_buckets_are_k_to_2k_minus_1() -> None:
    xy = _population("hotspots", 1003, seed=3)
    k = 10
    rects = hilbert_cloak(xy, k, bounds=WORLD)
    _, bucket, sizes = np.unique(rects, axis=0, return_inverse=True, return_counts=True)
    bucket = bucket.ravel()
    # 100 buckets of 10 consecutive users, the last with the 3 left over
    assert len(sizes) == len(xy) // k
    assert sorted(sizes.tolist()) == [10] * 99 + [13]
    order = np.argsort(hilbert_index(xy, bounds=WORLD), kind="stable")
    runs = bucket[order]  # each bucket is one run of the Hilbert order
    assert (np.diff(runs) != 0).sum() == len(sizes) - 1
    for b in range(len(sizes)):  # every member of a bucket got that bucket's bounding box
        members = xy[bucket == b]
        assert np.array_equal(rects[bucket == b][0], [*members.min(0), *members.max(0)])


def test_quadtree_cloak_is_not_reciprocal() -> None:
    """A user inside another's quadrant can get a smaller quadrant of her own: who asked is
    then written in the region's size."""
    xy = _population("uniform", 1000, seed=4)
    rects = quadtree_cloak(xy, 5, bounds=WORLD)
    inside = users_inside(xy, rects)
    broken = [u for u, m in enumerate(inside) if any((rects[v] != rects[u]).any() for v in m)]
    assert len(broken) > len(xy) // 4
    # its regions are quadrants of the world: sides WORLD / 2^depth
    sides = rects[:, 2] - rects[:, 0]
    depth = np.log2(5000.0 / sides)
    assert np.allclose(depth, np.round(depth))


def test_hilbert_index_walks_adjacent_cells() -> None:
    order = 4
    side = 1 << order
    g = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1).reshape(-1, 2)
    xy = (g + 0.5) / side * 100.0
    d = hilbert_index(xy, order=order, bounds=(0.0, 0.0, 100.0, 100.0))
    assert sorted(d.tolist()) == list(range(side * side))
    path = g[np.argsort(d)]
    assert (np.abs(np.diff(path, axis=0)).sum(axis=1) == 1).all()  # one cell step each time


def test_rerun_attack_breaks_the_quadtree_not_the_reciprocal_cloaks() -> None:
    """The adversary knows every position and the algorithm: she runs the cloak for every user
    inside the region and keeps those who would have got it. On the quadtree that can leave
    fewer than k candidates (a requester in a sparse quadrant whose neighbours, inside her
    quadrant, got smaller ones); on Hilbert Cloak and locpriv's partition every user inside a
    bucket or leaf gets it. Their centre attack is one guess per region: at most 1/k."""
    k = 10
    xy = population("hotspots", 2000, 5000.0, seed=5)
    params = CloakParams(k=k, a_min_m2=1e4, a_max_m2=1e9, max_delay_s=0.0)
    quad = region_metrics(xy, quadtree_cloak(xy, k, bounds=WORLD), k, 1e4, 1e9)
    assert quad["rerun_below_k"] > 0.01 and quad["rerun_min"] < k
    for rects in (hilbert_cloak(xy, k, bounds=WORLD), locpriv_cloak(xy, params, WORLD)):
        m = region_metrics(xy, rects, k, 1e4, 1e9)
        assert m["rerun_below_k"] == 0.0 and m["below_k"] == 0.0
        assert m["centre_success"] <= 1 / k and m["centroid_success"] <= 1 / k
    assert region_metrics(xy, locpriv_cloak(xy, params, WORLD), k, 1e4, 1e9)["reciprocal"] == 1.0


def test_region_metrics_by_hand() -> None:
    """Four users; a, b share region A = [0, 10]², c and d share B = [10, 30] x [0, 10] (b lies
    on the shared edge x = 10, so it is inside B too), k = 2."""
    xy = np.array([[2.0, 5.0], [10.0, 5.0], [20.0, 5.0], [29.0, 5.0]])
    A, B = (0.0, 0.0, 10.0, 10.0), (10.0, 0.0, 30.0, 10.0)
    m = region_metrics(xy, np.array([A, A, B, B]), 2, a_min_m2=150.0, a_max_m2=1000.0)
    assert m["inside_min"] == 2 and m["inside_median"] == 2.5  # A: a, b; B: b, c, d
    assert m["area_median_m2"] == 150.0  # areas 100, 100, 200, 200
    assert m["window"] == 0.5  # only B's 200 m² is strictly inside (150, 1000)
    assert m["reciprocal"] == 0.5  # b inside B gets A
    assert m["rerun_below_k"] == 0.0  # B still has c and d
    # A's centre (5, 5): a (3 m away) beats b (5 m); B's centre (20, 5): c
    assert m["centre_success"] == 0.5
    # centroid of A's users (6, 5): a (4 m) and b (4 m) tie, the first row wins (a); B's users
    # (b, c, d) have centroid (19.67, 5): c
    assert m["centroid_success"] == 0.5
    assert m["uniform_success"] == pytest.approx((1 / 2 + 1 / 2 + 1 / 3 + 1 / 3) / 4)
    assert m["rerun_success"] == 0.5


def test_locpriv_cloak_equals_cloak_once() -> None:
    """The notebook's all-users helper returns what the library's entry point gives each user,
    shrunk regions and failures included."""
    xy = population("hotspots", 1500, 5000.0, seed=2)
    params = CloakParams(k=5, a_min_m2=2e4, a_max_m2=3e5, max_delay_s=0.0)
    rects = locpriv_cloak(xy, params, WORLD)
    failed = 0
    for u in np.random.default_rng(0).choice(len(xy), 120, replace=False):
        try:
            got = cloak_once(xy, int(u), params, world=WORLD).polygon.bounds
        except CloakInfeasible:
            assert np.isnan(rects[u]).all()
            failed += 1
            continue
        assert np.allclose(rects[u], got, rtol=0, atol=0)
    assert 0 < failed < 60  # a_max binds in the sparse background


def test_population_kinds() -> None:
    for kind in ("uniform", "hotspots"):
        xy = population(kind, 500, 4000.0, seed=1)
        assert xy.shape == (500, 2) and xy.min() >= 0.0 and xy.max() <= 4000.0
    with pytest.raises(ValueError, match="kind"):
        population("ring", 10, 1.0, seed=0)


def test_too_few_users_is_an_error() -> None:
    xy = _population("uniform", 4, seed=0)
    for cloak in (quadtree_cloak, hilbert_cloak):
        with pytest.raises(ValueError, match="k <= n"):
            cloak(xy, 5)
