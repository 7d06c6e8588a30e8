"""Mondrian multidimensional partitioning (LeFevre, DeWitt & Ramakrishnan, ICDE 2006).

Public function::

    mondrian(keys: KeyTable, check: ModelCheck, *, columns: Sequence[str] | None = None,
             relaxed: bool = False) -> GeneralisedRelease

``keys`` (:class:`~locpriv.tabular.generalisation.hierarchy.KeyTable`) holds the numeric key
attributes (n × s floats, released as ranges) and the leaf codes of the categorical ones with their
hierarchies (n × t, released as hierarchy nodes); ``columns`` names them in that order
(numeric first; default ``x0.., c0..``). ``check`` (:class:`~locpriv.tabular.models.spec.
ModelCheck`) decides the privacy models; a cut is made only when every side it creates passes
``check.rows_ok``, so every class of the result satisfies the models (k, distinct l, and whatever
models ``ModelCheck`` decides).

The algorithm, iterative (a work stack, no recursion), starting from the whole table:

1. A partition of fewer than ``2 k`` records is final (no cut can leave ``k`` on both sides).
2. Its dimensions are ranked by normalised width, widest first: a numeric one by the range of
   its values in the partition over the range in the table, a categorical one by the share of
   the hierarchy's leaves under the lowest common ancestor (LCA) of its values,
   ``(leaves(LCA) - 1) / (leaves - 1)``. Ties go to the earlier column (numeric before
   categorical, then in column order); a dimension of width 0 is never cut.
3. The first dimension whose cut is *allowable* (all sides pass the models) is cut and the
   sides go back on the stack; if none is, the partition is a class.

Cuts:

- numeric, **strict** (``relaxed=False``): at the lower median ``m`` of the partition's values,
  ``x <= m`` left and ``x > m`` right (when ``m`` is the maximum, ``x < m`` / ``x >= m``): the
  sides' ranges are disjoint, so classes are too.
- numeric, **relaxed** (``relaxed=True``): the records sorted by value (ties by record index)
  and cut into halves ``floor(n/2)`` and ``ceil(n/2)``: records equal to the median may fall on
  either side, so the sizes are balanced and, with k-anonymity alone, every class has
  ``k <= size < 2k`` records (the ranges of two classes may overlap).
- categorical (both modes): one side per child of the LCA that holds records (the top-down
  cut along the hierarchy of the generalised Mondrian / top-down specialisation).

Release: a numeric value is released as the class's range ``[lo, hi]`` (min and max of the
class, numbers written by :func:`~locpriv.tabular.generalisation.builders.format_number`), a
categorical one as the label of the class's LCA. Classes whose released tuples coincide (only
possible in relaxed mode, or when two hierarchy nodes share a label) are merged, and the merged
class is checked again, so the release's classes are exactly the sets of equal released keys.
``cover`` is ``(hi - lo) / range`` (0 for a constant column) and the LCA's leaf share above.
Classes are numbered in the order of their first record. Deterministic: no ``rng`` or ``now``.

Speed: with numeric keys only and k-anonymity alone (``check`` holds no confidential
attributes) the cuts run in a numba loop (:mod:`locpriv.tabular.generalisation._kernels.mondrian`)
that makes exactly the same cuts as the numpy loop used otherwise (tested equal).

No suppression: when the whole table satisfies the models Mondrian needs none (every class is
an allowable side of a cut, or the table), and when it does not this function raises
:class:`~locpriv.errors.InfeasibleError` naming the first violated field. Suppressing
outliers first does not pay in Mondrian as it does in full-domain recoding: cuts are at each
partition's own median, so an outlier widens only the one class it ends in, and there is no
principled choice of which records to drop that the paper gives; ``max_suppression`` is
therefore not offered.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular.generalisation._kernels.mondrian import mondrian_numeric
from locpriv.tabular.generalisation.hierarchy import KeyTable, LevelHierarchy
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.models.spec import ModelCheck

__all__ = ["mondrian"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _numeric_cut(idx: IntArray, v: FloatArray, relaxed: bool) -> list[IntArray] | None:
    if relaxed:
        order = np.lexsort((idx, v))  # by value, ties by record index
        half = len(idx) // 2
        return [idx[order[:half]], idx[order[half:]]]
    m = np.partition(v, (len(v) - 1) // 2)[(len(v) - 1) // 2]
    left = v <= m
    if left.all():
        left = v < m
    if not left.any():
        return None
    return [idx[left], idx[~left]]


def _categorical_cut(idx: IntArray, nodes: IntArray) -> list[IntArray]:
    """One side per distinct node (``nodes``: each record's ancestor one level below the LCA)."""
    order = np.argsort(nodes, kind="stable")
    srt = nodes[order]
    bounds = np.flatnonzero(np.diff(srt)) + 1
    return [idx[part] for part in np.split(order, bounds)]


def mondrian(
    keys: KeyTable,
    check: ModelCheck,
    *,
    columns: Sequence[str] | None = None,
    relaxed: bool = False,
) -> GeneralisedRelease:
    """Mondrian release of ``keys`` under ``check``'s privacy models (module docstring)."""
    num = np.asarray(keys.numeric, dtype=np.float64)
    leaves = np.asarray(keys.leaves, dtype=np.int64)
    hs = keys.hierarchies
    n, s, t = keys.n, num.shape[1], len(hs)
    d = s + t
    names = (
        tuple(columns)
        if columns is not None
        else tuple([f"x{j}" for j in range(s)] + [f"c{j}" for j in range(t)])
    )
    if len(names) != d:
        raise ConfigError(f"{len(names)} column names for {d} key attributes")
    if n == 0:
        raise DataError("no records to anonymise")
    if check.S.shape[1] and check.S.shape[0] != n:
        raise ConfigError(f"the privacy check holds {check.S.shape[0]} records, the keys {n}")
    for j, h in enumerate(hs):
        if leaves[:, j].min() < 0 or leaves[:, j].max() >= len(h.labels[0]):
            raise DataError(f"column {names[s + j]!r}: leaf codes outside the hierarchy")
    k_only = check.S.shape[1] == 0  # no confidential attributes: only k applies

    def ok(rows: IntArray) -> bool:
        return len(rows) >= check.models.k if k_only else check.rows_ok(rows)

    everyone = np.arange(n, dtype=np.int64)
    if not ok(everyone):
        bad = check.violations(everyone) if not k_only else ["k"]
        m = check.models
        value = {"k": m.k, "l": m.l, "entropy_l": m.entropy_l, "recursive": m.recursive, "t": m.t}
        raise InfeasibleError(
            f"the whole table ({n} records) does not satisfy the privacy models "
            f"({bad[0]}={value[bad[0]]!r}; field {bad[0]}): no generalisation can"
        )
    span = num.max(axis=0) - num.min(axis=0) if s else np.zeros(0)
    inv_span = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 0.0)
    if t == 0 and k_only:  # numeric keys, k alone: the compiled loop makes the same cuts
        rank = np.zeros((n, s if relaxed else 0), dtype=np.int64)
        for c in range(rank.shape[1]):  # position in the order (value, record index)
            rank[np.lexsort((everyone, num[:, c])), c] = everyone
        perm, starts, cuts = mondrian_numeric(
            np.ascontiguousarray(num), rank, inv_span, check.models.k, relaxed
        )
        return _release(
            num=num,
            rec_anc=[],
            node_cover=[],
            hs=hs,
            names=names,
            order=perm,
            starts=starts,
            check=check,
            inv_span=inv_span,
            relaxed=relaxed,
            cuts=int(cuts),
        )
    rec_anc = [h.ancestors()[:, leaves[:, j]] for j, h in enumerate(hs)]  # levels × n per column
    node_cover: list[list[FloatArray]] = []
    for h in hs:
        anc = h.ancestors()
        nl = len(h.labels[0])
        per_level = []
        for lev in range(len(h.labels)):
            under = np.bincount(anc[lev], minlength=len(h.labels[lev])).astype(np.float64)
            per_level.append((under - 1) / (nl - 1) if nl > 1 else np.zeros(len(under)))
        node_cover.append(per_level)
    two_k = 2 * check.models.k

    # leaves ranked depth first (np.lexsort of the ancestor rows, root first), so every node's
    # leaves are a run of ranks and the LCA of a set of leaves is that of its lowest- and
    # highest-ranked ones
    anc_of = [h.ancestors() for h in hs]  # levels × leaves
    by_rank = [np.lexsort(a) for a in anc_of]  # leaf at each rank
    chain = [a.T[r].tolist() for a, r in zip(anc_of, by_rank, strict=True)]  # rank -> ancestors
    ranks = [np.argsort(r)[leaves[:, j]] for j, r in enumerate(by_rank)]
    # one matrix for the per-partition reductions: numeric values, then leaf ranks
    box = np.column_stack([num, *ranks]).astype(np.float64) if d else np.zeros((n, 0))

    final: list[IntArray] = []
    stack: list[IntArray] = [everyone]
    cuts = 0
    while stack:
        idx = stack.pop()
        if len(idx) < two_k:
            final.append(idx)
            continue
        sub = box[idx]
        mins, maxs = sub.min(axis=0), sub.max(axis=0)
        widths = np.zeros(d)
        widths[:s] = (maxs[:s] - mins[:s]) * inv_span
        lca_level = [0] * t
        for j in range(t):
            first, last = chain[j][int(mins[s + j])], chain[j][int(maxs[s + j])]
            lev = next(lv for lv in range(len(first)) if first[lv] == last[lv])  # root agrees
            lca_level[j] = lev
            widths[s + j] = node_cover[j][lev][first[lev]]
        parts: list[IntArray] | None = None
        for dim in np.argsort(-widths, kind="stable"):
            if widths[dim] <= 0:
                break
            if dim < s:
                parts = _numeric_cut(idx, sub[:, dim], relaxed)
            else:
                j = int(dim) - s
                parts = _categorical_cut(idx, rec_anc[j][lca_level[j] - 1, idx])
            if parts is not None and all(ok(p) for p in parts):
                break
            parts = None
        if parts is None:
            final.append(idx)
        else:
            cuts += 1
            stack.extend(reversed(parts))
    return _release(
        num=num,
        rec_anc=rec_anc,
        node_cover=node_cover,
        hs=hs,
        names=names,
        order=np.concatenate(final),  # records grouped by partition
        starts=np.cumsum([0] + [len(f) for f in final[:-1]]).astype(np.int64),
        check=check,
        inv_span=inv_span,
        relaxed=relaxed,
        cuts=cuts,
    )


