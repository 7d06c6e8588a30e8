"""``locpriv assess``: disclosure risk of a release, earlier releases, and the risk–utility
table over k (see docs/tabular.md, "Before you publish")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from locpriv.errors import ConfigError, DataError
from locpriv.tabular.generalisation.hierarchy import LevelHierarchy
from locpriv.tabular.io.estimators import METHODS
from locpriv.tabular.io.files import read_table, write_json, write_table, write_text_atomic
from locpriv.tabular.io.generalised import (
    FULL_DOMAIN,
    GEN_METHODS,
    SUPPRESSED,
    flat_hierarchy,
    parse_hierarchies,
    resolve_hierarchy,
)
from locpriv.tabular.risk import assess as assess_mod
from locpriv.tabular.risk import history


def parse_columns(text: str | None, option: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]`` (``None`` -> ``[]``); an empty name is a ConfigError."""
    if text is None:
        return []
    cols = [c.strip() for c in text.split(",")]
    if not all(cols):
        raise ConfigError(f"{option} has an empty column name: {text!r}")
    return cols


def parse_ks(text: str, option: str = "--k") -> list[int]:
    """``"10,5"`` -> ``[10, 5]``; every k an integer >= 1."""
    ks = []
    for item in text.split(","):
        try:
            k = int(item)
        except ValueError:
            raise ConfigError(
                f"{option} must be integers separated by commas, got {text!r}"
            ) from None
        if k < 1:
            raise ConfigError(f"{option} must be >= 1, got {k}")
        ks.append(k)
    return ks


def _stderr_warning(command: str) -> Callable[[str], None]:
    """A ``warn`` callback printing ``locpriv COMMAND: warning: LINE`` on stderr."""

    def warn(line: str) -> None:
        print(f"locpriv {command}: warning: {line}", file=sys.stderr)

    return warn


