"""Kernel of ``sec-pk``, locpriv's SEC-split variant of p-sensitive clustering; see
:func:`locpriv.tabular.psensitive.sec_pk.sec_pk_clustering` and docs/tabular.md."""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from locpriv.tabular._kernels.block_index import _BK_MIN, _bk_build, _bk_remove
from locpriv.tabular._kernels.block_query import _bk_query
from locpriv.tabular._kernels.knn import (
    _CHUNK,
    _chunk_dist,
    _chunk_pruned,
    _insert_sorted,
    _n_prune,
    _prune_cols,
    _shell_build,
    _shell_furthest,
    _shell_head,
)
from locpriv.tabular._kernels.knn_grid import _grid_index, _grid_pass, _grid_remove

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@numba.njit(cache=True, nogil=True)
def _hom(XT: FloatArray, i: int, gmin: FloatArray, gmax: FloatArray, inv: FloatArray) -> float:
    """Increase of sum_j (max_j - min_j)/range_j when record i (column of XT) joins a group."""
    acc = 0.0
    for c in range(XT.shape[0]):
        x = XT[c, i]
        if x < gmin[c]:
            acc += (gmin[c] - x) * inv[c]
        elif x > gmax[c]:
            acc += (x - gmax[c]) * inv[c]
    return acc


