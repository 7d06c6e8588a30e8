"""pandas front of generalisation: :func:`generalise` (the API) and :func:`plan_generalised`.

k-anonymity and the other privacy models by **generalisation and suppression**: every key
attribute of a record is released as a *true* coarser value (an ancestor in its hierarchy, or a
numeric range ``[lo, hi]``); a suppressed record is released with every key value ``"*"``.
The methods (:data:`GEN_METHODS`):

- ``incognito``: Incognito's full-domain search
  (:mod:`locpriv.tabular.generalisation.fulldomain`; k and distinct l, no suppression), the
  minimal node of least DM;
- ``samarati``: Samarati's binary search on the lattice height with MaxSup, the least ``loss``
  at the minimal height (:mod:`locpriv.tabular.generalisation.samarati`);
- ``optimal``: the exact minimum of ``loss`` over the acceptable full-domain nodes (OLA/Flash
  style, :mod:`locpriv.tabular.generalisation.optimal`);
- ``mondrian`` / ``mondrian-relaxed``: Mondrian's multidimensional partitioning, strict or
  relaxed (:mod:`locpriv.tabular.generalisation.mondrian`; no suppression).

Hierarchies: ``hierarchies`` maps a key column to a :class:`LevelHierarchy`, a path of an ARX CSV
hierarchy file (``value;level 1;...;*``), or a generator name (``interval``, ``quantile``,
``mask``, ``date``, ``flat`` = value or ``*``). A numerical key without one gets a generated
interval hierarchy (full-domain methods) or is cut as numbers (Mondrian); any other key without
one is an error naming the column.

The frame side is shared with microaggregation (:mod:`locpriv.tabular.io.frame`): the pass-through
columns, ``drop``, the random row order and the audit, so :func:`generalise` returns what
:func:`~locpriv.tabular.io.frame.anonymize` returns: the released frame and a report with the same
keys (``method, k, p, n, groups, min_group_size, max_group_size, group_sizes, dm, avg,
p_achieved, seconds, stages, release, order, dropped, pass_through``) plus ``models``,
``suppressed``, ``suppressed_share``, ``loss`` (the measures of
:mod:`locpriv.tabular.quality.loss`), ``levels`` and ``search`` (the method's facts).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.generalisation import arx, builders
from locpriv.tabular.generalisation.hierarchy import KeyTable, LevelHierarchy
from locpriv.tabular.generalisation.incognito import incognito_release
from locpriv.tabular.generalisation.mondrian import mondrian
from locpriv.tabular.generalisation.nested import within_node
from locpriv.tabular.generalisation.optimal import optimal
from locpriv.tabular.generalisation.release import GeneralisedRelease
from locpriv.tabular.generalisation.samarati import samarati
from locpriv.tabular.io.estimators import row_order
from locpriv.tabular.io.frame import (
    Columns,
    Release,
    as_columns,
    check_drop,
    check_frame,
    finish_release,
)
from locpriv.tabular.microagg.partitioned import current_stage_log, stage_log
from locpriv.tabular.models.spec import ModelCheck, PrivacyModels
from locpriv.tabular.quality import loss as losses
from locpriv.tabular.quality import metrics
from locpriv.tabular.quality.validate import achieved_p

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
HierarchySpec = LevelHierarchy | str | os.PathLike[str]

GEN_METHODS = ("incognito", "samarati", "optimal", "mondrian", "mondrian-relaxed")
"""Generalisation methods of ``locpriv anonymize --method``."""
FULL_DOMAIN = ("incognito", "samarati", "optimal")
GENERATORS = ("interval", "quantile", "mask", "date", "flat")
"""Hierarchy generator names accepted in place of a file (``--hierarchy age=interval``)."""
SUPPRESSED = "*"


def is_numeric(s: pd.Series) -> bool:
    """Numerical (not boolean) column."""
    return bool(pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s))


def flat_hierarchy(values: Sequence[object]) -> LevelHierarchy:
    """Two levels: each value, then ``*`` (keep or suppress the attribute)."""
    leaves = list(dict.fromkeys(str(v) for v in values))
    return LevelHierarchy.from_rows([(v, SUPPRESSED) for v in leaves])


def parse_hierarchies(items: list[str] | None) -> dict[str, str]:
    """``--hierarchy COL=FILE`` (repeatable) -> ``{COL: FILE}``."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise ConfigError(f"--hierarchy: {item!r} is not COLUMN=FILE")
        if name in out:
            raise ConfigError(f"--hierarchy: column {name!r} given twice")
        out[name] = path
    return out


