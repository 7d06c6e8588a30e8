"""``locpriv anonymize``: k-anonymity / p-sensitive k-anonymity of a CSV or Parquet file.

Bad input raises a :class:`~locpriv.errors.LocprivError` with one line naming the column or
parameter; the top-level CLI prints ``locpriv anonymize: error: ...`` and exits 2. Output files
are written atomically, so a failed run leaves none.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from typing import Any, TextIO

import numpy as np

from locpriv.errors import ConfigError
from locpriv.tabular.io.assess_cli import (
    parse_columns,
    parse_ks,
    run_nested,
    run_nested_generalised,
)
from locpriv.tabular.io.estimators import METHODS, source_rows_of
from locpriv.tabular.io.files import (
    is_parquet,
    parquet_columns,
    read_columns,
    read_table,
    write_json,
    write_release,
    write_table,
)
from locpriv.tabular.io.frame import (
    Release,
    anonymize,
    apply_release,
    audit_pass_through,
    finish_release,
    plan_release,
    release_warnings,
)
from locpriv.tabular.io.generalised import GEN_METHODS, parse_hierarchies, plan_generalised
from locpriv.tabular.microagg.distributed import WORKER_KINDS
from locpriv.tabular.microagg.partitioned import BLOCK_SIZE, DEFAULT_FROM_N
from locpriv.tabular.models.spec import PrivacyModels
from locpriv.tabular.risk.assess import (
    assess_generalised,
    assess_release,
    check_bounds,
    parse_bounds,
)
from locpriv.tabular.threads import kernel_threads


class ProgressBar:
    """A tiny stderr progress bar per stage, shown only on a TTY and only once the run has
    taken ``delay_s`` seconds. Each stage (``read``, ``blocks``, ``repair 1``, ..., ``write``)
    gets its own line."""

    def __init__(self, stream: TextIO | None = None, delay_s: float = 1.0, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.t_stage = self.t0
        self.delay_s = delay_s
        self.width = width
        self.name = "groups"
        self.shown = False

    def stage(self, name: str) -> None:
        """Start the stage ``name`` (ends the previous stage's line if it was drawn)."""
        self.close()
        self.name = name
        self.t_stage = time.monotonic()
        self.shown = False

    def __call__(self, fraction: float) -> None:
        """Report progress of the current stage in [0, 1]."""
        now = time.monotonic()
        if not self.enabled or now - self.t0 < self.delay_s:
            return
        f = min(max(fraction, 0.0), 1.0)
        done = int(f * self.width)
        bar = "#" * done + "-" * (self.width - done)
        elapsed = now - self.t_stage
        self.stream.write(f"\ranonymize {self.name:9s} [{bar}] {100 * f:5.1f}% {elapsed:6.1f}s")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """End the bar's line if it was drawn."""
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


def _not_read(risk: dict[str, Any], unread: list[str]) -> None:
    """Streamed Parquet: the pass-through columns ``unread`` were not read, so the linkage an
    attacker gets from each is unknown: ``linkage_passthrough`` is left uncomputed (``None``;
    a ``--max-risk`` bound on it then refuses the release) and a note says so."""
    if not unread:
        return
    risk["measures"]["linkage_passthrough"] = None
    risk["notes"].append(
        "Parquet streaming: only the key and confidential columns were read; linkage with the "
        f"pass-through columns {', '.join(unread)} is not measured, so linkage_passthrough is "
        "not computed (locpriv assess INPUT OUTPUT measures it)"
    )


def _no_warn(line: str) -> None:
    """The CLI prints the report's warnings itself (one stderr line each)."""


def parse_suppression(text: str) -> int | float:
    """``--max-suppression``: a count of records (``100``) or a share (``0.05``, ``5%``)."""
    t = text.strip()
    try:
        if t.endswith("%"):
            return float(t[:-1]) / 100.0
        if any(ch in t for ch in ".eE"):
            return float(t)
        return int(t)
    except ValueError:
        raise ConfigError(
            f"--max-suppression: {text!r} is not a count (100) or a share (0.05, 5%)"
        ) from None


def parse_models(args: argparse.Namespace, k: int) -> PrivacyModels:
    """The privacy models of ``--k --p/--l --entropy-l --recursive c,l --t``."""
    if args.l is not None and args.p not in (1, args.l):
        raise ConfigError(f"--l {args.l} and --p {args.p} disagree (both are distinct l)")
    rec = None
    if args.recursive:
        c, sep, ll = args.recursive.partition(",")
        try:
            rec = (float(c), int(ll))
        except ValueError:
            raise ConfigError(f"--recursive: {args.recursive!r} is not C,L (e.g. 3,2)") from None
        if not sep:
            raise ConfigError(f"--recursive: {args.recursive!r} is not C,L (e.g. 3,2)")
    return PrivacyModels(
        k=k,
        l=args.l if args.l is not None else args.p,
        entropy_l=args.entropy_l,
        recursive=rec,
        t=args.t,
    )


def _generalised_options(args: argparse.Namespace) -> None:
    """Refuse the generalisation options with a microaggregation method."""
    for flag, value in (
        ("--hierarchy", args.hierarchy),
        ("--max-suppression", args.max_suppression),
        ("--loss", args.loss),
    ):
        if value:
            raise ConfigError(
                f"{flag} applies to the generalisation methods ({', '.join(GEN_METHODS)}), "
                f"not to --method {args.method or 'default'}"
            )


def run_generalised(args: argparse.Namespace, bounds: dict[str, float]) -> int:
    """``locpriv anonymize --method incognito|samarati|optimal|mondrian[-relaxed]``: the same
    flow as microaggregation (read, release, audit, risk, gate, write, report)."""
    qi = parse_columns(args.qi, "--qi")
    sensitive = parse_columns(args.sensitive, "--sensitive")
    if args.ordinal or args.nominal:
        raise ConfigError("--ordinal/--nominal: generalisation takes hierarchies (--hierarchy)")
    if args.release != "centroids":
        raise ConfigError("--release: a generalised release holds hierarchy values and ranges")
    if args.loss and args.method not in ("samarati", "optimal"):
        raise ConfigError(f"--loss applies to samarati and optimal, not to {args.method!r}")
    models = parse_models(args, args.k)
    t0 = time.perf_counter()
    df = read_table(args.input)
    rel: Release = plan_generalised(
        df,
        qi,
        sensitive,
        models=models,
        method=args.method,
        hierarchies=parse_hierarchies(args.hierarchy),
        max_suppression=parse_suppression(args.max_suppression) if args.max_suppression else 0,
        loss=args.loss or "gil",
        seed=args.seed,
        keep_order=args.keep_order,
        drop=parse_columns(args.drop, "--drop"),
    )
    out, report = finish_release(df, rel, qi=qi, sensitive=sensitive, k=models.k, warn=_no_warn)
    truth = np.empty(len(df), dtype=np.int64)
    order = rel.order if rel.order is not None else np.arange(len(df))
    truth[order] = np.arange(len(df))
    report["risk"] = assess_generalised(
        df.reset_index(drop=True),
        out.reset_index(drop=True),
        qi,
        sensitive,
        hierarchies=rel.extra["hierarchies"],
        truth=truth,
    )
    for line in release_warnings(report):
        print(f"locpriv anonymize: warning: {line}", file=sys.stderr)
    check_bounds(report["risk"]["measures"], bounds)
    write_table(out, args.output)
    report["seconds"] = time.perf_counter() - t0
    if args.report:
        write_json(report, args.report)
    return 0


def run(args: argparse.Namespace) -> int:
    """Execute ``locpriv anonymize``; returns 0 (errors are raised)."""
    qi = parse_columns(args.qi, "--qi")
    sensitive = parse_columns(args.sensitive, "--sensitive")
    ordinal = parse_columns(args.ordinal, "--ordinal")
    nominal = parse_columns(args.nominal, "--nominal")
    drop = parse_columns(args.drop, "--drop")
    ks = parse_ks(str(args.k))
    bounds = parse_bounds(args.max_risk) if args.max_risk else {}
    if args.method in GEN_METHODS:
        if len(ks) > 1:  # nested full-domain releases
            return run_nested_generalised(args, ks, bounds)
        args.k = ks[0]
        return run_generalised(args, bounds)
    _generalised_options(args)
    models = parse_models(args, ks[0])
    extended = models.entropy_l > 1 or models.recursive is not None or models.t is not None
    args.p = models.l
    if len(ks) > 1:  # nested releases at several k (locpriv.tabular.risk.history)
        if extended:
            raise ConfigError("--entropy-l, --recursive and --t: one --k at a time")
        return run_nested(args, ks, bounds)
    args.k = ks[0]
    if args.p < 1:
        raise ConfigError(f"--p must be >= 1, got {args.p}")
    for name in (*ordinal, *nominal):
        if name not in qi:
            raise ConfigError(f"categorical column {name!r} is not a key attribute")
    # Parquet in and out: only the key and confidential columns are read; the other columns
    # are streamed from input to output row group by row group
    stream = is_parquet(args.input) and is_parquet(args.output)
    bar = ProgressBar()
    t0 = time.perf_counter()
    options: dict[str, Any] = {
        "ordinal": ordinal,
        "nominal": nominal,
        "release": args.release,
        "progress": bar,
        "block_size": args.block_size,
        "scheduler": args.scheduler,
        "workers": args.workers or os.cpu_count() or 1,
        "workers_kind": args.workers_kind,
        "keep_order": args.keep_order,
        "drop": drop,
        "entropy_l": models.entropy_l,
        "recursive": models.recursive,
        "t": models.t,
    }
    try:
        bar.stage("read")
        df = read_columns(args.input, [*qi, *sensitive]) if stream else read_table(args.input)
        bar(1.0)
        bar.stage("groups")
        if stream:
            every = parquet_columns(args.input)
            rel = plan_release(
                df, qi, sensitive, args.k, args.p, args.method, args.seed, columns=every, **options
            )
            roles = {c: "pass-through" for c in every if c not in qi and c not in rel.drop}
            roles.update((c, "confidential") for c in sensitive)
            with kernel_threads(options["workers"]):  # the key columns on the run's cores
                rel.report["pass_through"] = audit_pass_through(
                    df, qi, roles, args.k, column=lambda c: read_columns(args.input, [c])[c]
                )
            report = rel.report
            # the key and confidential columns as written (rows in the release's order)
            written = apply_release(df, replace(rel, drop=[]))
            report["risk"] = assess_release(
                df, written, qi, sensitive, ordinal=ordinal, nominal=nominal, order=rel.order
            )
            _not_read(report["risk"], [c for c in every if c in roles and c not in sensitive])
        else:
            out, report = anonymize(
                df, qi, sensitive, args.k, args.p, args.method, args.seed, warn=_no_warn, **options
            )
            # linkage follows each written row to its record through the release's permutation
            report["risk"] = assess_release(
                df, out, qi, sensitive, ordinal=ordinal, nominal=nominal, order=source_rows_of(out)
            )
        for line in release_warnings(report):
            print(f"locpriv anonymize: warning: {line}", file=sys.stderr)
        # the gate: above a --max-risk bound this raises and nothing is written
        check_bounds(report["risk"]["measures"], bounds)
        bar.stage("write")
        if stream:
            write_release(args.input, args.output, rel.keys, order=rel.order, drop=rel.drop)
        else:
            write_table(out, args.output)
        bar(1.0)
    finally:
        bar.close()
    report["seconds"] = time.perf_counter() - t0
    if args.report:
        write_json(report, args.report)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``anonymize`` command."""
    p = subparsers.add_parser(
        "anonymize",
        help="k-anonymity / p-sensitive k-anonymity of a CSV or Parquet table by microaggregation"
        " or by generalisation and suppression",
        description=(
            "Replace the key attributes of each record by its group's centroid (microaggregation)"
            " or by coarser true values from hierarchies (generalisation: --method "
            + "|".join(GEN_METHODS)
            + ") so that every "
            "group has >= k records and >= p distinct values of each confidential attribute. "
            "Other columns pass through unchanged (audited: near-unique columns and columns "
            "that predict a key attribute are reported and warned about; --drop removes "
            "them). Rows are written in a random order (--keep-order keeps the input's, "
            "which lets a sorted file be re-identified by position)."
        ),
    )
    p.add_argument("input", help="input table (.csv or .parquet)")
    p.add_argument("output", help="output table (.csv or .parquet), written atomically")
    p.add_argument("--qi", required=True, help="key attributes, comma separated")
    p.add_argument("--sensitive", default=None, help="confidential attributes, comma separated")
    p.add_argument(
        "--k",
        required=True,
        help="minimum group size; several (10,5) write one release per k with nested groups,"
        " each in its own random row order",
    )
    p.add_argument("--p", type=int, default=1, help="distinct confidential values per group")
    p.add_argument(
        "--method",
        choices=METHODS + GEN_METHODS,
        default=None,
        help=(
            f"algorithm (default: from {DEFAULT_FROM_N} records 'partitioned'; below it, "
            "within about 5x MDAV's time: p=1 'mdav', p>=2 k-increase, mdav-seed and sec-pk, "
            "keeping the lowest information loss; 'best' and 'best-p' lower the loss further "
            "at tens of times MDAV's time). Generalisation: incognito (full-domain, no "
            "suppression), samarati (binary search with --max-suppression), optimal (least "
            "--loss over the full-domain lattice), mondrian / mondrian-relaxed "
            "(multidimensional); these need --hierarchy for non-numerical keys"
        ),
    )
    p.add_argument(
        "--hierarchy",
        action="append",
        default=None,
        metavar="COL=FILE",
        help="generalisation: ARX CSV hierarchy file of key column COL (repeatable), or a "
        "generator: interval, quantile, mask, date, flat (numerical keys default to interval "
        "hierarchies; Mondrian cuts them as numbers)",
    )
    p.add_argument(
        "--max-suppression",
        default=None,
        help="generalisation (samarati, optimal): records that may be suppressed, a count "
        "(100) or a share of n (0.05 or 5%%; default 0)",
    )
    p.add_argument(
        "--loss",
        default=None,
        help="generalisation (samarati, optimal): loss minimised: gil (default), prec, dm, "
        "cavg, entropy",
    )
    p.add_argument("--l", type=int, default=None, help="distinct l-diversity (the same as --p)")
    p.add_argument(
        "--entropy-l",
        type=float,
        default=1.0,
        help="entropy l-diversity: exp(entropy) >= this in every class (default 1: off)",
    )
    p.add_argument("--recursive", default=None, metavar="C,L", help="recursive (c, l)-diversity")
    p.add_argument(
        "--t", type=float, default=None, help="t-closeness (EMD) of every confidential column"
    )
    p.add_argument(
        "--scheduler",
        default=None,
        help="dask.distributed scheduler (tcp://HOST:8786) that runs the partitioned blocks",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help=(
            "local workers running the partitioned blocks (default 0: one per core; the"
            " release is the same whatever the number)"
        ),
    )
    p.add_argument(
        "--workers-kind",
        choices=WORKER_KINDS,
        default=WORKER_KINDS[0],
        help=(
            "threads (default: share the key matrix, a few MB each) or processes (spawned,"
            " about 420 MB each) for --workers; the release is the same"
        ),
    )
    p.add_argument(
        "--block-size",
        type=int,
        default=BLOCK_SIZE,
        help=f"records per block of the partitioned method (default {BLOCK_SIZE})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help=(
            "random seed of the methods (random-seed, best, partitioned) and of the row order"
            " (default: methods seed 0, row order from the OS's entropy; a seed given is"
            " recorded in the report, and whoever holds it can undo the shuffle)"
        ),
    )
    p.add_argument(
        "--keep-order",
        action="store_true",
        help="write the rows in the input's order (unsafe: flagged in the report, warned)",
    )
    p.add_argument(
        "--drop", default=None, help="columns to leave out of the output, comma separated"
    )
    p.add_argument("--report", default=None, help="write the JSON report to this file")
    p.add_argument("--ordinal", default=None, help="key attributes that are ordinal")
    p.add_argument("--nominal", default=None, help="key attributes that are nominal")
    p.add_argument(
        "--release",
        choices=("centroids", "intervals"),
        default="centroids",
        help="centroids (default) or generalised [min, max] intervals",
    )
    p.add_argument(
        "--max-risk",
        default=None,
        help="MEASURE=BOUND,...: write nothing and fail when the release's risk exceeds a "
        "bound (measures: see locpriv assess --help)",
    )
    p.set_defaults(func=run)
