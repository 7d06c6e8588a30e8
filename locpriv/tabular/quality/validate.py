"""Validators of a partition or of a released table: k-anonymity, achieved p, homogeneity.

On a partition, the equivalence classes are the groups (``labels``). On a released table, they are
the sets of rows with identical key-attribute values (two groups whose centroids coincide form one
class, which can only raise k and p).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.tabular.quality._kernels.counting import distinct_counts as _distinct_kernel

IntArray = npt.NDArray[np.int64]


def is_k_anonymous(labels: IntArray, k: int) -> bool:
    """True when every group has at least ``k`` records."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return True
    cnt = np.bincount(labels)
    return int(cnt[cnt > 0].min()) >= k


DENSE_CODES_PER_RECORD = 2
"""Codes above ``DENSE_CODES_PER_RECORD · n + 1024`` are renumbered before counting (the
kernel keeps one entry per code)."""


def distinct_counts(labels: IntArray, S: npt.ArrayLike) -> IntArray:
    """g × m: the number of distinct values of each confidential attribute (columns of ``S``,
    integer codes ``>= 0``; one column may be given as a vector) in each group ``0..g-1``
    (``g = labels.max() + 1``; an empty group has 0). One counting sort of the rows by group,
    then one pass per attribute (numba; no sort of (group, value) pairs)."""
    lab = np.ascontiguousarray(labels, dtype=np.int64)
    codes = np.asarray(S, dtype=np.int64).reshape(lab.size, -1)
    g = int(lab.max()) + 1  # (no records: ValueError, as before)
    if int(lab.min()) < 0:
        raise ValueError("labels must be >= 0")
    if codes.size:
        if int(codes.min()) < 0:
            raise ValueError("confidential codes must be >= 0")
        wide = codes.max(axis=0) >= DENSE_CODES_PER_RECORD * lab.size + 1024
        if wide.any():  # sparse codes: their ranks (equality is all that counts)
            codes = codes.copy()
            for j in np.flatnonzero(wide):
                codes[:, j] = np.unique(codes[:, j], return_inverse=True)[1].reshape(-1)
    out: IntArray = _distinct_kernel(lab, np.ascontiguousarray(codes), g)
    return out


def distinct_per_group(labels: IntArray, s: npt.NDArray[np.int64]) -> IntArray:
    """Number of distinct values of one confidential attribute (integer codes) per group."""
    out: IntArray = distinct_counts(labels, np.asarray(s).reshape(-1))[:, 0]
    return out


def achieved_p(labels: IntArray, S: npt.NDArray[np.int64]) -> list[int]:
    """Per confidential attribute (column of ``S``): the minimum over groups of distinct values."""
    labels = np.asarray(labels, dtype=np.int64)
    S = np.asarray(S, dtype=np.int64).reshape(len(labels), -1)
    if S.shape[1] == 0:
        return []
    used = np.bincount(labels) > 0
    return [int(v) for v in distinct_counts(labels, S)[used].min(axis=0)]


def is_p_sensitive(labels: IntArray, S: npt.NDArray[np.int64], k: int, p: int) -> bool:
    """k-anonymous and every group has at least ``p`` distinct values of every attribute."""
    return is_k_anonymous(labels, k) and all(a >= p for a in achieved_p(labels, S))


