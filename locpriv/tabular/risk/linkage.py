"""Distance-based record linkage (DBRL) between an original and a released table.

DBRL (Domingo-Ferrer & Torra, "A quantitative comparison of disclosure control methods for
microdata", 2001): every
original record is linked to its nearest released record in the Euclidean distance over
standardised attributes; the risk is the share of original records linked to their own
released record. **Ties are split**: a record whose own released record is among ``m``
released records at the minimum distance counts ``1/m`` (an attacker picking one of them at
random). After microaggregation every member of a group carries the same key values, so on the
key attributes alone the risk is at most the mean of ``1/|class|``; an attribute the attacker
also knows and that passes through unchanged breaks those ties.

Standardisation uses the original file's statistics for both files (mean and population sd of
each numerical attribute; ranks of ordinal categories over their sd). A nominal key attribute
contributes the library's own 0/1 mismatch distance (one-hot over ``sqrt 2``); a non-numerical
pass-through attribute, known exactly to the attacker and released unchanged, must match
exactly (a mismatch costs :data:`MISMATCH`, larger than any standardised distance).

Also the *matching* linkage of a generalised release (:class:`ColumnCover`,
:func:`matching_linkage`; the attacker model is in
:func:`locpriv.tabular.risk.assess.assess_generalised`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.spatial import cKDTree

from locpriv.errors import DataError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MISMATCH = 1.0e3
"""Distance of two different values of a non-numerical attribute the attacker knows exactly."""


def _numeric(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s))


def _categories(s: pd.Series) -> list[object]:
    if isinstance(s.dtype, pd.CategoricalDtype):
        return list(s.cat.categories)
    uniq = pd.unique(s)
    try:
        return sorted(uniq)
    except TypeError:
        return sorted(uniq, key=str)


def _codes(s: pd.Series, cats: list[object], name: str) -> FloatArray:
    codes = pd.Categorical(s.astype(object), categories=cats).codes
    if (codes < 0).any():
        raise DataError(f"released column {name!r} holds a category absent from the original")
    return np.asarray(codes, dtype=np.float64)


def encode_pair(
    original: pd.DataFrame,
    released: pd.DataFrame,
    columns: Sequence[str],
    *,
    ordinal: Sequence[str] = (),
    nominal: Sequence[str] = (),
    exact: Sequence[str] = (),
) -> tuple[FloatArray, FloatArray]:
    """The two distance matrices (original, released) of ``columns``, standardised on the
    original (module docstring). ``exact``: non-numerical columns that must match exactly."""
    xs: list[FloatArray] = []
    ys: list[FloatArray] = []
    for name in columns:
        a, b = original[name], released[name]
        if name in nominal:
            cats = _categories(a)
            ca, cb = _codes(a, cats, name), _codes(b, cats, name)
            eye = np.eye(len(cats)) / np.sqrt(2.0)
            xs.append(eye[ca.astype(np.int64)])
            ys.append(eye[cb.astype(np.int64)])
            continue
        if name in ordinal:
            cats = _categories(a)
            va, vb = _codes(a, cats, name), _codes(b, cats, name)
        elif name in exact or not _numeric(a):
            both = pd.concat([a.astype(object), b.astype(object)], ignore_index=True)
            codes = pd.factorize(both)[0].astype(np.float64)
            xs.append(MISMATCH * codes[: len(a), None])
            ys.append(MISMATCH * codes[len(a) :, None])
            continue
        else:
            if not _numeric(b):
                raise DataError(
                    f"released column {name!r} is not numerical (interval releases are "
                    "assessed on their classes only)"
                )
            va = a.to_numpy(dtype=np.float64)
            vb = b.to_numpy(dtype=np.float64)
        mu, sd = float(va.mean()), float(va.std())
        sd = sd if sd > 0 else 1.0
        xs.append(((va - mu) / sd)[:, None])
        ys.append(((vb - mu) / sd)[:, None])
    return np.hstack(xs), np.hstack(ys)


def dbrl(X: FloatArray, Y: FloatArray, truth: npt.ArrayLike) -> FloatArray:
    """Per original record, the probability that DBRL links it to its own released record.

    ``X`` (n × d) original, ``Y`` (m × d) released, ``truth[i]`` = the row of ``Y`` that is
    record i. The nearest released record(s) at the minimum distance ``d_i`` (ties within a
    relative 1e-9) share the link: ``1/m_i`` if the own record is among the ``m_i``, else 0.
    The DBRL risk is the mean of the result.
    """
    t = np.asarray(truth, dtype=np.int64)
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    tree = cKDTree(Y)
    d1, _ = tree.query(X, k=1)
    own = np.sqrt(np.sum((X - Y[t]) ** 2, axis=1))
    tol = 1e-9 * (1.0 + d1)
    hit = own <= d1 + tol
    out: FloatArray = np.zeros(X.shape[0])
    if hit.any():
        cnt = tree.query_ball_point(X[hit], r=d1[hit] + tol[hit], return_length=True)
        out[hit] = 1.0 / np.maximum(np.asarray(cnt, dtype=np.float64), 1.0)
    return out


def nearest_class_sizes(
    X_population: FloatArray, Y: FloatArray, release_labels: npt.ArrayLike
) -> FloatArray:
    """Per released record, ``F_c``: the number of population records whose nearest released
    key vector belongs to its class ``c`` (the attacker's matching of a population to a
    microaggregated release; the journalist model's population class size)."""
    lab = np.unique(np.asarray(release_labels), return_inverse=True)[1].ravel()
    g = int(lab.max()) + 1
    first = np.unique(lab, return_index=True)[1]
    tree = cKDTree(np.ascontiguousarray(Y[first]))
    _, idx = tree.query(np.ascontiguousarray(X_population), k=1)
    counts = np.bincount(lab[first][np.asarray(idx)], minlength=g).astype(np.float64)
    out: FloatArray = counts[lab]
    return out


def nearest_classes(X: FloatArray, Y: FloatArray, labels: npt.ArrayLike) -> list[IntArray]:
    """Per original record (row of ``X``), the classes of the released records at the minimum
    distance (ties within a relative 1e-9). ``labels[j]`` = the class of released row j; rows of
    a class carry the same key values, so the search runs over one vector per class."""
    lab = np.asarray(labels, dtype=np.int64)
    first = np.unique(lab, return_index=True)[1]
    tree = cKDTree(np.ascontiguousarray(Y[first], dtype=np.float64))
    X = np.ascontiguousarray(X, dtype=np.float64)
    d1, _ = tree.query(X, k=1)
    near = tree.query_ball_point(X, r=d1 + 1e-9 * (1.0 + d1))
    classes = lab[first]
    return [classes[np.asarray(i, dtype=np.int64)] for i in near]


def dbrl_by_class(near: list[IntArray], own: npt.ArrayLike, sizes: npt.ArrayLike) -> FloatArray:
    """:func:`dbrl` on the key attributes from :func:`nearest_classes`: ``1 / (records of the
    tied classes)`` when the record's own class ``own[i]`` is among them, else 0."""
    o = np.asarray(own, dtype=np.int64)
    f = np.asarray(sizes, dtype=np.float64)
    out: FloatArray = np.array(
        [(1.0 / f[c].sum()) if (c == oi).any() else 0.0 for c, oi in zip(near, o, strict=True)]
    )
    return out


def nearest_inference(
    near: list[IntArray],
    labels: npt.ArrayLike,
    secret: npt.ArrayLike,
    released_secret: npt.ArrayLike,
) -> FloatArray:
    """Per original record, the probability that an attacker who links its key values to the
    nearest released record (ties split, as in :func:`dbrl`) reads its confidential value
    there: the share of the records of the tied nearest classes (``near``, from
    :func:`nearest_classes`; ``labels`` the classes of the released rows) whose
    ``released_secret`` equals the record's ``secret`` (the nearest-record inference attack of
    anonymeter's ``InferenceEvaluator``, with this module's distance)."""
    s = np.asarray(secret, dtype=object)
    r = np.asarray(released_secret, dtype=object)
    codes = pd.factorize(np.concatenate([s, r]))[0]
    cs, cr = codes[: s.size], codes[s.size :]
    lab = np.asarray(labels, dtype=np.int64)
    nv = int(codes.max()) + 1
    g = int(lab.max()) + 1
    table = np.bincount(lab * nv + cr, minlength=g * nv).reshape(g, nv).astype(np.float64)
    size = table.sum(axis=1)
    out: FloatArray = np.array(
        [table[c, v].sum() / size[c].sum() for c, v in zip(near, cs, strict=True)]
    )
    return out


def dbrl_with_column(
    X: FloatArray,
    Y: FloatArray,
    *,
    x_col: FloatArray,
    y_col: FloatArray,
    labels: npt.ArrayLike,
    truth: npt.ArrayLike,
) -> FloatArray:
    """:func:`dbrl` on the key attributes plus one more attribute, computed through the
    classes: ``X``/``Y`` the key matrices, ``x_col``/``y_col`` the extra column (encoded as by
    :func:`encode_pair`), ``labels`` the classes of the released rows, ``truth`` the released
    row of each row of ``X``. A released record can be nearer than the own one (at distance
    ``D``) only if its class's key vector lies within ``D``, so only those classes' members are
    compared; the result equals :func:`dbrl` on the joined matrices (tested)."""
    lab = np.asarray(labels, dtype=np.int64)
    t = np.asarray(truth, dtype=np.int64)
    first = np.unique(lab, return_index=True)[1]
    centres = np.ascontiguousarray(Y[first], dtype=np.float64)
    tree = cKDTree(centres)
    order = np.argsort(lab, kind="stable")
    starts = np.searchsorted(lab[order], np.arange(first.size + 1))
    X = np.asarray(X, dtype=np.float64)
    own_d2 = np.sum((X - Y[t]) ** 2, axis=1) + (x_col - y_col[t]) ** 2
    own_d = np.sqrt(own_d2)
    balls = tree.query_ball_point(X, r=own_d + 1e-9 * (1.0 + own_d))
    out: FloatArray = np.zeros(X.shape[0])
    for i, cls in enumerate(balls):
        cls_arr = np.asarray(cls, dtype=np.int64)
        dk2 = np.sum((centres[cls_arr] - X[i]) ** 2, axis=1)
        counts = starts[cls_arr + 1] - starts[cls_arr]
        members = np.concatenate([order[starts[c] : starts[c + 1]] for c in cls_arr])
        d2 = np.repeat(dk2, counts) + (x_col[i] - y_col[members]) ** 2
        best = d2.min()
        tied = d2 <= best + 1e-9 * (1.0 + best) * 2
        if own_d2[i] <= best + 1e-9 * (1.0 + best) * 2:
            out[i] = 1.0 / tied.sum()
    return out


# --- matching linkage of generalised releases ---------------------------------------------

BoolArray = npt.NDArray[np.bool_]
SUPPRESSED = "*"
_RANGE = re.compile(r"^\s*[\[(]\s*([^,]+?)\s*,\s*([^\])]+?)\s*[\])]\s*$")
_CHUNK = 256


def parse_range(label: str) -> tuple[float, float, bool, bool] | None:
    """``"[lo, hi]"`` / ``"[lo, hi)"`` -> ``(lo, hi, lo closed, hi closed)``; None otherwise."""
    m = _RANGE.match(label)
    if m is None:
        return None
    try:
        lo, hi = float(m.group(1)), float(m.group(2))
    except ValueError:
        return None
    return lo, hi, label.strip().startswith("["), label.strip().endswith("]")


class ColumnCover:
    """Which released labels of one key column cover which original values.

    ``leaf``: the original value of each record as a code ``0..v-1``; :meth:`matrix` gives, for
    the released labels ``labels``, a ``len(labels) × v`` boolean table."""

    def __init__(self, name: str, original: pd.Series, hierarchy: LevelHierarchy | None) -> None:
        self.name = name
        self.hierarchy = hierarchy
        if hierarchy is not None:
            self.leaf = hierarchy.codes(original.tolist())
            self.nleaf = len(hierarchy.labels[0])
            anc = hierarchy.ancestors()
            self._nodes: dict[str, BoolArray] = {}
            for lev in range(len(hierarchy.labels) - 1, -1, -1):  # lower levels win a tie
                for node, lab in enumerate(hierarchy.labels[lev]):
                    self._nodes[lab] = anc[lev] == node
            self.values = None
        else:
            if not _numeric(original):
                raise DataError(
                    f"key attribute {self.name!r} has no hierarchy and is not numerical"
                )
            vals, inv = np.unique(original.to_numpy(dtype=np.float64), return_inverse=True)
            self.leaf = inv.astype(np.int64).reshape(-1)
            self.nleaf = len(vals)
            self.values = vals

    def covers(self, label: str) -> BoolArray:
        """Original values (leaf codes) that the released ``label`` covers."""
        if label == SUPPRESSED:
            return np.ones(self.nleaf, dtype=bool)
        if self.hierarchy is not None:
            found = self._nodes.get(label)
            if found is None:
                raise DataError(
                    f"released value {label!r} of {self.name!r} is not in its hierarchy"
                )
            return found
        rng = parse_range(label)
        if rng is None:
            try:
                x = float(label)
            except ValueError:
                raise DataError(
                    f"released value {label!r} of {self.name!r} is not a number or a range"
                ) from None
            rng = (x, x, True, True)
        lo, hi, lc, hc = rng
        v = self.values
        assert v is not None
        return ((v >= lo) if lc else (v > lo)) & ((v <= hi) if hc else (v < hi))

    def span(self, label: str, original: npt.NDArray[np.float64]) -> tuple[float, float]:
        """Numeric range ``[lo, hi]`` of the original values ``label`` covers."""
        if self.hierarchy is None:
            vals = self.values
        else:
            vals = np.array([float(x) for x in self.hierarchy.labels[0]])
        assert vals is not None
        sel = vals[self.covers(label)]
        return (float(sel.min()), float(sel.max())) if sel.size else (float("nan"),) * 2


def matching_linkage(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    hierarchies: Mapping[str, LevelHierarchy | None],
    passthrough: Sequence[str] = (),
    *,
    sample: int | None = 5_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Matching linkage of a generalised release (:func:`~locpriv.tabular.risk.assess.
    assess_generalised` explains the attacker) of ``sample`` original records (all when ``None``
    or fewer) against every released row: ``{"keys", "passthrough" {col}, "sample", "se",
    "candidates_mean"}``."""
    n = len(original)
    covers = [ColumnCover(c, original[c], hierarchies.get(c)) for c in qi]
    rel_codes = []
    tables = []
    for cv, c in zip(covers, qi, strict=True):
        labs, inv = np.unique(released[c].astype(str).to_numpy(), return_inverse=True)
        rel_codes.append(inv.astype(np.int64).reshape(-1))
        tables.append(np.stack([cv.covers(str(lab)) for lab in labs]))
    keys = np.column_stack(rel_codes)
    cls_keys, cls = np.unique(keys, axis=0, return_inverse=True)
    cls = cls.astype(np.int64).reshape(-1)
    cnt = np.bincount(cls).astype(np.float64)
    idx = np.arange(n)
    if sample is not None and n > sample:
        idx = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    groups: dict[str, dict[Any, IntArray]] = {}
    orig_pt: dict[str, npt.NDArray[Any]] = {}
    for c in passthrough:
        r = released[c].astype(object).to_numpy()
        groups[c] = {
            v: np.asarray(rows, dtype=np.int64)
            for v, rows in pd.Series(np.arange(len(r)))
            .groupby(r, sort=False, dropna=False)
            .groups.items()
        }
        orig_pt[c] = original[c].astype(object).to_numpy()
    hits = np.zeros(idx.size)
    cand = np.zeros(idx.size)
    through = {c: np.zeros(idx.size) for c in passthrough}
    for start in range(0, idx.size, _CHUNK):
        part = idx[start : start + _CHUNK]
        ok = np.ones((len(cls_keys), part.size), dtype=bool)
        for j, cv in enumerate(covers):
            ok &= tables[j][cls_keys[:, j]][:, cv.leaf[part]]
        total = cnt @ ok
        cand[start : start + part.size] = total
        hits[start : start + part.size] = np.where(total > 0, 1.0 / np.maximum(total, 1), 0.0)
        for c in passthrough:
            for ii, i in enumerate(part):
                rows = groups[c].get(orig_pt[c][i])
                if rows is None:
                    continue
                m = int(ok[cls[rows], ii].sum())
                through[c][start + ii] = 1.0 / m if m else 0.0
    size = max(idx.size, 1)
    se = {"keys": float(hits.std() / np.sqrt(size))}
    se.update({c: float(v.std() / np.sqrt(size)) for c, v in through.items()})
    return {
        "model": "matching (the attacker knows the hierarchies)",
        "keys": float(hits.mean()) if idx.size else 0.0,
        "passthrough": {c: float(v.mean()) for c, v in through.items()},
        "candidates_mean": float(cand.mean()) if idx.size else 0.0,
        "sample": int(idx.size),
        "se": se,
    }
