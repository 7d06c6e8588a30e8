"""``sec-pk``: locpriv's SEC-split variant of p-sensitive k-anonymous clustering, numba core.

It was written as EnhancedPKClustering (Truta, Campan & Meyer 2007) from the paper's published
outline before its text was available, and is kept under its own name because it gives a lower
SSE than the printed algorithm (:mod:`locpriv.tabular.psensitive.enhanced_pk`, method
``enhanced-pk``) and serves as a start for ``best-p``; it is not the paper's algorithm
(docs/tabular.md, docs/papers.md). Its ingredients:

* **SECs** (sensitive equivalence classes): records with the same tuple of confidential values.
* **maxClusters / iValue**: Condition 2 of Truta & Vinay
  (:func:`locpriv.tabular.psensitive.kincrease.conditions`); the partition has
  ``nc = maxClusters`` (<= n // k) clusters.
* **Harder-to-make-sensitive order**: SECs by decreasing number of still unassigned records.
* **Split**: each new cluster takes one record from each of p distinct SECs. The invariant
  ``sum_v min(r_v, C) >= C * p`` (``r_v`` unassigned records of SEC v, ``C`` clusters still to
  build) is what the remaining clusters need to be p-sensitive; a SEC with ``r_v > C - 1`` loses
  a unit of that sum whether taken or not, so all but ``slack`` of those *saturated* SECs must be
  taken, the first ones in the order (this is where iValue binds). The remaining SECs of the
  cluster are free: the records nearest to the seed from distinct SECs.
* **BestMatch** with **Div** and **Hom**: the cluster is filled to k records from the nearest
  candidates, best first by Div (number of confidential attributes whose value the record adds
  to the cluster, larger first) and Hom (increase of the cluster's IL, smaller first), never
  spending a record whose SEC the later clusters need (the invariant's slack).
* Records left after ``nc`` clusters join, by BestMatch, the cluster with the smallest Hom.
* **IL** (Definitions 9-10): ``IL(cl) = |cl| * sum_j (max_j - min_j) / range_j``.
* A final safety net merges a cluster that is too small or (with several confidential
  attributes, where p distinct SECs need not give p distinct values per attribute) not
  p-sensitive into its nearest cluster; with one confidential attribute it never fires.

Each cluster costs a seed search (a sorted shell of records around a pivot; a full pass only
when the pivot is rebuilt or SECs are forced) and one candidate pass (a block index with box
bounds when d > 2, rings of a grid when d <= 2, else a pass pruned by a partial distance); all
give exactly the plain passes' results. The kernel is
:mod:`locpriv.tabular.psensitive._kernels.sec_pk` (its grid pass
``locpriv.tabular._kernels.knn_grid._grid_pass``); SEC ids and the safety-net merge are here.
"""

from __future__ import annotations

import logging

import numpy as np
import numpy.typing as npt

from locpriv.tabular.checks import as_codes, check_matrix
from locpriv.tabular.psensitive._kernels.sec_pk import _epk_kernel
from locpriv.tabular.psensitive.kincrease import group_is_p_sensitive, require_feasible

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _sec_ids(codes: IntArray) -> tuple[IntArray, int]:
    """SEC of every record and the number of SECs: the inverse of
    ``np.unique(codes, axis=0, return_inverse=True)`` (SECs in lexicographic order of their
    tuples), from a mixed-radix key of the codes (each in 0..nv_j-1), ranked through a table
    of the keys present when it is small, else by a 1-D ``np.unique`` of the keys."""
    n, m = codes.shape
    nv = codes.max(axis=0) + 1
    total = 1
    for j in range(m):
        total *= int(nv[j])
    if total > 2**62:  # pragma: no cover - the key would overflow
        _, inv = np.unique(codes, axis=0, return_inverse=True)
        sec = np.asarray(inv, dtype=np.int64).ravel()
        return sec, int(sec.max()) + 1
    key = codes[:, 0].astype(np.int64)
    for j in range(1, m):
        key = key * int(nv[j]) + codes[:, j]
    if total <= 4 * n + 4096:
        present = np.zeros(total, dtype=np.int64)
        present[key] = 1
        rank = np.cumsum(present) - 1
        return rank[key], int(rank[-1]) + 1
    uniq, inv = np.unique(key, return_inverse=True)
    return np.asarray(inv, dtype=np.int64).ravel(), int(uniq.size)


def _merge_repair(X: FloatArray, codes: IntArray, labels: IntArray, k: int, p: int) -> IntArray:
    """Merge any group below k records or p distinct values into its nearest group."""
    lab = np.asarray(labels, dtype=np.int64)
    if (
        lab.size
        and int(lab.min()) >= 0
        and int(np.bincount(lab).min()) >= k  # labels 0..g-1, all used (k >= 1)
        and group_is_p_sensitive(lab, codes, p)
    ):
        return lab  # the kernel's usual output: the loop would return it unchanged
    return _merge_loop(X, codes, lab, k, p)


def _merge_loop(X: FloatArray, codes: IntArray, labels: IntArray, k: int, p: int) -> IntArray:
    """Renumber the groups 0..g-1, then merge the first group below k records or p distinct
    values into the group with the nearest centroid, until none is left."""
    labels = labels.copy()
    while True:
        uniq, labels = np.unique(labels, return_inverse=True)
        g = uniq.size
        if g <= 1:
            return np.asarray(labels, dtype=np.int64)
        cnt = np.bincount(labels, minlength=g)
        bad = cnt < k
        for j in range(codes.shape[1]):
            nv = int(codes[:, j].max()) + 1
            pairs = np.unique(labels * nv + codes[:, j])
            bad |= np.bincount(pairs // nv, minlength=g) < p
        if not bad.any():
            return np.asarray(labels, dtype=np.int64)
        cent = np.zeros((g, X.shape[1]))
        np.add.at(cent, labels, X)
        cent /= cnt[:, None]
        b = int(np.flatnonzero(bad)[0])
        dist = np.sum((cent - cent[b]) ** 2, axis=1)
        dist[b] = np.inf
        labels[labels == b] = int(np.argmin(dist))


def sec_pk_clustering(X: FloatArray, S: npt.ArrayLike, k: int, p: int) -> IntArray:
    """``sec-pk`` labels (0..g-1) of a p-sensitive k-anonymous partition of ``X``.

    Raises :class:`~locpriv.errors.InfeasibleError` when p > k, n < k, or Condition 1 fails,
    :class:`~locpriv.errors.DataError` when ``X`` is not a finite 2-D real array.
    """
    X = check_matrix(X)  # finite, as the block index's box bounds assume
    codes = as_codes(S, X.shape[0])
    cond = require_feasible(codes, k, p)
    sec, nsec = _sec_ids(codes)
    nc = max(1, min(cond.max_clusters, X.shape[0] // k))
    logger.debug("sec-pk: %d SECs, maxClusters=%d, iValue=%d", nsec, nc, cond.i_value)
    labels = _epk_kernel(X, np.ascontiguousarray(codes), sec, nsec, k, p, nc, True)
    return _merge_repair(X, codes, np.asarray(labels, dtype=np.int64), k, p)
