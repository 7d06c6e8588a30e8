"""EnhancedPKClustering (Truta, Campan & Meyer 2007) for p-sensitive k-anonymity, as printed.

The algorithm of the paper's Section 3.2 (text in ``shared/seeds``, pseudocode transcribed line
by line in :mod:`locpriv.tabular.traces.enhanced_pk`, which gives the same labels as this module's
numba kernel):

1. order the confidential attributes, hardest to make sensitive first (Definition 13: smallest
   Condition 2 bound alone), and compute ``maxClusters`` (Condition 2) and ``iValue``;
2. **Split**: the tuples of the hardest attribute's ``iValue`` least frequent p-sensitive
   equivalence classes go round robin into ``maxClusters`` clusters (BestMatch: largest Div, then
   smallest IL increase) until each holds ``iValue`` of them;
3. each of the other ``p - iValue`` classes, most frequent last, gives every cluster one tuple
   (best pair first), so every cluster has p values of the hardest attribute;
4. the clusters, most diverse first, take free tuples by BestMatch until p-sensitive for every
   confidential attribute; when no tuple is free, the least diverse cluster is dissolved;
5. the clusters, largest first: those of at least k stay, as many of the others as the free
   tuples can fill are filled to k by least IL, the rest dissolved; the free tuples left join the
   cluster whose IL grows least.

IL is Definition 9 (numerical attributes by their range, categorical by the level of the lowest
common ancestor in their hierarchy); Div and Hom are Definitions 11-12 with equal weights. The
readings of what the printed text leaves open are listed in :mod:`.enhanced_pk_trace`. The
algorithm maximises the number of clusters (AVG, DM), not SSE; ``sec-pk``
(:mod:`locpriv.tabular.psensitive.sec_pk`) is locpriv's earlier, SSE-oriented variant.
"""

from __future__ import annotations

import logging

import numpy as np
import numpy.typing as npt

from locpriv.tabular.checks import as_codes, check_matrix
from locpriv.tabular.generalisation.hierarchy import KeyTable
from locpriv.tabular.psensitive._kernels.enhanced_pk import _epk_kernel
from locpriv.tabular.psensitive.kincrease import require_feasible

__all__ = ["enhanced_pk_clustering", "enhanced_pk_keys", "intervals", "plan"]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def plan(codes: IntArray, p: int) -> tuple[IntArray, int, int, IntArray, IntArray]:
    """Step 1 on confidential codes (n × r): ``(attribute order, maxClusters, iValue, SEC rows,
    SEC starts)``; rows of ``SEC^1_{j+1}`` (hardest attribute, j-th most frequent value; equal
    frequencies: lower code first) are ``rows[starts[j]:starts[j+1]]``, ascending."""
    n, r = codes.shape
    cfs = np.zeros((r, p), dtype=np.int64)  # cf_0 .. cf_{p-1} of each attribute
    ranks = []
    for a in range(r):
        cnt = np.bincount(codes[:, a])
        vals = np.flatnonzero(cnt)
        by_freq = vals[np.lexsort((vals, -cnt[vals]))]
        cfs[a, 1:] = np.cumsum(cnt[by_freq])[: p - 1]
        rank = np.empty(cnt.size, dtype=np.int64)
        rank[by_freq] = np.arange(by_freq.size)
        ranks.append((rank, cnt[by_freq]))
    i = np.arange(1, p + 1)
    alone = np.array([int(np.min((n - cfs[a, p - i]) // i)) for a in range(r)])
    order = np.argsort(alone, kind="stable")
    cf = cfs.max(axis=0)
    bounds = (n - cf[p - i]) // i
    max_clusters = int(bounds.min())
    i_value = int(i[np.flatnonzero(bounds == max_clusters)[0]])
    rank, freq = ranks[int(order[0])]
    key = rank[codes[:, order[0]]]
    rows = np.argsort(key, kind="stable").astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(freq))).astype(np.int64)
    return order.astype(np.int64), max_clusters, i_value, rows, starts


def enhanced_pk_keys(keys: KeyTable, S: npt.ArrayLike, k: int, p: int) -> IntArray:
    """EnhancedPKClustering labels (0..v-1) of the records of ``keys`` (numerical and
    categorical key attributes, IL by Definition 9); ``S``: n confidential values or n × r.

    Raises :class:`~locpriv.errors.InfeasibleError` when p > k, n < k or Condition 1 fails.
    """
    n = keys.n
    codes = as_codes(S, n)
    require_feasible(codes, k, p)
    order, max_clusters, i_value, rows, starts = plan(codes, p)
    logger.debug("enhanced-pk: maxClusters=%d, iValue=%d", max_clusters, i_value)
    hier = keys.hierarchies
    width = max((len(h.labels[0]) for h in hier), default=1)
    lca = np.zeros((len(hier), width, width), dtype=np.int64)
    for j, h in enumerate(hier):
        m = len(h.labels[0])
        lca[j, :m, :m] = h.lca_levels()
    out: IntArray = _epk_kernel(
        np.ascontiguousarray(keys.numeric, dtype=np.float64),
        1.0 / keys.numeric_spans(),
        np.ascontiguousarray(keys.leaves, dtype=np.int64).reshape(n, len(hier)),
        lca,
        np.array([1.0 / float(h.height) for h in hier]),
        np.ascontiguousarray(codes[:, order]),
        rows,
        starts,
        max_clusters,
        i_value,
        k,
        p,
    )
    return out


def enhanced_pk_clustering(X: FloatArray, S: npt.ArrayLike, k: int, p: int) -> IntArray:
    """EnhancedPKClustering labels (0..v-1) of a p-sensitive k-anonymous partition of the
    numerical key attributes ``X`` (n × d; IL by their ranges).

    Raises :class:`~locpriv.errors.InfeasibleError` when p > k, n < k, or Condition 1 fails,
    :class:`~locpriv.errors.DataError` when ``X`` is not a finite 2-D real array.
    """
    X = check_matrix(X)
    keys = KeyTable(numeric=X, leaves=np.zeros((X.shape[0], 0), dtype=np.int64), hierarchies=())
    return enhanced_pk_keys(keys, S, k, p)


def intervals(X: FloatArray, labels: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per-group lower and upper bounds (g × d): the generalised release of the paper."""
    X = np.asarray(X, dtype=np.float64)
    g = int(labels.max()) + 1
    lo = np.full((g, X.shape[1]), np.inf)
    hi = np.full((g, X.shape[1]), -np.inf)
    np.minimum.at(lo, labels, X)
    np.maximum.at(hi, labels, X)
    return lo, hi
