"""numba nearest-neighbour kernels shared by the p-sensitive methods.

Sorted-buffer inserts, chunked (SIMD) and partial-distance-pruned squared-distance passes, the
k-nearest queries over a compacted column-major copy, and the grid index used when d <= 2.
Callers: :mod:`locpriv.tabular.psensitive` (k-increase's MDAV replay),
:mod:`locpriv.tabular.seeded` and :mod:`locpriv.tabular.enhanced_pk`.

Maintenance note: numba's on-disk cache only notices changes to the file that defines a function,
so after editing these kernels delete ``locpriv/tabular/__pycache__/{psensitive,seeded,
enhanced_pk}.*.nb*`` to force a recompile of their callers.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


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
def _shell_max(
    shell: IntArray, nsh: int, labels: IntArray, dp: FloatArray, pos_of: IntArray
) -> tuple[float, int]:
    """Max of ``dp`` over the shell's still-unassigned records; assigned ones are swap-removed.

    Returns ``(maxdp, nsh)`` (0.0 for an empty shell); ``shell[:nsh]`` holds the live records.
    """
    maxdp = 0.0
    s = 0
    while s < nsh:
        o = shell[s]
        if labels[o] >= 0:
            nsh -= 1
            shell[s] = shell[nsh]
            continue
        maxdp = max(maxdp, dp[pos_of[o]])
        s += 1
    return maxdp, nsh


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
