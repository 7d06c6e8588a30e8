"""pandas front of the batch core (file I/O is in :mod:`locpriv.tabular.io`).

:func:`anonymize` replaces the key attributes of every record by its group's representative
(mean for numerical, median category for ordinal, mode for nominal; or ``[lo, hi]`` intervals
with ``release="intervals"``), keeps every other column and the row order unchanged, and returns
the report of :class:`~locpriv.tabular.estimators.Microaggregator`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular.categorical import KeyColumn, Kind, encode, group_centroids
from locpriv.tabular.estimators import Microaggregator
from locpriv.tabular.hierarchy import Hierarchy
from locpriv.tabular.partitioned import BLOCK_SIZE


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


def anonymize(  # noqa: PLR0917 - the documented front: anonymize(df, qi, sensitive, k, p, ...)
    df: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str] = (),
    k: int = 3,
    p: int = 1,
    method: str | None = None,
    seed: int = 0,
    *,
    ordinal: Sequence[str] = (),
    nominal: Sequence[str] = (),
    hierarchies: Mapping[str, Hierarchy] | None = None,
    release: str = "centroids",
    progress: Callable[[float], None] | None = None,
    block_size: int = BLOCK_SIZE,
    scheduler: Any = None,
    workers: int = 1,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """k-anonymous (p=1) or p-sensitive k-anonymous copy of ``df`` and its report.

    ``hierarchies`` maps a confidential column to a :class:`Hierarchy` with protected values:
    the grouping then uses strong ancestors (extended p-sensitive k-anonymity). ``block_size``,
    ``scheduler`` (a dask.distributed address or ``Client``) and ``workers`` (local processes)
    concern the ``"partitioned"`` method, the default from 200,000 records (see
    :class:`Microaggregator`).
    """
    qi, sensitive = list(qi), list(sensitive)
    check_frame(df, qi, sensitive, k, p)
    for name in [*ordinal, *nominal]:
        if name not in qi:
            raise ConfigError(f"categorical column {name!r} is not a key attribute")
    if release not in ("centroids", "intervals"):
        raise ConfigError(f"release must be 'centroids' or 'intervals', got {release!r}")
    cols, values = _key_columns(df, qi, ordinal, nominal)
    enc = encode(cols, values)
    sens = []
    for name in sensitive:
        series = df[name]
        if hierarchies and name in hierarchies:
            series = pd.Series(hierarchies[name].reduce(series.tolist()), dtype=object)
        sens.append(pd.factorize(series, sort=True)[0])
    S = np.column_stack(sens) if sens else None
    est = Microaggregator(
        k=k,
        p=p,
        method=method,
        seed=seed,
        progress=progress,
        block_size=block_size,
        scheduler=scheduler,
        workers=workers,
    )
    est.fit_scaled(enc.Z, S, names=sensitive)
    labels = est.labels_
    out = df.copy()
    for kc, v in zip(cols, values, strict=True):
        if release == "intervals":
            lo = pd.Series(v).groupby(labels).transform("min").to_numpy()
            hi = pd.Series(v).groupby(labels).transform("max").to_numpy()
            if kc.kind == "numerical":
                out[kc.name] = [f"[{a:g}, {b:g}]" for a, b in zip(lo, hi, strict=True)]
            else:
                cats = np.array(kc.categories, dtype=object)
                if kc.kind == "ordinal":
                    out[kc.name] = [
                        f"[{cats[int(a)]}, {cats[int(b)]}]" for a, b in zip(lo, hi, strict=True)
                    ]
                else:
                    sets = pd.Series(v).groupby(labels).agg(lambda x: sorted(set(x)))
                    out[kc.name] = [
                        "{" + ", ".join(str(cats[int(c)]) for c in sets[g]) + "}" for g in labels
                    ]
            continue
        rep = group_centroids(v, labels, kc.kind)[labels]
        if kc.kind == "numerical":
            out[kc.name] = rep
        else:
            cats = np.array(kc.categories, dtype=object)
            out[kc.name] = cats[rep.astype(np.int64)]
    report = dict(est.report_)
    report["release"] = release
    return out, report