def read_hierarchy_file(path: str | os.PathLike[str]) -> LevelHierarchy:
    """An ARX CSV hierarchy file (:func:`locpriv.tabular.generalisation.arx.read_hierarchy`)."""
    return arx.read_hierarchy(os.fspath(path))


def resolve_hierarchy(
    name: str, spec: HierarchySpec | None, values: pd.Series, *, numeric_as_hierarchy: bool
) -> LevelHierarchy | None:
    """The hierarchy of key column ``name``: given, read, generated, or None (a numerical key
    that Mondrian cuts as numbers). Raises a ConfigError naming the column when a non-numerical
    key has none."""
    if isinstance(spec, LevelHierarchy):
        return spec
    if spec is None:
        if not is_numeric(values):
            raise ConfigError(
                f"key attribute {name!r} is not numerical and has no hierarchy: give one "
                f"(--hierarchy {name}=FILE, an ARX CSV hierarchy) or a generator "
                f"(--hierarchy {name}=flat|mask)"
            )
        if not numeric_as_hierarchy:
            return None
        spec = "interval"
    text = os.fspath(spec)
    if text in GENERATORS:
        vals = values.tolist()
        if text == "flat":
            return flat_hierarchy(vals)
        try:
            return builders.build_hierarchy(vals, text)
        except (ConfigError, DataError) as exc:
            raise ConfigError(f"hierarchy of {name!r} ({text}): {exc}") from None
    if not Path(text).is_file():
        raise ConfigError(
            f"hierarchy of {name!r}: {text!r} is neither a file nor one of {', '.join(GENERATORS)}"
        )
    return read_hierarchy_file(text)


def leaf_codes(name: str, h: LevelHierarchy, values: pd.Series) -> IntArray:
    """Leaf codes of a key column; a DataError naming the column and the missing values."""
    try:
        return h.codes(values.tolist())
    except DataError as exc:
        raise DataError(f"key attribute {name!r}: {exc}") from None


def confidential_codes(
    df: pd.DataFrame, sensitive: Sequence[str]
) -> tuple[IntArray | None, list[bool]]:
    """n × m codes of the confidential attributes (sorted values) and whether each is ordered
    (numerical: ordered distance of t-closeness)."""
    if not sensitive:
        return None, []
    cols = [pd.factorize(df[c], sort=True)[0] for c in sensitive]
    return np.column_stack(cols).astype(np.int64), [is_numeric(df[c]) for c in sensitive]


def model_check(models: PrivacyModels, S: IntArray | None, ordered: list[bool]) -> ModelCheck:
    """:class:`ModelCheck` of ``models``, with the confidential codes only where needed."""
    if models.needs_confidential and S is None:
        raise ConfigError(
            "l-diversity and t-closeness (--l, --entropy-l, --recursive, --t) need "
            "confidential attributes (--sensitive)"
        )
    if not models.needs_confidential:
        return ModelCheck(models)
    return ModelCheck(models, S, ordered)


def _loss_figures(
    rel: GeneralisedRelease, k: int, leaves: IntArray | None, hierarchies: Sequence[LevelHierarchy]
) -> dict[str, float]:
    """Every loss measure of :mod:`locpriv.tabular.quality.loss` that applies to ``rel``
    (``prec`` needs hierarchy levels, ``entropy`` a full-domain release)."""
    out: dict[str, float] = {}
    for name in losses.LOSSES:
        if name == "prec" and rel.depth is None:
            continue
        if name == "entropy" and (leaves is None or rel.levels is None):
            continue
        out[name] = float(losses.loss_of_release(name, rel, k, leaves, hierarchies))
    return out


