"""Value generalisation hierarchies of key attributes, by levels, and Truta et al.'s IL.

A :class:`LevelHierarchy` is a balanced tree given level by level: level 0 holds the values,
the last level the root (``*``). It is built from rows ``value; level 1; ...; root`` (the layout
of ARX's published hierarchy files). :class:`KeyTable` joins numerical key attributes (generalised
to intervals) and categorical ones (generalised through their hierarchy), as in Truta, Campan &
Meyer (2007), Definition 8; :func:`generalisation_il` is their cluster information loss
(Definitions 9-10):

``IL(cl) = |cl| * (sum_numerical span(cl) / span(data) + sum_categorical level(LCA(cl)) / height)``

(in a balanced hierarchy the height of the subtree under the lowest common ancestor is its level).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, DataError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class LevelHierarchy:
    """Balanced hierarchy: ``labels[l]`` are the nodes of level l, ``up[l][i]`` the parent (at
    level l + 1) of node i of level l."""

    labels: tuple[tuple[str, ...], ...]
    up: tuple[IntArray, ...]

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[str]]) -> LevelHierarchy:
        """Rows ``value, level-1 node, ..., root``; all rows as long, one parent per node."""
        table = [tuple(str(x) for x in r) for r in rows]
        if not table or len({len(r) for r in table}) != 1 or len(table[0]) < 2:
            raise ConfigError("hierarchy rows must be non-empty and of one length >= 2")
        depth = len(table[0])
        labels: list[tuple[str, ...]] = []
        for lev in range(depth):
            labels.append(tuple(dict.fromkeys(r[lev] for r in table)))
        if len(labels[-1]) != 1:
            raise ConfigError(f"hierarchy has {len(labels[-1])} roots")
        if len(labels[0]) != len(table):
            raise ConfigError("a value appears in two rows")
        up: list[IntArray] = []
        for lev in range(depth - 1):
            index = {lab: i for i, lab in enumerate(labels[lev + 1])}
            parent = np.full(len(labels[lev]), -1, dtype=np.int64)
            pos = {lab: i for i, lab in enumerate(labels[lev])}
            for r in table:
                i, par = pos[r[lev]], index[r[lev + 1]]
                if parent[i] not in (-1, par):
                    raise ConfigError(f"node {r[lev]!r} has two parents")
                parent[i] = par
            up.append(parent)
        return cls(labels=tuple(labels), up=tuple(up))

    @property
    def height(self) -> int:
        """Number of generalisation steps from the values to the root."""
        return len(self.labels) - 1

    def codes(self, values: Iterable[object]) -> IntArray:
        """Leaf codes of ``values`` (compared as strings); ``DataError`` for a value not in it."""
        pos = {lab: i for i, lab in enumerate(self.labels[0])}
        vals = [str(v) for v in values]
        missing = sorted({v for v in vals if v not in pos})
        if missing:
            raise DataError(f"values not in the hierarchy: {missing[:5]}")
        return np.asarray([pos[v] for v in vals], dtype=np.int64)

    def ancestors(self) -> IntArray:
        """``(height + 1) × leaves``: the node of level l above each leaf."""
        out = np.empty((len(self.labels), len(self.labels[0])), dtype=np.int64)
        out[0] = np.arange(len(self.labels[0]))
        for lev, par in enumerate(self.up):
            out[lev + 1] = par[out[lev]]
        return out

    def lca_levels(self) -> IntArray:
        """``leaves × leaves``: level of the lowest common ancestor of two leaves."""
        anc = self.ancestors()
        same = anc[:, :, None] == anc[:, None, :]  # level × leaf × leaf
        out: IntArray = np.argmax(same, axis=0).astype(np.int64)  # first level where they meet
        return out


@dataclass(frozen=True)
class KeyTable:
    """Key attributes of n records: ``numeric`` (n × s, generalised to intervals) and leaf codes
    ``leaves`` (n × t) of categorical attributes with their ``hierarchies`` (t)."""

    numeric: FloatArray
    leaves: IntArray
    hierarchies: tuple[LevelHierarchy, ...]

    def __post_init__(self) -> None:
        num, lv = np.asarray(self.numeric), np.asarray(self.leaves)
        if num.ndim != 2 or lv.ndim != 2 or num.shape[0] != lv.shape[0]:
            raise DataError("numeric and leaves must be 2-D with one row per record")
        if lv.shape[1] != len(self.hierarchies):
            raise ConfigError("one hierarchy per categorical column")
        if not np.isfinite(num).all():
            raise DataError("numeric key attributes must be finite")

    @property
    def n(self) -> int:
        """Number of records."""
        return int(np.asarray(self.numeric).shape[0])

    @property
    def width(self) -> int:
        """Number of key attributes (numerical + categorical)."""
        return int(np.asarray(self.numeric).shape[1]) + len(self.hierarchies)

    def numeric_spans(self) -> FloatArray:
        """Range of each numerical attribute over the records (inf for a constant one, so it
        contributes 0)."""
        num = np.asarray(self.numeric, dtype=np.float64)
        if num.shape[0] == 0:
            return np.full(num.shape[1], np.inf)
        span = num.max(axis=0) - num.min(axis=0)
        out: FloatArray = np.where(span > 0, span, np.inf)
        return out


def generalisation_il(keys: KeyTable, labels: npt.ArrayLike) -> float:
    """Total information loss of Truta, Campan & Meyer (2007), Definitions 9-10, of the
    partition ``labels`` (0..g-1) when every cluster is generalised to its covering tuple."""
    lab = np.asarray(labels, dtype=np.int64)
    g = int(lab.max()) + 1
    cnt = np.bincount(lab, minlength=g).astype(np.float64)
    num = np.asarray(keys.numeric, dtype=np.float64)
    per = np.zeros(g)
    if num.shape[1]:
        hi = np.full((g, num.shape[1]), -np.inf)
        lo = np.full((g, num.shape[1]), np.inf)
        np.maximum.at(hi, lab, num)
        np.minimum.at(lo, lab, num)
        per += ((hi - lo) / keys.numeric_spans()).sum(axis=1)
    for j, h in enumerate(keys.hierarchies):
        anc = h.ancestors()[:, keys.leaves[:, j]]  # level × n
        level = np.zeros(g, dtype=np.int64)
        for lev in range(h.height):  # a cluster is above level lev if it has 2 nodes there
            first = np.full(g, -1, dtype=np.int64)
            first[lab[::-1]] = anc[lev][::-1]  # some member's node at lev
            differs = np.zeros(g, dtype=bool)
            np.logical_or.at(differs, lab, anc[lev] != first[lab])
            level = np.where(differs, lev + 1, level)
        per += level / h.height
    return float(np.sum(cnt * per))


def generalisation_il_normalised(keys: KeyTable, labels: npt.ArrayLike) -> float:
    """:func:`generalisation_il` divided by ``n * width``: 0 = no loss, 1 = all at the root."""
    return generalisation_il(keys, labels) / (keys.n * keys.width) if keys.n and keys.width else 0.0
