"""Confidential attributes as dense integer codes, the form every p-sensitive kernel takes."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from locpriv.errors import ConfigError

__all__ = ["as_codes"]


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
        _, codes[:, j] = np.unique(arr[:, j], return_inverse=True)
    return codes
