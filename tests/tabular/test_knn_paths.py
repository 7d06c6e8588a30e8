"""The block-index and staged-walk code paths of the p-sensitive kernels give the plain results.

``_knn._bk_query`` (k-d tree blocks with bounding boxes, used when d > 2 and n >= _BK_MIN) must
return exactly what the plain pruned pass ``_knn._knn`` returns, ties included (the key is the
compact position, not the layout), also after records leave; the kernels of ``seeded.py`` and
``sec_pk.py`` must give identical labels with the index on and off, and the seeded walk
(k+1 nearest, then 4k+4, then everything sorted) must match a plain-Python version of the
algorithm when it has to widen.
"""

from __future__ import annotations

import numpy as np
import pytest

from locpriv.tabular._kernels.block_index import _BK_MIN, _bk_build, _bk_remove
from locpriv.tabular._kernels.block_query import _bk_knn, _bk_query
from locpriv.tabular._kernels.knn import _knn
from locpriv.tabular.checks import as_codes
from locpriv.tabular.psensitive._kernels.sec_pk import _epk_kernel
from locpriv.tabular.psensitive._kernels.seeded import _seeded_kernel
from locpriv.tabular.psensitive.kincrease import conditions
from locpriv.tabular.psensitive.sec_pk import _merge_loop, _merge_repair, _sec_ids
from locpriv.tabular.psensitive.seeded import seeded_groups