@numba.njit(cache=True, nogil=True)
def _epk_kernel(  # noqa: PLR0917
    X: FloatArray,
    S: IntArray,
    sec: IntArray,
    nsec: int,
    k: int,
    p: int,
    nc: int,
    blocks: bool = True,
) -> IntArray:
    n, d = X.shape
    m = S.shape[1]
    maxv = 1
    for i in range(n):
        for j in range(m):
            maxv = max(maxv, S[i, j] + 1)
    labels = -np.ones(n, dtype=np.int64)
    inv = np.empty(d)
    for c in range(d):
        lo = X[:, c].min()
        hi = X[:, c].max()
        inv[c] = 1.0 / (hi - lo) if hi > lo else 0.0
    XT = np.ascontiguousarray(X.T)
    acc = np.empty(_CHUNK)
    secc = sec.copy()
    orig = np.arange(n)
    nu = n
    rem = np.zeros(nsec, dtype=np.int64)
    for i in range(n):
        rem[sec[i]] += 1
    sumx = np.zeros(d)
    for i in range(n):
        for c in range(d):
            sumx[c] += X[i, c]
    want = np.zeros(nsec, dtype=np.bool_)
    inp = np.zeros(nsec, dtype=np.bool_)
    dp = np.zeros(n)
    pv = np.empty(d)
    have_pivot = False
    # low dimensions: a grid over the data's box answers the candidate pass by rings of cells
    glo = np.empty(d)
    ghi = np.empty(d)
    for c in range(d):
        glo[c] = X[:, c].min()
        ghi[c] = X[:, c].max()
    use_grid, G, cellid, gslot, cm, cstart, ccnt, gw = _grid_index(XT, glo, ghi)
    # otherwise (while n >= _BK_MIN) a block index answers it; rebuilt when half the records it
    # was built on are gone
    use_bk = blocks and not use_grid and n >= _BK_MIN
    ix, ws = _bk_build(XT, n if use_bk else 0, orig, n)
    bk_n = n
    # original indices of the records with dp >= cut, by decreasing dp (sdp); the assigned ones
    # before ``head`` are skipped for good
    shell = np.empty(n, dtype=np.int64)
    sdp = np.empty(n)
    nsh = 0
    head = 0
    cut = np.inf
    pos_of = np.arange(n)  # position of each original record in the compact arrays
    near_t = np.empty(nsec, dtype=np.int64)
    near_d = np.empty(nsec)
    cap = 4 * k + 4
    hd = np.empty(cap)
    ht = np.empty(cap, dtype=np.int64)
    used = np.zeros(n, dtype=np.bool_)  # by position, for the current cluster
    members = np.empty(n, dtype=np.int64)
    gmin = np.empty(d)
    gmax = np.empty(d)
    seen = np.zeros((m, maxv), dtype=np.bool_)
    cent = np.zeros((nc, d))
    xs = np.empty(d)
    cen = np.empty(d)
    part = np.empty(_CHUNK)
    surv = np.empty(_CHUNK, dtype=np.int64)
    J = _n_prune(d)
    bmin = np.zeros((nc, d))
    bmax = np.zeros((nc, d))
    gcand = np.inf  # guess of the candidate pass's bound for the block index: 1.5x the last kth
    for g in range(nc):
        if use_bk and 2 * nu < bk_n:
            use_bk = nu >= _BK_MIN
            if use_bk:
                ix, ws = _bk_build(XT, nu, orig, n)
                bk_n = nu
        C = nc - g - 1  # clusters still to build after this one
        # Split. Saturated SECs (r_v >= C + 1) lose a unit of the invariant's sum whether or not
        # this cluster takes one of their records; all but `slack` of them must be taken, the
        # largest first (harder-to-make-sensitive order). The other SECs of the cluster are free:
        # the nearest records of distinct SECs (BestMatch by distance to the seed).
        order = np.argsort(-rem, kind="mergesort")
        sb = -(C + 1) * p
        nsat = 0
        for v in range(nsec):
            sb += min(rem[v], C + 1)
            if rem[v] >= C + 1:
                nsat += 1
        forced = min(p, max(0, nsat - sb))
        top = order[:p]
        for v in top:
            want[v] = True
            near_d[v] = np.inf
            near_t[v] = -1
        for o in range(forced):
            inp[order[o]] = True  # temporarily: the forced SECs, for the seed search
        # seed: furthest from the unassigned records' average (among forced SECs if any)
        best_t = -1
        best_v = -1.0
        for c in range(d):
            xs[c] = sumx[c] / nu
        delta = 0.0
        maxdp = 0.0
        if forced == 0 and have_pivot:
            for c in range(d):
                delta += (pv[c] - xs[c]) ** 2
            delta = np.sqrt(delta)
            # maxdp over the live records: in the shell (records with dp >= cut) while it has any
            head = _shell_head(shell, head, nsh, labels)
            maxdp = sdp[head] if head < nsh else 0.0
        thr = maxdp - 2.0 * delta - 1e-12 * (1.0 + maxdp)
        if forced == 0 and have_pivot and head < nsh and delta <= 0.05 * maxdp and thr >= cut:
            # pivot pruning: d(x, c) <= dp + delta; the record of max dp has d >= maxdp - delta,
            # so the furthest record has dp >= thr >= cut: it is in the shell (ties: lowest
            # position, as the plain scan)
            best_t, best_v = _shell_furthest(shell, sdp, head, nsh, labels, pos_of, thr, XT, xs)
        else:
            if forced == 0:  # (re)build the pivot at the current average
                for c in range(d):
                    pv[c] = xs[c]
                have_pivot = True
            for i0 in range(0, nu, _CHUNK):
                L = min(_CHUNK, nu - i0)
                _chunk_dist(XT, i0, L, xs, acc)
                if forced == 0:
                    for i in range(L):
                        dp[i0 + i] = np.sqrt(acc[i])
                mx = acc[0]
                for i in range(1, L):
                    mx = max(mx, acc[i])
                if mx <= best_v:
                    continue
                for i in range(L):
                    if acc[i] > best_v and (forced == 0 or inp[secc[i0 + i]]):
                        best_v = acc[i]
                        best_t = i0 + i
            if forced == 0:  # the shell: the ~4 sqrt(nu k) records furthest from the pivot
                nsh, cut = _shell_build(dp, nu, k, orig, shell, sdp)
                head = 0
        for o in range(forced):
            inp[order[o]] = False
        # one pass: nearest record of every wanted SEC and the nearest candidates overall
        size = 0
        kth = np.inf
        for c in range(d):
            cen[c] = sumx[c] / nu
            xs[c] = XT[c, best_t]
        cols = _prune_cols(xs, cen)
        wmax = np.inf
        gsize = -1
        if use_grid:
            gsize = _grid_pass(
                XT,
                nu,
                xs,
                best_t,
                cap,
                hd,
                ht,
                secc,
                top,
                rem,
                near_d,
                near_t,
                glo,
                gw,
                G,
                cstart,
                ccnt,
                cm,
            )
            if gsize < 0:  # too sparse around the seed: the plain pass, from scratch
                for v in top:
                    near_d[v] = np.inf
                    near_t[v] = -1
            else:
                size = gsize
        elif use_bk:
            size = _bk_query(
                ix,
                ws,
                xs,
                orig[best_t],
                cap,
                hd,
                ht,
                pos_of,
                cen,
                sec,
                top,
                rem,
                near_d,
                near_t,
                gcand,
            )
            gsize = size
        for i0 in range(0, nu if gsize < 0 else 0, _CHUNK):
            L = min(_CHUNK, nu - i0)
            # records at least lim away change nothing below (lim only shrinks): pruned
            lim = max(kth, wmax)
            ns = _chunk_pruned(XT, i0, L, xs, cols, J, lim, part, surv, acc)
            self_here = i0 <= best_t < i0 + L
            for s in range(ns + 1):
                if s < ns:
                    a = acc[s]
                    t = i0 + surv[s]
                    if t == best_t:
                        self_here = False
                        a = -1.0
                elif self_here:  # the seed was pruned (lim <= 0): it still counts
                    t = best_t
                    a = -1.0
                else:
                    break
                if a >= lim:
                    continue
                v = secc[t]
                if want[v] and a < near_d[v]:
                    near_d[v] = a
                    near_t[v] = t
                    wmax = -1.0
                    for w in top:
                        wmax = max(wmax, near_d[w])
                if a < kth:
                    size = _insert_sorted(hd, ht, size, cap, a, t)
                    if size == cap:
                        kth = hd[cap - 1]
                lim = max(kth, wmax)
        if size == cap:
            gcand = 1.5 * hd[cap - 1]
        nmem = 0
        for o in range(forced):
            v = order[o]
            t = near_t[v]
            members[nmem] = t
            nmem += 1
            used[t] = True
            inp[v] = True
        for o in range(size):
            if nmem >= p:
                break
            t = ht[o]
            if not used[t] and not inp[secc[t]]:
                members[nmem] = t
                nmem += 1
                used[t] = True
                inp[secc[t]] = True
        for v in top:
            if nmem >= p:
                break
            if not inp[v] and near_t[v] >= 0:
                members[nmem] = near_t[v]
                nmem += 1
                used[near_t[v]] = True
                inp[v] = True
        for v in top:
            want[v] = False
        for o in range(nmem):
            v = secc[members[o]]
            inp[v] = False
            rem[v] -= 1
        for c in range(d):
            gmin[c] = np.inf
            gmax[c] = -np.inf
        for o in range(nmem):
            t = members[o]
            for c in range(d):
                gmin[c] = min(gmin[c], XT[c, t])
                gmax[c] = max(gmax[c], XT[c, t])
            for j in range(m):
                seen[j, S[orig[t], j]] = True
        # slack of the invariant for the C clusters still to build
        slack = -C * p
        for v in range(nsec):
            slack += min(rem[v], C)
        # BestMatch fill up to k from the candidate buffer (then from everything if needed)
        for sweep in range(2):
            if nmem >= k:
                break
            cand = ht[:size].copy() if sweep == 0 else np.arange(nu)
            while nmem < k:
                bt = -1
                bdiv = -1
                bhom = np.inf
                for o in range(cand.size):
                    t = cand[o]
                    if used[t]:
                        continue
                    v = secc[t]
                    if rem[v] <= C and slack <= 0:
                        continue
                    div = 0
                    for j in range(m):
                        if not seen[j, S[orig[t], j]]:
                            div += 1
                    hom = _hom(XT, t, gmin, gmax, inv)
                    if div > bdiv or (div == bdiv and hom < bhom):
                        bt = t
                        bdiv = div
                        bhom = hom
                if bt < 0:
                    break
                members[nmem] = bt
                nmem += 1
                used[bt] = True
                v = secc[bt]
                if rem[v] <= C:
                    slack -= 1
                rem[v] -= 1
                for c in range(d):
                    gmin[c] = min(gmin[c], XT[c, bt])
                    gmax[c] = max(gmax[c], XT[c, bt])
                for j in range(m):
                    seen[j, S[orig[bt], j]] = True
        for o in range(nmem):
            t = members[o]
            for j in range(m):
                seen[j, S[orig[t], j]] = False
        for c in range(d):
            bmin[g, c] = gmin[c]
            bmax[g, c] = gmax[c]
        # commit: swap-remove in descending positions
        pos = np.sort(members[:nmem])[::-1]
        for o in range(nmem):
            t = pos[o]
            used[t] = False
            labels[orig[t]] = g
            for c in range(d):
                cent[g, c] += XT[c, t] / nmem
                sumx[c] -= XT[c, t]
            nu -= 1
            for c in range(d):
                XT[c, t] = XT[c, nu]
            if use_grid:
                _grid_remove(t, nu, cellid, cstart, ccnt, cm, gslot)
            if use_bk:
                _bk_remove(ix, orig[t])
            secc[t] = secc[nu]
            orig[t] = orig[nu]
            pos_of[orig[t]] = t
            dp[t] = dp[nu]
    # leftovers: BestMatch by Hom (IL increase) against the clusters' bounds, ties by distance
    for t in range(nu):
        best = 0
        bh = np.inf
        bd = np.inf
        for g in range(nc):
            h = _hom(XT, t, bmin[g], bmax[g], inv)
            if h <= bh:
                dd = 0.0
                for c in range(d):
                    diff = XT[c, t] - cent[g, c]
                    dd += diff * diff
                if h < bh or dd < bd:
                    bh = h
                    bd = dd
                    best = g
        labels[orig[t]] = best
    return labels
