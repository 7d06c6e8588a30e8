"""Several releases of the same records: what an attacker learns by intersecting them, and
releases at several k that stay consistent (nested groups).

**Intersection** (:func:`intersected_sizes`). Each release partitions its rows into classes
(identical key values). An attacker links the rows of two releases by whatever they share:
columns present in both that are not key attributes of either (pass-through columns, linked by
equal values), or the row position when there are none or they are equal row by row (a release
that kept the input order).
An attacker who knows a target's key values knows the target's class in every release; the
candidates left are the rows of the target's class in the current release that link to rows of
the target's class in each earlier release. With one-to-one links (a unique shared column, or
the position) this is exactly the intersection of the classes. With many-to-many links (a
shared column with repeated values) a row may link to several classes; the target's true one is
then unknown and the smallest candidate set over its possibilities is reported (the risk is
over-, never under-stated). A row with no link in a release is a candidate for any class there.

**Nested releases** (:func:`nested_labels`). Publishing a k = 10 file and a k = 5 file of the
same records by two independent runs leaves intersections smaller than 5. Built nested — every
k = 10 group a union of k = 5 groups — the intersection of a record's two classes is its k = 5
class, so publishing both never narrows a record below the smaller k. The coarser partition is
MDAV over the finer groups' centroids (in the key distance space) with ``m = ceil(k / k_fine)``
groups per unit: each coarse group joins at least ``m`` fine groups of at least ``k_fine``
records each. A union of p-sensitive groups is p-sensitive, so p carries over.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.io.encoding import KeyColumn
from locpriv.tabular.microagg.mdav import mdav
from locpriv.tabular.quality import metrics
from locpriv.tabular.risk.measures import class_sizes

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def class_ids(df: pd.DataFrame, qi: Sequence[str]) -> IntArray:
    """Class id of each row: rows with identical values of ``qi``."""
    ids = df[list(qi)].groupby(list(qi), sort=False, dropna=False, observed=True).ngroup()
    out: IntArray = np.asarray(ids, dtype=np.int64)
    return out


def shared_columns(
    a: pd.DataFrame, b: pd.DataFrame, qi_a: Sequence[str], qi_b: Sequence[str]
) -> list[str]:
    """Columns in both releases that are key attributes of neither."""
    keys = set(qi_a) | set(qi_b)
    return [c for c in a.columns if c in b.columns and c not in keys]


def linked_classes(
    a: pd.DataFrame,
    b: pd.DataFrame,
    qi_a: Sequence[str],
    qi_b: Sequence[str],
    link: str | Sequence[str] = "auto",
) -> npt.NDArray[np.object_]:
    """Per row of ``a``, the classes of ``b`` it links to (a sorted tuple; empty if none).

    ``link``: ``"position"``, a list of shared columns, or ``"auto"``: the position when there
    is no shared non-key column or every one is equal row by row (the order was kept), else
    the shared columns."""
    cb = class_ids(b, qi_b)
    cols: list[str] | None
    if isinstance(link, str) and link == "position":
        cols = None
    elif isinstance(link, str) and link == "auto":
        cols = shared_columns(a, b, qi_a, qi_b) or None
        if cols is not None and len(a) == len(b):
            same = all(
                np.array_equal(a[c].to_numpy().astype(object), b[c].to_numpy().astype(object))
                for c in cols
            )
            cols = None if same else cols  # the order was kept: the position links exactly
    elif isinstance(link, str):
        raise ConfigError(f"link must be 'auto', 'position' or a list of columns, got {link!r}")
    else:
        cols = list(link)
        for c in cols:
            if c not in a.columns or c not in b.columns:
                raise DataError(f"link column {c!r} is not in both releases")
    if cols is None:
        if len(a) != len(b):
            raise DataError(
                f"releases of {len(a)} and {len(b)} rows share no column to link them by"
            )
        out = np.empty(len(a), dtype=object)
        out[:] = [(int(c),) for c in cb]
        return out
    bb = b[cols].astype(object).copy()
    bb["__class"] = cb
    sets: dict[Any, tuple[int, ...]] = {}
    for key, group in bb.groupby(cols, sort=False, dropna=False)["__class"]:
        sets[key if len(cols) > 1 else key[0]] = tuple(sorted({int(v) for v in group}))
    keys = (
        list(a[cols].astype(object).itertuples(index=False, name=None))
        if len(cols) > 1
        else a[cols[0]].astype(object).tolist()
    )
    out = np.empty(len(a), dtype=object)
    out[:] = [sets.get(key, ()) for key in keys]
    return out


def intersected_sizes(
    current: pd.DataFrame,
    qi: Sequence[str],
    earlier: Sequence[tuple[pd.DataFrame, Sequence[str]]],
    link: str | Sequence[str] = "auto",
    truth: Sequence[npt.ArrayLike] | None = None,
) -> IntArray:
    """Per row of ``current``, the size of its intersected class given the ``earlier``
    releases as ``(frame, key attributes)`` (module docstring).

    ``truth`` (when the caller knows it): per earlier release, the row of that release that is
    each row of ``current``; the target's class there is then known (as it is to an attacker
    who knows the target's key values) instead of the smallest over the linked ones."""
    n = len(current)
    ca = class_ids(current, qi)
    if not earlier:
        return class_sizes(ca)
    links = [linked_classes(current, frame, qi, qi_b, link) for frame, qi_b in earlier]
    # every combination of linked classes a row may have, one per earlier release
    combos: list[list[tuple[int, ...]]] = []
    for i in range(n):
        options: list[tuple[int, ...]] = [()]
        for lk in links:
            here = lk[i] or (-1,)  # no link: the release says nothing about the row
            options = [(*o, c) for o in options for c in here]
        combos.append(options)
    rows = np.repeat(np.arange(n), [len(c) for c in combos])
    flat = [c for cs in combos for c in cs]
    table = pd.DataFrame(flat, columns=[f"r{j}" for j in range(len(links))])
    table["a"] = ca[rows]
    table["row"] = rows
    keys = ["a", *[f"r{j}" for j in range(len(links))]]
    # candidates of a target in class a whose earlier classes are the combination: rows of a
    # that may carry that combination (a row without a link may carry any)
    wild = table[[f"r{j}" for j in range(len(links))]].eq(-1).any(axis=1)
    count = table[~wild].groupby(keys)["row"].transform("nunique")
    free = pd.Series(ca[rows][wild.to_numpy()]).value_counts()
    extra = table["a"].map(free).fillna(0).to_numpy()
    size = np.where(wild, class_sizes(ca)[rows], 0).astype(np.float64)
    size[~wild.to_numpy()] = count.to_numpy() + extra[~wild.to_numpy()]
    # the target's true combination unknown: the smallest over its options (conservative)
    best = pd.Series(size).groupby(rows).min().to_numpy()
    if truth is not None:
        true = np.column_stack(
            [
                class_ids(frame, qi_b)[np.asarray(t, dtype=np.int64)]
                for (frame, qi_b), t in zip(earlier, truth, strict=True)
            ]
        )
        combo = table[[f"r{j}" for j in range(len(links))]].to_numpy()
        match = (combo == true[rows]).all(axis=1)
        known = pd.Series(np.where(match, size, np.inf)).groupby(rows).min().to_numpy()
        best = np.where(np.isfinite(known), known, best)
    out: IntArray = best.astype(np.int64)
    return out


