"""Truta, Campan & Meyer (2007), EnhancedPKClustering transcribed line by line (the reference).

:func:`enhanced_pk_trace` follows the printed pseudocode (Section 3.2, with Split and BestMatch)
in plain Python: every Div, Hom and IL is recomputed from the member lists, so it is slow
(``O(n^3)`` and worse) but checkable against the paper. The fast kernel behind
:func:`locpriv.tabular.enhanced_pk_clustering` must give the same labels (tests compare them).

Measures (Definitions 9-12): ``IL(cl) = |cl| * (sum_numeric span(cl) / span(IM) +
sum_categorical level(LCA(cl)) / height)``, the divisions as products with the reciprocals (as
the kernel computes them, so both round alike); ``Div(t, cl) = sum_i (y'_i - y_i) (p - y_i)
w_i`` and ``Hom(cl) = sum_i (p - y_i) w_i`` with ``y_i`` the distinct values of ``S_i`` in the
cluster, capped at p, and equal weights ``w_i = 1/r`` (the paper's experiments); Div and Hom are
compared multiplied by ``r`` (integers, the same order).

Where the printed text is silent or inconsistent, this reading (docs/tabular.md):

* Orders. "Reorder ... such that ``x_i >= x_j``, ``i > j``" is read as *first is greatest*
  (hardest attribute, most diverse cluster, largest cluster first): the next lines scan from
  index 1 (``pSEC^1`` is the hardest attribute's; ``h = 1; while Hom(cl_h) == 0``; ``u = 1;
  while |cl_u| >= k``). All reorders are stable.
* Values of equal frequency: the lower code (sorted value) first.
* Split: "``if |cl_i| < iValue``" after ``i > |S|`` reads the last cluster (after a full round
  every cluster has the same size).
* BestMatch returns "any" best pair: here the first cluster in S's order, then the lowest row.
  An empty ``pSEC^1_j`` ends its round (the remaining clusters get no tuple of it: Condition 2
  does not guarantee ``|SEC^1_j| >= maxClusters`` for ``j <= p - iValue``).
* The k step: the loop ``u = 1; while |cl_u| >= k`` stops at the first cluster *below* k, but
  its comment ("``cl_i`` with ``i > u`` are not k-anonymous") and the bound on ``v`` need ``u``
  = the number of clusters with at least k tuples; with the literal ``u`` the clusters kept can
  need more tuples than ``T`` holds. ``u`` is that number; ``totalClusters`` is ``v``.
* Loops over ``h`` and ``u`` stop at the last cluster; ``for every t in T`` is in row order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from locpriv.tabular.checks import as_codes
from locpriv.tabular.generalisation.hierarchy import KeyTable
from locpriv.tabular.psensitive.kincrease import require_feasible

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class EnhancedPKTrace:
    """Result of :func:`enhanced_pk_trace`."""

    labels: IntArray
    """Cluster of each record, ``0..v-1`` in the final order of S (largest first)."""
    max_clusters: int
    """Condition 2's bound (without ``n // k``): the clusters Split starts with."""
    i_value: int
    attribute_order: tuple[int, ...]
    """Confidential attributes, hardest to make sensitive first (Definition 13)."""
    dissolved_for_p: int
    """Clusters whose tuples were reused to make the others p-sensitive (step 3)."""
    dissolved_for_k: int
    """Clusters dissolved to make the others k-anonymous (step 4, ``aux - v``)."""


class _Measures:
    """IL, Div and Hom of clusters given as lists of rows."""

    def __init__(self, keys: KeyTable, codes: IntArray, p: int) -> None:
        self.num = np.asarray(keys.numeric, dtype=np.float64)
        self.inv = 1.0 / keys.numeric_spans()  # 0 for a constant attribute
        self.leaves = np.asarray(keys.leaves, dtype=np.int64)
        self.anc = [h.ancestors() for h in keys.hierarchies]
        self.invh = [1.0 / float(h.height) for h in keys.hierarchies]
        self.codes = codes
        self.p = p

    def il(self, rows: list[int]) -> float:
        """Definition 9; 0 for an empty cluster."""
        if not rows:
            return 0.0
        bracket = 0.0
        for j in range(self.num.shape[1]):
            col = [self.num[r, j] for r in rows]
            bracket = bracket + (max(col) - min(col)) * self.inv[j]
        for j, anc in enumerate(self.anc):
            level = 0  # the lowest level where every member has the same ancestor
            while len({int(anc[level, self.leaves[r, j]]) for r in rows}) > 1:
                level += 1
            bracket = bracket + level * self.invh[j]
        return len(rows) * bracket

    def _y(self, rows: list[int], a: int) -> int:
        return min(len({int(self.codes[r, a]) for r in rows}), self.p)

    def div(self, t: int, rows: list[int]) -> int:
        """Definition 11 times r."""
        total = 0
        for a in range(self.codes.shape[1]):
            y, y2 = self._y(rows, a), self._y([*rows, t], a)
            total += (y2 - y) * (self.p - y)
        return total

    def hom(self, rows: list[int]) -> int:
        """Definition 12 times r."""
        return sum(self.p - self._y(rows, a) for a in range(self.codes.shape[1]))