def homogeneous_groups(labels: IntArray, S: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """``(group, attribute index)`` pairs where the group has one single confidential value.

    Such groups are open to a homogeneity attack: an intruder who links a person to the group
    learns the confidential value.
    """
    labels = np.asarray(labels, dtype=np.int64)
    S = np.asarray(S, dtype=np.int64).reshape(len(labels), -1)
    if S.shape[1] == 0:
        return []
    used = np.bincount(labels) > 0
    one = (distinct_counts(labels, S) == 1) & used[:, None]
    return [(int(gi), int(j)) for gi, j in zip(*np.nonzero(one), strict=True)]


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


# --- privacy models of a released table -------------------------------------------------------
# Written apart from locpriv.tabular.models (dense class × value tables of counts, the formulas
# of the papers row by row), so that each side checks the other. Each takes ``classes``, the
# class of every row when the caller knows it (any numbering, e.g. the release's hashed classes:
# frame.release_classes), instead of grouping the key columns again.

CHUNK_CELLS = 1 << 22
"""Classes are examined in chunks whose dense class × value table has at most this many cells."""


def _class_value_chunks(
    classes: IntArray, codes: IntArray, m: int
) -> Iterator[npt.NDArray[np.float64]]:
    """Dense count tables (rows: classes ``a..b-1``, columns: the ``m`` codes), in order: one
    ``bincount`` of the (class, code) cells per chunk; the rows are sorted by class only when
    there is more than one chunk."""
    g = int(classes.max()) + 1 if classes.size else 0
    step = max(1, CHUNK_CELLS // max(m, 1))
    if g <= step:
        if g:
            cells = np.bincount(classes * m + codes, minlength=g * m)
            yield cells.reshape(g, m).astype(np.float64)
        return
    order = np.argsort(classes, kind="stable")
    sc, sv = classes[order], codes[order]
    for a in range(0, g, step):
        b = min(g, a + step)
        lo, hi = np.searchsorted(sc, [a, b])
        cells = np.bincount((sc[lo:hi] - a) * m + sv[lo:hi], minlength=(b - a) * m)
        yield cells.reshape(b - a, m).astype(np.float64)


def _classes(df: pd.DataFrame, qi: Sequence[str], classes: IntArray | None) -> IntArray:
    """The given class labels of ``df``'s rows, else :func:`table_classes`."""
    if classes is None:
        return table_classes(df, qi)
    out = np.asarray(classes, dtype=np.int64)
    if out.shape != (len(df),):
        raise ValueError(f"classes: {out.shape} labels for {len(df)} rows")
    return out


def _codes(df: pd.DataFrame, name: str) -> tuple[IntArray, int]:
    """The column's values as ranks ``0..m-1`` of its sorted distinct values, and ``m``."""
    codes, uniq = pd.factorize(df[name], sort=True, use_na_sentinel=False)
    return np.asarray(codes, dtype=np.int64), max(len(uniq), 1)


def table_entropy_l(
    df: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str],
    *,
    classes: IntArray | None = None,
) -> dict[str, float]:
    """Per confidential attribute: the smallest ``exp(H)`` over the classes (``H`` the
    natural-log entropy of the attribute in the class): the table is entropy l-diverse for
    every ``l`` up to this value."""
    classes = _classes(df, qi, classes)
    out: dict[str, float] = {}
    for s in sensitive:
        codes, m = _codes(df, s)
        worst = np.inf
        for table in _class_value_chunks(classes, codes, m):
            p = table / table.sum(axis=1, keepdims=True)
            logs = np.log(np.where(p > 0, p, 1.0))
            worst = min(worst, float(np.exp(-(p * logs).sum(axis=1)).min()))
        out[s] = float(worst)
    return out


def table_recursive_ratio(
    df: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str],
    l: int,  # noqa: E741
    *,
    classes: IntArray | None = None,
) -> dict[str, float]:
    """Per confidential attribute: the largest ``r_1 / (r_l + ... + r_m)`` over the classes
    (counts sorted in decreasing order; ``inf`` where a class has fewer than ``l`` values).
    The table is recursive (c, l)-diverse exactly when ``c`` exceeds this ratio."""
    classes = _classes(df, qi, classes)
    out: dict[str, float] = {}
    for s in sensitive:
        codes, m = _codes(df, s)
        worst = 0.0
        for table in _class_value_chunks(classes, codes, m):
            r = -np.sort(-table, axis=1)
            tail = r[:, l - 1 :].sum(axis=1) if l - 1 < m else np.zeros(len(r))
            with np.errstate(divide="ignore"):
                ratio = np.where(tail > 0, r[:, 0] / np.where(tail > 0, tail, 1.0), np.inf)
            worst = max(worst, float(ratio.max()))
        out[s] = worst
    return out


def table_t(
    df: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str],
    ordered: Sequence[str] = (),
    *,
    classes: IntArray | None = None,
) -> dict[str, float]:
    """Per confidential attribute: the largest Earth Mover's Distance between a class's
    distribution and the released table's (Li, Li & Venkatasubramanian 2007): ordered distance
    (cumulative differences / (m-1), over the ranks of the ``m`` sorted distinct values) for the
    attributes in ``ordered``, equal distance (half the L1 difference) for the others."""
    classes = _classes(df, qi, classes)
    out: dict[str, float] = {}
    for s in sensitive:
        codes, m = _codes(df, s)
        q = np.bincount(codes, minlength=m) / len(codes)
        worst = 0.0
        for table in _class_value_chunks(classes, codes, m):
            diff = table / table.sum(axis=1, keepdims=True) - q
            if s in ordered:
                emd = (
                    np.abs(np.cumsum(diff, axis=1)).sum(axis=1) / (m - 1)
                    if m > 1
                    else 0 * diff[:, 0]
                )
            else:
                emd = 0.5 * np.abs(diff).sum(axis=1)
            worst = max(worst, float(emd.max()))
        out[s] = worst
    return out


def table_models(
    df: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str],
    *,
    k: int = 1,
    l: int = 1,  # noqa: E741
    entropy_l: float = 1.0,
    recursive: tuple[float, int] | None = None,
    t: float | None = None,
    ordered: Sequence[str] = (),
) -> list[str]:
    """The privacy-model fields a released table violates (empty when it satisfies them all),
    decided from its classes (rows with identical key values) alone."""
    bad: list[str] = []
    if table_k(df, qi) < k:
        bad.append("k")
    if l > 1 and min(table_p(df, qi, sensitive).values(), default=l) < l:
        bad.append("l")
    if entropy_l > 1 and min(
        table_entropy_l(df, qi, sensitive).values(), default=np.inf
    ) < entropy_l * (1 - 1e-9):
        bad.append("entropy_l")
    if recursive is not None:
        c, rl = recursive
        if not all(c > r for r in table_recursive_ratio(df, qi, sensitive, rl).values()):
            bad.append("recursive")
    if t is not None and max(table_t(df, qi, sensitive, ordered).values(), default=0.0) > t + 1e-12:
        bad.append("t")
    return bad
