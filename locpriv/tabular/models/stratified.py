"""A grouping built for t-closeness: "t-closeness first" microaggregation (after Soria-Comas,
Domingo-Ferrer, Sánchez & Martínez, "t-Closeness through Microaggregation: Strict Privacy with
Enhanced Utility Preservation", IEEE TKDE 2015, Algorithm 3).

The records are sorted by one confidential attribute and cut into ``k'`` strata of (nearly)
equal size; every group takes ONE record from each stratum, the one nearest (in the key space)
to the group's seed, the seeds chosen as MDAV does (the record farthest from the centroid of
the remaining ones, then the one farthest from it). A group's confidential values then follow
the table's quantiles, so its distance to the table is small by construction, where groups of
neighbours in key space, which share their confidential values, are far from it.

``k'`` is the smallest size ``>= k`` whose stratified group (each stratum represented by its
most frequent value) is within ``t`` of the table: for an ordered attribute with distinct
values this is Soria-Comas et al.'s bound ``n / (2(n-1)t + 1)``; it also covers ties and the
equal distance. Records of the strata that are one longer than the others join the group with
the nearest centroid. The result is a partition into groups of ``k'`` to ``k' + k'`` records;
:func:`~locpriv.tabular.models.repair.repair` then makes it exact (a group whose own draw
misses ``t`` is merged).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.tabular.models import closeness
from locpriv.tabular.models.counts import pair_counts

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


MAX_N = 100_000
"""Largest table the estimator builds a t-closeness-first grouping for: its cost is
O(n² d / k') (every group scans the remaining records), about 10-40 s on Adult's 32,561."""

DRAWS = 32
"""Simulated groups per candidate size in :func:`group_size`."""


def group_size(s: IntArray, k: int, t: float, ordered: bool, seed: int = 0) -> int:
    """``k'``: the smallest size ``>= k`` at which at least half of :data:`DRAWS` simulated
    stratified groups (one random record per stratum) are within ``t`` of the table."""
    n = s.size
    m = int(s.max()) + 1 if n else 1
    q = closeness.table_distribution(s, m)
    srt = np.sort(s)
    emd = closeness.emd_ordered if ordered else closeness.emd_equal
    rng = np.random.default_rng(seed)
    size = max(1, k)
    while size < n:
        bounds = np.linspace(0, n, size + 1).astype(np.int64)  # array_split's cut points
        lo, length = bounds[:-1], np.diff(bounds)
        pick = lo + (rng.random((DRAWS, size)) * length).astype(np.int64)
        lab = np.repeat(np.arange(DRAWS, dtype=np.int64), size)
        cells = pair_counts(lab, srt[pick.ravel()], DRAWS, m)
        if float(np.median(emd(cells, q))) <= t:
            return size
        size += max(1, size // 20)
    return n


def t_first(
    Z: npt.ArrayLike, s: npt.ArrayLike, k: int, t: float, ordered: bool, *, seed: int = 0
) -> IntArray:
    """Labels ``0..g-1`` of a t-closeness-first grouping of the rows of ``Z`` (n × d, the
    grouping's scale) on the confidential codes ``s`` (n ints ``0..m-1``); ``seed`` drives the
    simulation that picks the group size (:func:`group_size`)."""
    Za = np.asarray(Z, dtype=np.float64)
    Za = Za.reshape(len(Za), -1)
    sa = np.asarray(s, dtype=np.int64)
    n = sa.size
    size = group_size(sa, k, t, ordered, seed)
    labels = np.full(n, -1, dtype=np.int64)
    if size >= n or n // size < 2:
        labels[:] = 0
        return labels
    # strata: consecutive runs of the records sorted by s, as rows of a padded matrix
    bounds = np.linspace(0, n, size + 1).astype(np.int64)
    width = int(np.diff(bounds).max())
    cell = np.full((size, width), -1, dtype=np.int64)
    order = np.argsort(sa, kind="stable")
    for j in range(size):
        cell[j, : bounds[j + 1] - bounds[j]] = order[bounds[j] : bounds[j + 1]]
    filled = cell >= 0
    safe = np.where(filled, cell, 0)
    groups = n // size
    alive = np.ones(n, dtype=bool)
    rows = np.arange(size)

    def take(seed_row: int, g: int) -> None:
        diff = Za - Za[seed_row]
        d = np.einsum("ij,ij->i", diff, diff)[safe]
        d[~filled] = np.inf
        i = np.argmin(d, axis=1)
        chosen = cell[rows, i]
        labels[chosen] = g
        alive[chosen] = False
        filled[rows, i] = False

    g = 0
    while g < groups:
        rest = np.flatnonzero(alive)
        c = Za[rest].mean(axis=0)
        d = np.einsum("ij,ij->i", Za[rest] - c, Za[rest] - c)
        a = int(rest[np.argmax(d)])
        take(a, g)
        g += 1
        if g < groups:
            rest = np.flatnonzero(alive)
            d = np.einsum("ij,ij->i", Za[rest] - Za[a], Za[rest] - Za[a])
            take(int(rest[np.argmax(d)]), g)
            g += 1
    left = np.flatnonzero(alive)
    if left.size:
        sums = np.zeros((groups, Za.shape[1]))
        np.add.at(sums, labels[~alive], Za[~alive])
        cent = sums / np.bincount(labels[~alive], minlength=groups)[:, None]
        for r in left:
            d = np.einsum("ij,ij->i", cent - Za[r], cent - Za[r])
            labels[r] = int(np.argmin(d))
    return labels