def _best_match(
    m: _Measures, cands: list[int], clusters: list[list[int]], which: list[int]
) -> tuple[int, int]:
    """BestMatch(cands, {clusters[c] for c in which}): the pair of largest Div, then smallest
    IL increase; ties: first cluster of ``which``, then lowest row."""
    best: tuple[int, float] | None = None
    pair = (-1, -1)
    for c in which:
        cl = clusters[c]
        for t in sorted(cands):
            key = (-m.div(t, cl), m.il([*cl, t]) - m.il(cl))
            if best is None or key < best:
                best, pair = key, (t, c)
    return pair


def _secs(col: IntArray) -> list[list[int]]:
    """SEC_1, SEC_2, ... of one attribute: rows by value, most frequent value first."""
    values = sorted({int(v) for v in col})
    rows = {v: [i for i in range(len(col)) if int(col[i]) == v] for v in values}
    return sorted((rows[v] for v in values), key=len, reverse=True)  # stable: ties by value


def _cf(col: IntArray, p: int) -> list[int]:
    """cf_0 = 0, cf_1, ..., cf_{p-1} of one attribute."""
    sizes = [len(s) for s in _secs(col)]
    return [sum(sizes[:i]) for i in range(p)]


def enhanced_pk_trace(keys: KeyTable, S: npt.ArrayLike, k: int, p: int) -> EnhancedPKTrace:
    """EnhancedPKClustering of the records of ``keys`` with confidential attributes ``S``.

    Raises :class:`~locpriv.errors.InfeasibleError` when p > k, n < k or Condition 1 fails.
    """
    n = keys.n
    codes0 = as_codes(S, n)
    require_feasible(codes0, k, p)
    r = codes0.shape[1]

    # Reorder S_1, ..., S_r: the hardest to make sensitive first (Definition 13)
    def max_clusters_of(cf: list[int]) -> int:
        return min((n - cf[p - i]) // i for i in range(1, p + 1))

    order = sorted(range(r), key=lambda a: max_clusters_of(_cf(codes0[:, a], p)))
    codes = codes0[:, order]
    m = _Measures(keys, codes, p)
    cf = [max(_cf(codes[:, a], p)[i] for a in range(r)) for i in range(p)]  # cf_i = max_j cf_i^j
    max_clusters = max_clusters_of(cf)
    i_value = min(i for i in range(1, p + 1) if (n - cf[p - i]) // i == max_clusters)
    sec = _secs(codes[:, 0])  # SEC^1_1 .. SEC^1_{s_1}

    clusters: list[list[int]] = [[] for _ in range(max_clusters)]
    assigned = [False] * n

    # Split(U, S, E): U = SEC^1_{p-iValue+1} .. SEC^1_{s_1}, round robin from the rarest value
    i = 0
    full = False
    for j in range(len(sec), p - i_value, -1):
        aux_sec = list(sec[j - 1])
        while aux_sec and not full:
            t, _ = _best_match(m, aux_sec, clusters, [i])
            aux_sec.remove(t)
            clusters[i].append(t)
            assigned[t] = True
            i += 1
            if i == len(clusters):
                if len(clusters[-1]) < i_value:
                    i = 0
                else:
                    full = True  # each cluster has iValue tuples; E = the rest of U
        if full:
            break

    # for j = p - iValue down to 1: one tuple of pSEC^1_j (= SEC^1_j) for every cluster
    for j in range(p - i_value, 0, -1):
        aux_sec = list(sec[j - 1])
        aux_s = list(range(len(clusters)))
        while aux_s and aux_sec:
            t, c = _best_match(m, aux_sec, clusters, aux_s)
            clusters[c].append(t)
            assigned[t] = True
            aux_sec.remove(t)
            aux_s.remove(c)

    # T: the tuples not assigned yet; make every cluster p-sensitive
    T = [t for t in range(n) if not assigned[t]]
    clusters.sort(key=m.hom)  # most diverse first
    h = 0
    while h < len(clusters) and m.hom(clusters[h]) == 0:
        h += 1
    aux = len(clusters)
    dissolved_p = 0
    while h < aux:
        while h < aux and T:
            t, _ = _best_match(m, T, clusters, [h])
            clusters[h].append(t)
            T.remove(t)
            if m.hom(clusters[h]) == 0:
                h += 1
        if not T and h < aux:
            T = clusters[aux - 1]  # redistribute the last cluster
            clusters[aux - 1] = []
            aux -= 1
            dissolved_p += 1

    # k-anonymity: largest first; keep the u clusters of >= k and as many others as T can fill
    live = sorted(clusters[:aux], key=len, reverse=True)
    u = 0
    while u < aux and len(live[u]) >= k:
        u += 1
    v = min(aux, u + (len(T) + sum(len(c) for c in live[u:])) // k)
    if v < aux:
        T = T + [t for c in live[v:] for t in c]
    live = live[:v]
    for cl in live:
        while len(cl) < k:
            ils = [m.il([*cl, x]) for x in sorted(T)]
            t = sorted(T)[ils.index(min(ils))]  # the first of the minima
            cl.append(t)
            T.remove(t)
    for t in sorted(T):  # extra tuples: the cluster whose IL grows least
        grow = [m.il([*cl, t]) - m.il(cl) for cl in live]
        live[grow.index(min(grow))].append(t)

    labels = np.full(n, -1, dtype=np.int64)
    for g, cl in enumerate(live):
        labels[cl] = g
    return EnhancedPKTrace(
        labels=labels,
        max_clusters=max_clusters,
        i_value=i_value,
        attribute_order=tuple(order),
        dissolved_for_p=dissolved_p,
        dissolved_for_k=aux - v,
    )
