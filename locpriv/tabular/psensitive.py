"""p-sensitive k-anonymity by microaggregation: feasibility conditions and k-increase.

A partition is p-sensitive k-anonymous when every group has at least ``k`` records and at least
``p`` distinct values of every confidential attribute. Confidential attributes are given as an
int matrix ``S`` (n × m) of category codes ``0..c_j-1``; key attributes as a real matrix ``X``
(n × d), already scaled (z-scores by default, see :mod:`locpriv.tabular.categorical`).

* :func:`conditions`: Conditions 1 and 2 of Truta & Vinay (2006). Condition 1: every confidential
  attribute has at least ``p`` distinct values. Condition 2: with ``f_1 >= f_2 >= ...`` the value
  frequencies of attribute j and ``cf_i`` their prefix sums, a p-sensitive partition has at most
  ``maxClusters = min_j min_{1<=i<p} floor((n - cf_{p-i}) / i)`` groups (each group holds at most
  ``p - i`` records of the ``p - i`` most frequent values among its p distinct ones, so at least i
  of the others); ``iValue`` is the ``i`` attaining the minimum.
* :func:`k_increase`: Algorithm 1 of Domingo-Ferrer, "Microaggregation for database and location
  privacy": MDAV with k, k+1, ... until every group is p-sensitive.
* :func:`mdav_seed` / :func:`random_seed` / :func:`seeded_groups`: re-exported from
  :mod:`locpriv.tabular.seeded` (Solanas, Sebé & Domingo-Ferrer 2008).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, InfeasibleError
from locpriv.tabular._knn import _lex_insert
from locpriv.tabular.seeded import mdav_seed, random_seed, seeded_groups

__all__ = [
    "Conditions",
    "conditions",
    "group_is_p_sensitive",
    "k_increase",
    "mdav_seed",
    "random_seed",
    "require_feasible",
    "seeded_groups",
]

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Progress = Callable[[float], None]

_PREFIX_ITER = 200  # MDAV iterations replayed by k-increase before it runs MDAV for a k'


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


def _as_codes(S: npt.ArrayLike, n: int) -> IntArray:
    arr = np.asarray(S)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.shape[0] != n:
        raise ConfigError(f"S has {arr.shape[0]} rows but X has {n}")
    codes = np.empty(arr.shape, dtype=np.int64)
    for j in range(arr.shape[1]):
        _, codes[:, j] = np.unique(arr[:, j], return_inverse=True)
    return codes


def conditions(S: npt.ArrayLike, k: int, p: int) -> Conditions:
    """Compute Conditions 1 and 2 (no exception; see :func:`require_feasible`)."""
    codes = _as_codes(S, np.asarray(S).shape[0])
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
    """True when every group has at least p distinct values in every column of ``S``."""
    g = int(labels.max()) + 1
    for j in range(S.shape[1]):
        nv = int(S[:, j].max()) + 1
        pairs = np.unique(labels * nv + S[:, j])
        if np.bincount(pairs // nv, minlength=g).min() < p:
            return False
    return True


@numba.njit(cache=True)
def _mdav_prefix_fails(
    X: FloatArray, S: IntArray, k: int, p: int, max_iter: int
) -> tuple[bool, int]:
    """True when one of the first groups of fixed-size MDAV(k) provably lacks p distinct values.

    Replays the first ``max_iter`` iterations (two groups each) of the algorithm documented in
    :func:`locpriv.tabular.mdav.mdav`, with its tie-breaks ((squared distance, row index); the
    k-1 nearest exclude the seed; ``s`` is the furthest from ``r`` outside r's group). The only
    quantity not reproduced bit for bit is the centroid (here a compensated sum, in the kernel
    a correctly rounded one): whenever the furthest record from it is not ahead of the
    runner-up by a margin far above that rounding, the replay stops and answers False (not
    proven). False never skips anything: the caller then runs MDAV. Also returns the number of
    iterations replayed.
    """
    n, d = X.shape
    m = S.shape[1]
    XT = np.ascontiguousarray(X.T)
    orig = np.arange(n)
    nu = n
    s_hi = np.zeros(d)
    s_lo = np.zeros(d)
    for i in range(n):
        for c in range(d):
            a = s_hi[c]
            b = X[i, c]
            s = a + b
            bb = s - a
            s_lo[c] += (a - (s - bb)) + (b - bb)
            s_hi[c] = s
    dist = np.empty(n)
    cen = np.empty(d)
    bd = np.empty(k)
    bi = np.empty(k, dtype=np.int64)
    bp = np.empty(k, dtype=np.int64)
    maxv = 1
    for j in range(m):
        maxv = max(maxv, S[:, j].max() + 1)
    seen = np.zeros(maxv, dtype=np.bool_)
    Sc = S.copy()
    for it in range(max_iter):
        if nu < 3 * k:
            return False, it
        csq = 0.0
        for c in range(d):
            cen[c] = (s_hi[c] + s_lo[c]) / nu
            csq += cen[c] * cen[c]
        b1 = -1.0
        b2 = -1.0
        seed = -1
        for t in range(nu):
            a = 0.0
            for c in range(d):
                diff = XT[c, t] - cen[c]
                a += diff * diff
            if a > b1:
                b2 = b1
                b1 = a
                seed = t
            elif a > b2:
                b2 = a
        if b1 - b2 <= 1e-7 * b1 + 1e-12 * (csq + b1):
            return False, it  # too close to call without the kernel's exact centroid
        for half in range(2):
            xs = XT[:, seed].copy()
            size = 0
            for t in range(nu):
                a = 0.0
                for c in range(d):
                    diff = XT[c, t] - xs[c]
                    a += diff * diff
                dist[t] = a
                if t != seed:
                    size = _lex_insert(bd, bi, bp, size, k - 1, a, orig[t], t)
            bp[k - 1] = seed
            for j in range(m):
                cntv = 0
                for o in range(k):
                    v = Sc[bp[o], j]
                    if not seen[v]:
                        seen[v] = True
                        cntv += 1
                for o in range(k):
                    seen[Sc[bp[o], j]] = False
                if cntv < p:
                    return True, it + 1
            # remove the group (swap-remove, descending positions), keep dist aligned
            pos = np.sort(bp[:k])[::-1]
            for o in range(k):
                t = pos[o]
                for c in range(d):
                    a = s_hi[c]
                    b = -XT[c, t]
                    s = a + b
                    bb = s - a
                    s_lo[c] += (a - (s - bb)) + (b - bb)
                    s_hi[c] = s
                nu -= 1
                for c in range(d):
                    XT[c, t] = XT[c, nu]
                for j in range(m):
                    Sc[t, j] = Sc[nu, j]
                orig[t] = orig[nu]
                dist[t] = dist[nu]
            if half == 0:  # s: furthest from r among the rest, lowest row index on ties
                best = -1.0
                seed = -1
                for t in range(nu):
                    if dist[t] > best or (dist[t] == best and orig[t] < orig[seed]):
                        best = dist[t]
                        seed = t
    return False, max_iter


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

    Returns ``(labels, k_used)``. A k' whose MDAV partition would have more groups
    (``floor(n/k')``) than Condition 2's maxClusters cannot be p-sensitive and is skipped without
    running MDAV (the algorithm's outcome is unchanged). Raises :class:`InfeasibleError` when p > k
    or an attribute has fewer than p distinct values.
    """
    prefix = mdav_fn is None  # the replay reproduces the documented MDAV only
    if mdav_fn is None:
        from locpriv.tabular.mdav import mdav as _mdav

        mdav_fn = _mdav
    X = np.ascontiguousarray(X, dtype=np.float64)
    codes = _as_codes(S, X.shape[0])
    cond = require_feasible(codes, k, p)
    n = X.shape[0]
    kk = k
    # replay budget (iterations): the default until both a replay and an MDAV run have been
    # timed, then about a tenth of the last MDAV run's time (only the speed depends on it)
    budget = _PREFIX_ITER
    per_iter = 0.0
    while kk <= n:
        if n // kk <= cond.max_clusters:
            fails = False
            if prefix and budget > 0:
                t0 = time.perf_counter()
                fails, done = _mdav_prefix_fails(X, codes, kk, p, budget)
                if done:
                    per_iter = (time.perf_counter() - t0) / done
            if not fails:
                t0 = time.perf_counter()
                labels = np.asarray(mdav_fn(X, kk), dtype=np.int64)
                if per_iter > 0.0:
                    budget = min(4 * _PREFIX_ITER, int(0.1 * (time.perf_counter() - t0) / per_iter))
                if group_is_p_sensitive(labels, codes, p):
                    logger.debug("k-increase: p-sensitive at k'=%d", kk)
                    return labels, kk
        if progress is not None:
            progress(min(1.0, kk / n))
        kk += 1
    return np.zeros(n, dtype=np.int64), n  # pragma: no cover - k' = n always succeeds
