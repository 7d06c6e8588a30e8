"""pandas front of the batch core (file I/O is in :mod:`locpriv.tabular.io.files`).

:func:`anonymize` replaces the key attributes of every record by its group's representative
(mean for numerical, rounded to an integer for integer columns; median category for ordinal,
mode for nominal, in the input's dtype; or ``[lo, hi]`` intervals with
``release="intervals"``), keeps every other column's values (``drop`` removes columns), writes
the rows in a random order (``keep_order=True`` keeps the input's, loudly) and returns a report
whose figures are measured on the released table itself (:func:`release_figures`), with an audit
of the columns that pass through (:func:`audit_pass_through`).

Helpers for whoever reads a release: :func:`release_classes` (the equivalence classes of a
released table: rows with identical key values) and :func:`plan_release` /
:func:`apply_release` (the released key columns aligned with the input's rows, the order and
the dropped columns, then the released frame).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular.io.encoding import KeyColumn, Kind, encode, encode_written, group_centroids
from locpriv.tabular.io.estimators import (
    ORDER_WARNING,
    Microaggregator,
    row_order,
    with_source_rows,
)
from locpriv.tabular.microagg.distributed import WORKER_KINDS
from locpriv.tabular.microagg.partitioned import (
    BLOCK_SIZE,
    StageLog,
    current_stage_log,
    stage_log,
)
from locpriv.tabular.models.extended import Hierarchy
from locpriv.tabular.quality import metrics
from locpriv.tabular.quality.validate import (
    achieved_p,
    table_entropy_l,
    table_recursive_ratio,
    table_t,
)
from locpriv.tabular.threads import kernel_threads, map_items

IntArray = npt.NDArray[np.int64]
Columns = str | Sequence[str] | None

RARE_SHARE = 0.05
"""A column is near-unique when at least this share of the records hold a value that fewer than
k records of the file hold (alone, that column narrows them below k)."""
PREDICT_ACCURACY = 0.9
"""A column predicts a key attribute when, from its value alone, the attribute's most frequent
value among the other records with that value is right for at least this share of the records
(leave-one-out, so a near-unique column predicts nothing by itself)..."""
PREDICT_GAIN = 0.2
"""... and that is this much above the share right without the column (the attribute's mode)."""
RANK_CORRELATION = 0.95
"""A numerical column also predicts a numerical key attribute at |Spearman| >= this."""


def as_columns(value: Columns, what: str) -> list[str]:
    """Column names given as one name (a string is ONE column, never its letters), a sequence of
    names, or None (none)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    cols = list(value)
    for c in cols:
        if not isinstance(c, str):
            raise ConfigError(f"{what}: column names must be strings, got {c!r}")
    return cols


def _key_columns(
    df: pd.DataFrame, qi: Sequence[str], ordinal: Sequence[str], nominal: Sequence[str]
) -> tuple[list[KeyColumn], list[npt.NDArray[np.float64]]]:
    cols: list[KeyColumn] = []
    values: list[npt.NDArray[np.float64]] = []
    for name in qi:
        s = df[name]
        if name in ordinal or name in nominal:
            kind: Kind = "ordinal" if name in ordinal else "nominal"
            if isinstance(s.dtype, pd.CategoricalDtype) and s.cat.ordered:
                cats = tuple(s.cat.categories)
                codes = s.cat.codes.to_numpy()
            else:
                uniq = pd.unique(s)
                try:
                    cats = tuple(sorted(uniq))
                except TypeError:
                    cats = tuple(sorted(uniq, key=str))
                codes = pd.Categorical(s, categories=list(cats)).codes
            cols.append(KeyColumn(name, kind, cats))
            values.append(np.asarray(codes, dtype=np.float64))
        else:
            if not (pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)):
                raise DataError(
                    f"key attribute {name!r} is not numeric; declare it ordinal or nominal"
                )
            cols.append(KeyColumn(name, "numerical"))
            values.append(s.to_numpy(dtype=np.float64))
    return cols, values


def check_frame(
    df: pd.DataFrame, qi: Sequence[str], sensitive: Sequence[str], k: int, p: int
) -> None:
    """Raise a one-line DataError / ConfigError / InfeasibleError naming the bad input."""
    if not qi:
        raise ConfigError("no key attributes given (qi)")
    for name in [*qi, *sensitive]:
        if name not in df.columns:
            raise DataError(f"column {name!r} not found in the input")
    overlap = set(qi) & set(sensitive)
    if overlap:
        raise ConfigError(f"column {sorted(overlap)[0]!r} is both key and confidential")
    for name in [*qi, *sensitive]:
        if df[name].isna().any():
            raise DataError(f"column {name!r} has missing values (NaN)")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    if isinstance(p, bool) or not isinstance(p, int | np.integer) or p < 1:
        raise ConfigError(f"p must be an integer >= 1, got {p!r}")
    if p > k:
        raise InfeasibleError(f"p={p} is larger than k={k}")
    if len(df) < k:
        raise InfeasibleError(f"k={k} exceeds the number of records n={len(df)}")
    if p > 1 and not sensitive:
        raise ConfigError(f"p={p} needs at least one confidential attribute (sensitive)")


def check_drop(
    dropped: Sequence[str],
    every: Sequence[str],
    qi: Sequence[str],
    sensitive: Sequence[str],
) -> None:
    """Raise a one-line DataError / ConfigError when a column to drop is not among ``every``
    (the input's columns) or is a key or confidential attribute."""
    for name in dropped:
        if name not in every:
            raise DataError(f"column {name!r} to drop not found in the input")
        if name in qi or name in sensitive:
            raise ConfigError(f"column {name!r} to drop is a key or confidential attribute")


def _exact(x: float) -> str:
    """A bound as written: short (``%g``) where that is exact, else the shortest exact repr, so
    an interval always holds its group's values."""
    short = f"{x:g}"
    return short if float(short) == float(x) else repr(float(x))


def _written_keys(
    df: pd.DataFrame,
    cols: list[KeyColumn],
    values: list[npt.NDArray[np.float64]],
    labels: IntArray,
    release: str,
) -> tuple[pd.DataFrame, list[npt.NDArray[np.float64]] | None]:
    """The released key columns (aligned with ``df``'s rows, in the input's dtypes where the
    release has point values) and, for centroids, the written values / category codes on which
    the information loss is measured. One column per item of :func:`map_items` (each column's
    values are computed as alone, so the release is the same for any thread count)."""
    done = map_items(
        lambda cv: _written_column(df[cv[0].name], cv[0], cv[1], labels, release),
        list(zip(cols, values, strict=True)),
        item_bytes=24 * len(df),  # a few n-long temporaries per column
    )
    keys = pd.DataFrame(index=df.index)
    for kc, (col, _) in zip(cols, done, strict=True):
        keys[kc.name] = col
    written = [w for _, w in done if w is not None]
    return keys, (written if release == "centroids" else None)


def _written_column(
    s: pd.Series,
    kc: KeyColumn,
    v: npt.NDArray[np.float64],
    labels: IntArray,
    release: str,
) -> tuple[pd.Series, npt.NDArray[np.float64] | None]:
    """One key column of :func:`_written_keys`: the released column and, for centroids, its
    written values / category codes."""
    if release == "intervals":
        lo = pd.Series(v).groupby(labels).transform("min").to_numpy()
        hi = pd.Series(v).groupby(labels).transform("max").to_numpy()
        if kc.kind == "numerical":
            col = [f"[{_exact(a)}, {_exact(b)}]" for a, b in zip(lo, hi, strict=True)]
        elif kc.kind == "ordinal":
            cats = np.array(kc.categories, dtype=object)
            col = [f"[{cats[int(a)]}, {cats[int(b)]}]" for a, b in zip(lo, hi, strict=True)]
        else:
            cats = np.array(kc.categories, dtype=object)
            sets = pd.Series(v).groupby(labels).agg(lambda x: sorted(set(x)))
            col = ["{" + ", ".join(str(cats[int(c)]) for c in sets[g]) + "}" for g in labels]
        return pd.Series(col, index=s.index, dtype=object), None
    rep = group_centroids(v, labels, kc.kind)  # per group
    if kc.kind == "numerical":
        if pd.api.types.is_integer_dtype(s.dtype):
            # one rounded value per group: the group stays one class (k holds)
            rep = np.rint(rep)
        w = rep[labels]
        # no copy: a float64 column of the release IS the written values (copy-on-write keeps
        # both as they are); other dtypes get their own converted column
        return pd.Series(w, index=s.index, copy=False).astype(s.dtype), w
    w = rep[labels]
    cats = np.array(kc.categories, dtype=object)
    ser = pd.Series(cats[w.astype(np.int64)], index=s.index, copy=False)
    return (ser if s.dtype == object else ser.astype(s.dtype)), w


def release_classes(released: pd.DataFrame, qi: Columns) -> IntArray:
    """The equivalence classes of a released table: rows with identical values of every key
    attribute in ``qi`` share a class (numbered 0..c-1 in order of first appearance). Two groups
    released with the same values form one class, so a class is never smaller than the
    grouping's groups."""
    cols = as_columns(qi, "qi")
    if not cols:
        raise ConfigError("no key attributes given (qi)")
    # one 64-bit hash per row of the columns' values, numbered by first appearance (one hash
    # factorisation), then verified: every row must hold its class's first row's values, so
    # equal hashes mean equal rows. A collision (never seen; ~n^2 / 2^65) takes the exact path.
    keys = map_items(lambda c: _column_key(released[c]), cols, item_bytes=16 * len(released))
    h = np.empty(len(released), dtype=np.uint64)

    def fold(r: tuple[int, int]) -> None:  # rows a..b-1 (a row's hash is its own)
        x = np.zeros(r[1] - r[0], dtype=np.uint64)
        for v in keys:
            x = (x ^ v[r[0] : r[1]]) * _HASH_MIX
            x ^= x >> np.uint64(29)
        h[r[0] : r[1]] = x

    map_items(fold, metrics.ranges(len(released)))
    out: IntArray = pd.factorize(h)[0].astype(np.int64)
    seen = np.maximum.accumulate(out)
    first = np.flatnonzero(np.r_[True, out[1:] > seen[:-1]]) if out.size else out
    if all(map_items(lambda v: bool(np.array_equal(v[first][out], v)), keys, 24 * out.size)):
        return out
    return _classes_exact(released, cols)  # a 64-bit collision


_HASH_MIX = np.uint64(0x9E3779B97F4A7C15)
"""Multiplier of the row hash of :func:`release_classes` (a test sets it to 0 to force the
exact path)."""


def _column_key(s: pd.Series) -> npt.NDArray[np.uint64]:
    """Per row, a 64-bit key of the column's value, equal exactly when the values are equal
    (as :func:`pandas.factorize` compares them): the bits of a float (``-0.0`` as ``0.0``, one
    NaN), of an integer, or the factorisation's code for any other dtype."""
    if pd.api.types.is_float_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64) + 0.0
        v[np.isnan(v)] = np.nan
        return v.view(np.uint64)
    if pd.api.types.is_integer_dtype(s.dtype) and not pd.api.types.is_extension_array_dtype(
        s.dtype
    ):
        return s.to_numpy().astype(np.int64).view(np.uint64)
    return pd.factorize(s, use_na_sentinel=False)[0].astype(np.uint64)


def _classes_exact(released: pd.DataFrame, cols: list[str]) -> IntArray:
    """:func:`release_classes` without hashing: the columns' codes folded pairwise, each pair
    ``a * (max b + 1) + b < n^2`` numbered by first appearance."""
    out: IntArray = pd.factorize(released[cols[0]], use_na_sentinel=False)[0].astype(np.int64)
    for c in cols[1:]:
        b = pd.factorize(released[c], use_na_sentinel=False)[0].astype(np.int64)
        out = pd.factorize(out * (int(b.max(initial=0)) + 1) + b)[0].astype(np.int64)
    return out


def release_figures(
    keys: pd.DataFrame,
    Z: npt.NDArray[np.float64],
    S: IntArray | None,
    sensitive: list[str],
    *,
    k: int,
    written_Z: npt.NDArray[np.float64] | None,
    classes: IntArray | None = None,
    grouping: tuple[IntArray, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report's figures measured on the released key columns ``keys``: its classes (sizes,
    DM, C_AVG, the p achieved per confidential attribute), Truta's IL of the classes, and the
    information loss ``100·SSE/SST`` of the written values ``written_Z`` against the original
    ``Z`` (both on the grouping's scale: z-scores, scaled ranks, one-hot/√2), row by row (no
    n × d matrix of differences).

    ``classes``: :func:`release_classes` of ``keys`` when already computed. ``grouping``: the
    grouping's labels and the estimator's report of them, measured on the same ``Z`` and ``S``
    (:class:`Microaggregator`'s ``labels_`` and ``report_``); where the classes are those labels
    (no two groups released alike, numbered alike) its figures are the classes' figures, taken
    instead of measured again."""
    if classes is None:
        classes = release_classes(keys, list(keys.columns))
    known = grouping[1] if grouping is not None and np.array_equal(classes, grouping[0]) else None
    if known is not None:
        same = ("groups", "min_group_size", "max_group_size", "dm", "avg", "truta_il")
        out: dict[str, Any] = {f: known[f] for f in same}
        out["group_sizes"] = dict(known["group_sizes"])
        out["p_achieved"] = dict(
            zip(sensitive, known["p_achieved"].values() if S is not None else [], strict=True)
        )
        sst = float(known["sst"])
    else:
        sizes = np.bincount(classes)
        out = {
            "groups": int(sizes.size),
            "min_group_size": int(sizes.min()),
            "max_group_size": int(sizes.max()),
            "dm": metrics.discernibility(classes),
            "avg": metrics.avg_class_size(classes, k),
            "truta_il": metrics.truta_il_normalised(Z, classes),
            "group_sizes": {str(s): c for s, c in metrics.size_histogram(classes).items()},
            "p_achieved": dict(
                zip(sensitive, achieved_p(classes, S) if S is not None else [], strict=True)
            ),
        }
        sst = metrics.sst(Z)
    if written_Z is not None:
        err = metrics.squared_distances(Z, written_Z)
        out.update(sse=err, sst=sst, il_percent=100.0 * err / sst if sst > 0 else 0.0)
        out["il_basis"] = "written values"
    return out


def _ordered(series: pd.Series) -> bool:
    """Whether a confidential column's values are ordered (t-closeness then uses Li et al.'s
    ordered distance): numeric (not boolean) columns and ordered categoricals."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return bool(series.cat.ordered)
    return _numeric(series)


def models_achieved(
    keys: pd.DataFrame,
    S: IntArray,
    sensitive: list[str],
    ordered: Sequence[bool],
    recursive: tuple[float, int] | None,
    *,
    classes: IntArray | None = None,
) -> dict[str, Any]:
    """The privacy models the released key columns ``keys`` achieve for the confidential codes
    ``S``, measured by the validators of a released table: per attribute, the entropy l
    (``exp`` of the smallest class entropy), the largest EMD (t) and, when ``recursive`` is
    asked, the largest ``r_1 / (r_l + ... + r_m)`` (the table is (c, l)-diverse for every c
    above it). ``classes``: the release's classes (:func:`release_classes` of ``keys``) when
    already computed."""
    if classes is None:
        classes = release_classes(keys, list(keys.columns))
    names = [f"_s{j}" for j in range(S.shape[1])]
    frame = pd.DataFrame({n: S[:, j] for j, n in enumerate(names)})
    ent = table_entropy_l(frame, [], names, classes=classes)
    emd = table_t(
        frame, [], names, [n for n, o in zip(names, ordered, strict=True) if o], classes=classes
    )
    out: dict[str, Any] = {
        "entropy_l_achieved": {s: ent[n] for s, n in zip(sensitive, names, strict=True)},
        "t_achieved": {s: emd[n] for s, n in zip(sensitive, names, strict=True)},
    }
    if recursive is not None:
        ratio = table_recursive_ratio(frame, [], names, int(recursive[1]), classes=classes)
        out["recursive_ratio"] = {s: ratio[n] for s, n in zip(sensitive, names, strict=True)}
    return out


def _loo_mode_accuracy(c: npt.NDArray[np.int64], q: npt.NDArray[np.int64]) -> float:
    """Share of records whose ``q`` equals the most frequent ``q`` among the OTHER records with
    the same ``c`` (ties and records alone in their ``c`` count as wrong)."""
    nq = int(q.max()) + 1
    nc = int(c.max()) + 1
    uk, cnt = np.unique(c * nq + q, return_counts=True)
    gc, gq = uk // nq, uk % nq
    order = np.lexsort((-cnt, gc))
    gc, gq, cnt = gc[order], gq[order], cnt[order]
    first = np.flatnonzero(np.r_[True, gc[1:] != gc[:-1]])
    top_q = np.full(nc, -1, dtype=np.int64)
    top_n = np.zeros(nc, dtype=np.int64)
    second_n = np.zeros(nc, dtype=np.int64)
    top_q[gc[first]] = gq[first]
    top_n[gc[first]] = cnt[first]
    nxt = first + 1
    has = nxt < gc.size
    has[has] = gc[nxt[has]] == gc[first[has]]
    second_n[gc[first[has]]] = cnt[nxt[has]]
    ok = (q == top_q[c]) & (top_n[c] - 1 > second_n[c]) & (top_n[c] >= 2)
    return float(ok.mean())


def _loo_mode_baseline(q: npt.NDArray[np.int64]) -> float:
    """:func:`_loo_mode_accuracy` without a column: the share of the most frequent value when
    it stays the most frequent without the guessed record, else 0."""
    if q.size == 0:
        return 0.0
    cnt = np.sort(np.bincount(q))[::-1]
    second = int(cnt[1]) if cnt.size > 1 else 0
    return float(cnt[0]) / q.size if int(cnt[0]) - 1 > second and int(cnt[0]) >= 2 else 0.0


def _numeric(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s))


def _correlation(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Pearson correlation (of dense ranks: Spearman's with ties on one rank); 0 when either
    side is constant."""
    return _centred_correlation(_centred(a), _centred(b))


def _codes(s: pd.Series, sort: bool) -> npt.NDArray[np.int64]:
    """Codes of a column's values (``NaN``/``None`` one value), ranks of the sorted distinct
    values when ``sort``."""
    return pd.factorize(s, sort=sort, use_na_sentinel=False)[0].astype(np.int64)


def _sorted_codes(s: pd.Series) -> npt.NDArray[np.int64]:
    """:func:`_codes` sorted: for a float or integer column without NaN, the dense ranks from
    one argsort (equal values, ``-0.0`` and ``0.0`` too, share a rank), else pandas'
    factorisation with its sort of the distinct values."""
    v = s.to_numpy() if isinstance(s.dtype, np.dtype) and s.dtype.kind in "if" else None
    if v is None or (v.dtype.kind == "f" and bool(np.isnan(v).any())):
        return _codes(s, True)
    order = np.argsort(v)
    ranked = v[order]
    out = np.empty(v.size, dtype=np.int64)
    out[order] = np.cumsum(np.r_[False, ranked[1:] != ranked[:-1]])
    return out


def _centred(a: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], float]:
    """``a`` minus its mean and the sum of squares of that, as :func:`_correlation` has them."""
    da = a - a.mean()
    return da, float(np.dot(da, da))


def _centred_correlation(
    a: tuple[npt.NDArray[np.float64], float], b: tuple[npt.NDArray[np.float64], float]
) -> float:
    """:func:`_correlation` of two :func:`_centred` columns (the same value, bit for bit)."""
    den = float(np.sqrt(a[1] * b[1]))
    return float(np.dot(a[0], b[0]) / den) if den > 0 else 0.0


def audit_pass_through(
    df: pd.DataFrame,
    qi: Sequence[str],
    columns: Mapping[str, str],
    k: int,
    column: Callable[[str], pd.Series] | None = None,
) -> list[dict[str, Any]]:
    """Audit of the columns released with their original values (``columns``: name -> role,
    ``"pass-through"`` or ``"confidential"``), against the key attributes ``qi`` of ``df``
    (original values). Per column: ``unique_share`` (distinct values / n), ``rare_share``
    (share of records whose value fewer than k records hold), ``predicts`` (key attribute ->
    leave-one-out ``accuracy`` of its mode given the column, or ``accuracy_at_most`` where the
    records sharing their value (of the column or of the key) are too few to reach the
    threshold; the ``baseline``; the ``rank_correlation`` for numerical pairs) and
    ``warnings`` (one line each: near-unique, or predicts a key attribute; thresholds
    :data:`RARE_SHARE`, :data:`PREDICT_ACCURACY`, :data:`PREDICT_GAIN`,
    :data:`RANK_CORRELATION`). ``column(name)`` reads a column that is not in ``df`` (the CLI's
    streamed Parquet path reads one column at a time)."""
    n = len(df)
    if not columns:
        return []
    # one key column per item, on the threads of map_items (each computed as alone)
    todo = map_items(lambda q: _audit_key(df[q], n), list(qi), item_bytes=48 * n)
    done = dict(zip(qi, todo, strict=True))
    keys = {q: v[0] for q, v in done.items()}
    base = {q: v[1] for q, v in done.items()}
    shared = {q: v[2] for q, v in done.items()}
    ranks = {q: v[3] for q, v in done.items() if v[3] is not None}
    out: list[dict[str, Any]] = []
    for name, role in columns.items():
        s = df[name] if name in df.columns or column is None else column(name)
        numeric = _numeric(s)
        c = _sorted_codes(s) if numeric else _codes(s, False)
        cnt = np.bincount(c)
        rare = float(np.mean(cnt[c] < k)) if n else 0.0
        entry: dict[str, Any] = {
            "column": name,
            "role": role,
            "unique_share": float(cnt.size / n) if n else 0.0,
            "rare_share": rare,
            "predicts": {},
            "warnings": [],
        }
        if rare >= RARE_SHARE:
            entry["warnings"].append(
                f"column {name!r} ({role}) is near-unique: {rare:.0%} of the records hold a"
                f" value that fewer than k={k} records hold, so it singles them out by itself;"
                f" drop it (--drop {name}) or coarsen it"
            )
        c_shared = float(np.mean(cnt[c] >= 2)) if n else 0.0
        r_c = _centred(c.astype(np.float64)) if numeric and ranks else None
        for q, qv in keys.items():
            bound = min(shared[q], c_shared)
            item: dict[str, float] = {"baseline": base[q]}
            if bound >= PREDICT_ACCURACY:
                acc = _loo_mode_accuracy(c, qv)
                item["accuracy"] = acc
            else:  # cannot reach the threshold: the bound is reported instead
                acc = 0.0
                item["accuracy_at_most"] = bound
            flagged = acc >= PREDICT_ACCURACY and acc - base[q] >= PREDICT_GAIN
            if r_c is not None and q in ranks and n > 2:
                rho = _centred_correlation(r_c, ranks[q])
                item["rank_correlation"] = rho
                flagged = flagged or abs(rho) >= RANK_CORRELATION
            entry["predicts"][q] = item
            if flagged:
                how = (
                    f"its value gives {q!r} for {acc:.0%} of the records, {base[q]:.0%} without it"
                    if acc >= PREDICT_ACCURACY
                    else f"rank correlation {item['rank_correlation']:.2f}"
                )
                entry["warnings"].append(
                    f"column {name!r} ({role}) predicts key attribute {q!r} ({how}): it undoes"
                    f" the grouping of {q!r}; drop it (--drop {name})"
                )
        out.append(entry)
    return out


def _audit_key(
    s: pd.Series, n: int
) -> tuple[npt.NDArray[np.int64], float, float, tuple[npt.NDArray[np.float64], float] | None]:
    """What :func:`audit_pass_through` needs of one key column: its codes (sorted codes, the
    dense ranks, of a numerical column: one factorisation for both uses), the leave-one-out
    baseline, the share of records whose value another record holds (a record whose key value
    no other record holds is never guessed: it bounds the accuracy and spares the count on
    continuous keys) and, for a numerical column, its ranks centred once with their sum of
    squares (as :func:`_correlation` computes them)."""
    numeric = _numeric(s)
    v = _sorted_codes(s) if numeric else _codes(s, False)
    shared = float(np.mean(np.bincount(v)[v] >= 2)) if n else 0.0
    ranks = _centred(v.astype(np.float64)) if numeric else None
    return v, _loo_mode_baseline(v), shared, ranks


@dataclass
class Release:
    """What :func:`plan_release` decides: the released key columns ``keys`` (aligned with the
    input's rows), the row order ``order`` (``out[j] = in[order[j]]``; None = kept), the
    columns to ``drop`` and the ``report``."""

    keys: pd.DataFrame
    order: IntArray | None
    drop: list[str]
    report: dict[str, Any]
    labels: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    extra: dict[str, Any] = field(default_factory=dict)
    """Method-specific results a front needs afterwards (generalisation: the
    ``GeneralisedRelease`` and the hierarchies, for the risk report)."""


@dataclass(frozen=True)
class ReleaseOptions:
    """How :func:`plan_release` groups and releases, its arguments checked (see
    :func:`anonymize` for each): column lists are names, ``drop`` the columns removed."""

    method: str | None
    seed: int | None
    ordinal: list[str]
    nominal: list[str]
    hierarchies: Mapping[str, Hierarchy] | None
    release: str
    progress: Callable[[float], None] | None
    block_size: int
    scheduler: Any
    workers: int
    workers_kind: str
    keep_order: bool
    drop: list[str]
    entropy_l: float
    recursive: tuple[float, int] | None
    t: float | None


def plan_release(  # noqa: PLR0917 - the documented front's parameters
    df: pd.DataFrame,
    qi: Columns,
    sensitive: Columns = (),
    k: int = 3,
    p: int = 1,
    method: str | None = None,
    seed: int | None = None,
    *,
    ordinal: Columns = (),
    nominal: Columns = (),
    hierarchies: Mapping[str, Hierarchy] | None = None,
    release: str = "centroids",
    progress: Callable[[float], None] | None = None,
    block_size: int = BLOCK_SIZE,
    scheduler: Any = None,
    workers: int = 1,
    workers_kind: str = WORKER_KINDS[0],
    keep_order: bool = False,
    drop: Columns = (),
    columns: Sequence[str] | None = None,
    entropy_l: float = 1.0,
    recursive: tuple[float, int] | None = None,
    t: float | None = None,
) -> Release:
    """Group the records of ``df`` and decide the release (see :func:`anonymize`), without
    building the output frame. ``columns``: every column of the input (default ``df``'s), for
    checking ``drop`` when ``df`` holds only the key and confidential columns. ``entropy_l``,
    ``recursive``, ``t``: the privacy models beyond k and p (:func:`anonymize`)."""
    qi, sensitive = as_columns(qi, "qi"), as_columns(sensitive, "sensitive")
    ordinal, nominal = as_columns(ordinal, "ordinal"), as_columns(nominal, "nominal")
    dropped = as_columns(drop, "drop")
    check_frame(df, qi, sensitive, k, p)
    for name in [*ordinal, *nominal]:
        if name not in qi:
            raise ConfigError(f"categorical column {name!r} is not a key attribute")
    check_drop(dropped, list(df.columns) if columns is None else list(columns), qi, sensitive)
    if release not in ("centroids", "intervals"):
        raise ConfigError(f"release must be 'centroids' or 'intervals', got {release!r}")
    with ExitStack() as stack:
        # the stage report covers the whole release: encoding, grouping, released figures
        log = current_stage_log() or stack.enter_context(stage_log())
        # the parent's column-wise work runs on the cores given to the run
        stack.enter_context(kernel_threads(workers))
        opts = ReleaseOptions(
            method=method,
            seed=seed,
            ordinal=ordinal,
            nominal=nominal,
            hierarchies=hierarchies,
            release=release,
            progress=progress,
            block_size=block_size,
            scheduler=scheduler,
            workers=workers,
            workers_kind=workers_kind,
            keep_order=keep_order,
            drop=dropped,
            entropy_l=entropy_l,
            recursive=recursive,
            t=t,
        )
        rel = _plan(df, qi, sensitive, k, p, opts, log)
        rel.report["stages"] = log.report()
    return rel


def _plan(  # noqa: PLR0917 - plan_release's body, its arguments checked
    df: pd.DataFrame,
    qi: list[str],
    sensitive: list[str],
    k: int,
    p: int,
    opts: ReleaseOptions,
    log: StageLog,
) -> Release:
    with log.stage("encode"):
        cols, values = _key_columns(df, qi, opts.ordinal, opts.nominal)
        enc = encode(cols, values)
        sens = []
        ordered = []
        for name in sensitive:
            series = df[name]
            if opts.hierarchies and name in opts.hierarchies:
                series = pd.Series(opts.hierarchies[name].reduce(series.tolist()), dtype=object)
            ordered.append(_ordered(series))
            sens.append(pd.factorize(series, sort=True)[0])
        S = np.column_stack(sens).astype(np.int64) if sens else None
    est = Microaggregator(
        k=k,
        p=p,
        method=opts.method,
        seed=opts.seed,
        progress=opts.progress,
        block_size=opts.block_size,
        scheduler=opts.scheduler,
        workers=opts.workers,
        workers_kind=opts.workers_kind,
        entropy_l=opts.entropy_l,
        recursive=opts.recursive,
        t=opts.t,
        ordered=ordered,
    )
    est.fit_scaled(enc.Z, S, names=sensitive)
    labels, grouping = est.labels_, est.report_
    report = dict(grouping)
    report["partition_groups"] = est.n_groups_
    report["sse_partition"] = est.sse_  # the grouping's objective (group means)
    del est  # its centroids (g x d, a third of the key matrix at k = 3) are not released
    with log.stage("release"):
        keys, written = _written_keys(df, cols, values, labels, opts.release)
        # memory: the classes' per-column keys are freed before the written values are encoded
        # (n x d), whose matrix then holds the differences to Z (no third n x d array)
        classes = release_classes(keys, list(keys.columns))
        written_Z = encode_written(cols, values, written) if written is not None else None
        del written
        report.update(
            release_figures(
                keys,
                enc.Z,
                S,
                sensitive,
                k=k,
                written_Z=written_Z,
                classes=classes,
                grouping=(labels, grouping),
            )
        )
        if written_Z is None:
            report["il_basis"] = "group means (the file holds ranges: see truta_il)"
        del written_Z  # not needed any more
        if S is not None:
            report["models"] = {
                **report["models"],
                **models_achieved(keys, S, sensitive, ordered, opts.recursive, classes=classes),
            }
        report["release"] = opts.release
        order, report["order"] = row_order(len(df), opts.seed, opts.keep_order)
        report["dropped"] = opts.drop
    return Release(keys=keys, order=order, drop=opts.drop, report=report, labels=labels)


def apply_release(df: pd.DataFrame, rel: Release) -> pd.DataFrame:
    """The released frame: ``df`` with the key columns replaced, ``rel.drop`` removed, rows in
    ``rel.order`` (a fresh RangeIndex: the input's index would give the order away) or, when
    kept, with the input's index. ``attrs["source_rows"]`` holds the input row of each released
    row (:func:`~locpriv.tabular.io.estimators.source_rows_of`; ``locpriv assess`` links the rows
    by it)."""
    out = df.drop(columns=rel.drop)
    for name in rel.keys.columns:
        out[name] = rel.keys[name]
    if rel.order is not None:
        out = out.iloc[rel.order].reset_index(drop=True)
    with_source_rows(out, rel.order)
    return out


def anonymize(  # noqa: PLR0917 - the documented front: anonymize(df, qi, sensitive, k, p, ...)
    df: pd.DataFrame,
    qi: Columns,
    sensitive: Columns = (),
    k: int = 3,
    p: int = 1,
    method: str | None = None,
    seed: int | None = None,
    *,
    ordinal: Columns = (),
    nominal: Columns = (),
    hierarchies: Mapping[str, Hierarchy] | None = None,
    release: str = "centroids",
    progress: Callable[[float], None] | None = None,
    block_size: int = BLOCK_SIZE,
    scheduler: Any = None,
    workers: int = 1,
    workers_kind: str = WORKER_KINDS[0],
    keep_order: bool = False,
    drop: Columns = (),
    warn: Callable[[str], None] | None = None,
    entropy_l: float = 1.0,
    recursive: tuple[float, int] | None = None,
    t: float | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """k-anonymous (p=1) or p-sensitive k-anonymous copy of ``df`` and its report.

    Column arguments take one name (``sensitive="occupation"`` is one column) or a list.
    The rows come back in a random order (``seed=None``: from the operating system's entropy,
    else reproducible from ``seed``; ``report["order"]``); ``keep_order=True`` keeps the input's
    order and index, flags it in the report and warns. ``drop`` removes columns from the
    output. Every column released with its original values is audited
    (``report["pass_through"]``, :func:`audit_pass_through`); each finding is passed to
    ``warn`` (default: :func:`warnings.warn`), as is the kept order. Report figures (classes,
    IL, p achieved) are measured on the released key values (:func:`release_figures`).

    ``hierarchies`` maps a confidential column to a :class:`Hierarchy` with protected values:
    the grouping then uses strong ancestors (extended p-sensitive k-anonymity). ``block_size``,
    ``scheduler`` (a dask.distributed address or ``Client``), ``workers`` (local workers) and
    ``workers_kind`` (``"threads"``, the default, or ``"processes"``) concern the
    ``"partitioned"`` method, the default from 200,000 records (see
    :class:`Microaggregator`).

    Privacy models beyond k and p (= distinct l), each over every confidential attribute:
    ``entropy_l`` (entropy l-diversity, ``exp(H) >= entropy_l``), ``recursive=(c, l)``
    (recursive (c, l)-diversity) and ``t`` (t-closeness: Earth Mover's Distance to the whole
    table's distribution at most ``t``; ordered distance for numeric columns and ordered
    categoricals, equal distance for the others). The grouping is then repaired by merging
    each violating group into the group with the nearest centroid
    (:func:`locpriv.tabular.models.repair.repair`); ``report["models"]`` holds the merges and
    what the released table achieves. An infeasible model (e.g. ``entropy_l`` above the whole
    table's) raises :class:`~locpriv.errors.InfeasibleError` naming the field.
    """
    with ExitStack() as stack:
        # one stage report for the whole call: encoding, grouping, figures, audit, output
        if current_stage_log() is None:
            stack.enter_context(stage_log())
        stack.enter_context(kernel_threads(workers))
        rel = plan_release(
            df,
            qi,
            sensitive,
            k,
            p,
            method,
            seed,
            ordinal=ordinal,
            nominal=nominal,
            hierarchies=hierarchies,
            release=release,
            progress=progress,
            block_size=block_size,
            scheduler=scheduler,
            workers=workers,
            workers_kind=workers_kind,
            keep_order=keep_order,
            drop=drop,
            entropy_l=entropy_l,
            recursive=recursive,
            t=t,
        )
        return finish_release(df, rel, qi=qi, sensitive=sensitive, k=k, warn=warn)


def finish_release(
    df: pd.DataFrame,
    rel: Release,
    *,
    qi: Columns,
    sensitive: Columns,
    k: int,
    warn: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The last steps of every method's front (microaggregation and generalisation): audit the
    columns released with their original values (``rel.report["pass_through"]``), pass each
    warning to ``warn`` (default :func:`warnings.warn`), and build the released frame."""
    qi_cols, sens_cols = as_columns(qi, "qi"), as_columns(sensitive, "sensitive")
    roles = {c: "pass-through" for c in df.columns if c not in qi_cols and c not in rel.drop}
    roles.update((c, "confidential") for c in sens_cols)
    with ExitStack() as stack:
        log = current_stage_log()
        if log is None:  # a plan made outside this call's log (the CLI): continue its rows
            planned = rel.report.get("stages") or {}
            log = stack.enter_context(stage_log(int(planned.get("workers", 1))))
            log.rows.extend(dict(r) for r in planned.get("stages", []))
        with log.stage("audit"):
            rel.report["pass_through"] = audit_pass_through(df, qi_cols, roles, k)
        with log.stage("output"):
            out = apply_release(df, rel)
        rel.report["stages"] = log.report()
    say = warn if warn is not None else _warn
    for line in release_warnings(rel.report):
        say(line)
    return out, rel.report


def release_warnings(report: Mapping[str, Any]) -> list[str]:
    """The report's warnings, one line each: the kept row order, then the pass-through audit."""
    lines = [] if report.get("order", {}).get("shuffled", True) else [ORDER_WARNING]
    for entry in report.get("pass_through", []):
        lines.extend(entry["warnings"])
    return lines


def _warn(line: str) -> None:
    warnings.warn(line, UserWarning, stacklevel=4)
