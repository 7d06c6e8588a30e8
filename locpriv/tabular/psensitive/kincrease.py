"""p-sensitive k-anonymity by microaggregation: feasibility conditions and k-increase.

A partition is p-sensitive k-anonymous when every group has at least ``k`` records and at least
``p`` distinct values of every confidential attribute. Confidential attributes are given as an
int matrix ``S`` (n × m) of category codes ``0..c_j-1``; key attributes as a real matrix ``X``
(n × d), already scaled (z-scores by default, see :mod:`locpriv.tabular.io.encoding`).

* :func:`conditions`: Conditions 1 and 2 of Truta & Vinay (2006). Condition 1: every confidential
  attribute has at least ``p`` distinct values. Condition 2: with ``f_1 >= f_2 >= ...`` the value
  frequencies of attribute j and ``cf_i`` their prefix sums, a p-sensitive partition has at most
  ``maxClusters = min_j min_{1<=i<p} floor((n - cf_{p-i}) / i)`` groups (each group holds at most
  ``p - i`` records of the ``p - i`` most frequent values among its p distinct ones, so at least i
  of the others); ``iValue`` is the ``i`` attaining the minimum.
* :func:`k_increase`: Algorithm 1 of Domingo-Ferrer, "Microaggregation for database and location
  privacy": MDAV with k, k+1, ... until every group is p-sensitive.

The other p-sensitive methods are in :mod:`~locpriv.tabular.psensitive.seeded` (Solanas, Sebé &
Domingo-Ferrer 2008), :mod:`~locpriv.tabular.psensitive.enhanced_pk`,
:mod:`~locpriv.tabular.psensitive.sec_pk` and :mod:`~locpriv.tabular.psensitive.psearch`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, InfeasibleError
from locpriv.tabular.checks import as_codes, check_matrix
from locpriv.tabular.microagg.mdav import MdavRunner
from locpriv.tabular.quality.validate import distinct_counts

__all__ = [
    "Conditions",
    "conditions",
    "group_is_p_sensitive",
    "k_increase",
    "require_feasible",
]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Progress = Callable[[float], None]


@dataclass(frozen=True)
class Conditions:
    """Diagnostics of Truta & Vinay (2006) for a request (n, k, p) on confidential codes ``S``."""

    n: int
    k: int
    p: int
    distinct: tuple[int, ...]
    """Distinct values per confidential attribute (Condition 1 needs each >= p)."""
    max_clusters: int
    """Upper bound on the number of groups of a p-sensitive k-anonymous partition (>= 1 if ok)."""
    i_value: int
    """The i of Condition 2 attaining the bound (0 when the k-anonymity bound n//k is smaller)."""
    attribute: int
    """Index of the confidential attribute attaining the bound (-1 when n//k is smaller)."""

    @property
    def condition1(self) -> bool:
        """Every confidential attribute has at least p distinct values."""
        return all(c >= self.p for c in self.distinct)


def conditions(S: npt.ArrayLike, k: int, p: int) -> Conditions:
    """Compute Conditions 1 and 2 (no exception; see :func:`require_feasible`)."""
    codes = as_codes(S, np.asarray(S).shape[0])
    n, m = codes.shape
    best, i_best, a_best = n // k if k > 0 else n, 0, -1
    distinct: list[int] = []
    for j in range(m):
        freq = np.sort(np.bincount(codes[:, j]))[::-1]
        freq = freq[freq > 0]
        distinct.append(int(freq.size))
        cf = np.concatenate(([0], np.cumsum(freq)))
        for i in range(1, p):
            top = p - i
            if top > freq.size:
                continue
            bound = (n - int(cf[top])) // i
            if bound < best:
                best, i_best, a_best = bound, i, j
    return Conditions(n, k, p, tuple(distinct), int(best), i_best, a_best)


def require_feasible(
    S: npt.ArrayLike, k: int, p: int, names: list[str] | None = None
) -> Conditions:
    """Check (n, k, p) and Conditions 1-2; raise ConfigError / InfeasibleError naming the cause."""
    n = int(np.asarray(S).shape[0])
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    if p < 1:
        raise ConfigError(f"p must be >= 1, got {p}")
    if p > k:
        raise InfeasibleError(f"p={p} is larger than k={k}")
    if n < k:
        raise InfeasibleError(f"n={n} records is fewer than k={k}")
    cond = conditions(S, k, p)
    for j, c in enumerate(cond.distinct):
        if c < p:
            name = repr(names[j]) if names else f"attribute {j}"
            raise InfeasibleError(f"{name} has {c} distinct values, fewer than p={p}")
    if cond.max_clusters < 1:  # pragma: no cover - implied by Condition 1
        raise InfeasibleError("Condition 2 fails: no p-sensitive group can be formed")
    return cond


def group_is_p_sensitive(labels: IntArray, S: IntArray, p: int) -> bool:
    """True when every group ``0..labels.max()`` has at least p distinct values in every
    column of ``S`` (one counting pass:
    :func:`~locpriv.tabular.quality.validate.distinct_counts`)."""
    counts = distinct_counts(labels, S)
    return counts.size == 0 or int(counts.min()) >= p


def k_increase(
    X: FloatArray,
    S: npt.ArrayLike,
    k: int,
    p: int,
    *,
    mdav_fn: Callable[[FloatArray, int], IntArray] | None = None,
    progress: Progress | None = None,
) -> tuple[IntArray, int]:
    """Domingo-Ferrer's Algorithm 1: MDAV with k, k+1, ... until p-sensitive.

    Returns ``(labels, k_used)``: the first k' >= k whose MDAV partition has at least p
    distinct values of every confidential attribute in every group, and that partition. Two
    shortcuts leave the result unchanged: a k' whose partition would have more groups
    (``floor(n/k')``) than Condition 2's maxClusters cannot be p-sensitive and is skipped, and
    MDAV stops at the first group that lacks p distinct values
    (:func:`locpriv.tabular.microagg.mdav.mdav_p_sensitive`), so a failing k' costs only the
    work up to that group; the kernel choice and its k-d blocks are shared by all k'
    (``MdavRunner``).
    ``mdav_fn`` replaces MDAV (every k' then runs to the end). Raises :class:`InfeasibleError`
    when p > k or an attribute has fewer than p distinct values.
    """
    X = check_matrix(X)
    codes = as_codes(S, X.shape[0])
    cond = require_feasible(codes, k, p)
    n = X.shape[0]
    if mdav_fn is None:
        runner = MdavRunner(X)

        def attempt(kk: int) -> npt.NDArray[np.intp] | None:
            return runner.p_sensitive(kk, codes, p)
    else:
        fn = mdav_fn

        def attempt(kk: int) -> npt.NDArray[np.intp] | None:
            labels = np.asarray(fn(X, kk), dtype=np.intp)
            return labels if group_is_p_sensitive(labels, codes, p) else None

    for kk in range(k, n + 1):
        if n // kk <= cond.max_clusters:
            labels = attempt(kk)
            if labels is not None:
                logger.debug("k-increase: p-sensitive at k'=%d", kk)
                return np.asarray(labels, dtype=np.int64), kk
        if progress is not None:
            progress(min(1.0, kk / n))
    return np.zeros(n, dtype=np.int64), n  # pragma: no cover - k' = n always succeeds
