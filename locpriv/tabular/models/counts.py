"""Class × value counts of one confidential attribute, the common input of every model.

:func:`pair_counts` turns class labels and value codes into the nonzero cells of the class ×
value contingency table, sorted by class then value: a dense ``bincount`` where the table is
small, a sort (``np.unique``) where it would not fit. Both give the same cells, so every model
is computed over all classes at once in ``O(n)`` or ``O(n log n)``, whatever the number of
classes or values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

DENSE_CELLS_PER_RECORD = 8
"""The dense table is used while it has at most this many cells per record (plus 4096)."""


@dataclass(frozen=True)
class Cells:
    """Nonzero cells of a class × value table: ``cls[i]`` holds ``cnt[i]`` records of value
    ``val[i]``; sorted by (class, value). ``size[c]``: records of class ``c`` (``g`` entries)."""

    cls: IntArray
    val: IntArray
    cnt: IntArray
    size: IntArray

    @property
    def frac(self) -> FloatArray:
        """Share of its class's records that each cell holds."""
        out: FloatArray = self.cnt / self.size[self.cls]
        return out


def pair_counts(labels: IntArray, values: IntArray, g: int, nv: int) -> Cells:
    """The nonzero cells of the ``g`` × ``nv`` table of ``labels`` (``0..g-1``) against
    ``values`` (``0..nv-1``), both one entry per (non-suppressed) record."""
    size = np.bincount(labels, minlength=g).astype(np.int64)
    if g * nv <= DENSE_CELLS_PER_RECORD * labels.size + 4096:
        table = np.bincount(labels * nv + values, minlength=g * nv)
        nz = np.flatnonzero(table)
        cnt = table[nz].astype(np.int64)
    else:
        nz, cnt = np.unique(labels * nv + values, return_counts=True)
        cnt = cnt.astype(np.int64)
    return Cells(cls=nz // nv, val=nz % nv, cnt=cnt, size=size)
