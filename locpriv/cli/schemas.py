"""``locpriv schemas``: write the wire messages' JSON Schemas and the protocol page's tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from locpriv.wire.schemas import DEFAULT_DIR, PROTOCOL_DOC, diff, export, render_protocol

__all__ = ["register"]


def _run(args: Any) -> int:
    directory: Path = args.out
    doc: Path = args.protocol
    current = doc.read_text(encoding="utf-8") if doc.exists() else None
    if args.check:
        problems = diff(directory)
        if current is not None and render_protocol(current) != current:
            problems.append(str(doc))
        if problems:
            print(f"schemas differ from the models: {', '.join(problems)}")
            return 1
        print(f"{directory}: up to date")
        return 0
    for path in export(directory):
        print(path)
    if current is not None:
        doc.write_text(render_protocol(current), encoding="utf-8")
        print(doc)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``locpriv schemas``."""
    p = subparsers.add_parser("schemas", help="export the wire messages' JSON Schemas")
    p.add_argument("--out", type=Path, default=DEFAULT_DIR, help="directory (docs/schemas)")
    p.add_argument(
        "--protocol",
        type=Path,
        default=PROTOCOL_DOC,
        help="protocol page whose field tables are regenerated (docs/protocol.md)",
    )
    p.add_argument("--check", action="store_true", help="only check that the files are current")
    p.set_defaults(func=_run)
