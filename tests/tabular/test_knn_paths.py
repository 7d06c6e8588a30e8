"""The block-index and staged-walk code paths of the p-sensitive kernels give the plain results.

``_knn._bk_query`` (k-d tree blocks with bounding boxes, used when d > 2 and n >= _BK_MIN) must
return exactly what the plain pruned pass ``_knn._knn`` returns, ties included (the key is the
compact position, not the layout), also after records leave; the kernels of ``seeded.py`` and
``enhanced_pk.py`` must give identical labels with the index on and off, and the seeded walk
(k+1 nearest, then 4k+4, then everything sorted) must match a plain-Python version of the
algorithm when it has to widen.
"""

from __future__ import annotations

import numpy as np
import pytest

from locpriv.tabular._knn import _BK_MIN, _bk_build, _bk_knn, _bk_query, _bk_remove, _knn
from locpriv.tabular.enhanced_pk import _epk_kernel
from locpriv.tabular.psensitive import _as_codes, conditions
from locpriv.tabular.seeded import _seeded_kernel, seeded_groups


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
    ix = _bk_build(XT, nu, orig, n)
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
        size = _bk_knn(ix, q, self_o, cap, hd, ht, pos_of, XT[:, :nu].mean(axis=1))
        assert np.array_equal(hd[:size], want_d)
        assert np.array_equal(ht[:size], want_t)
        # with SECs: each wanted SEC's smallest (distance, position) live record
        top = rng.choice(6, size=2, replace=False).astype(np.int64)
        rem = np.bincount(sec[orig[:nu]], minlength=6).astype(np.int64)
        near_d = np.full(6, np.inf)
        near_t = np.full(6, -1, dtype=np.int64)
        size = _bk_query(
            ix, q, self_o, cap, hd, ht, pos_of, XT[:, :nu].mean(axis=1), sec, top, rem,
            near_d, near_t,
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
    codes = np.ascontiguousarray(_as_codes(S, X.shape[0]))
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
def test_epk_kernel_block_index_on_and_off(seed: int) -> None:
    rng = np.random.default_rng(10 + seed)
    n = int(rng.integers(_BK_MIN + 200, 4 * _BK_MIN))
    d = int(rng.integers(3, 14))
    X = _tied(rng, n, d) if seed % 2 == 0 else rng.normal(size=(n, d))
    # skewed values (SECs run out late) or two confidential attributes
    skewed = np.minimum(rng.geometric(0.35, (n, 1)) - 1, 5)
    S = skewed if seed < 4 else rng.integers(0, 3, (n, 2))
    k, p = (3, 2) if seed % 3 else (5, 3)
    codes = np.ascontiguousarray(_as_codes(S, n))
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
