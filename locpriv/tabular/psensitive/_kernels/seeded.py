"""Kernel of the seeded heuristic of Solanas, Sebé & Domingo-Ferrer (2008) (see
:func:`locpriv.tabular.psensitive.seeded.seeded_groups` and docs/tabular.md for the walk in stages,
the sorted pivot shell and the nearest-record indexes it uses)."""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from locpriv.tabular._kernels.block_index import _BK_MIN, _bk_build, _bk_remove
from locpriv.tabular._kernels.block_query import _bk_knn
from locpriv.tabular._kernels.knn import (
    _CHUNK,
    _chunk_dist,
    _knn,
    _shell_build,
    _shell_furthest,
    _shell_head,
)
from locpriv.tabular._kernels.knn_grid import _grid_index, _grid_remove, _knn_grid

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@numba.njit(cache=True, nogil=True)
def _seeded_kernel(  # noqa: PLR0917
    X: FloatArray,
    S: IntArray,
    nvals: IntArray,
    k: int,
    p: int,
    mode: int,
    rnd: FloatArray,
    blocks: bool = True,
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
    # guesses (for the plain pass) of the squared distance to the nearest record (Algorithm
    # 3's seed) and to the last candidate of each stage of the walk
    g1 = np.inf
    gk = np.full(2, np.inf)
    acc = np.empty(_CHUNK)
    # pivot for the furthest-from-centroid search: dp[t] = d(x_t, pv) (not squared)
    dp = np.zeros(n)
    pv = np.empty(d)
    have_pivot = False
    # original indices of the records with dp >= cut, by decreasing dp (sdp); the assigned ones
    # before ``head`` are skipped for good
    shell = np.empty(n, dtype=np.int64)
    sdp = np.empty(n)
    nsh = 0
    head = 0
    cut = np.inf
    pos_of = np.arange(n)  # position of each original record in the compact arrays
    # low dimensions: a grid over the data's box answers the k-nearest queries by rings of cells
    use_grid, G, cellid, gslot, cm, cstart, ccnt, gw = _grid_index(XT, lo, hi)
    # otherwise (while n >= _BK_MIN) a block index answers them; rebuilt when half the records
    # it was built on are gone
    use_bk = blocks and not use_grid and n >= _BK_MIN
    ix, ws = _bk_build(XT, n if use_bk else 0, orig, n)
    bk_n = n
    g = 0
    while nu >= k and udist.min() >= p:
        if use_bk and 2 * nu < bk_n:
            use_bk = nu >= _BK_MIN
            if use_bk:
                ix, ws = _bk_build(XT, nu, orig, n)
                bk_n = nu
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
            head = _shell_head(shell, head, nsh, labels)
            maxdp = sdp[head] if head < nsh else 0.0
            thr = maxdp - 2.0 * delta - 1e-12 * (1.0 + maxdp)
            if not have_pivot or head == nsh or delta > 0.05 * maxdp or thr < cut:
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
                nsh, cut = _shell_build(dp, nu, k, orig, shell, sdp)
                head = 0
            else:
                # d(x, c) <= dp + delta and the record of max dp has d >= maxdp - delta, so the
                # furthest record has dp >= thr >= cut: it is in the shell. Ties: lowest position
                best_t, _ = _shell_furthest(shell, sdp, head, nsh, labels, pos_of, thr, XT, ref)
        else:  # Algorithm 3: nearest to a uniform random vector over the attribute ranges
            for c in range(d):
                ref[c] = lo[c] + rnd[g, c] * (hi[c] - lo[c])
            for c in range(d):
                cen[c] = sumx[c] / nu
            got = -1
            if use_grid:
                got = _knn_grid(XT, nu, ref, -1, 1, hd, ht, lo, gw, G, cstart, ccnt, cm)
            elif use_bk:
                got = _bk_knn(ix, ws, ref, -1, 1, hd, ht, pos_of, cen, g1)
            if got < 0:
                _knn(XT, nu, ref, -1, 1, cen, hd, ht, g1)
            best_t = ht[0]
            g1 = 2.0 * hd[0]
        for c in range(d):
            xs[c] = XT[c, best_t]
        # --- the walk over the records by increasing (distance to the seed, position), seed
        # first. It is sequential and (see docs/tabular.md) completes the group within a prefix
        # of the order or not at all, so it runs on the k+1 nearest first, then on the cap
        # nearest, and only then on the whole remainder, sorted
        for c in range(d):
            cen[c] = sumx[c] / nu
        done = False
        nmem = 0
        stage = 0
        while True:
            if stage < 2:
                cq = k + 1 if stage == 0 else cap
                size = -1
                if use_grid:
                    size = _knn_grid(XT, nu, xs, best_t, cq, hd, ht, lo, gw, G, cstart, ccnt, cm)
                elif use_bk:
                    size = _bk_knn(ix, ws, xs, orig[best_t], cq, hd, ht, pos_of, cen, gk[stage])
                if size < 0:
                    size = _knn(XT, nu, xs, best_t, cq, cen, hd, ht, gk[stage])
                if size == cq:
                    gk[stage] = 1.5 * hd[cq - 1]
                order = ht[:size].copy()
            else:  # every unassigned record, sorted by distance to the seed
                dist = np.empty(nu)
                for i0 in range(0, nu, _CHUNK):
                    L = min(_CHUNK, nu - i0)
                    _chunk_dist(XT, i0, L, xs, acc)
                    for i in range(L):
                        dist[i0 + i] = acc[i]
                dist[best_t] = -1.0
                order = np.argsort(dist, kind="mergesort")
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
            stage += 1
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
            if use_bk:
                _bk_remove(ix, orig[t])
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
