"""``locpriv anonymize``: k-anonymity / p-sensitive k-anonymity of a CSV or Parquet file.

Bad input raises a :class:`~locpriv.errors.LocprivError` with one line naming the column or
parameter; the top-level CLI prints ``locpriv anonymize: error: ...`` and exits 2. Output files
are written atomically, so a failed run leaves none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TextIO

from locpriv.errors import ConfigError
from locpriv.tabular.assess import assess_release, check_bounds, parse_bounds
from locpriv.tabular.assess_cli import parse_ks, run_nested
from locpriv.tabular.estimators import METHODS
from locpriv.tabular.frame import anonymize
from locpriv.tabular.io import (
    is_parquet,
    read_columns,
    read_table,
    write_release,
    write_table,
    write_text_atomic,
)
from locpriv.tabular.partitioned import BLOCK_SIZE, DEFAULT_FROM_N


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


def _columns(text: str | None, option: str) -> list[str]:
    if text is None:
        return []
    cols = [c.strip() for c in text.split(",")]
    if not all(cols):
        raise ConfigError(f"{option} has an empty column name: {text!r}")
    return cols


def run(args: argparse.Namespace) -> int:
    """Execute ``locpriv anonymize``; returns 0 (errors are raised)."""
    qi = _columns(args.qi, "--qi")
    sensitive = _columns(args.sensitive, "--sensitive")
    ordinal = _columns(args.ordinal, "--ordinal")
    nominal = _columns(args.nominal, "--nominal")
    ks = parse_ks(str(args.k))
    bounds = parse_bounds(args.max_risk) if args.max_risk else {}
    if len(ks) > 1:  # nested releases at several k (locpriv.tabular.history)
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
    try:
        bar.stage("read")
        df = read_columns(args.input, [*qi, *sensitive]) if stream else read_table(args.input)
        bar(1.0)
        bar.stage("groups")
        out, report = anonymize(
            df,
            qi,
            sensitive,
            args.k,
            args.p,
            args.method,
            args.seed,
            ordinal=ordinal,
            nominal=nominal,
            release=args.release,
            progress=bar,
            block_size=args.block_size,
            scheduler=args.scheduler,
            workers=args.workers or os.cpu_count() or 1,
        )
        # disclosure risk of what is written; above a --max-risk bound nothing is written
        report["risk"] = assess_release(df, out, qi, sensitive, ordinal=ordinal, nominal=nominal)
        if stream:
            report["risk"]["notes"].append(
                "Parquet streaming: columns other than the key and confidential ones were not "
                "read, their linkage is not measured (locpriv assess INPUT OUTPUT measures it)"
            )
        check_bounds(report["risk"]["measures"], bounds)
        bar.stage("write")
        if stream:
            write_release(args.input, args.output, out[qi])
        else:
            write_table(out, args.output)
        bar(1.0)
    finally:
        bar.close()
    report["seconds"] = time.perf_counter() - t0
    if args.report:
        write_text_atomic(json.dumps(report, indent=2, sort_keys=True) + "\n", args.report)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``anonymize`` command."""
    p = subparsers.add_parser(
        "anonymize",
        help="k-anonymity / p-sensitive k-anonymity of a CSV or Parquet table by microaggregation",
        description=(
            "Replace the key attributes of each record by its group's centroid so that every "
            "group has >= k records and >= p distinct values of each confidential attribute. "
            "Other columns pass through unchanged; row order is kept."
        ),
    )
    p.add_argument("input", help="input table (.csv or .parquet)")
    p.add_argument("output", help="output table (.csv or .parquet), written atomically")
    p.add_argument("--qi", required=True, help="key attributes, comma separated")
    p.add_argument("--sensitive", default=None, help="confidential attributes, comma separated")
    p.add_argument(
        "--k",
        required=True,
        help="minimum group size; several (10,5) write one release per k with nested groups",
    )
    p.add_argument("--p", type=int, default=1, help="distinct confidential values per group")
    p.add_argument(
        "--method",
        choices=METHODS,
        default=None,
        help=(
            f"algorithm (default: from {DEFAULT_FROM_N} records 'partitioned', below it run "
            "the candidates and keep the lowest information loss)"
        ),
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
            "local processes running the partitioned blocks (default 0: one per core; the"
            " release is the same whatever the number)"
        ),
    )
    p.add_argument(
        "--block-size",
        type=int,
        default=BLOCK_SIZE,
        help=f"records per block of the partitioned method (default {BLOCK_SIZE})",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (random-seed, best)")
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
