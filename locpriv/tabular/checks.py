"""Checked inputs of the algorithms: the key matrix, k, and confidential attributes as dense
integer codes (the form every p-sensitive kernel takes). Each raises a one-line error naming the
input (:mod:`locpriv.errors`)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError, DataError, InfeasibleError

__all__ = ["as_codes", "check_k", "check_matrix"]

FloatArray = npt.NDArray[np.float64]


def check_matrix(X: npt.ArrayLike, name: str = "X") -> FloatArray:
    """``X`` as a C-contiguous float64 (n, d) array with n >= 1, d >= 1 and finite values.

    Raises :class:`~locpriv.errors.DataError` naming ``name`` otherwise.
    """
    arr = np.asarray(X)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.integer)
        or arr.dtype == np.bool_
    ):
        raise DataError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise DataError(f"{name} must be 2-D (records x attributes), got {arr.ndim}-D")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DataError(f"{name} must have at least one row and one column, got shape {arr.shape}")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(out).all():
        bad = np.flatnonzero(~np.isfinite(out).all(axis=0))
        raise DataError(f"{name} has NaN or infinite values (columns {bad.tolist()})")
    return out


def check_k(k: object, n: int) -> int:
    """``k`` as an int with ``1 <= k <= n``; :class:`~locpriv.errors.InfeasibleError` otherwise."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise InfeasibleError(f"k must be an integer >= 1, got {k!r}")
    kk = int(k)
    if kk < 1:
        raise InfeasibleError(f"k must be >= 1, got {kk}")
    if kk > n:
        raise InfeasibleError(f"k={kk} exceeds the number of records n={n}")
    return kk


def as_codes(S: npt.ArrayLike, n: int) -> npt.NDArray[np.int64]:
    """``S`` (n values, or n × m) as a C-contiguous n × m int64 array of codes ``0..c_j-1`` per
    column (the sorted distinct values of column j get 0, 1, ...). Any orderable values work;
    only equality matters for p-sensitivity. Raises ``ConfigError`` when ``S`` has not n rows."""
    arr = np.asarray(S)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != n:
        raise ConfigError(f"S has {arr.shape[0] if arr.ndim else 0} rows but X has {n}")
    codes = np.empty(arr.shape, dtype=np.int64)
    for j in range(arr.shape[1]):
        col = arr[:, j]
        if _dense(col):  # already 0..c-1, every code used: its own ranks (no sort)
            codes[:, j] = col
        else:
            _, codes[:, j] = np.unique(col, return_inverse=True)
    return codes


def _dense(col: npt.NDArray[Any]) -> bool:
    """Integer values that are exactly ``0..c-1``, each present (then ``np.unique``'s inverse
    is the column itself)."""
    if col.dtype.kind not in "iu" or col.size == 0:
        return False
    lo, hi = int(col.min()), int(col.max())
    return lo == 0 and hi < col.size and bool(np.all(np.bincount(col.astype(np.int64)) > 0))
