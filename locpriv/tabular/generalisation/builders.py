"""Hierarchies generated from a column's values, for key attributes given no hierarchy file.

Every builder returns a :class:`~locpriv.tabular.generalisation.hierarchy.LevelHierarchy` whose
leaves are the column's distinct values labelled ``str(value)`` (so :meth:`LevelHierarchy.codes` of
the same values finds them), in first-seen order, and whose last level is the root ``*``. Each is
deterministic: the same values in the same order give the same hierarchy.

- :func:`interval_hierarchy` ``(values, *, width=None) -> LevelHierarchy``: numbers. Level 1
  cuts the line into aligned half-open intervals ``[origin + j w, origin + (j + 1) w)`` of a
  *nice* width ``w`` (1, 2 or 5 times a power of ten, about a 32nd of the range, at least 1 for
  integer data, unless given); every level above doubles the width, with the same origin
  (``floor(min / w) * w``), so the intervals nest; the first level that would be one interval is
  the root ``*``. Labels like ``[20, 30)``.
- :func:`quantile_hierarchy` ``(values, *, bins=16) -> LevelHierarchy``: numbers. Level 1 cuts
  at the (deduplicated) ``bins``-quantiles of the values (with their multiplicities), so the
  intervals hold about equally many records; each level above merges adjacent pairs. The
  interval holding the maximum is closed: ``[60, 90]``.
- :func:`date_hierarchy` ``(values) -> LevelHierarchy``: dates or date-times (``date``,
  ``datetime``, ``numpy.datetime64`` or ISO strings); levels day ``2024-03-05`` (only when some
  value carries a time), month ``2024-03``, year ``2024``, decade ``2020s``, root.
- :func:`masking_hierarchy` ``(values) -> LevelHierarchy``: strings masked from the right one
  character per level, the length kept (``12345`` -> ``1234*`` -> ``123**`` -> ... ->
  ``*****``) up to the longest value, then the root ``*``.
- :func:`build_hierarchy` ``(values, kind=None) -> LevelHierarchy``: one of the above by
  ``kind`` (``"interval"``, ``"quantile"``, ``"date"``, ``"mask"``), or chosen from the values'
  types when None: Python/numpy numbers -> intervals, dates -> dates, anything else (strings
  included, even of digits: ZIP codes) -> masking.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence

import numpy as np

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy

__all__ = [
    "build_hierarchy",
    "date_hierarchy",
    "format_number",
    "interval_hierarchy",
    "masking_hierarchy",
    "quantile_hierarchy",
]

ROOT = "*"


def format_number(x: float) -> str:
    """Short exact label of a number: ``20`` for 20.0, else the shortest round-trip repr."""
    if math.isfinite(x) and x == int(x) and abs(x) < 2**53:
        return str(int(x))
    return repr(float(x))


def _as_list(values: Iterable[object]) -> list[object]:
    if isinstance(values, np.ndarray):
        if values.dtype.kind == "M":
            return list(values.astype("datetime64[us]").tolist())
        return list(values.tolist())
    return list(values)


def _leaves(values: Iterable[object]) -> tuple[list[str], list[object]]:
    """Distinct values in first-seen order by label ``str(v)``, and one value per label."""
    first: dict[str, object] = {}
    for v in _as_list(values):
        first.setdefault(str(v), v)
    if not first:
        raise DataError("cannot build a hierarchy over no values")
    return list(first), list(first.values())


def _from_levels(leaves: Sequence[str], levels: Sequence[Sequence[str]]) -> LevelHierarchy:
    """Hierarchy from the leaf labels and, per level above, one label per leaf (root added)."""
    rows = [(leaf, *(lev[i] for lev in levels), ROOT) for i, leaf in enumerate(leaves)]
    return LevelHierarchy.from_rows(rows)


def _numbers(objs: Sequence[object]) -> np.ndarray:
    try:
        x = np.asarray([float(v) for v in objs], dtype=np.float64)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise DataError(f"interval hierarchy needs numbers ({exc})") from exc
    if not np.isfinite(x).all():
        raise DataError("interval hierarchy needs finite numbers")
    return x


def _nice_width(span: float, integral: bool) -> float:
    target = span / 32 if span > 0 else 1.0
    exp = math.floor(math.log10(target))
    for m in (1, 2, 5, 10):
        w = m * 10.0**exp
        if w >= target * (1 - 1e-12):
            break
    return max(w, 1.0) if integral else w


def _interval_label(lo: float, hi: float, closed: bool = False) -> str:
    return f"[{format_number(lo)}, {format_number(hi)}{']' if closed else ')'}"


def interval_hierarchy(values: Iterable[object], *, width: float | None = None) -> LevelHierarchy:
    """Aligned intervals doubling in width up to the root (see the module docstring)."""
    leaves, objs = _leaves(values)
    x = _numbers(objs)
    lo, hi = float(x.min()), float(x.max())
    integral = bool(np.all(x == np.round(x)))
    w = _nice_width(hi - lo, integral) if width is None else float(width)
    if not (w > 0 and math.isfinite(w)):
        raise ConfigError(f"interval width must be positive, got {width!r}")
    origin = math.floor(lo / w) * w
    j = np.floor((x - origin) / w).astype(np.int64)
    levels: list[list[str]] = []
    scale = 1
    while j.min() != j.max():
        wid = w * scale
        levels.append(
            [_interval_label(origin + int(a) * wid, origin + (int(a) + 1) * wid) for a in j]
        )
        j //= 2
        scale *= 2
    return _from_levels(leaves, levels)


def quantile_hierarchy(values: Iterable[object], *, bins: int = 16) -> LevelHierarchy:
    """Intervals at quantiles of the values, merged pairwise up to the root."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ConfigError(f"bins must be an integer >= 1, got {bins!r}")
    vals = _as_list(values)
    allv = _numbers(vals)
    leaves, objs = _leaves(vals)
    x = _numbers(objs)
    edges = np.unique(np.quantile(allv, np.linspace(0.0, 1.0, bins + 1)))
    if len(edges) < 2:
        return _from_levels(leaves, [])
    last = len(edges) - 2  # index of the closed top interval
    j = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, last).astype(np.int64)
    levels: list[list[str]] = []
    size = 1  # base intervals per node at this level
    while j.min() != j.max():
        labels = []
        for a in j:
            first, end = int(a) * size, min((int(a) + 1) * size, last + 1)
            labels.append(
                _interval_label(float(edges[first]), float(edges[end]), closed=end == last + 1)
            )
        levels.append(labels)
        j //= 2
        size *= 2
    return _from_levels(leaves, levels)


