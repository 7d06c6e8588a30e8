"""Estimator, pandas front, categorical keys, EnhancedPKClustering release, hierarchies."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular import (
    Hierarchy,
    Microaggregator,
    anonymize,
    enhanced_pk_clustering,
    is_p_sensitive,
)
from locpriv.tabular.io.encoding import group_centroids
from locpriv.tabular.psensitive.enhanced_pk import intervals


def test_mdav_is_the_function() -> None:
    from locpriv.tabular import mdav

    assert callable(mdav)
    labels = np.asarray(mdav(np.arange(9.0)[:, None], 3))
    assert sorted(np.bincount(labels).tolist()) == [3, 3, 3]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(6, 80), st.integers(2, 4), st.integers(1, 3))
def test_estimator_keeps_means_and_groups(seed: int, n: int, k: int, p: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1, 10, 100]
    S = rng.integers(0, 4, n)
    p = min(p, k)
    est = Microaggregator(k=k, p=p, method="mdav-seed" if p > 1 else "mdav")
    if n < k or len(np.unique(S)) < p:
        with pytest.raises(InfeasibleError):
            est.fit(X, S)
        return
    Xt = est.fit_transform(X, S)
    assert Xt.shape == X.shape
    np.testing.assert_allclose(Xt.mean(axis=0), X.mean(axis=0), rtol=1e-9, atol=1e-9)
    assert np.bincount(est.labels_).min() >= k
    assert est.n_groups_ == est.centroids_.shape[0] == len(np.unique(est.labels_))
    assert 0 <= est.il_ <= 100 * (1 + 1e-12)  # SSE <= SST, up to rounding
    if p > 1:
        assert min(est.p_achieved_) >= p
    assert est.report_["groups"] == est.n_groups_


def test_auto_method_keeps_lowest_sse() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 3))
    S = rng.integers(0, 6, 200)
    est = Microaggregator(k=4, p=3).fit(X, S)
    tried = est.report_["candidates_sse"]
    # the default races the greedy methods within its budget; best-p only when named
    assert set(tried) == {"k-increase", "mdav-seed", "sec-pk"}
    assert est.method_ == min(tried, key=tried.get)
    assert est.sse_ == pytest.approx(min(tried.values()))
    assert is_p_sensitive(est.labels_, S, 4, 3)
    # best-p (named) starts from its own greedy partition and lowers the default's SSE here
    named = Microaggregator(k=4, p=3, method="best-p").fit(X, S)
    assert named.sse_ <= est.sse_
    assert is_p_sensitive(named.labels_, S, 4, 3)
    # k-anonymity only: MDAV by default, the improved heuristic when named
    assert Microaggregator(k=4).fit(X).method_ == "mdav"
    assert Microaggregator(k=4, method="best").fit(X).sse_ <= Microaggregator(k=4).fit(X).sse_


@pytest.mark.parametrize(
    ("kwargs", "exc", "text"),
    [
        ({"k": 3, "p": 2, "method": "nope"}, ConfigError, "method must be one of"),
        ({"k": 3, "p": 2, "method": "mdav"}, ConfigError, "k-anonymity only"),
        ({"k": 2, "p": 3}, InfeasibleError, "p=3 is larger than k=2"),
        ({"k": 2.5}, ConfigError, "k must be an integer"),
    ],
)
def test_estimator_validates_in_fit(kwargs: dict, exc: type, text: str) -> None:  # type: ignore[type-arg]
    est = Microaggregator(**kwargs)  # no validation in __init__
    assert est.get_params()["k"] == kwargs["k"]
    X = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(exc, match=text):
        est.fit(X, np.arange(30) % 4)


def test_estimator_rejects_nan() -> None:
    X = np.ones((10, 2))
    X[3, 1] = np.nan
    with pytest.raises(DataError, match="column 1"):
        Microaggregator(k=2).fit(X)


def test_categorical_keys_median_and_mode() -> None:
    labels = np.array([0, 0, 0, 1, 1, 1, 1])
    codes = np.array([0, 2, 1, 3, 3, 0, 1], dtype=np.float64)
    assert group_centroids(codes, labels, "ordinal").tolist() == [1.0, 1.0]  # lower median
    assert group_centroids(codes, labels, "nominal").tolist() == [0.0, 3.0]
    rng = np.random.default_rng(2)
    n = 120
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "edu": pd.Categorical(
                rng.choice(["low", "mid", "high"], n), ["low", "mid", "high"], ordered=True
            ),
            "sex": rng.choice(["F", "M"], n),
            "job": rng.choice(["a", "b", "c", "d"], n),
        }
    )
    out, _ = anonymize(
        df, ["age", "edu", "sex"], ["job"], k=4, p=2, ordinal=["edu"], nominal=["sex"]
    )
    assert set(out["edu"]) <= {"low", "mid", "high"}
    assert set(out["sex"]) <= {"F", "M"}
    assert out.groupby(["age", "edu", "sex"], observed=True).size().min() >= 4
    assert out.groupby(["age", "edu", "sex"], observed=True)["job"].nunique().min() >= 2
    with pytest.raises(DataError, match="'sex' is not numeric"):
        anonymize(df, ["age", "sex"], ["job"], k=4, p=2)


def test_enhanced_pk_intervals_release() -> None:
    rng = np.random.default_rng(4)
    n = 90
    df = pd.DataFrame(
        {"x": rng.normal(size=n), "y": rng.normal(size=n), "s": rng.integers(0, 5, n)}
    )
    out, rep = anonymize(df, ["x", "y"], ["s"], k=3, p=2, method="enhanced-pk", release="intervals")
    assert rep["release"] == "intervals"
    assert out["x"].str.match(r"^\[.+, .+\]$").all()
    assert out.groupby(["x", "y"]).size().min() >= 3
    labels = enhanced_pk_clustering(df[["x", "y"]].to_numpy(), df["s"].to_numpy(), 3, 2)
    lo, hi = intervals(df[["x", "y"]].to_numpy(), labels)
    assert np.all(lo[labels] <= df[["x", "y"]].to_numpy())
    assert np.all(hi[labels] >= df[["x", "y"]].to_numpy())


def test_enhanced_pk_skewed_values_and_i_value_case() -> None:
    rng = np.random.default_rng(9)
    n = 400
    X = rng.normal(size=(n, 3))
    s = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 5, n))  # one dominant value
    labels = enhanced_pk_clustering(X, s, 4, 3)
    assert is_p_sensitive(labels, s, 4, 3)


def test_extended_p_sensitive_with_hierarchy() -> None:
    # diseases: cancer subtypes under a protected "cancer" node; flu/cold are unprotected
    h = Hierarchy.from_edges(
        [
            ("any", "cancer"),
            ("any", "infection"),
            ("cancer", "lung"),
            ("cancer", "skin"),
            ("infection", "flu"),
            ("infection", "cold"),
        ],
        protected=["cancer"],
    )
    assert h.strong_ancestor("lung") == "cancer"
    assert h.strong_ancestor("flu") == "flu"
    rng = np.random.default_rng(6)
    n = 120
    df = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "d": rng.choice(["lung", "skin", "flu", "cold"], n, p=[0.4, 0.3, 0.15, 0.15]),
        }
    )
    out, _ = anonymize(df, ["x"], ["d"], k=3, p=2, method="mdav-seed", hierarchies={"d": h})
    reduced = out["d"].map(h.strong_ancestor)
    per_class = reduced.groupby(out["x"]).nunique()
    assert per_class.min() >= 2  # no class shows only cancer subtypes
    assert sorted(out["d"]) == sorted(df["d"])  # original values are released (shuffled)
    with pytest.raises(ConfigError, match="not in the hierarchy"):
        Hierarchy({"a": "b"}, protected=frozenset({"zzz"}))
    with pytest.raises(ConfigError, match="two parents"):
        Hierarchy.from_edges([("a", "c"), ("b", "c")])
    # three strong ancestors (cancer, flu, cold) => p=4 is infeasible
    with pytest.raises(InfeasibleError, match="'d' has 3 distinct values"):
        anonymize(df, ["x"], ["d"], k=4, p=4, hierarchies={"d": h})


def test_progress_reaches_one_and_is_monotone() -> None:
    rng = np.random.default_rng(8)
    X = rng.normal(size=(120, 2))
    S = (X[:, 0] > 0).astype(int)  # clustered values: k-increase has to grow k
    seen: list[float] = []
    Microaggregator(k=2, p=2, progress=seen.append).fit(X, S)
    assert seen
    assert seen[-1] == pytest.approx(1.0)
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(seen))


def test_family_folders_are_not_shadowed() -> None:
    import types

    import locpriv.tabular as tab
    import locpriv.tabular.psensitive.enhanced_pk  # noqa: F401

    assert isinstance(tab.psensitive, types.ModuleType)
    assert isinstance(tab.psensitive.enhanced_pk, types.ModuleType)
    assert tab.psensitive.enhanced_pk.enhanced_pk_clustering is enhanced_pk_clustering