def hierarchies_of(
    original: pd.DataFrame,
    qi: list[str],
    given: dict[str, str],
    *,
    numeric_as_hierarchy: bool,
    released: pd.DataFrame | None = None,
) -> dict[str, LevelHierarchy | None]:
    """The hierarchy of each key column, as ``locpriv anonymize`` resolves it
    (:func:`~locpriv.tabular.io.generalised.resolve_hierarchy`: an ARX CSV file or a generator
    applied to ``original``'s values; ``None`` = a numerical key read as numbers and ranges).
    A non-numerical key without one whose ``released`` values are all original values or ``*``
    gets the flat hierarchy (value or ``*``); with other labels it needs ``--hierarchy``."""
    for name in given:
        if name not in qi:
            raise ConfigError(f"--hierarchy given for {name!r}, which is not a key attribute")
    out: dict[str, LevelHierarchy | None] = {}
    for c in qi:
        if c not in original.columns:
            raise DataError(f"key attribute {c!r} not found in the original file")
        spec = given.get(c)
        if (
            spec is None
            and released is not None
            and not pd.api.types.is_numeric_dtype(original[c].dtype)
        ):
            known = set(original[c].astype(str)) | {SUPPRESSED}
            if set(released[c].astype(str)) <= known:
                out[c] = flat_hierarchy(original[c].tolist())
                continue
        out[c] = resolve_hierarchy(c, spec, original[c], numeric_as_hierarchy=numeric_as_hierarchy)
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def render_text(result: dict[str, Any]) -> str:
    """The human summary printed on stdout."""
    lines = []
    rel = result.get("release")
    if rel is not None:
        lines.append(f"release: {rel['n']} records, {rel['classes']} classes")
        for name, value in rel["measures"].items():
            lines.append(f"  {name:20s} {_fmt(value)}   {assess_mod.MEASURES[name]}")
        for col, value in rel.get("linkage", {}).get("passthrough", {}).items():
            lines.append(f"  linkage with {col!r}: {value:.4f}")
        for note in rel.get("notes", []):
            lines.append(f"  note: {note}")
    hist = result.get("history")
    if hist is not None:
        lines.append(
            f"with {len(result['history_files'])} earlier release(s): min class "
            f"{hist['min_size']:.0f}, median {hist['median_size']:.0f}, "
            f"{100 * hist['share_below_k']:.1f} % of records below k={hist['k']:.0f}"
        )
    sweep = result.get("sweep")
    if sweep:
        names = ["prosecutor", "linkage", "linkage_passthrough", "interval", "inference"]
        lines.append("k      IL %     " + "  ".join(f"{n:>19s}" for n in names))
        for row in sweep:
            vals = "  ".join(f"{_fmt(row['measures'][n]):>19s}" for n in names)
            il = assess_mod.sweep_il(row)
            lines.append(f"{row['k']:<6d} {_fmt(il):>8s} {vals}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Execute ``locpriv assess``; 0, or 3 when ``--max-risk`` is exceeded (errors raise)."""
    qi = parse_columns(args.qi, "--qi")
    sensitive = parse_columns(args.sensitive, "--sensitive")
    ordinal = parse_columns(args.ordinal, "--ordinal")
    nominal = parse_columns(args.nominal, "--nominal")
    if not qi:
        raise ConfigError("--qi names no key attribute")
    bounds = assess_mod.parse_bounds(args.max_risk) if args.max_risk else {}
    if args.released is None and not args.sweep:
        raise ConfigError("give RELEASED, or --sweep K1,K2,... to anonymize ORIGINAL at each k")
    given = parse_hierarchies(args.hierarchy)
    if args.max_suppression and args.method not in GEN_METHODS:
        raise ConfigError(
            "--max-suppression applies to the --sweep runs of samarati and optimal, "
            f"not to --method {args.method or 'default'}"
        )
    if args.sweep and args.method not in GEN_METHODS and given:
        raise ConfigError(
            f"--hierarchy with --sweep applies to the generalisation methods "
            f"({', '.join(GEN_METHODS)}), not to --method {args.method or 'default'}"
        )
    original = read_table(args.original)
    result: dict[str, Any] = {"qi": qi, "sensitive": sensitive}
    if args.released is not None:
        released = read_table(args.released)
        for c in qi:
            for label, df in (("original", original), ("released", released)):
                if c not in df.columns:
                    raise DataError(f"key attribute {c!r} not found in the {label} file")
        reason = assess_mod.generalised_reason(original, released, qi)
        if reason is None and given:
            reason = "hierarchies given (--hierarchy)"
        if reason is not None:
            if args.population:
                raise ConfigError(
                    "--population: the journalist model against a population is not measured "
                    f"on a generalised release ({reason})"
                )
            if ordinal or nominal:
                raise ConfigError(
                    "--ordinal/--nominal: a generalised release is read through its "
                    f"hierarchies (--hierarchy) ({reason})"
                )
            hs = hierarchies_of(original, qi, given, numeric_as_hierarchy=False, released=released)
            assess_mod.check_labels(original, released, qi, hs)
            truth = None
            if args.id is not None:
                truth = assess_mod.align(original, released, qi, id_col=args.id)
            rel = assess_mod.assess_generalised(
                original, released, qi, sensitive, hierarchies=hs, truth=truth
            )
            rel["generalised"]["detected_by"] = reason
        else:
            population = read_table(args.population) if args.population else None
            rel = assess_mod.assess(
                original,
                released,
                qi,
                sensitive,
                ordinal=ordinal,
                nominal=nominal,
                id_col=args.id,
                population=population,
            )
        result["release"] = rel
        if args.history:
            files = parse_columns(args.history, "--history")
            earlier = [(read_table(f), qi) for f in files]
            link: str | list[str] = args.link
            if args.link not in ("auto", "position"):
                link = parse_columns(args.link, "--link")
            known = None
            if args.id is not None:
                # matched by --id: the target's class in every file is known, as it is to an
                # attacker who knows her key values (else the smallest over the links counts)
                here = assess_mod.align(original, released, qi, id_col=args.id)
                src = np.argsort(here)  # original record of each row of RELEASED
                known = [assess_mod.align(original, f, qi, id_col=args.id)[src] for f, _ in earlier]
            sizes = history.intersected_sizes(released, qi, earlier, link, truth=known)
            ks = [int(np.bincount(history.class_ids(f, qi)).min()) for f, _ in earlier]
            k = min([int(rel["reidentification"]["min_class_size"]), *ks])
            result["history"] = history.history_summary(sizes, k)
            values, counts = np.unique(sizes, return_counts=True)
            result["history"]["records_by_size"] = {
                str(int(v)): int(c) for v, c in zip(values, counts, strict=True)
            }
            result["history_files"] = files
    if args.sweep:
        ks = parse_ks(args.sweep, "--sweep")
        if args.method in GEN_METHODS:
            result["sweep"] = _sweep_generalised(args, original, qi, sensitive, ks, given=given)
        else:
            result["sweep"] = _sweep_microagg(args, original, qi, sensitive, ks)
    if args.json:
        write_json(result, args.json)
    if args.html:
        from locpriv.tabular.io.report_html import render

        write_text_atomic(render(result), args.html)
    sys.stdout.write(render_text(result))
    if bounds and "release" in result:
        try:
            assess_mod.check_bounds(result["release"]["measures"], bounds)
        except assess_mod.RiskExceeded as exc:
            print(f"locpriv assess: {exc}", file=sys.stderr)
            return 3
    return 0


def _sweep_microagg(
    args: argparse.Namespace,
    original: pd.DataFrame,
    qi: list[str],
    sensitive: list[str],
    ks: list[int],
) -> list[dict[str, Any]]:
    """The risk–utility rows of a microaggregation method over ``ks``."""
    from locpriv.tabular.io.frame import anonymize

    ordinal = parse_columns(args.ordinal, "--ordinal")
    nominal = parse_columns(args.nominal, "--nominal")

    def one(k: int) -> tuple[pd.DataFrame, dict[str, Any]]:
        return anonymize(
            original,
            qi,
            sensitive,
            k,
            args.p,
            args.method,
            args.seed,
            ordinal=ordinal,
            nominal=nominal,
            warn=_stderr_warning("assess"),
        )

    return assess_mod.sweep(original, ks, one, qi, sensitive, ordinal=ordinal, nominal=nominal)


def _sweep_generalised(
    args: argparse.Namespace,
    original: pd.DataFrame,
    qi: list[str],
    sensitive: list[str],
    ks: list[int],
    *,
    given: dict[str, str],
) -> list[dict[str, Any]]:
    """The risk–utility rows of a generalisation method over ``ks``: each release by
    :func:`~locpriv.tabular.io.generalised.generalise` with the hierarchies resolved once (as
    ``locpriv anonymize`` resolves them), measured by
    :func:`~locpriv.tabular.risk.assess.assess_generalised`; suppression by
    ``--max-suppression``."""
    from locpriv.tabular.io.cli import parse_suppression
    from locpriv.tabular.io.generalised import generalise
    from locpriv.tabular.models.spec import PrivacyModels

    if args.ordinal or args.nominal:
        raise ConfigError("--ordinal/--nominal: generalisation takes hierarchies (--hierarchy)")
    hs = hierarchies_of(original, qi, given, numeric_as_hierarchy=args.method in FULL_DOMAIN)
    sup = parse_suppression(args.max_suppression) if args.max_suppression else 0

    def one(k: int) -> tuple[pd.DataFrame, dict[str, Any]]:
        return generalise(
            original,
            qi,
            sensitive,
            models=PrivacyModels(k=k, l=args.p),
            method=args.method,
            hierarchies={c: h for c, h in hs.items() if h is not None},
            max_suppression=sup,
            seed=args.seed,
            warn=_stderr_warning("assess"),
        )

    return assess_mod.sweep(original, ks, one, qi, sensitive, hierarchies=hs)


def run_nested(args: argparse.Namespace, ks: list[int], bounds: dict[str, float]) -> int:
    """``locpriv anonymize --k 10,5``: one release per k with nested groups
    (:func:`locpriv.tabular.risk.history.nested_releases`), each assessed, gated by ``bounds`` and
    checked by intersecting all of them as an attacker would; nothing is written unless every
    release passes. Outputs: :func:`locpriv.tabular.risk.history.output_path` of ``args.output``
    (and of ``args.report``)."""
    import os
    import time

    qi = parse_columns(args.qi, "--qi")
    sensitive = parse_columns(args.sensitive, "--sensitive")
    ordinal = parse_columns(args.ordinal, "--ordinal")
    nominal = parse_columns(args.nominal, "--nominal")
    if args.release != "centroids":
        raise ConfigError("several --k values need --release centroids")
    t0 = time.perf_counter()
    df = read_table(args.input)
    results = history.nested_releases(
        df,
        qi,
        sensitive,
        ks,
        p=args.p,
        method=args.method,
        seed=args.seed,
        ordinal=ordinal,
        nominal=nominal,
        keep_order=args.keep_order,
        drop=parse_columns(args.drop, "--drop"),
        warn=_stderr_warning("anonymize"),
        block_size=args.block_size,
        scheduler=args.scheduler,
        workers=args.workers or os.cpu_count() or 1,
        workers_kind=args.workers_kind,
    )
    frames = [(out, qi) for _, out, _ in results]
    shuffled = all(r["order"]["shuffled"] for _, _, r in results)
    truths = []
    for _, out, _ in results:
        t = assess_mod.source_rows(df, out, qi, ordinal=ordinal, nominal=nominal)
        truths.append(
            assess_mod.align(df, out, qi, ordinal=ordinal, nominal=nominal) if t is None else t
        )
    # the strongest attacker links every record across all the files (whatever the order):
    # her candidates are the records sharing the target's class in every release
    per_record = np.column_stack(
        [history.class_ids(out, qi)[t] for (out, _), t in zip(frames, truths, strict=True)]
    )
    _, inverse, counts = np.unique(per_record, axis=0, return_inverse=True, return_counts=True)
    exact = history.history_summary(counts[inverse.ravel()], min(ks))
    if exact["min_size"] < min(ks):  # nesting guarantees it; refuse if it failed
        raise assess_mod.RiskExceeded(
            f"the releases at k={ks} intersected leave a class of {exact['min_size']:.0f} records"
        )
    for i, (k, out, report) in enumerate(results):
        # each release its own permutation (attrs["source_rows"]): linkage on the right rows
        report["risk"] = assess_mod.assess(
            df, out, qi, sensitive, ordinal=ordinal, nominal=nominal, truth=truths[i]
        )
        assess_mod.check_bounds(report["risk"]["measures"], bounds)
        others = frames[:i] + frames[i + 1 :]
        shared = history.shared_columns(out, others[0][0], qi, qi)
        if not shared and shuffled:
            # no column to link by and independent row orders: the files link by nothing;
            # the figures are those of the attacker who links every record anyway
            report["history"] = {
                **exact,
                "linked_by": "every record (worst case)",
                "note": "independent random orders and no shared column: rows not linkable",
            }
            continue
        src = np.argsort(truths[i])  # original row of each row of this release
        known = [t[src] for j, t in enumerate(truths) if j != i]
        sizes = history.intersected_sizes(out, qi, others, truth=known)
        summary = history.history_summary(sizes, min(ks))
        report["history"] = {**summary, "linked_by": ", ".join(shared) or "row position"}
        if summary["min_size"] < min(ks):  # nesting guarantees it; refuse if it failed
            raise assess_mod.RiskExceeded(
                f"release at k={k} intersected with the others leaves a class of "
                f"{summary['min_size']:.0f} records"
            )
    for k, out, report in results:
        _write_nested(args, k, out, report, t0)
    return 0


def _write_nested(
    args: argparse.Namespace, k: int, out: pd.DataFrame, report: dict[str, Any], t0: float
) -> None:
    """Write the release at ``k`` to ``--output`` (k in its name) and its report to ``--report``;
    ``report["seconds"]`` is the time since ``t0`` (``time.perf_counter``, seconds)."""
    import time

    path = history.output_path(args.output, k)
    write_table(out, path)
    report["seconds"] = time.perf_counter() - t0
    report["output"] = path
    if args.report:
        write_json(report, history.output_path(args.report, k))


def run_nested_generalised(
    args: argparse.Namespace, ks: list[int], bounds: dict[str, float]
) -> int:
    """``locpriv anonymize --k 10,5 --method incognito|samarati|optimal``: nested full-domain
    releases. The largest k is released by the method; each smaller k by the acceptable node of
    least ``--loss`` below the previous one
    (:func:`~locpriv.tabular.generalisation.nested.within_node`), so every class of a finer file
    lies in one class of each coarser file and intersecting them leaves classes of at least the
    smallest k (checked with every record linked across all files, as in :func:`run_nested`).
    No suppression (a record suppressed in one file but not in another would be narrowed by
    the intersection). Each file gets its own row order (``--seed`` and k, or OS entropy); each
    is assessed (:func:`~locpriv.tabular.risk.assess.assess_generalised`) and gated by
    ``bounds``; nothing is written unless all pass."""
    import time
    from dataclasses import replace

    from locpriv.tabular.io.cli import parse_models, parse_suppression
    from locpriv.tabular.io.estimators import row_order
    from locpriv.tabular.io.frame import finish_release
    from locpriv.tabular.io.generalised import plan_generalised

    if args.method not in FULL_DOMAIN:
        raise ConfigError(
            f"--k {','.join(map(str, ks))}: nested releases by generalisation need a "
            f"full-domain method ({', '.join(FULL_DOMAIN)}), where a coarser lattice node holds "
            f"the finer one's classes; {args.method!r} cuts each release its own way"
        )
    if args.max_suppression and parse_suppression(args.max_suppression):
        raise ConfigError(
            "--max-suppression with several --k: a record suppressed in one file but not in "
            "another would be narrowed by intersecting them; nested releases suppress nothing"
        )
    if args.ordinal or args.nominal:
        raise ConfigError("--ordinal/--nominal: generalisation takes hierarchies (--hierarchy)")
    if args.release != "centroids":
        raise ConfigError("--release: a generalised release holds hierarchy values and ranges")
    if args.loss and args.method not in ("samarati", "optimal"):
        raise ConfigError(f"--loss applies to samarati and optimal, not to {args.method!r}")
    qi = parse_columns(args.qi, "--qi")
    sensitive = parse_columns(args.sensitive, "--sensitive")
    given = parse_hierarchies(args.hierarchy)
    t0 = time.perf_counter()
    df = read_table(args.input)
    frame = df.reset_index(drop=True)
    bound: list[int] | None = None
    results: list[tuple[int, pd.DataFrame, dict[str, Any], Any]] = []
    for k in sorted(set(ks), reverse=True):
        rel = plan_generalised(
            df,
            qi,
            sensitive,
            models=parse_models(args, k),
            method=args.method,
            hierarchies=given,
            loss=args.loss or ("dm" if args.method == "incognito" else "gil"),
            seed=args.seed,
            keep_order=args.keep_order,
            drop=parse_columns(args.drop, "--drop"),
            within=bound,
        )
        order, rel.report["order"] = row_order(len(df), args.seed, args.keep_order, level=k)
        rel = replace(rel, order=order)
        rel.report["nested"] = {"within": bound, "ks": sorted(set(ks), reverse=True)}
        bound = list(rel.report["levels"])
        out, report = finish_release(
            df, rel, qi=qi, sensitive=sensitive, k=k, warn=_stderr_warning("anonymize")
        )
        truth = np.empty(len(df), dtype=np.int64)
        truth[order if order is not None else np.arange(len(df))] = np.arange(len(df))
        report["risk"] = assess_mod.assess_generalised(
            frame,
            out.reset_index(drop=True),
            qi,
            sensitive,
            hierarchies=rel.extra["hierarchies"],
            truth=truth,
        )
        assess_mod.check_bounds(report["risk"]["measures"], bounds)
        results.append((k, out, report, truth))
    # the strongest attacker links every record across all the files: her candidates are the
    # records sharing the target's class in every release
    per_record = np.column_stack(
        [history.class_ids(out, qi)[truth] for _, out, _, truth in results]
    )
    _, inverse, counts = np.unique(per_record, axis=0, return_inverse=True, return_counts=True)
    exact = history.history_summary(counts[inverse.ravel()], min(ks))
    if exact["min_size"] < min(ks):  # nesting guarantees it; refuse if it failed
        raise assess_mod.RiskExceeded(
            f"the releases at k={ks} intersected leave a class of {exact['min_size']:.0f} records"
        )
    for k, out, report, _ in results:
        report["history"] = {**exact, "linked_by": "every record (worst case)"}
        _write_nested(args, k, out, report, t0)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``assess`` command."""
    p = subparsers.add_parser(
        "assess",
        help="disclosure risk of a release (linkage, interval, re-identification, inference)",
        description=(
            "Measure what an attacker can do with RELEASED knowing ORIGINAL's values: "
            "distance-based record linkage, interval disclosure, prosecutor / journalist / "
            "marketer re-identification risk, inference of confidential attributes; with "
            "--history, the classes left after intersecting earlier releases; with --sweep, "
            "the risk-utility table over k."
        ),
    )
    p.add_argument("original", help="the original table (.csv or .parquet)")
    p.add_argument("released", nargs="?", default=None, help="the released table")
    p.add_argument("--qi", required=True, help="key attributes, comma separated")
    p.add_argument("--sensitive", default=None, help="confidential attributes, comma separated")
    p.add_argument("--ordinal", default=None, help="key attributes that are ordinal")
    p.add_argument("--nominal", default=None, help="key attributes that are nominal")
    p.add_argument(
        "--id",
        default=None,
        help="a column in both files naming each record (to match rows of a shuffled release)",
    )
    p.add_argument("--population", default=None, help="population table of the journalist model")
    p.add_argument("--history", default=None, help="earlier releases of the same records")
    p.add_argument(
        "--link",
        default="auto",
        help="how releases are linked: auto (shared columns, else position), position, or COLS",
    )
    p.add_argument("--sweep", default=None, help="k values: anonymize ORIGINAL at each")
    p.add_argument("--p", type=int, default=1, help="p of the --sweep runs")
    p.add_argument(
        "--method",
        choices=[*METHODS, *GEN_METHODS],
        default=None,
        help="method of the --sweep runs (microaggregation or generalisation)",
    )
    p.add_argument(
        "--hierarchy",
        action="append",
        default=None,
        metavar="COL=FILE",
        help="hierarchy of key column COL (repeatable), as locpriv anonymize takes it: an ARX "
        "CSV file or a generator (interval, quantile, mask, date, flat); to read a generalised "
        "release (detected by itself: '*', ranges, labels not in ORIGINAL) and for --sweep "
        "with a generalisation method",
    )
    p.add_argument(
        "--max-suppression",
        default=None,
        help="records samarati/optimal may suppress in the --sweep runs (count or share)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the --sweep runs")
    p.add_argument("--json", default=None, help="write the full result as JSON")
    p.add_argument("--html", default=None, help="write a self-contained HTML report")
    p.add_argument(
        "--max-risk",
        default=None,
        help="MEASURE=BOUND,...: exit 3 when the release exceeds a bound (names: "
        + ", ".join(assess_mod.MEASURES)
        + ")",
    )
    p.set_defaults(func=run)
