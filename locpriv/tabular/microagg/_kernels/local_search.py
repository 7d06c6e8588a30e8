"""Numba kernels of the partition improver (see :mod:`locpriv.tabular.microagg.improve`).

A partition is held as ``lab`` (group of each record), ``cnt`` (group sizes), ``S`` (group
column sums), ``mem``/``slot`` (the members of each group, and each record's place there), so a
record moves in O(d). Every operator keeps every group within ``[k, kmax]`` records and only
applies changes that lower the within-group sum of squares (SSE) by more than ``tol``. The
neighbour graph is in :mod:`.neighbours`, V-MDAV in :mod:`.vmdav`; both share
``neighbours._d2`` (inlined: see the numba cache note of :mod:`locpriv.tabular._kernels`).
"""

from __future__ import annotations

import numba
import numpy as np

from locpriv.tabular.microagg._kernels.neighbours import _d2

# ---- partition state ---------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def build_state(X, lab, G, cap):  # type: ignore[no-untyped-def]
    """Sizes, column sums and member lists of the partition ``lab`` (groups 0..G-1)."""
    n, d = X.shape
    cnt = np.zeros(G, dtype=np.int64)
    S = np.zeros((G, d))
    mem = np.full((G, cap), -1, dtype=np.int64)
    slot = np.empty(n, dtype=np.int64)
    for i in range(n):
        g = lab[i]
        mem[g, cnt[g]] = i
        slot[i] = cnt[g]
        cnt[g] += 1
        for j in range(d):
            S[g, j] += X[i, j]
    return cnt, S, mem, slot


@numba.njit(cache=True, nogil=True)
def refresh_sums(X, lab, S):  # type: ignore[no-untyped-def]
    """Recompute the column sums (removes the drift of incremental updates)."""
    S[:] = 0.0
    for i in range(X.shape[0]):
        g = lab[i]
        for j in range(X.shape[1]):
            S[g, j] += X[i, j]


@numba.njit(cache=True, nogil=True, inline="always")
def _dc(X, i, S, g, cnt):  # type: ignore[no-untyped-def]
    """Squared distance of record ``i`` to the centroid of group ``g``."""
    a = 0.0
    inv = 1.0 / cnt[g]
    for j in range(X.shape[1]):
        t = X[i, j] - S[g, j] * inv
        a += t * t
    return a


