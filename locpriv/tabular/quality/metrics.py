"""Information-loss metrics of a microaggregation (a partition given as group labels).

All functions take ``labels``: an int array of length n with values ``0..g-1`` (every label used).

* ``sse``: within-group sum of squared Euclidean distances to the group means;
* ``sst``: total sum of squares about the global mean; ``il_percent = 100 * SSE / SST``;
* ``truta_il``: the generalisation information loss of Truta, Campan & Meyer (2007), Definitions
  9-10: ``IL = sum_groups |g| * sum_j (max_j(g) - min_j(g)) / (max_j - min_j)`` over numerical key
  attributes (a constant attribute contributes 0); ``truta_il_normalised`` divides it by ``n * d``
  (0 = no loss, 1 = every group spans every domain);
* ``discernibility`` (DM): ``sum_groups |g|^2`` (no suppression here);
* ``avg_class_size`` (C_AVG): ``n / (groups * k)``;
* ``size_histogram``: group size -> number of groups.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.tabular.microagg._kernels.partition_stats import squared_error
from locpriv.tabular.quality._kernels import chunks
from locpriv.tabular.threads import map_items, row_ranges

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


ranges = row_ranges  # the items of the group- and row-wise statistics


def _order(labels: IntArray, g: int | None) -> tuple[IntArray, IntArray, IntArray, int]:
    lab = np.ascontiguousarray(labels, dtype=np.int64)
    if lab.size and int(lab.min()) < 0:
        raise ValueError("labels must be >= 0")
    g = int(lab.max()) + 1 if g is None else g
    order, start = chunks.group_order(lab, g)
    return lab, order, start, g


def group_means(X: FloatArray, labels: IntArray, g: int | None = None) -> FloatArray:
    """Group means (g × d; ``g`` defaults to ``labels.max() + 1``; an empty group's mean is
    0). The rows ordered by group (a counting sort), then ranges of groups on the threads of
    :func:`~locpriv.tabular.threads.map_items`; each group sums its rows in row order, as one
    ``bincount`` per column would (the same values bit for bit, for any thread count)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    _, order, start, g = _order(labels, g)
    out: FloatArray = np.empty((g, X.shape[1]))
    map_items(lambda r: chunks.means_range(X, order, start, r[0], r[1], out), ranges(g))
    return out


def group_span(
    X: FloatArray, labels: IntArray, g: int | None = None
) -> tuple[FloatArray, FloatArray, IntArray]:
    """g × d least and greatest values of each group's records (``inf`` / ``-inf`` for an
    empty group) and the group sizes; ranges of groups on threads, as :func:`group_means`."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    _, order, start, g = _order(labels, g)
    lo: FloatArray = np.empty((g, X.shape[1]))
    hi: FloatArray = np.empty((g, X.shape[1]))
    map_items(lambda r: chunks.span_range(X, order, start, r[0], r[1], lo, hi), ranges(g))
    return lo, hi, np.diff(start)


def squared_distances(A: FloatArray, B: FloatArray) -> float:
    """``sum((A - B)**2)``: each row's squared distance (its columns in order; ranges of rows
    on threads), then numpy's pairwise sum of the rows' (one fixed order: the same value for
    any thread count)."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    if A.shape != B.shape:
        raise ValueError(f"shapes differ: {A.shape} and {B.shape}")
    e = np.empty(A.shape[0])
    map_items(lambda r: chunks.row_sq_diff_range(A, B, r[0], r[1], e), ranges(A.shape[0]))
    return float(np.sum(e))


def sse(X: FloatArray, labels: IntArray) -> float:
    """Within-group sum of squared errors (units: squared units of ``X``); one numba pass
    after the means (each record's error over the columns, then the records in row order)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    lab = np.ascontiguousarray(labels, dtype=np.int64)
    return float(squared_error(X, lab, group_means(X, lab)))


def sst(X: FloatArray) -> float:
    """Total sum of squares about the column means: each row's squared distance to the means
    (ranges of rows on threads), then numpy's pairwise sum of the rows' (the same value for
    any thread count)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        return 0.0
    mu = np.ascontiguousarray(X.mean(axis=0))
    e = np.empty(X.shape[0])
    map_items(lambda r: chunks.row_sq_range(X, mu, r[0], r[1], e), ranges(X.shape[0]))
    return float(np.sum(e))


def il_percent(X: FloatArray, labels: IntArray) -> float:
    """Information loss ``100 * SSE / SST`` (0 when SST is 0)."""
    total = sst(X)
    return 0.0 if total == 0 else 100.0 * sse(X, labels) / total


def truta_il(X: FloatArray, labels: IntArray) -> float:
    """Truta, Campan & Meyer (2007) Definitions 9-10: sum over groups of |g| * normalised spans."""
    X = np.asarray(X, dtype=np.float64)
    g = int(labels.max()) + 1
    span = X.max(axis=0) - X.min(axis=0)
    span = np.where(span > 0, span, np.inf)
    gmin, gmax, count = group_span(X, labels, g)
    cnt = count.astype(np.float64)
    return float(np.sum(cnt * np.sum((gmax - gmin) / span, axis=1)))


def truta_il_normalised(X: FloatArray, labels: IntArray) -> float:
    """``truta_il / (n * d)``, in [0, 1]."""
    n, d = np.asarray(X).shape
    return truta_il(X, labels) / (n * d) if n and d else 0.0


def discernibility(labels: IntArray) -> int:
    """Discernibility metric DM = sum of squared group sizes."""
    cnt = np.bincount(labels)
    return int(np.sum(cnt.astype(np.int64) ** 2))


def avg_class_size(labels: IntArray, k: int) -> float:
    """Normalised average equivalence-class size C_AVG = n / (groups * k); 1 is ideal."""
    g = int(labels.max()) + 1
    return float(labels.size) / (g * k)


def size_histogram(labels: IntArray) -> dict[int, int]:
    """Group size -> number of groups with that size (sorted by size)."""
    cnt = np.bincount(labels)
    sizes, freq = np.unique(cnt[cnt > 0], return_counts=True)
    return {int(s): int(f) for s, f in zip(sizes, freq, strict=True)}
