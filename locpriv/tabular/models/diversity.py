"""l-diversity of every class at once (Machanavajjhala, Kifer, Gehrke & Venkitasubramaniam,
"l-Diversity: Privacy Beyond k-Anonymity", ACM TKDD 2007), from the class × value cells of one
confidential attribute (:func:`~locpriv.tabular.models.counts.pair_counts`).

- **distinct l**: a class holds at least ``l`` distinct values (= p-sensitivity, ``p = l``).
- **entropy l** (Definition 4.1): ``H = -Σ_s p(s) ln p(s) >= ln l``, ``p(s)`` the share of the
  class's records with value ``s``. Reported as the *effective number of values* ``exp(H)``
  (a real number >= 1), compared with ``l`` up to :data:`ENTROPY_TOL`.
- **recursive (c, l)** (Definition 4.2): with the class's value counts sorted in decreasing
  order ``r_1 >= r_2 >= ... >= r_m``, ``r_1 < c (r_l + r_{l+1} + ... + r_m)`` (strict; a class
  with fewer than ``l`` values has an empty tail and fails).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.tabular.models.counts import Cells

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ENTROPY_TOL = 1e-9
"""Slack (in nats) on ``H >= ln l``: a class spread evenly over exactly ``l`` values passes
despite rounding in the logarithms."""


def distinct(cells: Cells) -> IntArray:
    """Distinct values per class."""
    out: IntArray = np.bincount(cells.cls, minlength=cells.size.size).astype(np.int64)
    return out


def entropy(cells: Cells) -> FloatArray:
    """Natural-log entropy ``H`` of the value distribution of each class (0 for an empty one)."""
    f = cells.frac
    plogp = np.bincount(cells.cls, weights=f * np.log(f), minlength=cells.size.size)
    out: FloatArray = 0.0 - plogp.astype(np.float64)  # (0.0 - x: no -0.0)
    return out


def entropy_ok(cells: Cells, l: float) -> npt.NDArray[np.bool_]:  # noqa: E741
    """Entropy l-diversity per class: ``H >= ln l`` (up to :data:`ENTROPY_TOL`)."""
    out: npt.NDArray[np.bool_] = entropy(cells) >= np.log(l) - ENTROPY_TOL
    return out


def recursive_parts(cells: Cells, l: int) -> tuple[IntArray, IntArray]:  # noqa: E741
    """Per class: ``r_1`` (the largest count) and the tail ``r_l + ... + r_m``."""
    g = cells.size.size
    order = np.lexsort((-cells.cnt, cells.cls))
    cls, cnt = cells.cls[order], cells.cnt[order]
    first = np.searchsorted(cls, np.arange(g), side="left")
    rank = np.arange(cls.size) - first[cls]
    top = np.zeros(g, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, cls[1:] != cls[:-1]]) if cls.size else cls
    top[cls[starts]] = cnt[starts]
    tail = np.bincount(cls, weights=np.where(rank >= l - 1, cnt, 0), minlength=g)
    return top, np.rint(tail).astype(np.int64)


def recursive_ok(cells: Cells, c: float, l: int) -> npt.NDArray[np.bool_]:  # noqa: E741
    """Recursive (c, l)-diversity per class: ``r_1 < c · (r_l + ... + r_m)``."""
    top, tail = recursive_parts(cells, l)
    out: npt.NDArray[np.bool_] = top < c * tail
    return out
