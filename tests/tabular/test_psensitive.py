"""p-sensitive methods: conditions, errors, properties, k-increase equivalence, Census validity.

The direction of Solanas et al. Table 1 is tested in test_solanas_mechanism.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular import (
    conditions,
    enhanced_pk_clustering,
    il_percent,
    is_k_anonymous,
    is_p_sensitive,
    k_increase,
    mdav,
    mdav_seed,
    random_seed,
    require_feasible,
    seeded_groups,
)
from locpriv.tabular.io.encoding import zscore
from locpriv.tabular.microagg.mdav import mdav_p_sensitive
from locpriv.tabular.psensitive.kincrease import group_is_p_sensitive
from locpriv.tabular.psensitive.sec_pk import sec_pk_clustering

CENSUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "census.csv"


def _labels_ok(labels: np.ndarray, n: int) -> None:
    """Each record in exactly one group; labels are 0..g-1, all used."""
    assert labels.shape == (n,)
    assert labels.min() == 0
    assert np.array_equal(np.unique(labels), np.arange(labels.max() + 1))


# ---------------------------------------------------------------- conditions


def test_condition2_hand_example() -> None:
    # frequencies 5, 3, 1, 1 (n = 10), p = 3:
    # i=1: (10 - cf_2)/1 = (10 - 8) = 2 ; i=2: (10 - cf_1)/2 = 5/2 -> 2  => maxClusters = 2
    s = np.array([0] * 5 + [1] * 3 + [2, 3])
    cond = conditions(s, k=3, p=3)
    assert cond.max_clusters == 2
    assert cond.i_value == 1
    assert cond.distinct == (4,)
    assert cond.condition1
    # k-anonymity bound wins when it is smaller: n // k = 10 // 5 = 2 ties, so i_value stays 0
    assert conditions(s, k=5, p=2).max_clusters == min(10 // 5, (10 - 5) // 1)


def test_condition2_is_an_upper_bound_on_groups() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(20, 80))
        s = np.minimum(rng.geometric(0.5, n) - 1, 5)
        k = int(rng.integers(2, 5))
        p = int(rng.integers(2, k + 1))
        if len(np.unique(s)) < p:
            continue
        X = rng.normal(size=(n, 2))
        cond = conditions(s, k, p)
        for fn in (mdav_seed, enhanced_pk_clustering, sec_pk_clustering):
            assert fn(X, s, k, p).max() + 1 <= cond.max_clusters


@pytest.mark.parametrize(
    ("k", "p", "s", "exc", "text"),
    [
        (2, 3, [0, 1, 2, 3], InfeasibleError, "p=3"),
        (3, 2, [0, 0, 0, 0], InfeasibleError, "fewer than p=2"),
        (9, 2, [0, 1, 0, 1], InfeasibleError, "n=4"),
        (0, 1, [0, 1], ConfigError, "k must be"),
        (2, 0, [0, 1], ConfigError, "p must be"),
    ],
)
def test_require_feasible_errors(
    k: int, p: int, s: list[int], exc: type[Exception], text: str
) -> None:
    with pytest.raises(exc, match=text):
        require_feasible(np.array(s), k, p)


def test_methods_raise_on_infeasible() -> None:
    X = np.arange(12.0)[:, None]
    s = np.array([0, 1] * 6)
    for fn in (mdav_seed, random_seed, enhanced_pk_clustering, sec_pk_clustering):
        with pytest.raises(InfeasibleError, match="p=3 is larger than k=2"):
            fn(X, s, 2, 3)
        with pytest.raises(InfeasibleError, match="fewer than p=3"):
            fn(X, s, 4, 3)
    with pytest.raises(InfeasibleError, match="fewer than p=3"):
        k_increase(X, s, 4, 3)
    with pytest.raises(ConfigError, match="seed_mode"):
        seeded_groups(X, s, 2, 2, seed_mode="nope")


# ---------------------------------------------------------------- properties

problems = st.integers(0, 2**31 - 1).flatmap(
    lambda seed: st.tuples(
        st.just(seed),
        st.integers(8, 90),  # n
        st.integers(1, 4),  # d
        st.integers(2, 5),  # k
        st.integers(1, 5),  # p (clipped to k)
        st.integers(1, 2),  # m confidential attributes
        st.booleans(),  # skewed confidential values
    )
)


def _make(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    seed: int, n: int, d: int, k: int, p: int, m: int, skew: bool
):
    rng = np.random.default_rng(seed)
    p = min(p, k)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 5, size=d)
    if skew:
        S = np.minimum(rng.geometric(0.45, size=(n, m)) - 1, 6)
    else:
        S = rng.integers(0, 6, size=(n, m))
    return X, S, max(2, min(k, n)), p


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems)
def test_every_method_is_p_sensitive_k_anonymous(prob: tuple) -> None:  # type: ignore[type-arg]
    X, S, k, p = _make(*prob)
    n = X.shape[0]
    feasible = n >= k and all(len(np.unique(S[:, j])) >= p for j in range(S.shape[1]))
    if not feasible:
        with pytest.raises(InfeasibleError):
            mdav_seed(X, S, k, p)
        return
    outs = {
        "mdav-seed": mdav_seed(X, S, k, p),
        "random-seed": random_seed(X, S, k, p, np.random.default_rng(prob[0])),
        "enhanced-pk": enhanced_pk_clustering(X, S, k, p),
        "sec-pk": sec_pk_clustering(X, S, k, p),
    }
    if n <= 40:
        outs["k-increase"] = k_increase(X, S, k, p)[0]
    for name, labels in outs.items():
        _labels_ok(labels, n)
        assert is_k_anonymous(labels, k), name
        assert is_p_sensitive(labels, S, k, p), name
        # a group never needs more than... every group at least k; total is n
        assert np.bincount(labels).sum() == n


def test_random_seed_is_seedable() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    s = rng.integers(0, 5, 300)
    a = random_seed(X, s, 4, 3, np.random.default_rng(7))
    b = random_seed(X, s, 4, 3, np.random.default_rng(7))
    c = random_seed(X, s, 4, 3, np.random.default_rng(8))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_seeded_groups_are_exactly_k_on_uniform_values() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    s = rng.integers(0, 10, 600)
    labels = mdav_seed(X, s, 5, 3)
    sizes = np.bincount(labels)
    assert sizes.min() >= 5
    assert np.sum(sizes > 5) <= 4  # only leftovers (< k records) enlarge groups


# ---------------------------------------------------------------- k-increase


def _reference_k_increase(X: np.ndarray, S: np.ndarray, k: int, p: int) -> tuple[np.ndarray, int]:
    """The plain algorithm: MDAV with k, k+1, ... until p-sensitive (no early rejection)."""
    for kk in range(k, X.shape[0] + 1):
        labels = np.asarray(mdav(X, kk), dtype=np.int64)
        if group_is_p_sensitive(labels, S.reshape(len(X), -1), p):
            return labels, kk
    raise AssertionError("unreachable")


@pytest.mark.parametrize("seed", range(6))
def test_k_increase_equals_plain_algorithm(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 70
    X = rng.normal(size=(n, 2))
    # clustered confidential values make MDAV groups homogeneous, so k must grow
    S = (X[:, 0] > np.quantile(X[:, 0], 0.3)).astype(np.int64) + (X[:, 1] > 1.2)
    S = S[:, None]
    got, kk = k_increase(X, S, 2, 2)
    want, kw = _reference_k_increase(X, S, 2, 2)
    assert kk == kw
    assert np.array_equal(got, want)
    assert kk >= 2


@pytest.mark.parametrize("seed", range(3))
def test_mdav_p_sensitive_is_mdav_or_none(seed: int) -> None:
    """The early-stopping run (k-increase's shortcut) returns MDAV's labels exactly when MDAV's
    partition is p-sensitive, and None otherwise: on both kernels (the block kernel for d <= 8,
    the sweep for uniform 10-D), with ties and with a large offset."""
    rng = np.random.default_rng(seed)
    seen = {True: 0, False: 0}
    for it in range(48):
        n = int(rng.integers(30, 300))
        d = 10 if it % 4 >= 2 else int(rng.integers(1, 4))
        k = int(rng.integers(2, 6))
        p = int(rng.integers(2, k + 1))
        X = rng.random((n, d)) if d == 10 else rng.normal(size=(n, d))
        if it % 2:  # ties
            X = np.round(X * 2) / 2
        if it % 3 == 0:  # a large offset (centroid rounding)
            X = X + 1000.0
        nv = int(rng.integers(p, 8)) if it % 2 else 40  # few values: failures; many: passes
        S = rng.integers(0, nv, (n, int(rng.integers(1, 3))))
        want = np.asarray(mdav(X, k), dtype=np.int64)
        ok = group_is_p_sensitive(want, S, p)
        got = mdav_p_sensitive(X, k, S, p)
        seen[ok] += 1
        if ok:
            assert got is not None
            assert np.array_equal(got, want)
        else:
            assert got is None
    assert seen[True] >= 5
    assert seen[False] >= 5


def test_k_increase_equals_plain_algorithm_with_ties() -> None:
    rng = np.random.default_rng(11)
    X = np.round(rng.normal(size=(400, 3)) * 2) / 2
    S = rng.integers(0, 4, (400, 1))
    got, kk = k_increase(X, S, 2, 2)
    want, kw = _reference_k_increase(X, S, 2, 2)
    assert kk == kw
    assert np.array_equal(got, want)


# ---------------------------------------------------------------- Census (Solanas et al. Table 1)


def _census() -> tuple[np.ndarray, np.ndarray]:
    if not CENSUS.exists():
        pytest.skip(f"Census data not found at {CENSUS}")
    df = pd.read_csv(CENSUS)
    Z = zscore(df.iloc[:, :12].to_numpy(np.float64))
    # 13th attribute (ERNVAL) -> 10 equal-frequency classes (ranks break ties by row order)
    s = pd.qcut(df.iloc[:, 12].rank(method="first"), 10, labels=False).to_numpy(np.int64)
    return Z, s


def test_census_methods_valid_and_il_ordered() -> None:
    Z, s = _census()
    for k, p in ((3, 2), (5, 3)):
        il_m = il_percent(Z, np.asarray(mdav(Z, k), dtype=np.int64))
        for fn in (mdav_seed, enhanced_pk_clustering, sec_pk_clustering):
            labels = fn(Z, s, k, p)
            assert is_p_sensitive(labels, s, k, p)
            # p-sensitivity costs information: never below plain MDAV by a wide margin
            assert il_percent(Z, labels) > 0.8 * il_m


def _reference_seeded(
    Z: np.ndarray, s: np.ndarray, k: int, p: int, rnd: np.ndarray | None
) -> np.ndarray:
    """Plain-Python Solanas et al. Algorithm 1 (one confidential attribute), for comparison."""
    n = len(Z)
    lo, hi = Z.min(0), Z.max(0)
    alive = np.ones(n, bool)
    labels = -np.ones(n, np.int64)
    g = 0
    while alive.sum() >= k and len(np.unique(s[alive])) >= p:
        idx = np.flatnonzero(alive)
        if rnd is None:
            c = Z[idx].mean(0)
            seed = idx[np.argmax(((Z[idx] - c) ** 2).sum(1))]
        else:
            v = lo + rnd[g] * (hi - lo)
            seed = idx[np.argmin(((Z[idx] - v) ** 2).sum(1))]
        rest = [o for o in idx[np.argsort(((Z[idx] - Z[seed]) ** 2).sum(1))] if o != seed]
        grp, vals = [seed], {s[seed]}
        while len(grp) < k or len(vals) < p:
            tight = len(vals) < p and len(grp) + (p - len(vals)) >= k
            pick = next(o for o in rest if s[o] not in vals) if tight else rest[0]
            rest.remove(pick)
            grp.append(pick)
            vals.add(s[pick])
        labels[grp] = g
        alive[grp] = False
        g += 1
    cent = np.array([Z[labels == a].mean(0) for a in range(g)])
    for i in np.flatnonzero(alive):
        labels[i] = np.argmin(((cent - Z[i]) ** 2).sum(1))
    return labels


@pytest.mark.parametrize(("n", "d"), [(1200, 13), (2600, 2), (2300, 1), (900, 4)])
@pytest.mark.parametrize("mode", ["mdav", "random"])
def test_seeded_kernel_equals_plain_python_many_chunks(n: int, d: int, mode: str) -> None:
    """Several chunks, so the partial-distance pruning of the k-nearest pass, the shell of the
    furthest-record search and (d <= 2, n >= 2048) the grid index are exercised (no ties: the
    plain version breaks them by row order, the kernel by compact position)."""
    rng = np.random.default_rng(n + d)
    Z = rng.normal(size=(n, d))
    s = rng.integers(0, 6, n)
    k, p = 3, 2
    got = seeded_groups(Z, s, k, p, seed_mode=mode, rng=np.random.default_rng(1))
    rnd = np.random.default_rng(1).random((n // k + 1, d)) if mode == "random" else None
    assert np.array_equal(got, _reference_seeded(Z, s, k, p, rnd))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["mdav", "random"])
def test_seeded_kernel_equals_plain_python(seed: int, mode: str) -> None:
    rng = np.random.default_rng(seed)
    n, d, k, p = 150, 3, 4, 3
    Z = rng.normal(size=(n, d))
    s = np.minimum(rng.geometric(0.4, n) - 1, 5)
    got = seeded_groups(Z, s, k, p, seed_mode=mode, rng=np.random.default_rng(seed))
    rnd = np.random.default_rng(seed).random((n // k + 1, d)) if mode == "random" else None
    want = _reference_seeded(Z, s, k, p, rnd)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("d", [1, 2])
def test_grid_index_gives_the_plain_pass_results(d: int) -> None:
    """With d <= 2 (and n >= 2048) the k-nearest queries go through a grid; a constant extra
    column adds exactly 0 to every distance but turns the grid off, so the labels must agree
    (ties included: the data are rounded)."""
    rng = np.random.default_rng(d)
    n = 3000
    X = np.round(rng.random((n, d)) * 40) / 40
    X[: n // 3] *= 0.05  # a dense cluster and sparse surroundings
    X3 = np.hstack([X, np.zeros((n, 3 - d))])
    s = np.minimum(rng.geometric(0.3, n) - 1, 6)
    for k, p in ((3, 2), (5, 4)):
        assert np.array_equal(sec_pk_clustering(X, s, k, p), sec_pk_clustering(X3, s, k, p))
        assert np.array_equal(mdav_seed(X, s, k, p), mdav_seed(X3, s, k, p))
        # random-seed draws (n // k + 1) x d numbers, so it is compared with the plain
        # version in test_seeded_kernel_equals_plain_python_many_chunks (n >= 2048) instead


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_p_sensitive_methods_reject_non_finite_keys(bad: float) -> None:
    """A NaN or infinite key value is a DataError naming the problem, never a crash."""
    rng = np.random.default_rng(0)
    X = rng.random((2000, 5))
    X[17, 3] = bad
    S = rng.integers(0, 4, 2000)
    calls = (
        lambda: mdav_seed(X, S, 3, 2),
        lambda: random_seed(X, S, 3, 2, np.random.default_rng(1)),
        lambda: enhanced_pk_clustering(X, S, 3, 2),
        lambda: sec_pk_clustering(X, S, 3, 2),
        lambda: k_increase(X, S, 3, 2),
    )
    for call in calls:
        with pytest.raises(DataError, match="finite"):
            call()
