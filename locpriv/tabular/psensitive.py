"""p-sensitive k-anonymity by microaggregation: feasibility conditions and three methods.

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
* :func:`mdav_seed` / :func:`random_seed`: Algorithm 1 of Solanas, Sebé & Domingo-Ferrer (2008)
  with the seeds of their Algorithms 2 and 3 (see :func:`seeded_groups`).
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
def _lex_insert(  # noqa: PLR0917
    bd: FloatArray, bi: IntArray, bp: IntArray, size: int, cap: int, dv: float, iv: int, pv: int
) -> int:
    """Insert (dv, iv) (position pv) into the (distance, row index)-ascending buffer."""
    if size == cap:
        if dv > bd[size - 1] or (dv == bd[size - 1] and iv > bi[size - 1]):
            return size
        size -= 1
    j = size
    while j > 0 and (bd[j - 1] > dv or (bd[j - 1] == dv and bi[j - 1] > iv)):
        bd[j] = bd[j - 1]
        bi[j] = bi[j - 1]
        bp[j] = bp[j - 1]
        j -= 1
    bd[j] = dv
    bi[j] = iv
    bp[j] = pv
    return size + 1


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


@numba.njit(cache=True)
def _insert_sorted(  # noqa: PLR0917
    hd: FloatArray, ht: IntArray, size: int, cap: int, dv: float, t: int
) -> int:
    """Insert (dv, t) into the ascending arrays hd/ht of length ``size`` (capacity ``cap``)."""
    if size == cap:
        if dv >= hd[size - 1]:
            return size
        size -= 1
    j = size
    while j > 0 and hd[j - 1] > dv:
        hd[j] = hd[j - 1]
        ht[j] = ht[j - 1]
        j -= 1
    hd[j] = dv
    ht[j] = t
    return size + 1


_CHUNK = 256


@numba.njit(cache=True)
def _chunk_dist(XT: FloatArray, i0: int, L: int, q: FloatArray, acc: FloatArray) -> None:
    """``acc[:L]`` = squared distances of compact records ``i0..i0+L-1`` to ``q`` (SIMD)."""
    q0 = q[0]
    for i in range(L):
        t = XT[0, i0 + i] - q0
        acc[i] = t * t
    for j in range(1, XT.shape[0]):
        qj = q[j]
        for i in range(L):
            t = XT[j, i0 + i] - qj
            acc[i] += t * t


_GRID_MIN = 2048  # records from which d <= 2 data get a grid index
_SLACK = 1e-9  # relative slack of the partial-distance bound (rounding error is ~1e-15)


@numba.njit(cache=True)
def _prune_cols(q: FloatArray, center: FloatArray) -> IntArray:
    """Columns by decreasing ``(q_j - center_j)**2``: where ``q`` lies furthest out, a partial
    distance over few columns already rules out most records."""
    d = q.shape[0]
    gap = np.empty(d)
    for j in range(d):
        gap[j] = -((q[j] - center[j]) ** 2)
    return np.argsort(gap, kind="mergesort").astype(np.int64)


@numba.njit(cache=True)
def _n_prune(d: int) -> int:
    """Columns of the partial-distance bound: about a third of them, at least one, at most 4."""
    return max(1, min(4, d // 3))


@numba.njit(cache=True)
def _chunk_pruned(  # noqa: PLR0917
    XT: FloatArray,
    i0: int,
    L: int,
    q: FloatArray,
    cols: IntArray,
    J: int,
    thr: float,
    part: FloatArray,
    surv: IntArray,
    acc: FloatArray,
) -> int:
    """Records ``i0..i0+L-1`` whose squared distance to ``q`` may be below ``thr``.

    The partial sum over ``cols[:J]`` (one vectorised sweep per column, only those rows of the
    chunk are read) is a lower bound of the distance; a record is kept unless the bound, less a
    relative slack far above rounding error, reaches ``thr``. Returns the number kept; their
    offsets go to ``surv`` and their exact squared distances, summed over the columns in order
    0..d-1 as :func:`_chunk_dist` does (so bit-identical), to ``acc``. ``thr = inf`` keeps all.
    """
    d = XT.shape[0]
    if thr == np.inf:
        _chunk_dist(XT, i0, L, q, part)
        for i in range(L):
            surv[i] = i
            acc[i] = part[i]
        return L
    j0 = cols[0]
    q0 = q[j0]
    for i in range(L):
        t = XT[j0, i0 + i] - q0
        part[i] = t * t
    for u in range(1, J):
        j = cols[u]
        qj = q[j]
        for i in range(L):
            t = XT[j, i0 + i] - qj
            part[i] += t * t
    lim = thr * (1.0 + 4.0 * _SLACK)
    ns = 0
    for i in range(L):
        surv[ns] = i
        ns += part[i] < lim
    for s in range(ns):
        i = i0 + surv[s]
        a = 0.0
        for j in range(d):
            t = XT[j, i] - q[j]
            a += t * t
        acc[s] = a
    return ns


@numba.njit(cache=True)
def _knn_range(  # noqa: PLR0917
    XT: FloatArray,
    lo: int,
    hi: int,
    q: FloatArray,
    self_t: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    cols: IntArray,
    guess: float = np.inf,
) -> int:
    """The ``cap`` nearest records to ``q`` among positions lo..hi-1 into ascending hd/ht.

    Position ``self_t`` gets distance -1 (it sorts first). Returns the number kept. Chunks are
    filtered by :func:`_chunk_pruned` against the current kth distance: a record is skipped only
    if its distance is at least the kth (the plain pass would not insert it either), so the
    result equals the plain pass's, ties included (same order of insertion).

    ``guess`` (a guess of the kth squared distance) also prunes from the first chunk on. The
    buffer always holds the ``cap`` smallest (distance, arrival) pairs seen, and a pruned record
    is at least ``guess`` away, so if the buffer ends full with its kth below ``guess`` it is the
    plain pass's; otherwise the pass is repeated without the guess.
    """
    if guess < np.inf:
        size = _knn_pass(XT, lo, hi, q, self_t, cap, hd, ht, cols, guess)
        if size == cap and hd[cap - 1] < guess:
            return size
    return _knn_pass(XT, lo, hi, q, self_t, cap, hd, ht, cols, np.inf)


@numba.njit(cache=True)
def _knn_pass(  # noqa: PLR0917
    XT: FloatArray,
    lo: int,
    hi: int,
    q: FloatArray,
    self_t: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    cols: IntArray,
    thr0: float,
) -> int:
    """One pass of :func:`_knn_range`, records at least ``thr0`` away pruned as well."""
    J = _n_prune(XT.shape[0])
    acc = np.empty(_CHUNK)
    part = np.empty(_CHUNK)
    surv = np.empty(_CHUNK, dtype=np.int64)
    size = 0
    kth = np.inf
    if lo <= self_t < hi:
        size = _insert_sorted(hd, ht, size, cap, -1.0, self_t)
        if size == cap:
            kth = hd[cap - 1]
    for i0 in range(lo, hi, _CHUNK):
        L = min(_CHUNK, hi - i0)
        ns = _chunk_pruned(XT, i0, L, q, cols, J, min(kth, thr0), part, surv, acc)
        for s in range(ns):
            a = acc[s]
            t = i0 + surv[s]
            if a < kth and t != self_t:
                size = _insert_sorted(hd, ht, size, cap, a, t)
                if size == cap:
                    kth = hd[cap - 1]
    return size


@numba.njit(cache=True)
def _knn(  # noqa: PLR0917
    XT: FloatArray,
    nu: int,
    q: FloatArray,
    self_t: int,
    cap: int,
    center: FloatArray,
    hd: FloatArray,
    ht: IntArray,
    guess: float = np.inf,
) -> int:
    """Nearest ``cap`` live records to ``q`` (bound columns chosen against ``center``)."""
    return _knn_range(XT, 0, nu, q, self_t, cap, hd, ht, _prune_cols(q, center), guess)


@numba.njit(cache=True)
def _grid_build(  # noqa: PLR0917
    XT: FloatArray,
    lo: FloatArray,
    hi: FloatArray,
    G: int,
    cellid: IntArray,
    cstart: IntArray,
    ccnt: IntArray,
    cm: IntArray,
    slot: IntArray,
) -> FloatArray:
    """A G^d grid (d <= 2) over the box [lo, hi]: per cell the positions of its live records
    (``cm[cstart[c] : cstart[c] + ccnt[c]]``), ``slot`` the index of a position in ``cm``.
    Returns the cell widths."""
    d, n = XT.shape
    w = np.empty(d)
    for j in range(d):
        w[j] = (hi[j] - lo[j]) / G if hi[j] > lo[j] else 1.0
    ncell = G**d
    for c in range(ncell):
        ccnt[c] = 0
    for t in range(n):
        c = 0
        mul = 1
        for j in range(d):
            cj = int((XT[j, t] - lo[j]) / w[j])
            cj = min(max(cj, 0), G - 1)
            c += cj * mul
            mul *= G
        cellid[t] = c
        ccnt[c] += 1
    cstart[0] = 0
    for c in range(ncell):
        cstart[c + 1] = cstart[c] + ccnt[c]
        ccnt[c] = 0
    for t in range(n):
        c = cellid[t]
        s = cstart[c] + ccnt[c]
        cm[s] = t
        slot[t] = s
        ccnt[c] += 1
    return w


@numba.njit(cache=True)
def _grid_remove(  # noqa: PLR0917
    t: int,
    last: int,
    cellid: IntArray,
    cstart: IntArray,
    ccnt: IntArray,
    cm: IntArray,
    slot: IntArray,
) -> None:
    """Position ``t`` leaves; the record at position ``last`` then moves to ``t`` (swap-remove)."""
    c = cellid[t]
    e = cstart[c] + ccnt[c] - 1
    s = slot[t]
    u = cm[e]
    cm[s] = u
    slot[u] = s
    ccnt[c] -= 1
    if last != t:
        s = slot[last]
        cm[s] = t
        slot[t] = s
        cellid[t] = cellid[last]


@numba.njit(cache=True)
def _knn_grid(  # noqa: PLR0917
    XT: FloatArray,
    nu: int,
    q: FloatArray,
    self_t: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    lo: FloatArray,
    w: FloatArray,
    G: int,
    cstart: IntArray,
    ccnt: IntArray,
    cm: IntArray,
) -> int:
    """:func:`_knn_range` over all live records by rings of grid cells around ``q`` (d <= 2).

    The plain pass keeps the ``cap`` smallest (squared distance, position) pairs (positions
    arrive in order); here candidates are inserted by that same key, ring after ring, until the
    records outside the rings seen are provably further than the kth (distance to the rings'
    box, less a slack far above rounding). Returns -1 when the rings get too many cells for
    the live records (the caller then makes the plain pass).
    """
    d = XT.shape[0]
    cq = np.empty(d, dtype=np.int64)
    scale = 0.0
    for j in range(d):
        cj = int((q[j] - lo[j]) / w[j])
        cq[j] = min(max(cj, 0), G - 1)
        scale = max(scale, abs(lo[j]) + G * w[j] + abs(q[j]))
    bp = np.empty(cap, dtype=np.int64)
    size = 0
    if self_t >= 0:
        size = _lex_insert(hd, ht, bp, size, cap, -1.0, self_t, self_t)
    cells = 0
    for r in range(G + 1):
        # the cells of ring r (Chebyshev distance r from cq), row by row
        i_lo = cq[0] - r
        i_hi = cq[0] + r
        for i in range(max(i_lo, 0), min(i_hi, G - 1) + 1):
            edge = abs(i - cq[0]) == r
            if d == 1:
                if not edge:
                    continue
                cstep = 1
                j0 = 0
                j1 = 0
            else:
                j0 = cq[1] - r
                j1 = cq[1] + r
                cstep = 1 if edge or r == 0 else 2 * r
            jj = j0
            while jj <= j1:
                if 0 <= jj < G:
                    c = i + jj * G if d == 2 else i
                    cells += 1
                    for s in range(cstart[c], cstart[c] + ccnt[c]):
                        tpos = cm[s]
                        if tpos == self_t:
                            continue
                        a = 0.0
                        for col in range(d):
                            diff = XT[col, tpos] - q[col]
                            a += diff * diff
                        size = _lex_insert(hd, ht, bp, size, cap, a, tpos, tpos)
                jj += cstep
        gap = np.inf
        whole = True
        for j in range(d):
            if cq[j] - r > 0:
                whole = False
                gap = min(gap, q[j] - (lo[j] + (cq[j] - r) * w[j]))
            if cq[j] + r < G - 1:
                whole = False
                gap = min(gap, lo[j] + (cq[j] + r + 1) * w[j] - q[j])
        if whole:
            return size
        gap -= 1e-9 * scale
        if size == cap and gap > 0.0 and gap * gap > hd[cap - 1] * (1.0 + 1e-9):
            return size
        if cells * 8 > nu + 64:
            return -1
    return size  # pragma: no cover - the last ring covers the grid


@numba.njit(cache=True)
def _seeded_kernel(  # noqa: PLR0917
    X: FloatArray,
    S: IntArray,
    nvals: IntArray,
    k: int,
    p: int,
    mode: int,
    rnd: FloatArray,
) -> IntArray:
    n, d = X.shape
    m = S.shape[1]
    maxv = 1
    for j in range(m):
        maxv = max(maxv, nvals[j])
    labels = -np.ones(n, dtype=np.int64)
    # compact column-major copy: positions 0..nu-1 hold the unassigned records (swap-remove)
    XT = np.ascontiguousarray(X.T)
    Sc = S.copy()
    orig = np.arange(n)
    nu = n
    cnt = np.zeros((m, maxv), dtype=np.int64)
    for i in range(n):
        for j in range(m):
            cnt[j, S[i, j]] += 1
    udist = np.zeros(m, dtype=np.int64)
    for j in range(m):
        for v in range(nvals[j]):
            if cnt[j, v] > 0:
                udist[j] += 1
    sumx = np.zeros(d)
    lo = np.full(d, np.inf)
    hi = np.full(d, -np.inf)
    for i in range(n):
        for c in range(d):
            sumx[c] += X[i, c]
            lo[c] = min(lo[c], X[i, c])
            hi[c] = max(hi[c], X[i, c])
    seen = np.zeros((m, maxv), dtype=np.bool_)
    gdist = np.zeros(m, dtype=np.int64)
    members = np.empty(n, dtype=np.int64)  # positions in the compact arrays
    skipped = np.empty(n, dtype=np.int64)
    cap = 4 * k + 4
    hd = np.empty(cap)
    ht = np.empty(cap, dtype=np.int64)
    ref = np.empty(d)
    xs = np.empty(d)
    cen = np.empty(d)
    g1 = np.inf  # guesses of the squared distance to the nearest / to the cap-th nearest
    gk = np.inf
    acc = np.empty(_CHUNK)
    # pivot for the furthest-from-centroid search: dp[t] = d(x_t, pv) (not squared)
    dp = np.zeros(n)
    pv = np.empty(d)
    have_pivot = False
    shell = np.empty(n, dtype=np.int64)  # original indices of the records with dp >= cut
    nsh = 0
    cut = np.inf
    pos_of = np.arange(n)  # position of each original record in the compact arrays
    # low dimensions: a grid over the data's box answers the k-nearest queries by rings of cells
    use_grid = d <= 2 and n >= _GRID_MIN
    G = max(1, int((n / 8.0) ** (1.0 / d))) if use_grid else 1
    cellid = np.empty(n if use_grid else 0, dtype=np.int64)
    gslot = np.empty(n if use_grid else 0, dtype=np.int64)
    cm = np.empty(n if use_grid else 0, dtype=np.int64)
    cstart = np.empty(G**d + 1 if use_grid else 1, dtype=np.int64)
    ccnt = np.empty(G**d if use_grid else 0, dtype=np.int64)
    gw = np.ones(d)
    if use_grid:
        gw = _grid_build(XT, lo, hi, G, cellid, cstart, ccnt, cm, gslot)
    g = 0
    while nu >= k and udist.min() >= p:
        # --- seed selection
        best_t = 0
        if mode == 0:  # Algorithm 2: furthest from the average of the unassigned records
            for c in range(d):
                ref[c] = sumx[c] / nu
            delta = 0.0
            if have_pivot:
                for c in range(d):
                    delta += (pv[c] - ref[c]) ** 2
                delta = np.sqrt(delta)
            # maxdp over the live records: in the shell (records with dp >= cut) while it has any
            maxdp = 0.0
            s = 0
            while s < nsh:
                o = shell[s]
                if labels[o] >= 0:  # grouped meanwhile: drop it from the shell
                    nsh -= 1
                    shell[s] = shell[nsh]
                    continue
                maxdp = max(maxdp, dp[pos_of[o]])
                s += 1
            thr = maxdp - 2.0 * delta - 1e-12 * (1.0 + maxdp)
            if not have_pivot or nsh == 0 or delta > 0.05 * maxdp or thr < cut:
                # (re)build the pivot at the current centroid: one full pass, which also finds
                # the furthest record; the shell = the ~4 sqrt(nu k) records furthest from it
                for c in range(d):
                    pv[c] = ref[c]
                best_v = -1.0
                for i0 in range(0, nu, _CHUNK):
                    L = min(_CHUNK, nu - i0)
                    _chunk_dist(XT, i0, L, ref, acc)
                    for i in range(L):
                        dp[i0 + i] = np.sqrt(acc[i])
                        if acc[i] > best_v:
                            best_v = acc[i]
                            best_t = i0 + i
                have_pivot = True
                msh = min(nu, max(64, int(4.0 * np.sqrt(nu * k))))
                cut = np.partition(dp[:nu], nu - msh)[nu - msh]
                nsh = 0
                for t in range(nu):
                    if dp[t] >= cut:
                        shell[nsh] = orig[t]
                        nsh += 1
            else:
                # d(x, c) <= dp + delta and the record of max dp has d >= maxdp - delta, so the
                # furthest record has dp >= thr >= cut: it is in the shell. Ties: lowest position
                best_v = -1.0
                best_t = -1
                for s in range(nsh):
                    t = pos_of[shell[s]]
                    if dp[t] >= thr:
                        a = 0.0
                        for c in range(d):
                            diff = XT[c, t] - ref[c]
                            a += diff * diff
                        if a > best_v or (a == best_v and t < best_t):
                            best_v = a
                            best_t = t
        else:  # Algorithm 3: nearest to a uniform random vector over the attribute ranges
            for c in range(d):
                ref[c] = lo[c] + rnd[g, c] * (hi[c] - lo[c])
            for c in range(d):
                cen[c] = sumx[c] / nu
            got = -1
            if use_grid:
                got = _knn_grid(XT, nu, ref, -1, 1, hd, ht, lo, gw, G, cstart, ccnt, cm)
            if got < 0:
                _knn(XT, nu, ref, -1, 1, cen, hd, ht, g1)
            best_t = ht[0]
            g1 = 2.0 * hd[0]
        for c in range(d):
            xs[c] = XT[c, best_t]
        # --- nearest candidates (one chunked pass, bounded sorted buffer), widened if needed
        for c in range(d):
            cen[c] = sumx[c] / nu
        size = -1
        if use_grid:
            size = _knn_grid(XT, nu, xs, best_t, cap, hd, ht, lo, gw, G, cstart, ccnt, cm)
        if size < 0:
            size = _knn(XT, nu, xs, best_t, cap, cen, hd, ht, gk)
        if size == cap:
            gk = 1.5 * hd[cap - 1]
        order = ht[:size].copy()
        done = False
        nmem = 0
        while True:
            nmem = 0
            nskip = 0
            for j in range(m):
                gdist[j] = 0
            for o in range(order.size):
                t = order[o]
                contributes = False
                deficit = 0
                for j in range(m):
                    need = p - gdist[j]
                    if need > 0:
                        deficit = max(deficit, need)
                        if not seen[j, Sc[t, j]]:
                            contributes = True
                if contributes or nmem + 1 + deficit <= k:
                    members[nmem] = t
                    nmem += 1
                    for j in range(m):
                        if not seen[j, Sc[t, j]]:
                            seen[j, Sc[t, j]] = True
                            gdist[j] += 1
                    ok = nmem >= k
                    for j in range(m):
                        if gdist[j] < p:
                            ok = False
                    if ok:
                        done = True
                        break
                else:
                    skipped[nskip] = t
                    nskip += 1
            if not done:
                deficit = 0
                for j in range(m):
                    deficit = max(deficit, p - gdist[j])
                if deficit <= 0:  # diversity met: fill up to k with the nearest skipped records
                    s = 0
                    while nmem < k and s < nskip:
                        members[nmem] = skipped[s]
                        nmem += 1
                        s += 1
                    done = nmem >= k
            for o in range(nmem):
                t = members[o]
                for j in range(m):
                    seen[j, Sc[t, j]] = False
            if done or order.size >= nu:
                break
            # widen to every unassigned record, sorted by distance to the seed
            dist = np.empty(nu)
            for i0 in range(0, nu, _CHUNK):
                L = min(_CHUNK, nu - i0)
                _chunk_dist(XT, i0, L, xs, acc)
                for i in range(L):
                    dist[i0 + i] = acc[i]
            dist[best_t] = -1.0
            order = np.argsort(dist, kind="mergesort")
        if not done:
            break
        # --- commit the group: label, update counts, swap-remove (descending positions)
        pos = np.sort(members[:nmem])[::-1]
        for o in range(nmem):
            t = pos[o]
            labels[orig[t]] = g
            for c in range(d):
                sumx[c] -= XT[c, t]
            for j in range(m):
                v = Sc[t, j]
                cnt[j, v] -= 1
                if cnt[j, v] == 0:
                    udist[j] -= 1
            nu -= 1
            if use_grid:
                _grid_remove(t, nu, cellid, cstart, ccnt, cm, gslot)
            for c in range(d):
                XT[c, t] = XT[c, nu]
            for j in range(m):
                Sc[t, j] = Sc[nu, j]
            orig[t] = orig[nu]
            pos_of[orig[t]] = t
            dp[t] = dp[nu]
        g += 1
    if g == 0:
        return np.zeros(n, dtype=np.int64)
    # --- leftovers join the group with the closest centroid
    cent = np.zeros((g, d))
    gc = np.zeros(g)
    for i in range(n):
        if labels[i] >= 0:
            gc[labels[i]] += 1.0
            for c in range(d):
                cent[labels[i], c] += X[i, c]
    for a in range(g):
        for c in range(d):
            cent[a, c] /= gc[a]
    for t in range(nu):
        best = 0
        bv = np.inf
        for a in range(g):
            dd = 0.0
            for c in range(d):
                diff = XT[c, t] - cent[a, c]
                dd += diff * diff
            if dd < bv:
                bv = dd
                best = a
        labels[orig[t]] = best
    return labels


def seeded_groups(
    X: FloatArray,
    S: npt.ArrayLike,
    k: int,
    p: int,
    *,
    seed_mode: str = "mdav",
    rng: np.random.Generator | None = None,
) -> IntArray:
    """Solanas, Sebé & Domingo-Ferrer (2008), Algorithm 1, with seed Algorithm 2 or 3.

    While the unassigned records number at least k and still hold p distinct values of every
    confidential attribute: pick a seed (``seed_mode="mdav"``: the record furthest from the average
    of the unassigned records; ``"random"``: the record nearest to a vector drawn uniformly over
    the key attributes' ranges in the data set); walk the unassigned records by increasing distance
    to the seed and add each one if it brings a value not yet p-covered, or if there is still room
    for the missing values within k records; stop when the group has >= k records and >= p distinct
    values of every attribute. Leftover records join the group with the closest centroid, so groups
    may exceed k. Labels are 0..g-1 in creation order. Work per group, on a compacted copy: the
    seed search (Algorithm 2: a shell of records around a pivot; Algorithm 3: a pruned pass) and
    a pruned pass keeping the ~4k nearest candidates (grid rings when d <= 2); only when those
    cannot satisfy p is the whole remainder sorted. Every shortcut gives exactly the plain
    passes' results (docs/tabular.md).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    codes = _as_codes(S, X.shape[0])
    require_feasible(codes, k, p)
    if seed_mode not in ("mdav", "random"):
        raise ConfigError(f"seed_mode must be 'mdav' or 'random', got {seed_mode!r}")
    mode = 0 if seed_mode == "mdav" else 1
    rng = rng if rng is not None else np.random.default_rng(0)
    rnd = rng.random((X.shape[0] // k + 1, X.shape[1])) if mode else np.zeros((1, 1))
    nvals = codes.max(axis=0) + 1
    out: IntArray = _seeded_kernel(X, np.ascontiguousarray(codes), nvals, k, p, mode, rnd)
    return out


def mdav_seed(X: FloatArray, S: npt.ArrayLike, k: int, p: int) -> IntArray:
    """Solanas et al. (2008) with the MDAV-like seed (their Algorithm 2); deterministic."""
    return seeded_groups(X, S, k, p, seed_mode="mdav")


def random_seed(
    X: FloatArray, S: npt.ArrayLike, k: int, p: int, rng: np.random.Generator | None = None
) -> IntArray:
    """Solanas et al. (2008) with the random-vector seed (their Algorithm 3)."""
    return seeded_groups(X, S, k, p, seed_mode="random", rng=rng)
