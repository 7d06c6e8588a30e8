"""Information-loss measures of a generalised release (lower is better for every one).

Each measure has an *array kernel* (``*_of``: from labels, per-cell arrays and counts; the
lattice searches call these on every node they score) and a *release* form taking a
:class:`~locpriv.tabular.generalisation.release.GeneralisedRelease` (plus the original leaf codes
and hierarchies where the measure needs them). n records, d key attributes; a suppressed record
(``labels == -1``) has every key value ``"*"``.

=====================  ===========================================  =========================
name                   definition                                   unit, range
=====================  ===========================================  =========================
``prec``               1 - Prec (Sweeney 2002): mean over cells of  share, [0, 1]; 0 = the
                       ``level / height`` (suppressed cells 1)      original table
``dm``                 discernibility (Bayardo & Agrawal 2005, as   records², [n, n²]
                       LeFevre et al. and ARX): sum of ``|E|²``
                       over released classes, ``n`` per suppressed
                       record
``cavg``               C_AVG (LeFevre et al. 2006): ``n / (classes  multiple of k, >= 1/k;
                       · k)``; the suppressed records (all ``*``)   1 = every class has
                       count as one class                           exactly k records
``entropy``            non-uniform entropy (Gionis & Tassa 2009,    bits, [0, n · sum_j H_j]
                       as ARX): sum over cells of ``log2(N_j(B) /   (H_j the entropy of
                       N_j(a))``, ``a`` the cell's original value,  column j); 0 = original
                       ``B`` the set of originals its released
                       value stands for, ``N_j`` counts in the
                       original table (suppressed: ``B`` = all)
``gil``                generalised information loss (Iyengar's LM,  share, [0, 1]
                       ARX's "loss"): mean of ``cover`` over cells
=====================  ===========================================  =========================

``cover`` of a hierarchy node is ``(leaves under it - 1) / (leaves - 1)`` (0 = a leaf, 1 = the
root); of an interval its width over the column's range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.generalisation.release import GeneralisedRelease

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

LossName = Literal["prec", "dm", "cavg", "entropy", "gil"]
LOSSES: tuple[str, ...] = get_args(LossName)


def loss_name(name: str) -> LossName:
    """``name`` checked against :data:`LOSSES` (``ConfigError`` otherwise)."""
    if name not in LOSSES:
        raise ConfigError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")
    out: LossName = name  # type: ignore[assignment]
    return out


# --- array kernels -------------------------------------------------------------------------


def precision_loss_of(depth: npt.ArrayLike, suppressed: npt.ArrayLike) -> float:
    """``1 - Prec``: mean of ``depth`` (n × d, level / height per cell) with suppressed rows 1."""
    dep = np.asarray(depth, dtype=np.float64)
    sup = np.asarray(suppressed, dtype=bool)
    if dep.size == 0:
        return 0.0
    return float(np.where(sup[:, None], 1.0, dep).mean())


def generalised_loss_of(cover: npt.ArrayLike, suppressed: npt.ArrayLike) -> float:
    """Mean of ``cover`` (n × d, in [0, 1]) with suppressed rows 1."""
    return precision_loss_of(cover, suppressed)


def discernibility_of(labels: npt.ArrayLike) -> float:
    """``sum |E|²`` over classes ``labels >= 0`` plus ``n`` per suppressed record (-1)."""
    lab = np.asarray(labels, dtype=np.int64)
    n = len(lab)
    keep = lab >= 0
    sizes = np.bincount(lab[keep]).astype(np.float64)
    return float(np.sum(sizes * sizes) + float(n) * float(n - int(keep.sum())))


def average_class_size_of(labels: npt.ArrayLike, k: int) -> float:
    """``n / (classes · k)``; all suppressed records together count as one class."""
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    lab = np.asarray(labels, dtype=np.int64)
    if len(lab) == 0:
        return 0.0
    keep = lab >= 0
    classes = len(np.unique(lab[keep])) + int(not keep.all())
    return float(len(lab)) / (classes * k)


def non_uniform_entropy_of(
    value_count: npt.ArrayLike, set_count: npt.ArrayLike, suppressed: npt.ArrayLike
) -> float:
    """``sum log2(set_count / value_count)`` over cells (n × d), suppressed rows with
    ``set_count = n``. ``value_count[i, j]``: records of the original table with record i's
    value in column j; ``set_count[i, j]``: records whose value lies in the set the released
    value stands for (>= ``value_count``)."""
    a = np.asarray(value_count, dtype=np.float64)
    b = np.asarray(set_count, dtype=np.float64)
    sup = np.asarray(suppressed, dtype=bool)
    if a.size == 0:
        return 0.0
    b = np.where(sup[:, None], float(a.shape[0]), b)
    return float(np.sum(np.log2(b / a)))


# --- hierarchy helpers ---------------------------------------------------------------------


def leaf_counts(h: LevelHierarchy) -> list[IntArray]:
    """Per level, the number of leaves under each node."""
    anc = h.ancestors()
    return [np.bincount(anc[lev], minlength=len(h.labels[lev])) for lev in range(h.height + 1)]


def node_cover(h: LevelHierarchy) -> list[FloatArray]:
    """Per level, ``cover`` of each node: ``(leaves under it - 1) / (leaves - 1)``."""
    m = len(h.labels[0])
    out: list[FloatArray] = []
    for c in leaf_counts(h):
        share = c.astype(np.float64) - 1.0
        out.append(share / (m - 1.0) if m > 1 else np.zeros(len(c), dtype=np.float64))
    return out


def _released_levels(
    release: GeneralisedRelease, leaves: IntArray, hierarchies: Sequence[LevelHierarchy]
) -> IntArray:
    """n × d level of each released value (its node is the leaf's ancestor at that level).

    The level is ``release.levels`` where set; otherwise the lowest level whose ancestor of the
    record's leaf carries the released label. ``DataError`` for a value that is no ancestor."""
    n, d = leaves.shape
    out = np.zeros((n, d), dtype=np.int64)
    sup = np.asarray(release.suppressed, dtype=bool)
    for j, h in enumerate(hierarchies):
        if release.levels is not None:
            out[:, j] = release.levels[j]
            out[sup, j] = h.height
            continue
        anc = h.ancestors()[:, leaves[:, j]]  # level × n
        vals = np.asarray(release.values[j], dtype=object)
        found = np.full(n, -1, dtype=np.int64)
        for lev in range(h.height, -1, -1):
            labs = np.asarray(h.labels[lev], dtype=object)[anc[lev]]
            found = np.where(labs == vals, lev, found)
        found[sup] = h.height
        if (found < 0).any():
            i = int(np.argmax(found < 0))
            raise DataError(
                f"column {release.columns[j]!r}: released value {vals[i]!r} of record {i} is "
                "not an ancestor of its original value"
            )
        out[:, j] = found
    return out


def _check_shapes(
    release: GeneralisedRelease, leaves: npt.ArrayLike, hierarchies: Sequence[LevelHierarchy]
) -> IntArray:
    lv = np.asarray(leaves, dtype=np.int64)
    if lv.ndim != 2 or lv.shape != (len(release.labels), len(release.columns)):
        raise DataError("leaves must be n × d, one row per record, one column per key attribute")
    if len(hierarchies) != lv.shape[1]:
        raise ConfigError("one hierarchy per key attribute")
    return lv


# --- release forms -------------------------------------------------------------------------


def precision_loss(release: GeneralisedRelease) -> float:
    """``1 - Prec`` of Sweeney (2002), in [0, 1]; needs ``release.depth`` (hierarchy levels)."""
    if release.depth is None:
        raise ConfigError("precision needs hierarchy levels (release.depth); use gil for intervals")
    return precision_loss_of(release.depth, release.suppressed)


def generalised_loss(release: GeneralisedRelease) -> float:
    """Generalised information loss: mean ``cover`` over cells, in [0, 1]."""
    return generalised_loss_of(release.cover, release.suppressed)


def discernibility(release: GeneralisedRelease) -> float:
    """Discernibility DM in records², in [n, n²]."""
    return discernibility_of(release.labels)


def average_class_size(release: GeneralisedRelease, k: int) -> float:
    """C_AVG = ``n / (classes · k)`` (suppressed records as one class)."""
    return average_class_size_of(release.labels, k)


def non_uniform_entropy(
    release: GeneralisedRelease, leaves: npt.ArrayLike, hierarchies: Sequence[LevelHierarchy]
) -> float:
    """Non-uniform entropy in bits of a release of hierarchy nodes; ``leaves``: n × d original
    leaf codes (:meth:`LevelHierarchy.codes`)."""
    lv = _check_shapes(release, leaves, hierarchies)
    n, d = lv.shape
    levels = _released_levels(release, lv, hierarchies)
    a = np.zeros((n, d))
    b = np.zeros((n, d))
    for j, h in enumerate(hierarchies):
        anc = h.ancestors()
        per_leaf = np.bincount(lv[:, j], minlength=len(h.labels[0])).astype(np.float64)
        a[:, j] = per_leaf[lv[:, j]]
        for lev in np.unique(levels[:, j]):
            rows = levels[:, j] == lev
            per_node = np.bincount(anc[lev], weights=per_leaf, minlength=len(h.labels[lev]))
            b[rows, j] = per_node[anc[lev][lv[rows, j]]]
    return non_uniform_entropy_of(a, b, release.suppressed)


def loss_of_release(
    name: str,
    release: GeneralisedRelease,
    k: int,
    leaves: npt.ArrayLike | None = None,
    hierarchies: Sequence[LevelHierarchy] | None = None,
) -> float:
    """The loss ``name`` (one of :data:`LOSSES`) of ``release``."""
    which = loss_name(name)
    if which == "prec":
        return precision_loss(release)
    if which == "dm":
        return discernibility(release)
    if which == "cavg":
        return average_class_size(release, k)
    if which == "gil":
        return generalised_loss(release)
    if leaves is None or hierarchies is None:
        raise ConfigError("non-uniform entropy needs the original leaf codes and hierarchies")
    return non_uniform_entropy(release, leaves, hierarchies)
