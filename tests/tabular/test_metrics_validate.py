"""Metrics and validators against independent implementations (pycanon, pandas groupby)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity

from locpriv.tabular import (
    achieved_p,
    anonymize,
    avg_class_size,
    discernibility,
    homogeneous_groups,
    il_percent,
    is_k_anonymous,
    size_histogram,
    sse,
    sst,
    truta_il,
)
from locpriv.tabular.checks import as_codes
from locpriv.tabular.psensitive.kincrease import group_is_p_sensitive
from locpriv.tabular.quality.metrics import truta_il_normalised
from locpriv.tabular.quality.validate import (
    distinct_counts,
    distinct_per_group,
    table_classes,
    table_k,
    table_p,
)


def test_metrics_on_a_hand_partition() -> None:
    X = np.array([[0.0, 0.0], [2.0, 0.0], [10.0, 4.0], [12.0, 4.0], [14.0, 4.0]])
    labels = np.array([0, 0, 1, 1, 1])
    # group 0 mean (1, 0): SSE 1 + 1 ; group 1 mean (12, 4): 4 + 0 + 4
    assert sse(X, labels) == pytest.approx(10.0)
    mu = X.mean(axis=0)
    assert sst(X) == pytest.approx(float(((X - mu) ** 2).sum()))
    assert il_percent(X, labels) == pytest.approx(100 * 10.0 / sst(X))
    # Truta IL: ranges 14 and 4; group 0 spans (2, 0), group 1 spans (4, 0)
    assert truta_il(X, labels) == pytest.approx(2 * (2 / 14) + 3 * (4 / 14))
    assert truta_il_normalised(X, labels) == pytest.approx(truta_il(X, labels) / 10)
    assert discernibility(labels) == 4 + 9
    assert avg_class_size(labels, 2) == pytest.approx(5 / (2 * 2))
    assert size_histogram(labels) == {2: 1, 3: 1}
    assert is_k_anonymous(labels, 2)
    assert not is_k_anonymous(labels, 3)


def test_achieved_p_and_homogeneity() -> None:
    labels = np.array([0, 0, 0, 1, 1, 1])
    S = np.array([[0, 5], [1, 5], [2, 5], [3, 1], [3, 2], [3, 2]])
    assert achieved_p(labels, S) == [1, 1]
    assert homogeneous_groups(labels, S) == [(0, 1), (1, 0)]


def _distinct_by_pairs(labels: np.ndarray, s: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
    """The former count: a sort of the (group, value) pairs."""
    nv = int(s.max()) + 1
    pairs = np.unique(labels * nv + s)
    return np.bincount(pairs // nv, minlength=int(labels.max()) + 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 80), st.sampled_from([1, 3, 9, 10**12]))
def test_distinct_counts_equal_the_pair_sort(seed: int, n: int, nv: int) -> None:
    """The counting kernel (achieved p, the p-sensitivity checks) against a sort of the
    (group, value) pairs and pandas' nunique: empty groups, one group, sparse huge codes."""
    rng = np.random.default_rng(seed)
    g = int(rng.integers(1, n + 1))
    labels = rng.integers(0, g, n)
    S = np.column_stack([rng.integers(0, nv, n), rng.integers(0, 2, n)])
    counts = distinct_counts(labels, S)
    for j in range(2):
        assert np.array_equal(counts[:, j], _distinct_by_pairs(labels, S[:, j]))
        assert np.array_equal(distinct_per_group(labels, S[:, j]), counts[:, j])
    nunique = pd.DataFrame(S).groupby(labels).nunique()
    assert achieved_p(labels, S) == [int(v) for v in nunique.min()]
    for p in (1, 2, 3):
        assert group_is_p_sensitive(labels, S, p) == bool(counts.min() >= p)
    assert (
        as_codes(S, n).tolist()
        == pd.DataFrame(S).rank(method="dense").sub(1).astype(int).to_numpy().tolist()
    )
    with pytest.raises(ValueError, match=">= 0"):
        distinct_counts(labels, -1 - S)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(6, 60), st.integers(1, 4))
def test_sse_matches_pandas_groupby(seed: int, n: int, g: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    labels = np.concatenate([np.arange(g), rng.integers(0, g, n - g)])
    df = pd.DataFrame(X).assign(lab=labels)
    dev = df.groupby("lab").transform(lambda c: c - c.mean())
    assert sse(X, labels) == pytest.approx(float((dev.to_numpy() ** 2).sum()))
    sizes = df.groupby("lab").size()
    assert discernibility(labels) == int((sizes**2).sum())


def _released(method: str, k: int, p: int, seed: int) -> tuple[pd.DataFrame, dict, pd.DataFrame]:  # type: ignore[type-arg]
    rng = np.random.default_rng(seed)
    n = 150
    df = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.integers(0, 100, n),
            "c": rng.exponential(size=n),
            "dis": rng.choice(["flu", "hiv", "cold", "none"], n, p=[0.55, 0.1, 0.2, 0.15]),
            "note": [f"row{i}" for i in range(n)],
        }
    )
    with pytest.warns(UserWarning, match="'note' .* is near-unique"):
        out, report = anonymize(df, ["a", "b", "c"], ["dis"], k=k, p=p, method=method, seed=seed)
    return df, report, out


@pytest.mark.parametrize(
    ("method", "k", "p"),
    [
        ("mdav-seed", 3, 2),
        ("random-seed", 4, 3),
        ("enhanced-pk", 5, 3),
        ("sec-pk", 4, 2),
        ("k-increase", 3, 2),
        ("mdav", 4, 1),
        ("best", 3, 1),
    ],
)
def test_released_table_checked_by_pycanon_and_pandas(method: str, k: int, p: int) -> None:
    df, report, out = _released(method, k, p, seed=11)
    qi = ["a", "b", "c"]
    k_pyc = anonymity.k_anonymity(out, qi)
    l_pyc = anonymity.l_diversity(out, qi, ["dis"])
    assert k_pyc >= k
    assert l_pyc >= p
    # pandas groupby, independently of our validators
    assert out.groupby(qi).size().min() == k_pyc == table_k(out, qi)
    assert out.groupby(qi)["dis"].nunique().min() == l_pyc == table_p(out, qi, ["dis"])["dis"]
    # the report is measured on the released table: its classes, not the partition's groups
    assert report["min_group_size"] == k_pyc
    assert report["p_achieved"]["dis"] == l_pyc
    assert report["groups"] == len(np.unique(table_classes(out, qi)))
    assert report["groups"] <= report["partition_groups"]
    # unnamed columns pass through with their rows (the rows are shuffled)
    assert out["note"].tolist() != df["note"].tolist()
    back = out.set_index("note").loc[df["note"]]
    assert back["dis"].tolist() == df["dis"].tolist()
    # centroid replacement keeps the means of float columns; integer columns are rounded
    # group means (within half a unit), released as integers
    for c in ("a", "c"):
        assert out[c].mean() == pytest.approx(df[c].mean(), rel=1e-9, abs=1e-9)
    assert out["b"].dtype == df["b"].dtype
    assert abs(out["b"].mean() - df["b"].mean()) <= 0.5
