"""EnhancedPKClustering's sensitive equivalence classes (SEC ids) and its final safety-net merge
(private; see :mod:`locpriv.tabular.enhanced_pk`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.tabular.psensitive import group_is_p_sensitive

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
