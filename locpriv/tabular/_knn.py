"""numba nearest-neighbour kernels shared by the p-sensitive methods.

Sorted-buffer inserts, chunked (SIMD) and partial-distance-pruned squared-distance passes, the
k-nearest queries over a compacted column-major copy, the grid index used when d <= 2 and the
block index (k-d tree leaves with bounding boxes) used when d > 2. Callers:
:mod:`locpriv.tabular.seeded` and :mod:`locpriv.tabular.enhanced_pk`.

Maintenance note: numba's on-disk cache only notices changes to the file that defines a function,
so after editing these kernels delete ``locpriv/tabular/__pycache__/{seeded,
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


@numba.njit(cache=True)
def _shell_head(shell: IntArray, head: int, nsh: int, labels: IntArray) -> int:
    """Skip the shell's leading assigned records: ``shell[head]`` (if ``head < nsh``) is then
    the live record of largest dp, ``head == nsh`` an empty shell."""
    while head < nsh and labels[shell[head]] >= 0:
        head += 1
    return head


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


# --- block index (d > 2) ----------------------------------------------------------------------
# The live records are copied, column by column, into ``BT`` in the leaf order of a k-d tree
# (median cuts on the widest column) and cut into blocks of at most a few hundred records; each
# block keeps its live records at the front of its span and the bounding box of the records it
# held (tightened when a record on the box leaves). A query bounds every block from its box and
# computes distances only in blocks whose bound does not rule them out. The index is a tuple
# ``(BT, bidx, pblk, bstart, bcnt, blo, bhi, bpos)``: ``bidx[p]`` the original index at block
# position p, ``pblk[p]`` its block, ``bstart``/``bcnt`` the span start and live count of each
# block, ``blo``/``bhi`` (d × nb) the boxes and ``bpos[o]`` the block position of original
# record o. Ties are decided by the caller's compact position ``pos_of[o]``, the key of the
# plain passes, so a query's answer does not depend on the layout.

# records per block: at most 512 while the records number <= 32768 (the bounds prune little
# there, and larger blocks cost less per record), else at most 256 (100k x 13 uniform: ~5 %
# faster than 512; 128 was slower at both sizes)
_BLOCK = 256
_BLOCK_SMALL_N = 512
_SMALL_N = 32768
_BK_MIN = 1024  # live records from which the block index is used
_BK_SEEDS = 4  # blocks visited first: the nearest boxes


@numba.njit(cache=True)
def _kd_order(XT: FloatArray, nu: int, B: int, perm: IntArray, starts: IntArray) -> int:
    """Leaf order of a k-d tree over the compact records ``0..nu-1`` into ``perm[:nu]``.

    Median cuts (a selection, linear per level) on the widest column of each node; leaves hold
    at most ``B`` records. Writes the leaf starts to ``starts`` and returns the number of leaves.
    """
    d = XT.shape[0]
    for t in range(nu):
        perm[t] = t
    cap = 2 * (nu // max(B, 1)) + 4
    st_lo = np.empty(cap, dtype=np.int64)
    st_hi = np.empty(cap, dtype=np.int64)
    key = np.empty(nu)
    tmp = np.empty(nu, dtype=np.int64)
    nb = 0
    top = 1
    st_lo[0] = 0
    st_hi[0] = nu
    while top > 0:
        top -= 1
        lo = st_lo[top]
        hi = st_hi[top]
        if hi - lo <= B:
            starts[nb] = lo
            nb += 1
            continue
        jw = 0
        wbest = -1.0
        for j in range(d):
            mn = np.inf
            mx = -np.inf
            for t in range(lo, hi):
                v = XT[j, perm[t]]
                mn = min(mn, v)
                mx = max(mx, v)
            if mx - mn > wbest:
                wbest = mx - mn
                jw = j
        for t in range(lo, hi):
            key[t] = XT[jw, perm[t]]
        mid = (lo + hi) // 2
        kv = np.partition(key[lo:hi], mid - lo)[mid - lo]
        # stable three-way split: below kv, then kv (as many as fit left of mid), then above
        a = lo
        for t in range(lo, hi):
            if key[t] < kv:
                tmp[a] = perm[t]
                a += 1
        for t in range(lo, hi):
            if key[t] == kv:
                tmp[a] = perm[t]
                a += 1
        for t in range(lo, hi):
            if key[t] > kv:
                tmp[a] = perm[t]
                a += 1
        for t in range(lo, hi):
            perm[t] = tmp[t]
        st_lo[top] = mid  # right half popped after the left one: leaves in left-to-right order
        st_hi[top] = hi
        top += 1
        st_lo[top] = lo
        st_hi[top] = mid
        top += 1
    return nb


@numba.njit(cache=True)
def _bk_box(  # noqa: PLR0917
    BT: FloatArray, p0: int, cnt: int, b: int, blo: FloatArray, bhi: FloatArray
) -> None:
    """Bounding box of the live records ``p0 .. p0+cnt-1`` into block ``b`` (empty: +-inf,
    so every bound to it is inf)."""
    for j in range(BT.shape[0]):
        mn = np.inf
        mx = -np.inf
        r = BT[j, p0 : p0 + cnt]
        for i in range(cnt):
            mn = min(mn, r[i])
            mx = max(mx, r[i])
        blo[j, b] = mn
        bhi[j, b] = mx


@numba.njit(cache=True)
def _bk_build(XT: FloatArray, nu: int, orig: IntArray, n: int):  # type: ignore[no-untyped-def]
    """Block index of the compact live records ``0..nu-1`` (``orig``: their original indices,
    out of ``n``) and the workspace of its queries: returns ``(ix, ws)``."""
    d = XT.shape[0]
    perm = np.empty(nu, dtype=np.int64)
    B = _BLOCK_SMALL_N if nu <= _SMALL_N else _BLOCK
    starts = np.empty(2 * (nu // B) + 4, dtype=np.int64)
    nb = _kd_order(XT, nu, B, perm, starts)
    BT = np.empty((d, nu))
    bidx = np.empty(nu, dtype=np.int64)
    pblk = np.empty(nu, dtype=np.int64)
    bpos = np.full(n, -1, dtype=np.int64)
    for j in range(d):
        for p in range(nu):
            BT[j, p] = XT[j, perm[p]]
    for p in range(nu):
        o = orig[perm[p]]
        bidx[p] = o
        bpos[o] = p
    bstart = np.empty(nb + 1, dtype=np.int64)
    bstart[:nb] = starts[:nb]
    bstart[nb] = nu
    bcnt = np.empty(nb, dtype=np.int64)
    blo = np.empty((d, nb))
    bhi = np.empty((d, nb))
    for b in range(nb):
        bcnt[b] = bstart[b + 1] - bstart[b]
        for p in range(bstart[b], bstart[b + 1]):
            pblk[p] = b
        _bk_box(BT, bstart[b], bcnt[b], b, blo, bhi)
    # query workspace (allocated once per build): box bounds, visit stamps, seeds, block buffers
    bmax = max(_BLOCK, _BLOCK_SMALL_N)
    mind = np.empty(nb)
    vis = np.zeros(nb, dtype=np.int64)
    stamp = np.zeros(1, dtype=np.int64)
    seeds = np.empty(_BK_SEEDS + 1, dtype=np.int64)
    part = np.empty(bmax)
    surv = np.empty(bmax, dtype=np.int64)
    acc = np.empty(bmax)
    cols = np.empty(d, dtype=np.int64)
    gap = np.empty(d)
    ws = (mind, vis, stamp, seeds, part, surv, acc, cols, gap)
    return (BT, bidx, pblk, bstart, bcnt, blo, bhi, bpos), ws


@numba.njit(cache=True)
def _bk_remove(ix, o: int) -> None:  # type: ignore[no-untyped-def]
    """Original record ``o`` leaves the index (swap-remove within its block)."""
    BT, bidx, pblk, bstart, bcnt, blo, bhi, bpos = ix
    d = BT.shape[0]
    p = bpos[o]
    b = pblk[p]
    edge = False  # does the record lie on its block's box? (else the box stays valid and tight)
    for j in range(d):
        v = BT[j, p]
        if v == blo[j, b] or v == bhi[j, b]:
            edge = True
            break
    last = bstart[b] + bcnt[b] - 1
    if p != last:
        for j in range(d):
            BT[j, p] = BT[j, last]
        u = bidx[last]
        bidx[p] = u
        bpos[u] = p
    bpos[o] = -1
    bcnt[b] -= 1
    if edge:
        _bk_box(BT, bstart[b], bcnt[b], b, blo, bhi)


@numba.njit(cache=True)
def _bk_bounds(ix, q: FloatArray, mind: FloatArray) -> None:  # type: ignore[no-untyped-def]
    """``mind[b]`` = squared distance from ``q`` to block b's box (inf for an empty block).

    The columns are added in order 0..d-1 from 0.0, as the exact distances are, and every term
    is at most the matching term of any record in the box (rounding is monotone), so the
    computed distance of a record in block b is never below ``mind[b]``.
    """
    blo = ix[5]
    bhi = ix[6]
    d, nb = blo.shape
    for b in range(nb):
        mind[b] = 0.0
    for j in range(d):
        qj = q[j]
        lr = blo[j]
        hr = bhi[j]
        for b in range(nb):
            g = max(0.0, lr[b] - qj, qj - hr[b])
            mind[b] += g * g


@numba.njit(cache=True)
def _bk_seeds(mind: FloatArray, take: int, out: IntArray) -> int:
    """The ``take`` blocks of smallest ``mind`` (finite only), nearest first; returns how many."""
    cnt = 0
    for b in range(mind.shape[0]):
        v = mind[b]
        if v == np.inf or (cnt == take and v >= mind[out[cnt - 1]]):
            continue
        t = cnt if cnt < take else take - 1
        if cnt < take:
            cnt += 1
        while t > 0 and v < mind[out[t - 1]]:
            out[t] = out[t - 1]
            t -= 1
        out[t] = b
    return cnt


@numba.njit(cache=True)
def _key_insert(  # noqa: PLR0917
    hd: FloatArray, ht: IntArray, size: int, cap: int, dv: float, key: int
) -> int:
    """Insert (dv, key) into the (distance, key)-ascending buffer hd/ht (capacity ``cap``)."""
    if size == cap:
        if dv > hd[size - 1] or (dv == hd[size - 1] and key > ht[size - 1]):
            return size
        size -= 1
    j = size
    while j > 0 and (hd[j - 1] > dv or (hd[j - 1] == dv and ht[j - 1] > key)):
        hd[j] = hd[j - 1]
        ht[j] = ht[j - 1]
        j -= 1
    hd[j] = dv
    ht[j] = key
    return size + 1


@numba.njit(cache=True)
def _n_prune_bk(d: int) -> int:
    """Columns of the partial-distance bound in the block queries: about two thirds (at most 8)."""
    return max(1, min(8, (2 * d) // 3))


@numba.njit(cache=True)
def _bk_block_dist(  # noqa: PLR0917
    BT: FloatArray,
    p0: int,
    L: int,
    q: FloatArray,
    cols: IntArray,
    J: int,
    lim: float,
    part: FloatArray,
    surv: IntArray,
    acc: FloatArray,
) -> int:
    """The records ``p0..p0+L-1`` of a block whose squared distance to ``q`` may be at most
    ``lim``: their offsets to ``surv``, their exact squared distances (columns added in order
    0..d-1, bit-identical to :func:`_chunk_dist`) to ``acc``; returns how many.

    With ``lim = inf`` all records, in one vectorised pass. Otherwise a partial distance over
    ``cols[:J]`` (vectorised, four columns per sweep) is a lower bound: a record is dropped
    only if it exceeds ``lim`` by more than a relative slack far above rounding error.
    """
    d = BT.shape[0]
    if lim == np.inf:
        _chunk_dist(BT, p0, L, q, acc)
        for i in range(L):
            surv[i] = i
        return L
    for i in range(L):
        part[i] = 0.0
    u = 0
    while u + 4 <= J:
        j0 = cols[u]
        j1 = cols[u + 1]
        j2 = cols[u + 2]
        j3 = cols[u + 3]
        q0 = q[j0]
        q1 = q[j1]
        q2 = q[j2]
        q3 = q[j3]
        r0 = BT[j0, p0 : p0 + L]
        r1 = BT[j1, p0 : p0 + L]
        r2 = BT[j2, p0 : p0 + L]
        r3 = BT[j3, p0 : p0 + L]
        for i in range(L):
            t0 = r0[i] - q0
            t1 = r1[i] - q1
            t2 = r2[i] - q2
            t3 = r3[i] - q3
            part[i] += (t0 * t0 + t1 * t1) + (t2 * t2 + t3 * t3)
        u += 4
    while u < J:
        j0 = cols[u]
        q0 = q[j0]
        r0 = BT[j0, p0 : p0 + L]
        for i in range(L):
            t0 = r0[i] - q0
            part[i] += t0 * t0
        u += 1
    cut = lim * (1.0 + 4.0 * _SLACK)
    c = 0
    for i in range(L):
        c += part[i] <= cut
    if c == 0:
        return 0
    ns = 0
    for i in range(L):
        surv[ns] = i
        ns += part[i] <= cut
    for s in range(ns):
        i = p0 + surv[s]
        a = 0.0
        for j in range(d):
            t = BT[j, i] - q[j]
            a += t * t
        acc[s] = a
    return ns


@numba.njit(cache=True)
def _bk_query(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    ix,
    ws,
    q: FloatArray,
    self_o: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    pos_of: IntArray,
    center: FloatArray,
    sec: IntArray,
    top: IntArray,
    rem: IntArray,
    near_d: FloatArray,
    near_t: IntArray,
    guess: float = np.inf,
) -> int:
    """:func:`_knn` through the block index: the ``cap`` smallest (squared distance, compact
    position) pairs of the live records into hd/ht (compact positions), original record
    ``self_o`` (if >= 0) first at distance -1. Returns the number kept.

    With a non-empty ``top`` (SEC ids; ``sec[o]`` the SEC of original record o, ``rem[v]`` the
    live records of SEC v) also, for each SEC v of ``top``, the smallest (distance, position)
    pair of its live records (``self_o`` at -1) into ``near_d[v]``/``near_t[v]``, which the
    caller set to (inf, -1): the candidate pass of :mod:`locpriv.tabular.enhanced_pk`.

    The plain pass keeps exactly these pairs (records arrive in position order and a later one
    wins only if strictly nearer); here records arrive block by block and win by the same
    (distance, position) key. A block is skipped only if its box bound exceeds both the kth
    distance and every wanted SEC's nearest (no record in it can change anything, ties
    included), a record only if its partial distance does, by more than the slack.

    ``guess`` (a guess of the final bound, e.g. from the previous query) prunes from the first
    block on; if the kth distance or a wanted SEC's nearest does not end below it, the query is
    repeated without it (as :func:`_knn_range` does).
    """
    BT, bidx, pblk, bstart, bcnt, _, _, bpos = ix
    mind, vis, stamp, seeds, part, surv, acc, cols, gap = ws
    nb = bcnt.shape[0]
    ntop = top.shape[0]
    d = BT.shape[0]
    # columns by decreasing (q_j - center_j)**2 (insertion sort; any order is correct)
    for j in range(d):
        g = (q[j] - center[j]) ** 2
        u = j
        while u > 0 and gap[u - 1] < g:
            gap[u] = gap[u - 1]
            cols[u] = cols[u - 1]
            u -= 1
        gap[u] = g
        cols[u] = j
    J = _n_prune_bk(d)
    _bk_bounds(ix, q, mind)
    nseed = 0
    if self_o >= 0:
        seeds[0] = pblk[bpos[self_o]]
        nseed = 1
    nseed += _bk_seeds(mind, _BK_SEEDS, seeds[nseed:])
    size = 0
    for attempt in range(2):
        gs = guess if attempt == 0 else np.inf
        if attempt == 1:  # the guess was too small: again without it, from scratch
            for w in range(ntop):
                near_d[top[w]] = np.inf
                near_t[top[w]] = -1
        stamp[0] += 1
        st = stamp[0]
        size = 0
        kth = np.inf
        if self_o >= 0:
            ks = pos_of[self_o]
            size = _key_insert(hd, ht, size, cap, -1.0, ks)
            if size == cap:
                kth = hd[cap - 1]
            for w in range(ntop):
                if top[w] == sec[self_o]:
                    near_d[top[w]] = -1.0
                    near_t[top[w]] = ks
        # the wanted SECs' nearest bound the pass too (SECs without live records are not
        # waited for)
        wmax = -np.inf
        for w in range(ntop):
            if rem[top[w]] > 0:
                wmax = max(wmax, near_d[top[w]])
        lim = min(max(kth, wmax), gs)
        for step in range(nseed + nb):
            b = seeds[step] if step < nseed else step - nseed
            if vis[b] == st:
                continue
            vis[b] = st
            if mind[b] > lim or bcnt[b] == 0:
                continue
            p0 = bstart[b]
            ns = _bk_block_dist(BT, p0, bcnt[b], q, cols, J, lim, part, surv, acc)
            for s in range(ns):
                a = acc[s]
                if a > lim:
                    continue
                o = bidx[p0 + surv[s]]
                if o == self_o:
                    continue
                key = pos_of[o]
                if ntop > 0:
                    v = sec[o]
                    for w in range(ntop):
                        if top[w] == v and (a < near_d[v] or (a == near_d[v] and key < near_t[v])):
                            near_d[v] = a
                            near_t[v] = key
                            wmax = -np.inf
                            for w2 in range(ntop):
                                if rem[top[w2]] > 0:
                                    wmax = max(wmax, near_d[top[w2]])
                if a <= kth:
                    size = _key_insert(hd, ht, size, cap, a, key)
                    if size == cap:
                        kth = hd[cap - 1]
                lim = min(max(kth, wmax), gs)
        if gs == np.inf:
            break
        # every record left out is further than the guess (its box bound, partial distance
        # or distance exceeds it), so the answer stands if the kth and every wanted SEC's
        # nearest ended strictly below the guess
        ok = size == cap and hd[cap - 1] < gs
        for w in range(ntop):
            if rem[top[w]] > 0 and not near_d[top[w]] < gs:
                ok = False
        if ok:
            break
    return size


@numba.njit(cache=True)
def _bk_knn(  # type: ignore[no-untyped-def]  # noqa: PLR0917
    ix,
    ws,
    q: FloatArray,
    self_o: int,
    cap: int,
    hd: FloatArray,
    ht: IntArray,
    pos_of: IntArray,
    center: FloatArray,
    guess: float = np.inf,
) -> int:
    """:func:`_bk_query` without SECs: the ``cap`` nearest live records (see there)."""
    none = np.empty(0, dtype=np.int64)
    return _bk_query(
        ix,
        ws,
        q,
        self_o,
        cap,
        hd,
        ht,
        pos_of,
        center,
        none,
        none,
        none,
        np.empty(0),
        none,
        guess,
    )
