"""Disclosure risk of a generalised release (true values: hierarchy nodes, ranges, ``*``).

The class-based measures of :func:`~locpriv.tabular.risk.assess.assess` (prosecutor, journalist,
marketer, inference) hold as they are: a class is a set of rows with identical released key
strings. Distance-based record linkage does not fit: a generalised value is not a perturbed
point but a *set* that holds the true value. The attacker of a generalised file knows the
hierarchies (they are published with it, or guessed from the labels), so she links a target
whose key values she knows by **matching**: the candidates are the released rows whose every
key value covers the target's (its leaf lies under the released node; its number lies in the
released range; ``*`` covers everything), and she picks one at random. The share of records so
linked to their own row is :func:`matching_linkage` (``linkage``, the expectation of
``1 / candidates``); with one pass-through column known as well, the candidates are narrowed to
rows with the target's value of that column (``linkage_passthrough``, the worst column).
For a full-domain release without suppression the candidates are exactly the class, so
``linkage`` equals ``prosecutor_mean``; suppressed rows and Mondrian's overlapping ranges
(relaxed) add candidates.

For interval disclosure the released ranges *are* the disclosure (the true value lies in them
by construction), so the rank-based and sdcMicro measures are not computed (``None``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.errors import DataError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.risk.assess import LINKAGE_SAMPLE, assess

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
SUPPRESSED = "*"
_RANGE = re.compile(r"^\s*[\[(]\s*([^,]+?)\s*,\s*([^\])]+?)\s*[\])]\s*$")
_CHUNK = 256


def _numeric(s: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s))


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
    sample: int | None = LINKAGE_SAMPLE,
    seed: int = 0,
) -> dict[str, Any]:
    """Matching linkage (module docstring) of ``sample`` original records (all when ``None``
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


def range_view(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    hierarchies: Mapping[str, LevelHierarchy | None],
) -> pd.DataFrame:
    """``released`` with every numerical key written as the ``[lo, hi]`` range of the original
    values its generalised value covers (the form :func:`assess` reads as an interval
    release); other columns unchanged."""
    out = released.copy()
    for c in qi:
        if not _numeric(original[c]):
            continue
        cv = ColumnCover(c, original[c], hierarchies.get(c))
        x = original[c].to_numpy(dtype=np.float64)
        text = released[c].astype(str)
        spans = {}
        for lab in pd.unique(text):
            lo, hi = cv.span(str(lab), x)
            spans[lab] = f"[{lo:g}, {hi:g}]" if lo != hi else f"[{lo:g}, {lo:g}]"
        out[c] = text.map(spans).astype(object)
    return out


def assess_generalised(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str] = (),
    *,
    hierarchies: Mapping[str, LevelHierarchy | None],
    truth: npt.ArrayLike | None = None,
    sample: int | None = LINKAGE_SAMPLE,
    seed: int = 0,
) -> dict[str, Any]:
    """:func:`~locpriv.tabular.risk.assess.assess` of a generalised release: the class-based
    measures and inference as there, linkage by matching (:func:`matching_linkage`), interval
    disclosure not applicable. ``hierarchies``: per key column, its hierarchy (None for a
    numerical key released as ranges)."""
    qi = list(qi)
    view = range_view(original, released, qi, hierarchies)
    nominal = [c for c in qi if not _numeric(original[c])]
    out = assess(
        original, view, qi, sensitive, nominal=nominal, truth=truth, sample=sample, seed=seed
    )
    # distance-based figures do not apply to generalised values: matching replaces them
    out.pop("il_per_attribute", None)
    out["il_written"] = None
    if "interval" in out:
        del out["interval"]
    for name in ("interval", "interval_sdcmicro"):
        out["measures"][name] = None
    through = [c for c in released.columns if c not in qi and c in original.columns]
    link = matching_linkage(original, released, qi, hierarchies, through, sample=sample, seed=seed)
    out["linkage"] = link
    m = out["measures"]
    m["linkage"] = link["keys"]
    m["linkage_passthrough"] = max(link["passthrough"].values()) if through else None
    out["notes"] = [n for n in out["notes"] if not n.startswith("interval release")]
    out["notes"].append(
        "generalised release: linkage by matching (an attacker who knows the hierarchies "
        "takes a random row among those whose released values cover her target's); interval "
        "disclosure not applicable (the released ranges hold the true values by construction)"
    )
    out["definitions"]["linkage"] = "matching on generalised values, 1/candidates; ties split"
    return out
