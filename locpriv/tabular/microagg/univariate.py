"""Optimal univariate microaggregation (Hansen & Mukherjee 2003).

For one attribute, some optimal k-partition (minimum within-group sum of squares, every group at
least ``k`` records) consists of groups of consecutive values in sorted order, each of ``k`` to
``2k - 1`` records. Hansen and Mukherjee turn this into a shortest path over the sorted values;
:func:`optimal_univariate` solves the same recursion by dynamic programming in ``O(n k)`` time
after an ``O(n log n)`` sort.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.errors import DataError
from locpriv.tabular.checks import check_k
from locpriv.tabular.microagg._kernels.univariate import _dp

__all__ = ["optimal_univariate", "optimal_univariate_sse"]


def _check_vector(x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    arr = np.asarray(x)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(f"x must be 1-D (one attribute), got shape {arr.shape}")
    if arr.size == 0:
        raise DataError("x must have at least one value")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise DataError(f"x must be a real numeric array, got dtype {arr.dtype}")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        raise DataError("x has NaN or infinite values")
    return out


def optimal_univariate(x: npt.ArrayLike, k: int) -> npt.NDArray[np.intp]:
    """Optimal k-partition of one attribute: labels ``0..g-1`` in increasing order of value.

    Minimises the within-group sum of squares over all partitions whose groups have at least
    ``k`` records. The groups found are runs of the sorted values of ``k..2k-1`` records (some
    optimum always has this form). Equal values are ordered by their row index (stable sort);
    among optimal partitions the one whose groups, read from the largest values down, are the
    shortest possible is returned.

    Parameters
    ----------
    x : (n,) array of float (or (n, 1))
        The attribute, finite.
    k : int
        Minimum group size, ``1 <= k <= n``.

    Returns
    -------
    labels : (n,) array of intp

    Examples
    --------
    >>> optimal_univariate([1.0, 2, 3, 10, 11, 12, 13], 3).tolist()
    [0, 0, 0, 1, 1, 1, 1]
    """
    v = _check_vector(x)
    kk = check_k(k, v.size)
    order = np.argsort(v, kind="stable")
    _, last = _dp(v[order], kk)
    sizes = []
    i = v.size
    while i > 0:
        sizes.append(int(last[i]))
        i -= int(last[i])
    sizes.reverse()
    labels = np.empty(v.size, dtype=np.intp)
    labels[order] = np.repeat(np.arange(len(sizes), dtype=np.intp), sizes)
    return labels


def optimal_univariate_sse(x: npt.ArrayLike, k: int) -> float:
    """The minimum within-group sum of squares of :func:`optimal_univariate`."""
    v = _check_vector(x)
    kk = check_k(k, v.size)
    cost, _ = _dp(np.sort(v, kind="stable"), kk)
    return float(cost[v.size])
