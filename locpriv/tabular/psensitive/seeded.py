"""Seeded heuristics of Solanas, Sebé & Domingo-Ferrer (2008) for p-sensitive k-anonymity.

:func:`seeded_groups` is their Algorithm 1; :func:`mdav_seed` and :func:`random_seed` use the
seeds of their Algorithms 2 (MDAV-like) and 3 (random vector). The numba kernel uses the
nearest-neighbour machinery of :mod:`locpriv.tabular._kernels.knn` and its indexes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError
from locpriv.tabular.checks import as_codes, check_matrix
from locpriv.tabular.psensitive._kernels.seeded import _seeded_kernel
from locpriv.tabular.psensitive.kincrease import require_feasible

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def seeded_groups(
    X: FloatArray,
    S: npt.ArrayLike,
    k: int,
    p: int,
    *,
    seed_mode: str = "mdav",
    rng: np.random.Generator | None = None,
) -> IntArray:
    """Solanas, Sebé & Domingo-Ferrer (2008), Algorithm 1, with seed Algorithm 2 or 3.

    While the unassigned records number at least k and still hold p distinct values of every
    confidential attribute: pick a seed (``seed_mode="mdav"``: the record furthest from the average
    of the unassigned records; ``"random"``: the record nearest to a vector drawn uniformly over
    the key attributes' ranges in the data set); walk the unassigned records by increasing distance
    to the seed and add each one if it brings a value not yet p-covered, or if there is still room
    for the missing values within k records; stop when the group has >= k records and >= p distinct
    values of every attribute. Leftover records join the group with the closest centroid, so groups
    may exceed k. Labels are 0..g-1 in creation order. Work per group, on a compacted copy: the
    seed search (Algorithm 2: a shell of records around a pivot; Algorithm 3: a nearest-record
    query) and the walk over the seed's k+1 nearest records, widened to the 4k+4 nearest and
    then to the whole remainder sorted only when the group is not complete. Nearest-record
    queries use grid rings (d <= 2), a block index (d > 2) or a pruned pass. Every shortcut
    gives exactly the plain passes' results (docs/tabular.md). Raises ``DataError`` when ``X``
    is not a finite 2-D real array, ``InfeasibleError`` when p > k, n < k or an attribute has
    fewer than p distinct values.
    """
    X = check_matrix(X)  # finite, as the block index's box bounds assume
    codes = as_codes(S, X.shape[0])
    require_feasible(codes, k, p)
    if seed_mode not in ("mdav", "random"):
        raise ConfigError(f"seed_mode must be 'mdav' or 'random', got {seed_mode!r}")
    mode = 0 if seed_mode == "mdav" else 1
    rng = rng if rng is not None else np.random.default_rng(0)
    rnd = rng.random((X.shape[0] // k + 1, X.shape[1])) if mode else np.zeros((1, 1))
    nvals = codes.max(axis=0) + 1
    out: IntArray = _seeded_kernel(X, np.ascontiguousarray(codes), nvals, k, p, mode, rnd, True)
    return out


def mdav_seed(X: FloatArray, S: npt.ArrayLike, k: int, p: int) -> IntArray:
    """Solanas et al. (2008) with the MDAV-like seed (their Algorithm 2); deterministic."""
    return seeded_groups(X, S, k, p, seed_mode="mdav")


def random_seed(
    X: FloatArray, S: npt.ArrayLike, k: int, p: int, rng: np.random.Generator | None = None
) -> IntArray:
    """Solanas et al. (2008) with the random-vector seed (their Algorithm 3)."""
    return seeded_groups(X, S, k, p, seed_mode="random", rng=rng)