@numba.njit(cache=True, nogil=True)
def _move(X, lab, cnt, S, mem, slot, i, b):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Move record ``i`` to group ``b``."""
    a = lab[i]
    s = slot[i]
    last = mem[a, cnt[a] - 1]
    mem[a, s] = last
    slot[last] = s
    mem[a, cnt[a] - 1] = -1
    cnt[a] -= 1
    mem[b, cnt[b]] = i
    slot[i] = cnt[b]
    cnt[b] += 1
    for j in range(X.shape[1]):
        S[a, j] -= X[i, j]
        S[b, j] += X[i, j]
    lab[i] = b


@numba.njit(cache=True, nogil=True)
def group_sse(X, cnt, S, mem, g):  # type: ignore[no-untyped-def]
    s = 0.0
    for t in range(cnt[g]):
        s += _dc(X, mem[g, t], S, g, cnt)
    return s


# ---- operators ---------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def sweep_records(X, lab, cnt, S, mem, slot, nbr, k, kmax, order, tol, stamp, rseen, clock):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """For each record (in ``order``): the best of moving it to the group of one of its
    neighbours, or swapping it with a member of such a group; applied if it lowers the SSE.

    ``ΔSSE(move x: a→b) = n_b/(n_b+1)·|x-c_b|² - n_a/(n_a-1)·|x-c_a|²`` and
    ``ΔSSE(swap x∈a, y∈b) = |y-c_a|² - |x-c_a|² - |x-y|²/n_a + |x-c_b|² - |y-c_b|² - |x-y|²/n_b``.

    A record is skipped when neither its group nor its neighbours' groups changed since it was
    last looked at: ``clock[0]`` counts changes, ``stamp[g]`` is the count at group g's last
    change, ``rseen[x]`` the count when x was last looked at.
    Returns (total ΔSSE, number of changes).
    """
    L = nbr.shape[1]
    seen = np.empty(L, dtype=np.int64)
    total = 0.0
    nchg = 0
    for oi in range(order.shape[0]):
        x = order[oi]
        a = lab[x]
        fresh = stamp[a] > rseen[x]
        for u in range(L):
            if fresh:
                break
            y = nbr[x, u]
            if y >= 0 and stamp[lab[y]] > rseen[x]:
                fresh = True
        if not fresh:
            continue
        rseen[x] = clock[0]
        na = cnt[a]
        dxa = _dc(X, x, S, a, cnt)
        best = -tol
        kind = 0
        bb = -1
        by = -1
        nseen = 0
        for u in range(L):
            y = nbr[x, u]
            if y < 0:
                continue
            b = lab[y]
            if b == a:
                continue
            dup = False
            for t in range(nseen):
                if seen[t] == b:
                    dup = True
                    break
            if dup:
                continue
            seen[nseen] = b
            nseen += 1
            nb = cnt[b]
            dxb = _dc(X, x, S, b, cnt)
            if na > k and nb < kmax:
                dm = nb / (nb + 1.0) * dxb - na / (na - 1.0) * dxa
                if dm < best:
                    best = dm
                    kind = 1
                    bb = b
            for t in range(nb):
                z = mem[b, t]
                dxz = _d2(X, x, z)
                ds = (_dc(X, z, S, a, cnt) - dxa - dxz / na) + (
                    dxb - _dc(X, z, S, b, cnt) - dxz / nb
                )
                if ds < best:
                    best = ds
                    kind = 2
                    bb = b
                    by = z
        if kind == 1:
            _move(X, lab, cnt, S, mem, slot, x, bb)
        elif kind == 2:
            _move(X, lab, cnt, S, mem, slot, x, bb)
            _move(X, lab, cnt, S, mem, slot, by, a)
        if kind > 0:
            clock[0] += 1
            stamp[a] = clock[0]
            stamp[bb] = clock[0]
            total += best
            nchg += 1
    return total, nchg


@numba.njit(cache=True, nogil=True)
def _best_cut(X, U, nu, lo_size, hi_size, w, proj, buf):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """Sort ``U[:nu]`` by projection on ``w``; the best cut into a prefix and a suffix with
    sizes in ``[lo_size, hi_size]``: returns (SSE of the two parts, prefix size or -1)."""
    d = X.shape[1]
    for t in range(nu):
        p = 0.0
        for j in range(d):
            p += X[U[t], j] * w[j]
        proj[t] = p
    o = np.argsort(proj[:nu], kind="mergesort")
    for t in range(nu):
        buf[t] = U[o[t]]
    U[:nu] = buf[:nu]
    tot = np.zeros(d)
    tot2 = 0.0
    for t in range(nu):
        for j in range(d):
            tot[j] += X[U[t], j]
            tot2 += X[U[t], j] ** 2
    pre = np.zeros(d)
    pre2 = 0.0
    best = np.inf
    bs = -1
    for s in range(1, nu):
        i = U[s - 1]
        for j in range(d):
            pre[j] += X[i, j]
            pre2 += X[i, j] ** 2
        if s < lo_size or s > hi_size or nu - s < lo_size or nu - s > hi_size:
            continue
        na2 = 0.0
        nb2 = 0.0
        for j in range(d):
            na2 += pre[j] ** 2
            nb2 += (tot[j] - pre[j]) ** 2
        v = pre2 - na2 / s + (tot2 - pre2) - nb2 / (nu - s)
        if v < best:
            best = v
            bs = s
    return best, bs


@numba.njit(cache=True, nogil=True)
def best_two_split(X, U, nu, lo_size, hi_size, w, proj, buf, out, iters):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """A good split of the records ``U[:nu]`` into two groups with sizes in
    ``[lo_size, hi_size]``. For fixed sizes the best split is cut by a hyperplane (it maximises
    the distance between the two centroids), so: cut along ``w``, then along the line through
    the two centroids found, until the SSE stops falling. The split is left in ``out[:nu]``
    (first part first); returns (its SSE, first part's size or -1)."""
    d = X.shape[1]
    bestv = np.inf
    bests = -1
    for _ in range(iters):
        v, s = _best_cut(X, U, nu, lo_size, hi_size, w, proj, buf)
        if s < 0 or v >= bestv * (1.0 - 1e-12):
            break
        bestv = v
        bests = s
        out[:nu] = U[:nu]
        w[:] = 0.0
        for t in range(nu):
            f = 1.0 / s if t < s else -1.0 / (nu - s)
            for j in range(d):
                w[j] += X[U[t], j] * f
    return bestv, bests


@numba.njit(cache=True, nogil=True)
def sweep_pairs(X, lab, cnt, S, mem, slot, nbr, k, kmax, gorder, tol, iters, stamp, gseen, clock):  # type: ignore[no-untyped-def]  # noqa: PLR0917
    """For each group ``a`` and each group ``b`` holding a neighbour of one of a's members:
    re-split ``a ∪ b`` by :func:`best_two_split`; applied if it lowers the SSE. A pair is
    skipped when neither group changed since ``a``'s pairs were last looked at (``gseen[a]``;
    see :func:`sweep_records`). Returns (total ΔSSE, number of changes)."""
    d = X.shape[1]
    cap = 2 * kmax + 2
    U = np.empty(cap, dtype=np.int64)
    out = np.empty(cap, dtype=np.int64)
    buf = np.empty(cap, dtype=np.int64)
    proj = np.empty(cap)
    w = np.empty(d)
    adj = np.empty(nbr.shape[1] * kmax, dtype=np.int64)
    total = 0.0
    nchg = 0
    for oi in range(gorder.shape[0]):
        a = gorder[oi]
        if cnt[a] == 0:
            continue
        since = gseen[a]
        gseen[a] = clock[0]
        nadj = 0
        for t in range(cnt[a]):
            x = mem[a, t]
            for u in range(nbr.shape[1]):
                y = nbr[x, u]
                if y < 0:
                    continue
                b = lab[y]
                if b == a:
                    continue
                dup = False
                for v in range(nadj):
                    if adj[v] == b:
                        dup = True
                        break
                if not dup:
                    adj[nadj] = b
                    nadj += 1
        for v in range(nadj):
            b = adj[v]
            if stamp[a] <= since and stamp[b] <= since:
                continue
            nu = 0
            for t in range(cnt[a]):
                U[nu] = mem[a, t]
                nu += 1
            for t in range(cnt[b]):
                U[nu] = mem[b, t]
                nu += 1
            cur = group_sse(X, cnt, S, mem, a) + group_sse(X, cnt, S, mem, b)
            for j in range(d):
                w[j] = S[a, j] / cnt[a] - S[b, j] / cnt[b]
            v2, s = best_two_split(X, U, nu, k, kmax, w, proj, buf, out, iters)
            if s > 0 and v2 < cur - tol:
                # records changing sides, moved alternately so no group passes kmax + 1
                n1 = 0
                n2 = 0
                for t in range(nu):
                    i = out[t]
                    if t < s and lab[i] == b:
                        buf[n1] = i  # b -> a
                        n1 += 1
                    elif t >= s and lab[i] == a:
                        U[n2] = i  # a -> b
                        n2 += 1
                i1 = 0
                i2 = 0
                while i1 < n1 or i2 < n2:
                    if i1 < n1 and (i2 >= n2 or cnt[a] <= cnt[b]):
                        _move(X, lab, cnt, S, mem, slot, buf[i1], a)
                        i1 += 1
                    else:
                        _move(X, lab, cnt, S, mem, slot, U[i2], b)
                        i2 += 1
                clock[0] += 1
                stamp[a] = clock[0]
                stamp[b] = clock[0]
                total += v2 - cur
                nchg += 1
    return total, nchg


@numba.njit(cache=True, nogil=True)
def split_large(X, lab, k, iters):  # type: ignore[no-untyped-def]
    """Split every group of ``2k`` or more records in two (sizes >= k) until none is left;
    splitting never raises the SSE. Returns the number of groups (labels stay 0..G-1)."""
    n, d = X.shape
    G = 0
    for i in range(n):
        G = max(G, lab[i] + 1)
    order = np.argsort(lab, kind="mergesort")
    cnt = np.zeros(G + 1, dtype=np.int64)
    for i in range(n):
        cnt[lab[i] + 1] += 1
    start = np.cumsum(cnt)
    U = np.empty(n, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    buf = np.empty(n, dtype=np.int64)
    proj = np.empty(n)
    w = np.empty(d)
    # stack of (group, lo, hi) still to split, in arrays (at most n // k entries)
    st_g = np.empty(n // k + 1, dtype=np.int64)
    st_lo = np.empty_like(st_g)
    st_hi = np.empty_like(st_g)
    top = 0
    for g in range(G):
        if start[g + 1] - start[g] >= 2 * k:
            st_g[top] = g
            st_lo[top] = start[g]
            st_hi[top] = start[g + 1]
            top += 1
    while top > 0:
        top -= 1
        g = st_g[top]
        lo = st_lo[top]
        hi = st_hi[top]
        nu = hi - lo
        U[:nu] = order[lo:hi]
        # first direction: the principal axis, by a few power iterations
        mean = np.zeros(d)
        for t in range(nu):
            for j in range(d):
                mean[j] += X[U[t], j] / nu
        w[:] = 1.0
        for _ in range(8):
            nw = np.zeros(d)
            for t in range(nu):
                p = 0.0
                for j in range(d):
                    p += (X[U[t], j] - mean[j]) * w[j]
                for j in range(d):
                    nw[j] += p * (X[U[t], j] - mean[j])
            nrm = np.sqrt(np.sum(nw * nw))
            if nrm == 0:
                break
            w[:] = nw / nrm
        _, s = best_two_split(X, U, nu, k, nu - k, w, proj, buf, out, iters)
        if s < 0:  # all records identical: any cut will do
            out[:nu] = U[:nu]
            s = nu // 2
        order[lo:hi] = out[:nu]
        for t in range(s, nu):
            lab[out[t]] = G
        if s >= 2 * k:
            st_g[top] = g
            st_lo[top] = lo
            st_hi[top] = lo + s
            top += 1
        if nu - s >= 2 * k:
            st_g[top] = G
            st_lo[top] = lo + s
            st_hi[top] = hi
            top += 1
        G += 1
    return G
