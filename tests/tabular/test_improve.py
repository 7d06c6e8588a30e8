"""Heuristics beating MDAV: V-MDAV, the local search and the best-of-starts driver."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.errors import DataError, InfeasibleError
from locpriv.tabular.microagg._kernels import local_search as kern
from locpriv.tabular.microagg._kernels.neighbours import knn_approx, knn_exact
from locpriv.tabular.microagg.improve import best_partition, improve_partition, ruin_recreate, vmdav
from locpriv.tabular.microagg.mdav import mdav
from locpriv.tabular.quality.metrics import il_percent, sse
from tests.tabular._mdav_helpers import ADULT, CENSUS, load_adult_numeric, load_census, zscore

# MDAV's IL on Census (k: IL); best_partition must be at least 7 % lower
CENSUS_MDAV_IL = {3: 5.6922, 4: 7.4947, 5: 9.0884, 10: 14.1559}


def _assert_partition(labels: np.ndarray, n: int, k: int, kmax: int) -> None:
    assert labels.shape == (n,)
    sizes = np.bincount(labels)
    assert len(sizes) == labels.max() + 1  # labels 0..g-1, every one used: each record in one
    assert sizes.min() >= k
    assert sizes.max() <= kmax


@pytest.mark.skipif(not CENSUS.exists(), reason=f"{CENSUS} not found")
@pytest.mark.parametrize("k", sorted(CENSUS_MDAV_IL))
def test_census_seven_percent_below_mdav(k: int) -> None:
    X = load_census()
    labels = best_partition(X, k)
    _assert_partition(labels, len(X), k, 2 * k - 1)
    assert il_percent(X, labels) <= 0.93 * CENSUS_MDAV_IL[k]


def _clustered(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(2, n // 100), d)) * 4
    return zscore(centres[rng.integers(0, len(centres), n)] + rng.normal(size=(n, d)))


def _datasets() -> list[tuple[str, np.ndarray]]:
    out = [
        ("clustered", _clustered(3000, 5, 1)),
        ("uniform", np.random.default_rng(2).uniform(size=(2500, 8))),
    ]
    if ADULT.exists():
        out.append(("adult", load_adult_numeric(3000, seed=3)))
    return out


@pytest.mark.parametrize(("name", "X"), _datasets(), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("k", [3, 5, 10])
def test_never_worse_than_mdav_elsewhere(name: str, X: np.ndarray, k: int) -> None:
    base = sse(X, mdav(X, k))
    labels = best_partition(X, k, seed=1)
    _assert_partition(labels, len(X), k, 2 * k - 1)
    assert sse(X, labels) <= base
    # and it is a real improvement, not a tie (all these data sets leave room)
    assert sse(X, labels) <= 0.97 * base, name


def _skewed(n: int, d: int, seed: int) -> np.ndarray:
    """Correlated log-normal attributes (income-like microdata: skewed, heavy right tails)."""
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(d, d))
    return zscore(np.exp(rng.multivariate_normal(np.zeros(d), L @ L.T / d, size=n)))


@pytest.mark.parametrize(
    ("name", "X"),
    [("skewed", _skewed(834, 13, 5)), ("uniform13", np.random.default_rng(6).random((1000, 13)))],
    ids=lambda v: v if isinstance(v, str) else "",
)
@pytest.mark.parametrize("k", [3, 5, 10])
def test_seven_percent_below_mdav_beyond_census(name: str, X: np.ndarray, k: int) -> None:
    """The 7 % goal holds on data unlike Census: skewed income-like attributes (where local
    moves alone gave 5.7 %) and uniform 13-D noise (4-6 % before ruin-and-recreate)."""
    labels = best_partition(X, k)
    _assert_partition(labels, len(X), k, 2 * k - 1)
    assert il_percent(X, labels) <= 0.93 * il_percent(X, mdav(X, k)), name


def test_ruin_recreate_only_lowers_sse_and_keeps_sizes() -> None:
    X = _skewed(600, 6, 7)
    k = 4
    start = improve_partition(X, mdav(X, k), k)
    base = sse(X, start)
    a = ruin_recreate(X, start, k, rounds=300, rng=np.random.default_rng(1))
    b = ruin_recreate(X, start, k, rounds=300, rng=np.random.default_rng(1))
    _assert_partition(a, len(X), k, 2 * k - 1)
    assert np.array_equal(a, b)  # deterministic for a seed
    assert sse(X, a) < base  # local search alone had stopped: the large moves found more
    none = ruin_recreate(X, start, k, rounds=0)
    assert sse(X, none) <= base


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    n = draw(st.integers(2, 80))
    d = draw(st.integers(1, 4))
    k = draw(st.integers(1, max(1, min(n // 2, 6))))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["normal", "grid", "clustered"]))
    if kind == "normal":
        X = rng.normal(size=(n, d))
    elif kind == "grid":
        X = rng.integers(0, 3, size=(n, d)).astype(np.float64)
    else:
        X = rng.normal(size=(3, d))[rng.integers(0, 3, n)] * 5 + rng.normal(size=(n, d)) * 0.1
    return X, k


@settings(max_examples=200, deadline=None)
@given(problems(), st.integers(0, 2**16))
def test_local_search_invariants(problem: tuple[np.ndarray, int], seed: int) -> None:
    X, k = problem
    start = mdav(X, k)
    labels = improve_partition(X, start, k, rng=np.random.default_rng(seed))
    _assert_partition(labels, len(X), k, 2 * k - 1)
    assert sse(X, labels) <= sse(X, start) + 1e-9 * (1 + sse(X, start))


@settings(max_examples=100, deadline=None)
@given(problems(), st.integers(0, 2**16))
def test_local_search_from_any_partition(problem: tuple[np.ndarray, int], seed: int) -> None:
    # a random partition with groups of any size >= k (oversized groups are split first)
    X, k = problem
    rng = np.random.default_rng(seed)
    n = len(X)
    g = rng.integers(1, n // k + 1)
    cuts: list[int] = (np.sort(rng.choice(np.arange(1, n // k), g - 1, replace=False)) * k).tolist()
    start = np.empty(n, dtype=np.intp)
    start[rng.permutation(n)] = np.repeat(np.arange(g), np.diff([0, *cuts, n]))
    labels = improve_partition(X, start, k, rng=rng)
    _assert_partition(labels, n, k, max(2 * k - 1, 1))
    assert sse(X, labels) <= sse(X, start) + 1e-9 * (1 + sse(X, start))


@settings(max_examples=100, deadline=None)
@given(problems())
def test_best_partition_invariants(problem: tuple[np.ndarray, int]) -> None:
    X, k = problem
    labels = best_partition(X, k)
    _assert_partition(labels, len(X), k, 2 * k - 1)
    assert sse(X, labels) <= sse(X, mdav(X, k)) + 1e-9 * (1 + sse(X, mdav(X, k)))


def test_sweep_delta_formulas_match_the_sse() -> None:
    # the closed-form ΔSSE of moves and swaps, summed by the kernel, equals the real change
    X = _clustered(600, 4, 7)
    k = 3
    lab = mdav(X, k).astype(np.int64)
    before = sse(X, lab)
    G = int(lab.max()) + 1
    cnt, S, mem, slot = kern.build_state(X, lab, G, 2 * k)
    nbr = knn_exact(X, 10)
    order = np.random.default_rng(0).permutation(len(X))
    stamp, rseen, gseen, clock = (
        np.ones(G, np.int64),
        np.zeros(len(X), np.int64),
        np.zeros(G, np.int64),
        np.ones(1, np.int64),
    )
    total, changes = kern.sweep_records(
        X, lab, cnt, S, mem, slot, nbr, k, 2 * k - 1, order, 1e-12, stamp, rseen, clock
    )
    assert changes > 0
    assert sse(X, lab) - before == pytest.approx(total, rel=1e-9, abs=1e-9)
    np.testing.assert_array_equal(cnt, np.bincount(lab, minlength=G))
    total2, _ = kern.sweep_pairs(
        X, lab, cnt, S, mem, slot, nbr, k, 2 * k - 1, np.arange(G), 1e-12, 8, stamp, gseen, clock
    )
    assert sse(X, lab) - before == pytest.approx(total + total2, rel=1e-9, abs=1e-9)


def test_approximate_neighbour_graph_is_mostly_right() -> None:
    X = np.random.default_rng(4).normal(size=(3000, 6))
    exact = knn_exact(X, 8)
    approx = knn_approx(X, 8, 8, 48, 0)
    assert (approx >= 0).all() and (approx != np.arange(len(X))[:, None]).all()
    recall = np.mean([len(set(a) & set(e)) / 8 for a, e in zip(approx, exact, strict=True)])
    assert recall > 0.8


def _vmdav_reference(X: np.ndarray, k: int, gamma: float) -> set[frozenset[int]]:
    """V-MDAV as in its description, in plain numpy (for continuous data: no ties)."""
    n = len(X)
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    free = set(range(n))
    groups: list[list[int]] = []
    while len(free) >= k:
        rem = np.array(sorted(free))
        e = int(rem[np.argmax(((X[rem] - X[rem].mean(0)) ** 2).sum(1))])
        others = rem[rem != e]
        grp = [e, *others[np.argsort(D[e, others], kind="stable")[: k - 1]].tolist()]
        free -= set(grp)
        while len(grp) < 2 * k - 1 and free:
            out = np.array(sorted(free))
            d_in_all = D[np.ix_(out, grp)].min(1)
            j = int(np.argmin(d_in_all))
            cand = int(out[j])
            rest = out[out != cand]
            d_out = D[cand, rest].min() if rest.size else np.inf
            if not d_in_all[j] < gamma * d_out:
                break
            grp.append(cand)
            free.discard(cand)
        groups.append(grp)
    cents = [X[g].mean(0) for g in groups]
    for i in sorted(free):
        groups[int(np.argmin([((X[i] - c) ** 2).sum() for c in cents]))].append(i)
    return {frozenset(g) for g in groups}


@pytest.mark.parametrize(
    ("n", "d", "k", "gamma"), [(60, 2, 3, 0.2), (80, 3, 4, 1.0), (45, 2, 2, 2.0)]
)
def test_vmdav_matches_reference(n: int, d: int, k: int, gamma: float) -> None:
    X = _clustered(n, d, n + k)
    labels = vmdav(X, k, gamma)
    got = {frozenset(np.flatnonzero(labels == g).tolist()) for g in np.unique(labels)}
    assert got == _vmdav_reference(X, k, gamma)
    _assert_partition(labels, n, k, 3 * k - 2)


def test_vmdav_grows_groups_on_clusters() -> None:
    # 20 clusters of 5 evenly spaced points: a group of 3 takes the other two (d_in = d_out for
    # the 4th, d_out = 100 for the 5th) when gamma > 1, and stays at 3 + leftovers when gamma = 0
    X = (np.arange(20.0)[:, None] * 100 + np.arange(5.0) * 0.1).reshape(-1, 1)
    assert (np.bincount(vmdav(X, 3, gamma=1.5)) == 5).all()
    assert np.bincount(vmdav(X, 3, gamma=0.0)).min() == 3


def test_time_budget_still_valid() -> None:
    X = _clustered(3000, 5, 9)
    labels = best_partition(X, 3, time_budget_s=0.0)
    _assert_partition(labels, len(X), 3, 5)
    assert sse(X, labels) <= sse(X, mdav(X, 3))


@pytest.mark.parametrize(
    ("labels", "k", "exc"),
    [
        (np.array([0, 0, 1, 1, 1]), 3, DataError),  # a group smaller than k
        (np.array([0, 0, 0]), 2, DataError),  # wrong length
        (np.array([0.0, 0, 0, 0, 0]), 2, DataError),  # not integers
        (np.zeros(5, dtype=int), 6, InfeasibleError),
    ],
)
def test_invalid_labels(labels: np.ndarray, k: int, exc: type[Exception]) -> None:
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(exc):
        improve_partition(X, labels, k)


def test_invalid_start_and_gamma() -> None:
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(DataError, match="starts"):
        best_partition(X, 2, starts=("mdav", "nope"))
    with pytest.raises(DataError, match="gamma"):
        vmdav(X, 2, gamma=-1.0)
