"""The common result of every generalisation method."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GeneralisedRelease:
    """Released key values of n records, one column per key attribute.

    Invariants: every released value holds the record's original value (an ancestor of its leaf,
    or an interval containing it); records with ``suppressed`` set have ``labels == -1`` and are
    released with every key value ``"*"``; the other records' classes ``0..g-1`` in ``labels``
    are exactly the sets of records with equal released keys, and each satisfies the privacy
    models the method was given.
    """

    columns: tuple[str, ...]
    """Key attribute names, in the order of ``values``."""
    values: tuple[tuple[str, ...], ...]
    """``values[j][i]``: the released value of record i in column j (a hierarchy node label, or
    an interval ``"[lo, hi]"`` of a numeric column)."""
    labels: IntArray
    """Equivalence class of each record, ``-1`` for a suppressed record."""
    suppressed: BoolArray
    """Suppressed records (all key values ``"*"``)."""
    cover: FloatArray
    """n × d share of the attribute's domain the released value covers, in [0, 1]: 0 = the
    original value (a leaf, or a zero-width interval), 1 = the root / the whole range. Suppressed
    records have 1 everywhere. The loss measures are computed from it."""
    levels: tuple[int, ...] | None = None
    """The lattice node (one hierarchy level per column) of a full-domain method; None for
    Mondrian."""
    info: dict[str, object] = field(default_factory=dict)
    """Method facts for the report (nodes checked, search time, lattice size, ...)."""
    depth: FloatArray | None = None
    """n × d hierarchy level of each released value divided by the hierarchy's height, in
    [0, 1] (Sweeney's ``h / |DGH|``; suppressed records 1 everywhere), for Sweeney's precision;
    None where a method releases values that are not hierarchy levels (intervals)."""