def _number_labels(x: FloatArray) -> npt.NDArray[np.str_]:
    """:func:`format_number` of every entry, vectorised: integers without a decimal point,
    other numbers as numpy's shortest round-trip text (the same as ``repr``)."""
    integral = (x == np.round(x)) & (np.abs(x) < 2.0**53)
    out: npt.NDArray[np.str_] = np.where(
        integral, np.where(integral, x, 0).astype(np.int64).astype(str), x.astype(str)
    )
    return out


def _release(
    *,
    num: FloatArray,
    rec_anc: list[IntArray],
    node_cover: list[list[FloatArray]],
    hs: Sequence[LevelHierarchy],
    names: tuple[str, ...],
    order: IntArray,
    starts: IntArray,
    check: ModelCheck,
    inv_span: FloatArray,
    relaxed: bool,
    cuts: int,
) -> GeneralisedRelease:
    n, s = num.shape[0], num.shape[1]
    t = len(rec_anc)
    d = s + t
    g0 = len(starts)
    part_of = np.empty(n, dtype=np.int64)
    part_of[order] = np.repeat(np.arange(g0), np.diff(np.append(starts, n)))
    covers = np.zeros((g0, d))
    columns: list[list[str]] = []
    if s:
        lo = np.minimum.reduceat(num[order], starts, axis=0)
        hi = np.maximum.reduceat(num[order], starts, axis=0)
        covers[:, :s] = (hi - lo) * inv_span
        los, his = _number_labels(lo), _number_labels(hi)
        for c in range(s):
            columns.append(
                [f"[{a}, {b}]" for a, b in zip(los[:, c].tolist(), his[:, c].tolist(), strict=True)]
            )
    for j in range(t):
        h = hs[j]
        anc = h.ancestors()
        by_rank = np.lexsort(anc)
        rank = np.argsort(by_rank)[rec_anc[j][0, order]]  # ranks of the grouped records' leaves
        first_leaf = by_rank[np.minimum.reduceat(rank, starts)]
        last_leaf = by_rank[np.maximum.reduceat(rank, starts)]
        lev = np.argmax(anc[:, first_leaf] == anc[:, last_leaf], axis=0)  # each partition's LCA
        node = anc[lev, first_leaf]
        pairs = list(zip(lev.tolist(), node.tolist(), strict=True))
        columns.append([h.labels[lv][nd] for lv, nd in pairs])
        covers[:, s + j] = [node_cover[j][lv][nd] for lv, nd in pairs]
    texts = list(zip(*columns, strict=True))
    # classes = equal released tuples, numbered by first record
    first = np.minimum.reduceat(order, starts)
    cls_of_tuple: dict[tuple[str, ...], int] = {}
    part_cls = np.empty(g0, dtype=np.int64)
    for p in np.argsort(first, kind="stable"):
        part_cls[p] = cls_of_tuple.setdefault(tuple(texts[p]), len(cls_of_tuple))
    labels_arr = part_cls[part_of]
    g = len(cls_of_tuple)
    bad = np.flatnonzero(~check.classes_ok(labels_arr))  # the release checked whole, once more
    if len(bad):  # pragma: no cover - sides of allowable cuts, and their unions, pass
        raise DataError(f"Mondrian classes fail the privacy models: {bad[:5].tolist()}")
    tuples = list(cls_of_tuple)
    values = tuple(
        tuple(np.asarray([tp[c] for tp in tuples], dtype=object)[labels_arr].tolist())
        for c in range(d)
    )
    cover = covers[part_of]
    sizes = np.bincount(labels_arr, minlength=g)
    info: dict[str, object] = {
        "method": "mondrian",
        "mode": "relaxed" if relaxed else "strict",
        "classes": g,
        "cuts": cuts,
        "min_class": int(sizes.min()),
        "max_class": int(sizes.max()),
        "mean_class": float(sizes.mean()),
    }
    return GeneralisedRelease(
        columns=names,
        values=values,
        labels=labels_arr,
        suppressed=np.zeros(n, dtype=bool),
        cover=cover,
        levels=None,
        info=info,
    )
