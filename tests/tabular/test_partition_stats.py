"""The numba kernels of the partitioned method's serial stages equal the numpy code they
replace bit for bit (so the release does not change), on data with ties, empty groups and
blocks of very different sizes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from locpriv.tabular.io import frame
from locpriv.tabular.microagg._kernels.partition_stats import (
    canonical,
    face_distance,
    group_means,
    group_span,
    pool_stats,
    rows_by_bucket,
)
from locpriv.tabular.microagg.improve import _canonical
from locpriv.tabular.microagg.partitioned import _face_distance, split_blocks
from locpriv.tabular.quality.metrics import group_means as metrics_group_means
from locpriv.tabular.quality.metrics import sse


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_statistics_equal_numpy_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d, g = 5000, 7, 900
    X = rng.normal(size=(n, d)) * rng.lognormal(0, 2, size=d)  # scales far apart
    X[::7] = X[0]  # ties
    labels = rng.integers(0, g, n).astype(np.int64)  # some groups empty
    face = rng.random(n)
    cen, cnt = group_means(X, labels, g)
    np.testing.assert_array_equal(cen, np_group_means(X, labels, g))
    np.testing.assert_array_equal(metrics_group_means(X, labels, g), cen)
    np.testing.assert_array_equal(cnt, np.bincount(labels, minlength=g))
    err, near = pool_stats(X, labels, cen, face, g)
    ref = np.zeros(n)
    for j in range(d):
        ref += (X[:, j] - cen[labels, j]) ** 2
    np.testing.assert_array_equal(err, np.bincount(labels, weights=ref, minlength=g))
    ref_near = np.full(g, np.inf)
    np.minimum.at(ref_near, labels, face)
    np.testing.assert_array_equal(near, ref_near)
    np.testing.assert_array_equal(canonical(labels, g), _canonical(labels))


def np_group_means(X: np.ndarray, labels: np.ndarray, g: int) -> np.ndarray:
    """The numpy code the kernel replaced: one bincount per column."""
    cnt = np.maximum(np.bincount(labels, minlength=g), 1)
    out = np.empty((g, X.shape[1]))
    for j in range(X.shape[1]):
        out[:, j] = np.bincount(labels, weights=X[:, j], minlength=g) / cnt
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_sse_equals_the_numpy_sum(seed: int) -> None:
    """One pass of the kernel gives the numpy SSE up to rounding (another summation order)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3000, 6)) * rng.lognormal(0, 2, size=6)
    labels = rng.integers(0, 400, 3000).astype(np.int64)
    diff = X - np_group_means(X, labels, 400)[labels]
    assert sse(X, labels) == pytest.approx(float(np.einsum("ij,ij->", diff, diff)), rel=1e-12)
    with pytest.raises(ValueError, match=">= 0"):
        sse(X, labels - 1)


def _face_reference(X: np.ndarray, blocks: list[np.ndarray]) -> np.ndarray:
    """The numpy loop the kernel replaced."""
    lo_all, hi_all = X.min(axis=0), X.max(axis=0)
    out = np.empty(X.shape[0])
    for rows in blocks:
        W = X[rows]
        lo, hi = W.min(axis=0), W.max(axis=0)
        gap = np.full(rows.size, np.inf)
        for j in range(X.shape[1]):
            if lo[j] > lo_all[j]:
                gap = np.minimum(gap, W[:, j] - lo[j])
            if hi[j] < hi_all[j]:
                gap = np.minimum(gap, hi[j] - W[:, j])
        out[rows] = gap
    return out


@pytest.mark.parametrize("block_size", [16, 300, 5000])
def test_face_distances_equal_the_numpy_loop(block_size: int) -> None:
    rng = np.random.default_rng(block_size)
    X = np.round(rng.random((4000, 5)) * 50)  # many ties on the cut values
    blocks = split_blocks(X, block_size)
    got = _face_distance(X, blocks)
    np.testing.assert_array_equal(got, _face_reference(X, blocks))
    rows = np.concatenate(blocks).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum([b.size for b in blocks])]).astype(np.int64)
    one = face_distance(X, rows, starts, X.min(axis=0), X.max(axis=0))
    np.testing.assert_array_equal(one, got)
    if len(blocks) == 1:
        assert np.isinf(got).all()  # one block: no cut face
    else:
        assert np.isfinite(got).all() and (got >= 0).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_group_span_equals_ufunc_at(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d, g = 4000, 5, 700
    X = rng.normal(size=(n, d))
    X[::5] = X[1]  # ties
    labels = rng.integers(0, g, n).astype(np.int64)  # some groups empty
    lo, hi, cnt = group_span(X, labels, g)
    ref_lo, ref_hi = np.full((g, d), np.inf), np.full((g, d), -np.inf)
    np.minimum.at(ref_lo, labels, X)
    np.maximum.at(ref_hi, labels, X)
    np.testing.assert_array_equal(lo, ref_lo)
    np.testing.assert_array_equal(hi, ref_hi)
    np.testing.assert_array_equal(cnt, np.bincount(labels, minlength=g))


def _classes_reference(released: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """The np.unique(axis=0) code the hashed classes replaced."""
    codes = [pd.factorize(released[c], use_na_sentinel=False)[0] for c in cols]
    keys = np.column_stack(codes).astype(np.int64)
    _, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size, dtype=np.int64)
    return rank[inv.ravel()]


@pytest.mark.parametrize(("n", "levels"), [(1, 1), (60, 2), (2000, 3), (3000, 40)])
@pytest.mark.parametrize("collide", [False, True])
def test_release_classes_equal_the_exact_classes(
    n: int, levels: int, collide: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Equal values share a class whatever the dtype (-0.0 and 0.0, NaN, None, strings,
    categories, integers); a hash multiplier of 0 (every row collides) takes the exact path."""
    if collide:
        monkeypatch.setattr(frame, "_HASH_MIX", np.uint64(0))
    rng = np.random.default_rng(n + levels)
    df = pd.DataFrame(rng.integers(0, levels, (n, 2)).astype(float), columns=["f", "i"])
    df.loc[rng.random(n) < 0.2, "f"] = -0.0
    df.loc[rng.random(n) < 0.2, "f"] = np.nan
    df["i"] = df["i"].astype(np.int64)
    df["o"] = np.array(["a", "b", None], dtype=object)[rng.integers(0, 3, n)]
    df["c"] = pd.Categorical(np.array(["u", "v"])[rng.integers(0, 2, n)])
    df["s"] = [f"[{a}, {a + 1}]" for a in rng.integers(0, levels, n)]
    cols = list(df.columns)
    np.testing.assert_array_equal(frame.release_classes(df, cols), _classes_reference(df, cols))
    np.testing.assert_array_equal(frame._classes_exact(df, cols), _classes_reference(df, cols))


@pytest.mark.parametrize("count", [1, 3, 50])
def test_rows_by_bucket_equal_a_stable_argsort(count: int) -> None:
    rng = np.random.default_rng(count)
    bucket = rng.integers(-1, count, 5000).astype(np.int64)  # -1: in no pool
    rows, starts = rows_by_bucket(bucket, count)
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(-1, count + 1))
    for b in range(count):
        ref = np.sort(order[bounds[b + 1] : bounds[b + 2]])
        np.testing.assert_array_equal(rows[starts[b] : starts[b + 1]], ref)
    assert starts[count] == int((bucket >= 0).sum())
