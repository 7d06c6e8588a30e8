"""The numba kernels of the partitioned method's serial stages equal the numpy code they
replace bit for bit (so the release does not change), on data with ties, empty groups and
blocks of very different sizes."""

from __future__ import annotations

import numpy as np
import pytest

from locpriv.tabular.microagg._kernels.partition_stats import (
    canonical,
    face_distance,
    group_means,
    pool_stats,
)
from locpriv.tabular.microagg.improve import _canonical
from locpriv.tabular.microagg.partitioned import _face_distance, split_blocks
from locpriv.tabular.quality.metrics import group_means as np_group_means


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
