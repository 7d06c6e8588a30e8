"""Encoding of key (quasi-identifier) attributes for joint microaggregation.

Numerical, ordinal and nominal key attributes are mapped to one real matrix whose squared
Euclidean distance is the sum of per-attribute distances (Torra 2004, categorical
microaggregation):

* numerical: z-score (mean 0, standard deviation 1; a constant column becomes 0);
* ordinal: rank of the category divided by its standard deviation over the records, so that a
  rank-based distance is commensurate with the z-scored numerical columns;
* nominal: one-hot columns scaled by ``1/sqrt(2)``, so that two different categories are at squared
  distance exactly 1 (the 0/1 mismatch distance) and equal ones at 0.

Centroids are computed per attribute type on the original values: mean for numerical, median (of
ranks, then mapped back to a category) for ordinal, mode for nominal (ties: the smallest code).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from locpriv.tabular.threads import map_items

logger = logging.getLogger(__name__)

Kind = Literal["numerical", "ordinal", "nominal"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class KeyColumn:
    """One key attribute: its kind, and for categorical ones the ordered categories."""

    name: str
    kind: Kind
    categories: tuple[object, ...] = ()


@dataclass
class EncodedKeys:
    """Distance matrix ``Z`` (n × d') plus what is needed to build centroids per attribute."""

    Z: FloatArray
    columns: list[KeyColumn]
    codes: list[npt.NDArray[np.float64]] = field(default_factory=list)
    """Per key column: the float values (numerical) or integer category codes (categorical)."""


def zscore(X: FloatArray) -> FloatArray:
    """Column-wise z-scores (population standard deviation); constant columns become 0."""
    X = np.asarray(X, dtype=np.float64)
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    out: FloatArray = (X - mu) / sd
    return out


def encode_column(values: npt.NDArray[np.float64], kind: Kind) -> FloatArray:
    """Distance columns (n × d_j) of one key attribute given as codes/values."""
    v = np.asarray(values, dtype=np.float64)
    if kind == "numerical":
        return zscore(v[:, None])
    if kind == "ordinal":
        return zscore(v[:, None])  # codes are ranks 0..c-1; scaled rank distance
    onehot = np.zeros((v.size, _width(v, kind)), dtype=np.float64)
    onehot[np.arange(v.size), v.astype(np.int64)] = 1.0 / np.sqrt(2.0)
    return onehot


def _width(values: npt.NDArray[np.float64], kind: Kind) -> int:
    """Columns of :func:`encode_column`'s part for one attribute."""
    if kind != "nominal":
        return 1
    return max(int(np.max(values)) + 1 if np.size(values) else 0, 1)


def encode(columns: list[KeyColumn], values: list[npt.NDArray[np.float64]]) -> EncodedKeys:
    """Build the joint distance matrix from per-column values (numerical) or codes. Each
    attribute's part is made by one item of :func:`locpriv.tabular.threads.map_items` and
    written into its columns of the n × d result at once (only the parts in flight are alive,
    not all of them and their ``hstack``: a copy of n × d less at the peak)."""
    if not columns:
        return EncodedKeys(Z=np.zeros((0, 0)), columns=columns, codes=values)
    widths = [_width(v, c.kind) for c, v in zip(columns, values, strict=True)]
    n = len(values[0])
    Z: FloatArray = np.empty((n, sum(widths)), dtype=np.float64)
    at = np.cumsum([0, *widths])

    def fill(j: int) -> None:
        Z[:, at[j] : at[j + 1]] = encode_column(values[j], columns[j].kind)

    # two n-long temporaries per column (one-hot: its width more)
    map_items(fill, range(len(columns)), item_bytes=16 * n)
    return EncodedKeys(Z=Z, columns=columns, codes=values)


def group_centroids(values: npt.NDArray[np.float64], labels: IntArray, kind: Kind) -> FloatArray:
    """Per-group representative of one attribute: mean, median code (ordinal) or mode code.

    Returns an array of length ``labels.max() + 1``. Medians of an even-sized group take the
    lower middle code so that the result is an existing category.
    """
    v = np.asarray(values, dtype=np.float64)
    g = int(labels.max()) + 1
    if kind == "numerical":
        sums = np.bincount(labels, weights=v, minlength=g)
        cnt = np.bincount(labels, minlength=g)
        out: FloatArray = sums / cnt
        return out
    if kind == "ordinal":
        order = np.lexsort((v, labels))
        cnt = np.bincount(labels, minlength=g)
        starts = np.concatenate(([0], np.cumsum(cnt)[:-1]))
        mid = starts + (cnt - 1) // 2
        med: FloatArray = v[order][mid]
        return med
    codes = v.astype(np.int64)
    ncat = int(codes.max()) + 1
    table = np.bincount(labels * ncat + codes, minlength=g * ncat).reshape(g, ncat)
    mode: FloatArray = table.argmax(axis=1).astype(np.float64)
    return mode


def encode_written(
    columns: list[KeyColumn],
    values: list[npt.NDArray[np.float64]],
    written: list[npt.NDArray[np.float64]],
) -> FloatArray:
    """The written key values on the scale of :func:`encode`'s matrix for ``values``.

    ``written`` holds, per key column, the released value (numerical) or the code of the
    released category (ordinal, nominal), row by row as ``values``. Each column is scaled with
    the original column's mean and standard deviation (numerical, ordinal) or one-hot over the
    original's codes (nominal), so ``sum((encode(...).Z - encode_written(...))**2)`` is the SSE
    of what is written, in the units of the grouping's distance."""
    if not columns:
        return np.zeros((0, 0))
    widths = [_width(v, c.kind) for c, v in zip(columns, values, strict=True)]
    n = len(written[0])
    out: FloatArray = np.empty((n, sum(widths)), dtype=np.float64)
    at = np.cumsum([0, *widths])

    def fill(j: int) -> None:
        """Column ``j``'s part, written into its columns of ``out`` (one item of map_items)."""
        v = np.asarray(values[j], dtype=np.float64)
        w = np.asarray(written[j], dtype=np.float64)
        if columns[j].kind == "nominal":
            # written categories are modes of original ones: codes < the original's count
            part = out[:, at[j] : at[j + 1]]
            part[...] = 0.0
            part[np.arange(w.size), w.astype(np.int64)] = 1.0 / np.sqrt(2.0)
        else:
            mu = v.mean() if v.size else 0.0
            sd = v.std() if v.size else 1.0
            sd = sd if sd > 0 else 1.0
            out[:, at[j]] = (w - mu) / sd

    map_items(fill, range(len(columns)), item_bytes=16 * n)
    return out
