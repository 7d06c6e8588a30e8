"""numba nearest-neighbour kernels shared by the p-sensitive methods.

Sorted-buffer inserts, the pivot shell of the furthest-from-centroid search, chunked (SIMD) and
partial-distance-pruned squared-distance passes and the k-nearest queries over a compacted
column-major copy of the unassigned records. The indexes live beside: the grid (d <= 2) in
:mod:`.knn_grid`, the block index (d > 2) in :mod:`.block_index` and :mod:`.block_query`.
Callers: the kernels of :mod:`.seeded` and :mod:`.sec_pk` (numba cache: see
:mod:`locpriv.tabular._kernels`).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def _shell_build(  # noqa: PLR0917
    dp: FloatArray, nu: int, k: int, orig: IntArray, shell: IntArray, sdp: FloatArray
) -> tuple[int, float]:
    """The shell of a new pivot: the records with ``dp >= cut`` (original indices) into
    ``shell``, by decreasing dp (their dp into ``sdp``). ``cut`` leaves about 4 sqrt(nu k)
    records above it (a quantile of a sample of ~4096 dp values; any cut is correct, only the
    shell's size depends on it). Returns ``(nsh, cut)``."""
    msh = min(nu, max(64, int(4.0 * np.sqrt(nu * k))))
    cut = -1.0
    if msh < nu:
        st = max(1, nu // 4096)
        ns = (nu + st - 1) // st
        samp = np.empty(ns)
        for i in range(ns):
            samp[i] = dp[i * st]
        r = max(1, msh // st)
        cut = np.partition(samp, ns - r)[ns - r]
    nsh = 0
    for t in range(nu):
        if dp[t] >= cut:
            shell[nsh] = orig[t]
            sdp[nsh] = dp[t]
            nsh += 1
    order = np.argsort(-sdp[:nsh])
    so = shell[:nsh][order]
    sd = sdp[:nsh][order]
    shell[:nsh] = so
    sdp[:nsh] = sd
    return nsh, cut


@numba.njit(cache=True, nogil=True)
def _shell_head(shell: IntArray, head: int, nsh: int, labels: IntArray) -> int:
    """Skip the shell's leading assigned records: ``shell[head]`` (if ``head < nsh``) is then
    the live record of largest dp, ``head == nsh`` an empty shell."""
    while head < nsh and labels[shell[head]] >= 0:
        head += 1
    return head


@numba.njit(cache=True, nogil=True)
def _shell_furthest(  # noqa: PLR0917
    shell: IntArray,
    sdp: FloatArray,
    head: int,
    nsh: int,
    labels: IntArray,
    pos_of: IntArray,
    thr: float,
    XT: FloatArray,
    ref: FloatArray,
) -> tuple[int, float]:
    """Among the shell's live records with dp >= ``thr`` (a prefix of the sorted shell), the
    compact position and squared distance of the one furthest from ``ref`` (columns added in
    order; ties: lowest position, as the plain scan)."""
    d = XT.shape[0]
    best_v = -1.0
    best_t = -1
    for s in range(head, nsh):
        if sdp[s] < thr:
            break
        o = shell[s]
        if labels[o] >= 0:
            continue
        t = pos_of[o]
        a = 0.0
        for c in range(d):
            diff = XT[c, t] - ref[c]
            a += diff * diff
        if a > best_v or (a == best_v and t < best_t):
            best_v = a
            best_t = t
    return best_t, best_v


@numba.njit(cache=True, nogil=True)
def _chunk_dist(XT: FloatArray, i0: int, L: int, q: FloatArray, acc: FloatArray) -> None:
    """``acc[:L]`` = squared distances of compact records ``i0..i0+L-1`` to ``q`` (SIMD)."""
    # 1-D row slices: the loops over them vectorise (indexing XT[j, i0 + i] does not)
    r = XT[0, i0 : i0 + L]
    q0 = q[0]
    for i in range(L):
        t = r[i] - q0
        acc[i] = t * t
    for j in range(1, XT.shape[0]):
        qj = q[j]
        r = XT[j, i0 : i0 + L]
        for i in range(L):
            t = r[i] - qj
            acc[i] += t * t


_GRID_MIN = 2048  # records from which d <= 2 data get a grid index
_SLACK = 1e-9  # relative slack of the partial-distance bound (rounding error is ~1e-15)


@numba.njit(cache=True, nogil=True)
def _prune_cols(q: FloatArray, center: FloatArray) -> IntArray:
    """Columns by decreasing ``(q_j - center_j)**2``: where ``q`` lies furthest out, a partial
    distance over few columns already rules out most records."""
    d = q.shape[0]
    gap = np.empty(d)
    for j in range(d):
        gap[j] = -((q[j] - center[j]) ** 2)
    return np.argsort(gap, kind="mergesort").astype(np.int64)


@numba.njit(cache=True, nogil=True)
def _n_prune(d: int) -> int:
    """Columns of the partial-distance bound: about a third of them, at least one, at most 4."""
    return max(1, min(4, d // 3))


@numba.njit(cache=True, nogil=True)
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
    if thr == np.inf:
        _chunk_dist(XT, i0, L, q, part)
        for i in range(L):
            surv[i] = i
            acc[i] = part[i]
        return L
    j0 = cols[0]
    q0 = q[j0]
    r = XT[j0, i0 : i0 + L]
    for i in range(L):
        t = r[i] - q0
        part[i] = t * t
    for u in range(1, J):
        j = cols[u]
        qj = q[j]
        r = XT[j, i0 : i0 + L]
        for i in range(L):
            t = r[i] - qj
            part[i] += t * t
    # part < lim, as part <= the largest double below lim
    cut = np.nextafter(thr * (1.0 + 4.0 * _SLACK), -np.inf)
    return _survivors(XT, i0, L, q, part, cut, surv, acc)


@numba.njit(cache=True, nogil=True)
def _survivors(  # noqa: PLR0917
    XT: FloatArray,
    i0: int,
    L: int,
    q: FloatArray,
    part: FloatArray,
    cut: float,
    surv: IntArray,
    acc: FloatArray,
) -> int:
    """The records ``i0..i0+L-1`` whose lower bound ``part`` is at most ``cut``: their offsets
    to ``surv`` (in order) and their exact squared distances to ``q`` (columns added in order
    0..d-1, bit-identical to :func:`_chunk_dist`) to ``acc``; returns how many."""
    d = XT.shape[0]
    ns = 0
    for i in range(L):
        surv[ns] = i
        ns += part[i] <= cut
    for s in range(ns):
        i = i0 + surv[s]
        a = 0.0
        for j in range(d):
            t = XT[j, i] - q[j]
            a += t * t
        acc[s] = a
    return ns


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
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