def _tied(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Rounded data (many exact ties of distances), a dense corner and a constant column."""
    X = np.round(rng.random((n, d)) * 4) / 4
    X[: n // 4] *= 0.01
    X[:, d - 1] = 0.5
    return X


def _plain_knn(
    XT: np.ndarray, nu: int, q: np.ndarray, self_t: int, cap: int
) -> tuple[np.ndarray, np.ndarray]:
    hd = np.empty(cap)
    ht = np.empty(cap, dtype=np.int64)
    size = _knn(XT, nu, q, self_t, cap, XT[:, :nu].mean(axis=1), hd, ht)
    return hd[:size].copy(), ht[:size].copy()


@pytest.mark.parametrize(("d", "tied"), [(3, True), (5, False), (9, True), (13, False)])
def test_block_query_equals_plain_pass_as_records_leave(d: int, tied: bool) -> None:
    rng = np.random.default_rng(d)
    n = 2500
    X = _tied(rng, n, d) if tied else rng.random((n, d))
    XT = np.ascontiguousarray(X.T)
    orig = np.arange(n)
    pos_of = np.arange(n)
    nu = n
    ix, ws = _bk_build(XT, nu, orig, n)
    sec = rng.integers(0, 6, n)
    for it in range(120):
        cap = int(rng.choice([1, 4, 16]))
        if it % 2:
            self_t = int(rng.integers(nu))
            q = XT[:, self_t].copy()
        else:
            self_t = -1
            q = rng.random(d) if not tied else np.round(rng.random(d) * 4) / 4
        want_d, want_t = _plain_knn(XT, nu, q, self_t, cap)
        hd = np.empty(cap)
        ht = np.empty(cap, dtype=np.int64)
        self_o = int(orig[self_t]) if self_t >= 0 else -1
        size = _bk_knn(ix, ws, q, self_o, cap, hd, ht, pos_of, XT[:, :nu].mean(axis=1))
        assert np.array_equal(hd[:size], want_d)
        assert np.array_equal(ht[:size], want_t)
        # a guess of the kth distance: too small (the query is repeated), exact, or larger
        kth = float(want_d[-1])
        for f in (0.25, 1.0, 4.0):
            size = _bk_knn(
                ix, ws, q, self_o, cap, hd, ht, pos_of, XT[:, :nu].mean(axis=1), f * max(kth, 0.01)
            )
            assert np.array_equal(hd[:size], want_d)
            assert np.array_equal(ht[:size], want_t)
        # with SECs: each wanted SEC's smallest (distance, position) live record
        top = rng.choice(6, size=2, replace=False).astype(np.int64)
        rem = np.bincount(sec[orig[:nu]], minlength=6).astype(np.int64)
        near_d = np.full(6, np.inf)
        near_t = np.full(6, -1, dtype=np.int64)
        guess = float(rng.choice([np.inf, 0.3 * max(kth, 0.01), 3.0 * max(kth, 0.01)]))
        size = _bk_query(
            ix, ws, q, self_o, cap, hd, ht, pos_of, XT[:, :nu].mean(axis=1), sec, top, rem,
            near_d, near_t, guess,
        )  # fmt: skip
        assert np.array_equal(ht[:size], want_t)
        dist = np.zeros(nu)  # columns added in order: the kernels' rounding
        for c in range(d):
            dist += (XT[c, :nu] - q[c]) ** 2
        if self_t >= 0:
            dist[self_t] = -1.0
        for v in top:
            cand = np.flatnonzero(sec[orig[:nu]] == v)
            best = cand[np.lexsort((cand, dist[cand]))[0]]
            assert near_t[v] == best
            assert near_d[v] == dist[best]
        # some records leave (swap-remove in the compact arrays, as the kernels do)
        for _ in range(int(rng.integers(1, 30))):
            if nu <= 20:
                break
            t = int(rng.integers(nu))
            _bk_remove(ix, int(orig[t]))
            nu -= 1
            XT[:, t] = XT[:, nu]
            orig[t] = orig[nu]
            pos_of[orig[t]] = t


def _kernel_args(X: np.ndarray, S: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    codes = np.ascontiguousarray(as_codes(S, X.shape[0]))
    nvals = codes.max(axis=0) + 1
    rnd = np.random.default_rng(7).random((X.shape[0] // k + 1, X.shape[1]))
    return codes, nvals, rnd


@pytest.mark.parametrize("seed", range(6))
def test_seeded_kernel_block_index_on_and_off(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(_BK_MIN + 200, 4 * _BK_MIN))
    d = int(rng.integers(3, 14))
    X = _tied(rng, n, d) if seed % 2 == 0 else rng.normal(size=(n, d))
    S = rng.integers(0, 4, (n, 1)) if seed < 4 else rng.integers(0, 3, (n, 2))
    k, p = (3, 2) if seed % 3 else (5, 3)
    codes, nvals, rnd = _kernel_args(X, S, k)
    for mode in (0, 1):
        on = _seeded_kernel(X, codes, nvals, k, p, mode, rnd, True)
        off = _seeded_kernel(X, codes, nvals, k, p, mode, rnd, False)
        assert np.array_equal(on, off)


@pytest.mark.parametrize("seed", range(6))
def test_sec_pk_kernel_block_index_on_and_off(seed: int) -> None:
    rng = np.random.default_rng(10 + seed)
    n = int(rng.integers(_BK_MIN + 200, 4 * _BK_MIN))
    d = int(rng.integers(3, 14))
    X = _tied(rng, n, d) if seed % 2 == 0 else rng.normal(size=(n, d))
    # skewed values (SECs run out late) or two confidential attributes
    skewed = np.minimum(rng.geometric(0.35, (n, 1)) - 1, 5)
    S = skewed if seed < 4 else rng.integers(0, 3, (n, 2))
    k, p = (3, 2) if seed % 3 else (5, 3)
    codes = np.ascontiguousarray(as_codes(S, n))
    _, sec = np.unique(codes, axis=0, return_inverse=True)
    sec = np.asarray(sec, dtype=np.int64).ravel()
    nc = max(1, min(conditions(codes, k, p).max_clusters, n // k))
    args = (X, codes, sec, int(sec.max()) + 1, k, p, nc)
    assert np.array_equal(_epk_kernel(*args, True), _epk_kernel(*args, False))


def _reference_walk(Z: np.ndarray, s: np.ndarray, k: int, p: int, rnd: np.ndarray) -> np.ndarray:
    """Plain Solanas et al. Algorithm 1 with the random seed (one confidential attribute)."""
    n = len(Z)
    lo, hi = Z.min(0), Z.max(0)
    alive = np.ones(n, bool)
    labels = -np.ones(n, np.int64)
    g = 0
    while alive.sum() >= k and len(np.unique(s[alive])) >= p:
        idx = np.flatnonzero(alive)
        v = lo + rnd[g] * (hi - lo)
        seed = idx[np.argmin(((Z[idx] - v) ** 2).sum(1))]
        rest = [o for o in idx[np.argsort(((Z[idx] - Z[seed]) ** 2).sum(1))] if o != seed]
        grp, vals = [seed], {s[seed]}
        while len(grp) < k or len(vals) < p:
            tight = len(vals) < p and len(grp) + (p - len(vals)) >= k
            pick = next(o for o in rest if s[o] not in vals) if tight else rest[0]
            rest.remove(pick)
            grp.append(pick)
            vals.add(s[pick])
        labels[grp] = g
        alive[grp] = False
        g += 1
    cent = np.array([Z[labels == a].mean(0) for a in range(g)])
    for i in np.flatnonzero(alive):
        labels[i] = np.argmin(((cent - Z[i]) ** 2).sum(1))
    return labels


@pytest.mark.parametrize("d", [2, 5])
def test_seeded_walk_widens_exactly(d: int) -> None:
    """Confidential values that depend on the position: most neighbourhoods hold one value, so
    the walk often needs more than the k+1 nearest, sometimes more than 4k+4 (the whole
    remainder sorted). No distance ties (continuous data), so the plain version's row-order
    tie-break does not matter."""
    rng = np.random.default_rng(d)
    n = 2400
    Z = rng.normal(size=(n, d))
    s = (Z[:, 0] > 0.8).astype(np.int64) + 2 * (rng.random(n) < 0.01)
    k, p = 3, 2
    got = seeded_groups(Z, s, k, p, seed_mode="random", rng=np.random.default_rng(3))
    rnd = np.random.default_rng(3).random((n // k + 1, d))
    assert np.array_equal(got, _reference_walk(Z, s, k, p, rnd))


def _reference_compact(  # noqa: PLR0917
    X: np.ndarray, S: np.ndarray, k: int, p: int, mode: int, rnd: np.ndarray
) -> np.ndarray:
    """Plain Python Algorithm 1 with the kernel's exact conventions, so that ties are decided
    alike: records in a compact array with swap-remove (members leave by decreasing position),
    ties by compact position, the column sums of the live records updated by subtraction,
    squared distances summed over the columns in order (Python floats round as float64)."""
    n, d = X.shape
    m = S.shape[1]
    rows = [list(map(float, X[i])) for i in range(n)]
    orig = list(range(n))
    sumx = [0.0] * d
    for i in range(n):
        for c in range(d):
            sumx[c] += rows[i][c]
    lo = [min(r[c] for r in rows) for c in range(d)]
    hi = [max(r[c] for r in rows) for c in range(d)]
    labels = [-1] * n

    def dist(a: list[float], b: list[float]) -> float:
        acc = 0.0
        for c in range(d):
            t = a[c] - b[c]
            acc += t * t
        return acc

    g = 0
    nu = n
    while nu >= k and all(len({int(S[o, j]) for o in orig[:nu]}) >= p for j in range(m)):
        if mode == 0:
            ref = [sumx[c] / nu for c in range(d)]
            seed = max(range(nu), key=lambda t: (dist(rows[orig[t]], ref), -t))
        else:
            ref = [lo[c] + float(rnd[g, c]) * (hi[c] - lo[c]) for c in range(d)]
            seed = min(range(nu), key=lambda t: (dist(rows[orig[t]], ref), t))
        xs = rows[orig[seed]]
        order = sorted(range(nu), key=lambda t: (-1.0 if t == seed else dist(rows[orig[t]], xs), t))
        members: list[int] = []
        seen: list[set[int]] = [set() for _ in range(m)]
        for t in order:
            deficit = max([0] + [p - len(seen[j]) for j in range(m)])
            adds = any(len(seen[j]) < p and int(S[orig[t], j]) not in seen[j] for j in range(m))
            if adds or len(members) + 1 + deficit <= k:
                members.append(t)
                for j in range(m):
                    seen[j].add(int(S[orig[t], j]))
                if len(members) >= k and all(len(seen[j]) >= p for j in range(m)):
                    break
        else:
            break
        for t in sorted(members, reverse=True):
            o = orig[t]
            labels[o] = g
            for c in range(d):
                sumx[c] -= rows[o][c]
            nu -= 1
            orig[t] = orig[nu]
        g += 1
    if g == 0:
        return np.zeros(n, dtype=np.int64)
    cent = [[0.0] * d for _ in range(g)]
    cnt = [0.0] * g
    for i in range(n):
        if labels[i] >= 0:
            cnt[labels[i]] += 1.0
            for c in range(d):
                cent[labels[i]][c] += rows[i][c]
    for a in range(g):
        for c in range(d):
            cent[a][c] /= cnt[a]
    for t in range(nu):
        o = orig[t]
        labels[o] = min(range(g), key=lambda a: (dist(rows[o], cent[a]), a))
    return np.asarray(labels, dtype=np.int64)


@pytest.mark.parametrize(("n", "d", "k", "p"), [(2300, 2, 3, 2), (1500, 4, 3, 2), (1300, 9, 5, 3)])
@pytest.mark.parametrize("mode", [0, 1])
def test_seeded_kernel_equals_compact_reference_with_ties(
    n: int, d: int, k: int, p: int, mode: int
) -> None:
    """Tied data through every path: grid (d <= 2, n >= 2048) or block index (d > 2,
    n >= _BK_MIN), the pivot shell (mode 0), the staged walk (values clustered in space)."""
    rng = np.random.default_rng(n + d + mode)
    X = np.round(rng.random((n, d)) * 6) / 6
    X[: n // 5] *= 0.02
    S = np.minimum(rng.geometric(0.3, (n, 1)) - 1, 4)
    S[X[:, 0] > 0.8] = 0  # a region of one value: the walk must widen
    codes, nvals, rnd = _kernel_args(X, S, k)
    got = _seeded_kernel(X, codes, nvals, k, p, mode, rnd, True)
    assert np.array_equal(got, _reference_compact(X, codes, k, p, mode, rnd))


def test_sec_ids_equal_numpy_unique_rows() -> None:
    rng = np.random.default_rng(5)
    for t in range(200):
        n = int(rng.integers(1, 200))
        m = int(rng.integers(1, 4))
        hi = 2000 if t % 5 == 0 else int(rng.integers(1, 12))  # large: the 1-D unique path
        codes = as_codes(rng.integers(0, hi, (n, m)), n)
        _, inv = np.unique(codes, axis=0, return_inverse=True)
        inv = np.asarray(inv, dtype=np.int64).ravel()
        sec, nsec = _sec_ids(codes)
        assert np.array_equal(sec, inv)
        assert nsec == int(inv.max()) + 1


def test_merge_repair_fast_path_equals_the_loop() -> None:
    rng = np.random.default_rng(6)
    for t in range(600):
        n = int(rng.integers(1, 60))
        k = int(rng.integers(1, 5))
        p = int(rng.integers(1, k + 1))
        X = rng.random((n, 2))
        codes = as_codes(rng.integers(0, int(rng.integers(1, 5)), (n, int(rng.integers(1, 3)))), n)
        g = int(rng.integers(1, max(2, n // k) + 1))
        labels = rng.integers(0, g, n)
        if t % 3 == 0:  # compact, equal-size groups: usually the fast path
            labels = np.repeat(np.arange(n // k + 1), k)[:n]
        labels = labels.astype(np.int64)
        got = _merge_repair(X, codes, labels, k, p)
        assert np.array_equal(got, _merge_loop(X, codes, labels, k, p))
        assert got.dtype == np.int64
