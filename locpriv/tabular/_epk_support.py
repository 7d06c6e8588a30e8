"""EnhancedPKClustering's sensitive equivalence classes (SEC ids) and its final safety-net merge
(private; see :mod:`locpriv.tabular.enhanced_pk`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

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
    g = int(labels.max()) + 1 if labels.size else 0
    if g > 0 and int(labels.min()) >= 0:
        # the kernel's labels are normally 0..g-1, all used, every group fine: nothing to do
        # (the loop below would return them unchanged on its first round)
        cnt = np.bincount(labels, minlength=g)
        ok = bool((cnt >= k).all())
        for j in range(codes.shape[1]):
            if not ok:
                break
            nv = int(codes[:, j].max()) + 1
            seen = np.zeros(g * nv, dtype=np.bool_)
            seen[labels * nv + codes[:, j]] = True
            ok = bool((seen.reshape(g, nv).sum(axis=1) >= p).all())
        if ok:
            return np.asarray(labels, dtype=np.int64)
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
