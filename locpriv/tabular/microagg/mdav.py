"""Fixed-size MDAV microaggregation (Domingo-Ferrer & Mateo-Sanz 2002; Domingo-Ferrer & Torra 2005).

:func:`mdav` partitions the rows of ``X`` into groups of ``k`` records (one group of ``k..2k-1``)
and returns one label per row. Two exact numba kernels do the work, with identical results:
:mod:`~locpriv.tabular.microagg._kernels.mdav_blocks` (blocks of a k-d tree with bounding boxes:
most queries touch a few blocks) when the data have few effective dimensions, and
:mod:`~locpriv.tabular.microagg._kernels.mdav_sweep` (one vectorised sweep per step, pruned where
bounds allow) when box bounds cannot prune (many independent dimensions, e.g. uniform noise in
13-D). This module is ``locpriv.tabular.microagg.mdav``; ``locpriv.tabular.mdav`` is the function.
docs/microaggregation.md explains the tie-breaks, the complexity and why the kernels are fast.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.tabular.checks import as_codes, check_k, check_matrix
from locpriv.tabular.microagg._kernels.mdav_blocks import kd_blocks, mdav_on_blocks
from locpriv.tabular.microagg._kernels.mdav_common import N_STATS, ST_STOP
from locpriv.tabular.microagg._kernels.mdav_sweep import mdav_kernel

FloatArray = npt.NDArray[np.float64]
IntpArray = npt.NDArray[np.intp]

__all__ = [
    "MdavRunner",
    "effective_dimension",
    "mdav",
    "mdav_p_sensitive",
]

_BLOCK = 128  # records per block of the block kernel
_BLOCK_MAX_DIM = 8  # the block kernel is used up to this many effective dimensions


def effective_dimension(X: FloatArray, share: float = 0.95, sample: int = 20000) -> int:
    """Principal components needed for ``share`` of the variance (on at most ``sample`` rows)."""
    n = X.shape[0]
    rows = X if n <= sample else X[np.linspace(0, n - 1, sample).astype(np.intp)]
    centred = rows - rows.mean(axis=0)
    ev = np.linalg.eigvalsh(centred.T @ centred)[::-1]
    total = float(ev.sum())
    if total <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(ev) / total, share) + 1)


def _kernel_for(X: FloatArray) -> str:
    d = X.shape[1]
    if d <= _BLOCK_MAX_DIM or effective_dimension(X) <= _BLOCK_MAX_DIM:
        return "blocks"
    return "sweep"


def mdav(X: npt.ArrayLike, k: int) -> IntpArray:
    """Fixed-size MDAV: group labels ``0..g-1`` (in creation order) for the rows of ``X``.

    The textbook algorithm, on the records ``R`` not yet grouped, with squared Euclidean
    distances on ``X`` as given (scale it first)::

        while |R| >= 3k:
            c = mean of R;  r = furthest record from c;  s = furthest record from r
            group r with its k-1 nearest records in R, remove them;
            group s with its k-1 nearest records in R, remove them
        if |R| >= 2k: c = mean of R; r = furthest from c; group r with its k-1 nearest; remove
        the records left in R form the last group (k..2k-1 records)

    Every group has exactly ``k`` records except the last one created (``k..2k-1``).

    Tie-breaks (documented so results are reproducible across implementations):

    * "furthest" and "nearest" compare ``(squared distance, row index)``; among records at the
      same distance the lowest row index wins (it is furthest, or it is nearer);
    * the k-1 nearest of a seed never include the seed itself, even when duplicates of it exist;
    * ``s`` is the furthest from ``r`` among the records *not* in r's group. This equals the
      textbook ``s`` whenever that one is not in r's group (always, unless every remaining record
      is at the same distance from ``r``, e.g. all duplicates) and keeps the algorithm defined then;
    * the mean of ``R`` is the correctly rounded column sum divided by ``|R|`` (the kernel keeps
      the sum in double-double precision); squared distances add the columns in order 0..d-1.

    Parameters
    ----------
    X : (n, d) array of float
        Records (rows) by numerical attributes, finite, already scaled (for example z-scored).
    k : int
        Minimum group size, ``1 <= k <= n``.

    Returns
    -------
    labels : (n,) array of intp
        Group of each record, ``0..g-1`` with ``g = max(1, n // k)``.

    Raises
    ------
    DataError
        ``X`` is not a finite, non-empty 2-D real array.
    InfeasibleError
        ``k`` is not an integer with ``1 <= k <= n``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[2.0, 1], [3, 2], [3, 2], [20, 19], [21, 20]])
    >>> mdav(X, 2).tolist()
    [1, 1, 1, 0, 0]
    """
    Xf = check_matrix(X)
    return MdavRunner(Xf).labels(check_k(k, Xf.shape[0]))


class MdavRunner:
    """MDAV on one data set for several k: the kernel is chosen and, for the block kernel, the
    k-d blocks are built once (k-increase runs MDAV for k, k+1, ...).

    ``X`` must already be valid (:func:`~locpriv.tabular.checks.check_matrix`); ``k`` valid for
    it (:func:`~locpriv.tabular.checks.check_k`).
    """

    def __init__(self, X: FloatArray) -> None:
        self.X = X
        self._perm: npt.NDArray[np.int64] | None = None
        self._bstart: npt.NDArray[np.int64] | None = None
        if _kernel_for(X) == "blocks":
            self._perm, self._bstart = kd_blocks(X, _BLOCK)

    def _run(self, k: int, S: npt.NDArray[np.int64], p: int) -> tuple[IntpArray, bool]:
        """The kernel's labels and whether it stopped at a group lacking p distinct values."""
        stats = np.zeros(N_STATS, dtype=np.int64)
        if self._perm is not None:
            labels: IntpArray = mdav_on_blocks(self.X, k, self._perm, self._bstart, stats, S, p)
        else:
            labels = mdav_kernel(self.X, k, stats, S, p)
        return labels, bool(stats[ST_STOP])

    def labels(self, k: int) -> IntpArray:
        """``mdav(X, k)``."""
        return self._run(k, np.zeros((self.X.shape[0], 0), dtype=np.int64), 0)[0]

    def p_sensitive(self, k: int, S: npt.NDArray[np.int64], p: int) -> IntpArray | None:
        """``mdav_p_sensitive(X, k, S, p)`` for codes ``S`` from
        :func:`~locpriv.tabular.checks.as_codes`."""
        labels, stopped = self._run(k, S, p)
        if stopped:
            return None
        last = labels == labels.max()  # the final group (the records left at the end)
        for j in range(S.shape[1]):
            if np.unique(S[last, j]).size < p:
                return None
        return labels


def mdav_p_sensitive(X: npt.ArrayLike, k: int, S: npt.ArrayLike, p: int) -> IntpArray | None:
    """:func:`mdav` labels when that partition is p-sensitive, else ``None``.

    ``S`` holds the confidential attributes (n × m, or length n for one attribute; any values,
    coded by :func:`locpriv.tabular.checks.as_codes`). The partition is p-sensitive when every
    group has at least ``p`` distinct values in every column of ``S``. MDAV builds its groups
    one after the other and never revisits one, so the run stops at the first group that lacks
    them: a k that fails costs only the work up to that group. When the result is not ``None``
    it equals ``mdav(X, k)``.
    """
    Xf = check_matrix(X)
    kk = check_k(k, Xf.shape[0])
    return MdavRunner(Xf).p_sensitive(kk, as_codes(S, Xf.shape[0]), max(0, int(p)))
