"""best-p: large-neighbourhood search over p-sensitive k-anonymous partitions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from locpriv.errors import InfeasibleError
from locpriv.tabular import (
    best_p_sensitive,
    is_p_sensitive,
    mdav_seed,
    sse,
)
from locpriv.tabular.io.encoding import zscore
from locpriv.tabular.psensitive.psearch import ruin_recreate_p
from locpriv.tabular.psensitive.sec_pk import sec_pk_clustering
from tests.tabular._mdav_helpers import CENSUS


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Skewed keys and two confidential attributes correlated with them (homogeneous
    neighbourhoods, where p-sensitivity costs the most)."""
    rng = np.random.default_rng(seed)
    X = zscore(np.exp(rng.normal(size=(n, 4)) @ rng.normal(size=(4, 4)) / 2))
    s1 = np.digitize(X[:, 0], np.quantile(X[:, 0], [0.2, 0.4, 0.6, 0.8]))
    s2 = rng.integers(0, 3, n)
    return X, np.column_stack([s1, s2])


@pytest.mark.parametrize(("k", "p"), [(3, 2), (4, 3), (5, 3)])
def test_best_p_is_p_sensitive_and_below_the_greedy_heuristics(k: int, p: int) -> None:
    X, S = _data(900, k)
    greedy = min(sse(X, mdav_seed(X, S, k, p)), sse(X, sec_pk_clustering(X, S, k, p)))
    labels = best_p_sensitive(X, S, k, p, seed=1)
    assert labels.shape == (len(X),)
    assert is_p_sensitive(labels, S, k, p)  # the independent validator
    assert np.bincount(labels).min() >= k
    assert sse(X, labels) <= 0.97 * greedy  # a real gain, not a tie
    assert np.array_equal(labels, best_p_sensitive(X, S, k, p, seed=1))  # deterministic


def test_ruin_recreate_p_never_raises_sse_and_rejects_bad_starts() -> None:
    X, S = _data(400, 9)
    start = mdav_seed(X, S, 3, 2)
    out = ruin_recreate_p(X, S, start, 3, 2, rounds=200, rng=np.random.default_rng(0))
    assert sse(X, out) <= sse(X, start)
    assert is_p_sensitive(out, S, 3, 2)
    n = len(X)
    homogeneous = np.empty(n, dtype=np.int64)  # groups of 3 by sorted value: most have p = 1
    homogeneous[np.argsort(S[:, 0], kind="stable")] = np.minimum(np.arange(n) // 3, n // 3 - 1)
    with pytest.raises(InfeasibleError, match="p-sensitive"):
        ruin_recreate_p(X, S, homogeneous, 3, 2, rounds=10)
    with pytest.raises(InfeasibleError, match=">= k"):
        ruin_recreate_p(X, S, np.arange(len(X)) // 2, 3, 2, rounds=10)


@pytest.mark.skipif(not CENSUS.exists(), reason=f"{CENSUS} not found")
def test_census_best_p_below_mdav_seed() -> None:
    df = pd.read_csv(CENSUS)
    Z = zscore(df.iloc[:, :12].to_numpy(np.float64))
    s = pd.qcut(df.iloc[:, 12].rank(method="first"), 10, labels=False).to_numpy(np.int64)
    for k, p in [(3, 2), (4, 3), (5, 5)]:
        base = sse(Z, mdav_seed(Z, s, k, p))
        labels = best_p_sensitive(Z, s, k, p)
        assert is_p_sensitive(labels, s, k, p)
        assert sse(Z, labels) <= 0.96 * base, (k, p)