def run_generalisation(
    df: pd.DataFrame,
    qi: list[str],
    method: str,
    *,
    models: PrivacyModels,
    S: IntArray | None,
    ordered: list[bool],
    hierarchies: Mapping[str, HierarchySpec],
    max_suppression: int | float,
    loss: str,
    within: Sequence[int] | None = None,
) -> tuple[GeneralisedRelease, dict[str, Any]]:
    """Run ``method`` on the key columns ``qi`` of ``df``; the release and its facts (losses,
    hierarchy heights). ``within``: a full-domain node; the release is then the acceptable node
    of least ``loss`` below it (:func:`~locpriv.tabular.generalisation.nested.within_node`,
    nested releases), whatever the method. Its stages (``hierarchies``, ``search``, ``loss``)
    are recorded in the current stage log
    (:func:`~locpriv.tabular.microagg.partitioned.stage_log`), if any."""
    log = current_stage_log()
    clock = (time.perf_counter(), time.process_time())

    def lap(name: str) -> None:
        nonlocal clock
        now = (time.perf_counter(), time.process_time())
        if log is not None:
            log.add(name, now[0] - clock[0], now[1] - clock[1])
        clock = now

    full = method in FULL_DOMAIN
    hs: dict[str, LevelHierarchy | None] = {
        c: resolve_hierarchy(c, hierarchies.get(c), df[c], numeric_as_hierarchy=full) for c in qi
    }
    leaves = {c: leaf_codes(c, h, df[c]) for c, h in hs.items() if h is not None}
    lap("hierarchies")
    check = model_check(models, S, ordered)
    if method in ("incognito", "mondrian", "mondrian-relaxed") and max_suppression:
        raise ConfigError(f"--max-suppression: method {method!r} does not suppress records")
    hier = [h for h in hs.values() if h is not None]
    if full:
        lv = np.column_stack([leaves[c] for c in qi]).astype(np.int64)
        if within is not None:
            rel = within_node(lv, hier, check, within, loss=loss, columns=qi)
        elif method == "incognito":
            if models.entropy_l > 1 or models.recursive is not None or models.t is not None:
                raise ConfigError(
                    "method 'incognito' decides k and distinct l only; use samarati, optimal "
                    "or mondrian for entropy/recursive l-diversity and t-closeness"
                )
            codes = S if S is not None else np.zeros(len(df), dtype=np.int64)
            rel = incognito_release(lv, hier, codes, models.k, models.l, columns=qi)
        else:
            search = samarati if method == "samarati" else optimal
            rel = search(lv, hier, check, max_suppression, loss=loss, columns=qi)
        order_cols = list(qi)
        leaf_arr: IntArray | None = lv
    else:
        num = [c for c in qi if hs[c] is None]
        cat = [c for c in qi if hs[c] is not None]
        n = len(df)
        cat_leaves = [leaves[c] for c in cat]
        keys = KeyTable(
            numeric=df[num].to_numpy(dtype=np.float64).reshape(n, len(num)),
            leaves=(
                np.column_stack(cat_leaves).astype(np.int64)
                if cat_leaves
                else np.zeros((n, 0), dtype=np.int64)
            ),
            hierarchies=tuple(h for c in cat if (h := hs[c]) is not None),
        )
        rel = mondrian(keys, check, columns=[*num, *cat], relaxed=method == "mondrian-relaxed")
        order_cols = [*num, *cat]
        leaf_arr = None
    lap("search")
    losses = _loss_figures(rel, models.k, leaf_arr, hier if full else [])
    lap("loss")
    facts = {
        "loss": losses,
        "hierarchies": {c: (None if h is None else h.height) for c, h in hs.items()},
        "order_cols": order_cols,
        "hs": hs,
    }
    return rel, facts


def plan_generalised(
    df: pd.DataFrame,
    qi: Columns,
    sensitive: Columns = (),
    *,
    k: int | None = None,
    models: PrivacyModels | None = None,
    method: str = "optimal",
    hierarchies: Mapping[str, HierarchySpec] | None = None,
    max_suppression: int | float = 0,
    loss: str = "gil",
    seed: int | None = None,
    keep_order: bool = False,
    drop: Columns = (),
    columns: Sequence[str] | None = None,
    within: Sequence[int] | None = None,
) -> Release:
    """Generalise the key columns of ``df`` (see :func:`generalise`) without building the output
    frame: the released key columns aligned with ``df``'s rows, the order, the dropped columns
    and the report (pass-through audit not included). ``within``: see
    :func:`run_generalisation` (full-domain methods, no suppression)."""
    with ExitStack() as stack:
        log = current_stage_log() or stack.enter_context(stage_log())
        qi, sensitive = as_columns(qi, "qi"), as_columns(sensitive, "sensitive")
        dropped = as_columns(drop, "drop")
        if models is None:
            models = PrivacyModels(k=2 if k is None else int(k))
        elif k is not None and int(k) != models.k:
            raise ConfigError(f"k={k} disagrees with models.k={models.k}")
        if method not in GEN_METHODS:
            raise ConfigError(f"method must be one of {', '.join(GEN_METHODS)}; got {method!r}")
        check_frame(df, qi, sensitive, models.k, 1)  # l may exceed k here; ModelCheck checks l
        check_drop(dropped, list(df.columns) if columns is None else list(columns), qi, sensitive)
        hmap = dict(hierarchies or {})
        for name in hmap:
            if name not in qi:
                raise ConfigError(f"hierarchy given for {name!r}, which is not a key attribute")
        S, ordered = confidential_codes(df, sensitive)
        rel, facts = run_generalisation(
            df,
            qi,
            method,
            models=models,
            S=S,
            ordered=ordered,
            hierarchies=hmap,
            max_suppression=max_suppression,
            loss=loss,
            within=within,
        )
        keys = pd.DataFrame(index=df.index)
        pos = {c: j for j, c in enumerate(rel.columns)}
        for c in qi:
            keys[c] = pd.Series(list(rel.values[pos[c]]), index=df.index, dtype=object)
        report = release_report(rel, models, sensitive, S, method)
        report.update(
            loss=facts["loss"],
            loss_objective=loss if method in ("samarati", "optimal") else None,
            hierarchy_heights=facts["hierarchies"],
            max_suppression=max_suppression,
            release="generalised",
            il_percent=None,
            il_basis=(
                "generalisation keeps true values: see loss (gil = generalised information loss)"
            ),
        )
        order, report["order"] = row_order(len(df), seed, keep_order)
        report["dropped"] = dropped
        report["stages"] = log.report()
        report["seconds"] = report["stages"]["seconds"]
    extra = {"generalised": rel, "hierarchies": facts["hs"]}
    return Release(
        keys=keys, order=order, drop=dropped, report=report, labels=rel.labels, extra=extra
    )