def _as_datetime(v: object) -> dt.datetime:
    if isinstance(v, dt.datetime):
        return v
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day)
    if isinstance(v, np.datetime64):
        got = v.astype("datetime64[us]").tolist()
        if isinstance(got, dt.datetime):
            return got
    if isinstance(v, str):
        try:
            return dt.datetime.fromisoformat(v.strip())
        except ValueError:
            pass
    raise DataError(f"not a date: {v!r}")


def date_hierarchy(values: Iterable[object]) -> LevelHierarchy:
    """Day (when times are present) / month / year / decade / root."""
    leaves, objs = _leaves(values)
    ts = [_as_datetime(v) for v in objs]
    levels: list[list[str]] = []
    if any(t.time() != dt.time() for t in ts):
        levels.append([f"{t.year:04d}-{t.month:02d}-{t.day:02d}" for t in ts])
    levels.append([f"{t.year:04d}-{t.month:02d}" for t in ts])
    levels.append([f"{t.year:04d}" for t in ts])
    levels.append([f"{t.year // 10 * 10:04d}s" for t in ts])
    return _from_levels(leaves, levels)


def masking_hierarchy(values: Iterable[object]) -> LevelHierarchy:
    """Mask one more character from the right per level, length kept, then the root."""
    leaves, _ = _leaves(values)
    longest = max(len(s) for s in leaves)
    levels = [
        [s[: max(len(s) - i, 0)] + "*" * min(i, len(s)) for s in leaves]
        for i in range(1, longest + 1)
    ]
    if levels and all(lab == ROOT for lab in levels[-1]):
        levels.pop()  # every value one character long: the last mask level is the root already
    return _from_levels(leaves, levels)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(
        v, bool | np.bool_
    )


def build_hierarchy(values: Iterable[object], kind: str | None = None) -> LevelHierarchy:
    """A generated hierarchy of ``kind`` (or chosen from the values' types)."""
    vals = _as_list(values)
    if kind is None:
        if vals and all(_is_number(v) for v in vals):
            kind = "interval"
        elif vals and all(isinstance(v, dt.date | np.datetime64) for v in vals):
            kind = "date"
        else:
            kind = "mask"
    if kind == "interval":
        return interval_hierarchy(vals)
    if kind == "quantile":
        return quantile_hierarchy(vals)
    if kind == "date":
        return date_hierarchy(vals)
    if kind == "mask":
        return masking_hierarchy(vals)
    raise ConfigError(f"unknown hierarchy kind {kind!r} (interval, quantile, date, mask)")