def history_summary(sizes: npt.ArrayLike, k: int) -> dict[str, Any]:
    """Summary of intersected class sizes against the smaller k of the releases."""
    s = np.asarray(sizes, dtype=np.float64)
    return {
        "k": float(k),
        "min_size": float(s.min()),
        "median_size": float(np.median(s)),
        "share_below_k": float(np.mean(s < k)),
        "prosecutor_max": float(1.0 / s.min()),
        "prosecutor_mean": float(np.mean(1.0 / s)),
    }


def nested_labels(Z: FloatArray, fine: IntArray, k: int) -> IntArray:
    """A partition of the records whose groups are unions of ``fine``'s groups, each with at
    least ``k`` records (module docstring). ``Z``: the key distance matrix (n × d)."""
    fine = np.asarray(fine, dtype=np.int64)
    sizes = np.bincount(fine)
    if sizes.sum() < k:
        raise DataError(f"k={k} exceeds the number of records n={sizes.sum()}")
    m = max(1, math.ceil(k / int(sizes.min())))
    g = sizes.size
    if g < 2 * m:
        units: IntArray = np.zeros(g, dtype=np.int64)
    else:
        units = np.asarray(mdav(metrics.group_means(Z, fine, g), m), dtype=np.int64)
    coarse: IntArray = units[fine]
    if int(np.bincount(coarse).min()) < k:  # cannot happen: m fine groups of >= min size each
        raise RuntimeError(f"nested partition has a group below k={k}")
    return coarse


def released_keys(
    df: pd.DataFrame, cols: Sequence[KeyColumn], values: Sequence[FloatArray], labels: IntArray
) -> pd.DataFrame:
    """``df`` with every key attribute replaced by its group's representative, as
    :func:`locpriv.tabular.io.frame.anonymize` writes it (mean, median category, mode category;
    an integer column gets one rounded value per group in its own dtype, so equal keys stay
    equal and the groups intact; categorical dtypes kept)."""
    from locpriv.tabular.io.frame import _written_keys

    keys, _ = _written_keys(df, list(cols), list(values), labels, "centroids")
    out = df.copy()
    for name in keys.columns:
        out[name] = keys[name]
    return out