def release_report(
    rel: GeneralisedRelease,
    models: PrivacyModels,
    sensitive: list[str],
    S: IntArray | None,
    method: str,
) -> dict[str, Any]:
    """The class figures of a generalised release, under the keys of microaggregation's report
    (:func:`~locpriv.tabular.io.frame.release_figures`): classes over the kept records; the
    suppressed records are counted apart."""
    sup = np.asarray(rel.suppressed, dtype=bool)
    n = len(sup)
    kept_labels = np.asarray(rel.labels)[~sup]
    dense = np.unique(kept_labels, return_inverse=True)[1].astype(np.int64)
    sizes = np.bincount(dense) if dense.size else np.zeros(0, dtype=np.int64)
    out: dict[str, Any] = {
        "method": method,
        "k": models.k,
        "p": models.l,
        "models": {k: v for k, v in asdict(models).items()},
        "n": n,
        "groups": int(sizes.size),
        "min_group_size": int(sizes.min()) if sizes.size else 0,
        "max_group_size": int(sizes.max()) if sizes.size else 0,
        "mean_group_size": float(sizes.mean()) if sizes.size else 0.0,
        "dm": metrics.discernibility(dense) + int(sup.sum()) * n if dense.size else n * n,
        "avg": metrics.avg_class_size(dense, models.k) if dense.size else 0.0,
        "group_sizes": (
            {str(s): c for s, c in metrics.size_histogram(dense).items()} if dense.size else {}
        ),
        "p_achieved": dict(
            zip(
                sensitive,
                achieved_p(dense, S[~sup]) if S is not None and dense.size else [],
                strict=False,
            )
        ),
        "suppressed": int(sup.sum()),
        "suppressed_share": float(sup.mean()) if n else 0.0,
        "levels": list(rel.levels) if rel.levels is not None else None,
        "search": {k: v for k, v in rel.info.items() if k != "seconds"},
    }
    return out


def generalise(
    df: pd.DataFrame,
    qi: Columns,
    sensitive: Columns = (),
    *,
    k: int | None = None,
    models: PrivacyModels | None = None,
    method: str = "optimal",
    hierarchies: Mapping[str, HierarchySpec] | None = None,
    max_suppression: int | float = 0,
    loss: str = "gil",
    seed: int | None = None,
    keep_order: bool = False,
    drop: Columns = (),
    warn: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """k-anonymous copy of ``df`` by generalisation and suppression, and its report.

    ``k`` or ``models`` (:class:`PrivacyModels`: k, distinct/entropy/recursive l-diversity,
    t-closeness of the ``sensitive`` columns); ``method`` one of :data:`GEN_METHODS`;
    ``hierarchies`` per key column (module docstring); ``max_suppression``: records that may be
    suppressed (``samarati``/``optimal``), an ``int`` count or a ``float`` share of n;
    ``loss``: what ``samarati`` and ``optimal`` minimise (``gil``, ``prec``, ``dm``, ``cavg``,
    ``entropy``). Key columns come back as strings (hierarchy labels or ranges, ``"*"`` when
    suppressed); every other column passes through, audited, in a random row order (``seed``,
    ``keep_order``, ``drop`` and ``warn`` as in :func:`~locpriv.tabular.io.frame.anonymize`).
    """
    rel = plan_generalised(
        df,
        qi,
        sensitive,
        k=k,
        models=models,
        method=method,
        hierarchies=hierarchies,
        max_suppression=max_suppression,
        loss=loss,
        seed=seed,
        keep_order=keep_order,
        drop=drop,
    )
    return finish_release(df, rel, qi=qi, sensitive=sensitive, k=rel.report["k"], warn=warn)
