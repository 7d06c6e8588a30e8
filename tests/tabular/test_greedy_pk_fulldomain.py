"""Value hierarchies, Truta et al.'s generalisation IL, GreedyPKClustering and Incognito search."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular import is_p_sensitive
from locpriv.tabular.generalisation.fulldomain import incognito
from locpriv.tabular.generalisation.hierarchy import (
    KeyTable,
    LevelHierarchy,
    generalisation_il,
    generalisation_il_normalised,
)
from locpriv.tabular.psensitive.greedy_pk import greedy_pk_clustering

# a, b under X; c under Y; root *
ABC = LevelHierarchy.from_rows([("a", "X", "*"), ("b", "X", "*"), ("c", "Y", "*")])


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return len({(x, y) for x, y in zip(a, b, strict=True)}) == len(set(a)) == len(set(b))


def test_level_hierarchy() -> None:
    assert ABC.height == 2
    assert ABC.codes(["c", "a"]).tolist() == [2, 0]
    assert ABC.ancestors().tolist() == [[0, 1, 2], [0, 0, 1], [0, 0, 0]]
    assert ABC.lca_levels().tolist() == [[0, 1, 2], [1, 0, 2], [2, 2, 0]]
    with pytest.raises(DataError):
        ABC.codes(["d"])
    with pytest.raises(ConfigError):  # b has two parents
        LevelHierarchy.from_rows([("a", "X", "*"), ("b", "X", "*"), ("b", "Y", "*")])
    with pytest.raises(ConfigError):  # two roots
        LevelHierarchy.from_rows([("a", "X", "*"), ("b", "Y", "+")])
    with pytest.raises(ConfigError):
        LevelHierarchy.from_rows([("a", "*"), ("b", "X", "*")])


def test_generalisation_il_by_hand() -> None:
    keys = KeyTable(
        numeric=np.array([[20.0], [30.0], [40.0], [50.0]]),
        leaves=ABC.codes(["a", "b", "a", "c"])[:, None],
        hierarchies=(ABC,),
    )
    # {0,1}: ages 20-30 -> 10/30, a+b -> X (level 1 of 2): 2 * (1/3 + 1/2) = 5/3
    # {2,3}: ages 40-50 -> 10/30, a+c -> * (level 2 of 2): 2 * (1/3 + 1) = 8/3
    labels = np.array([0, 0, 1, 1])
    assert generalisation_il(keys, labels) == pytest.approx(13 / 3)
    assert generalisation_il_normalised(keys, labels) == pytest.approx(13 / 3 / 8)
    assert generalisation_il(keys, np.arange(4)) == 0.0
    assert generalisation_il_normalised(keys, np.zeros(4, dtype=np.int64)) == 1.0


def test_greedy_pk_by_hand() -> None:
    # seed=1 draws row 1 first. Row 1 (x=1, s=0) needs an s=1 record: rows 2 (x=2) and 3 (x=10)
    # add the same diversity, row 2 costs less -> {1, 2}. Rows 0 and 3 are left: the next seed
    # is the one furthest from row 1 (row 3), which takes row 0 for diversity -> {3, 0}.
    # A pure IL greedy would pair {0, 1}, which is not 2-sensitive.
    assert int(np.random.default_rng(1).integers(4)) == 1
    keys = KeyTable(np.array([[0.0], [1.0], [2.0], [10.0]]), np.zeros((4, 0), np.int64), ())
    labels = greedy_pk_clustering(keys, [0, 0, 1, 1], 2, 2, seed=1)
    assert labels.tolist() == [1, 0, 0, 1]


def test_greedy_pk_follows_the_hierarchy() -> None:
    # same ages; the categorical attribute decides: a pairs with b (same parent), not with c
    keys = KeyTable(np.zeros((4, 1)), ABC.codes(["a", "c", "b", "c"])[:, None], (ABC,))
    labels = greedy_pk_clustering(keys, [0, 1, 1, 0], 2, 2, seed=0)
    assert labels[0] == labels[2] and labels[1] == labels[3]


@pytest.mark.parametrize("seed", range(6))
def test_greedy_pk_partitions_are_p_sensitive_k_anonymous(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k, p = int(rng.integers(40, 160)), int(rng.integers(2, 7)), 0
    p = int(rng.integers(1, k + 1))
    skew = rng.random() < 0.5
    S = np.column_stack(
        [
            np.where(rng.random(n) < (0.7 if skew else 0.0), 0, rng.integers(0, 8, n)),
            rng.integers(0, 6, n),
        ]
    )
    keys = KeyTable(rng.normal(size=(n, 2)), ABC.codes(rng.choice(list("abc"), n))[:, None], (ABC,))
    try:
        labels = greedy_pk_clustering(keys, S, k, p, seed=seed)
    except InfeasibleError:
        assert any(len(np.unique(c)) < p for c in S.T)
        return
    assert labels.min() == 0 and set(labels.tolist()) == set(range(labels.max() + 1))
    assert is_p_sensitive(labels, S, k, p)


def test_greedy_pk_infeasible() -> None:
    keys = KeyTable(np.zeros((4, 1)), np.zeros((4, 0), np.int64), ())
    with pytest.raises(InfeasibleError):
        greedy_pk_clustering(keys, [0, 0, 0, 0], 2, 2)
    with pytest.raises(InfeasibleError):
        greedy_pk_clustering(keys, [0, 1, 2, 3], 2, 3)


def _brute_minimal(df: pd.DataFrame, hs: list[LevelHierarchy], S: np.ndarray, k: int, p: int):
    """Every node of the lattice checked with pandas; the minimal acceptable ones."""
    anc = [h.ancestors() for h in hs]
    ok = set()
    for node in itertools.product(*[range(h.height + 1) for h in hs]):
        key = pd.DataFrame({j: anc[j][lev][df[j]] for j, lev in enumerate(node)})
        grp = key.groupby(list(key.columns)).ngroup().to_numpy()
        sizes = np.bincount(grp)
        distinct = [pd.Series(S[:, c]).groupby(grp).nunique().min() for c in range(S.shape[1])]
        if sizes.min() >= k and min(distinct) >= p:
            ok.add(node)
    return {
        nd
        for nd in ok
        if not any((*nd[:i], nd[i] - 1, *nd[i + 1 :]) in ok for i in range(len(nd)) if nd[i])
    }


@pytest.mark.parametrize("seed", range(5))
def test_incognito_finds_every_minimal_node(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 120))
    ages = LevelHierarchy.from_rows(
        [(str(a), f"{a // 10 * 10}s", "adult" if a >= 20 else "young", "*") for a in range(10, 50)]
    )
    hs = [ABC, ages, LevelHierarchy.from_rows([("m", "*"), ("f", "*")])]
    df = pd.DataFrame(
        {
            0: ABC.codes(rng.choice(list("abc"), n)),
            1: ages.codes(rng.integers(10, 50, n)),
            2: rng.integers(0, 2, n),
        }
    )
    S = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 3, n)])
    k, p = int(rng.integers(2, 6)), int(rng.integers(1, 3))
    res = incognito(df.to_numpy(), tuple(hs), S, k, p)
    assert set(res.minimal) == _brute_minimal(df, hs, S, k, p)
    assert res.levels in res.minimal
    assert is_p_sensitive(res.labels, S, k, p)
    assert res.checked <= 3 * 4 * 2 + 3 + 4 + 2 + 3 * 4 + 3 * 2 + 4 * 2


def test_incognito_prefers_the_lowest_dm_and_reports_infeasible() -> None:
    # (0, 1): classes {a}, {b}, {c} of 2 records with both S values, DM 12. (1, 0) leaves
    # (Y, m) with one record; (2, 0): {*, m} and {*, f} of 3, DM 18. (1, 1) is above (0, 1).
    leaves = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [2, 0], [2, 1]])
    hs = (ABC, LevelHierarchy.from_rows([("m", "*"), ("f", "*")]))
    S = np.array([0, 1, 1, 0, 0, 1])
    res = incognito(leaves, hs, S, 2, 2)
    assert res.minimal == ((0, 1), (2, 0))
    assert res.levels == (0, 1)
    with pytest.raises(InfeasibleError):
        incognito(leaves, hs, np.zeros(6), 2, 2)
