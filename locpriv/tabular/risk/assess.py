"""Disclosure risk of a release, measured on the written file against the original.

:func:`assess` gathers the measures of :mod:`~locpriv.tabular.risk.measures` and
:mod:`~locpriv.tabular.risk.linkage` into one dict (``report["risk"]`` of ``locpriv anonymize``,
the output of ``locpriv assess``); :func:`measures` flattens it into the named measures that
``--max-risk`` bounds (:data:`MEASURES`); :func:`sweep` runs ``anonymize`` over several k for
the risk–utility table.

Which released row is which original record (needed by linkage and the per-attribute loss, not
by the class-based measures): ``truth`` when the caller knows it, else an identifier column
present in both files, else the permutation an in-memory release carries
(``attrs["source_rows"]``, set by :func:`~locpriv.tabular.io.frame.anonymize`, which shuffles the
rows by default; checked against the rows), else the position, which is accepted only when the
rows are seen to be aligned (every shared pass-through column equal row by row, and every
released class's numerical key values equal to the means of its original records).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.errors import ConfigError, DataError, InfeasibleError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.io.estimators import source_rows_of
from locpriv.tabular.risk import linkage
from locpriv.tabular.risk import measures as risk
from locpriv.tabular.risk.history import class_ids

IntArray = npt.NDArray[np.int64]

MEASURES: dict[str, str] = {
    "prosecutor": "highest record re-identification risk, 1/min class size",
    "prosecutor_mean": "mean record re-identification risk (= classes / n)",
    "journalist": "highest journalist risk, 1/min population class size",
    "journalist_mean": "mean journalist risk",
    "marketer": "expected share of records re-identified",
    "linkage": "DBRL on the key attributes: share of records linked to their own",
    "linkage_passthrough": "DBRL on key + one pass-through column, worst column",
    "interval": "rank-based interval disclosure, mean over numerical key attributes",
    "interval_sdcmicro": "sdcMicro dRisk (k = 0.05 sd) on the numerical key attributes",
    "inference": "attacker's accuracy on a confidential attribute (class majority), worst",
    "inference_gain": "that accuracy minus the baseline (overall majority), worst",
}
"""Names accepted by ``--max-risk`` and what they measure (all shares in [0, 1])."""


LINKAGE_SAMPLE = 5_000
"""Original records linked by default (a sample above it; the standard error is reported)."""


class RiskExceeded(InfeasibleError):
    """A release above a ``--max-risk`` bound (the message names the measure and its value)."""


def passthrough_columns(
    original: pd.DataFrame, released: pd.DataFrame, qi: Sequence[str]
) -> list[str]:
    """Released columns other than the key attributes that the original also has."""
    return [c for c in released.columns if c not in qi and c in original.columns]


def _is_interval_release(original: pd.DataFrame, released: pd.DataFrame, qi: Sequence[str]) -> bool:
    """Whether the numerical keys were released as ``[lo, hi]`` ranges (``--release
    intervals``); a numerical key released as anything else non-numerical is a DataError."""
    found = False
    for c in qi:
        if linkage._numeric(original[c]) and not linkage._numeric(released[c]):
            text = released[c].astype(str)
            if not (text.str.startswith("[") & text.str.endswith("]")).all():
                raise DataError(f"released key {c!r} is not numerical (nor [lo, hi] ranges)")
            found = True
    return found


def align(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    *,
    nominal: Sequence[str] = (),
    ordinal: Sequence[str] = (),
    id_col: str | None = None,
) -> IntArray:
    """``truth[i]`` = the released row of original record i (module docstring); raises a
    DataError when the rows cannot be matched."""
    n = len(original)
    if id_col is not None:
        for name, df in (("original", original), ("released", released)):
            if id_col not in df.columns:
                raise DataError(f"identifier column {id_col!r} not found in the {name} file")
            if not df[id_col].is_unique:
                raise DataError(f"identifier column {id_col!r} is not unique in the {name} file")
        pos = pd.Index(released[id_col]).get_indexer(original[id_col])
        if len(released) != n or (pos < 0).any():
            raise DataError(f"the files do not hold the same {id_col!r} values")
        found: IntArray = np.asarray(pos, dtype=np.int64)
        return found
    if len(released) != n:
        raise DataError(
            f"the release has {len(released)} rows, the original {n}: give --id to match them"
        )
    check_aligned(original, released, qi, nominal=nominal, ordinal=ordinal)
    return np.arange(n, dtype=np.int64)


def check_aligned(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    *,
    nominal: Sequence[str] = (),
    ordinal: Sequence[str] = (),
) -> None:
    """Raise a DataError unless released row i is seen to be original record i: every shared
    pass-through column equal row by row, and every released class's numerical key values the
    mean of its original records (rounded for integer columns)."""
    hint = "the released rows are not in the original's order: give --id COLUMN to match them"
    if len(released) != len(original):
        raise DataError(f"{hint} ({len(released)} rows against {len(original)})")
    for c in passthrough_columns(original, released, qi):
        a = original[c].reset_index(drop=True).astype(object)
        b = released[c].reset_index(drop=True).astype(object)
        if not bool(((a == b) | (a.isna() & b.isna())).all()):
            raise DataError(f"{hint} (column {c!r} differs)")
    num = [c for c in qi if c not in nominal and c not in ordinal]
    if not _is_interval_release(original, released, qi):
        labels = class_labels(released, qi)
        for c in num:
            x = original[c].to_numpy(dtype=np.float64)
            y = released[c].to_numpy(dtype=np.float64)
            mean = np.bincount(labels, weights=x) / np.bincount(labels)
            tol = 0.5 if pd.api.types.is_integer_dtype(released[c]) else 0.0
            tol += 1e-6 * (1.0 + np.abs(y))
            if np.any(np.abs(mean[labels] - y) > tol):
                raise DataError(f"{hint} (key {c!r} is not its class's mean)")


def class_labels(released: pd.DataFrame, qi: Sequence[str]) -> IntArray:
    """Equivalence classes of the written file: rows with identical key values."""
    return class_ids(released, qi)


def assess(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str] = (),
    *,
    ordinal: Sequence[str] = (),
    nominal: Sequence[str] = (),
    truth: npt.ArrayLike | None = None,
    id_col: str | None = None,
    population: pd.DataFrame | None = None,
    sample: int | None = LINKAGE_SAMPLE,
    seed: int = 0,
    distance: bool = True,
) -> dict[str, Any]:
    """Every disclosure-risk measure of ``released`` (the written file) against ``original``.

    Returns ``{"n", "classes", "class_sizes" (size -> classes), "reidentification",
    "linkage" {"keys", "passthrough": {col: share}}, "interval" {"rank": {col}, "sdcmicro"},
    "inference" {attr: {...}}, "il_per_attribute" {col: percent}, "measures" (flat, see
    :data:`MEASURES`; ``None`` where not computed), "notes"}``. ``population``: the table the
    journalist's target is drawn from (its records are matched to the nearest released class;
    without one the release is its own population and journalist = prosecutor).
    Linkage is measured on a random sample of ``sample`` original records (all when ``None``
    or fewer) against the whole release: ``linkage["sample"]`` and its standard errors
    ``linkage["se"]`` are reported. ``distance=False``: the release is read as ranges (no
    distance-based linkage, interval disclosure or per-attribute loss), as an interval release
    is; :func:`assess_generalised` uses it (its keys need not be numerical).
    """
    t0 = time.perf_counter()
    qi, sensitive = list(qi), list(sensitive)
    for name in qi:
        for label, df in (("original", original), ("released", released)):
            if name not in df.columns:
                raise DataError(f"key attribute {name!r} not found in the {label} file")
    if len(released) == 0 or len(original) == 0:
        raise DataError("the original or the released file has no rows")
    for name in sensitive:
        if name not in released.columns:
            raise DataError(f"confidential attribute {name!r} not found in the released file")
    notes: list[str] = []
    labels = class_labels(released, qi)
    sizes = np.bincount(labels)
    hist = dict(zip(*np.unique(sizes, return_counts=True), strict=True))
    out: dict[str, Any] = {
        "n": len(released),
        "classes": int(sizes.size),
        "class_sizes": {str(int(s)): int(c) for s, c in hist.items()},
        "definitions": {
            "reidentification": "ARX / El Emam 2013 prosecutor, journalist, marketer",
            "linkage": "DBRL, Domingo-Ferrer & Torra 2001; standardised Euclidean; ties split",
            "interval": "rank-based, Domingo-Ferrer & Torra 2001, mean over p = 1..10 %; "
            "sdcmicro = sdcMicro dRisk, k = 0.05",
            "inference": "class majority vs the file's majority value; nearest_record: "
            "the value of the nearest released record (ties split)",
        },
    }
    intervals = not distance or _is_interval_release(original, released, qi)
    t: IntArray | None = None
    if truth is not None:
        t = np.asarray(truth, dtype=np.int64)
    elif id_col is None and source_rows_of(released) is not None:
        # an in-memory release carries its permutation (checked against the rows)
        t = source_rows(original, released, qi, ordinal=ordinal, nominal=nominal)
        if t is None:
            notes.append(
                "linkage and per-attribute loss not computed: the rows do not match the "
                "permutation the release recorded (reordered or edited since?)"
            )
    else:
        try:
            t = align(original, released, qi, nominal=nominal, ordinal=ordinal, id_col=id_col)
        except DataError as exc:
            notes.append(f"linkage and per-attribute loss not computed: {exc}")
    m: dict[str, float | None] = dict.fromkeys(MEASURES)
    n = len(original)
    idx = np.arange(n)  # the original records linked (a sample above ``sample``)
    if sample is not None and n > sample:
        idx = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    X = Y = np.zeros((0, 0))
    if not intervals:
        X, Y = linkage.encode_pair(original, released, qi, ordinal=ordinal, nominal=nominal)

    population_sizes = None
    if not intervals and population is not None:
        pop = original if population is None else population
        _, P = linkage.encode_pair(original, pop, qi, ordinal=ordinal, nominal=nominal)
        population_sizes = linkage.nearest_class_sizes(P, Y, labels)
    else:
        notes.append(
            "journalist = prosecutor: no population given (the release is its own population)"
            if population is None
            else "journalist = prosecutor: interval release"
        )
    if intervals:
        notes.append(
            "interval release (key ranges): no linkage, interval disclosure or per-attribute "
            "loss; the class and inference measures hold"
        )
    re = risk.reidentification(labels, population_sizes)
    out["reidentification"] = re
    out["population"] = "release" if population is None else f"{len(population)} records"
    m["prosecutor"], m["prosecutor_mean"] = re["prosecutor_max"], re["prosecutor_mean"]
    m["journalist"], m["journalist_mean"] = re["journalist_max"], re["journalist_mean"]
    m["marketer"] = re["marketer"]

    inf = {c: risk.inference(labels, released[c].astype(object).to_numpy()) for c in sensitive}
    near: list[IntArray] = []
    if not intervals:
        near = linkage.nearest_classes(X[idx], Y, labels)
        for c in sensitive:
            if c in original.columns:
                acc = linkage.nearest_inference(
                    near, labels, original[c].to_numpy()[idx], released[c].to_numpy()
                )
                inf[c]["nearest_record"] = float(acc.mean())
    out["inference"] = inf
    if inf:
        m["inference"] = max(v["majority"] for v in inf.values())
        m["inference_gain"] = max(v["gain"] for v in inf.values())

    if t is not None:
        rel = released.iloc[t].reset_index(drop=True)
        orig = original.reset_index(drop=True)
        il: dict[str, float] = {}
        for c in qi:
            if intervals:
                break
            kind = "nominal" if c in nominal else "ordinal" if c in ordinal else "numerical"
            if kind == "ordinal":
                cats = linkage._categories(orig[c])
                a, b = linkage._codes(orig[c], cats, c), linkage._codes(rel[c], cats, c)
                il[c] = risk.attribute_loss(a, b, kind)
            else:
                il[c] = risk.attribute_loss(orig[c].to_numpy(), rel[c].to_numpy(), kind)
        out["il_per_attribute"] = il
        out["il_written"] = float(np.mean(list(il.values()))) if il else None
        if not intervals:
            hits = linkage.dbrl_by_class(near, labels[t[idx]], sizes)
            keys = float(hits.mean())
            se = {"keys": float(hits.std() / np.sqrt(idx.size))}
            through: dict[str, float] = {}
            for c in passthrough_columns(original, released, qi):
                Xc, Yc = linkage.encode_pair(original, released, [c])
                hits = linkage.dbrl_with_column(
                    X[idx], Y, x_col=Xc[idx, 0], y_col=Yc[:, 0], labels=labels, truth=t[idx]
                )
                through[c] = float(hits.mean())
                se[c] = float(hits.std() / np.sqrt(idx.size))
            out["linkage"] = {
                "keys": keys,
                "passthrough": through,
                "sample": int(idx.size),
                "se": se,
            }
            m["linkage"] = keys
            m["linkage_passthrough"] = max(through.values()) if through else None
            num = [c for c in qi if c not in nominal and c not in ordinal]
            if num:
                ranks = {
                    c: risk.interval_disclosure_rank(orig[c].to_numpy(), rel[c].to_numpy())
                    for c in num
                }
                sdc = risk.interval_disclosure_sdcmicro(
                    orig[num].to_numpy(dtype=np.float64), rel[num].to_numpy(dtype=np.float64)
                )
                out["interval"] = {"rank": ranks, "sdcmicro": sdc}
                m["interval"] = float(np.mean(list(ranks.values())))
                m["interval_sdcmicro"] = sdc
    out["measures"] = m
    out["notes"] = notes
    out["seconds"] = time.perf_counter() - t0
    return out


def assess_release(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    sensitive: Sequence[str] = (),
    *,
    ordinal: Sequence[str] = (),
    nominal: Sequence[str] = (),
    order: npt.ArrayLike | None = None,
) -> dict[str, Any]:
    """:func:`assess` of an in-memory release of ``original`` (``report["risk"]`` of
    ``locpriv anonymize``). ``order``: the release's permutation (``released[j]`` is
    ``original[order[j]]``, :attr:`~locpriv.tabular.io.frame.Release.order`); by default the one
    the frame carries (``attrs["source_rows"]``). Either is checked against the rows
    (:func:`source_rows`): linkage is never computed on wrongly matched rows."""
    return assess(
        original,
        released,
        qi,
        sensitive,
        ordinal=ordinal,
        nominal=nominal,
        truth=source_rows(original, released, qi, order, ordinal=ordinal, nominal=nominal),
    )


def parse_bounds(text: str) -> dict[str, float]:
    """``"prosecutor=0.2,linkage=0.1"`` -> ``{"prosecutor": 0.2, "linkage": 0.1}``."""
    bounds: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in MEASURES:
            raise ConfigError(
                f"--max-risk: {item.strip()!r} is not MEASURE=VALUE with MEASURE one of "
                + ", ".join(MEASURES)
            )
        try:
            bound = float(value)
        except ValueError:
            raise ConfigError(f"--max-risk: {name} needs a number, got {value!r}") from None
        if not 0.0 <= bound <= 1.0:
            raise ConfigError(f"--max-risk: {name} must be in [0, 1], got {bound}")
        bounds[name] = bound
    return bounds


def check_bounds(measures: Mapping[str, float | None], bounds: Mapping[str, float]) -> None:
    """Raise :class:`RiskExceeded` naming every measure above its bound (or not computed)."""
    failed = []
    for name, bound in bounds.items():
        value = measures.get(name)
        if value is None:
            failed.append(f"{name} could not be computed (bound {bound:g})")
        elif value > bound:
            failed.append(f"{name} = {value:.4g} > {bound:g}")
    if failed:
        raise RiskExceeded("release refused, risk above --max-risk: " + "; ".join(failed))


def sweep(
    original: pd.DataFrame,
    ks: Sequence[int],
    run: Callable[[int], tuple[pd.DataFrame, dict[str, Any]]],
    qi: Sequence[str],
    sensitive: Sequence[str] = (),
    *,
    ordinal: Sequence[str] = (),
    nominal: Sequence[str] = (),
    hierarchies: Mapping[str, LevelHierarchy | None] | None = None,
) -> list[dict[str, Any]]:
    """The risk–utility table: for each k, ``run(k)`` (an anonymisation of ``original``
    returning the written frame and its report) and the measures of that frame. Each row:
    ``{"k", "il_percent", "method", "measures", "il_per_attribute", "loss"}``. With
    ``hierarchies`` (a generalisation method's, per key column) each frame is measured by
    :func:`assess_generalised` and ``loss`` holds the method's loss measures."""
    rows = []
    for k in ks:
        released, report = run(k)
        truth = source_rows(original, released, qi, ordinal=ordinal, nominal=nominal)
        if hierarchies is not None:
            res = assess_generalised(
                original, released, qi, sensitive, hierarchies=hierarchies, truth=truth
            )
        else:
            res = assess(
                original, released, qi, sensitive, ordinal=ordinal, nominal=nominal, truth=truth
            )
        rows.append(
            {
                "k": int(k),
                "il_percent": report.get("il_percent"),
                "method": report.get("method"),
                "measures": res["measures"],
                "il_written": res.get("il_written"),
                "il_per_attribute": res.get("il_per_attribute", {}),
                "min_class_size": res["reidentification"]["min_class_size"],
                "loss": report.get("loss"),
            }
        )
    return rows


def source_rows(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    order: npt.ArrayLike | None = None,
    *,
    ordinal: Sequence[str] = (),
    nominal: Sequence[str] = (),
) -> IntArray | None:
    """``truth`` (the released row of each original record) of an in-memory release made from
    ``original``: from ``order`` (the original row of each released row) when given, else from
    the permutation the anonymiser recorded in ``released.attrs["source_rows"]``
    (:func:`~locpriv.tabular.io.estimators.source_rows_of`), else from the released index when it
    is a permutation of the original's; ``None`` when none is known (then :func:`align`
    decides). A recorded permutation is checked against the rows (:func:`check_aligned`; ``qi``:
    the key attributes) and dropped
    (``None``) when they disagree: pandas copies ``attrs`` through row selections, so a frame
    reordered after the release still carries the release's permutation."""
    rows = order if order is not None else source_rows_of(released)
    if rows is not None:
        src = np.asarray(rows, dtype=np.int64)
        n = len(original)
        if src.shape != (len(released),) or len(released) != n:
            return None
        if not np.array_equal(np.sort(src), np.arange(n)):
            return None
    elif released.index.equals(original.index):
        return None  # the same order, or a shuffle whose index was reset: align() checks
    else:
        pos = original.index.get_indexer(released.index)
        if (pos < 0).any() or len(np.unique(pos)) != len(original):
            return None
        src = pos.astype(np.int64)
    truth = np.empty(len(src), dtype=np.int64)
    truth[src] = np.arange(len(src))
    if rows is not None:
        try:
            check_aligned(
                original.reset_index(drop=True),
                released.iloc[truth].reset_index(drop=True),
                qi,
                nominal=nominal,
                ordinal=ordinal,
            )
        except DataError:
            return None
    return truth


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
        if not linkage._numeric(original[c]):
            continue
        cv = linkage.ColumnCover(c, original[c], hierarchies.get(c))
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
    """Disclosure risk of a generalised release (values true but coarser: hierarchy nodes,
    ranges, ``*``).

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
    ``hierarchies``: per key column, its hierarchy (None for a numerical key released as
    ranges)."""
    qi = list(qi)
    view = range_view(original, released, qi, hierarchies)
    nominal = [c for c in qi if not linkage._numeric(original[c])]
    out = assess(
        original,
        view,
        qi,
        sensitive,
        nominal=nominal,
        truth=truth,
        sample=sample,
        seed=seed,
        distance=False,
    )
    # distance-based figures do not apply to generalised values: matching replaces them
    out.pop("il_per_attribute", None)
    out["il_written"] = None
    if "interval" in out:
        del out["interval"]
    for name in ("interval", "interval_sdcmicro"):
        out["measures"][name] = None
    through = passthrough_columns(original, released, qi)
    link = linkage.matching_linkage(
        original, released, qi, hierarchies, through, sample=sample, seed=seed
    )
    out["linkage"] = link
    m = out["measures"]
    m["linkage"] = link["keys"]
    m["linkage_passthrough"] = max(link["passthrough"].values()) if through else None
    # matching needs no row correspondence: the notes about it (and about ranges) do not apply
    skip = ("interval release", "linkage and per-attribute loss not computed")
    out["notes"] = [n for n in out["notes"] if not n.startswith(skip)]
    sup = np.ones(len(released), dtype=bool)
    for c in qi:
        sup &= released[c].astype(str).to_numpy() == linkage.SUPPRESSED
    out["generalised"] = {
        "suppressed": int(sup.sum()),
        "candidates_mean": link["candidates_mean"],
        "hierarchies": {c: ("ranges" if h is None else h.height) for c, h in hierarchies.items()},
    }
    out["notes"].append(
        "generalised release: linkage by matching (an attacker who knows the hierarchies "
        "takes a random row among those whose released values cover her target's); interval "
        "disclosure not applicable (the released ranges hold the true values by construction)"
    )
    out["definitions"]["linkage"] = "matching on generalised values, 1/candidates; ties split"
    return out


def generalised_reason(
    original: pd.DataFrame, released: pd.DataFrame, qi: Sequence[str]
) -> str | None:
    """Why ``released`` reads as a generalised release of ``original`` (``None`` when it does
    not): a key value ``*`` (suppression), a half-open range ``[lo, hi)`` (a generated interval
    hierarchy), a non-numerical key holding a label the original does not have (a hierarchy
    node), or every key a ``[lo, hi]`` range (Mondrian on numbers). Closed ranges beside
    original categories are ambiguous (microaggregation's ``--release intervals`` writes them
    with the class's modal category, which is not a true value): they are read as an interval
    release unless hierarchies are given."""
    ranges = 0
    for c in qi:
        text = pd.Series(pd.unique(released[c].astype(str)))
        if (text == linkage.SUPPRESSED).any():
            return f"key {c!r} holds {linkage.SUPPRESSED!r} (suppressed values)"
        parsed = [linkage.parse_range(v) for v in text]
        if any(r is not None and not (r[2] and r[3]) for r in parsed):
            return f"key {c!r} holds half-open ranges"
        if all(r is not None for r in parsed):
            ranges += 1
            continue
        if not linkage._numeric(original[c]):
            known = set(original[c].astype(str))
            foreign = [v for v in text if v not in known]
            if foreign:
                return f"key {c!r} holds {foreign[0]!r}, which is not a value of the original"
    if ranges == len(qi):
        return "every key holds [lo, hi] ranges"
    return None


def check_labels(
    original: pd.DataFrame,
    released: pd.DataFrame,
    qi: Sequence[str],
    hierarchies: Mapping[str, LevelHierarchy | None],
) -> None:
    """Raise a DataError naming the column and the value when a released key value of a
    generalised release cannot be matched: not a node of its hierarchy, not a number or range,
    or covering no value of the original (then the file is not a release of the original)."""
    for c in qi:
        cv = linkage.ColumnCover(c, original[c], hierarchies.get(c))
        present = np.zeros(cv.nleaf, dtype=bool)
        present[cv.leaf] = True
        for lab in pd.unique(released[c].astype(str)):
            if not (cv.covers(str(lab)) & present).any():
                raise DataError(
                    f"released value {lab!r} of {c!r} covers no value of the original "
                    "(is this a release of the original, with these hierarchies?)"
                )


def sweep_il(row: Mapping[str, Any]) -> float | None:
    """IL % of a :func:`sweep` row: measured on the written file, else the report's; for a
    generalised release its generalised information loss (``loss["gil"]``) as a percentage."""
    if row.get("il_written") is not None:
        return float(row["il_written"])
    if row.get("il_percent") is not None:
        return float(row["il_percent"])
    gil = (row.get("loss") or {}).get("gil")
    return None if gil is None else 100.0 * float(gil)
