"""Solanas, Sebé & Domingo-Ferrer (2008), Algorithm 1 line by line, with what each step did.

:func:`seeded_trace` is a plain numpy transcription of the printed algorithm (lines 2-20) for
one confidential attribute, slow (``O(n^2 d / k)``) but explicit, that also reports what the fast
kernel behind :func:`locpriv.tabular.mdav_seed` / :func:`locpriv.tabular.random_seed` does not:
which records were still unassigned when the loop of line 2 stopped and went to their closest
group (lines 17-20). Those *leftovers* explain the heuristics' information loss: when the
confidential attribute is skewed, the loop stops as soon as the rare values are used up and can
leave hundreds of records behind. The labels equal the kernel's (tests compare them).

Tie-breaks follow the kernel: nearest and furthest compare ``(squared distance, row)``; the seed
of Algorithm 3 is the record nearest to ``lo + u * (hi - lo)``, with ``u`` row ``g`` of
``rng.random((n // k + 1, d))`` for group ``g`` and ``lo``, ``hi`` the data set's column ranges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, InfeasibleError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class SeededTrace:
    """Result of :func:`seeded_trace`."""

    labels: IntArray
    """Group of each record, ``0..g-1`` in creation order."""
    leftover: BoolArray
    """True for the records still unassigned when the loop stopped (lines 17-20 placed them)."""
    seeds: IntArray
    """Row of each group's seed ``x_r``, in creation order."""

    @property
    def n_leftover(self) -> int:
        """Number of records placed by lines 17-20."""
        return int(self.leftover.sum())


def _sqdist(X: FloatArray, rows: IntArray, q: FloatArray) -> FloatArray:
    diff = X[rows] - q
    out: FloatArray = np.einsum("ij,ij->i", diff, diff)
    return out


def _nearest_first(X: FloatArray, rows: IntArray, q: FloatArray) -> IntArray:
    """``rows`` by increasing (squared distance to ``q``, row)."""
    out: IntArray = rows[np.lexsort((rows, _sqdist(X, rows, q)))]
    return out


def seeded_trace(
    X: npt.ArrayLike,
    s: npt.ArrayLike,
    k: int,
    p: int,
    *,
    seed_mode: str = "mdav",
    rng: np.random.Generator | None = None,
) -> SeededTrace:
    """Algorithm 1 with the seed of Algorithm 2 (``"mdav"``) or 3 (``"random"``).

    ``X``: n × d key attributes (already scaled); ``s``: n codes of one confidential attribute.
    Each round: pick the seed ``x_r`` (line 3); add the nearest unassigned record that brings a
    value the group lacks until the group has p distinct values (lines 6-9); add the nearest
    unassigned records until it has k (lines 10-13). The loop runs while at least k records
    holding at least p distinct values are unassigned (line 2); the rest join the group with the
    closest centroid (lines 17-20). Raises ``InfeasibleError`` when p > k, n < k or ``s`` has
    fewer than p distinct values, ``ConfigError`` for an unknown ``seed_mode``.
    """
    Xf = np.asarray(X, dtype=np.float64)
    codes = np.unique(np.asarray(s).ravel(), return_inverse=True)[1].astype(np.int64)
    n = Xf.shape[0]
    if codes.shape[0] != n:
        raise ConfigError(f"s has {codes.shape[0]} values but X has {n} rows")
    if p > k or n < k or len(np.unique(codes)) < p:
        raise InfeasibleError(f"p-sensitive k-anonymity infeasible (n={n}, k={k}, p={p})")
    if seed_mode not in ("mdav", "random"):
        raise ConfigError(f"seed_mode must be 'mdav' or 'random', got {seed_mode!r}")
    rng = rng if rng is not None else np.random.default_rng(0)
    rnd = rng.random((n // k + 1, Xf.shape[1])) if seed_mode == "random" else None
    lo, hi = Xf.min(axis=0), Xf.max(axis=0)
    labels = np.full(n, -1, dtype=np.int64)
    seeds: list[int] = []
    alive = np.ones(n, dtype=bool)
    while alive.sum() >= k and len(np.unique(codes[alive])) >= p:  # line 2
        rows = np.flatnonzero(alive).astype(np.int64)
        if rnd is None:  # Algorithm 2: furthest from the unassigned records' average
            far = _nearest_first(Xf, rows, Xf[rows].mean(axis=0))
            d2 = _sqdist(Xf, far, Xf[rows].mean(axis=0))
            seed = int(far[np.flatnonzero(d2 == d2[-1])[0]])
        else:  # Algorithm 3: nearest to a uniform vector over the ranges
            seed = int(_nearest_first(Xf, rows, lo + rnd[len(seeds)] * (hi - lo))[0])
        order = [int(r) for r in _nearest_first(Xf, rows, Xf[seed]) if r != seed]
        group, values = [seed], {int(codes[seed])}
        while len(values) < p:  # lines 6-9
            pick = next(r for r in order if int(codes[r]) not in values)
            order.remove(pick)
            group.append(pick)
            values.add(int(codes[pick]))
        while len(group) < k:  # lines 10-13
            group.append(order.pop(0))
        labels[group] = len(seeds)
        alive[group] = False
        seeds.append(seed)
    left = np.flatnonzero(alive)
    if left.size:  # lines 17-20
        cent = np.stack([Xf[labels == g].mean(axis=0) for g in range(len(seeds))])
        for r in left:
            d2 = np.einsum("ij,ij->i", cent - Xf[r], cent - Xf[r])
            labels[r] = int(np.argmin(d2))
    return SeededTrace(labels=labels, leftover=alive.copy(), seeds=np.asarray(seeds, np.int64))
