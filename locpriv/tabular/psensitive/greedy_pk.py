"""GreedyPKClustering (Campan, Truta, Miller & Sinca 2007) for p-sensitive k-anonymity.

Truta, Campan & Meyer (2007, in ``shared/seeds``) use it as their baseline and describe it as a
greedy clustering algorithm guided by the same measures as EnhancedPKClustering: the diversity
``Div`` of a tuple for a cluster (Definition 11), the homogeneity ``Hom`` (Definition 12) and
the information loss ``IL`` of a generalised cluster (Definitions 9-10). The original paper's
text could not be found (searched: stored pages, code and issues), so the clusters are grown the
way greedy k-member clustering (Byun et al. 2006, which that work extends) grows them:

1. the first seed is a random record; each later seed is the unassigned record furthest from
   the previous seed (distance: the normalised generalisation cost of the pair);
2. the cluster takes, one at a time, the unassigned record with the largest ``Div`` and, among
   those, the smallest increase of ``IL`` (``BestMatch``), until it has k records and
   ``Hom = 0`` (p distinct values of every confidential attribute);
3. this repeats while the unassigned records number at least k and hold p distinct values of
   every confidential attribute; each record left then joins the cluster whose ``IL`` grows
   least.

Every cluster therefore has at least k records and is p-sensitive. Ties: lowest row.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.errors import InfeasibleError
from locpriv.tabular.checks import as_codes
from locpriv.tabular.generalisation.hierarchy import KeyTable

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class _Costs:
    """Vectorised generalisation costs against a set of candidate rows."""

    def __init__(self, keys: KeyTable) -> None:
        self.num = np.asarray(keys.numeric, dtype=np.float64)
        self.inv = 1.0 / keys.numeric_spans()
        self.leaves = np.asarray(keys.leaves, dtype=np.int64)
        self.lca = [h.lca_levels() for h in keys.hierarchies]
        self.height = [float(h.height) for h in keys.hierarchies]

    def pair(self, a: int, rows: IntArray) -> FloatArray:
        """Normalised cost of generalising record ``a`` with each of ``rows`` (seed distance)."""
        out: FloatArray = (np.abs(self.num[rows] - self.num[a]) * self.inv).sum(axis=1)
        for j, lca in enumerate(self.lca):
            out = out + lca[self.leaves[a, j], self.leaves[rows, j]] / self.height[j]
        return out

    def grown(
        self, lo: FloatArray, hi: FloatArray, lev: IntArray, rep: int, rows: IntArray
    ) -> FloatArray:
        """Per-record cost (the bracket of Definition 9) of a cluster with bounds ``lo``/``hi``,
        LCA levels ``lev`` and a member ``rep``, after adding each of ``rows``."""
        x = self.num[rows]
        out: FloatArray = ((np.maximum(hi, x) - np.minimum(lo, x)) * self.inv).sum(axis=1)
        for j, lca in enumerate(self.lca):
            new = np.maximum(lev[j], lca[self.leaves[rep, j], self.leaves[rows, j]])
            out = out + new / self.height[j]
        return out


def greedy_pk_clustering(
    keys: KeyTable, S: npt.ArrayLike, k: int, p: int, *, seed: int = 0
) -> IntArray:
    """GreedyPKClustering labels (0..g-1, creation order) of a p-sensitive k-anonymous partition.

    ``keys``: the key attributes (numerical and categorical with hierarchies); ``S``: n
    confidential values, or n × r. ``seed`` picks the first seed record. Raises
    ``InfeasibleError`` when p > k, n < k or a confidential attribute has fewer than p values.
    """
    n = keys.n
    codes = as_codes(S, n)
    if p > k or n < k or any(len(np.unique(c)) < p for c in codes.T):
        raise InfeasibleError(f"p-sensitive k-anonymity infeasible (n={n}, k={k}, p={p})")
    r = codes.shape[1]
    nv = codes.max(axis=0) + 1
    cost = _Costs(keys)
    alive = np.ones(n, dtype=bool)
    labels = np.full(n, -1, dtype=np.int64)
    bounds: list[tuple[FloatArray, FloatArray, IntArray, int, int]] = []  # lo, hi, lev, rep, size
    prev = int(np.random.default_rng(seed).integers(n))
    first = True

    def feasible() -> bool:
        left = codes[alive]
        return len(left) >= k and all(len(np.unique(c)) >= p for c in left.T)

    while feasible():
        rows = np.flatnonzero(alive)
        if first:
            s0, first = prev, False
        else:
            d = cost.pair(prev, rows)
            s0 = int(rows[np.argmax(d)])
        prev = s0
        alive[s0] = False
        lo, hi = cost.num[s0].copy(), cost.num[s0].copy()
        lev = np.zeros(len(cost.lca), dtype=np.int64)
        seen = [np.zeros(v, dtype=bool) for v in nv]
        for j in range(r):
            seen[j][codes[s0, j]] = True
        size = 1
        while True:
            y = np.array([min(int(s.sum()), p) for s in seen])
            if size >= k and (y >= p).all():
                break
            rows = np.flatnonzero(alive)
            div = np.zeros(len(rows))
            for j in range(r):
                if y[j] < p:
                    div += (~seen[j][codes[rows, j]]) * (p - y[j]) / r
            cand = rows[div == div.max()]
            grow = cost.grown(lo, hi, lev, s0, cand)
            t = int(cand[np.argmin(grow)])
            alive[t] = False
            lo, hi = np.minimum(lo, cost.num[t]), np.maximum(hi, cost.num[t])
            for j, lca in enumerate(cost.lca):
                lev[j] = max(lev[j], lca[cost.leaves[s0, j], cost.leaves[t, j]])
            for j in range(r):
                seen[j][codes[t, j]] = True
            labels[t] = len(bounds)
            size += 1
        labels[s0] = len(bounds)
        bounds.append((lo, hi, lev, s0, size))
    return _place_leftovers(cost, labels, alive, bounds)


def _place_leftovers(
    cost: _Costs,
    labels: IntArray,
    alive: npt.NDArray[np.bool_],
    bounds: list[tuple[FloatArray, FloatArray, IntArray, int, int]],
) -> IntArray:
    """Each unassigned record, in row order, joins the cluster whose IL grows least."""
    lo = np.stack([b[0] for b in bounds])
    hi = np.stack([b[1] for b in bounds])
    lev = np.stack([b[2] for b in bounds])
    rep = np.array([b[3] for b in bounds])
    size = np.array([b[4] for b in bounds], dtype=np.float64)

    def bracket(lo_: FloatArray, hi_: FloatArray, lev_: IntArray) -> FloatArray:
        out: FloatArray = ((hi_ - lo_) * cost.inv).sum(axis=1)
        for j in range(len(cost.lca)):
            out = out + lev_[:, j] / cost.height[j]
        return out

    cur = bracket(lo, hi, lev)
    for t in np.flatnonzero(alive):
        x = cost.num[t]
        lo2, hi2 = np.minimum(lo, x), np.maximum(hi, x)
        lev2 = lev.copy()
        for j, lca in enumerate(cost.lca):
            lev2[:, j] = np.maximum(lev[:, j], lca[cost.leaves[rep, j], cost.leaves[t, j]])
        new = bracket(lo2, hi2, lev2)
        g = int(np.argmin((size + 1) * new - size * cur))
        lo[g], hi[g], lev[g], cur[g] = lo2[g], hi2[g], lev2[g], new[g]
        size[g] += 1
        labels[t] = g
    return labels
