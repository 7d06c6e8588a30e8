"""Validators of a partition or of a released table: k-anonymity, achieved p, homogeneity.

On a partition, the equivalence classes are the groups (``labels``). On a released table, they are
the sets of rows with identical key-attribute values (two groups whose centroids coincide form one
class, which can only raise k and p).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

IntArray = npt.NDArray[np.int64]


def is_k_anonymous(labels: IntArray, k: int) -> bool:
    """True when every group has at least ``k`` records."""
    labels = np.asarray(labels)
    return labels.size == 0 or int(np.bincount(labels)[np.unique(labels)].min()) >= k


def distinct_per_group(labels: IntArray, s: npt.NDArray[np.int64]) -> IntArray:
    """Number of distinct values of one confidential attribute (integer codes) per group."""
    labels = np.asarray(labels, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    nv = int(s.max()) + 1 if s.size else 1
    pairs = np.unique(labels * nv + s)
    g = int(labels.max()) + 1
    out: IntArray = np.bincount(pairs // nv, minlength=g)
    return out


def achieved_p(labels: IntArray, S: npt.NDArray[np.int64]) -> list[int]:
    """Per confidential attribute (column of ``S``): the minimum over groups of distinct values."""
    S = np.asarray(S, dtype=np.int64).reshape(len(labels), -1)
    used = np.unique(labels)
    return [int(distinct_per_group(labels, S[:, j])[used].min()) for j in range(S.shape[1])]


def is_p_sensitive(labels: IntArray, S: npt.NDArray[np.int64], k: int, p: int) -> bool:
    """k-anonymous and every group has at least ``p`` distinct values of every attribute."""
    return is_k_anonymous(labels, k) and all(a >= p for a in achieved_p(labels, S))


def homogeneous_groups(labels: IntArray, S: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """``(group, attribute index)`` pairs where the group has one single confidential value.

    Such groups are open to a homogeneity attack: an intruder who links a person to the group
    learns the confidential value.
    """
    S = np.asarray(S, dtype=np.int64).reshape(len(labels), -1)
    used = np.unique(np.asarray(labels))
    out: list[tuple[int, int]] = []
    for j in range(S.shape[1]):
        dist = distinct_per_group(labels, S[:, j])
        out.extend((int(gi), j) for gi in used if dist[gi] == 1)
    return sorted(out)


def table_classes(df: pd.DataFrame, qi: Sequence[str]) -> IntArray:
    """Equivalence-class labels (0..c-1) of a released table: rows with equal key values."""
    codes = df.groupby(list(qi), sort=False, dropna=False).ngroup().to_numpy()
    return np.asarray(codes, dtype=np.int64)


def table_k(df: pd.DataFrame, qi: Sequence[str]) -> int:
    """The k a released table achieves (smallest equivalence class)."""
    return int(df.groupby(list(qi), dropna=False).size().min())


def table_p(df: pd.DataFrame, qi: Sequence[str], sensitive: Sequence[str]) -> dict[str, int]:
    """Per confidential attribute: the smallest number of distinct values in a class."""
    grouped = df.groupby(list(qi), dropna=False)
    return {s: int(grouped[s].nunique(dropna=False).min()) for s in sensitive}