def output_path(template: str, k: int) -> str:
    """The output file of the release at ``k``: ``{k}`` in ``template`` replaced, else
    ``.k<K>`` inserted before the extension (``out.csv.gz`` -> ``out.k5.csv.gz``)."""
    if "{k}" in template:
        return template.replace("{k}", str(k))
    for ext in (".csv.gz", ".parquet", ".csv", ".pq", ".json", ".html"):
        if template.lower().endswith(ext):
            return f"{template[: -len(ext)]}.k{k}{template[-len(ext) :]}"
    return f"{template}.k{k}"


def nested_releases(
    df: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str],
    ks: Sequence[int],
    *,
    p: int = 1,
    method: str | None = None,
    seed: int | None = None,
    ordinal: Sequence[str] = (),
    nominal: Sequence[str] = (),
    keep_order: bool = False,
    drop: Sequence[str] = (),
    warn: Callable[[str], None] | None = None,
    **kwargs: Any,
) -> list[tuple[int, pd.DataFrame, dict[str, Any]]]:
    """Releases of ``df`` at every k of ``ks`` with nested groups (module docstring).

    The smallest k is released by :func:`~locpriv.tabular.io.frame.anonymize` (``method``, ``p``,
    ``seed``, ``keep_order``, ``drop``, ``warn``, ``kwargs``); each larger k by
    :func:`nested_labels` over the classes of the previous level's file, its keys written as
    ``anonymize`` writes them (:func:`released_keys`: integers stay integers, dtypes kept) and
    its figures measured on those written values
    (:func:`~locpriv.tabular.io.frame.release_figures`). Every release gets its **own** random
    order (:func:`~locpriv.tabular.io.estimators.row_order` with ``level=k``: from the OS's
    entropy, or from ``seed`` and k), so no two files can be linked row by row; each frame
    carries its permutation in ``attrs["source_rows"]``. ``keep_order=True`` keeps the input
    order in all of them (flagged in each report). Returns ``(k, frame, report)`` by
    increasing k; each larger-k report has ``nested_in`` (the k whose classes it unites).
    """
    from locpriv.tabular.io.encoding import encode, encode_written
    from locpriv.tabular.io.estimators import row_order
    from locpriv.tabular.io.frame import (
        Release,
        _key_columns,
        _warn,
        _written_keys,
        anonymize,
        apply_release,
        audit_pass_through,
        release_figures,
        release_warnings,
    )
    from locpriv.tabular.risk.assess import align, source_rows

    order = sorted({int(k) for k in ks})
    if len(order) != len(ks):
        raise ConfigError(f"--k lists a value twice: {list(ks)}")
    qi, sensitive = list(qi), list(sensitive)
    out, report = anonymize(
        df,
        qi,
        sensitive,
        order[0],
        p,
        method,
        seed,
        ordinal=ordinal,
        nominal=nominal,
        keep_order=keep_order,
        drop=drop,
        warn=warn,
        **kwargs,
    )
    truth = source_rows(df, out, qi, ordinal=ordinal, nominal=nominal)
    if truth is None:
        truth = align(df, out, qi, nominal=nominal, ordinal=ordinal)
    labels = class_ids(out, qi)[truth]  # the written classes, per original row
    results = [(order[0], out, report)]
    cols, values = _key_columns(df, qi, ordinal, nominal)
    Z = encode(cols, values).Z
    sens = [pd.factorize(df[name], sort=True)[0] for name in sensitive]
    S = np.column_stack(sens).astype(np.int64) if sens else None
    dropped = list(report.get("dropped", []))
    roles = {c: "pass-through" for c in df.columns if c not in qi and c not in dropped}
    roles.update((c, "confidential") for c in sensitive)
    say = warn if warn is not None else _warn
    for prev, k in itertools.pairwise(order):
        labels = nested_labels(Z, labels, k)
        keys, written = _written_keys(df, cols, values, labels, "centroids")
        assert written is not None  # centroids: the written values
        perm, order_entry = row_order(len(df), seed, keep_order, level=k)
        rep: dict[str, Any] = {
            "method": f"nested({report.get('method')})",
            "nested_in": prev,
            "k": k,
            "p": p,
            "n": len(df),
            "partition_groups": int(np.bincount(labels).size),
            "sse_partition": metrics.sse(Z, labels),
            "release": "centroids",
            "order": order_entry,
            "dropped": dropped,
        }
        rep.update(
            release_figures(
                keys, Z, S, sensitive, k=k, written_Z=encode_written(cols, values, written)
            )
        )
        rep["pass_through"] = audit_pass_through(df, qi, roles, k)
        for line in release_warnings(rep):
            say(line)
        rel = Release(keys=keys, order=perm, drop=dropped, report=rep, labels=labels)
        results.append((k, apply_release(df, rel), rep))
        labels = class_ids(keys, qi)  # the written classes, per original row (the next level)
    return results
