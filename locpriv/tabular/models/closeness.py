"""t-closeness of every class at once (Li, Li & Venkatasubramanian, "t-Closeness: Privacy
Beyond k-Anonymity and l-Diversity", ICDE 2007): the Earth Mover's Distance between a class's
distribution ``P`` of one confidential attribute and the whole table's ``Q`` is at most ``t``.

The attribute's domain is its ``m`` codes ``0..m-1`` (the table's distinct values, in order for
an ordered attribute). Li et al.'s two ground distances, both in ``[0, 1]``:

- **equal distance** (nominal attributes): every two values are at distance 1, so
  ``D[P, Q] = ½ Σ_i |p_i - q_i|`` (the total variation distance);
- **ordered distance** (numerical or ordinal attributes): values ``i`` and ``j`` are at
  ``|i - j| / (m - 1)`` (distance in rank, not in value), so
  ``D[P, Q] = 1/(m-1) · Σ_{i=1}^{m} |Σ_{j<=i} (p_j - q_j)|`` (0 when ``m = 1``).

Both are computed from the nonzero cells of the class × value table only; the ordered one walks
each class's cumulative distribution, constant between the class's own values, against the
table's (:func:`_abs_gap_sum`), so the cost does not grow with ``m`` × classes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.tabular.models.counts import Cells

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

EMD_TOL = 1e-12
"""Slack on ``D <= t`` for rounding in the sums."""


def table_distribution(values: IntArray, m: int) -> FloatArray:
    """``Q``: the share of the table's records holding each code ``0..m-1``."""
    counts = np.bincount(values, minlength=m).astype(np.float64)
    out: FloatArray = counts / max(values.size, 1)
    return out


def emd_equal(cells: Cells, q: FloatArray) -> FloatArray:
    """Equal-distance EMD per class: ``½ (Σ_{i∈class} |p_i - q_i| + Σ_{i∉class} q_i)``."""
    g = cells.size.size
    qv = q[cells.val]
    inside = np.bincount(cells.cls, weights=np.abs(cells.frac - qv), minlength=g)
    q_in = np.bincount(cells.cls, weights=qv, minlength=g)
    out: FloatArray = 0.5 * (inside + np.clip(1.0 - q_in, 0.0, None))
    return out


def _abs_gap_sum(
    a: IntArray, b: IntArray, f: FloatArray, G: FloatArray, PG: FloatArray
) -> FloatArray:
    """``Σ_{i=a}^{b-1} |f - G[i]|`` per segment, ``G`` nondecreasing, ``PG`` its prefix sums
    (``PG[0] = 0``)."""
    s = np.clip(np.searchsorted(G, f, side="left"), a, b)
    below = f * (s - a) - (PG[s] - PG[a])  # G[i] < f there
    above = (PG[b] - PG[s]) - f * (b - s)  # G[i] >= f there
    out: FloatArray = below + above
    return out


def emd_ordered(cells: Cells, q: FloatArray) -> FloatArray:
    """Ordered-distance EMD per class: ``1/(m-1) Σ_i |F_P(i) - F_Q(i)|`` over the codes ``i``,
    ``F`` the cumulative distributions (``m = len(q)``)."""
    m = q.size
    g = cells.size.size
    if m <= 1:
        return np.zeros(g, dtype=np.float64)
    G = np.cumsum(q)
    G /= G[-1] if G[-1] > 0 else 1.0
    PG = np.r_[0.0, np.cumsum(G)]
    # the class's cumulative share is F = 0 before its first value, then steps at each value
    # (integer running counts, exact, then one division per cell)
    before = np.r_[0, np.cumsum(cells.size)[:-1]]
    F = (np.cumsum(cells.cnt) - before[cells.cls]) / cells.size[cells.cls]
    first = np.r_[True, cells.cls[1:] != cells.cls[:-1]] if cells.cls.size else cells.cls
    last = np.r_[cells.cls[1:] != cells.cls[:-1], True] if cells.cls.size else cells.cls
    nxt = np.r_[cells.val[1:], m] if cells.cls.size else cells.val
    nxt = np.where(last, m, nxt)
    total = np.bincount(cells.cls, weights=_abs_gap_sum(cells.val, nxt, F, G, PG), minlength=g)
    lead = cells.val[first]  # [0, first value): F = 0, the sum is Σ G
    total[cells.cls[first]] += PG[lead]
    out: FloatArray = total / (m - 1)
    return out
