"""Large-neighbourhood search for p-sensitive k-anonymous partitions (method ``"best-p"``).

The p-sensitive heuristics (:mod:`~locpriv.tabular.psensitive.seeded`,
:mod:`~locpriv.tabular.psensitive.sec_pk`, k-increase) build their groups greedily and never revisit
them. :func:`ruin_recreate_p` revisits them: each round dissolves a few neighbouring groups and
re-partitions their records from scratch with the seeded heuristic (MDAV-like or random seeds, at
random); the new groups replace the old ones only when they have a lower SSE and pass an independent
check (at least k records and p distinct values of every confidential attribute in every group). The
union of p-sensitive groups always admits such a partition (the old one), so the invariant holds
throughout and the SSE never rises.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from locpriv.errors import InfeasibleError
from locpriv.tabular.checks import as_codes, check_k, check_matrix
from locpriv.tabular.microagg.improve import _canonical, _neighbours, lns_rounds
from locpriv.tabular.psensitive.kincrease import group_is_p_sensitive, require_feasible
from locpriv.tabular.psensitive.sec_pk import sec_pk_clustering
from locpriv.tabular.psensitive.seeded import seeded_groups
from locpriv.tabular.quality.metrics import sse

__all__ = ["best_p_sensitive", "ruin_recreate_p"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_ROUNDS_MAX = 5000  # default rounds: 2 per record, at most this many (~1 ms each at 13-D)


def ruin_recreate_p(
    X: npt.ArrayLike,
    S: npt.ArrayLike,
    labels: npt.ArrayLike,
    k: int,
    p: int,
    *,
    rounds: int,
    rng: np.random.Generator | None = None,
    time_budget_s: float | None = None,
) -> IntArray:
    """Improve the p-sensitive k-anonymous partition ``labels`` of ``X``; its SSE never rises.

    Each of ``rounds`` rounds picks a random record and the groups of 3 to 11 of its nearest
    records (with its own), and re-partitions those records with the seeded heuristic of
    Solanas et al. (MDAV-like or random seeds, at random). The new groups are kept when every
    one has at least ``k`` records and ``p`` distinct values of every column of ``S`` and their
    SSE is lower by more than a relative 1e-12. Stops early once ``time_budget_s`` seconds are
    spent. Raises ``InfeasibleError`` when ``labels`` itself is not p-sensitive k-anonymous.
    """
    t0 = time.perf_counter()
    Xf = check_matrix(X)
    n = Xf.shape[0]
    kk = check_k(k, n)
    codes = as_codes(S, n)
    lab = _canonical(labels).astype(np.int64)
    if lab.shape != (n,) or int(np.bincount(lab).min()) < kk:
        raise InfeasibleError(f"labels must give every one of the {n} records a group of >= k")
    if not group_is_p_sensitive(lab, codes, p):
        raise InfeasibleError(f"labels must be p-sensitive (p={p}) to start from")
    rng = rng if rng is not None else np.random.default_rng(0)
    nbr = _neighbours(Xf, 12, int(rng.integers(2**31)))
    if int(lab.max()) == 0 or nbr[0, 0] < 0:
        return lab

    def rebuild(idx: npt.NDArray[np.intp]) -> IntArray | None:
        W, Sw = Xf[idx], codes[idx]
        mode = "mdav" if rng.random() < 0.5 else "random"
        try:
            sub = seeded_groups(W, Sw, kk, p, seed_mode=mode, rng=rng)
        except InfeasibleError:  # pragma: no cover - the old groups prove feasibility
            return None
        # the independent check: the heuristic promises both, the release depends on them
        if int(np.bincount(sub).min()) < kk or not group_is_p_sensitive(sub, Sw, p):
            return None  # pragma: no cover
        return sub

    deadline = None if time_budget_s is None else t0 + time_budget_s
    lns_rounds(Xf, lab, nbr, rounds, rng, deadline, rebuild)
    return _canonical(lab).astype(np.int64)


def best_p_sensitive(
    X: npt.ArrayLike,
    S: npt.ArrayLike,
    k: int,
    p: int,
    *,
    seed: int = 0,
    rounds: int | None = None,
    time_budget_s: float | None = None,
    start: npt.ArrayLike | None = None,
) -> IntArray:
    """A p-sensitive k-anonymous partition with lower SSE than the greedy heuristics'.

    Starts from ``start`` (a p-sensitive k-anonymous partition) or from the lower-SSE one of
    ``mdav-seed`` and ``sec-pk``, then runs ``rounds`` rounds of :func:`ruin_recreate_p`
    (default ``min(2 n, 5000)``). Deterministic for a given ``seed`` (unless the time budget
    cuts it short). Raises ``InfeasibleError`` as the other p-sensitive methods do.
    """
    t0 = time.perf_counter()
    Xf = check_matrix(X)
    n = Xf.shape[0]
    codes = as_codes(S, n)
    require_feasible(codes, k, p)
    if start is None:
        tries = [seeded_groups(Xf, codes, k, p, seed_mode="mdav")]
        tries.append(sec_pk_clustering(Xf, codes, k, p))
        begin = min(tries, key=lambda lab: sse(Xf, lab))
    else:
        begin = np.asarray(start, dtype=np.int64)
    todo = min(2 * n, _ROUNDS_MAX) if rounds is None else max(0, int(rounds))
    left = None if time_budget_s is None else time_budget_s - (time.perf_counter() - t0)
    if todo == 0 or (left is not None and left <= 0):
        return _canonical(begin).astype(np.int64)
    rng = np.random.default_rng(seed)
    return ruin_recreate_p(Xf, codes, begin, k, p, rounds=todo, rng=rng, time_budget_s=left)
